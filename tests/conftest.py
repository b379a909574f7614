"""Fixtures shared by the test modules."""

from __future__ import annotations

import os

import pytest
import torch

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
