"""`make lab` serves the course in JupyterLab with nbgrader's Validate, as root too."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.parse

import pytest

from labtools import running_lab
from nbtools import ROOT

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


INSTRUCTOR_PLUGINS = {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                      "@jupyter/nbgrader:create-assignment"}


def test_a_learners_lab_has_no_instructor_tools(lab):
    """By default `make lab` is a learner's: Validate and the Assignments tab, not the formgrader, the course
    list or the Create Assignment panel (LAB_ROLE=instructor has them: test_formgrader.py)."""
    _, page = lab.request("/lab")
    config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page,
                                  re.S).group(1))
    disabled = set(config.get("disabledExtensions", []))  # the plugin ids the page will not load
    assert INSTRUCTOR_PLUGINS <= disabled, f"the learner's lab loads {INSTRUCTOR_PLUGINS - disabled}"
    assert not {"@jupyter/nbgrader:validate-assignment", "@jupyter/nbgrader:assignment-list"} & disabled
    for path in ("/formgrader", "/formgrader/api/assignments"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            lab.request(path)
        assert refused.value.code == 404, (path, refused.value.code)


def test_an_unknown_role_is_named_and_nothing_starts():
    res = subprocess.run(["make", "--no-print-directory", "lab", "LAB_ROLE=teacher", "LAB_PORT=1"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    assert "LAB_ROLE must be learner or instructor, got 'teacher'" in res.stderr, res.stdout + res.stderr
    assert "JupyterLab" not in res.stdout
