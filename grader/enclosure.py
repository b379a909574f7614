"""A grading kernel's enclosure: its own user, namespaces, view of the machine and limits, before any learner code.

Every grading kernel, forked warm or started afresh (:mod:`grader.warm`), is
made by :func:`start` from a process inside the fence's bubblewrap (the OS
fence's view of the machine, :func:`grader.sandbox.bwrap_arguments`). Between
the fork and the learner's first cell it is given:

* **a user of its own**, ``KERNEL_UID_BASE`` plus the grading process's pid
  (:func:`kernel_uid`), which no account on the machine holds and which owns
  nothing but the kernel's scratch folder and connection folder. Root's and the
  instructor's files, ``/etc/shadow``, another course's secret: the file
  permissions close them, whatever the view shows. (Grading as a user other
  than root, the kernel keeps that user, as the user namespaces of an
  unprivileged process allow; :func:`privileged` tells which.)
* **namespaces of its own**: user, mount, PID (it is process 1: every process it
  starts ends with it), IPC (System V shared memory and message queues, POSIX
  message queues: nothing outlives the kernel or reaches another), network (no
  interface but its own loopback: no socket, abstract or TCP, reaches another
  kernel), UTS and cgroup;
* **its own files**: a fresh ``/proc`` that shows its own processes only, a
  fresh ``/tmp`` and ``/dev/shm`` (bounded in size), ``/dev`` read-only, and of
  the folders the fence shares between kernels (the scratch folders, the
  connection folders) its own alone;
* **limits** (:class:`KernelLimits`): memory (its control group's, which counts
  what it keeps in ``/tmp`` and shared memory, and the address space of each
  process), processes and threads, CPU seconds of each process, and at most
  ``cpus`` cores when a control group is there (:mod:`grader.cgroups`);
* **no capabilities**: bounding, permitted, effective, inheritable and ambient
  sets emptied and ``no_new_privs``, so it cannot undo any of the above.

The process that makes it (the warm process's handler, :mod:`grader.warm`)
then relays signals to it and reports how it ended, the limit it reached
included (:data:`OVER`).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
from dataclasses import asdict, dataclass

from . import cgroups

#: kernels run as this uid plus the grading process's pid (pids stay below 2**22): no account holds these
KERNEL_UID_BASE = 1_500_000_000
KERNEL_UID_SPAN = 1 << 22

_CLONE_NEWNS, _CLONE_NEWCGROUP, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x20000, 0x02000000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_NAMESPACES = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWNET | _CLONE_NEWUTS
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND = 1, 2, 4, 8, 32, 4096
_MS_REC, _MS_PRIVATE = 16384, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS = 1, 4, 24, 28
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
#: SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP and SECBIT_KEEP_CAPS, each with its lock bit but KEEP_CAPS itself
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20
_CAPSET = {"x86_64": 126, "aarch64": 91}

_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class KernelLimits:
    """What one grading kernel may use (0: no bound).

    ``memory_mb`` bounds the kernel's control group (every process, and its files in ``/tmp`` and ``/dev/shm``)
    and each process's address space; ``tasks`` its processes and threads together; ``cpu_seconds`` the CPU time
    of each of its processes; ``cpus`` the cores it may use at once (control groups only); ``tmp_mb`` the size of
    its ``/tmp`` and of its ``/dev/shm``.
    """

    memory_mb: int = 4096
    tasks: int = 128
    cpu_seconds: int = 600
    cpus: float = 0
    tmp_mb: int = 1024

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict | None) -> "KernelLimits":
        data = data or {}
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def describe(self) -> str:
        parts = [f"memory {self.memory_mb} MiB" if self.memory_mb else "memory unbounded",
                 f"{self.tasks} processes and threads" if self.tasks else "processes unbounded",
                 f"{self.cpu_seconds} CPU seconds a process" if self.cpu_seconds else "CPU time unbounded"]
        if self.cpus:
            parts.append(f"{self.cpus:g} cores")
        return ", ".join(parts)


#: how a kernel over a limit ended, as the grader names it (the key is what the handler reports)
OVER = {
    "memory": "went over its memory limit of {memory_mb} MiB (what it keeps in /tmp and shared memory counts) "
              "and was stopped",
    "cpu": "went over its limit of {cpu_seconds} CPU seconds and was stopped",
    "pids": "tried to start more than {tasks} processes and threads",
}


def privileged() -> bool:
    """Whether grading runs as root, so that kernels get a user of their own and control groups."""
    return os.geteuid() == 0


def kernel_uid(pid: int | None = None) -> int:
    """The user the kernels of the grading process ``pid`` (by default this one) run as."""
    return KERNEL_UID_BASE + (os.getpid() if pid is None else pid) % KERNEL_UID_SPAN


def is_kernel_uid(uid: object) -> bool:
    return isinstance(uid, int) and KERNEL_UID_BASE <= uid < KERNEL_UID_BASE + KERNEL_UID_SPAN


# --------------------------------------------------------------------------
# System calls
# --------------------------------------------------------------------------
def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount on {target}")


def die_with_parent() -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def not_dumpable() -> None:
    """No process without privileges may read this one's memory or trace it."""
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def drop_capabilities() -> None:
    """Every capability gone for good: bounding set, ambient, permitted, effective, inheritable; no_new_privs."""
    _check(_libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0), "securebits")
    for cap in range(64):
        _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # an unknown capability number: EINVAL, nothing to drop
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    number = _CAPSET.get(os.uname().machine)
    if number is None:
        raise OSError(f"capset: unknown system call number on {os.uname().machine}")
    _check(_libc.syscall(number, ctypes.byref(Header(0x20080522, 0)), (Data * 2)()), "capset")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    with open("/proc/self/status") as status:
        caps = {k: int(v, 16) for k, v in (line.split(":") for line in status if line.startswith("Cap"))}
    if any(caps.values()):
        raise OSError(f"capabilities left after dropping them: {caps}")


def first_for_the_oom_killer() -> None:
    """The kernel is the first process the machine stops when memory runs out, before the grader and its other
    kernels (any process may raise its own score; only a privileged one may lower it again)."""
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def set_limits(limits: KernelLimits) -> None:
    """The process limits the kernel and everything it starts inherit (and cannot raise)."""
    def cap(which: int, value: int) -> None:
        resource.setrlimit(which, (value, value))

    cap(resource.RLIMIT_CORE, 0)
    if limits.memory_mb:
        cap(resource.RLIMIT_AS, int(limits.memory_mb) * 1024 * 1024)
    if limits.tasks:
        cap(resource.RLIMIT_NPROC, int(limits.tasks))
    if limits.cpu_seconds:  # SIGXCPU at the soft limit (which process 1 of a namespace ignores), SIGKILL just after
        resource.setrlimit(resource.RLIMIT_CPU, (int(limits.cpu_seconds), int(limits.cpu_seconds) + 1))
    if limits.tmp_mb:  # no file larger than the kernel's /tmp may hold (its connection folder is on the disk)
        cap(resource.RLIMIT_FSIZE, int(limits.tmp_mb) * 1024 * 1024)


def own_tree(paths: list[str], uid: int) -> None:
    """``paths`` and everything in them owned by ``uid`` (links changed, never followed)."""
    for top in paths:
        if not os.path.lexists(top):
            continue
        os.lchown(top, uid, uid)
        if os.path.isdir(top) and not os.path.islink(top):
            for _folder, dirs, files, fd in os.fwalk(top, follow_symlinks=False):
                for name in dirs + files:
                    if name in files and os.stat(name, dir_fd=fd, follow_symlinks=False).st_nlink > 1:
                        continue  # a hard link: its other names are not the kernel's to own
                    os.chown(name, uid, uid, dir_fd=fd, follow_symlinks=False)


# --------------------------------------------------------------------------
# The kernel's own view (in its own mount namespace, with the capabilities of its own user namespace)
# --------------------------------------------------------------------------
def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def enclose(plan: dict, own: list[str], limits: KernelLimits) -> None:
    """A fresh /proc, /tmp and /dev/shm, /dev read-only, the shared folders emptied but for ``own``: the
    submission's scratch folder (``own[0]``), which becomes a copy in memory, and the connection folder. Raises
    if any step fails."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    cover = [c for c in sorted(plan["cover"], key=lambda p: p.count("/")) if os.path.isdir(c)]
    cover = [c for i, c in enumerate(cover) if not _under(c, cover[:i])]
    scratch, own = own[0], own[1:]
    keep = dict.fromkeys(os.path.realpath(p) for p in plan["readable"] if _under(p, cover) and os.path.exists(p))
    keep = [(p, True) for p in keep if p not in own and p != scratch] + [(p, False) for p in own]  # each once
    handles = {p: os.open(p, os.O_PATH) for p, _ in keep}
    submission = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    tmp = f",size={int(limits.tmp_mb)}m" if limits.tmp_mb else ""
    for folder in cover:
        mode = "1777" if folder == "/tmp" else "0755"
        _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode={mode}" + (tmp if folder == "/tmp" else ""))
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "mode=1777" + tmp)
    _mount(None, "/dev", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    for path, readonly in sorted(keep, key=lambda k: k[0].count("/")):
        source = f"/proc/self/fd/{handles[path]}"
        if os.path.isdir(source):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not os.path.exists(path):
                open(path, "w").close()
        _mount(source, path, None, _MS_BIND | _MS_REC)
        if readonly and not os.statvfs(path).f_flag & os.ST_RDONLY:
            _mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        os.close(handles[path])
    for path, readonly in keep:
        if readonly != bool(os.statvfs(path).f_flag & os.ST_RDONLY):
            raise OSError(f"{path} is {'writable' if not readonly else 'read-only'} after the enclosure")
    # the submission's folder: a copy in memory, counted in the kernel's memory, gone with it (nothing the kernel
    # writes there reaches the machine's disk, or anything outside the fence)
    os.makedirs(scratch, exist_ok=True)
    _mount("tmpfs", scratch, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755" + tmp)
    _copy_tree(submission, scratch)
    os.close(submission)
    if os.path.isdir("/sys/fs/cgroup"):  # the other kernels' groups, and the run's, out of sight
        _mount("tmpfs", "/sys/fs/cgroup", "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY, "mode=0555")
    try:  # its own processes, and no one else's
        _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    except OSError:
        if plan.get("privileged"):  # the warm process mounted its /proc so that this one can: it must hold
            raise


def _copy_tree(source_fd: int, target: str) -> None:
    """The plain files and folders of the folder open at ``source_fd`` into ``target`` (nothing followed)."""
    import stat

    for name in os.listdir(source_fd):
        st = os.stat(name, dir_fd=source_fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=source_fd)
            try:
                os.mkdir(os.path.join(target, name), 0o755)
                _copy_tree(sub, os.path.join(target, name))
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=source_fd)
            with os.fdopen(fd, "rb") as src, open(os.path.join(target, name), "xb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)


def left_behind(folder: str, most: int = 20, look: int = 100_000) -> list[list[str]]:
    """What in ``folder`` is not a plain file or folder, as ``[path, kind]`` pairs (at most ``most``, of the first
    ``look`` entries): a symbolic link, a hard link, a device, a named pipe, a socket. Nothing is followed."""
    import stat

    found: list[list[str]] = []
    seen = 0
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    try:
        walk = os.fwalk(folder, follow_symlinks=False)
        for parent, dirs, files, fd in walk:
            for name in dirs + files:
                seen += 1
                if seen > look or len(found) >= most:
                    return found
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                where = os.path.relpath(os.path.join(parent, name), folder)
                kind = next((k for test, k in kinds if test(st.st_mode)), None)
                if kind is None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                    kind = "a hard link"
                if kind:
                    found.append([where[:200], kind])
    except OSError:
        pass
    return found


# --------------------------------------------------------------------------
# Making the kernel
# --------------------------------------------------------------------------
@dataclass
class Started:
    """A kernel :func:`start` made: ``pid`` (in the caller's PID namespace) and its user; or why it was not."""

    pid: int = 0
    middle: int = 0  # the process between the caller and the kernel (it waits for the kernel)
    uid: int = 0
    group: str | None = None
    refused: str | None = None
    report: int = -1  # the middle's report of what the kernel left, once it has ended (a line of JSON)
    limits: dict | None = None  # the kernel's limits (KernelLimits.as_json)


def start(settings: dict, plan: dict, become: callable) -> Started:
    """Fork the kernel enclosed; ``become()`` runs in it once enclosed, and its return is the kernel's exit status.

    ``settings``: the fence's settings for this kernel (its folders, ``kernel_uid``, ``limits``); ``plan``: the
    warm process's (what to cover, what stays readable, ``privileged``, the run's control ``group``).
    Runs in the warm process's handler, inside the fence's bubblewrap, before any learner code.
    """
    limits = KernelLimits.from_json(settings.get("limits"))
    own = [os.path.realpath(settings["workdir"]), os.path.dirname(os.path.realpath(settings["exchange"]))]
    mapped = bool(plan.get("privileged"))
    uid = settings.get("kernel_uid") if mapped else os.getuid()
    if mapped and not is_kernel_uid(uid):
        return Started(refused=f"its user {uid!r} is not one of the grading kernels' "
                               f"({KERNEL_UID_BASE}-{KERNEL_UID_BASE + KERNEL_UID_SPAN - 1})")
    run = cgroups.RunGroup.from_plan(plan.get("group"))
    group, procs = None, []
    try:
        if mapped:
            own_tree(own, uid)
        if run is not None:
            group = f"kernel-{uid}-{os.getpid()}"
            procs = cgroups.make_kernel_group(run, group, cgroups.Limits(limits.memory_mb, limits.tasks,
                                                                         limits.cpus or None))
    except OSError as exc:
        if run is not None and group:
            cgroups.remove_kernel_group(run, group)
        return Started(refused=f"its folders or control group could not be prepared ({exc})")
    to_middle_r, to_middle_w = os.pipe()  # the caller: "your ids are mapped"
    to_caller_r, to_caller_w = os.pipe()  # the middle: "unshared", then the kernel's pid, then the kernel: "ok"
    report_r, report_w = os.pipe()  # the middle, once the kernel has ended: what it left in its folder
    sys.stdout.flush()
    sys.stderr.flush()
    middle = os.fork()
    if middle == 0:
        code = 70
        try:
            os.close(to_middle_w)
            os.close(to_caller_r)
            os.close(report_r)
            code = _middle(plan, own, limits, uid, procs, mapped, to_middle_r, to_caller_w, report_w, become)
        except BaseException as exc:  # noqa: BLE001 - reported, then this process ends
            _say(to_caller_w, f"error the enclosure failed: {_where(exc)}")
        finally:
            os._exit(code)
    os.close(to_middle_r)
    os.close(to_caller_w)
    os.close(report_w)
    reader = os.fdopen(to_caller_r, "rb")
    try:
        first = reader.readline().decode().strip()
        if first == "unshared" and mapped:
            for name in ("uid_map", "gid_map"):
                with open(f"/proc/{middle}/{name}", "w") as f:
                    f.write(f"0 {uid} 1")
            os.write(to_middle_w, b"m")
            first = reader.readline().decode().strip()
        os.close(to_middle_w)
        lines = [first]
        while not (any(x.startswith("kernel ") for x in lines) and any(x == "ok" or x.startswith("error")
                                                                        for x in lines)):
            if any(x.startswith("error") for x in lines) or not lines[-1]:
                break
            lines.append(reader.readline().decode().strip())
        errors = [x.removeprefix("error ") for x in lines if x.startswith("error")]
        pids = [int(x.split()[1]) for x in lines if x.startswith("kernel ")]
        if errors or not pids or "ok" not in lines:
            raise OSError(errors[0] if errors else "the kernel's enclosure stopped")
        pid = pids[0]
    except (OSError, ValueError) as exc:
        with _quiet():
            os.kill(middle, signal.SIGKILL)
        with _quiet():
            os.waitpid(middle, 0)
        if run is not None and group:
            cgroups.remove_kernel_group(run, group)
        os.close(report_r)
        return Started(refused=str(exc) or type(exc).__name__)
    finally:
        reader.close()
        with _quiet():
            os.close(to_middle_w)
    return Started(pid, middle, uid, group, report=report_r, limits=limits.as_json())


class _quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], OSError)


def _where(exc: BaseException) -> str:
    """An error of the enclosure and the line of this module it came from (for the grader's log)."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == __file__]
    return f"{exc} (at {frames[-1].name}: {frames[-1].line})" if frames else str(exc)


def _say(fd: int, line: str) -> None:
    try:
        os.write(fd, (line.replace("\n", " ") + "\n").encode())
    except OSError:
        pass


def _middle(plan, own, limits, uid, procs, mapped, from_caller, to_caller, report, become) -> int:
    """Between the caller and the kernel: joins the control group, makes the namespaces, takes the kernel's user,
    forks the kernel (process 1 of the new PID namespace), and ends with its status."""
    die_with_parent()
    if not mapped:
        # a process that is not dumpable (the warm process's children are not) has its /proc files owned by
        # root, so it could not write its own score or maps: this one holds nothing to read, and the kernel is its
        # child
        _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    first_for_the_oom_killer()  # the kernel inherits it
    cgroups.join(procs)
    outside_uid, outside_gid = os.getuid(), os.getgid()  # read before unshare: after it, they are unmapped
    _check(_libc.unshare(_NAMESPACES | (_CLONE_NEWCGROUP if procs else 0)), "unshare")
    if mapped:  # the caller, which holds the privilege, maps this namespace's root to the kernel's own user
        _say(to_caller, "unshared")
        if os.read(from_caller, 1) != b"m":
            raise OSError("the caller did not map the kernel's user")
        os.setgroups([])
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
    else:  # not root: the namespace's root is the grader's own user (made dumpable above, to write its maps)
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        for name, outside in (("uid_map", outside_uid), ("gid_map", outside_gid)):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(f"0 {outside} 1")
    os.close(from_caller)
    sys.stdout.flush()
    sys.stderr.flush()
    kernel = os.fork()
    if kernel == 0:
        code = 70
        try:
            os.close(report)  # the middle's alone: no learner code may write what the kernel left
            die_with_parent()
            enclose(plan, own, limits)
            set_limits(limits)
            os.setsid()  # a session of its own: the scheduler shares the cores between kernels, not between threads
            drop_capabilities()
            _say(to_caller, "ok")
            os.close(to_caller)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            code = become()
        except BaseException as exc:  # noqa: BLE001 - reported to the caller (before "ok"), or on the kernel's stderr
            import traceback

            traceback.print_exc()
            _say(to_caller, f"error the enclosure failed: {_where(exc)}")
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _say(to_caller, f"kernel {kernel}")
    os.close(to_caller)
    for fd in range(3):  # the kernel's streams are its own; this process keeps none of them
        with _quiet():
            os.close(fd)
    status, used = None, 0.0
    while True:
        try:
            _, status, usage = os.wait4(kernel, 0)
            used = usage.ru_utime + usage.ru_stime
            break
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    # the kernel and every process of its namespace have ended: the CPU time it used (process 1 of a namespace
    # ignores SIGXCPU, so a kernel over its CPU seconds is killed at the hard limit: its time says why), and what
    # is left in its folder (this process shares the kernel's mounts; nothing is followed), for the grader's log
    _say(report, json.dumps({"cpu": used, "left": left_behind(own[0])}))
    os.close(report)
    if status is None:
        return 1
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def ended(started: Started, plan: dict, code: int) -> dict:
    """How a kernel ended, once its middle process has: ``{"exit", "over", "left"}``, the limits it reached (keys of
    :data:`OVER`) and what it left in its folder (:func:`left_behind`); its control group removed."""
    over = ["cpu"] if code == 128 + signal.SIGXCPU else []
    run = cgroups.RunGroup.from_plan(plan.get("group"))
    if run is not None and started.group:
        over += cgroups.went_over(run, started.group)
        cgroups.remove_kernel_group(run, started.group)
    left = []
    try:
        with os.fdopen(started.report, "rb") as f:
            text = f.read(1 << 16).decode(errors="replace").strip()
        found = json.loads(text) if text else {}
        left = [[str(a), str(b)] for a, b in found.get("left", [])][:20]
        # the time is the whole namespace's (every child the kernel reaped counts in it), and the limit is each
        # process's: when the memory killer stopped a process, memory is why the kernel ended, however many
        # children's seconds add up to more than one process may use
        cpu_seconds = KernelLimits.from_json(started.limits).cpu_seconds
        if cpu_seconds and float(found.get("cpu", 0)) >= cpu_seconds and "memory" not in over:
            over.append("cpu")
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    return {"exit": code, "over": sorted(set(over)), "left": left}


def over_message(over: list[str], limits: dict | None) -> str:
    """The grader's sentence for the limits a kernel reached."""
    values = KernelLimits.from_json(limits).as_json()
    return "; ".join(OVER[key].format(**values) for key in over if key in OVER)


def dumps(obj) -> str:
    return json.dumps(obj, sort_keys=True)
