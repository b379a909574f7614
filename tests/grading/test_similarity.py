"""`make similarity`: on planted classes every copy is flagged, whatever its disguise, and no independent pair is.

The planted classes are data (tests/grading/similarity/): class A, 02-attention and 09-vision-transformer,
17 and 16 learners who worked alone in varied styles and 14 copies each, every disguise of issue 44 by hand
(the code renamed, moved into added cells, one large exercise copied into otherwise own work, dead code,
helpers inlined and extracted, the loop style changed, the calls respelled, builtin-named locals renamed,
statements reordered, several at once, the reference pasted, two copies of one source). Class B was
written apart and its copies made by a program (class_b.py); it was measured once, frozen, and then added
here. Every learner of both passes the hidden checks (``python -m tests.grading.similarity.planted check``).
Each class is written, compared and reported once per module (``make similarity``'s command, as the
instructor runs it), and the tests read its page and its CSV.
"""

from __future__ import annotations

import ast
import csv
import html
import json
import os
import sys
import textwrap

import pytest

from classroom.similarity.calibrate import REFERENCE, THRESHOLD, quantised
from classroom.similarity.command import main
from classroom.similarity.normalise import exercise_graph
from classroom.similarity.program import Program
from classroom.similarity.reading import MAX_NOTEBOOK_BYTES
from nbtools import ROOT
from tests.grading.similarity import planted

CLASSES = ("a", "b")
SLUGS = ("02-attention", "09-vision-transformer")
EXERCISES = frozenset({"attention_scores", "masked_softmax", "causal_mask", "scaled_dot_product_attention",
                       "patchify", "patch_embed", "prepend_cls_add_pos", "vit_forward", "interpolate_pos_embed",
                       "prepend_cls_and_distillation_tokens", "hard_distillation_loss"})


def new_course(root):
    for folder in ("exercises", "solutions"):
        (root / folder).symlink_to(ROOT / folder)
    return root


def read_csv(path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module", params=CLASSES)
def reported(request, tmp_path_factory):
    """A planted class written as submissions, and `make similarity` run on it once: (module, CSV rows by
    assignment, the course folder)."""
    module = planted.load(request.param)
    root = new_course(tmp_path_factory.mktemp(f"class-{request.param}"))
    for slug, learners in module.LEARNERS.items():
        planted.write_class(root, slug, learners)
    assert main(["--root", str(root)]) == 0
    return module, {slug: read_csv(root / "similarity" / f"{slug}.csv") for slug in module.LEARNERS}, root


def pair_of(row: dict) -> tuple[str, str]:
    return row["learner_a"], row["learner_b"]


@pytest.mark.parametrize("slug", SLUGS)
def test_every_planted_copy_is_flagged_whatever_its_disguise(reported, slug):
    module, rows, _ = reported
    copies = planted.planted_pairs(module.COPIES, slug)
    by_pair = {pair_of(r): r for r in rows[slug]}
    missed = {pair: (how, by_pair[pair]["score"]) for pair, how in copies.items() if by_pair[pair]["flagged"] != "yes"}
    assert len(copies) >= 10 and not missed, missed


@pytest.mark.parametrize("slug", SLUGS)
def test_no_independent_pair_is_flagged(reported, slug):
    """None, but for a learner who worked alone and wrote the solution's own code (class B's Juno): flagged
    against the reference and the classmate who pasted it, as a pasted solution must be; their code is at
    least 95% alike the reference on every exercise."""
    module, rows, _ = reported
    copies = planted.planted_pairs(module.COPIES, slug)
    independent = [r for r in rows[slug] if pair_of(r) not in copies]
    n = len(module.LEARNERS[slug])
    assert len(independent) == n * (n - 1) // 2 + n - len(copies)  # every pair and every learner/reference
    flagged = [r for r in independent if r["flagged"] == "yes"]
    assert [(pair_of(r), r["score"]) for r in flagged if not set(pair_of(r)) & module.SOLUTION_LIKE] == []
    pasted = {c.copier for c in module.COPIES if c.slug == slug and c.source == REFERENCE}
    for r in flagged:
        assert set(pair_of(r)) - module.SOLUTION_LIKE <= pasted | {REFERENCE}, r
    for learner in module.SOLUTION_LIKE:
        [row] = [r for r in rows[slug] if pair_of(r) == (learner, REFERENCE)]
        assert min(float(row[f"{e.name} alike"]) for e in _exercises(slug)) >= 0.95, row


@pytest.mark.parametrize("slug", SLUGS)
def test_the_csv_agrees_with_the_page_and_its_threshold(reported, slug):
    """Each row's flag is its shown score against the shown threshold; the flagged rows come first, each with
    the exercises that carry it, and the page lists them in the same order."""
    module, rows, root = reported
    page = (root / "similarity" / f"{slug}.html").read_text(encoding="utf-8")
    assert f"at or above {THRESHOLD:.2f}" in page
    scores = [float(r["score"]) if r["score"] else None for r in rows[slug]]
    for r, score in zip(rows[slug], scores):
        assert (r["flagged"] == "yes") == (score is not None and score >= THRESHOLD), r
        assert bool(r["carried_by"]) == (r["flagged"] == "yes"), r
        assert set(r["carried_by"].split(";")) - {""} <= {e.name for e in _exercises(slug)}
    flagged = [r for r in rows[slug] if r["flagged"] == "yes"]
    assert rows[slug][:len(flagged)] == flagged
    order = [page.index(f"{html.escape(r['learner_a'])} / {html.escape(r['learner_b'])}: score {r['score']}")
             for r in flagged]
    assert order == sorted(order)


def _exercises(slug):
    from grader.registry import assignments

    return assignments()[slug].exercises


def test_the_page_shows_the_carrying_exercise_side_by_side_with_its_evidence(reported):
    module, rows, root = reported
    page = (root / "similarity" / "09-vision-transformer.html").read_text(encoding="utf-8")
    top = rows["09-vision-transformer"][0]
    section = page[page.index(f"{top['learner_a']} / {top['learner_b']}: score"):]
    first = top["carried_by"].split(";")[0]
    assert section.index(f"<h4>{first}: alike") < section.index("<h3", 10)
    assert "<div class='side'>" in section and "<span class='hl'>" in section
    assert "never changes a grade" in page and "http" not in page and "<script" not in page


def test_a_function_moved_into_an_added_cell_is_read(tmp_path):
    """The solution cell calls a function the learner defined in a cell of their own: that code is compared."""
    module = planted.load("a")
    root = new_course(tmp_path)
    learners = module.LEARNERS["02-attention"]
    planted.write_class(root, "02-attention", {k: learners[k] for k in ("ben", "sam", "ada", "cara", "dev")})
    assert main(["--root", str(root)]) == 0
    rows = {pair_of(r): r for r in read_csv(root / "similarity" / "02-attention.csv")}
    assert rows[("ben", "sam")]["flagged"] == "yes"
    assert float(rows[("ben", "sam")]["masked_softmax alike"]) == 1.0


# --------------------------------------------------------------------------
# What a disguise changes is normalised away; what the code computes is not
# --------------------------------------------------------------------------
def graph(source: str, name: str):
    program = Program()
    program.add(ast.parse("import math\nimport torch\nimport torch.nn.functional as F\n"), 0)
    for i, cell in enumerate(source.split("# ---- cell\n")):
        program.add(ast.parse(textwrap.dedent(cell)), i + 1)
    return exercise_graph(program, name, EXERCISES).roots


SOFTMAX = """
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)
"""
SAME_SOFTMAX = {
    "locals renamed, builtin names included": """
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    max = scores.amax(dim=-1, keepdim=True)
    max = torch.where(torch.isfinite(max), max, torch.zeros_like(max))
    sum = torch.exp(scores - max)
    return sum / sum.sum(dim=-1, keepdim=True).clamp_min(1e-30)
""",
    "dead code, comments, a print, an if False": """
def masked_softmax(scores, mask=None):
    unused = scores.shape  # not used
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
        n_masked = (~mask).sum()
    row_max = scores.amax(dim=-1, keepdim=True)
    print(row_max)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)
    if False:
        e = e * 2
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)
""",
    "a helper extracted into an added cell": """
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores - finite_max(scores))
    return e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)
# ---- cell
def finite_max(x):
    m = x.amax(dim=-1, keepdim=True)
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))
""",
    "calls respelled: keywords, method and function form, aliases, the negated branch": """
def masked_softmax(scores, mask=None):
    if mask is None:
        pass
    else:
        scores = torch.masked_fill(scores, torch.logical_not(mask), -math.inf)
    row_max = torch.amax(scores, -1, True)
    row_max = torch.where(row_max.isfinite(), row_max, row_max.new_zeros(row_max.size()))
    e = (scores - row_max).exp()
    return torch.div(e, torch.sum(e, -1, keepdim=True).clamp(min=1e-30))
""",
    "statements reordered and temporaries inlined": """
def masked_softmax(scores, mask=None):
    s = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    top = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isfinite(top), top, torch.zeros_like(top)))
    total = e.sum(dim=-1, keepdim=True)
    return e / total.clamp_min(1e-30)
""",
}
PATCHIFY = """
def patchify(images, patch):
    b, c, h, w = images.shape
    out = []
    for i in range(0, h, patch):
        for j in range(0, w, patch):
            out.append(images[:, :, i:i + patch, j:j + patch].reshape(b, -1))
    return torch.stack(out, dim=1)
"""
SAME_PATCHIFY = {
    "a nested comprehension, .size(i) and len()": """
def patchify(images, patch):
    tiles = [images[:, :, top:top + patch, left:left + patch].reshape(len(images), -1)
             for top in range(0, images.size(2), patch) for left in range(0, images.shape[3], patch)]
    return torch.stack(tiles, 1)
""",
}
DIFFERENT_SOFTMAX = {
    "the other axis": SOFTMAX.replace("amax(dim=-1", "amax(dim=0"),
    "no masking": SOFTMAX.replace('scores.masked_fill(~mask, float("-inf"))', "scores"),
    "the mask not inverted": SOFTMAX.replace("~mask", "mask"),
}


@pytest.mark.parametrize("how", sorted(SAME_SOFTMAX))
def test_a_disguise_leaves_the_graph_as_it_was(how):
    assert graph(SAME_SOFTMAX[how], "masked_softmax") == graph(SOFTMAX, "masked_softmax")


@pytest.mark.parametrize("how", sorted(SAME_PATCHIFY))
def test_a_loop_and_its_comprehension_are_one_graph(how):
    assert graph(SAME_PATCHIFY[how], "patchify") == graph(PATCHIFY, "patchify")


@pytest.mark.parametrize("how", sorted(DIFFERENT_SOFTMAX))
def test_code_that_computes_something_else_is_another_graph(how):
    assert graph(DIFFERENT_SOFTMAX[how], "masked_softmax") != graph(SOFTMAX, "masked_softmax")


def test_a_while_loop_over_its_range_is_the_for_loop():
    loop = "def causal_mask(n):\n    m = []\n    for i in range(n):\n        m.append(torch.arange(n) <= i)\n" \
           "    return torch.stack(m)\n"
    counter = "def causal_mask(n):\n    m = []\n    i = 0\n    while i < n:\n        m.append(i >= torch.arange(n))\n" \
              "        i += 1\n    return torch.stack(m)\n"
    comp = "def causal_mask(n):\n    return torch.stack([torch.arange(n).le(k) for k in range(n)])\n"
    assert graph(loop, "causal_mask") == graph(counter, "causal_mask") == graph(comp, "causal_mask")


# --------------------------------------------------------------------------
# A short exercise, rounding, bad input and hostile submissions
# --------------------------------------------------------------------------
def submit(root, student: str, slug: str, cells: dict[str, str], added=()) -> None:
    planted.write_class(root, slug, {student: planted.Submission(cells, list(added))})


def test_a_short_exercise_cannot_flag_a_pair_by_itself(tmp_path):
    """Two learners who wrote the same two-line attention_scores, and nothing else, are not flagged."""
    root = new_course(tmp_path)
    same = {"attention_scores": "def attention_scores(q, k):\n    d_k = q.shape[-1]\n"
                                "    return q @ k.transpose(-2, -1) / math.sqrt(d_k)\n"}
    submit(root, "ann", "02-attention", same)
    submit(root, "ben", "02-attention", same)
    assert main(["--root", str(root)]) == 0
    [row] = [r for r in read_csv(root / "similarity" / "02-attention.csv") if pair_of(r) == ("ann", "ben")]
    assert row["attention_scores alike"] == "1.000" and row["flagged"] == "no"


def test_a_score_is_rounded_down_as_the_flag_is_decided():
    assert quantised(0.5499999) == 54 and quantised(0.55) == 55 and quantised(0.5549) == 55
    assert quantised(0.29 + 1e-12) == 29  # 0.29 * 100 is 28.999999999999996 in floating point


def test_bad_input_is_named_in_one_line(tmp_path, capsys):
    root = new_course(tmp_path)
    assert main(["--root", str(root), "--assignment", "99-nothing"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("make similarity: unknown assignment '99-nothing': it must be one of 01-tokenization")
    assert main(["--root", str(root), "--assignment", "02-attention"]) == 2
    assert "no submissions of '02-attention'" in capsys.readouterr().err
    assert main(["--root", str(root), "--assignment", "02-attention", "--out", str(root / "submitted" / "x")]) == 2
    assert "inside the learners' submitted/ folder" in capsys.readouterr().err
    assert main(["--root", str(root), "--assignment", "02-attention", "--threshold", "-1"]) == 2
    assert "--threshold must be a number above 0 (a score, as the report shows it), got -1.0" in \
        capsys.readouterr().err


def test_a_submission_that_cannot_be_read_is_named_and_the_rest_compared(tmp_path, capsys):
    root = new_course(tmp_path)
    learners = planted.load("a").LEARNERS["02-attention"]
    planted.write_class(root, "02-attention", {k: learners[k] for k in ("ben", "sam")})
    folder = root / "submitted"
    (folder / "cat" / "02-attention").mkdir(parents=True)
    (folder / "cat" / "02-attention" / "attention.ipynb").write_text('{"cells": [', encoding="utf-8")
    (folder / "dan" / "02-attention").mkdir(parents=True)
    (folder / "dan" / "02-attention" / "other.ipynb").write_text("{}", encoding="utf-8")
    assert main(["--root", str(root), "--assignment", "02-attention"]) == 1
    captured = capsys.readouterr()
    skipped = captured.err.strip().splitlines()
    assert skipped[0].startswith("make similarity: skipped student 'cat', submitted/cat/02-attention/attention.ipynb: "
                                 "not a readable notebook")
    assert skipped[1] == ("make similarity: skipped student 'dan', submitted/dan/02-attention/attention.ipynb: "
                          "missing (the assignment's notebook is attention.ipynb)")
    assert "02-attention: 2 submissions, 1 of 3 pairs flagged" in captured.out


def test_links_are_never_followed(tmp_path, capsys):
    """A notebook, a student's folder or an assignment's folder that is a link (to a classmate's work, to the
    solutions) is named and skipped; a FIFO is not opened (no hang); a link at a report's place is refused."""
    root = new_course(tmp_path)
    learners = planted.load("a").LEARNERS["02-attention"]
    planted.write_class(root, "02-attention", {k: learners[k] for k in ("ben", "ada")})
    folder = root / "submitted"
    (folder / "eve" / "02-attention").mkdir(parents=True)
    (folder / "eve" / "02-attention" / "attention.ipynb").symlink_to(ROOT / "solutions" / "02-attention" /
                                                                      "attention.ipynb")
    (folder / "fox").symlink_to(folder / "ben")
    (folder / "gil").mkdir()
    (folder / "gil" / "02-attention").symlink_to(folder / "ada" / "02-attention")
    (folder / "hal" / "02-attention").mkdir(parents=True)
    os.mkfifo(folder / "hal" / "02-attention" / "attention.ipynb")
    assert main(["--root", str(root), "--assignment", "02-attention"]) == 1
    err = capsys.readouterr().err
    assert "skipped student 'eve', submitted/eve/02-attention/attention.ipynb: not read: a link" in err
    assert "skipped student 'fox', submitted/fox/02-attention: a link" in err
    assert "skipped student 'gil', submitted/gil/02-attention: a link" in err
    assert "skipped student 'hal', submitted/hal/02-attention/attention.ipynb: not read: not a regular file" in err
    rows = read_csv(root / "similarity" / "02-attention.csv")
    assert {r["learner_a"] for r in rows} | {r["learner_b"] for r in rows} == {"ada", "ben", REFERENCE}

    target = tmp_path / "elsewhere.txt"
    target.write_text("the instructor's file", encoding="utf-8")
    page = root / "similarity" / "02-attention.html"
    page.unlink()
    page.symlink_to(target)
    assert main(["--root", str(root), "--assignment", "02-attention"]) == 2
    assert "02-attention.html: a link; a report is never written through one: remove it" in capsys.readouterr().err
    assert target.read_text(encoding="utf-8") == "the instructor's file"


def test_hostile_code_and_names_get_nothing(tmp_path, capsys):
    """An id that is HTML or a spreadsheet formula is escaped on the page and defused in the CSV; code that
    would make the comparison run long (deep recursion, a huge expression) is named and not compared; an
    oversized notebook is not read; nothing runs."""
    root = new_course(tmp_path)
    learners = planted.load("a").LEARNERS["02-attention"]
    name = "=HYPERLINK(\"x\")<b>&co"
    planted.write_class(root, "02-attention", {name: learners["ben"], "sam": learners["sam"], "ada": learners["ada"]})
    marker = tmp_path / "ran"
    hostile = {
        "attention_scores": f"def attention_scores(q, k):\n    open({str(marker)!r}, 'w')\n"
                            "    return attention_scores(q, k)\n",
        "masked_softmax": "def masked_softmax(scores, mask=None):\n    return " + " + ".join(["scores"] * 20000),
        "causal_mask": "def causal_mask(n):\n    x = torch.ones(n, n)\n" + "".join(
            f"    x = f0(x) + f0(x + {i})\n" for i in range(12)) + "    return x\n" + "".join(
            f"def f{i}(y):\n    return f{i + 1}(y) * f{i + 1}(y + 1) - f{i + 1}(y + 2) / f{i + 1}(y + 3)\n"
            for i in range(40)),
    }
    submit(root, "mal", "02-attention", hostile)
    big = root / "submitted" / "zoe" / "02-attention" / "attention.ipynb"
    big.parent.mkdir(parents=True)
    big.write_text(json.dumps({"cells": [], "pad": "x" * (MAX_NOTEBOOK_BYTES + 1)}), encoding="utf-8")
    assert main(["--root", str(root), "--assignment", "02-attention"]) == 1
    assert "skipped student 'zoe'" in capsys.readouterr().err and not marker.exists()
    page = (root / "similarity" / "02-attention.html").read_text(encoding="utf-8")
    assert "<li>mal: causal_mask, too large to compare (more than 2000 helper calls)</li>" in page  # 4^8 calls
    assert "<li>mal: cell 7</li>" in page  # 20,000 terms: Python's parser gives up, the cell is named
    assert name not in page and html.escape(name) in page
    rows = read_csv(root / "similarity" / "02-attention.csv")
    assert "'" + name in {r["learner_a"] for r in rows} | {r["learner_b"] for r in rows}
    text = (root / "similarity" / "02-attention.csv").read_text(encoding="utf-8")
    assert "\n=" not in text and ",=" not in text


def test_the_report_opens_nothing_but_its_own_files_for_writing(tmp_path):
    """Every file the command opens for writing (audited as Python opens it) is one of its two reports."""
    root = new_course(tmp_path)
    learners = planted.load("a").LEARNERS["09-vision-transformer"]
    planted.write_class(root, "09-vision-transformer", {k: learners[k] for k in ("dev", "rosa", "ada", "jo")})
    opened: list[str] = []
    watching = [True]

    def audit(event, args):
        if watching[0] and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) \
                and "__pycache__" not in str(args[0]):  # an int is a descriptor already opened (and audited)
            mode, flags = args[1], args[2]
            if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (flags & (os.O_WRONLY | os.O_RDWR)):
                opened.append(str(args[0]))

    sys.addaudithook(audit)
    try:
        assert main(["--root", str(root)]) == 0
    finally:
        watching[0] = False
    out = root / "similarity"
    assert sorted(opened) == [str(out / "09-vision-transformer.csv"), str(out / "09-vision-transformer.html")]
    assert not (root / "gradebook.db").exists()
