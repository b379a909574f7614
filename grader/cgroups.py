"""Control groups for grading kernels: one per kernel, so that a kernel's memory, tasks and CPU are its own.

A grading run makes one **run group** (:func:`make_run_group`) in each
controller it can use, below the cgroup the grading process itself is in; the
warm process makes a **kernel group** in it for each kernel it starts
(:func:`make_kernel_group`), which the kernel joins before any learner code
runs, and removes it when the kernel has ended. What a group bounds:

* ``memory``: everything the kernel's processes use, their files in a
  ``tmpfs`` (``/tmp``, ``/dev/shm``) included; over it, the kernel is killed
  and the grader says so;
* ``pids``: the kernel's processes and threads together;
* ``cpu``: an equal share of the cores among the kernels running at once (a
  kernel's thousand threads weigh as much as another's one), and at most
  ``cpus`` cores.

Both cgroup versions are read: version 1 (one hierarchy per controller, as on
these machines: ``/sys/fs/cgroup/memory``, ``/pids``, ``/cpu``) and version 2
(one hierarchy, where the controllers must be enabled in the parent's
``cgroup.subtree_control``). Groups are made as root, or as another user below
a group delegated to that user (its folder theirs to write: the course's hub
delegates the instructor's). Where no controller can be used (no cgroup file
system, or nothing delegated), :func:`make_run_group` returns None; the
kernel's process limits (:mod:`grader.enclosure`) would stand alone, which do
not count a kernel's memfd or shared memory, so grading refuses unless the
instructor asks for that mode by name (``GRADER_ISOLATION=process-limits``,
:data:`grader.sandbox.ISOLATIONS`); the grader says which limits hold
(:func:`describe`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass, field

#: the controllers a kernel group uses
CONTROLLERS = ("memory", "pids", "cpu")
#: the period of the CPU bandwidth limit, in microseconds (cgroup's default)
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class Hierarchy:
    """One place groups are made: a controller's (v1) or the unified hierarchy's (v2) folder for this process."""

    version: int
    controllers: tuple[str, ...]
    base: str  # the folder of the cgroup this process is in, in that hierarchy

    def path(self, *names: str) -> str:
        return os.path.join(self.base, *names)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, options) of every cgroup mount."""
    found = []
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                    found.append((parts[1].replace("\\040", " "), parts[2], set(parts[3].split(","))))
    except OSError:
        pass
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup per hierarchy: ``{"memory": "/a/b", ..., "": "/c"}`` (``""``: the unified one)."""
    paths = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, names, path = line.rstrip("\n").split(":", 2)
                for name in (names.split(",") if names else [""]):
                    paths[name] = path
    except OSError:
        pass
    return paths


def hierarchies() -> list[Hierarchy]:
    """The hierarchies where this process may make groups for :data:`CONTROLLERS`: as root, below its own group; as
    another user, where its own group was delegated to it (its folder is the user's to write, as systemd gives a
    user's unit, or the course's hub gives its instructor)."""
    own = _own_paths()
    found: list[Hierarchy] = []
    covered: set[str] = set()
    for point, kind, options in _mounts():
        if kind == "cgroup":
            mine = tuple(c for c in CONTROLLERS if c in options and c not in covered)
            if mine and mine[0] in own:
                base = point + own[mine[0]]
                if os.access(base, os.W_OK):
                    found.append(Hierarchy(1, mine, base))
                    covered.update(mine)
    for point, kind, _options in _mounts():
        if kind != "cgroup2" or "" not in own:
            continue
        base = point + own[""]
        try:
            with open(os.path.join(base, "cgroup.subtree_control")) as f:
                enabled = set(f.read().split())
        except OSError:
            continue
        mine = tuple(c for c in CONTROLLERS if c in enabled and c not in covered)
        if mine and os.access(base, os.W_OK):
            found.append(Hierarchy(2, mine, base))
            covered.update(mine)
    return found


@dataclass
class RunGroup:
    """The groups of one grading run: a folder per hierarchy, each kernel's group inside."""

    name: str
    places: list[Hierarchy] = field(default_factory=list)

    @property
    def controllers(self) -> list[str]:
        return sorted({c for h in self.places for c in h.controllers})

    def folders(self) -> list[str]:
        return [h.path(self.name) for h in self.places]

    def as_plan(self) -> dict:
        return {"name": self.name, "places": [[h.version, list(h.controllers), h.base] for h in self.places]}

    @classmethod
    def from_plan(cls, plan: dict | None) -> "RunGroup | None":
        if not plan:
            return None
        return cls(plan["name"], [Hierarchy(v, tuple(c), b) for v, c, b in plan["places"]])


def memory_isolation() -> bool:
    """Whether each kernel can have a memory group of its own here (its memfd and shared memory counted)."""
    return any("memory" in h.controllers for h in hierarchies())


def join_delegated(procs_files: list[str]) -> list[str]:
    """This process into the control groups ``procs_files`` name (their ``cgroup.procs``), where it may write them
    (a group delegated to this user); the files it could not join, with why."""
    refused = []
    for path in procs_files:
        try:
            join([path])
        except OSError as exc:
            refused.append(f"{path} ({exc.strerror})")
    return refused


def make_run_group() -> RunGroup | None:
    """A run group in every hierarchy this process can use; None when there is none."""
    places = hierarchies()
    if not places:
        return None
    group = RunGroup(f"course-grading-{uuid.uuid4().hex[:12]}")
    made = []
    for h in places:
        try:
            os.mkdir(h.path(group.name), 0o755)
            if h.version == 2:
                _write(h.path(group.name, "cgroup.subtree_control"), " ".join(f"+{c}" for c in h.controllers))
            made.append(h)
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(h.path(group.name))
    group.places = made
    return group if made else None


@dataclass(frozen=True)
class Limits:
    """What a kernel group bounds (0 or None: that bound is off)."""

    memory_mb: int | None
    tasks: int | None
    cpus: float | None


def make_kernel_group(run: RunGroup, name: str, limits: Limits) -> list[str]:
    """A kernel's group in each of the run's hierarchies, with ``limits``; the files the kernel writes itself into
    (``cgroup.procs``), one per hierarchy. Raises OSError if a group cannot be made."""
    procs = []
    for h in run.places:
        folder = h.path(run.name, name)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o755)
        for controller in h.controllers:
            for file, value in _settings(h.version, controller, limits):
                _write(os.path.join(folder, file), value)
        procs.append(os.path.join(folder, "cgroup.procs"))
    return procs


def _settings(version: int, controller: str, limits: Limits) -> list[tuple[str, str]]:
    if controller == "memory" and limits.memory_mb:
        size = str(int(limits.memory_mb) * 1024 * 1024)
        return [("memory.limit_in_bytes", size)] if version == 1 else [("memory.max", size), ("memory.swap.max", "0")]
    if controller == "pids" and limits.tasks:
        return [("pids.max", str(int(limits.tasks)))]
    if controller == "cpu" and limits.cpus:
        quota = str(max(1000, int(limits.cpus * CPU_PERIOD_US)))
        if version == 1:
            return [("cpu.cfs_period_us", str(CPU_PERIOD_US)), ("cpu.cfs_quota_us", quota)]
        return [("cpu.max", f"{quota} {CPU_PERIOD_US}")]
    return []


def _write(path: str, value: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError as exc:
        if os.path.basename(path) == "memory.swap.max" and exc.errno in (2, 13):  # no swap accounting: nothing to cap
            return
        raise


def join(procs: list[str]) -> None:
    """The calling process into the kernel's groups (its children follow)."""
    for path in procs:
        _write(path, "0")


def went_over(run: RunGroup, name: str) -> list[str]:
    """Which of a kernel group's bounds were reached: ``"memory"`` (the kernel was killed for it), ``"pids"``."""
    reached = []
    for h in run.places:
        folder = h.path(run.name, name)
        if "memory" in h.controllers and _memory_killed(h.version, folder):
            reached.append("memory")
        if "pids" in h.controllers and _counter(os.path.join(folder, "pids.events"), "max") > 0:
            reached.append("pids")
    return reached


def _memory_killed(version: int, folder: str) -> bool:
    """Whether the kernel group's memory bound killed a process in it (the OOM killer's own count)."""
    events = "memory.events" if version == 2 else "memory.oom_control"
    return _counter(os.path.join(folder, events), "oom_kill") > 0


def _counter(path: str, key: str) -> int:
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[0] == key:
                    return int(parts[1])
    except (OSError, ValueError):
        pass
    return 0


def _tasks(folder: str) -> list[int]:
    try:
        with open(os.path.join(folder, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def remove_folder(folder: str, wait: float = 5.0) -> bool:
    """Remove a group's folder (its own groups first), killing what still runs in it; True once gone."""
    if not os.path.isdir(folder):
        return True
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                remove_folder(entry.path, wait)
    deadline = time.monotonic() + wait
    while True:
        for pid in _tasks(folder):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.rmdir(folder)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def remove_kernel_group(run: RunGroup, name: str) -> None:
    for h in run.places:
        remove_folder(h.path(run.name, name))


def remove_run_group(run: RunGroup | None) -> None:
    """The run's groups, every kernel's inside, gone (what still runs in them is killed)."""
    if run is None:
        return
    for folder in run.folders():
        remove_folder(folder)


def describe(run: RunGroup | None) -> str:
    if run is None:
        return "no control groups (not root, or none the machine lets this process use)"
    return f"control groups v{'/'.join(sorted({str(h.version) for h in run.places}))}: {', '.join(run.controllers)}"
