"""tools.mutants (`make mutants`): the mutants it makes, how it scores them, and a real run.

The full run over every assignment is slow (minutes); here the tool is run
on a two-exercise notebook written on the fly (with its registry entry) and,
for real, on a few mutants of one small exercise of the course.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from grader.registry import Assignment, Exercise
from grader.registry import assignments as registry
from tools import mutants as mut

SNIPPET = '''\
def f(x, y, flag=True):
    outside = x + 1  # not between the markers: never mutated
    ### BEGIN SOLUTION
    total = x.sum(dim=-1, keepdim=True)
    total += 2
    if y.shape[0] > 0 and not flag:
        total = torch.exp(total)
    head = x[1:]
    for k in range(x.shape[0]):
        break
    scale = 0.5
    return x @ y / torch.maximum(total, head) * scale
    ### END SOLUTION
'''


def _mutants(source=SNIPPET):
    return mut.generate_mutants(source)


def test_every_kind_of_mutant_is_made_from_a_small_snippet():
    ms = _mutants()
    kinds = {m.kind for m in ms}
    expected = {"operator", "drop-operand", "comparison", "boolean", "not-removal", "unary-minus", "constant",
                "boolean-constant", "skip-call", "swap-arguments", "swap-routine", "drop-keyword",
                "none-for-default", "slice", "delete-statement", "return-input", "negate-condition", "off-by-one"}
    assert expected <= kinds, f"missing kinds: {expected - kinds}"
    after = {m.after for m in ms}
    for change in [
        "total = x.mean(dim=-1, keepdim=True)",  # reduction swap
        "total = x.sum(dim=-2, keepdim=True)",  # axis
        "total = x.sum(dim=-1, keepdim=False)",  # keepdim flip
        "total = x.sum(dim=None, keepdim=True)",  # None for a default
        "total = x",  # method call skipped
        "total -= 2",  # augmented operator
        "if y.shape[0] >= 0 and (not flag):",
        "if y.shape[0] > 0 or not flag:",
        "if y.shape[0] > 0 and flag:",  # not removed
        "total = total",  # call skipped: torch.exp(total) -> total
        "head = x[:-1]",  # slice moved
        "if not (y.shape[0] > 0 and not flag):",  # condition negated
        "for k in range(x.shape[0] + 1):",  # off by one
        "total *= 2",  # + -> * in an augmented assignment
        "return x @ y * torch.maximum(total, head) * scale",  # / -> *
        "scale = 1.0", "scale = 0.25", "scale = 0.0",  # float constants x2, /2, 0
        "return x @ y / torch.maximum(head, total) * scale",  # arguments swapped
        "return x @ y / torch.minimum(total, head) * scale",
        "return x * y / torch.maximum(total, head) * scale",  # @ -> *
        "return x @ y / torch.maximum(total, head)",  # dropped scale
        "return x",  # an input returned unchanged
        "pass",  # a statement deleted
    ]:
        unparenthesized = change.replace("(not flag)", "not flag")
        assert any(a.replace("(not flag)", "not flag") == unparenthesized for a in after), change
    # Nothing outside the markers changes, and every mutant is valid Python differing from the original.
    assert all("outside = x + 1" in m.source for m in ms)
    for m in ms:
        compile(m.source, "<mutant>", "exec")
        assert m.source != SNIPPET and m.before and m.diff.startswith("@@")
    assert len({m.source for m in ms}) == len(ms), "duplicate mutants"


def test_statement_deletion_keeps_the_code_parsing_and_a_cell_without_markers_gives_nothing():
    src = "def g(x):\n    ### BEGIN SOLUTION\n    y = x\n    ### END SOLUTION\n"
    (dropped,) = [m for m in mut.generate_mutants(src) if m.kind == "delete-statement"]
    assert dropped.source == "def g(x):\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION\n"
    assert mut.generate_mutants("def g(x):\n    return x + 1\n") == []


def _cell(kind, source, **meta):
    cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
    if meta:
        cell.metadata["nbgrader"] = {"schema_version": 3, "locked": False, "points": 0, "solution": False,
                                     "grade": False, **meta}
    return cell


#: the registry entry of the tiny course's one assignment
TINY = Assignment("99-tiny", "tiny.ipynb", (Exercise("double", 1, ()), Exercise("countdown", 1, ())))


@pytest.fixture
def tiny_course(tmp_path):
    """A course with one assignment of two exercises: `double` and an endless-loop-prone `countdown`."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("code", "import math"),
        _cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    y = x * 2\n    return y + 0\n    ### END SOLUTION\n",
              solution=True, grade_id="double"),
        _cell("code", "assert double(3) == 6\n### BEGIN HIDDEN TESTS\nassert double(-2.5) == -5.0\n"
                      "### END HIDDEN TESTS\n", grade=True, grade_id="test_double", points=1, locked=True),
        _cell("code", "def countdown(n):\n    ### BEGIN SOLUTION\n    while n > 0:\n        n -= 1\n    return n\n"
                      "    ### END SOLUTION\n", solution=True, grade_id="countdown"),
        _cell("code", "assert countdown(3) == 0 and countdown(0) == 0", grade=True, grade_id="test_countdown",
              points=1, locked=True),
    ]
    (tmp_path / "solutions" / "99-tiny").mkdir(parents=True)
    nbformat.write(nb, tmp_path / "solutions" / "99-tiny" / "tiny.ipynb")
    return tmp_path


def test_killed_survivors_and_equivalents_in_a_tiny_course(tiny_course):
    exercises = mut.exercise_cells(TINY, tiny_course)
    assert [(e.name, e.test_ids) for e in exercises] == [("double", ("test_double",)),
                                                         ("countdown", ("test_countdown",))]
    report = mut.run([TINY], ["double"], jobs=2, timeout=20, root=tiny_course, equivalents=[], log=lambda *a: None)
    ex = report["assignments"]["99-tiny"]["exercises"]["double"]
    status = {m["after"]: m["status"] for m in ex["all"]}
    assert ex["baseline"] == "passed"
    assert status["y = x / 2"] == "killed" and status["return x"] == "killed" and status["y = x * 3"] == "killed"
    # `y + 0` -> `y - 0` and `y + 0` -> `y` change nothing: they survive until listed as equivalent.
    assert status["return y - 0"] == "survived" and status["return y"] == "survived"
    assert ex["kill_rate"] < 1 and not report["ok"]
    assert "return y - 0" in mut.format_report(report) and "BELOW TARGET" in mut.format_report(report)

    equivalents = [mut.Equivalent("99-tiny", "double", "return y + 0", after, "adding or subtracting 0 changes nothing")
                   for after in ("return y - 0", "return y")]
    report = mut.run([TINY], ["double"], jobs=1, root=tiny_course, equivalents=equivalents, log=lambda *a: None)
    ex = report["assignments"]["99-tiny"]["exercises"]["double"]
    assert ex["equivalent"] == 2 and ex["survived"] == 0 and ex["kill_rate"] == 1.0 and report["ok"]
    assert {m["reason"] for m in ex["equivalents"]} == {"adding or subtracting 0 changes nothing"}
    json.dumps(report)  # the report is JSON as it is


def test_a_mutant_that_loops_forever_is_stopped_and_counted_as_killed(tiny_course):
    report = mut.run([TINY], ["countdown"], jobs=2, timeout=1.5, root=tiny_course, equivalents=[],
                     log=lambda *a: None)
    ex = report["assignments"]["99-tiny"]["exercises"]["countdown"]
    status = {m["after"]: m["status"] for m in ex["all"]}
    assert status["n += 1"] == "timeout"  # `n -= 1` -> `n += 1` never ends
    assert ex["timeouts"] >= 1 and ex["killed"] >= ex["timeouts"]


def test_a_real_exercise_with_a_cap_on_mutants(tmp_path):
    out = tmp_path / "report.json"
    code = mut.main(["--assignment", "02-attention", "--exercise", "attention_scores", "--jobs", "1",
                     "--max-per-exercise", "5", "--report", str(out)])
    report = json.loads(out.read_text())
    ex = report["assignments"]["02-attention"]["exercises"]["attention_scores"]
    assert ex["baseline"] == "passed" and ex["mutants"] == 5
    assert ex["killed"] + ex["equivalent"] + ex["survived"] == 5
    assert code == (0 if report["ok"] else 1)


def test_usage_errors_exit_with_status_2(capsys):
    assert mut.main(["--assignment", "no-such-assignment"]) == 2
    assert mut.main(["--jobs", "0"]) == 2


def test_every_listed_equivalent_mutant_is_still_made_and_gives_a_reason():
    made: dict[tuple[str, str], set] = {}
    for e in mut.load_equivalents():
        assert e.reason, e
        key = (e.assignment, e.exercise)
        if key not in made:
            exercises = {x.name: x for x in mut.exercise_cells(registry()[e.assignment])}
            assert e.exercise in exercises, f"no exercise {e.exercise} in {e.assignment}"
            _, mutants, _ = mut.mutants_of(exercises[e.exercise])
            made[key] = {(mut.same_lines(m.before), mut.same_lines(m.after)) for m in mutants}
        assert (mut.same_lines(e.before), mut.same_lines(e.after)) in made[key], f"stale entry: {e}"
