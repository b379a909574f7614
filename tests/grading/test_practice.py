"""Check your work (grader/practice.py): the hidden tests' verdicts on fresh cases, while a learner works.

The check must give a planted mistake the diagnosis grading gives it, never on grading's cases and never
showing the reference's code; it must be off where the course's configuration says so, with a message; and it
must sit at the end of every release notebook as the course's own locked cell. That grading neither runs it nor
reads it as the learner's code is tested where a submission is autograded (test_nbgrader_roundtrip.py), that
feedback leaves it out in test_grading_integrity.py (no "from grader" on a feedback page), and
that a learner gets a diagnosis from it in JupyterLab in tests/lab/test_lab_browser.py.
"""

from __future__ import annotations

import inspect
import runpy

import nbformat
import pytest

from grader import practice
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
    seed, verdicts = practice.practice(SLUG, namespace=ns)
    text = practice.report(SLUG, seed, verdicts)
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
