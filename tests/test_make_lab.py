"""`make lab` serves the course in JupyterLab with nbgrader's Validate, as root too."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from nbtools import ROOT

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab():
    port = free_port()
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_PORT={port}"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    seen, url, deadline = [], None, time.time() + 120
    try:
        while time.time() < deadline and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            m = re.search(rf"(http://127\.0\.0\.1:{port}/lab\?token=[0-9a-f]+)", line)
            url = m.group(1) if m else None
        assert url, "make lab printed no URL:\n" + "".join(seen)
        token = url.split("token=")[1]
        while True:  # the URL is printed as the server starts listening: wait until it answers
            try:
                request(port, token, "/api/status")
                break
            except OSError:
                assert time.time() < deadline, "JupyterLab printed its URL but never answered"
                time.sleep(0.5)
        yield port, token, "".join(seen)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def request(port, token, path, data=None):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, headers={"Authorization": f"token {token}"},
        method="POST" if data is not None else "GET",
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        return resp.status, resp.read().decode()


def test_lab_binds_to_localhost_and_prints_its_url(lab):
    port, token, log = lab
    assert f"http://127.0.0.1:{port}/lab" in log
    status, body = request(port, token, "/api/status")
    assert status == 200 and "started" in body


def test_the_nbgrader_lab_extension_is_installed(lab):
    port, token, _ = lab
    _, body = request(port, token, "/lab/api/extensions")
    assert "jupyter-nbgrader" in [e["name"] for e in json.loads(body)]


def validate(lab, path):
    port, token, _ = lab
    _, body = request(port, token, "/assignments/validate", urllib.parse.urlencode({"path": path}).encode())
    out = json.loads(body)
    assert out["success"], out
    return out["value"]


def test_validate_reports_failing_tests_on_the_untouched_exercise(lab):
    result = validate(lab, "exercises/02-attention/attention.ipynb")
    assert result.get("failed"), result
    assert "not implemented yet" in json.dumps(result["failed"])


def test_validate_passes_the_reference_solution(lab):
    result = validate(lab, "solutions/02-attention/attention.ipynb")
    assert not result.get("failed") and not result.get("errors"), result
