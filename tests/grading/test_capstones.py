"""The GPT capstone's recipe exercise: what the grader trusts of a learner's model, and what it keeps from them.

The parts (count_params, gpt_logits, get_batch, lr_at, train_loop, evaluate) are graded as every exercise is,
by the catalogue (tests/grading/catalogues/08x-capstone-gpt.py). Here: the recipe's output is checked as
hostile data (every return value is refused by name or accepted, nothing else happens), the text the
grader trains on is relabelled per learner and its held-out files are none of those the learner's copy
holds, the notebook's long run is skipped in the grading kernel, and the data file is what the corpus gives.
"""

from __future__ import annotations

import math
import os
import runpy
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib import lm_recipe as R
from grader.assignments import capstone_gpt as C
from grader.failures import ExerciseFailure
from grader.notebook import read_cells
from nbtools import ROOT, fuzz_settings

NOTEBOOK = ROOT / "solutions" / "08x-capstone-gpt" / "capstone_gpt.ipynb"
SMALL = dict(vocab_size=11, dim=8, n_layers=1, n_heads=2, n_kv_heads=1, mlp_hidden=6, rope_base=1e4, norm_eps=1e-5)


def _model(cfg=SMALL):
    return dict(cfg), {k: torch.zeros(s) for k, s in R.param_shapes(cfg).items()}


def test_a_right_pair_is_taken_as_float32_parameters_of_its_config():
    cfg, params = C.recipe_output(_model(), 11, "train_gpt")
    assert cfg == SMALL and all(p.dtype == torch.float32 for p in params.values())


@pytest.mark.parametrize("change, named", [
    (lambda cfg, p: (cfg, p, 3), "must return a pair"),
    (lambda cfg, p: (cfg, list(p.values())), "must return a pair"),
    (lambda cfg, p: ({**cfg, "dim": 8.5}, p), "cfg['dim'] = 8.5: a positive integer"),
    (lambda cfg, p: ({**cfg, "n_heads": 0}, p), "cfg['n_heads'] = 0"),
    (lambda cfg, p: ({**cfg, "rope_base": float("inf")}, p), "a positive finite number"),
    (lambda cfg, p: ({**cfg, "n_layers": True}, p), "cfg['n_layers'] = True"),
    (lambda cfg, p: ({k: v for k, v in cfg.items() if k != "norm_eps"}, p), "lacks ['norm_eps']"),
    (lambda cfg, p: ({**cfg, "vocab_size": 12}, p), "the text has 11 token ids"),
    (lambda cfg, p: ({**cfg, "n_kv_heads": 3, "n_heads": 4, "dim": 16}, p), "n_kv_heads must divide n_heads"),
    (lambda cfg, p: ({**cfg, "n_layers": 9}, p), "at most 8 layers"),
    (lambda cfg, p: ({**cfg, "dim": 4096, "n_heads": 2}, p), "2,000,000 parameters"),
    (lambda cfg, p: (cfg, {**p, 7: torch.zeros(1)}), "the names of the model's parameters: 7"),
    (lambda cfg, p: (cfg, {**p, "norm.weight": torch.zeros(9)}), "params['norm.weight'] must be a floating tensor"),
    (lambda cfg, p: (cfg, {**p, "norm.weight": torch.zeros(8, dtype=torch.int64)}), "must be a floating tensor"),
    (lambda cfg, p: (cfg, {**p, "norm.weight": torch.full((8,), float("nan"))}), "the training diverged"),
    (lambda cfg, p: (cfg, {**p, "norm.weight": torch.zeros(8).to_sparse()}), "dense, on the CPU"),
    (lambda cfg, p: (cfg, {**p, "norm.weight": torch.zeros(8, device="meta")}), "dense, on the CPU"),
])
def test_every_kind_of_wrong_return_is_refused_by_name(change, named):
    with pytest.raises(ExerciseFailure, match=named.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        C.recipe_output(change(*_model()), 11, "train_gpt")


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=30)
    | st.builds(lambda n: torch.zeros(n), st.integers(0, 4)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12) | st.integers(), inner,
                                                                 max_size=4), max_leaves=12)


@fuzz_settings(60)
@given(st.data())
def test_whatever_a_recipe_returns_it_is_refused_by_name_or_taken(data):
    """The invariant: recipe_output raises ExerciseFailure or returns a valid model; no other exception, and a
    message never longer than a diagnosis should be."""
    cfg, params = _model()
    for key in data.draw(st.lists(st.sampled_from([*R.CONFIG_KEYS, "extra"]), max_size=3)):
        cfg[key] = data.draw(_VALUES)
    for key in data.draw(st.lists(st.sampled_from([*params, "junk"]), max_size=2)):
        params[key] = data.draw(_VALUES)
    out = data.draw(st.sampled_from(["pair", "value"]))
    returned = (cfg, params) if out == "pair" else data.draw(_VALUES)
    try:
        got_cfg, got = C.recipe_output(returned, 11, "train_gpt")
    except ExerciseFailure as exc:
        assert len(str(exc)) < 600
    else:
        assert set(got) == set(R.param_shapes(got_cfg)) and R.param_count(got_cfg) <= C.MAX_PARAMS


def test_the_text_is_relabelled_per_learner_and_the_held_out_files_are_not_in_the_learners_copy():
    train, held, vocab = C.corpus()
    a_train, a_held, _ = C.relabelled(11)
    b_train, _, _ = C.relabelled(12)
    assert vocab == 4097 and not torch.equal(a_train, b_train) and not torch.equal(a_train, train)
    # one permutation for both splits: the relabelled text is the same text
    perm = torch.full((vocab,), -1, dtype=torch.long)
    perm[train.long()] = a_train.long()
    seen = perm[held.long()] >= 0  # the held-out tokens the training sample also holds
    assert seen.float().mean() > 0.99 and torch.equal(perm[held.long()][seen], a_held.long()[seen])
    with np.load(ROOT / "exercises" / "08x-capstone-gpt" / "python_stdlib_sample.npz") as sample:
        copy = torch.from_numpy(sample["held_out"].astype(np.int64))
    # the grader's held-out files never occur in the learner's copy: none of its 64-token windows does
    judged = {tuple(held[i:i + 64].tolist()) for i in range(0, len(held) - 64, 64)}
    mine = {tuple(copy[i:i + 64].tolist()) for i in range(len(copy) - 64)}
    assert not judged & mine


def test_a_model_that_knows_only_the_token_frequencies_is_under_the_uniform_guess_and_over_the_bar():
    train, held, vocab = C.corpus()
    unigram = C._unigram_loss(train, held, vocab)
    assert C.BAR + 0.3 < unigram < math.log(vocab) - 1.0


def test_the_long_run_is_skipped_in_the_grading_kernel_and_runs_in_the_learners():
    long = [c for c in read_cells(NOTEBOOK) if c.is_long and not c.is_check]
    assert long and all("if sample is not None" in c.source for c in long[1:])
    assert 'GRADING = "COURSE_GRADING_SANDBOX" in os.environ' in long[0].source
    from grader.sandbox import ENV_VAR
    assert ENV_VAR == "COURSE_GRADING_SANDBOX"
    ns = {"__name__": "__main__", "os": os, "np": np, "torch": torch}
    os.environ[ENV_VAR] = "{}"
    try:
        exec(compile(long[0].source, "long", "exec"), ns)
    finally:
        del os.environ[ENV_VAR]
    assert ns["sample"] is None


def test_the_sample_beside_the_notebook_is_what_the_corpus_gives():
    run = subprocess.run([sys.executable, "-m", "tools.capstone_data", "--check"], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    solution = (ROOT / "solutions" / "08x-capstone-gpt" / "python_stdlib_sample.npz").read_bytes()
    assert (ROOT / "exercises" / "08x-capstone-gpt" / "python_stdlib_sample.npz").read_bytes() == solution


# --------------------------------------------------------------------------
# Graded for real: nbgrader, the fence, the warm kernels and the judge outside the kernel
# --------------------------------------------------------------------------
SLUG, NB = "08x-capstone-gpt", "capstone_gpt"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    import shutil
    import time

    import nbformat

    from grader.notebook import grade_id

    course = tmp_path_factory.mktemp("capstone-course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    (course / "solutions").mkdir()
    shutil.copytree(ROOT / "solutions" / SLUG, course / "solutions" / SLUG)
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}")
    res = subprocess.run([os.path.join(os.path.dirname(sys.executable), "nbgrader"), "generate_assignment", SLUG,
                          "--log-level=ERROR"], cwd=course, capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    solution = course / "solutions" / SLUG / f"{NB}.ipynb"
    wrong = runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{SLUG}.py"))["WRONG"]
    unshifted = next(e for e in wrong if e["exercise"] == "train_gpt" and "shifted" in e["diagnosis"])
    bob = nbformat.read(solution, as_version=4)
    (cell,) = [c for c in bob.cells if grade_id(c) == "train_gpt"]
    cell.source = unshifted["source"]
    for student, nb in (("alice", nbformat.read(solution, as_version=4)), ("bob", bob),
                        ("carol", nbformat.read(course / "exercises" / SLUG / f"{NB}.ipynb", as_version=4))):
        folder = course / "submitted" / student / SLUG
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{NB}.ipynb")
        shutil.copy(solution.parent / "python_stdlib_sample.npz", folder)  # the data travels with the work
    start = time.monotonic()
    # one submission at a time, and a cell limit far above the recipe's seconds: the suite's other workers may
    # hold both cores while the three recipes train
    run = subprocess.run([sys.executable, "-m", "classroom.grade", "--root", str(course), "--timeout", "600",
                          "--jobs", "1", "--assignment", SLUG], cwd=ROOT, capture_output=True, text=True, env=env)
    return course, run, time.monotonic() - start


def _scores(course, student):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(NB, SLUG, student)
        return {g.name: g.score for g in nb.grades}


def test_the_solution_trains_in_the_fenced_kernel_and_scores_full_marks(graded):
    course, run, seconds = graded
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    print(f"graded 3 capstone submissions in {seconds:.1f} s")
    from grader.registry import assignment

    assert _scores(course, "alice") == {f"test_{ex.name}": ex.points for ex in assignment(SLUG).exercises}


def test_a_recipe_trained_on_unshifted_targets_loses_its_points_with_the_reason(graded):
    course, _, _ = graded
    scores = _scores(course, "bob")
    assert scores["test_train_gpt"] == 0 and sum(scores.values()) == 16, scores
    feedback = next((course / "autograded" / "bob" / SLUG).glob("*.ipynb")).read_text()
    assert "are the targets shifted by one" in feedback and "held-out loss of" in feedback


def test_the_untouched_release_scores_zero(graded):
    course, _, _ = graded
    assert set(_scores(course, "carol").values()) == {0}
