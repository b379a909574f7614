"""Warm grading kernels: a fenced kernel starts by ``fork()`` from a process that has imported torch already.

A grading kernel's start was most of a submission's grading time: bubblewrap
starts a fresh Python, which imports torch (1.3-3 s of CPU on a 2-core
machine), ipykernel and the grader's kernel side, for every notebook. Here one
**warm process** does those imports once (for a whole ``make grade`` run,
shared by its nbgrader processes through :data:`SHARED`; else one per
nbgrader process), inside one
bubblewrap with the same view of the machine as every kernel's (a read-only
system, no network, the course and the grader's checkout out of view), except
that the submissions' folder (``autograded/``) and a folder of connection
folders are mounted read-write. Each kernel is then a fork of it that encloses
itself further before any learner code runs (:func:`enclose`):

- its own **user, mount and PID namespaces**: it is process 1 of its PID
  namespace, so every process it starts ends with it, and it can neither see
  nor signal the warm process or the kernels after it;
- a **fresh** ``/tmp`` (what an earlier learner's kernel left there is gone),
  ``/dev`` read-only, and ``autograded/`` and the connection folders emptied
  but for its own submission's folder and its own connection folder;
- **no capabilities** (bounding set, permitted, effective and ambient sets
  emptied, ``no_new_privs``), so it cannot undo those mounts; the warm process
  is not dumpable, so no kernel can read its memory or trace it.

Then it is the ordinary grading kernel: the same ipykernel, the same Python
fence (:func:`grader.sandbox.install_from_env` with its own notebook's
settings), the same judge. What a learner's code can reach is what a kernel
started afresh behind its own bubblewrap could, and less (no capabilities).

The pieces:

- **the launcher** (``python -S -m grader.warm launch SOCKET -- COLD...``, the
  kernel command :class:`grader.kernel.FencedKernelManager` gives
  jupyter_client): hands the warm process the kernel's arguments, environment,
  folder and standard streams; passes on every signal it gets; exits with the
  kernel's status. Where no warm process answers, or it refuses, it becomes the
  cold command: the kernel started afresh behind its own bubblewrap, as before;
- **the warm process** (``serve``), which forks one handler per request and
  never reads a request itself, so nothing of one learner's grading is in its
  memory when it forks the next; a shared one runs under a **keeper** (``keep``)
  that ends it when the run that made the shared folder ends;
- **the handler**: unshares the namespaces, forks the kernel as their process
  1, waits for its enclosure to report, and relays signals and the exit status.

``GRADER_WARM_KERNELS=off`` starts every grading kernel cold.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys

#: the switch: "off" starts every grading kernel afresh behind its own bubblewrap
SWITCH = "GRADER_WARM_KERNELS"
#: imported once by the warm process: what every grading kernel imports (grader.sandbox.KERNEL_MODULES too)
#: (ipykernel.debugger brings debugpy, which a kernel imports as it starts: 0.16 s of each kernel's 0.28 s start)
PRELOAD = ("numpy", "torch", "ipykernel.kernelapp", "ipykernel.ipkernel", "IPython.core.completer", "grader.sandbox",
           "ipykernel.debugger", "IPython.extensions", "tornado.gen", "tornado.locks", "tornado.queues")
#: variables fixed as a library loads: a request that differs in one is started cold
LOAD_TIME_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY", "PYTHONPATH", "PYTHONHASHSEED",
                       "OMP_WAIT_POLICY")
#: what bubblewrap sets for a cold kernel (grader.sandbox.bwrap_arguments), set for a warm one too
KERNEL_ENVIRONMENT = {"TMPDIR": "/tmp", "IPYTHONDIR": "/tmp/ipython", "JPY_PARENT_PID": "0"}
#: the signals the launcher passes on to the kernel
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x20000, 0x10000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS = 1, 4, 24, 28
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
#: SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP and SECBIT_KEEP_CAPS, each with its lock bit but KEEP_CAPS itself
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20
_CAPSET = {"x86_64": 126, "aarch64": 91}


#: a folder that outlives one nbgrader process (``make grade`` makes one per run, a cluster worker one per worker):
#: its warm processes serve every nbgrader process given the same folder, and end when its maker stops them
#: (:func:`stop_shared`) or after :data:`IDLE_EXIT` seconds with no kernel of theirs running
SHARED = "GRADER_WARM_SHARED"
IDLE_EXIT = 60.0


def enabled() -> bool:
    return os.environ.get(SWITCH, "on").strip().lower() not in ("off", "0", "no", "false")


# --------------------------------------------------------------------------
# The launcher: what jupyter_client starts as the kernel (stdlib only, python -S)
# --------------------------------------------------------------------------
def receive_request(conn: socket.socket, timeout: float = 10) -> tuple[dict, list[int]]:
    """A launcher's request (one JSON line) and the file descriptors passed with it (its standard streams).

    Raises OSError or ValueError for a request that cannot be read; no descriptor is then left open.
    """
    data, fds = b"", []
    conn.settimeout(timeout)
    try:
        while not data.endswith(b"\n"):
            chunk, more, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
            if not chunk:
                break
            data, fds = data + chunk, fds + more
        return json.loads(data), fds
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        raise


def _read_line(conn: socket.socket) -> dict | None:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def launch(path: str, cold: list[str]) -> None:
    """Start the kernel of ``cold`` (``bwrap ... -- python -m ipykernel_launcher ARGS``) warm, else cold."""
    try:
        kernel_args = cold[cold.index("ipykernel_launcher") + 1:]
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        request = {"args": kernel_args, "env": dict(os.environ), "cwd": os.getcwd()}
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        answer = _read_line(conn)
    except (OSError, ValueError):
        answer = None
    if not answer or not answer.get("started"):
        why = (answer or {}).get("refused", "no warm process answered")
        print(f"grading kernel: started afresh, not warm: {why}", file=sys.stderr, flush=True)
        os.execvp(cold[0], cold)  # the kernel starts afresh behind its own bubblewrap

    def relay(signum, _frame):
        try:
            conn.sendall(json.dumps({"signal": signum}).encode() + b"\n")
        except OSError:
            pass

    for signum in RELAYED:
        signal.signal(signum, relay)
    while True:
        try:
            ended = _read_line(conn)
            break
        except InterruptedError:
            continue
        except OSError:
            ended = None
            break
    os._exit(ended["exit"] if ended else 1)


# --------------------------------------------------------------------------
# The warm process and its handlers (inside the warm process's bubblewrap)
# --------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount on {target}")


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _drop_capabilities() -> None:
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


def enclose(plan: dict, own: list[str]) -> None:
    """In the kernel's fresh namespaces: a fresh /tmp, /dev read-only, the shared folders emptied but for ``own``
    (the submission's folder and the connection folder), then no capabilities. Raises if any step fails."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    cover = [c for c in sorted(plan["cover"], key=lambda p: p.count("/"))]
    cover = [c for i, c in enumerate(cover) if not _under(c, cover[:i])]
    keep = dict.fromkeys(os.path.realpath(p) for p in plan["readable"] if _under(p, cover) and os.path.exists(p))
    keep = [(p, True) for p in keep if p not in own] + [(p, False) for p in own]  # each folder once
    handles = {p: os.open(p, os.O_PATH) for p, _ in keep}
    for folder in cover:
        _mount("tmpfs", folder, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755")
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
    _drop_capabilities()


def refusal(request: dict, plan: dict) -> str | None:
    """Why this request is not started warm (None: it can be)."""
    from grader.sandbox import ENV_VAR

    env = request.get("env", {})
    differ = [k for k in LOAD_TIME_VARIABLES if env.get(k) != os.environ.get(k)]
    if differ:
        return f"its environment differs in {', '.join(differ)}, which a library reads as it loads"
    try:
        settings = json.loads(env[ENV_VAR])
        workdir, exchange = os.path.realpath(settings["workdir"]), os.path.realpath(settings["exchange"])
    except (KeyError, ValueError, TypeError):
        return "it carries no grading fence settings"
    if not _under(workdir, [plan["work_root"]]) or workdir == plan["work_root"]:
        return f"its folder {workdir} is not a submission's folder under {plan['work_root']}"
    if not _under(os.path.dirname(exchange), [plan["fence_root"]]) or os.path.dirname(exchange) == plan["fence_root"]:
        return f"its connection folder is not under {plan['fence_root']}"
    return None


def _own_folders(request: dict) -> list[str]:
    from grader.sandbox import ENV_VAR

    settings = json.loads(request["env"][ENV_VAR])
    return [os.path.realpath(settings["workdir"]), os.path.dirname(os.path.realpath(settings["exchange"]))]


def _become_kernel(request: dict, fds: list[int]) -> int:
    """In the enclosed process 1: the requested ipykernel, with the request's streams, folder and environment."""
    import random
    import tempfile

    import numpy
    import torch

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)  # nothing of the warm process's: its socket, the handler's pipe
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update(KERNEL_ENVIRONMENT)
    sys.argv = [sys.executable, *request["args"]]
    numpy.random.seed()
    torch.seed()
    random.seed()
    tempfile.tempdir = None
    from ipykernel.kernelapp import launch_new_instance

    try:
        launch_new_instance(argv=request["args"])
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return 0


def _handle(conn: socket.socket, plan: dict) -> int:
    """A handler (a fork of the warm process): read one request, start its kernel enclosed, relay, report."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        request, fds = receive_request(conn)
        why = refusal(request, plan) if len(fds) == 3 else "the launcher's streams did not arrive"
    except (OSError, ValueError) as exc:
        request, fds, why = None, [], f"the request could not be read: {exc}"

    def answer(message: dict) -> None:
        try:
            conn.sendall(json.dumps(message).encode() + b"\n")
        except OSError:
            pass

    if why:
        answer({"refused": why})
        return 0
    uid, gid = os.getuid(), os.getgid()
    try:
        _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID), "unshare")
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1")
    except OSError as exc:
        answer({"refused": f"its namespaces could not be made ({exc})"})
        return 0
    ready_r, ready_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the kernel: process 1 of its own PID namespace
        code = 70
        try:
            os.close(ready_r)
            conn.close()
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            try:
                enclose(plan, _own_folders(request))
            except Exception as exc:  # noqa: BLE001 - reported to the launcher, which starts the kernel cold
                os.write(ready_w, f"the enclosure failed: {exc}".encode()[:4000])
                os._exit(70)
            os.write(ready_w, b"ok")
            os.close(ready_w)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            code = _become_kernel(request, fds)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(ready_w)
    for fd in fds:
        os.close(fd)
    report = b""
    while chunk := os.read(ready_r, 4096):
        report += chunk
    os.close(ready_r)
    if report != b"ok":
        os.waitpid(pid, 0)
        answer({"refused": report.decode(errors="replace") or "the kernel's enclosure stopped"})
        return 0
    conn.settimeout(None)
    answer({"started": True})
    buffer = b""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            answer({"exit": code})
            return 0
        ready, _, _ = select.select([conn], [], [], 0.1)
        if not ready:
            continue
        chunk = conn.recv(4096)
        if not chunk:  # the launcher is gone: so is its kernel, with every process of its namespace
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return 0
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                os.kill(pid, int(json.loads(line)["signal"]))
            except (ValueError, KeyError, TypeError, ProcessLookupError):
                pass


def serve(path: str, plan_path: str) -> None:
    """The warm process: listen on ``path`` at once, import :data:`PRELOAD`, fork a handler per request."""
    import importlib

    with open(plan_path) as f:
        plan = json.load(f)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # no kernel may read this process's memory or trace it
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped as they end
    from grader.sandbox import KERNEL_MODULES

    for name in (*PRELOAD, *KERNEL_MODULES):
        importlib.import_module(name)
    idle = plan.get("idle_exit")
    listener.settimeout(idle)
    handlers: set[int] = set()
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:  # a shared warm process: nothing asked for a while; it ends once no kernel runs
            handlers = {pid for pid in handlers if _alive(pid)}
            if not handlers:  # the next nbgrader process to ask starts another
                for mine in (path[:-len(".sock")] + ".pid", path):
                    with contextlib.suppress(OSError):
                        os.unlink(mine)
                return
            continue
        conn.settimeout(None)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                listener.close()
                code = _handle(conn, plan)
            finally:
                os._exit(code)
        handlers.add(pid)
        conn.close()


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


# --------------------------------------------------------------------------
# The warm processes of this nbgrader process (outside the fence)
# --------------------------------------------------------------------------
_root: list[str] = []
_running: dict[str, tuple] = {}  # the warm process's bubblewrap and plan, as JSON -> (process, socket)


#: the longest temporary folder the warm processes' folders go in: a Unix socket's path (a kernel's, under
#: <folder>/grader-warm-*/grader-kernel-*/) must stay under 108 bytes
SOCKET_BASE_MAX = 40


def socket_base() -> str:
    """The temporary folder for the warm processes' and kernels' sockets: the system's (``TMPDIR``), or ``/tmp``
    where that one's path is too long for a socket under it (zmq: "File name too long")."""
    import tempfile

    base = os.path.realpath(tempfile.gettempdir())
    if len(base) > SOCKET_BASE_MAX and os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK):
        return "/tmp"
    return base


def fence_root() -> str:
    """The folder of kernels' connection folders and warm processes' sockets: the shared one (:data:`SHARED`)
    when this process was given one, else this process's own, made once."""
    import atexit
    import tempfile

    shared = os.environ.get(SHARED, "").strip()
    if shared:
        return os.path.realpath(shared)
    if not _root:
        _root.append(os.path.realpath(tempfile.mkdtemp(prefix="grader-warm-", dir=socket_base())))
        atexit.register(stop_all)
    return _root[0]


def warm_socket(bwrap_args: list[str], plan: dict, env: dict[str, str], wait: float = 30.0) -> str | None:
    """The socket of a warm process with this view of the machine and these load-time variables, started if
    needed (by this process, or by another nbgrader process sharing :data:`SHARED`); None if none answers."""
    import hashlib
    import shutil
    import subprocess
    import time

    fixed = {name: env.get(name) for name in LOAD_TIME_VARIABLES}
    key = json.dumps([bwrap_args, plan, fixed], sort_keys=True)
    if key in _running and _running[key][0].poll() is None:
        return _running[key][1]
    root = fence_root()
    shared = bool(os.environ.get(SHARED, "").strip())
    stem = os.path.join(root, "warm-" + hashlib.sha256(key.encode()).hexdigest()[:16])
    path, plan_path, pid_path = f"{stem}.sock", f"{stem}.json", f"{stem}.pid"
    deadline = time.monotonic() + wait
    for _ in range(2):
        try:  # the pid file is the lock: whoever makes it starts the warm process
            fd = os.open(pid_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            started = _read_pid(pid_path, deadline)
            if started and _alive(started):  # another nbgrader process's, or one of ours from an earlier batch
                while not os.path.exists(path):
                    if not _alive(started) or time.monotonic() > deadline:
                        return None
                    time.sleep(0.02)
                return path
            for stale in (pid_path, path, plan_path):  # it ended (idle): start it again
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(stale)
            continue
        with open(plan_path, "w") as f:
            json.dump({**plan, "idle_exit": IDLE_EXIT if shared else None}, f)
        command = [shutil.which("bwrap") or "bwrap", *bwrap_args, "--", sys.executable, "-m", "grader.warm",
                   "serve", path, plan_path]
        if shared:  # bubblewrap dies with its parent: a keeper that lives as long as the folder's maker
            command = [sys.executable, "-m", "grader.warm", "keep", os.path.join(root, OWNER), "--", *command]
        proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        with os.fdopen(fd, "w") as f:
            f.write(f"{proc.pid}\n")
        if not shared:
            _running[key] = (proc, path)
        while not os.path.exists(path):
            if proc.poll() is not None or time.monotonic() > deadline:
                return None
            time.sleep(0.02)
        return path
    return None


def _read_pid(pid_path: str, deadline: float) -> int | None:
    """The pid in a warm process's pid file, waiting for its maker to write it."""
    import time

    while True:
        try:
            with open(pid_path) as f:
                text = f.read().strip()
        except FileNotFoundError:
            return None
        if text.isdigit():
            return int(text)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


def stop_all() -> None:
    import shutil

    for proc, _path in _running.values():
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    _running.clear()
    if _root:
        shutil.rmtree(_root.pop(), ignore_errors=True)


#: the pid of the process that made a shared folder, in that folder: the keepers end with it
OWNER = "owner.pid"


def keep(owner_file: str, command: list[str]) -> int:
    """A shared warm process's parent (bubblewrap ends with its parent): run ``command`` until it ends, or until
    the process named in ``owner_file`` (the maker of the shared folder) has ended."""
    import subprocess

    owner = _read_pid(owner_file, 0)
    proc = subprocess.Popen(command)
    while True:
        try:
            return proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            if owner is None or not _alive(owner):
                proc.kill()
                return proc.wait()


@contextlib.contextmanager
def shared_warm_processes(prefix: str = "grader-warm-"):
    """A :data:`SHARED` folder for the nbgrader processes started inside the block (in their environment, the
    variable of this process): they share its warm processes, which end with the block, kernels and all."""
    import tempfile

    folder = os.path.realpath(tempfile.mkdtemp(prefix=prefix, dir=socket_base()))
    with open(os.path.join(folder, OWNER), "w") as f:
        f.write(f"{os.getpid()}\n")
    before = os.environ.get(SHARED)
    os.environ[SHARED] = folder
    try:
        yield folder
    finally:
        if before is None:
            os.environ.pop(SHARED, None)
        else:
            os.environ[SHARED] = before
        stop_shared(folder)


def stop_shared(folder: str) -> None:
    """End the warm processes of a :data:`SHARED` folder (each with its bubblewrap and kernels) and remove it."""
    import glob
    import shutil
    import time

    pids = [pid for pid in (_read_pid(p, 0) for p in glob.glob(os.path.join(folder, "warm-*.pid"))) if pid]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["keep"] and "--" in sys.argv:
        sys.exit(keep(sys.argv[2], sys.argv[sys.argv.index("--") + 1:]))
    elif sys.argv[1:2] == ["launch"] and "--" in sys.argv:
        cut = sys.argv.index("--")
        launch(sys.argv[2], sys.argv[cut + 1:])
    else:
        sys.exit("usage: python -m grader.warm serve SOCKET PLAN | launch SOCKET -- COLD COMMAND "
                 "| keep OWNER -- COMMAND")
