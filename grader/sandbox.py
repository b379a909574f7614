"""The fence around a learner's notebook while ``make grade`` autogrades it.

nbgrader runs every submission in a kernel of its own. :func:`install` runs in
that kernel before the learner's first cell (the autograder passes it as the
kernel's startup code, see :mod:`grader.autograde`) and sets up
what the learner's code cannot undo:

* a memory limit (``RLIMIT_AS``, soft and hard, so it cannot be raised again):
  a cell that asks for too much gets a ``MemoryError`` / allocation error, not
  the grading machine's swap;
* an audit hook (:pep:`578`; Python offers no way to remove one) that refuses

  - writing anywhere but the submission's own folder and the temporary folder,
  - reading the instructor's files: the course folder is closed except the
    submission itself, the virtual environment, the grader's kernel side and
    the public ``exercises/`` and ``chapters/`` (so ``solutions/``, the
    reference ``course_lib``, the grader's assignments, the gradebook and the
    other students' work stay out of reach),
  - starting processes, sending signals (but SIGINT to itself, how the
    kernel answers an interrupt request), raising resource limits, and
    loading native libraries from outside the Python installation (``ctypes``);

* a snapshot of the functions the checks rely on (``torch.allclose``,
  ``numpy.allclose``, builtins, the grader's kernel-side modules, ...), taken by the grader's one tamper detector (:mod:`grader.guards`). Each test
  cell starts with :data:`PROLOGUE`, which asks the hook, through
  ``sys.audit``, to compare them with the snapshot: a test cell that runs after
  the learner replaced one of them fails and says which.

The hook answers the prologue by filling the list it is handed; a learner who
replaces ``sys.audit`` leaves it empty and the test cell fails as well.
"""

from __future__ import annotations

import glob
import importlib
import os
import sys

from .guards import first_change, take_snapshot

VERIFY_EVENT = "grader.verify"
VERIFIED = "verified by the grading sandbox"

#: the line put in front of every test cell of an autograded notebook
PROLOGUE = (
    "import sys as _grading_sys; _grading_box = []; _grading_sys.audit("
    f"{VERIFY_EVENT!r}, _grading_box); assert _grading_box == [{VERIFIED!r}], "
    "'the grading checks were tampered with (sys.audit replaced): this test cell scores zero'"
    "  # grading integrity check\n"
)

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_PATH_WRITE_EVENTS = {  # event -> positions of the path arguments it writes
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.link": (0, 1),
    "os.symlink": (0, 1), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
    "shutil.copyfile": (1,), "shutil.copymode": (1,), "shutil.copystat": (1,), "shutil.copytree": (1,),
    "shutil.move": (0, 1), "shutil.rmtree": (0,), "shutil.chown": (0,), "os.chflags": (0,), "os.lchflags": (0,),
}
_PATH_READ_EVENTS = {"os.listdir": (0,), "os.scandir": (0,), "glob.glob": (0,), "os.walk": (0,)}
_REFUSED_EVENTS = {
    "subprocess.Popen": "starting a process", "os.system": "starting a process", "os.exec": "starting a process",
    "os.posix_spawn": "starting a process", "os.spawn": "starting a process", "os.fork": "starting a process",
    "os.forkpty": "starting a process", "pty.spawn": "starting a process", "os.startfile": "starting a process",
    "os.kill": "sending a signal", "os.killpg": "sending a signal", "signal.pthread_kill": "sending a signal",
    "resource.setrlimit": "changing resource limits", "resource.prlimit": "changing resource limits",
    "os.putenv": None, "os.unsetenv": None,  # allowed: harmless inside the kernel
}


#: the grader's modules the kernel loads: the runner and what it needs (never the assignments, never course_lib)
KERNEL_MODULES = ("grader.failures", "grader.cases", "grader.compare", "grader.guards", "grader.diagnosis",
                  "grader.judge", "grader.checker", "grader.runner")


def _import_checked_packages() -> None:
    """The modules the kernel's side of grading runs (:mod:`grader.runner`), loaded before the fence closes."""
    for name in KERNEL_MODULES:
        importlib.import_module(name)


def _interrupts_itself(event: str, args: tuple) -> bool:
    """SIGINT to the kernel's own process (or its own process group): ipykernel's answer to an interrupt request."""
    import signal

    if len(args) < 2 or args[1] != signal.SIGINT:
        return False
    own = os.getpid() if event == "os.kill" else os.getpgid(0)
    return args[0] == own


def _real(path) -> str | None:
    if isinstance(path, int) or path is None:
        return None
    try:
        return os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return None


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def install(*, workdir: str, private_roots: list[str], public_roots: list[str], memory_mb: int | None = 4096,
            closed_roots: list[str] = (), exchange: str | None = None) -> None:
    """Fence this process in; runs once, first thing in the grading kernel.

    Args:
        workdir: the submission's folder (read and write).
        private_roots: folders closed to the learner (the course folder, the
            checkout course_lib is installed from), except ``public_roots``.
        public_roots: folders inside them that stay readable (the virtual
            environment, exercises/, chapters/, the grader's kernel side).
        memory_mb: address-space limit of the kernel, or None for none.
        closed_roots: folders closed even inside a public one: the reference
            (course_lib) and the grader's assignments (cases and mistakes).
        exchange: the folder of the judge's requests and the kernel's replies (read and write).
    """
    import tempfile

    import numpy  # noqa: F401 - in the snapshot
    import torch  # noqa: F401 - loaded (with its native libraries) before the fence closes
    import torch.nn.functional  # noqa: F401
    import torch.testing  # noqa: F401

    sys.dont_write_bytecode = True
    os.environ.setdefault("MPLCONFIGDIR", tempfile.mkdtemp(prefix="mpl-"))
    _import_checked_packages()
    import matplotlib  # noqa: F401 - its font cache is built now, in the temporary folder

    workdir = os.path.realpath(workdir)
    temp = os.path.realpath(tempfile.gettempdir())
    private = [os.path.realpath(p) for p in private_roots]
    shared = [workdir] + ([os.path.realpath(exchange)] if exchange else [])
    readable = shared + [os.path.realpath(p) for p in public_roots]
    closed = [os.path.realpath(p) for p in closed_roots]
    native_ok = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    snapshot = take_snapshot(between_cells=True)

    if memory_mb:
        import resource

        limit = int(memory_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def refuse(what: str):
        raise PermissionError(f"grading sandbox: {what} is not allowed while a submission is graded")

    def check_read(path):
        real = _real(path)
        if real and ((_under(real, private) and not _under(real, readable)) or _under(real, closed)):
            refuse(f"reading {real} (the instructor's files)")

    def check_write(path):
        real = _real(path)
        if not real or _under(real, shared + ["/dev/null"]):
            return
        if _under(real, [temp]) and not _under(real, private):  # a course kept under /tmp stays closed
            return
        refuse(f"writing {real} (outside the submission's folder)")

    def hook(event: str, args: tuple) -> None:
        if event == VERIFY_EVENT:
            changed = first_change(snapshot)
            if changed:
                raise RuntimeError(f"the submission replaced {changed}, which the grading checks rely on: "
                                   "this test cell scores zero")
            if args and isinstance(args[0], list):
                args[0].append(VERIFIED)
            return
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            check_write(path) if writing else check_read(path)
            if writing:
                check_read(path)
        elif event in _PATH_WRITE_EVENTS:
            for i in _PATH_WRITE_EVENTS[event]:
                if i < len(args):
                    check_write(args[i])
        elif event in _PATH_READ_EVENTS:
            for i in _PATH_READ_EVENTS[event]:
                if i < len(args):
                    check_read(args[i] if args[i] is not None else ".")
        elif event in ("os.kill", "os.killpg") and _interrupts_itself(event, args):
            return  # how the kernel interrupts itself when asked (a cell past its time limit): allowed
        elif event in _REFUSED_EVENTS and _REFUSED_EVENTS[event]:
            refuse(_REFUSED_EVENTS[event])
        elif event == "ctypes.dlopen":
            real = _real(args[0]) if args else None
            if not real or not os.path.isabs(os.fsdecode(args[0])) or not _under(real, native_ok):
                refuse(f"loading the native library {args[0]!r}")

    sys.addaudithook(hook)


def install_from_env(variable: str = "COURSE_GRADING_SANDBOX") -> None:
    """:func:`install` with the settings the autograder left in the environment (JSON)."""
    import json

    settings = os.environ.get(variable)
    if not settings:
        raise RuntimeError(f"the grading sandbox has no settings: the environment variable {variable} is not set")
    install(**json.loads(settings))
