"""Every solution notebook runs top to bottom in a real kernel, hidden tests included (nbval, lax).

The solution notebooks are committed without outputs (tools/notebooks.py), so
nbval runs them in its lax mode: each cell must execute without an error, and
no output is compared. The chapter notebooks, committed with outputs, run in
nbval's strict mode through the suite's own options (pyproject.toml).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from nbtools import ROOT, assignments, notebooks, read_cells

pytestmark = pytest.mark.slow


def test_every_solution_notebook_runs_clean_under_nbval(tmp_path):
    paths = [str(p.relative_to(ROOT)) for a in assignments() for p in notebooks(a)]
    assert len(paths) >= len(assignments()) >= 1
    res = subprocess.run(  # one process for all: a kernel per notebook, no second start-up of pytest
        [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-o", "addopts=", "-o", "testpaths=",
         "--nbval-lax", "--nbval-cell-timeout=600", f"--basetemp={tmp_path}", *paths],
        cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, COURSE_STATIC_OUTPUT="1"),
    )
    failed = sorted(set(re.findall(r"^FAILED (solutions/\S+?\.ipynb)", res.stdout, re.M)))
    assert res.returncode == 0, f"cells that fail under nbval in {failed}:\n{res.stdout[-6000:]}\n{res.stderr[-2000:]}"
    ran = int(re.search(r"(\d+) passed", res.stdout).group(1))
    # Check your work is tagged nbval-skip: the reference on fresh cases is test_practice.py's (and the
    # stability test's, over seeds), the cell in a kernel tests/lab/test_lab_browser.py's. So are a capstone's
    # long runs (minutes of training on the whole sample), which the learner starts
    cells = [c for p in paths for c in read_cells(ROOT / p) if c.kind == "code" and c.source.strip()]
    code_cells = sum(1 for c in cells if not (c.is_check or c.is_long))
    assert ran == code_cells, f"nbval ran {ran} cells, the solution notebooks have {code_cells} code cells"
    skipped = int(re.search(r"(\d+) skipped", res.stdout).group(1)) if "skipped" in res.stdout else 0
    long = sum(1 for c in cells if c.is_long and not c.is_check)
    assert skipped == len(paths) + long, (f"nbval skipped {skipped} cells, not each notebook's Check your work "
                                          f"and the {long} long runs")
