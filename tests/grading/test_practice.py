"""Check your work (grader/practice.py): the hidden tests' verdicts on fresh cases, while a learner works.

The check must give a planted mistake the diagnosis grading gives it, never on grading's cases and never
showing the reference's code; it must say when a failure is inherited from another of the learner's functions
that the failing one calls, and show the caller's own mistake when it has one; it must show nothing a learner
does not need (no seed, no timing, no empty batch shape) and quote the release's stub as its cell has it; it
must run on one torch thread, import only its own assignment, and print no warning; it must be off where the
course's configuration says so, with a message; and it must sit at the end of every release notebook as the
course's own locked cell. Its speed is measured by benchmarks/check_your_work.py, not asserted here. That
grading neither runs it nor reads it as the learner's code is tested where a submission is autograded
(test_nbgrader_roundtrip.py), that feedback leaves it out in test_grading_integrity.py (no "from grader" on a
feedback page), and that a learner gets a diagnosis from it in JupyterLab in tests/lab/test_lab_browser.py.
"""

from __future__ import annotations

import inspect
import re
import runpy
import subprocess
import sys
import warnings

import nbformat
import pytest
import torch

from grader import practice
from grader.failures import STUB
from grader.notebook import is_check_cell, metadata
from grader.registry import assignments as registry
from nbtools import ROOT, assignments, notebooks, read_cells, solution_namespace

SLUG = "02-attention"


@pytest.fixture(scope="module")
def reference_ns() -> dict:
    (nb,) = notebooks(SLUG)
    return solution_namespace(read_cells(nb))


def catalogue(slug: str) -> list[dict]:
    return runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{slug}.py"))["WRONG"]


def test_the_reference_agrees_on_every_exercise(reference_ns, capsys):
    practice.check_my_work(SLUG, namespace=dict(reference_ns))
    out = capsys.readouterr().out
    names = [ex.name for ex in registry()[SLUG].exercises]
    assert f"{len(names)} of {len(names)} agree" in out, out
    for name in names:
        assert f"✓ {name}" in out, out


#: seeds no grading comparison of SLUG uses (checked): fixed, so the test draws the same fresh cases every run
PRACTICE_SEEDS = (1017, 2017, 3017)


@pytest.mark.parametrize("entry", [e for e in catalogue(SLUG) if e["exercise"] == "attention_scores"],
                         ids=lambda e: e["mistake"])
def test_a_planted_mistake_is_caught_on_fresh_cases_and_named_in_the_graders_words(reference_ns, entry):
    """Every wrong attention_scores of the catalogue is caught on cases grading never draws, with one of the
    exercise's named mistakes or the checker's own account of the failure. Which named mistake fits can depend
    on the case that fails first (a scale by sqrt(q.shape[0]) is no scale at all when that size is 1), so the
    catalogue's diagnosis is required where the mistake shows the same on every case: unscaled scores."""
    assert not set(PRACTICE_SEEDS) & practice.grading_seeds(SLUG)
    ns = dict(reference_ns)
    exec(compile(entry["source"], "<learner>", "exec"), ns)
    named = [m.message for m in registry()[SLUG].exercise(entry["exercise"]).mistakes]
    for seed in PRACTICE_SEEDS:
        _, (verdict,) = practice.practice(SLUG, [entry["exercise"]], namespace=ns, seed=seed)
        assert verdict.status == "wrong", (seed, verdict)
        if "Likely mistake: " in verdict.message:
            said = verdict.message.split("Likely mistake: ", 1)[1]
            assert any(said.startswith(m) for m in named), (seed, said)
        if "not scaled" in entry["diagnosis"]:
            assert entry["diagnosis"] in verdict.message, (seed, verdict.message)


def test_unscaled_scores_get_their_diagnosis_on_any_fresh_seed(reference_ns):
    """The issue's example, on a seed drawn afresh, as a learner's check draws it."""
    entry = next(e for e in catalogue(SLUG) if "not scaled" in e["diagnosis"])
    ns = dict(reference_ns)
    exec(compile(entry["source"], "<learner>", "exec"), ns)
    seed, (verdict,) = practice.practice(SLUG, [entry["exercise"]], namespace=ns)
    assert seed not in practice.grading_seeds(SLUG)
    assert verdict.status == "wrong" and entry["diagnosis"] in verdict.message, (seed, verdict.message)


def test_the_report_never_shows_the_references_code(reference_ns):
    ns = dict(reference_ns)
    for entry in catalogue(SLUG):
        exec(compile(entry["source"], "<learner>", "exec"), ns)
    _, verdicts = practice.practice(SLUG, namespace=ns)
    text = practice.report(SLUG, verdicts)
    assert "✗" in text, text
    for ex in registry()[SLUG].exercises:
        for comp in ex.comparisons:
            lines = [line.strip() for line in inspect.getsource(comp.reference).splitlines()[1:]]
            shown = [line for line in lines if len(line) > 12 and line in text]
            assert not shown, f"the report shows the reference's code: {shown}"


def test_unwritten_and_undefined_functions_are_named_not_counted(reference_ns):
    ns = dict(reference_ns)
    exec("def attention_scores(q, k):\n    raise NotImplementedError('not implemented yet')\n", ns)
    del ns["causal_mask"]
    _, verdicts = practice.practice(SLUG, ["attention_scores", "causal_mask"], namespace=ns)
    assert [(v.exercise, v.status) for v in verdicts] == [("attention_scores", "not written"),
                                                         ("causal_mask", "missing")]
    assert "run its cell first" in verdicts[1].message


def test_a_fresh_seed_is_never_one_grading_uses(monkeypatch):
    taken = sorted(practice.grading_seeds(SLUG))
    draws = iter([taken[0], taken[-1], 12345 if 12345 not in taken else 54321])
    monkeypatch.setattr(practice.secrets, "randbelow", lambda n: next(draws))
    assert practice.fresh_seed(SLUG) not in taken
    with pytest.raises(ValueError, match=rf"seed {taken[0]} is one that grading uses"):
        practice.practice(SLUG, namespace={}, seed=taken[0])


def test_bad_names_are_refused_with_what_exists():
    with pytest.raises(ValueError, match=r"no assignment 'nope'; the assignments are \["):
        practice.practice("nope", namespace={})
    with pytest.raises(ValueError, match=r"has no exercise 'attention'; its exercises are \["):
        practice.check_my_work(SLUG, "attention", namespace={})


def test_an_instructor_switches_it_off_for_an_assignment(tmp_path, monkeypatch, capsys):
    config = tmp_path / "course.toml"
    config.write_text('[check_your_work]\noff = ["02-attention"]\n')
    monkeypatch.setattr(practice, "COURSE_TOML", config)
    practice.check_my_work(SLUG, namespace={})  # nothing defined: a check that ran would say so
    out = capsys.readouterr().out
    assert "switched off for 02-attention" in out and "not defined" not in out, out
    assert not practice.switched_off("03-multi-head-attention")
    config.write_text('[check_your_work]\noff = "02-attention"\n')
    with pytest.raises(ValueError, match=r"off must be a list of assignment names, got '02-attention'"):
        practice.switched_off(SLUG)
    config.write_text('[check_your_work]\noff = ["02-atention"]\n')
    with pytest.raises(ValueError, match=r"names \['02-atention'\], which are not assignments"):
        practice.switched_off(SLUG)


def test_the_course_switches_nothing_off_by_default():
    assert not any(practice.switched_off(slug) for slug in registry())


@pytest.mark.parametrize("where", ["solutions", "exercises"])
@pytest.mark.parametrize("slug", assignments())
def test_every_release_notebook_ends_with_its_check_as_a_locked_cell(slug, where):
    (nb,) = notebooks(slug, where)
    cells = nbformat.read(nb, as_version=4).cells
    checks = [c for c in cells if is_check_cell(c)]
    assert [c.cell_type for c in checks] == ["markdown", "code"], f"{nb}: check cells {checks}"
    heading, cell = checks
    assert heading.source.startswith("## Check your work") and cells.index(heading) + 1 == cells.index(cell)
    code = [c for c in cells if c.cell_type == "code"]
    assert code[-1] is cell, f"{nb}: the check is not the last code cell"
    assert cell.source.rstrip().endswith(f'check_my_work("{slug}")'), cell.source
    assert metadata(cell).get("locked") and "nbval-skip" in cell.metadata.get("tags", []), cell.metadata


# --------------------------------------------------------------------------------------------------
# On a real exercise notebook: the release, its cells run in order as a learner runs them
# --------------------------------------------------------------------------------------------------
def release_namespace(slug: str, pasted: dict[str, str | None] | None = None, solved: bool = True) -> dict:
    """The names a learner's kernel holds after running the release notebook of ``slug`` top to bottom.

    Each solution cell holds the solution's code (``solved``) or the release's stub, unless ``pasted`` gives
    its source (None: the cell was never run). Test cells, Check your work and the long cells (a capstone's
    training at length) are not run.
    """
    pasted = pasted or {}
    solutions = {c.grade_id: c.source for c in read_cells(notebooks(slug)[0]) if c.kind == "code" and c.solution}
    ns: dict = {"__name__": "__main__"}
    for cell in read_cells(notebooks(slug, "exercises")[0]):
        if cell.kind != "code" or cell.is_test or cell.is_check or cell.is_long:
            continue
        source = cell.source
        if cell.solution:
            source = pasted.get(cell.grade_id, solutions[cell.grade_id] if solved else cell.source)
        if source is not None:
            exec(compile(source, f"<cell {cell.index}>", "exec"), ns)
    return ns


def wrong(slug: str, exercise: str, mistake: str) -> str:
    """The source of the catalogue's wrong implementation of ``exercise`` whose diagnosis starts with ``mistake``."""
    return next(e["source"] for e in catalogue(slug)
                if e["exercise"] == exercise and e["diagnosis"].startswith(mistake))


UNSCALED = "Likely mistake: the scores are not scaled:"


def verdicts_of(slug: str, ns: dict, *exercises: str, seed: int = PRACTICE_SEEDS[0]) -> dict[str, practice.Verdict]:
    _, verdicts = practice.practice(slug, list(exercises) or None, namespace=ns, seed=seed)
    return {v.exercise: v for v in verdicts}


@pytest.mark.parametrize("seed", PRACTICE_SEEDS)
def test_a_failure_inherited_from_the_learners_own_function_names_the_function_it_calls(seed):
    """The issue's example: attention_scores without its scale; scaled_dot_product_attention, right, calls it."""
    ns = release_namespace(SLUG, {"attention_scores": wrong(SLUG, "attention_scores", UNSCALED)})
    found = verdicts_of(SLUG, ns, seed=seed)
    assert found["attention_scores"].status == "wrong" and UNSCALED in found["attention_scores"].message
    sdpa = found["scaled_dot_product_attention"]
    assert sdpa.status == "inherited" and sdpa.because == ("attention_scores",), sdpa
    assert sdpa.message.startswith("the fault is in attention_scores, which it calls and which is wrong: "), sdpa
    assert "Likely mistake" not in sdpa.message, "an inherited failure is not the caller's own mistake"
    assert practice.MARKS[sdpa.status] == "✗" and not sdpa.agrees


@pytest.mark.parametrize("state, source", [("is not written yet", STUB), ("is not defined", None)],
                         ids=["not written", "not defined"])
def test_a_caller_of_an_unwritten_or_undefined_function_is_not_called_unwritten_itself(state, source):
    stub = f"def attention_scores(q, k):\n    {source}\n" if source else None
    ns = release_namespace(SLUG, {"attention_scores": stub})
    found = verdicts_of(SLUG, ns)
    assert found["attention_scores"].status in ("not written", "missing")
    sdpa = found["scaled_dot_product_attention"]
    assert sdpa.status == "inherited", sdpa
    assert sdpa.message.startswith(f"the fault is in attention_scores, which it calls and which {state}: "), sdpa


def test_a_failure_inherited_through_a_helper_of_the_learners_own_is_traced_too():
    helper = ("def weights(q, k, mask):\n    return masked_softmax(attention_scores(q, k), mask)\n\n"
              "def scaled_dot_product_attention(q, k, v, mask=None):\n    return weights(q, k, mask) @ v\n")
    ns = release_namespace(SLUG, {"attention_scores": wrong(SLUG, "attention_scores", UNSCALED),
                                  "scaled_dot_product_attention": helper})
    sdpa = verdicts_of(SLUG, ns, "scaled_dot_product_attention")["scaled_dot_product_attention"]
    assert sdpa.status == "inherited" and sdpa.because == ("attention_scores",), sdpa
    assert ns["attention_scores"].__code__.co_filename == "<cell 5>", "the learner's own function is put back"


def callers() -> list[tuple[str, str, str]]:
    """(assignment, exercise, exercise it calls) wherever a solution calls another exercise of its notebook."""
    pairs = []
    for slug in assignments():
        ns = release_namespace(slug)
        names = [ex.name for ex in registry()[slug].exercises]
        for name in names:
            pairs += [(slug, name, other) for other in practice.exercises_called(ns[name], names)]
    return pairs


CALLERS = callers()


def test_the_solutions_that_call_other_exercises_are_found():
    assert {("02-attention", "scaled_dot_product_attention", "attention_scores"),
            ("02-attention", "scaled_dot_product_attention", "masked_softmax"),
            ("03-multi-head-attention", "multi_head_attention", "split_heads"),
            ("09-vision-transformer", "patch_embed", "patchify")} <= set(CALLERS), CALLERS
    assert ("02-attention", "scaled_dot_product_attention", "causal_mask") not in CALLERS


@pytest.mark.parametrize("slug, caller, callee", CALLERS, ids=lambda x: x)
def test_a_right_caller_is_never_blamed_for_a_catalogued_mistake_of_the_function_it_calls(slug, caller, callee):
    """Every wrong implementation of ``callee`` in the catalogue, under the solution's ``caller``: the caller
    agrees (the mistake does not reach it) or its failure is traced to ``callee``, never called its own."""
    blamed = []
    entries = [e for e in catalogue(slug) if e["exercise"] == callee]
    if not registry()[slug].exercise(caller).comparisons:  # a recipe judged by training: seconds each, one suffices
        entries = entries[:1]
    for entry in entries:
        ns = release_namespace(slug, {callee: entry["source"]})
        verdict = verdicts_of(slug, ns, caller)[caller]
        if not (verdict.agrees or verdict.status == "inherited" and verdict.because == (callee,)):
            blamed.append((entry["mistake"], verdict.status, verdict.message))
    assert not blamed, f"{caller} was blamed for mistakes of {callee}: {blamed}"


@pytest.mark.parametrize("entry", [e for e in catalogue(SLUG) if e["exercise"] == "scaled_dot_product_attention"
                                   and "attention_scores(" in e["source"]], ids=lambda e: e["mistake"])
def test_a_callers_own_mistake_is_shown_with_a_right_callee_in_its_place(entry):
    """Both wrong: the caller's verdict is its own mistake, found with the reference's attention_scores in place
    of the learner's, and it names the function it calls that is wrong too."""
    ns = release_namespace(SLUG, {"attention_scores": wrong(SLUG, "attention_scores", UNSCALED),
                                  "scaled_dot_product_attention": entry["source"]})
    sdpa = verdicts_of(SLUG, ns, "scaled_dot_product_attention")["scaled_dot_product_attention"]
    assert sdpa.status == "wrong" and not sdpa.because, sdpa
    assert sdpa.message.endswith("(That is with a right attention_scores in place of yours, which it calls and "
                                 "which is wrong.)"), sdpa.message
    named = [m.message for m in registry()[SLUG].exercise("scaled_dot_product_attention").mistakes]
    if "Likely mistake: " in sdpa.message:
        said = sdpa.message.split("Likely mistake: ", 1)[1]
        assert any(said.startswith(m) for m in named), said
        assert not said.startswith("the scores are not scaled"), "the callee's mistake is not the caller's"


@pytest.mark.parametrize("slug", assignments())
def test_an_untouched_release_quotes_its_stub_as_the_cell_has_it(slug):
    cells = read_cells(notebooks(slug, "exercises")[0])
    stubs = {c.grade_id: next(line.strip() for line in c.source.splitlines() if "NotImplementedError" in line)
             for c in cells if c.kind == "code" and c.solution}
    found = verdicts_of(slug, release_namespace(slug, solved=False))
    assert set(found) == set(stubs)
    for name, verdict in found.items():
        assert verdict.status == "not written", verdict
        assert f"replace the line `{stubs[name]}` with your code" in verdict.message, (stubs[name], verdict.message)
        assert "NotImplementedError()" not in verdict.message
    assert set(stubs.values()) == {STUB}, "the release's stub is nbgrader_config.py's, grader.failures.STUB"


def test_a_not_implemented_error_of_torch_is_a_failure_not_an_unwritten_function():
    source = "def causal_mask(n):\n    raise NotImplementedError(\"Could not run 'aten::tril' with arguments\")\n"
    verdict = verdicts_of(SLUG, release_namespace(SLUG, {"causal_mask": source}), "causal_mask")["causal_mask"]
    assert verdict.status == "wrong", verdict
    assert "raised NotImplementedError: Could not run 'aten::tril'" in verdict.message
    assert "not implemented yet" not in verdict.message


@pytest.mark.parametrize("slug", ["02-attention", "08-efficient-attention"])
def test_the_report_shows_no_seed_timing_or_empty_batch_shape(slug):
    """Every catalogued mistake of the exercises whose cases are labelled with their batch shape."""
    texts = []
    for entry in (e for e in catalogue(slug) if slug == "02-attention" or e["exercise"] == "online_softmax_attention"):
        ns = release_namespace(slug, {entry["exercise"]: entry["source"]})
        _, verdicts = practice.practice(slug, [entry["exercise"]], namespace=ns, seed=PRACTICE_SEEDS[0])
        texts.append(practice.report(slug, verdicts))
    shown = "\n".join(texts)
    assert "✗" in shown
    assert "batch ()" not in shown
    assert not re.search(r"\bseed\b", shown, re.I), "the seed is the grader's business"
    assert not re.search(r"\d+(\.\d+)? s\b", shown), "timings are not the learner's business"
    assert "batch (2,)" in shown or "batch 2" in shown or slug == "02-attention"  # a real batch shape stays


def test_an_empty_batch_shape_leaves_the_label_and_a_real_one_stays():
    assert practice.for_learner("f gives wrong values (batch (), n_q=2, float64): max") == \
        "f gives wrong values (n_q=2, float64): max"
    assert practice.for_learner("(x (2, 3), batch ())") == "(x (2, 3))"
    assert practice.for_learner("(batch (2,), n_q=6)") == "(batch (2,), n_q=6)"


def test_the_check_runs_on_one_thread_and_gives_the_learners_thread_count_back():
    seen = []
    ns = release_namespace(SLUG)
    solution = ns["causal_mask"]

    def causal_mask(n):
        seen.append(torch.get_num_threads())
        return solution(n)

    ns["causal_mask"] = causal_mask
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        (verdict,) = practice.practice(SLUG, ["causal_mask"], namespace=ns)[1]
        assert verdict.agrees, verdict
        assert seen and set(seen) == {1}, seen
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_the_check_prints_no_warning():
    ns = release_namespace(SLUG, {"causal_mask": "import warnings\n\ndef causal_mask(n):\n"
                                                  "    warnings.warn('a warning of the learner')\n"
                                                  "    return torch.ones(n, n, dtype=torch.bool).tril()\n"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (verdict,) = practice.practice(SLUG, ["causal_mask"], namespace=ns)[1]
    assert verdict.agrees and not caught, [str(w.message) for w in caught]


def test_checking_one_assignment_imports_no_other_assignment_or_chapter():
    """The first check's cost is its own assignment's: no other assignment's cases, no other chapter's model."""
    code = ("import sys\nfrom grader.practice import practice\n"
            "_, v = practice('02-attention', namespace={}, seed=1017)\n"
            "assert [x.status for x in v] == ['missing'] * 5, v\n"  # four functions and the prediction
            "loaded = sorted(m for m in sys.modules if m.startswith(('grader.assignments.', 'course_lib.')))\n"
            "print(loaded)\n"
            "assert loaded == ['course_lib.attention', 'grader.assignments.attention'], loaded\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
