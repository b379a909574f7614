"""`make lab` started for a test: a free port, the token it prints, a server that answers, a clean stop."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from nbtools import ROOT
from tools import forked_kernels


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    port: int
    token: str
    log: list[str] = field(default_factory=list)  # the server's output, drained in the background

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def request(self, path: str, data: bytes | None = None, timeout: float = 120) -> tuple[int, str]:
        req = urllib.request.Request(self.url(path), data=data, headers={"Authorization": f"token {self.token}"},
                                     method="POST" if data is not None else "GET")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()


@contextmanager
def running_lab(*make_args: str, env: dict[str, str] | None = None, start_s: float = 180) -> Iterator[Lab]:
    """`make lab LAB_PORT=<free port> *make_args`, up and answering; its process group is stopped afterwards."""
    port = free_port()
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_PORT={port}", *make_args], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        # the lab's kernels are the ones a learner's lab starts, not the suite's forked ones
        env=dict(forked_kernels.ordinary_environment(os.environ), **(env or {})),
    )
    seen: list[str] = []
    token, deadline = None, time.time() + start_s
    try:
        while time.time() < deadline and token is None:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            m = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=([0-9a-f]+)", line)
            token = m.group(1) if m else None
        assert token, "make lab printed no URL with a token:\n" + "".join(seen)
        lab = Lab(port, token, seen)
        while True:  # the URL is printed as the server starts listening: wait until it answers
            try:
                lab.request("/api/status", timeout=30)
                break
            except OSError:
                assert time.time() < deadline, "JupyterLab printed its URL but never answered:\n" + "".join(seen)
                time.sleep(0.5)
        # Drain the server's output, or a chatty server blocks on a full pipe.
        threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True).start()
        yield lab
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
