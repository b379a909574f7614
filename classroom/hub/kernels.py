"""A kernel stopped by its user's memory limit says so, in the cell that was running.

On the hub, a learner's server and kernels share the learner's memory limit (:mod:`classroom.hub.cgroups`); a kernel
that asks for more is stopped by the kernel's OOM killer, and JupyterLab would only say that the kernel "appears to
have died". :class:`MemoryLimitConnection`, the server's websocket connection to its kernels (JupyterLab's link
to a kernel; ``ServerApp.kernel_websocket_connection_class`` in the hub's role settings), notices that a restart
came with a new kill for memory in the user's group and writes, to the cell whose request was running:

    The kernel was stopped: your server and its kernels used more than their memory limit, 2.0 GiB together ...

Other learners are not touched: their groups are their own.
"""

from __future__ import annotations

import json

from jupyter_server.services.kernels.connection.base import deserialize_msg_from_ws_v1
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

from classroom.hub.cgroups import gib, memory_limit, oom_kills, own_memory_group

V1 = "v1.kernel.websocket.jupyter.org"


def stopped_for_memory(limit: int | None) -> str:
    size = gib(limit) if limit else "the hub's limit"
    return (f"The kernel was stopped: your server and its kernels used more than their memory limit, {size} "
            "together (the instructor sets it). It restarts with nothing in memory: run the cells again, with less "
            "data at once (smaller batches or arrays), or shut down kernels you no longer use.")


class MemoryLimitConnection(ZMQChannelsWebsocketConnection):
    """JupyterLab's websocket to a kernel, which names a stop for memory in the running cell's output."""

    _group = None
    _kills = 0
    _running: dict | None = None

    def connect(self):
        self._group = own_memory_group()
        self._kills = oom_kills(self._group)
        return super().connect()

    def handle_incoming_message(self, incoming_msg) -> None:
        header = self._header_of(incoming_msg)
        if header and header.get("msg_type") == "execute_request":
            self._running = header
        super().handle_incoming_message(incoming_msg)

    def _header_of(self, incoming_msg) -> dict | None:
        try:
            if self.subprotocol == V1:
                channel, parts = deserialize_msg_from_ws_v1(incoming_msg)
                return json.loads(parts[0]) if channel == "shell" else None
            msg = json.loads(incoming_msg)
            return msg.get("header") if msg.get("channel", "shell") == "shell" else None
        except (ValueError, TypeError, IndexError, KeyError):
            return None  # not ours to judge: the server's own handling reports it

    def on_kernel_restarted(self):
        kills = oom_kills(self._group)
        if kills > self._kills:
            self.log.warning("kernel %s was stopped by the memory limit of %s", self.kernel_id, self._group)
            self.write_stderr(stopped_for_memory(memory_limit(self._group)), self._running or {})
        self._kills = kills
        super().on_kernel_restarted()
