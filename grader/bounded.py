"""A computation on a learner's input, run within its own memory and time: :func:`run_bounded`.

Some of the grader's own work reads what a learner wrote (the static reader parses the submission's source): a
parser has no limit of its own, and a cell of 50 MB of source once took the nbgrader process to 6.9 GiB, which the
machine then killed with the classmates it was grading. Here the work runs in a child forked from the caller: the
child's address space may grow by ``memory_mb`` beyond what it inherited, its CPU by ``seconds``, and the caller
waits ``seconds`` of wall time for its answer. Over any of them, :class:`OverBudget` names which; the caller goes on.

The child only computes and writes its pickled result to a pipe; it touches none of the caller's threads, files or
sockets, and ends with ``os._exit``.
"""

from __future__ import annotations

import os
import pickle
import resource
import select
import signal
import time
from typing import Any, Callable


class OverBudget(RuntimeError):
    """The computation went over its budget (``what``: "memory", "time") or failed in its child."""

    def __init__(self, what: str, detail: str = ""):
        super().__init__(f"{what}{': ' + detail if detail else ''}")
        self.what = what


def _virtual_size() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def run_bounded(function: Callable[..., Any], *args: Any, memory_mb: int, seconds: float) -> Any:
    """``function(*args)`` in a forked child, within ``memory_mb`` MiB more address space and ``seconds`` of CPU and
    wall time; its result, or :class:`OverBudget`. The result must pickle."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, answer, end
        code = 0
        try:
            os.close(read)
            limit = _virtual_size() + (memory_mb << 20)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            cpu = int(seconds) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            try:
                answer = ("ok", function(*args))
            except MemoryError:
                answer = ("over", "memory")
            except RecursionError:
                answer = ("failed", "RecursionError")
            except BaseException as exc:  # noqa: BLE001 - the child's own failure, told to the caller
                answer = ("failed", type(exc).__name__)
            data = pickle.dumps(answer)
            with os.fdopen(write, "wb") as out:
                out.write(data)
        except BaseException:  # noqa: BLE001 - nothing of the child's may reach the caller's code
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    chunks, deadline = [], time.monotonic() + seconds
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                raise OverBudget("time", f"more than {seconds:g} s")
            chunk = os.read(read, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        _, status = os.waitpid(pid, 0)
    if not chunks:
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
            raise OverBudget("time", f"more than {seconds:g} s of CPU")
        raise OverBudget("memory", f"more than {memory_mb} MiB, or it ended with status {status}")
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "ok":
        return value
    if kind == "over":
        raise OverBudget(value, f"more than {memory_mb} MiB")
    raise OverBudget("failed", value)
