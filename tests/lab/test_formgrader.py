"""nbgrader's formgrader, served by `make lab`, lists the course's assignments in a real browser.

The formgrader's Manage Assignments page fills its table with JavaScript from
the formgrader's API, so the page is loaded in Debian's Chromium, headless
(`tools/system_packages.sh` installs it), driven over the DevTools protocol
on a pipe (--remote-debugging-pipe: no port, no extra Python package), and the
test waits for the rows to appear in the rendered DOM.

The lab gets a scratch gradebook (GRADEBOOK_URL) so the test never touches an
instructor's gradebook.db in the course root.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from labtools import running_lab
from nbtools import assignments

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PAGE_TIMEOUT = 60  # seconds for the formgrader page to list the assignments


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`make lab LAB_ROLE=instructor` on a free port with a scratch gradebook: yields (port, token)."""
    gradebook = tmp_path_factory.mktemp("formgrader") / "gradebook.db"
    with running_lab("LAB_ROLE=instructor", env={"GRADEBOOK_URL": f"sqlite:///{gradebook}"}) as lab:
        yield lab.port, lab.token


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (NUL-separated JSON messages)."""

    def __init__(self, profile: Path):
        if not CHROMIUM.is_file():
            pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium with tools/system_packages.sh "
                        "(as root) and run the tests again", pytrace=False)
        # Chromium reads commands on its fd 3 and writes replies on its fd 4.
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()

        def onto_3_and_4():  # in the child, before exec: first above 10, so neither clobbers the other
            high_r, high_w = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [str(CHROMIUM), *CHROMIUM_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=onto_3_and_4, pass_fds=(3, 4), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )
        os.close(cmd_r)
        os.close(out_w)
        self._buffer = b""
        self._next_id = 0

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._cmd_w, json.dumps(message).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:  # events and other replies are not needed here
                    if "error" in reply:
                        raise RuntimeError(f"Chromium: {method} failed: {reply['error']}")
                    return reply["result"]
            left = deadline - time.time()
            ready, _, _ = select.select([self._out_r], [], [], max(left, 0))
            chunk = os.read(self._out_r, 1 << 16) if ready else b""
            if not chunk:
                raise RuntimeError(f"Chromium did not answer {method} within {timeout} s"
                                   if not ready else f"Chromium exited:\n{self.stderr()}")
            self._buffer += chunk

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read().decode(errors="replace")[-3000:]

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(timeout=20)
        finally:
            os.close(self._cmd_w)
            os.close(self._out_r)
            self.proc.stderr.close()


@pytest.fixture
def chromium(tmp_path):
    browser = Chromium(tmp_path / "chromium-profile")
    try:
        yield browser
    finally:
        browser.close()


# What the page shows: the assignment names in the Manage Assignments table, and enough text to explain a failure.
PAGE_STATE = """JSON.stringify({
    url: location.href,
    names: Array.from(document.querySelectorAll('#main-table tr td.name a')).map(a => a.textContent.trim()),
    text: document.body ? document.body.innerText.slice(0, 1500) : ''
})"""


def test_the_formgrader_lists_the_course_assignments(lab, chromium):
    port, token = lab
    target = chromium.send("Target.createTarget", {"url": f"http://127.0.0.1:{port}/formgrader?token={token}"})
    session = chromium.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})["sessionId"]
    expected = set(assignments())
    assert "02-attention" in expected
    state, deadline = {}, time.time() + PAGE_TIMEOUT
    while time.time() < deadline:
        result = chromium.send("Runtime.evaluate", {"expression": PAGE_STATE, "returnByValue": True}, session)
        state = json.loads(result["result"].get("value") or "{}")
        if set(state.get("names", [])) >= expected:
            break
        time.sleep(0.25)
    assert state.get("url", "").startswith(f"http://127.0.0.1:{port}/formgrader/manage_assignments"), state
    names = state.get("names", [])
    assert set(names) == expected, f"the formgrader listed {names}, expected {sorted(expected)}; page: {state}"
    assert len(names) == len(expected), names
