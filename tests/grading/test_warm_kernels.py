"""Warm grading kernels (grader/warm.py), graded by real nbgrader through `make grade`'s tool.

Three learners go through one nbgrader process, so through one warm process, in this order: the first leaves a
file in /tmp, shared memory and message queues (System V and POSIX) for the next and looks for the others' work;
an honest one; the last looks for what the first left.
Each kernel must see only its own submission and a fresh /tmp, and hold no capability; each is process 1 of its
own PID namespace (it was forked warm, and every process it starts ends with it). With GRADER_WARM_KERNELS=off
the same submission is graded by a kernel started cold, with the same score. The attacks of
test_grading_integrity.py run on warm kernels too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from grader.notebook import grade_id
from grader.registry import assignment as registered_assignment
from nbtools import ROOT

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "02-attention", "attention"
#: full marks, the prediction's point included
FULL = sum(ex.points for ex in registered_assignment(ASSIGNMENT).exercises)
MASK = "def causal_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()\n"
LEARNERS = ("a_sets_traps", "b_honest", "c_finds_traps")
#: what a kernel sees, by means the Python fence lets through (a stat of a classmate's folder, /tmp, /proc), so
#: that what stops it is the OS: its own mounts and namespaces
LOOK = (
    "import json, os\n"
    "_status = {l.split(':')[0]: l.split(':')[1].split() for l in open('/proc/self/status') if ':' in l}\n"
    "print('VIEW ' + json.dumps({'beside': sorted(os.listdir('..')), 'mine': os.path.basename(os.getcwd()),\n"
    "      'tmp': sorted(os.listdir('/tmp')), 'caps': _status['CapEff'][0], 'bounding': _status['CapBnd'][0],\n"
    "      'nspid': _status['NSpid'], 'uid_map': open('/proc/self/uid_map').read().split(),\n"
    "      'started': os.environ.get('GRADER_KERNEL_STARTED'),\n"
    "      'procs': sorted(p for p in os.listdir('/proc') if p.isdigit())}))\n"
)
SETS_TRAPS = "open('/tmp/trap.txt', 'w').write('left by a_sets_traps')\n" + LOOK + MASK
#: the C library, through a library torch ships: System V shared memory and a message queue, POSIX shared memory
#: and a message queue, each left behind by one kernel for the next (an added cell, after every test cell)
_LIBC = ("import ctypes, os, torch\n"
         "libc = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libc10.so'), use_errno=True)\n"
         "libc.shmat.restype = ctypes.c_void_p\n")
LEAVES_IPC = _LIBC + (
    "segment = libc.shmget(0x5EC7, 4096, 0o1666)\n"
    "ctypes.memmove(libc.shmat(segment, None, 0), b'left by a_sets_traps', 20)\n"
    "queue = libc.msgget(0x5EC8, 0o1666)\n"
    "fd = libc.shm_open(b'/course-leak', os.O_CREAT | os.O_RDWR, 0o666)\n"
    "libc.ftruncate(fd, 4096)\n"
    "mq = libc.mq_open(b'/course-leak', os.O_CREAT | os.O_RDWR, 0o666, None)\n"
    "print('LEFT', segment >= 0, queue >= 0, fd >= 0, mq >= 0, sorted(os.listdir('/dev/shm')))\n"
)
FINDS_IPC = _LIBC + (
    "found = {'sysv memory': libc.shmget(0x5EC7, 0, 0), 'sysv queue': libc.msgget(0x5EC8, 0),\n"
    "         'posix memory': libc.shm_open(b'/course-leak', os.O_RDONLY, 0),\n"
    "         'posix queue': libc.mq_open(b'/course-leak', os.O_RDONLY)}\n"
    "print('FOUND', sorted(k for k, v in found.items() if v >= 0), sorted(os.listdir('/dev/shm')),\n"
    "      os.read(0, 10))\n"
)


def _view(course: Path, student: str) -> dict:
    nb = nbformat.read(course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if grade_id(c) == "causal_mask"]
    text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    (line,) = [x for x in text.splitlines() if x.startswith("VIEW ")]
    return json.loads(line[5:])


def _grade(course: Path, **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **env)
    return subprocess.run([sys.executable, "-m", "classroom.grade", "--root", str(course), "--jobs", "1",
                           "--timeout", "30"], cwd=ROOT, capture_output=True, text=True, env=environ)


def _scores(course: Path) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s.student.id: s.score for s in gb.find_assignment(ASSIGNMENT).submissions}


def _class(course: Path, learners: dict[str, str | None], ends: dict[str, str] | None = None) -> None:
    """A class: each learner's causal_mask cell (None: the solution's) and, for some, a cell added at the end."""
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    solution = course / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
    for student, source in learners.items():
        nb = nbformat.read(solution, as_version=4)
        for cell in nb.cells:
            if source and grade_id(cell) == "causal_mask":
                cell.source = source
        if (ends or {}).get(student):
            nb.cells.append(nbformat.v4.new_code_cell(ends[student]))
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{NOTEBOOK}.ipynb")


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    course = tmp_path_factory.mktemp("warm")
    _class(course, {"a_sets_traps": SETS_TRAPS, "b_honest": None, "c_finds_traps": LOOK + MASK},
           ends={"a_sets_traps": LEAVES_IPC, "c_finds_traps": FINDS_IPC})
    return course, _grade(course)


def _last_output(course: Path, student: str) -> str:
    nb = nbformat.read(course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
    return "".join(o.get("text", "") or f"{o.get('ename')}: {o.get('evalue')}" for o in nb.cells[-1].outputs)


def test_every_kernel_sees_its_own_submission_alone_and_holds_no_capability(warm):
    """Forked warm, each kernel is process 1 of its own PID namespace, sees its own processes alone, no other
    submission's scratch folder beside its own, holds no capability and (grading as root) runs as a user of its
    own, which no account holds."""
    from grader.enclosure import KERNEL_UID_BASE

    course, res = warm
    assert _scores(course) == {"a_sets_traps": FULL, "b_honest": FULL, "c_finds_traps": FULL}, res.stdout + res.stderr
    for student in ("a_sets_traps", "c_finds_traps"):
        view = _view(course, student)
        assert view["beside"] == [view["mine"]], view
        assert int(view["caps"], 16) == 0 and int(view["bounding"], 16) == 0, view
        assert view["nspid"][-1] == "1" and view["started"] == "warm", f"not forked warm: {view}"
        assert view["procs"] == ["1"], f"the kernel sees processes not its own: {view}"
        if os.geteuid() == 0:
            assert view["uid_map"][:2] == ["0", view["uid_map"][1]] and int(view["uid_map"][1]) >= KERNEL_UID_BASE


def test_nothing_an_earlier_kernel_left_reaches_a_later_one(warm):
    """A file in /tmp, System V shared memory and a message queue, POSIX shared memory and a message queue: the
    first kernel made each of them; the last one, graded after it by the same warm process, finds none."""
    course, _ = warm
    first, last = _view(course, "a_sets_traps"), _view(course, "c_finds_traps")
    assert "trap.txt" in first["tmp"], first  # it did leave it, in the /tmp of its own
    assert "trap.txt" not in last["tmp"], last
    assert "LEFT True True True True ['course-leak']" in _last_output(course, "a_sets_traps"), \
        _last_output(course, "a_sets_traps")
    assert "FOUND [] [] b''" in _last_output(course, "c_finds_traps"), _last_output(course, "c_finds_traps")


def test_a_kernel_started_cold_grades_alike(tmp_path):
    _class(tmp_path, {"c_finds_traps": LOOK + MASK})
    res = _grade(tmp_path, GRADER_WARM_KERNELS="off")
    assert _scores(tmp_path) == {"c_finds_traps": FULL}, res.stdout + res.stderr
    view = _view(tmp_path, "c_finds_traps")
    assert view["started"] == "cold" and view["beside"] == [view["mine"]] and view["procs"] == ["1"], view


def test_the_nbgrader_processes_of_one_run_share_one_warm_process(tmp_path):
    """make grade's nbgrader processes (two learners at once here, then the third) fork their kernels from one
    warm process, which ends with the run, its folder removed."""
    from concurrent.futures import ThreadPoolExecutor

    from classroom.batch import autograde
    from classroom.gradebook import sync_gradebook
    from grader import warm as warm_module

    learners = {name: LOOK + MASK for name in LEARNERS}
    _class(tmp_path, learners)
    sync_gradebook(tmp_path, ASSIGNMENT)
    everyone = sorted(learners)
    with warm_module.shared_warm_processes() as folder:
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda s: autograde(tmp_path, ASSIGNMENT, s, 30, threads=1), everyone[:2]))
        results += [autograde(tmp_path, ASSIGNMENT, s, 30, threads=1) for s in everyone[2:]]
        pids = [int(p.read_text()) for p in Path(folder).glob("warm-*.pid")]
        assert len(pids) == 1 and warm_module._alive(pids[0]), [r.stderr[-2000:] for r in results]
    assert not Path(folder).exists() and not warm_module._alive(pids[0])
    assert _scores(tmp_path) == {s: FULL for s in everyone}, [r.stdout[-2000:] + r.stderr[-2000:] for r in results]
    for student in everyone:
        view = _view(tmp_path, student)
        assert view["started"] == "warm" and view["beside"] == [view["mine"]], view


def test_one_nbgrader_process_grades_request_after_request_and_one_that_dies_is_replaced(tmp_path):
    """make grade's long-lived nbgrader processes (grader/nbgrader_processes.py): one process grades one learner
    after another, as the command would; killed between two requests or during one, it fails that one alone,
    and the next request gets a fresh process. Closed, nothing of them is left."""
    import signal
    import threading

    from classroom.batch import autograde_arguments, grading_environment
    from classroom.gradebook import sync_gradebook
    from grader import warm as warm_module
    from grader.nbgrader_processes import NbgraderProcesses

    everyone = list(LEARNERS)
    _class(tmp_path, {name: LOOK + MASK for name in everyone})
    sync_gradebook(tmp_path, ASSIGNMENT)
    threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    argv = lambda student: autograde_arguments(tmp_path, ASSIGNMENT, student, 30)  # noqa: E731
    with warm_module.shared_warm_processes():
        processes = NbgraderProcesses(tmp_path, 1, grading_environment())
        (process,) = processes._all
        try:
            first = processes.run(argv(everyone[0]), threads)
            pid = process._proc.pid
            second = processes.run(argv(everyone[1]), threads)
            assert first.returncode == second.returncode == 0, first.stdout[-3000:] + second.stdout[-3000:]
            assert process._proc.pid == pid, "a second nbgrader process was started"
            assert f"ID '{everyone[1]}'" in second.stdout and f"'{everyone[0]}'" not in second.stdout
            os.kill(pid, signal.SIGKILL)  # between two requests
            process._proc.wait()
            third = processes.run(argv(everyone[2]), threads)
            assert third.returncode == 0 and process._proc.pid != pid, third.stdout[-3000:]
            log, offset = process._log, process._log.stat().st_size
            # during one: killed once it has started grading, that request fails, named, and the next is graded
            killer = threading.Thread(target=lambda: (_wait_for(log, offset, "Autograding"), process._proc.kill()))
            killer.start()
            died = processes.run(argv(everyone[0]), threads)
            killer.join()
            assert died.returncode != 0 and "the nbgrader process grading this submission died" in died.stderr, died
            again = processes.run(argv(everyone[0]), threads)
            assert again.returncode == 0, again.stdout[-3000:]
            last, last_log = process._proc.pid, process._log
        finally:
            processes.close()
    assert not warm_module._alive(last) and not last_log.exists() and not log.exists()
    assert _scores(tmp_path) == {s: FULL for s in everyone}


def _wait_for(log: Path, offset: int, text: str, timeout: float = 60) -> None:
    """Until ``text`` is in ``log`` past ``offset`` (or ``timeout`` seconds)."""
    import time

    start = time.monotonic()
    while time.monotonic() - start < timeout:
        with log.open("rb") as f:
            f.seek(offset)
            if text.encode() in f.read():
                return
        time.sleep(0.05)


def test_a_long_temporary_folder_does_not_break_the_kernels_sockets(tmp_path):
    """A warm kernel's sockets live under the warm processes' folder; with a TMPDIR too long for a Unix socket
    under it (108 bytes), that folder goes in /tmp instead, and grading works as usual."""
    from grader import warm as warm_module

    long = tmp_path / ("a-temporary-folder-with-a-long-name-" * 2)
    long.mkdir()
    course = tmp_path / "course"
    course.mkdir()
    _class(course, {"b_honest": None})
    res = _grade(course, TMPDIR=str(long))
    assert _scores(course) == {"b_honest": FULL}, res.stdout[-3000:] + res.stderr[-3000:]
    assert len(str(long)) > warm_module.SOCKET_BASE_MAX and not list(long.iterdir())  # nothing left behind
