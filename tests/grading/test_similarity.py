"""`make similarity`: on a planted class, the copied pairs rank first and no independent pair is flagged.

The class (tests/grading/catalogues/planted-class.py) of 02-attention and 03-multi-head-attention: "paster"
pastes course_lib's code with its names changed, "sharer1" and "sharer2" hand in one solution, the copy's
variables renamed and its lines reordered, and "honest0", "honest1", "honest2" each hand in the catalogues'
independent right implementations (entry i of each exercise's RIGHT list; an exercise without one is left
as released).
"""

from __future__ import annotations

import html
import json
import runpy
import shutil

import pytest

from nbtools import ROOT
from tools.similarity import REFERENCE, THRESHOLD, compare_class, main, read_class, release_free, solution_cells

SLUGS = ("02-attention", "03-multi-head-attention")
NOTEBOOKS = {"02-attention": "attention.ipynb", "03-multi-head-attention": "multi_head_attention.ipynb"}
PLANTED = runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / "planted-class.py"))
PLANTED_PAIRS = {("paster", REFERENCE), ("sharer1", "sharer2")}


def honest(slug: str, i: int) -> dict[str, str]:
    right = runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{slug}.py"))["RIGHT"]
    entries: dict[str, list[str]] = {}
    for entry in right:
        entries.setdefault(entry["exercise"], []).append(entry["source"])
    return {name: sources[i] for name, sources in entries.items() if i < len(sources)}


def submit(root, student: str, slug: str, code: dict[str, str]) -> None:
    """The release notebook with the learner's code in the named solution cells."""
    nb = json.loads((ROOT / "exercises" / slug / NOTEBOOKS[slug]).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        name = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if cell["metadata"].get("nbgrader", {}).get("solution") and name in code:
            cell["source"] = code[name].strip("\n")
    path = root / "submitted" / student / slug / NOTEBOOKS[slug]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")


def new_course(root):
    for folder in ("exercises", "solutions"):
        (root / folder).symlink_to(ROOT / folder)
    return root


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = new_course(tmp_path_factory.mktemp("similarity"))
    for slug in SLUGS:
        submit(root, "paster", slug, PLANTED["PASTER"][slug])
        submit(root, "sharer1", slug, PLANTED["SHARED"][slug])
        submit(root, "sharer2", slug, PLANTED["SHARED_COPY"][slug])
        for i in range(3):
            submit(root, f"honest{i}", slug, honest(slug, i))
    return root


@pytest.mark.parametrize("slug", SLUGS)
def test_the_planted_pairs_rank_first_and_no_independent_pair_is_flagged(course, slug):
    pairs = compare_class(read_class(course, slug))
    scores = {(p.left, p.right): p.score for p in pairs}
    assert {(p.left, p.right) for p in pairs[:2]} == PLANTED_PAIRS, scores
    assert all(scores[p] >= THRESHOLD for p in PLANTED_PAIRS), scores
    independent = {pair: s for pair, s in scores.items() if pair not in PLANTED_PAIRS and s is not None}
    assert len(independent) >= 12 and max(independent.values()) < THRESHOLD, independent


def test_a_short_exercise_cannot_flag_a_pair_by_itself(tmp_path):
    """Two learners who wrote the same two-line attention_scores, and nothing else, are not scored."""
    root = new_course(tmp_path)
    same = {"attention_scores": "def attention_scores(q, k):\n    d_k = q.shape[-1]\n"
                                "    return q @ k.transpose(-2, -1) / math.sqrt(d_k)\n"}
    submit(root, "ann", "02-attention", same)
    submit(root, "ben", "02-attention", same)
    pair = next(p for p in compare_class(read_class(root, "02-attention")) if p.right == "ben")
    [scores] = [m for m in pair.exercises if m.exercise == "attention_scores"]
    assert scores.score == 1.0 and not scores.counted
    assert pair.score is None


def test_the_release_is_the_base_that_never_counts():
    release = solution_cells(ROOT / "exercises" / "02-attention" / "attention.ipynb")["masked_softmax"]
    assert release_free(release, release) == ""
    solution = solution_cells(ROOT / "solutions" / "02-attention" / "attention.ipynb")["masked_softmax"]
    kept = release_free(solution, release)
    assert "def masked_softmax" not in kept and "Softmax over the last axis" not in kept
    assert "BEGIN SOLUTION" not in kept and kept.startswith("if mask is not None:")


def test_the_report_ranks_the_pairs_escapes_names_and_never_grades(tmp_path, capsys):
    root = new_course(tmp_path)
    name = "o'neil<b>&co"
    submit(root, name, "03-multi-head-attention", PLANTED["SHARED"]["03-multi-head-attention"])
    submit(root, "sharer2", "03-multi-head-attention", PLANTED["SHARED_COPY"]["03-multi-head-attention"])
    submit(root, "honest0", "03-multi-head-attention", honest("03-multi-head-attention", 0))
    assert main(["--root", str(root), "--assignment", "03-multi-head-attention"]) == 0
    out = capsys.readouterr().out
    report = root / "similarity" / "03-multi-head-attention.html"
    assert out.strip() == (f"03-multi-head-attention: 3 submissions, 1 of 6 pairs flagged (threshold {THRESHOLD:g}); "
                           f"report: {report}")
    page = report.read_text(encoding="utf-8")
    assert name not in page and html.escape(name) in page
    assert "never changes a grade" in page
    assert "<span class='hl'>" in page  # the matched code, highlighted side by side
    assert "http" not in page and "<script" not in page  # self-contained: reads offline
    assert not (root / "gradebook.db").exists() and not (root / "grades.csv").exists()


def test_bad_input_is_named_in_one_line(tmp_path, capsys):
    root = new_course(tmp_path)
    assert main(["--root", str(root), "--assignment", "99-nothing"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("make similarity: unknown assignment '99-nothing': it must be one of 01-tokenization")
    assert main(["--root", str(root), "--assignment", "02-attention"]) == 2
    assert "no submissions of '02-attention'" in capsys.readouterr().err
    assert main(["--root", str(root), "--assignment", "02-attention", "--out", str(root / "submitted" / "x")]) == 2
    assert "inside the learners' submitted/ folder" in capsys.readouterr().err
    assert main(["--root", str(root), "--assignment", "02-attention", "--threshold", "60"]) == 2
    assert "--threshold must be a share above 0 and at most 1, got 60" in capsys.readouterr().err

    submit(root, "ann", "02-attention", PLANTED["SHARED"]["02-attention"])
    submit(root, "ben", "02-attention", PLANTED["SHARED_COPY"]["02-attention"])
    broken = root / "submitted" / "cat" / "02-attention" / "attention.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"cells": [', encoding="utf-8")
    (root / "submitted" / "dan" / "02-attention").mkdir(parents=True)
    shutil.copy(broken, root / "submitted" / "dan" / "02-attention" / "other.ipynb")
    assert main(["--root", str(root), "--assignment", "02-attention"]) == 1
    captured = capsys.readouterr()
    skipped = captured.err.strip().splitlines()
    assert len(skipped) == 2
    assert skipped[0].startswith("make similarity: skipped student 'cat', submitted/cat/02-attention/attention.ipynb: "
                                 "not a readable notebook")
    assert skipped[1] == ("make similarity: skipped student 'dan', submitted/dan/02-attention/attention.ipynb: "
                          "missing (the assignment's notebook is attention.ipynb)")
    assert "02-attention: 2 submissions, 1 of 3 pairs flagged" in captured.out
    assert "cat" in (root / "similarity" / "02-attention.html").read_text(encoding="utf-8")

