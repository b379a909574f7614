"""The grading kernel as the autograder drives it: started inside bubblewrap, and asked to run one line quietly.

:class:`FencedKernelManager` starts the kernel inside the OS fence
(:mod:`grader.sandbox`); :func:`run_quietly` runs one line in it outside the
notebook (how the judge's requests reach :mod:`grader.runner`), within the
cell time limit: a line that does not return is interrupted, and a kernel
that dies or does not answer is reported as such.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import time

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from traitlets import DottedObjectName, Type


class FencedKernelClient(AsyncKernelClient):
    """jupyter_client's client, with a wait for a new kernel that ends as soon as the kernel is ready.

    jupyter_client's ``wait_for_ready`` asks for ``kernel_info`` until the reply comes on the shell channel and
    a message on IOPub shows that channel connected too, then reads IOPub until it has been silent for 0.2 s:
    a fixed 0.2 s of every kernel's start. Here the wait ends when the reply's own request reports ``idle`` on
    IOPub, the last message that request publishes: the same proof that both channels are connected, and
    nothing of the start is left on IOPub for the first cell (whose messages the autograder matches to their
    request anyway).
    """

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        idle: set[str] = set()  # the requests whose idle status came through IOPub
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except queue.Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                # the reply may answer an earlier request than the last one sent: wait for that one's idle
                if await self._idle_on_iopub(reply["parent_header"].get("msg_id"), idle, within=0.2):
                    self._handle_kernel_info_reply(reply)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")

    async def _idle_on_iopub(self, msg_id: str | None, idle: set[str], within: float) -> bool:
        """Read IOPub, noting in ``idle`` each request that reports ``idle``, until request ``msg_id`` has (True),
        or nothing comes for ``within`` s (False: IOPub was not connected yet when the kernel published it)."""
        while msg_id not in idle:
            try:
                msg = await self.iopub_channel.get_msg(timeout=within)
            except queue.Empty:
                return False
            if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                idle.add(msg["parent_header"].get("msg_id"))
        return True


class FencedKernelManager(AsyncKernelManager):
    """A kernel started inside the OS fence, talking to the grader over Unix sockets in a folder both can see.

    The fence unshares the network, so the kernel's sockets cannot be TCP
    ports of the grader's host: they are files (``transport = "ipc"``) in
    the kernel's connection folder. The kernel command is the launcher of
    :mod:`grader.warm`, which has the kernel forked warm (or started cold) and
    enclosed (:mod:`grader.enclosure`). Interrupts (a cell past its time limit)
    go as messages, since the kernel's process is not the grader's child.

    The kernel's standard streams are a pipe of the grader's own
    (:class:`Output`): its last :data:`OUTPUT_KEPT` bytes are kept for the
    grader's log, the rest read and dropped, and none of it decides anything.
    """

    client_class = DottedObjectName("grader.kernel.FencedKernelClient")
    client_factory = Type(FencedKernelClient, klass=AsyncKernelClient)
    enclosure = None  # grader.sandbox.Enclosure: the view, the plan, the warm process's socket
    private_dir: str | None = None  # the grader's own folder, out of every kernel's view: launch specs, how each ended

    async def _async_kill_kernel(self, restart: bool = False) -> None:
        """Stop the kernel through its launcher (SIGTERM): the kernel is killed at once, with every process it
        started, and the launcher ends once it has written how the kernel ended; SIGKILL if it does not."""
        process = getattr(self.provisioner, "process", None) if self.has_kernel else None
        if process is None or self.enclosure is None or self.enclosure.bwrap is None:
            return await super()._async_kill_kernel(restart=restart)
        with contextlib.suppress(OSError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self._async_wait(), timeout=3.0)
        except asyncio.TimeoutError:
            await super()._async_kill_kernel(restart=restart)
            return
        if self.has_kernel:
            await self.provisioner.wait()

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        """Wait for the kernel's process to end, looking every 5 ms: jupyter_client looks every 0.1 s, and the
        first look after a kill always finds the process still there, so every kernel's stop took 0.1 s."""
        await super()._async_wait(pollinterval=min(pollinterval, 0.005))

    def format_kernel_cmd(self, extra_arguments=None):
        import json
        import tempfile

        command = super().format_kernel_cmd(extra_arguments)
        if self.enclosure is None or self.enclosure.bwrap is None:  # the Python fence alone: the kernel as it is
            return command
        kernel_args = command[command.index("ipykernel_launcher") + 1:]
        fd, spec = tempfile.mkstemp(prefix="launch-", suffix=".json", dir=self.private_dir)
        self._ended = spec[:-len(".json")] + "-ended.json"
        with os.fdopen(fd, "w") as f:
            json.dump({"socket": self.enclosure.warm_socket, "bwrap_executable": shutil.which("bwrap") or "bwrap",
                       "bwrap": self.enclosure.bwrap, "python": sys.executable, "plan": self.enclosure.plan,
                       "ended": self._ended}, f)
        return [sys.executable, "-S", "-m", "grader.warm", "launch", spec, "--", *kernel_args]

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        from .warm import kernel_environment

        self.output = Output()
        kw.update(stdin=subprocess.DEVNULL, stdout=self.output.fd, stderr=self.output.fd)
        kw["env"] = kernel_environment(kw.get("env") or os.environ)  # an allowlist: nothing else of the grader's
        try:
            await super()._async_launch_kernel(kernel_cmd, **kw)
        finally:
            self.output.started()

    def ended(self, wait: float = 0.0) -> dict:
        """How the kernel last started ended, as its launcher wrote it (``{}`` while it runs or if it wrote
        nothing); ``wait``: seconds to give the launcher to finish writing (the kernel's death can be seen on its
        sockets before its launcher has ended)."""
        import json
        import time

        process = getattr(self.provisioner, "process", None)
        deadline = time.monotonic() + wait
        while process is not None and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)

        try:
            with open(getattr(self, "_ended", "")) as f:
                found = json.load(f)
            return found if isinstance(found, dict) else {}
        except (OSError, ValueError):
            return {}

    @property
    def kernel_spec(self):
        spec = super().kernel_spec
        if spec is not None:
            # this environment's own kernel, whatever kernelspec is found first (the test suite's starts its
            # kernels from a warm process outside the fence, tools/forked_kernels.py: never a grading kernel)
            spec.argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            spec.interrupt_mode = "message"
        return spec


#: how much of a kernel's own output (its standard streams, not its cells') the grader keeps
OUTPUT_KEPT = 16 * 1024


class Output:
    """A kernel's standard streams: a pipe drained by a thread of the grader's, its tail kept, the rest dropped."""

    def __init__(self):
        import collections
        import threading

        self._read, self.fd = os.pipe()
        self._tail: collections.deque[bytes] = collections.deque()
        self._kept = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._drain, daemon=True, name="kernel-output")
        self._thread.start()

    def started(self) -> None:
        """The kernel has its copy of the pipe: the grader's is closed, so the drain ends when the kernel does."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self._read, 65536)
            except OSError:
                break
            if not chunk:
                break
            self._tail.append(chunk)
            self._kept += len(chunk)
            while self._kept - len(self._tail[0]) >= OUTPUT_KEPT:
                self.dropped += len(self._tail[0])
                self._kept -= len(self._tail.popleft())
        os.close(self._read)

    def text(self) -> str:
        """The kept tail, printable: control characters (a terminal's escapes) shown as escapes."""
        data = b"".join(self._tail)[-OUTPUT_KEPT:]
        from .failures import printable

        return printable(data.decode("utf-8", errors="replace"))


def fenced_manager(enclosure, private_dir: str) -> type[FencedKernelManager]:
    """A :class:`FencedKernelManager` class whose kernels start enclosed as ``enclosure`` (a
    :class:`grader.sandbox.Enclosure`) says, its launch specs in ``private_dir``."""
    return type("Fenced", (FencedKernelManager,), {"enclosure": enclosure, "private_dir": private_dir})


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
