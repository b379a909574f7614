"""Every address the hub's URL can reach is the hub's: who listens on a port, on which address, and as whom.

A browser that opens ``http://localhost:8000`` (or ``http://<user>.localhost:8000``) tries every address the name
has, IPv6's ``::1`` first in Chromium, then ``127.0.0.1``. A hub that held the port on one of them would leave the
other to the first learner who binds it, and the instructor's browser, cookies and password would go there
(issue 50). So:

* the hub's proxy listens on the port on every loopback address of both families (:func:`hub_addresses`;
  ``hub/proxy.mjs`` adds the others to configurable-http-proxy's one ``--ip``), each a listening socket without
  ``SO_REUSEPORT``: Linux then refuses the port to every other user on that address, on the family's wildcard
  (``0.0.0.0``, ``::`` with or without ``IPV6_V6ONLY``) and on IPv4-mapped addresses, with or without
  ``SO_REUSEADDR`` or ``SO_REUSEPORT`` (``tests/hub/test_hub_addresses.py`` tries each);
* everything else the hub talks to is a Unix socket in a folder only root (or the server's own user) can write:
  the hub's API, the proxy's API, every user's server (:mod:`classroom.hub.spawner`), so no port is left to race for;
* ``make hub`` refuses to start while anyone else listens on the port on any address (:func:`listeners`), naming
  the process and its user, and checks once started that the proxy, and nobody else, holds every address;
* while the hub runs, :mod:`classroom.hub.guard` looks every few seconds and stops (and names in the hub's log) any
  process not the hub's that listens on the port, should one ever get there (a proxy restarted by the hub after a
  crash, while someone else was quicker).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import pwd
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

#: the loopback addresses a browser may use for localhost and *.localhost (RFC 6761), IPv6's first
LOOPBACK = ("::1", "127.0.0.1")


@dataclass(frozen=True)
class Listener:
    """A listening TCP socket: its address, port, the socket's inode, and the process holding it (if found)."""

    address: str
    port: int
    inode: int
    pid: int | None = None
    description: str = ""

    def named(self) -> str:
        where = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.description or 'a socket no process shows'} on {where}:{self.port}"


def has_ipv6() -> bool:
    """Whether this machine has IPv6's loopback (a browser uses it first when it has)."""
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        try:
            s.bind(("::1", 0))
        except OSError:
            return False
    return True


def hub_addresses(public_url: str, port: int) -> list[str]:
    """The addresses the hub's proxy listens on for ``port``: both loopbacks (where the machine has them), and, when
    browsers reach the hub directly on this port at a name or address of this machine's, that address too."""
    wanted = [a for a in LOOPBACK if a != "::1" or has_ipv6()]
    url = urlparse(public_url)
    host = (url.hostname or "localhost").lower()
    if url.port not in (None, port) or host == "localhost" or host.endswith(".localhost"):
        return wanted  # a TLS front end on another port, or loopback: the loopbacks are what is reached
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except OSError:
        found = set()
    return wanted + sorted(a for a in found if a not in wanted and not ipaddress.ip_address(a).is_loopback)


def _decode(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))  # /proc prints each 32-bit word host-endian
    return socket.inet_ntop(socket.AF_INET6, words)


def listeners(port: int) -> list[Listener]:
    """Every TCP socket listening on ``port``, on any address of either family, with the process that holds it."""
    found: dict[int, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as fh:
            for line in list(fh)[1:]:
                fields = line.split()
                address, hex_port = fields[1].rsplit(":", 1)
                if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    found[int(fields[9])] = (_decode(address), port)
    owners = socket_owners(set(found))
    out = []
    for inode, (address, p) in sorted(found.items(), key=lambda kv: kv[1]):
        pid = owners.get(inode)
        out.append(Listener(address, p, inode, pid, describe(pid) if pid else ""))
    return out


def socket_owners(inodes: set[int], pids: set[int] | None = None) -> dict[int, int]:
    """{socket inode: a process holding it}, looking at ``pids`` (default: every process)."""
    if not inodes:
        return {}
    wanted = {f"socket:[{inode}]": inode for inode in inodes}
    owners: dict[int, int] = {}
    candidates = pids if pids is not None else (int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit())
    for pid in candidates:
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    inode = wanted.get(os.readlink(fd.path))
                    if inode is not None:
                        owners.setdefault(inode, pid)
        if len(owners) == len(wanted):
            break
    return owners


def describe(pid: int) -> str:
    """'process 123 of ha (python3 -m http.server 8000)'."""
    entry = Path("/proc") / str(pid)
    try:
        user = pwd.getpwuid(entry.stat().st_uid).pw_name
    except (OSError, KeyError):
        user = "?"
    try:
        argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        argv = []
    shown = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(argv) if a)
    shown = " ".join(shown.split())  # a learner's newlines and tabs do not break the hub's log lines
    return f"process {pid} of {user} ({shown[:120]})"


def bindable_everywhere(port: int) -> bool:
    """Whether a listener could bind ``port`` now on every address of both families (nothing holds it, not even a
    bound socket that is not yet listening; a closed connection's TIME_WAIT is no holder)."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        with socket.socket(family) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind((address, port))
            except OSError as exc:
                if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):  # no IPv6 here
                    continue
                return False
    return True


def strangers(port: int, own: set[int]) -> list[Listener]:
    """The listeners on ``port`` that no process in ``own`` holds."""
    return [x for x in listeners(port) if x.pid not in own]


def unheld(port: int, addresses: list[str], own: set[int]) -> list[str]:
    """Which of ``addresses`` no process in ``own`` listens on (for ``port``)."""
    held = {ipaddress.ip_address(x.address) for x in listeners(port) if x.pid in own}
    return [a for a in addresses if ipaddress.ip_address(a) not in held]
