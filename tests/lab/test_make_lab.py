"""`make lab` serves the course in JupyterLab with nbgrader's Validate, as root too."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from labtools import running_lab

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab():
    with running_lab() as lab:
        yield lab


def test_lab_binds_to_localhost_and_prints_its_url(lab):
    assert f"http://127.0.0.1:{lab.port}/lab" in "".join(lab.log)
    status, body = lab.request("/api/status")
    assert status == 200 and "started" in body


def test_the_nbgrader_lab_extension_is_installed(lab):
    _, body = lab.request("/lab/api/extensions")
    assert "jupyter-nbgrader" in [e["name"] for e in json.loads(body)]


def validate(lab, path):
    _, body = lab.request("/assignments/validate", urllib.parse.urlencode({"path": path}).encode())
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
