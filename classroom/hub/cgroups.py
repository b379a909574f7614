"""The hub's control groups: every learner's server and kernels within the limits the instructor sets, and every
process the hub started found again, whatever became of the hub.

The Littlest JupyterHub runs each server as a systemd unit with a memory and CPU limit. Where PID 1 is not
systemd, this module makes the same out of the machine's control groups (cgroup v2, or v1's memory, cpu and
pids hierarchies), in one tree per hub, named after the hub's folder so that ``make hub-stop`` finds it even after
the hub was killed::

    course-hub-<digest>/
        hub/                       the hub, its proxy and its services (the idle culler)
        learners/                  every learner together: at most the class's memory
            <name>/                one learner's server, kernels and terminals: memory, CPU, processes
                logins/            their log-ins (ssh, su, cron: classroom/hub/logins.py), in the same limits
        instructors/
            <name>/                an instructor's server (and the grading it starts), delegated to them:
                course-grading-*/  a grading run's groups, one per kernel (grader/cgroups.py)

A process cannot leave its group (the groups' files are root's), and what it starts stays in it: a learner's
memory limit holds for all their kernels together, and stopping the hub stops everything in the tree. An
instructor's group is delegated to the instructor (:meth:`HubGroups.delegate`: its folder and the files that move
a process are theirs, its limits stay root's), so that grading gives each kernel a group of its own inside it, whose
memory counts everything the kernel holds (memfd and shared memory too), and a kernel over it is stopped, never the
instructor's grader.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

#: the controllers the limits need
CONTROLLERS = ("memory", "cpu", "pids")
ROLES = ("learner", "instructor")
CFS_PERIOD_US = 100_000
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.I)


class CgroupError(RuntimeError):
    """The machine's control groups cannot hold the hub's limits; the message says why and what to do."""


def parse_size(text: str, what: str) -> int:
    """'2G', '1.5GiB', '512M', '1073741824' -> bytes (K, M, G, T are powers of 1024); ValueError names ``what``."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"{what}={text!r} is not a size: write it as 2G, 1536M or a number of bytes")
    unit = (m.group(2) or "B")[0].upper()
    return int(float(m.group(1)) * 1024 ** "BKMGT".index(unit))


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


@dataclass(frozen=True)
class Limits:
    """What each learner's server and kernels may use together, what all learners may use together, and what an
    instructor's server (and the grading started from it) may use."""

    memory: int  # bytes, per learner
    cpus: float  # CPUs per learner
    tasks: int  # processes and threads per learner
    class_memory: int  # bytes, all learners together
    instructor_memory: int  # bytes, per instructor
    instructor_tasks: int = 4096

    def __post_init__(self):
        for name, low in (("memory", 256 * 2**20), ("class_memory", 256 * 2**20),
                          ("instructor_memory", 512 * 2**20)):
            if getattr(self, name) < low:
                raise ValueError(f"{name} = {getattr(self, name):,} bytes is below {low // 2**20} MiB: a server with "
                                 "its kernel cannot start in less")
        if not 0.05 <= self.cpus <= (os.cpu_count() or 1) * 4:
            raise ValueError(f"cpus = {self.cpus} must be between 0.05 and four times this machine's "
                             f"{os.cpu_count()} CPUs")
        if self.tasks < 64 or self.instructor_tasks < 64:
            raise ValueError(f"tasks = {self.tasks} is below 64: a server and its kernel run more threads than that")

    def describe(self) -> str:
        return (f"each learner {gib(self.memory)}, {self.cpus:g} CPU, {self.tasks} processes and threads; all "
                f"learners together {gib(self.class_memory)}; each instructor {gib(self.instructor_memory)}")

    def to_dict(self) -> dict:
        return asdict(self)


def machine_memory() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise CgroupError("/proc/meminfo has no MemTotal")


def default_limits(total: int | None = None) -> Limits:
    """The limits `make hub` chooses for this machine when the instructor names none (README, "Limits").

    Each learner: 2 GiB, 1 CPU, 512 processes and threads (the course's heaviest chapter notebook peaks at about
    1 GiB, a learner's server at 0.13 GiB). An instructor: a quarter of the machine, at most 6 GiB (grading four
    submissions at once runs four kernels, each up to about 1 GiB, and four nbgrader processes). The system and the
    hub: an eighth, at most 2 GiB. All learners together: the rest, 16 GiB of 24, so that 30 learners (about
    0.4 GiB each while working, up to 2 GiB each) can never push the hub or the grading out.
    """
    total = total or machine_memory()
    instructor = min(6 * 2**30, max(2**30, total // 4))
    reserve = instructor + min(2 * 2**30, total // 8)
    return Limits(memory=min(2 * 2**30, max(512 * 2**20, (total - reserve) // 2)), cpus=1.0, tasks=512,
                  class_memory=max(512 * 2**20, total - reserve), instructor_memory=instructor)


# --- the machine's hierarchies ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Mount:
    path: Path
    version: int


def mounts() -> dict[str, Mount]:
    """Where each controller is mounted: v1's hierarchy that has it, else the v2 hierarchy if it offers it."""
    v1, v2 = {}, []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if not rest:
                continue
            if rest[0] == "cgroup":
                for option in rest[2].split(","):
                    if option in CONTROLLERS:
                        v1.setdefault(option, Mount(Path(fields[4]), 1))
            elif rest[0] == "cgroup2":
                v2.append(Path(fields[4]))
    found = dict(v1)
    for path in v2:
        try:
            offered = (path / "cgroup.controllers").read_text().split()
        except OSError:
            continue
        for controller in CONTROLLERS:
            if controller in offered and controller not in found:
                found[controller] = Mount(path, 2)
    return found


class HubGroups:
    """The control groups of the hub whose folder is ``prefix``."""

    def __init__(self, prefix: Path):
        self.name = "course-hub-" + hashlib.sha256(str(Path(prefix).resolve()).encode()).hexdigest()[:10]
        self.mounts = mounts()

    def why_not(self) -> str | None:
        """None when the limits can be held here, else why not (and what to do)."""
        if os.geteuid() != 0:
            return "only root can make control groups"
        missing = [c for c in CONTROLLERS if c not in self.mounts]
        if missing:
            return (f"this machine's control groups offer no {', '.join(missing)} controller (see /proc/self/mountinfo "
                    "and /sys/fs/cgroup)")
        for mount in {m.path: m for m in self.mounts.values()}.values():
            if mount.version == 2:
                why = _enable_v2(mount.path, [c for c, m in self.mounts.items() if m.path == mount.path])
                if why:
                    return why
        return None

    # -- paths
    def roots(self) -> list[Path]:
        """The tree's top folder in each hierarchy (one under cgroup v2)."""
        return sorted({m.path / self.name for m in self.mounts.values()})

    def folders(self, *parts: str) -> dict[str, Path]:
        return {c: m.path / self.name / Path(*parts) for c, m in self.mounts.items()}

    def procs_files(self, *parts: str) -> list[str]:
        """The files a process writes its id to, to enter this group (one per hierarchy)."""
        return sorted({str(p / "cgroup.procs") for p in self.folders(*parts).values()})

    # -- making the tree
    def create(self, limits: Limits) -> None:
        """The tree and its groups' limits: the hub's, the learners' together, the instructors'."""
        why = self.why_not()
        if why:
            raise CgroupError(why)
        for parts in ((), ("hub",), ("learners",), ("instructors",)):
            self._make(parts)
        self._limit(("learners",), memory=limits.class_memory)

    def for_user(self, name: str, role: str, limits: Limits) -> list[str]:
        """A user's group with their role's limits, emptied of anything left from before; its cgroup.procs files."""
        if role not in ROLES:
            raise ValueError(f"role {role!r} is not one of {ROLES}")
        parts = (f"{role}s", name)
        self._make(parts)
        # what an earlier server left (for an instructor, its grading's groups too); a learner's log-ins (logins/) stay
        self.kill(parts, below=role != "learner")
        if role == "learner":
            self._limit(parts, memory=limits.memory, cpus=limits.cpus, tasks=limits.tasks)
            for folder in self.folders(*parts, "logins").values():  # counted in the group's limits, hierarchically
                folder.mkdir(exist_ok=True)
        else:
            self._limit(parts, memory=limits.instructor_memory, tasks=limits.instructor_tasks)
            import pwd

            entry = pwd.getpwnam(name)
            self.delegate(name, entry.pw_uid, entry.pw_gid)
        return self.procs_files(*parts)

    def delegate(self, name: str, uid: int, gid: int) -> list[str]:
        """An instructor's group, made theirs to make groups in (the folder, and the files that move a process in
        it): its own limits stay root's, and a group made inside counts against them (cgroup v1's memory hierarchy
        must be on, as it is on every kernel since 2019). The folders delegated."""
        done = []
        for controller, folder in self.folders("instructors", name).items():
            if not folder.is_dir():
                continue
            if self.mounts[controller].version == 1 and controller == "memory":
                if _read(folder / "memory.use_hierarchy") != "1":
                    continue  # a group inside would not count against the instructor's: not delegated
            names = ["cgroup.procs", "tasks"] if self.mounts[controller].version == 1 else \
                ["cgroup.procs", "cgroup.subtree_control", "cgroup.threads"]
            for path in [folder, *(folder / n for n in names)]:
                if path.exists():
                    os.chown(path, uid, gid)
            done.append(str(folder))
        return sorted(set(done))

    def _make(self, parts: tuple[str, ...]) -> None:
        for controller, folder in self.folders(*parts).items():
            folder.mkdir(exist_ok=True)
            if self.mounts[controller].version == 2:
                _enable_v2(folder.parent, [c for c, m in self.mounts.items() if m.version == 2], check_only=False)

    def _limit(self, parts: tuple[str, ...], memory: int | None = None, cpus: float | None = None,
               tasks: int | None = None) -> None:
        folders = self.folders(*parts)
        v2 = {c: self.mounts[c].version == 2 for c in folders}
        if memory is not None:
            f = folders["memory"]
            if v2["memory"]:
                _write(f / "memory.max", memory)
                if (f / "memory.swap.max").exists():
                    _write(f / "memory.swap.max", 0)
            else:
                _write(f / "memory.limit_in_bytes", memory)
                if (f / "memory.memsw.limit_in_bytes").exists():
                    _write(f / "memory.memsw.limit_in_bytes", memory)
        if cpus is not None:
            f, quota = folders["cpu"], int(cpus * CFS_PERIOD_US)
            if v2["cpu"]:
                _write(f / "cpu.max", f"{quota} {CFS_PERIOD_US}")
            else:
                _write(f / "cpu.cfs_period_us", CFS_PERIOD_US)
                _write(f / "cpu.cfs_quota_us", quota)
        if tasks is not None:
            _write(folders["pids"] / "pids.max", tasks)

    def limits_of(self, *parts: str) -> dict[str, int | float | None]:
        """A group's limits as the kernel holds them (memory in bytes, CPUs, tasks; None: none)."""
        folders = self.folders(*parts)
        out: dict[str, int | float | None] = {}
        mem = folders["memory"]
        raw = _read(mem / ("memory.max" if self.mounts["memory"].version == 2 else "memory.limit_in_bytes"))
        out["memory"] = None if raw in ("max", "") or int(raw) >= 2**62 else int(raw)
        if self.mounts["cpu"].version == 2:
            quota, period = _read(folders["cpu"] / "cpu.max").split()
            out["cpus"] = None if quota == "max" else int(quota) / int(period)
        else:
            quota = int(_read(folders["cpu"] / "cpu.cfs_quota_us"))
            out["cpus"] = None if quota < 0 else quota / int(_read(folders["cpu"] / "cpu.cfs_period_us"))
        raw = _read(folders["pids"] / "pids.max")
        out["tasks"] = None if raw == "max" else int(raw)
        return out

    def usage(self, *parts: str) -> dict[str, int | None]:
        """What a group has used: its memory's peak so far (None where the kernel does not keep one) and its tasks
        now (processes and threads)."""
        folders = self.folders(*parts)
        peak = None
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            with contextlib.suppress(OSError, ValueError):
                peak = int(_read(folders["memory"] / name))
                break
        return {"memory_peak": peak, "tasks": int(_read(folders["pids"] / "pids.current"))}

    # -- the processes in it
    def pids(self, *parts: str, below: bool = True) -> set[int]:
        """Every process in the group and (``below``) the groups below it (as one hierarchy sees them)."""
        found: set[int] = set()
        for root in {self.folders(*parts)[c] for c in ("pids",)}:
            if not root.is_dir():
                continue
            for procs in (root.rglob("cgroup.procs") if below else [root / "cgroup.procs"]):
                with contextlib.suppress(OSError):
                    found.update(int(p) for p in procs.read_text().split())
        found.discard(os.getpid())
        return found

    def kill(self, parts: tuple[str, ...] = (), grace_s: float = 0.0, below: bool = True) -> list[int]:
        """Stop every process in the group and (``below``) the groups below it (SIGTERM, then after ``grace_s``
        SIGKILL) until none is left; the ids."""
        seen: list[int] = []
        deadline = time.monotonic() + 30
        sig = signal.SIGTERM if grace_s else signal.SIGKILL
        term_until = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            pids = self.pids(*parts, below=below)
            if not pids:
                return seen
            seen += [p for p in pids if p not in seen]
            if sig == signal.SIGTERM and time.monotonic() > term_until:
                sig = signal.SIGKILL
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            time.sleep(0.1)
        raise CgroupError(f"processes {sorted(self.pids(*parts))} in {self.name} outlived SIGKILL for 30 s")

    def remove(self) -> None:
        """The whole tree, once it is empty (its deepest folders first)."""
        for root in self.roots():
            if not root.is_dir():
                continue
            folders = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [root]
            for folder in folders:
                for _ in range(50):
                    try:
                        folder.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:  # EBUSY while the last processes are reaped
                        time.sleep(0.1)

    def exists(self) -> bool:
        return any(r.is_dir() for r in self.roots())


def _enable_v2(folder: Path, controllers: list[str], check_only: bool = True) -> str | None:
    """Let ``folder``'s children use the controllers (cgroup v2's subtree_control); why not, or None."""
    try:
        enabled = (folder / "cgroup.subtree_control").read_text().split()
    except OSError as exc:
        return f"{folder}/cgroup.subtree_control cannot be read ({exc.strerror})"
    wanted = [c for c in controllers if c not in enabled]
    if not wanted:
        return None
    try:
        (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
    except OSError as exc:
        if check_only:
            return (f"cgroup v2 does not let {folder}'s groups use {', '.join(wanted)} ({exc.strerror}): where this "
                    "machine's init keeps processes in that group, delegate a subtree to the hub")
        raise
    return None


def _write(path: Path, value) -> None:
    try:
        path.write_text(str(value))
    except OSError as exc:
        raise CgroupError(f"cannot write {value} to {path} ({exc.strerror})") from None


def _read(path: Path) -> str:
    return path.read_text().strip()


# --- inside a user's server: its own group's memory --------------------------------------------------------

def own_memory_group(pid: int | str = "self") -> Path | None:
    """The memory control group the process is in, as a folder (None where there is none)."""
    mount = mounts().get("memory")
    if mount is None:
        return None
    with open(f"/proc/{pid}/cgroup") as fh:
        for line in fh:
            _, names, path = line.rstrip("\n").split(":", 2)
            if (mount.version == 2 and names == "") or (mount.version == 1 and "memory" in names.split(",")):
                return mount.path / path.lstrip("/")
    return None


def oom_kills(group: Path | None) -> int:
    """How many processes the kernel has stopped for the group's memory limit (0 where it cannot say)."""
    if group is None:
        return 0
    for name in ("memory.events", "memory.oom_control"):
        with contextlib.suppress(OSError):
            for line in (group / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    return 0


def memory_limit(group: Path | None) -> int | None:
    """The group's memory limit in bytes (None: none, or no group)."""
    if group is None:
        return None
    for name in ("memory.max", "memory.limit_in_bytes"):
        with contextlib.suppress(OSError, ValueError):
            raw = (group / name).read_text().strip()
            return None if raw == "max" or int(raw) >= 2**62 else int(raw)
    return None
