"""A fuzzer of what a learner hands in, before any kernel runs: notebooks, zips and names drawn by hypothesis.

Each example is a hostile mutation of the release notebook's JSON (cells duplicated, removed, retyped or made of
other text; nbgrader marks of any shape and version; nesting, sizes, bytes that are not UTF-8) or an LMS zip whose
learners' folders hold what their learners chose (names with control characters, slashes, formulas, lengths past the
file system's; notebooks broken, nested, duplicated; ``..`` inside their own folder), always beside an honest
learner. The invariants, whatever is drawn:

* reading a notebook never raises: it is refused with a reason, or it reads as a notebook;
* one that reads is graded as the gradebook says: after :func:`grader.canonical_cells.canonicalise`, each nbgrader
  mark is the source's own, each grade_id on one cell, and nbgrader's own validator and nbformat's accept it;
* a zip's import never raises, writes nothing outside ``submitted/``, and imports the honest learner's notebook as
  it was;
* every cell of every CSV the course writes is inert, whatever text it holds.

`make test` draws a few dozen examples; `make fuzz FUZZ_EXAMPLES=2000` draws more (tests/nbtools.py).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import shutil
import zipfile

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st

from classroom.intake import notebook_problem, student_id_problem
from classroom.text_out import csv_writer, is_inert, shown
from classroom.zip_import import import_zip
from grader.canonical_cells import canonicalise
from nbtools import ROOT, fuzz_settings

RELEASE = ROOT / "solutions" / "02-attention" / "attention.ipynb"
GOOD = RELEASE.read_bytes()
RAW = json.loads(GOOD)
#: the gradebook's marks of the release's cells, as grader.canonical_cells.source_marks reads them
MARKS = {c["metadata"]["nbgrader"]["grade_id"]: {
    "grade": bool(c["metadata"]["nbgrader"].get("grade")), "solution": bool(c["metadata"]["nbgrader"].get("solution")),
    "locked": bool(c["metadata"]["nbgrader"].get("locked")), "grade_id": c["metadata"]["nbgrader"]["grade_id"],
    "schema_version": 3, "task": False, "cell_type": c["cell_type"],
    **({"points": float(c["metadata"]["nbgrader"]["points"])} if c["metadata"]["nbgrader"].get("grade") else {})}
    for c in RAW["cells"] if "nbgrader" in c.get("metadata", {})}

#: text a learner may write: control characters, escapes, markup, formulas, the notebook's own markers
text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["\x1b[2J", "\x00", "\ud800", "=SUM(1)", "+1", "@x", "-x", "\t", "\r\n", "### BEGIN HIDDEN TESTS\n",
                     "<script>x</script>", "../..", "a" * 300, "test_causal_mask", "causal_mask"]),
)
json_value = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
                          max_leaves=12)
marks = st.one_of(json_value, st.fixed_dictionaries({}, optional={
    "grade_id": st.one_of(st.sampled_from(sorted(MARKS)), text), "grade": json_value, "solution": json_value,
    "locked": json_value, "points": st.one_of(st.integers(-10, 10**6), json_value),
    "schema_version": st.one_of(st.integers(0, 9), json_value), "task": json_value}))


@st.composite
def hostile_notebooks(draw) -> bytes:
    raw = copy.deepcopy(RAW)
    cells = raw["cells"]
    for _ in range(draw(st.integers(0, 6))):
        i = draw(st.integers(0, len(cells) - 1)) if cells else 0
        move = draw(st.sampled_from(["copy", "remove", "retype", "marks", "source", "nest", "big", "top"]))
        if not cells and move not in ("top",):
            continue
        if move == "copy":
            cells.insert(draw(st.integers(0, len(cells))), copy.deepcopy(cells[i]))
        elif move == "remove":
            cells.pop(i)
        elif move == "retype":
            cells[i]["cell_type"] = draw(st.sampled_from(["code", "markdown", "raw", "heading", 3]))
        elif move == "marks":
            cells[i].setdefault("metadata", {})["nbgrader"] = draw(marks)
        elif move == "source":
            cells[i]["source"] = draw(st.one_of(text, st.lists(text, max_size=3), json_value))
        elif move == "nest":
            depth = draw(st.integers(1, 120))
            cells[i].setdefault("metadata", {})["deep"] = json.loads("[" * depth + "]" * depth)
        elif move == "big":
            cells[i]["source"] = "x" * draw(st.sampled_from([1 << 10, 200 << 10, 300 << 10]))
        elif move == "top":
            raw[draw(st.sampled_from(["nbformat", "nbformat_minor", "metadata", "cells", "extra"]))] = draw(json_value)
    data = json.dumps(raw).encode("utf-8", "surrogatepass")
    cut = draw(st.sampled_from([None, None, None, "truncate", "bad-utf8"]))
    if cut == "truncate":
        data = data[:draw(st.integers(0, len(data)))]
    elif cut == "bad-utf8":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff\xfe" + data[at:]
    return data


@fuzz_settings(in_the_suite=60)
@given(hostile_notebooks())
def test_a_hostile_notebook_is_refused_with_a_reason_or_graded_as_the_gradebook_says(data):
    from nbgrader.nbgraderformat import MetadataValidator

    why = notebook_problem(data)
    assert why is None or (isinstance(why, str) and why), why
    if why is not None:
        return
    nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    canonicalise(nb, MARKS)
    marked = [c.metadata["nbgrader"] for c in nb.cells if "nbgrader" in c.metadata]
    ids = [m["grade_id"] for m in marked]
    assert len(ids) == len(set(ids))
    for mark, cell in zip(marked, [c for c in nb.cells if "nbgrader" in c.metadata]):
        expected = dict(MARKS[mark["grade_id"]])
        assert cell.cell_type == expected.pop("cell_type") and mark == expected, (mark, cell.cell_type)
    MetadataValidator().validate_nb(nb)
    nbformat.validate(nb)


# --- zips ----------------------------------------------------------------------------------------------------------
folder_names = st.one_of(st.sampled_from(["=HYPERLINK(1)", "+1", "@a", "-a", "a\nb", "a\x1b[2J", "é", "a" * 70,
                                          "b" * 300, ".hidden", "a b", "A", "honest0 ", "x,y", "02-attention"]),
                         st.text(min_size=1, max_size=20).filter(lambda s: "/" not in s and s not in (".", "..")))
inner = st.one_of(st.sampled_from(["attention.ipynb", "02-attention/attention.ipynb", "timestamp.txt",
                                   "Attention.ipynb", "../../honest0/attention.ipynb", "a/b/c/attention.ipynb",
                                   "04-normalization/attention.ipynb", "attention.ipynb/x", "\x1b.ipynb"]),
                  st.text(min_size=1, max_size=30))
contents = st.sampled_from(["good", "broken", "deep", "empty", "other"])
BODIES = {"good": GOOD, "broken": b"{", "deep": b"[" * 5000 + b"]" * 5000, "empty": b"",
          "other": GOOD.replace(b"attention", b"attention ", 1)}


@pytest.mark.filterwarnings("ignore:Duplicate name")
@fuzz_settings(in_the_suite=40)
@given(top=st.sampled_from([None, "export"]),
       entries=st.lists(st.tuples(folder_names, inner, contents, st.integers(0, 3)), max_size=8),
       honest_first=st.booleans())
def test_a_hostile_zip_costs_its_learners_alone(tmp_path_factory, top, entries, honest_first):
    base = tmp_path_factory.mktemp("zipfuzz")
    course = base / "course"
    course.mkdir()
    shutil.copytree(ROOT / "solutions" / "02-attention", course / "solutions" / "02-attention")
    prefix = f"{top}/" if top else ""
    files = [(f"{prefix}{name}/{rest}", BODIES[body], day) for name, rest, body, day in entries
             if name != "honest0"]
    honest = (f"{prefix}honest0/attention.ipynb", GOOD, 0)
    files = [honest, *files] if honest_first else [*files, honest]
    archive = base / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, body, day in files:
            try:
                zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 12, 1 + day, 12, 0, 0)), body)
            except (ValueError, UnicodeEncodeError):
                continue
    outside = sorted(os.listdir(base))
    done = import_zip(course, archive, ["02-attention"])
    assert sorted(os.listdir(base)) == outside
    assert (course / "submitted" / "honest0" / "02-attention" / "attention.ipynb").read_bytes() == GOOD
    for folder in (course / "submitted").iterdir():
        assert student_id_problem(folder.name) is None, folder.name
        for path in folder.rglob("*"):
            assert not path.is_symlink() and path.resolve().is_relative_to(course / "submitted")
            if path.suffix == ".ipynb":
                assert notebook_problem(path.read_bytes()) is None
    for problem in done.problems:
        assert "\x1b" not in str(problem) and "\n" not in shown(problem.student)


@fuzz_settings(in_the_suite=100)
@given(st.lists(st.lists(text, max_size=4), max_size=5))
def test_every_csv_cell_the_course_writes_is_inert(rows):
    buffer = io.StringIO()
    csv_writer(buffer).writerows(rows)
    for row in csv.reader(io.StringIO(buffer.getvalue())):
        for cell in row:
            assert is_inert(cell), cell


@pytest.mark.parametrize("value", ["-0.5", "10", "1e3", "+2", "=1+1", "@SUM(A1)", " =1", "\t=1", "-x", "\r1"])
def test_numbers_stay_numbers_and_formulas_become_text(value):
    from classroom.text_out import spreadsheet_cell

    out = spreadsheet_cell(value)
    assert (out == value) == (value in ("-0.5", "10", "1e3", "+2")), (value, out)
