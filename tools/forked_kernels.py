"""Kernels forked from a warm process: a notebook's kernel starts in a fraction of a second, not three.

Most of a Python kernel's start is imports: torch alone takes 1.3-2.5 s of CPU
on a 2-core machine, ipykernel and IPython another half second, and the test
suite starts some sixty of them outside the grading fence. A warm process (:func:`serve`)
imports them once; every kernel after that is a ``fork()`` of it, which
inherits the imports and runs ipykernel's own start-up with the request's
arguments, environment and folder.

Two parts, both in this file:

* **the warm process** (``python tools/forked_kernels.py serve SOCKET``):
  imports :data:`PRELOAD`, listens on a Unix socket (mode 0600) and forks one
  kernel per request. It forks only for a request whose environment is its
  own, but for :data:`RUNTIME_VARIABLES` (read while a program runs, not as a
  library loads): OpenMP's thread count, torch's CPU kernels
  (``ATEN_CPU_CAPABILITY``), the Python path and the hash seed are fixed when
  a process starts, so a request that names others gets a fresh process. It
  never forks a grading kernel (a request carrying the grading fence's
  settings): that kernel starts behind its own fence (:mod:`grader.sandbox`).
* **the launcher** (``python -S tools/forked_kernels.py -f CONNECTION_FILE``,
  a kernelspec's ``argv``, :func:`write_kernelspec`): what jupyter_client
  starts and watches as the kernel's process. It hands the request and its
  stdin, stdout and stderr to the warm process, passes every signal it is
  sent to the kernel's process group (an interrupt reaches the kernel as
  SIGINT) and exits with the kernel's exit status. When the launcher is
  killed, the warm process kills the kernel's group. Where no warm process
  answers, or it refuses, the launcher becomes the ordinary kernel
  (``exec python -m ipykernel_launcher``): the same kernel, started afresh.

What a forked kernel shares with the warm process is what a fresh one would
compute the same way: the imported modules, in their just-imported state (the
warm process runs no code of theirs). What differs per process is redone:
the session, the folder, the environment, ``sys.argv``, the path (without
the first entry, as ``ipykernel_launcher`` starts), numpy's and torch's global random state
(drawn afresh, as at a fresh import), and the parent ipykernel watches (the warm process: a kernel does not
outlive it). :mod:`matplotlib` is not preloaded: it reads its backend from the
environment as it loads, and the kernel's inline backend is set by ipykernel.

The suite (``tests/conftest.py``) starts one warm process per pytest worker
and points the ``python3`` kernelspec at the launcher; kernels started by
``make lab``, ``make grade`` or a hub are the ordinary ones.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

#: the environment variable naming the warm process's socket
SOCKET_VARIABLE = "COURSE_FORKED_KERNELS"
#: imported once by the warm process: what every course kernel imports
PRELOAD = ("ipykernel.kernelapp", "ipykernel.ipkernel", "IPython.core.completer", "numpy", "torch")
#: environment variables a kernel reads while it runs, not as a library loads: a request may differ in these
#: (pytest sets the terminal's size and the current test; torch sets its compiler's cache once it has compiled,
#: and the compiler, not loaded by ``import torch``, reads it on each use)
RUNTIME_VARIABLES = frozenset({"JPY_PARENT_PID", "JPY_SESSION_NAME", "PYTEST_CURRENT_TEST", "COLUMNS", "LINES",
                               "TORCHINDUCTOR_CACHE_DIR", "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"})
#: a request carrying this variable is a grading kernel's: never forked (grader.sandbox.ENV_VAR)
GRADING_FENCE_VARIABLE = "COURSE_GRADING_SANDBOX"
#: a file the warm process appends one line to per request, "forked" or why not (unset: none)
LOG_VARIABLE = "COURSE_FORKED_KERNELS_LOG"
#: the signals the launcher passes on to the kernel
RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


# --------------------------------------------------------------------------
# The launcher: what jupyter_client starts (stdlib only; it runs under python -S)
# --------------------------------------------------------------------------
def ordinary_kernel(kernel_args: list[str]) -> None:
    """Become the ordinary kernel, started afresh (never returns)."""
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *kernel_args])


def _read_line(conn: socket.socket) -> dict | None:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def launch(kernel_args: list[str]) -> None:
    """Start a kernel with ``kernel_args`` (``-f CONNECTION_FILE``): forked by the warm process, else afresh."""
    path = os.environ.get(SOCKET_VARIABLE)
    if not path or GRADING_FENCE_VARIABLE in os.environ:
        ordinary_kernel(kernel_args)
    request = {"args": kernel_args, "env": dict(os.environ), "cwd": os.getcwd()}
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        answer = _read_line(conn)
    except OSError:
        answer = None
    if not answer or "pid" not in answer:
        ordinary_kernel(kernel_args)
    pid = answer["pid"]

    def relay(signum, _frame):
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            pass

    for signum in RELAYED:
        signal.signal(signum, relay)
    try:
        ended = _read_line(conn)
    except OSError:
        ended = None
    os._exit(ended["exit"] if ended else 1)


# --------------------------------------------------------------------------
# The warm process
# --------------------------------------------------------------------------
def refusal(env: dict[str, str]) -> str | None:
    """Why a kernel with this environment cannot be forked from this process (None: it can)."""
    if GRADING_FENCE_VARIABLE in env:
        return "a grading kernel starts behind its own fence"
    differ = sorted(k for k in set(env) | set(os.environ)
                    if k not in RUNTIME_VARIABLES and env.get(k) != os.environ.get(k))
    return f"its environment differs in {', '.join(differ)}" if differ else None


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _kernel(request: dict, fds: list[int], parent: int) -> int:
    """In the forked child: become the requested kernel, and return its exit code once it stops."""
    import random
    import tempfile

    import numpy
    import torch

    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # ipykernel stops when its parent, the warm process, is gone (its default was read as it loaded)
    args = [*request["args"], f"--IPKernelApp.parent_handle={parent}"]
    os.environ["JPY_PARENT_PID"] = str(parent)
    sys.argv = [sys.executable, *args]
    del sys.path[0]  # this script's folder: ipykernel_launcher drops its first entry too, and IPython adds ''
    numpy.random.seed()
    torch.seed()
    random.seed()
    tempfile.tempdir = None  # read TMPDIR again, as a fresh process does
    from ipykernel.kernelapp import launch_new_instance

    try:
        launch_new_instance(argv=args)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return 0


class WarmProcess:
    """The warm process's state: its socket, and the kernels it forked, by the launcher's connection."""

    def __init__(self, path: str):
        self.path = path
        self.parent = os.getppid()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o077)
        try:
            self.listener.bind(path)
        finally:
            os.umask(old)
        self.listener.listen(64)
        self.kernels: dict[socket.socket, int] = {}  # a launcher's connection -> its kernel's pid
        self.stopping = False

    def fork(self, conn: socket.socket) -> None:
        """Read one launcher's request and fork its kernel (or answer why not)."""
        from grader.warm import receive_request  # the grading kernels' warm process reads requests alike

        fds: list[int] = []
        try:
            request, fds = receive_request(conn)
            why = refusal(request["env"]) if len(fds) == 3 else "the launcher's streams did not arrive"
        except (OSError, ValueError, KeyError) as exc:
            why = f"the request could not be read: {exc}"
        self.log(why or "forked")
        if why:
            for fd in fds:
                os.close(fd)
            try:
                conn.sendall(json.dumps({"refused": why}).encode() + b"\n")
            except OSError:
                pass
            conn.close()
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                self.listener.close()
                for other in self.kernels:
                    other.close()
                conn.close()
                for signum in (signal.SIGTERM, signal.SIGCHLD):
                    signal.signal(signum, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                code = _kernel(request, fds, os.getppid())
            except BaseException:  # noqa: BLE001 - the child reports and exits, whatever happened
                import traceback

                traceback.print_exc()
            finally:
                import atexit

                atexit._run_exitfuncs()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        for fd in fds:
            os.close(fd)
        conn.settimeout(None)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        self.kernels[conn] = pid

    def log(self, line: str) -> None:
        if os.environ.get(LOG_VARIABLE):
            with open(os.environ[LOG_VARIABLE], "a", encoding="utf-8") as out:
                out.write(line + "\n")

    def reap(self) -> None:
        """Tell each launcher whose kernel stopped its exit code."""
        while self.kernels:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for conn, kernel in list(self.kernels.items()):
                if kernel == pid:
                    del self.kernels[conn]
                    try:
                        conn.sendall(json.dumps({"exit": _exit_code(status)}).encode() + b"\n")
                    except OSError:
                        pass
                    conn.close()

    def kill(self, conn: socket.socket) -> None:
        """The launcher is gone (killed): so is its kernel, with every process it started."""
        try:
            os.killpg(self.kernels[conn], signal.SIGKILL)
        except ProcessLookupError:
            pass

    def run(self) -> None:
        gone: set[socket.socket] = set()  # launchers that went away, whose kernels are not yet reaped
        while not self.stopping and os.getppid() == self.parent:
            watched = [self.listener, *(c for c in self.kernels if c not in gone)]
            try:
                ready, _, _ = select.select(watched, [], [], 0.2)
            except InterruptedError:
                ready = []
            for conn in ready:
                if conn is self.listener:
                    try:
                        self.fork(self.listener.accept()[0])
                    except OSError:
                        pass
                elif not conn.recv(1):
                    gone.add(conn)
                    self.kill(conn)
            self.reap()
            gone &= set(self.kernels)
        self.stop()

    def stop(self) -> None:
        for conn in list(self.kernels):
            self.kill(conn)
        for _ in range(50):
            if not self.kernels:
                break
            self.reap()
            select.select([], [], [], 0.05)
        self.listener.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def serve(path: str) -> None:
    """The warm process: listen on ``path`` at once (a kernel asked for early waits), then import and fork."""
    import importlib

    warm = WarmProcess(path)

    def stop(_signum, _frame):
        warm.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for name in PRELOAD:
        importlib.import_module(name)
    warm.run()


def ordinary_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a program whose kernels start the ordinary way: no warm process, the usual kernelspec."""
    env = dict(env)
    path = env.pop(SOCKET_VARIABLE, None)
    if path:
        rest = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p and p != os.path.dirname(path)]
        env["JUPYTER_PATH"] = os.pathsep.join(rest)
        if not rest:
            del env["JUPYTER_PATH"]
    return env


def write_kernelspec(folder: str, name: str = "python3") -> str:
    """A kernelspec folder under ``folder`` (a ``JUPYTER_PATH`` entry) whose kernel is forked; returns its path.

    The warm process's socket goes in the same folder (:func:`ordinary_environment` relies on it).
    """
    spec = os.path.join(folder, "kernels", name)
    os.makedirs(spec, exist_ok=True)
    with open(os.path.join(spec, "kernel.json"), "w", encoding="utf-8") as out:
        json.dump({"argv": [sys.executable, "-S", os.path.abspath(__file__), "-f", "{connection_file}"],
                   "display_name": "Python 3 (ipykernel)", "language": "python",
                   "metadata": {"debugger": True}}, out, indent=1)
    return spec


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
    else:
        launch(sys.argv[1:])
