"""Fixtures shared by the test modules, and how the suite shares out the cores.

`make test` runs the suite on every core with pytest-xdist (``-n``); :func:`pytest_xdist_make_scheduler`
decides what goes to which worker:

* a chapter notebook's cells run in order in one kernel, so each notebook is one work unit, sent
  whole to one worker;
* a test module whose fixtures start something costly (a server, a kernel, a course directory)
  is one unit too, so the fixture starts once, not once per worker;
* the tests of the modules in :data:`SPREAD` (many independent tests, no costly module fixture)
  go one by one to whichever worker is free;
* the longest units (:data:`LONGEST_FIRST`) are handed out first, so that no worker is left with
  a long one at the end while the other idles;
* the HTML book is built once per run by `make book`, whichever worker first asks for it (:func:`built`);
* each chapter notebook runs once, under nbval, strict, on the machine's own CPU kernels against
  outputs written on torch's portable ones (``chapters/conftest.py``): one run proves both that the
  stored outputs are what the code prints and that they do not depend on one set of kernels' rounding;
* every kernel a worker starts outside the grading fence (nbval's, the judge's, the tools') is forked
  from one warm process per worker (:func:`_forked_kernels`), which imported torch and ipykernel once.

Each worker's torch gets its share of the cores, and so does every process a worker starts (a kernel,
nbgrader, a tool): two workers do not fight over the cores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from filelock import FileLock

from grader.nbgrader_processes import THREAD_VARIABLES  # OpenMP's and MKL's thread counts, as make grade sets them
from nbtools import ROOT, kernel_tripwire, make_book_environment
from tools import forked_kernels

# Notebooks executed by the suite (nbval, the book build) store stable outputs:
# progress bars are off there (course_lib.training.progress).
os.environ.setdefault("COURSE_STATIC_OUTPUT", "1")
# Every process the suite starts (kernels, nbgrader, browsers) shares
# the cores with the other workers: OpenMP threads that wait for work sleep instead of spinning. On a
# busy 2-core machine a spinning 2-thread torch ran a tiny training loop 25 times slower (88 s against
# 3.4 s); the threads' count and how they split the work, hence every result, stay the same.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: modules whose tests are independent and hold no costly module fixture: spread test by test
SPREAD = {
    "test_catalogues.py", "test_portability.py", "test_solutions_nbval.py", "test_reference_stability.py",
    "test_judge.py", "test_static.py", "test_zoo.py", "test_book_browser.py", "test_practice.py",
}
#: the units that take longest (minutes of CPU each, by `make test`'s slowest tests), handed out first in
#: this order; an entry matches the units (test ids, or module and notebook paths) that start with it
LONGEST_FIRST = (
    "tests/hub/", "tests/grading/test_grading_integrity.py", "tests/grading/test_cluster.py",
    "chapters/09-vision-transformer/inside-a-vit.ipynb",
    "tests/grading/test_gradebook_postgres.py", "tests/grading/test_nbgrader_roundtrip.py",
    "tests/grading/test_judge.py", "chapters/09-vision-transformer/data-and-inductive-bias.ipynb",
    "chapters/10-dinov2/frozen-features.ipynb", "tests/reference/test_zoo.py::test_the_first_updates",
    "chapters/07-modern-variants/pre-ln-and-rmsnorm.ipynb", "tests/grading/test_solutions_nbval.py",
    "chapters/06-encoder-decoder/the-2017-transformer.ipynb", "tests/lab/", "tests/grading/test_mutants.py",
)


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its own id in a :data:`SPREAD` module, else its file."""
    path = nodeid.split("::", 1)[0]
    return nodeid if Path(path).name in SPREAD else path


def longest_first(units: list[str]) -> list[str]:
    """``units`` in the order they are handed out: :data:`LONGEST_FIRST`'s, then the collection's."""
    def rank(unit: str) -> int:
        return next((i for i, start in enumerate(LONGEST_FIRST) if unit.startswith(start)), len(LONGEST_FIRST))
    return sorted(units, key=rank)  # a stable sort: the rest keep the order they were collected in


def pytest_xdist_make_scheduler(config, log):
    """Share the work out by :func:`work_unit`, the longest units first (xdist asks on the controller).

    pytest-xdist's own ``--dist loadgroup`` marks a group by rewriting ``item._nodeid``, which pytest 9
    no longer reads: its groups silently fell apart and a notebook's cells went to two workers. The
    units here are named from the test ids alone.
    """
    from xdist.scheduler import LoadScopeScheduling

    class CourseScheduling(LoadScopeScheduling):
        ordered = False  # whether the work queue, filled by schedule(), is in longest_first order yet

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:
                self.workqueue = type(self.workqueue)(
                    (unit, self.workqueue[unit]) for unit in longest_first(list(self.workqueue)))
                self.ordered = True
            super()._assign_work_unit(node)

    return CourseScheduling(config, log)


def pytest_configure(config):
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:  # a worker: its share of the cores, for torch here and for every process it starts
        share = max(1, (os.cpu_count() or 1) // int(workers))
        torch.set_num_threads(share)
        for name in THREAD_VARIABLES:
            # kernels, nbgrader and the tools otherwise start one OpenMP thread per core: with more workers
            # than cores, a thread that finishes a parallel region first spins waiting for one that is not
            # running (measured: the judge's and the solutions' kernels took 25% less CPU on 1 thread)
            os.environ[name] = str(share)
    distributing = not hasattr(config, "workerinput") and config.getoption("numprocesses", None)
    if distributing and "COURSE_TEST_TMPDIR" not in os.environ:
        _one_temporary_folder(config)
    if not distributing and os.environ.get(forked_kernels.SOCKET_VARIABLE) != "off":
        _forked_kernels(config)


def _forked_kernels(config) -> None:
    """The kernels this process starts, forked from a warm process (:mod:`tools.forked_kernels`).

    A kernel's start is mostly importing torch and ipykernel (1.5-3.5 s of CPU on 2 cores; the suite starts
    some 60 kernels outside the grading fence). The ``python3`` kernelspec this process and its children
    find first (``JUPYTER_PATH``) starts the launcher, which has the warm process fork the kernel; a
    kernel whose environment differs from the warm process's (``make portability``'s CPU kernels, thread
    counts) or that is a grading kernel starts afresh, as before. ``COURSE_FORKED_KERNELS=off`` runs the
    suite on fresh kernels only. The warm process starts after the worker's environment is final (its
    thread counts, above) and stops, with any kernel left, when the worker does.
    """
    folder = tempfile.mkdtemp(prefix="forked-kernels-")
    forked_kernels.write_kernelspec(folder)
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (folder, os.environ.get("JUPYTER_PATH")) if p)
    os.environ[forked_kernels.SOCKET_VARIABLE] = socket = os.path.join(folder, "socket")
    warm = subprocess.Popen([sys.executable, forked_kernels.__file__, "serve", socket], cwd=ROOT,
                            stdin=subprocess.DEVNULL)

    def stop() -> None:
        warm.terminate()
        try:
            warm.wait(30)
        except subprocess.TimeoutExpired:
            warm.kill()
            warm.wait()
        shutil.rmtree(folder, ignore_errors=True)

    config.add_cleanup(stop)


def _one_temporary_folder(config) -> None:
    """Every temporary file of the run in one folder, removed when the run ends (by xdist's controller, once
    its workers have exited: a process's own temporary folders, multiprocessing's among them, are removed
    as it exits).

    The processes the suite starts (workers, kernels, nbgrader, Chromium, PostgreSQL) inherit
    ``TMPDIR`` and leave their scratch folders there; the machine's /tmp is as it was. The folder is
    open to every user, like /tmp, for the servers that run as their own users.
    """
    folder = tempfile.mkdtemp(prefix="course-test-")
    os.chmod(folder, 0o1777)
    os.environ["TMPDIR"] = os.environ["COURSE_TEST_TMPDIR"] = folder
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


@pytest.fixture
def one_thread():
    """Tiny models run faster on one thread than when two threads fight over a shared 2-core CPU."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _book(tmp_path_factory) -> tuple[Path, Path]:
    """The HTML book and the log of kernels its build started, built once per test run (:func:`built`)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above every worker's own
    out, failure, kernels = shared / "book", shared / "book-failed.txt", shared / "book-kernels.log"
    with FileLock(str(shared / "book.lock")):
        if not out.exists() and not failure.exists():
            out.mkdir()
            kernels.touch()
            tripwire = kernel_tripwire(shared / "book-tripwire", kernels)
            # `make book` itself, into the run's folder; -o: the set-up is make test's, never redone here
            res = subprocess.run(["make", "--no-print-directory", "-o", ".venv/.installed", "book", f"BOOK_OUT={out}"],
                                 cwd=ROOT, env=make_book_environment(tripwire), capture_output=True, text=True)
            if res.returncode != 0:
                started = kernels.read_text(encoding="utf-8").split()
                failure.write_text((f"it started {len(started)} kernel(s): {started}\n" if started else "")
                                   + f"{res.stdout[-4000:]}\n{res.stderr[-4000:]}", encoding="utf-8")
    if failure.exists():
        pytest.fail("`make book` does not build with warnings as errors:\n" + failure.read_text(encoding="utf-8"))
    return out / "_build" / "html", kernels


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """The HTML book as `make book` builds it (warnings as errors, the stored outputs, no kernel), once per run.

    Under xdist the first worker to ask builds it and the others wait for that build, reading
    its outcome from the shared temporary folder. Every kernel the build could start is a tripwire
    (:func:`kernel_tripwire`): :func:`book_kernel_starts` is what it recorded. COURSE_BOOK_HTML=path/to/_build/html
    reuses a build made beforehand (to iterate on the tests that read the book); the suite itself always
    builds afresh.
    """
    if os.environ.get("COURSE_BOOK_HTML"):
        return Path(os.environ["COURSE_BOOK_HTML"])
    return _book(tmp_path_factory)[0]


@pytest.fixture(scope="session")
def book_kernel_starts(built, tmp_path_factory) -> list[str]:
    """The kernels `make book` started for :func:`built`, by name (the tripwire's log)."""
    if os.environ.get("COURSE_BOOK_HTML"):
        pytest.skip("COURSE_BOOK_HTML names a build made elsewhere; the suite's own build records its kernels")
    return _book(tmp_path_factory)[1].read_text(encoding="utf-8").split()
