"""Long-lived nbgrader processes: ``make grade`` pays nbgrader's start once per process, not once per batch.

``nbgrader autograde`` run as a command spends about 0.85 s of CPU importing
nbgrader, nbconvert, torch and the grader before it grades anything, and
``make grade`` ran one per batch of learners of every assignment: 22 of them
for 11 assignments graded two at a time. A :class:`NbgraderProcess` is one
nbgrader process that stays up for the whole ``make grade``. It reads
requests, each the argument list of one ``nbgrader autograde`` command
(:func:`classroom.batch.autograde_arguments`), and runs that command in-process
with nbgrader's own application (:func:`run_command`: ``NbGraderApp`` and
its subcommand's singletons cleared before and after, so that every request
loads the course's ``nbgrader_config.py`` afresh from its command line, as
the command would). The fence, the judge and the gradebook are the same code,
run the same way; only the imports are shared.

What a request prints goes, with its kernels' output, to the process's log
file; the reply carries the exit status the command would have had, and the
part of the log the request wrote (:meth:`NbgraderProcess.run`). Threads: a
request names the grading kernels' thread count, which the process sets in
its environment (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``: the grader's warm
kernels are chosen by it) and for its own torch, unless the instructor set
them before ``make grade``. A request may also name :data:`REQUEST_VARIABLES`
for its own run (a cluster task's grading secret: ``GRADING_SECRET_FILE``,
which the course's ``nbgrader_config.py`` reads as each request loads it);
they are restored when the request ends.

A process that dies while it grades (a crash in nbgrader or the judge) fails
its request, which reads as a failed command naming its log; the next
request starts a fresh process. :class:`NbgraderProcesses` holds the
processes of one ``make grade`` (``jobs`` of them) and hands each batch the
next free one.

    python -m grader.nbgrader_processes serve REQUESTS_FD REPLIES_FD   # one process's side
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path

#: what sets the threads of torch (and the BLAS under it) in a grading kernel: a request sets them
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: how much of a batch's log a reply carries (the end of it)
LOG_KEPT = 64 * 1024
#: what a request may set for its own run, and no longer (None: unset): the grading secret's file of a cluster task
REQUEST_VARIABLES = ("GRADING_SECRET_FILE",)


# --------------------------------------------------------------------------
# One process's side
# --------------------------------------------------------------------------
class FailedSubmissions(logging.Handler):
    """The submissions nbgrader could not grade, as nbgrader's converter itself reports them (its log record from
    ``convert_notebooks``, in this process): never read from text a kernel or a file name could have written."""

    PATTERN = re.compile(r"^There was an error processing assignment '([^']*)' for student '([^']*)'$")

    def __init__(self):
        super().__init__(logging.ERROR)
        self.failed: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.funcName != "convert_notebooks" or not record.pathname.endswith(
                os.path.join("nbgrader", "converters", "base.py")):
            return
        found = self.PATTERN.match(record.getMessage())
        if found:
            self.failed.append((found.group(1), found.group(2)))


def run_command(argv: list[str]) -> tuple[int, list[tuple[str, str]]]:
    """``nbgrader autograde ...`` (``argv``, from ``autograde`` on) in this process: the exit status the command
    would have had, and the (assignment, student) pairs it could not grade."""
    from jupyter_core.application import NoStart
    from nbgrader.apps.autogradeapp import AutogradeApp
    from nbgrader.apps.nbgraderapp import NbGraderApp

    if not argv or argv[0] != "autograde":
        print(f"nbgrader process: only autograde is run here, not {argv[:1]}", file=sys.stderr)
        return 2, []

    def fresh() -> None:  # the application and its subcommand are singletons: each request gets new ones
        AutogradeApp.clear_instance()
        NbGraderApp.clear_instance()

    fresh()
    failures = FailedSubmissions()
    watched = [logging.getLogger()]
    watched[0].addHandler(failures)
    try:
        app = NbGraderApp.instance()
        app.initialize(argv)
        for logger in (app.log, getattr(app.subapp, "log", None)):
            if logger is not None and logger not in watched:
                logger.addHandler(failures)
                watched.append(logger)
        app.start()
        return 0, failures.failed
    except NoStart:  # how a Jupyter application says its subcommand ran (the command's launch_instance agrees)
        return 0, failures.failed
    except SystemExit as exc:  # nbgrader's own exit: 1 when a submission could not be graded
        return (exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)), failures.failed
    except BaseException:  # noqa: BLE001 - as the command would: the traceback, and a failed exit
        traceback.print_exc()
        return 1, failures.failed
    finally:
        for logger in watched:
            logger.removeHandler(failures)
        fresh()
        sys.stdout.flush()
        sys.stderr.flush()


def set_threads(threads: dict[str, str]) -> None:
    """The kernels' thread counts for this request (and this process's torch), where the instructor set none."""
    for name, value in threads.items():
        if name in THREAD_VARIABLES and name not in _INSTRUCTOR_SET:
            os.environ[name] = str(value)
    if "OMP_NUM_THREADS" in os.environ:
        import torch

        torch.set_num_threads(max(1, int(os.environ["OMP_NUM_THREADS"])))


#: the thread variables the instructor set before make grade: a request never changes them
_INSTRUCTOR_SET = {n for n in os.environ.get("COURSE_GRADING_OWN_THREADS", "").split(",") if n}


@contextlib.contextmanager
def request_environment(variables: dict[str, str | None]):
    """:data:`REQUEST_VARIABLES` as one request names them (None: unset), restored after it; any other name is
    refused (a request never changes the fence's own settings)."""
    unknown = sorted(set(variables) - set(REQUEST_VARIABLES))
    if unknown:
        raise ValueError(f"a request may set {list(REQUEST_VARIABLES)} only, not {unknown}")
    before = {name: os.environ.get(name) for name in variables}
    for name, value in variables.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = str(value)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def serve(requests_fd: int, replies_fd: int) -> int:
    """Answer requests until the requests' pipe closes: each line ``{"argv": [...], "threads": {...},
    "environment": {...}}`` (the last optional), each reply ``{"returncode": N, "failed": [[student, why], ...]}``
    once everything the request
    printed is in the log. What every request needs is imported first, while ``make grade`` is still preparing
    the gradebook (or a cluster worker waits for its first task)."""
    import nbgrader.apps.nbgraderapp  # noqa: F401
    import nbgrader.converters  # noqa: F401

    import grader.autograde  # noqa: F401
    import grader.judge  # noqa: F401

    with os.fdopen(requests_fd, "r", encoding="utf-8") as requests, \
            os.fdopen(replies_fd, "w", encoding="utf-8") as replies:
        for line in requests:
            request = json.loads(line)
            set_threads(request.get("threads", {}))
            failed = []
            try:
                with request_environment(request.get("environment", {})):
                    code, failed = run_command(list(request["argv"]))
            except ValueError as exc:  # a variable no request may set: refused, as a failed command
                print(f"nbgrader process: {exc}", file=sys.stderr)
                code = 2
            replies.write(json.dumps({"returncode": code, "failed": failed}) + "\n")
            replies.flush()
    return 0


# --------------------------------------------------------------------------
# make grade's side
# --------------------------------------------------------------------------
@dataclass
class NbgraderProcess:
    """One long-lived nbgrader process for the course at ``root``, started on its first request; its log in
    ``log_dir`` (None: the system's temporary folder)."""

    root: Path
    env: dict[str, str]
    log_dir: str | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _requests: object = field(default=None, repr=False)
    _replies: object = field(default=None, repr=False)
    _log: Path | None = field(default=None, repr=False)
    #: the largest resident memory any of this object's processes reached, in KiB (read after each request)
    peak_kib: int = 0

    def _start(self) -> None:
        req_read, req_write = os.pipe()
        rep_read, rep_write = os.pipe()
        fd, log = tempfile.mkstemp(prefix="nbgrader-", suffix=".log", dir=self.log_dir)
        self._log = Path(log)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "grader.nbgrader_processes", "serve", str(req_read), str(rep_write)],
                cwd=self.root, env=self.env, stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT,
                pass_fds=(req_read, rep_write))
        finally:
            os.close(fd)
            os.close(req_read)
            os.close(rep_write)
        self._requests = os.fdopen(req_write, "w", encoding="utf-8")
        self._replies = os.fdopen(rep_read, "r", encoding="utf-8")

    def start(self) -> None:
        """Start the process now (it imports what grading needs while the caller does other work)."""
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            self._start()

    def run(self, argv: list[str], threads: dict[str, str],
            environment: dict[str, str | None] | None = None) -> subprocess.CompletedProcess:
        """``nbgrader *argv`` in this process: its exit status, and what it printed as its ``stdout``.
        ``environment``: :data:`REQUEST_VARIABLES` for this request alone."""
        self.start()
        start = self._log.stat().st_size
        try:
            request = {"argv": argv, "threads": threads, **({"environment": environment} if environment else {})}
            self._requests.write(json.dumps(request) + "\n")
            self._requests.flush()
            line = self._replies.readline()
        except (BrokenPipeError, OSError):
            line = ""
        with self._log.open("rb") as log:
            end = log.seek(0, os.SEEK_END)
            log.seek(max(start, end - LOG_KEPT))
            printed = log.read(LOG_KEPT).decode("utf-8", errors="replace")
        if end - start > LOG_KEPT:
            printed = f"[... {end - start - LOG_KEPT} bytes of this batch's log not shown]\n" + printed
        if not line:  # the process died with the request: as a command that crashed, and the next one is fresh
            code = self._proc.wait()
            self.close()
            done = subprocess.CompletedProcess(
                argv, code or 1, printed, f"the nbgrader process grading this submission died (exit status {code})")
            done.failed = None  # not known: the whole request failed
            return done
        self.peak_kib = max(self.peak_kib, _peak_kib(self._proc.pid))
        reply = json.loads(line)
        done = subprocess.CompletedProcess(argv, int(reply["returncode"]), printed, "")
        done.failed = [tuple(pair) for pair in reply.get("failed", [])]
        return done

    def stop(self) -> None:
        """Ask the process to end (it does when its requests' pipe closes), without waiting for it."""
        with contextlib.suppress(OSError):
            if self._requests is not None:
                self._requests.close()

    def close(self) -> None:
        """Stop the process, wait for its end, and remove its log."""
        for stream in (self._requests, self._replies):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        if self._proc is not None:
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._log is not None:
            self._log.unlink(missing_ok=True)
        self._proc = self._requests = self._replies = self._log = None


@dataclass
class NbgraderProcesses:
    """The long-lived nbgrader processes of one ``make grade``: ``count`` of them, each batch on a free one."""

    root: Path
    count: int
    env: dict[str, str]
    _free: queue.Queue = field(default_factory=queue.Queue, repr=False)
    _all: list[NbgraderProcess] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        own = [n for n in THREAD_VARIABLES if n in self.env]
        self.env = dict(self.env, COURSE_GRADING_OWN_THREADS=",".join(own))
        for _ in range(self.count):
            process = NbgraderProcess(self.root, self.env)
            self._all.append(process)
            self._free.put(process)

    def start(self) -> None:
        """Start every process now, so that their imports overlap the caller's own preparation."""
        for process in self._all:
            process.start()

    def run(self, argv: list[str], threads: dict[str, str]) -> subprocess.CompletedProcess:
        process = self._free.get()
        try:
            return process.run(argv, threads)
        finally:
            self._free.put(process)

    def peak_mb(self) -> float:
        """The largest resident memory one of the processes reached, in MiB (after the requests so far)."""
        return max((p.peak_kib for p in self._all), default=0) / 1024

    def close(self) -> None:
        for process in self._all:  # all asked first: they end together
            process.stop()
        for process in self._all:
            process.close()


def _peak_kib(pid: int) -> int:
    """A process's peak resident memory (VmHWM), in KiB; 0 if it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "serve":
        print("usage: python -m grader.nbgrader_processes serve REQUESTS_FD REPLIES_FD", file=sys.stderr)
        return 2
    return serve(int(args[1]), int(args[2]))


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # the log is flushed and the replies sent: no teardown of torch and nbgrader to wait for
