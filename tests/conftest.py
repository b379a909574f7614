"""Fixtures shared by the test modules, and how the suite shares out the cores.

`make test` runs the suite on every core with pytest-xdist (``-n``, ``--dist loadgroup``):

* a chapter notebook's cells run in order in one kernel, so each notebook is one group, sent whole
  to one worker;
* a test module whose fixtures start something costly (a server, a kernel, a course directory)
  is one group too, so the fixture starts once, not once per worker;
* the tests of the modules in :data:`SPREAD` (many independent tests, no costly module fixture)
  go one by one to whichever worker is free;
* the HTML book is built once per run, whichever worker first asks for it (:func:`built`).

Each worker's torch gets its share of the cores, so two workers do not fight over them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from filelock import FileLock

from nbtools import ROOT

# Notebooks executed by the suite (nbval, the book build) store stable outputs:
# progress bars are off there (course_lib.training.progress).
os.environ.setdefault("COURSE_STATIC_OUTPUT", "1")
# Every process the suite starts (kernels, nbgrader, the portable-kernel runs with two threads) shares
# the cores with the other workers: OpenMP threads that wait for work sleep instead of spinning. On a
# busy 2-core machine a spinning 2-thread torch ran a tiny training loop 25 times slower (88 s against
# 3.4 s); the threads' count and how they split the work, hence every result, stay the same.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: modules whose tests are independent and hold no costly module fixture: spread test by test
SPREAD = {
    "test_catalogues.py", "test_portability.py", "test_solutions_nbval.py", "test_reference_stability.py",
    "test_judge.py", "test_static.py", "test_zoo.py", "test_exercises_sync.py", "test_book_browser.py",
}


def pytest_configure(config):
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:  # a worker: its share of the cores for torch in this process
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the node ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath))
        if type(item).__name__ == "IPyNbCell":  # nbval: one notebook, one kernel, cells in order
            item.add_marker(pytest.mark.xdist_group(str(path.relative_to(ROOT))))
        elif path.name not in SPREAD:
            item.add_marker(pytest.mark.xdist_group(str(path.relative_to(ROOT))))


@pytest.fixture
def one_thread():
    """Tiny models run faster on one thread than when two threads fight over a shared 2-core CPU."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def book_config(out: Path) -> Path:
    """The book's ``_config.yml`` as the suite builds it: the stored outputs, not a third execution.

    Every chapter notebook is executed by the suite's nbval run (this machine's kernels, one
    thread), which proves its stored outputs are what the code prints, and again under the portable
    kernels with two threads (tests/book/test_portability.py); ``tools.notebooks`` proves the
    outputs were stored from today's code. The build then reads those outputs, as `make book`
    does on a warm cache. Local extensions are named by absolute path, since the file is not in
    the repository.
    """
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["execute"]["execute_notebooks"] = "off"
    local = config["sphinx"]["local_extensions"]
    config["sphinx"]["local_extensions"] = {name: str((ROOT / where).resolve()) for name, where in local.items()}
    path = out / "_config.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """The HTML book, built once per test run with warnings as errors (as `make book` does).

    Under xdist the first worker to ask builds it and the others wait for that build, reading
    its outcome from the shared temporary folder. COURSE_BOOK_HTML=path/to/_build/html reuses a
    build made beforehand (to iterate on the tests that read the book); the suite itself always
    builds afresh.
    """
    if os.environ.get("COURSE_BOOK_HTML"):
        return Path(os.environ["COURSE_BOOK_HTML"])
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above every worker's own
    out, failure = shared / "book", shared / "book-failed.txt"
    with FileLock(str(shared / "book.lock")):
        if not out.exists() and not failure.exists():
            out.mkdir()
            exe = Path(sys.executable).with_name("jupyter-book")
            res = subprocess.run(
                [str(exe), "build", str(ROOT), "--builder", "html", "-W", "-n", "--keep-going",
                 "--config", str(book_config(out)), "--path-output", str(out)],
                capture_output=True, text=True,
            )
            if res.returncode != 0:
                failure.write_text(f"{res.stdout[-4000:]}\n{res.stderr[-4000:]}", encoding="utf-8")
    if failure.exists():
        pytest.fail("the book does not build with warnings as errors:\n" + failure.read_text(encoding="utf-8"))
    return out / "_build" / "html"
