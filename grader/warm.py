"""Warm grading kernels: a fenced kernel starts by ``fork()`` from a process that has imported torch already.

A grading kernel's start was most of a submission's grading time: bubblewrap
starts a fresh Python, which imports torch (1.3-3 s of CPU on a 2-core
machine), ipykernel and the grader's kernel side, for every notebook. Here one
**warm process** does those imports once (for a whole ``make grade`` run,
shared by its nbgrader processes through :data:`SHARED`; else one per
nbgrader process), inside one bubblewrap with the OS fence's view of the
machine (:func:`grader.sandbox.bwrap_arguments`), where the submissions'
scratch folders and the kernels' connection folders are writable. Each kernel
is a fork of it, enclosed before any learner code runs
(:mod:`grader.enclosure`: a user of its own, its own namespaces, ``/proc``,
``/tmp`` and shared memory, its limits, no capabilities).

The pieces:

- **the launcher** (``python -S -m grader.warm launch SPEC -- ipykernel_launcher ARGS``, the kernel command
  :class:`grader.kernel.FencedKernelManager` gives jupyter_client): hands the warm process the kernel's
  arguments, environment, folder and standard streams; passes on every signal it gets; exits with the kernel's
  status, and writes how it ended (a limit it reached) where only the grader reads it. Where no warm process
  answers, or it refuses, it starts one just for this kernel (the same enclosure, without the imports done
  ahead): a kernel **started cold**;
- **the warm process** (``serve``), which forks one handler per request and never reads a request itself, so
  nothing of one learner's grading is in its memory when it forks the next; a shared one runs under a
  **keeper** (``keep``) that ends it when the run that made the shared folder ends;
- **the handler**: makes the kernel (:func:`grader.enclosure.start`), relays signals to it and reports its end.

``GRADER_WARM_KERNELS=off`` starts every grading kernel cold.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys

#: the switch: "off" starts every grading kernel cold
SWITCH = "GRADER_WARM_KERNELS"
#: imported once by the warm process: what every grading kernel imports (the plan's kernel modules too)
#: (ipykernel.debugger brings debugpy, which a kernel imports as it starts: 0.16 s of each kernel's 0.28 s start)
PRELOAD = ("numpy", "torch", "torch._dynamo", "ipykernel.kernelapp", "ipykernel.ipkernel", "IPython.core.completer",
           "grader.sandbox",
           "ipykernel.debugger", "IPython.extensions", "tornado.gen", "tornado.locks", "tornado.queues")
#: variables fixed as a library loads: a request that differs in one is started cold
LOAD_TIME_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY", "PYTHONPATH", "PYTHONHASHSEED",
                       "OMP_WAIT_POLICY")
#: what every grading kernel's environment says, whoever started it
KERNEL_ENVIRONMENT = {"TMPDIR": "/tmp", "IPYTHONDIR": "/tmp/ipython", "JPY_PARENT_PID": "0", "HOME": "/tmp",
                      "USER": "grading-kernel", "LOGNAME": "grading-kernel"}
#: what of the grader's environment a grading kernel inherits, by name: an allowlist, so that no password, token or
#: database URL reaches it under any name (MYSQL_PWD did, past a filter of names); the kernel's own (HOME, TMPDIR,
#: USER...) are set where it starts (:data:`KERNEL_ENVIRONMENT`)
KERNEL_VARIABLES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "COURSE_GRADING_SANDBOX",  # the fence's settings (grader.sandbox.ENV_VAR)
    "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING",
    "PYTHONWARNINGS", "PYDEVD_DISABLE_FILE_VALIDATION", "MPLBACKEND",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "ATEN_CPU_CAPABILITY", "CUDA_VISIBLE_DEVICES",
})
#: and every variable starting with one of these (the locale's categories)
KERNEL_PREFIXES = ("LC_",)


def kernel_environment(env) -> dict[str, str]:
    """The part of ``env`` a grading kernel inherits: the names of :data:`KERNEL_VARIABLES` and
    :data:`KERNEL_PREFIXES`, nothing else."""
    return {k: v for k, v in env.items() if k in KERNEL_VARIABLES or k.startswith(KERNEL_PREFIXES)}


#: the signals the launcher passes on to the kernel
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

#: a folder that outlives one nbgrader process (``make grade`` makes one per run, a cluster worker one per worker):
#: its warm processes serve every nbgrader process given the same folder, and end when its maker stops them
#: (:func:`stop_shared`) or after :data:`IDLE_EXIT` seconds with no kernel of theirs running
SHARED = "GRADER_WARM_SHARED"
IDLE_EXIT = 60.0
#: in a shared folder: the pid of the process that made it (the keepers end with it), and the run's control groups
OWNER, GROUP = "owner.pid", "cgroups.json"
#: the folder of the submissions' scratch copies, in the fence's folder
WORK = "work"


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
            fds += more
            if not chunk:
                break
            data += chunk
            if len(data) > 1 << 24:
                raise ValueError("the request is over 16 MiB")
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


def _ask(conn: socket.socket, request: dict) -> dict | None:
    try:
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        return _read_line(conn)
    except (OSError, ValueError):
        return None


def launch(spec_path: str, kernel_args: list[str]) -> None:
    """Start the kernel with ``kernel_args`` (ipykernel's) warm, else cold; relay signals; end as it ends.

    ``spec_path``: a JSON file the grader wrote for this kernel: the warm process's ``socket`` (or null), the
    bubblewrap arguments and ``plan`` of a cold start, and where to write how the kernel ``ended``.
    """
    with open(spec_path) as f:
        spec = json.load(f)
    request = {"args": kernel_args, "env": dict(os.environ), "cwd": os.getcwd()}
    answer, conn, cold = None, None, None
    if spec.get("socket"):
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(spec["socket"])
            answer = _ask(conn, request)
        except OSError:
            answer = None
    if not answer or not answer.get("started"):
        why = (answer or {}).get("refused", "no warm process answered" if spec.get("socket") else "warm kernels off")
        print(f"grading kernel: started cold: {why}", file=sys.stderr, flush=True)
        if conn is not None:
            conn.close()
        conn, cold = _start_cold(spec)
        answer = _ask(conn, request) if conn is not None else None
        if not answer or not answer.get("started"):
            why = (answer or {}).get("refused", "the cold start did not answer")
            print(f"grading kernel: could not start: {why}", file=sys.stderr, flush=True)
            _write_end(spec, {"exit": 70, "refused": why})
            os._exit(70)

    def relay(signum, _frame):  # SIGTERM, the grader's "stop": the kernel is killed, and how it ended reported
        message = {"kill": True} if signum == signal.SIGTERM else {"signal": signum}
        try:
            conn.sendall(json.dumps(message).encode() + b"\n")
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
        except (OSError, ValueError):
            ended = None
            break
    _write_end(spec, ended or {"exit": 1})
    if cold is not None:
        with contextlib.suppress(OSError):
            cold.kill()
    os._exit(int(ended["exit"]) if ended else 1)


def _write_end(spec: dict, ended: dict) -> None:
    path = spec.get("ended")
    if path:
        with contextlib.suppress(OSError):
            with open(path, "w") as f:
                json.dump(ended, f)


def _start_cold(spec: dict):
    """A warm process for this kernel alone, without the imports ahead: the same enclosure, the same view."""
    import subprocess

    ours, theirs = socket.socketpair()
    command = [spec["bwrap_executable"], *spec["bwrap"], "--", spec["python"], "-m", "grader.warm", "once",
               json.dumps(spec["plan"]), str(theirs.fileno())]
    try:
        proc = subprocess.Popen(command, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=spec.get("env"))
    except OSError as exc:
        print(f"grading kernel: bubblewrap could not start: {exc}", file=sys.stderr, flush=True)
        return None, None
    finally:
        theirs.close()
    return ours, proc


# --------------------------------------------------------------------------
# The warm process and its handlers (inside the fence's bubblewrap)
# --------------------------------------------------------------------------
def refusal(request: dict, plan: dict) -> str | None:
    """Why this request is not started here (None: it can be)."""
    env = request.get("env", {})
    differ = [k for k in LOAD_TIME_VARIABLES if env.get(k) != os.environ.get(k)] if plan.get("preloaded") else []
    if differ:
        return f"its environment differs in {', '.join(differ)}, which a library reads as it loads"
    try:
        settings = json.loads(env[plan["env_var"]])
        workdir, exchange = os.path.realpath(settings["workdir"]), os.path.realpath(settings["exchange"])
    except (KeyError, ValueError, TypeError):
        return "it carries no grading fence settings"
    if not _under(workdir, [plan["work_root"]]) or workdir == plan["work_root"]:
        return f"its folder {workdir} is not a submission's scratch folder under {plan['work_root']}"
    if not _under(os.path.dirname(exchange), [plan["fence_root"]]) or os.path.dirname(exchange) == plan["fence_root"]:
        return f"its connection folder is not under {plan['fence_root']}"
    return None


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


#: in a grading kernel's environment: "warm" (forked from a warm process) or "cold" (its imports done afresh)
STARTED = "GRADER_KERNEL_STARTED"


def _become_kernel(request: dict, fds: list[int], how: str) -> int:
    """In the enclosed process 1: the requested ipykernel, with the request's streams, folder and environment."""
    for target, fd in enumerate(fds):  # first, so that whatever fails below is on the kernel's own stderr
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)  # nothing of the warm process's: its socket, the handler's pipes
    import random
    import tempfile

    import numpy
    import torch

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(kernel_environment(request["env"]))  # the launcher's is allowlisted already: again, here
    os.environ.update(KERNEL_ENVIRONMENT)
    os.environ[STARTED] = how
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
    """A handler (a fork of the warm process): read one request, make its kernel enclosed, relay, report."""
    from grader import enclosure

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    enclosure.die_with_parent()
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
    settings = json.loads(request["env"][plan["env_var"]])
    how = "warm" if plan.get("preloaded") else "cold"
    started = enclosure.start(settings, plan, lambda: _become_kernel(request, fds, how))
    for fd in fds:
        os.close(fd)
    if started.refused:
        answer({"refused": started.refused})
        return 0
    conn.settimeout(None)
    answer({"started": True, "uid": started.uid})
    buffer = b""
    middle_gone = _pidfd(started.middle)
    while True:
        done, status = os.waitpid(started.middle, os.WNOHANG)
        if done:
            code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            answer(enclosure.ended(started, plan, code))
            return 0
        ready, _, _ = select.select([conn] + ([middle_gone] if middle_gone is not None else []), [], [],
                                    0.5 if middle_gone is not None else 0.02)
        if conn not in ready:
            continue
        chunk = conn.recv(4096)
        if not chunk:  # the launcher is gone: so is its kernel, with every process of its namespace
            with contextlib.suppress(ProcessLookupError):
                os.kill(started.pid, signal.SIGKILL)
            os.waitpid(started.middle, 0)
            enclosure.ended(started, plan, 137)
            return 0
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
                os.kill(started.pid, signal.SIGKILL if message.get("kill") else int(message["signal"]))
            except (ValueError, KeyError, TypeError, AttributeError, ProcessLookupError):
                pass


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when process ``pid`` ends (None where the system has none)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _prepare(plan: dict) -> None:
    """The warm process's own start: its /proc (so that each kernel may mount one of its own), not dumpable."""
    from grader import enclosure

    if plan.get("privileged"):
        enclosure._mount("proc", "/proc", "proc", enclosure._MS_NOSUID | enclosure._MS_NODEV | enclosure._MS_NOEXEC)
    enclosure.not_dumpable()  # no kernel may read this process's memory or trace it


def serve(path: str, plan_path: str) -> None:
    """The warm process: listen on ``path`` at once, import :data:`PRELOAD`, fork a handler per request."""
    import importlib

    with open(plan_path) as f:
        plan = json.load(f)
    _prepare(plan)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped as they end
    plan = {**plan, "preloaded": True}
    for name in (*PRELOAD, *plan.get("kernel_modules", ())):
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


def once(plan_json: str, fd: int) -> int:
    """A cold start: the warm process's handler for the one launcher on ``fd``, without the imports ahead."""
    plan = json.loads(plan_json)
    _prepare(plan)
    conn = socket.socket(fileno=fd)
    return _handle(conn, plan)


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
_group: list = []  # this process's own run group, when it made the fence's folder itself
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


def _new_folder(prefix: str) -> str:
    """A folder for the fence (sockets, connection folders, scratch copies): traversable by the kernels' users,
    listable by no one else."""
    import tempfile

    folder = os.path.realpath(tempfile.mkdtemp(prefix=prefix, dir=socket_base()))
    os.chmod(folder, 0o711)
    os.mkdir(os.path.join(folder, WORK), 0o711)
    return folder


def fence_root() -> str:
    """The folder of kernels' connection folders, scratch folders and warm processes' sockets: the shared one
    (:data:`SHARED`) when this process was given one, else this process's own, made once."""
    import atexit

    shared = os.environ.get(SHARED, "").strip()
    if shared:
        return os.path.realpath(shared)
    if not _root:
        _root.append(_new_folder("grader-warm-"))
        atexit.register(stop_all)
    return _root[0]


def work_root() -> str:
    """The folder of the submissions' scratch copies (each kernel sees its own alone)."""
    return os.path.join(fence_root(), WORK)


def run_group() -> dict | None:
    """The control groups of this grading run, as a plan (None: none): the shared folder's, else this process's."""
    from grader import cgroups

    shared = os.environ.get(SHARED, "").strip()
    if shared:
        try:
            with open(os.path.join(shared, GROUP)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    if not _group:
        fence_root()
        _group.append(cgroups.make_run_group())
    return _group[0].as_plan() if _group[0] else None


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

    from grader import cgroups

    for proc, _path in _running.values():
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    _running.clear()
    if _group:
        cgroups.remove_run_group(_group.pop())
    if _root:
        shutil.rmtree(_root.pop(), ignore_errors=True)


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
    variable of this process): they share its warm processes and its control groups, which end with the block,
    kernels and all."""
    from grader import cgroups

    folder = _new_folder(prefix)
    with open(os.path.join(folder, OWNER), "w") as f:
        f.write(f"{os.getpid()}\n")
    group = cgroups.make_run_group()
    with open(os.path.join(folder, GROUP), "w") as f:
        json.dump(group.as_plan() if group else None, f)
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
    """End the warm processes of a :data:`SHARED` folder (each with its bubblewrap and kernels), remove the run's
    control groups and the folder."""
    import glob
    import shutil
    import time

    from grader import cgroups

    pids = [pid for pid in (_read_pid(p, 0) for p in glob.glob(os.path.join(folder, "warm-*.pid"))) if pid]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        with open(os.path.join(folder, GROUP)) as f:
            cgroups.remove_run_group(cgroups.RunGroup.from_plan(json.load(f)))
    except (OSError, ValueError):
        pass
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["once"]:
        sys.exit(once(sys.argv[2], int(sys.argv[3])))
    elif sys.argv[1:2] == ["keep"] and "--" in sys.argv:
        sys.exit(keep(sys.argv[2], sys.argv[sys.argv.index("--") + 1:]))
    elif sys.argv[1:2] == ["launch"] and "--" in sys.argv:
        cut = sys.argv.index("--")
        launch(sys.argv[2], sys.argv[cut + 1:])
    else:
        sys.exit("usage: python -m grader.warm serve SOCKET PLAN | once PLAN FD | launch SPEC -- KERNEL ARGS "
                 "| keep OWNER -- COMMAND")
