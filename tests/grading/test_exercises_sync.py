"""exercises/ is exactly what `nbgrader generate_assignment` makes from solutions/."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.notebook import is_check_cell, metadata
from nbtools import ROOT, assignments


@pytest.fixture(scope="module")
def fresh_release(tmp_path_factory) -> Path:
    """A folder holding a fresh ``nbgrader generate_assignment`` of every assignment (one nbgrader process)."""
    out = tmp_path_factory.mktemp("release")
    res = subprocess.run([sys.executable, "-m", "tools.exercises", "--log-level=ERROR", "--release-dir", str(out),
                          "--db-url", f"sqlite:///{out / 'gradebook.db'}"],
                         cwd=ROOT, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def cell_view(path: Path) -> list[tuple]:
    nb = nbformat.read(path, as_version=4)
    return [(c.cell_type, c.source, dict(metadata(c))) for c in nb.cells]


@pytest.mark.parametrize("assignment", assignments())
def test_exercises_match_a_fresh_generate_assignment(fresh_release, assignment):
    committed = ROOT / "exercises" / assignment
    fresh = fresh_release / assignment
    names = lambda d: sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())  # noqa: E731
    assert names(committed) == names(fresh), "exercises/ has other files than a fresh release: run `make exercises`"
    for nb in fresh.glob("*.ipynb"):
        assert cell_view(committed / nb.name) == cell_view(nb), (
            f"exercises/{assignment}/{nb.name} is out of sync with solutions/: run `make exercises` and commit"
        )


@pytest.mark.parametrize("assignment", assignments())
def test_release_hides_solutions_and_hidden_tests(assignment):
    for nb in (ROOT / "exercises" / assignment).glob("*.ipynb"):
        cells = nbformat.read(nb, as_version=4).cells
        for cell in cells:
            if is_check_cell(cell) and cell.cell_type == "code":  # the one place the release names the grader
                assert cell.source == f'from grader.practice import check_my_work\n\ncheck_my_work("{assignment}")'
                continue
            for marker in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS", "from grader", "grader.",
                           "course_lib.grading"):
                assert marker not in cell.source, f"{nb} leaks {marker!r}"
        assert "not implemented yet" in nb.read_text()


def test_every_chapter_slug_is_used_consistently():
    slugs = {"01-tokenization", "02-attention", "03-multi-head-attention", "04-normalization", "05-residuals-ffn",
             "06-encoder-decoder", "07-modern-variants", "08-efficient-attention", "09-vision-transformer",
             "10-dinov2", "11-swin"}
    # a capstone assignment is named after the chapter it follows: NNx-capstone-NAME, with no chapter folder
    capstone = re.compile(r"(\d\d)x-capstone-[a-z]+")
    numbers = {slug[:2] for slug in slugs}
    for folder in ("chapters", "solutions", "exercises"):
        present = {p.name for p in (ROOT / folder).iterdir() if p.is_dir()}
        if folder != "chapters":
            present = {name for name in present if not (capstone.fullmatch(name) and name[:2] in numbers)}
        assert present <= slugs, f"{folder}/ has folders that are not chapter or capstone slugs: {present - slugs}"
    folders = {where: {p.name for p in (ROOT / where).iterdir() if p.is_dir()} for where in ("solutions", "exercises")}
    assert folders["solutions"] == folders["exercises"]
