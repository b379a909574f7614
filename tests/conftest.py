"""Fixtures shared by the test modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nbtools import ROOT

# Notebooks executed by the suite (nbval, the book build) store stable outputs:
# progress bars are off there (course_lib.training.progress).
os.environ.setdefault("COURSE_STATIC_OUTPUT", "1")


@pytest.fixture
def one_thread():
    """Tiny models run faster on one thread than when two threads fight over a shared 2-core CPU."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """The HTML book, built once per test session with warnings as errors (as `make book` does).

    COURSE_BOOK_HTML=path/to/_build/html reuses a build made beforehand (to iterate on the tests
    that read the book); the suite itself always builds afresh.
    """
    if os.environ.get("COURSE_BOOK_HTML"):
        return Path(os.environ["COURSE_BOOK_HTML"])
    out = tmp_path_factory.mktemp("book")
    exe = Path(sys.executable).with_name("jupyter-book")
    res = subprocess.run(
        [str(exe), "build", str(ROOT), "--builder", "html", "-W", "-n", "--keep-going", "--path-output", str(out)],
        capture_output=True, text=True,
    )
    assert res.returncode == 0, f"the book does not build with warnings as errors:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    return out / "_build" / "html"
