"""The hub's port guard (a service the hub starts: ``python -m classroom.hub.guard``): every few seconds, whoever
listens on the hub's public port but is not root (the hub and its proxy run as root; a learner cannot) is named in
the hub's log and stopped.

The proxy listens on every address of the port (:mod:`classroom.hub.addresses`), and while it does Linux lets no one
else have any of them; the guard is for the moment it does not: a proxy that died and that the hub starts again
(it looks every 5 seconds) finds whoever was quicker, and stops, and the guard clears the way. It reads
``/proc/net/tcp`` and ``tcp6`` (a few milliseconds) and only looks for the holder when a listener is not the proxy's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from datetime import datetime, timezone

from classroom.hub.addresses import listeners

EVERY_S = 2.0


def once(port: int, said=print) -> list[str]:
    """Stop every process other than root's that listens on ``port``; one line for each."""
    stopped = []
    for x in listeners(port):
        if x.pid is None:
            continue
        try:
            uid = os.stat(f"/proc/{x.pid}").st_uid
        except OSError:
            continue
        if uid == 0:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(x.pid, signal.SIGKILL)
        line = (f"port guard: {x.named()} listened on the hub's port: stopped (a browser sent there would give it the "
                "hub's cookies and passwords)")
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        said(f"[W {stamp} port-guard] {line}", flush=True)
        stopped.append(line)
    return stopped


def main() -> int:
    port = int(os.environ["COURSE_HUB_PORT"])
    print(f"[I port-guard] watching port {port} on every address", flush=True)
    try:
        while True:
            once(port, said=print)
            time.sleep(EVERY_S)
    except KeyboardInterrupt:  # the hub stops its services with SIGINT
        return 0


if __name__ == "__main__":
    sys.exit(main())
