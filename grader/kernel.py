"""The grading kernel as the autograder drives it: started inside bubblewrap, and asked to run one line quietly.

:class:`FencedKernelManager` starts the kernel inside the OS fence
(:mod:`grader.sandbox`); :func:`run_quietly` runs one line in it outside the
notebook (how the judge's requests reach :mod:`grader.runner`), within the
cell time limit: a line that does not return is interrupted, and a kernel
that dies or does not answer is reported as such.
"""

from __future__ import annotations

import asyncio
import queue
import shutil
import sys
import time

from jupyter_client.manager import AsyncKernelManager


class FencedKernelManager(AsyncKernelManager):
    """A kernel started inside bubblewrap, talking to the grader over Unix sockets in a folder both can see.

    The fence unshares the network, so the kernel's sockets cannot be TCP
    ports of the grader's host: they are files (``transport = "ipc"``) in
    the fence's folder, the one folder mounted read-write besides the
    submission's. Interrupts (a cell past its time limit) go as messages,
    since the kernel's process is not the grader's child but bwrap's.
    """

    fence_args: list[str] = []
    #: a warm process's socket (grader.warm): the kernel is forked there, else started cold as below
    warm_socket: str | None = None

    def format_kernel_cmd(self, extra_arguments=None):
        cold = [shutil.which("bwrap") or "bwrap", *self.fence_args, "--", *super().format_kernel_cmd(extra_arguments)]
        if self.warm_socket:
            return [sys.executable, "-S", "-m", "grader.warm", "launch", self.warm_socket, "--", *cold]
        return cold

    @property
    def kernel_spec(self):
        spec = super().kernel_spec
        if spec is not None:
            # this environment's own kernel, whatever kernelspec is found first (the test suite's starts its
            # kernels from a warm process outside the fence, tools/forked_kernels.py: never a grading kernel)
            spec.argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            spec.interrupt_mode = "message"
        return spec


def fenced_manager(bwrap_args: list[str], warm_socket: str | None = None) -> type[FencedKernelManager]:
    """A :class:`FencedKernelManager` class whose kernels start inside bubblewrap with these arguments (forked by
    the warm process at ``warm_socket`` when there is one)."""
    return type("Fenced", (FencedKernelManager,), {"fence_args": list(bwrap_args), "warm_socket": warm_socket})


class KernelGone(RuntimeError):
    """The kernel died while the judge was calling the learner's function."""


class TooSlow(RuntimeError):
    """The learner's function did not return within the cell time limit."""


async def run_quietly(kc, km, code: str, timeout: float) -> None:
    """Run one line in the kernel, outside the notebook (no output kept), and wait for it to finish.

    ``kc``, ``km``: the kernel's client and manager. Past ``timeout`` seconds
    the line is interrupted and :class:`TooSlow` raised once the kernel
    answers; :class:`KernelGone` if it died or does not answer the interrupt.
    """
    from nbclient.util import ensure_async

    msg_id = kc.execute(code, silent=True, store_history=False, allow_stdin=False, stop_on_error=False)
    deadline = time.monotonic() + timeout
    interrupted = False
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            if interrupted:
                raise KernelGone("the kernel did not answer after an interrupt")
            await ensure_async(km.interrupt_kernel())
            interrupted, deadline = True, time.monotonic() + 10
            continue
        try:
            msg = await ensure_async(kc.shell_channel.get_msg(timeout=min(remaining, 1.0)))
        except (queue.Empty, TimeoutError, asyncio.TimeoutError):
            if not await ensure_async(km.is_alive()):
                raise KernelGone("the kernel died while the hidden tests called your function") from None
            continue
        if msg.get("parent_header", {}).get("msg_id") == msg_id:
            if interrupted:
                raise TooSlow(f"your function ran longer than {timeout} s on the hidden cases "
                              "and was stopped: this exercise scores zero")
            return
