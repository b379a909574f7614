"""course_lib.experiment: one seed setting, and claims that check what the prose says.

Also the two pieces of the notebook tests that depend on it: nbval compares a
claim's statement and verdict but not its measured bracket, and does not
compare glue records.
"""

from __future__ import annotations

import configparser
import json
import math
import re

import pytest
import torch

from course_lib import experiment
from course_lib.experiment import ClaimFailed, check, claim, evaluate, generator, quote, reseed, start
from nbtools import ROOT


@pytest.fixture
def clean_env(monkeypatch):
    for name in (experiment.SEED_ENV, experiment.THREADS_ENV, experiment.LOG_ENV, experiment.NOTEBOOK_ENV):
        monkeypatch.delenv(name, raising=False)
    n = torch.get_num_threads()
    yield monkeypatch
    torch.set_num_threads(n)


# ---- the seed ------------------------------------------------------------------------------------

def test_the_seed_defaults_to_zero_and_comes_from_the_environment(clean_env):
    assert experiment.seed() == 0
    clean_env.setenv("COURSE_SEED", "3")
    assert experiment.seed() == 3 and start() == 3


@pytest.mark.parametrize("bad", ["-1", "two", "1.5"])
def test_a_bad_seed_is_named_with_the_rule(clean_env, bad):
    clean_env.setenv("COURSE_SEED", bad)
    with pytest.raises(ValueError, match=rf"COURSE_SEED={re.escape(repr(bad))}.*whole number >= 0"):
        experiment.seed()


def test_start_sets_the_threads_and_seeds_torch(clean_env):
    clean_env.setenv("COURSE_THREADS", "2")
    clean_env.setenv("COURSE_SEED", "5")
    start()
    assert torch.get_num_threads() == 2
    a = torch.rand(3)
    start()
    assert torch.equal(a, torch.rand(3))
    clean_env.setenv("COURSE_THREADS", "0")
    with pytest.raises(ValueError, match="COURSE_THREADS='0'"):
        start()


def test_streams_differ_by_number_and_by_seed_and_seed_zero_keeps_plain_numbers(clean_env):
    assert generator(7).initial_seed() == 7
    draws = {k: torch.randn(4, generator=generator(k)) for k in range(3)}
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[1], draws[2])
    assert torch.equal(draws[1], torch.randn(4, generator=generator(1)))
    clean_env.setenv("COURSE_SEED", "1")
    assert not torch.equal(draws[1], torch.randn(4, generator=generator(1)))
    assert generator(0).initial_seed() != generator(1).initial_seed()
    reseed(2)
    x = torch.rand(2)
    reseed(2)
    assert torch.equal(x, torch.rand(2))
    with pytest.raises(ValueError, match="stream number"):
        generator(-1)


# ---- claims --------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, op, threshold, holds, margin", [
    (0.8, ">", 0.7, True, 0.1), (0.6, ">", 0.7, False, -0.1), (0.7, ">", 0.7, False, 0.0), (0.7, ">=", 0.7, True, 0.0),
    (0.2, "<", 0.5, True, 0.3), (0.5, "<=", 0.5, True, 0.0), (0.9, "<", 0.5, False, -0.4),
    (0.5, "in", (0.4, 0.9), True, 0.1), (1.0, "in", (0.4, 0.9), False, -0.1),
    (3, "==", 3, True, 0.0), (2, "==", 3, False, 0.0),
])
def test_a_claim_holds_exactly_when_its_comparison_does(value, op, threshold, holds, margin):
    c = evaluate("the statement", value, op, threshold)
    assert c.holds is holds
    assert c.margin == pytest.approx(margin)


def test_nan_never_holds():
    for op in (">", "<", ">=", "<="):
        assert not evaluate("s", math.nan, op, 0.0).holds
    assert not evaluate("s", math.nan, "in", (0, 1)).holds


def test_a_claim_prints_its_sentence_with_its_number_and_fails_the_cell(capsys):
    claim("The test accuracy is {:.2f}.", torch.tensor(0.83), ">", 0.7)
    line = capsys.readouterr().out.strip()
    assert line.startswith("✓ The test accuracy is ⟨0.83⟩.  [measured 0.83 > 0.7, margin +0.13")
    with pytest.raises(ClaimFailed, match=r"'The loss is \{:.1f\}\.'.*measured 2, needs < 1"):
        claim("The loss is {:.1f}.", 2.0, "<", 1.0)
    assert capsys.readouterr().out.startswith("✗ The loss is ⟨2.0⟩.")


def test_a_claim_shows_the_other_numbers_its_sentence_names():
    c = evaluate("The ViT reaches {vit:.2f} and the CNN {cnn:.2f}: a gap of {:.2f}.", 0.3, ">", 0.1,
                 {"vit": 0.6, "cnn": 0.9})
    assert c.sentence() == "The ViT reaches 0.60 and the CNN 0.90: a gap of 0.30."
    with pytest.raises(ValueError, match=r"names fields \['cnn'\] that are not given"):
        evaluate("The CNN reaches {cnn:.2f}, {:.2f} more.", 0.3, ">", 0.1)


@pytest.mark.parametrize("statement, message", [
    ("the accuracy is {:.2f}.", "must be a sentence"),
    ("The accuracy is {:.2f}", "must be a sentence"),
    ("The accuracy is high.", "no field for the measured value"),
    ("The accuracy is {acc:.2f}.", "no field for the measured value"),
])
def test_a_finding_is_a_sentence_with_its_number(statement, message):
    with pytest.raises(ValueError, match=message):
        claim(statement, 0.8, ">", 0.5, acc=0.8)


def test_a_check_shows_nothing_and_fails_the_cell(capsys):
    check("no coordinates outside the values' range", 0, "==", 0)
    assert capsys.readouterr().out == ""
    with pytest.raises(ClaimFailed, match=r"'no NaN in the gradient'.*measured 3, needs == 0"):
        check("no NaN in the gradient", 3, "==", 0)
    assert capsys.readouterr().out == ""


def test_relative_margins_scale_by_the_threshold():
    assert evaluate("s", 1.2, ">", 1.0).relative == pytest.approx(0.2)
    assert evaluate("s", 0.5, "in", (0.0, 1.0)).relative == pytest.approx(1.0)
    assert evaluate("s", 1e-3, ">", 0.0).relative == pytest.approx(1e-3)  # no scale: the margin itself
    assert math.isnan(evaluate("s", 1, "==", 1).relative)


@pytest.mark.parametrize("args, message", [
    (("s", 1.0, "~", 1.0), "op='~'"),
    (("", 1.0, ">", 0.0), "non-empty"),
    (("s", torch.ones(2), ">", 0.0), r"shape \(2,\)"),
    (("s", "high", ">", 0.0), "must be a number"),
    (("s", 1.0, "in", 0.5), r"\(low, high\)"),
    (("s", 1.0, "in", (2.0, 1.0)), "empty"),
])
def test_bad_claims_are_refused_with_the_rule(args, message):
    with pytest.raises(ValueError, match=message):
        evaluate(*args)


def test_claims_are_logged_for_the_seeds_run(clean_env, tmp_path):
    log = tmp_path / "claims.jsonl"
    clean_env.setenv("COURSE_CLAIMS_LOG", str(log))
    clean_env.setenv("COURSE_NOTEBOOK", "chapters/x/y.ipynb")
    clean_env.setenv("COURSE_SEED", "4")
    claim("A holds at {:.1f}.", 2.0, ">", 1.0)
    check("b holds", 2.0, ">", 1.0)
    with pytest.raises(ClaimFailed):
        claim("C fails at {:.1f}.", 0.0, ">", 1.0)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["statement"], r["holds"], r["shown"], r["seed"], r["notebook"]) for r in records] == [
        ("A holds at {:.1f}.", True, True, 4, "chapters/x/y.ipynb"),
        ("b holds", True, False, 4, "chapters/x/y.ipynb"),
        ("C fails at {:.1f}.", False, True, 4, "chapters/x/y.ipynb")]


def test_quote_needs_an_identifier():
    with pytest.raises(ValueError, match="identifier"):
        quote("not a name", 1.0)


# ---- what nbval compares -------------------------------------------------------------------------

def sanitizers() -> list[tuple[str, str]]:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "tests" / "nbval_sanitize.cfg", encoding="utf-8")
    return [(cfg[s]["regex"], cfg[s]["replace"]) for s in cfg.sections()]


def sanitize(text: str) -> str:
    for regex, replace in sanitizers():
        text = re.sub(regex, replace, text)
    return text


SENTENCE = "The deep residual net ends at a loss of {:.2f}, under half the plain net's ({plain:.2f})."


def test_nbval_compares_a_claims_sentence_and_verdict_but_not_its_numbers():
    here = evaluate(SENTENCE, 0.123456, "<", 0.5, {"plain": 0.91}).line()
    there = evaluate(SENTENCE, 0.1301, "<", 0.5, {"plain": 0.9}).line()
    assert here != there and sanitize(here) == sanitize(there)
    flipped = evaluate(SENTENCE, 0.6, "<", 0.5, {"plain": 0.9}).line()
    assert sanitize(flipped) != sanitize(here), "a verdict that flips must show in nbval"
    other = evaluate(SENTENCE.replace("residual", "plain"), 0.123456, "<", 0.5, {"plain": 0.9}).line()
    assert sanitize(other) != sanitize(here)
    between = evaluate("Inside at {:.1f}.", 0.5, "in", (0.1, 0.9)).line()
    assert sanitize(between) == "✓ Inside at ⟨…⟩.  [measured ...]"
    assert sanitize("accuracy 0.83 [not a claim]") == "accuracy 0.83 [not a claim]"


def test_in_a_notebook_a_claim_is_a_sentence_with_its_check_one_click_away():
    c = evaluate("The test accuracy is {:.2f}.", 0.83, ">", 0.7)
    assert c.html() == ('<details class="course-claim"><summary>The test accuracy is '
                        '<span class="course-claim-value">0.83</span>.</summary>'
                        '<p class="course-claim-check">Checked as the page runs: the measured value, '
                        '<span class="course-claim-value">0.83</span>, must be more than 0.7 '
                        '(margin <span class="course-claim-value">+0.13</span>).</p></details>')
    # the sentence is text, not markup
    assert "A &lt; b &amp; c at" in evaluate("A < b & c at {}.", 1.0, "<", 2.0).html()
    here = evaluate(SENTENCE, 0.123456, "<", 0.5, {"plain": 0.91}).html()
    there = evaluate(SENTENCE, 0.1301, "<", 0.5, {"plain": 0.9}).html()
    assert here != there and sanitize(here) == sanitize(there)


def test_nbval_skips_glue_records_and_nothing_else():
    import importlib.util

    spec = importlib.util.spec_from_file_location("chapters_conftest", ROOT / "chapters" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    skip = mod._SkipCompare(("metadata", "image/png"))
    assert "application/papermill.record/text/plain" in skip and "metadata" in skip and "image/png" in skip
    assert "text/plain" not in skip and "text/html" not in skip and "stdout" not in skip
    assert skip, "nbval uses `skip_compare or default`: the tuple must stay truthy"
