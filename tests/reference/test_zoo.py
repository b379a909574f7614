"""The model zoo: every checkpoint has a recipe, is reproducible from it, and reproduces its card."""

from __future__ import annotations

import json
import math

import pytest
import torch

from course_lib import zoo
from course_lib.training import learning_rate
from tools import zoo as recipes

STORED = zoo.names()
#: the card's metrics are measured on the stored weights; re-measuring them may differ by kernel rounding only
METRIC_ATOL = 1e-3


def test_every_recipe_is_trained_and_every_checkpoint_has_a_recipe():
    assert set(STORED) == set(recipes.RECIPES), (
        f"recipes without a checkpoint: {sorted(set(recipes.RECIPES) - set(STORED))}; "
        f"checkpoints without a recipe: {sorted(set(STORED) - set(recipes.RECIPES))} (run make zoo)")


def test_the_whole_zoo_stays_under_30_mb():
    total = sum((zoo.ZOO_DIR / f"{n}.safetensors").stat().st_size for n in STORED)
    assert total <= 30 * 2**20, f"the zoo's weights take {total / 2**20:.1f} MiB, over 30 MiB"


@pytest.mark.parametrize("name", STORED)
def test_the_card_records_the_recipe_it_was_trained_by(name):
    card = zoo.card(name)
    r = recipes.recipe(name)
    assert card["model"] == {**card["model"], "kind": r.kind, "config": json.loads(json.dumps(r.config))}
    # a recipe trained to convergence ran until its stopping rule said stop, at most its max_steps
    steps = r.train.max_steps if r.early_stop is None else card["stopping"]["stopped_at"]
    assert card["recipe"]["seed"] == r.train.seed and card["recipe"]["steps"] == steps <= r.train.max_steps
    stored_train = card["recipe"]["train"]
    for key, value in stored_train.items():
        stored = json.loads(json.dumps(getattr(r.train, key)))
        assert stored == value, f"{name}: the recipe's {key} changed since training"
    assert card["curve"][-1]["step"] == steps
    for key in ("cpu", "cores", "threads", "cpu_capability", "torch"):
        assert key in card["machine"]


@pytest.mark.parametrize("name", [n for n in STORED if recipes.recipe(n).early_stop is not None])
def test_a_run_to_convergence_stopped_where_its_rule_says(name):
    """The card's held-out curve, read by the recipe's stopping rule, gives the card's best and last step: a
    measurement every ``every`` updates, the stored weights those of the best one, and the run ended once
    ``patience`` updates passed without a better one (or at max_steps, and then the card says it did not
    converge)."""
    card, rule, cap = zoo.card(name), recipes.recipe(name).early_stop, recipes.recipe(name).train.max_steps
    stopping = card["stopping"]
    assert stopping["rule"] == rule.describe()
    steps = [m["step"] for m in stopping["held_out"]]
    assert steps == list(range(rule.every, stopping["stopped_at"] + 1, rule.every)), steps
    best = None
    for m in stopping["held_out"]:
        if best is None or rule.improves(m[rule.monitor], best[rule.monitor]):
            best = m
    assert stopping["best_step"] == best["step"]
    assert stopping["converged"] == (stopping["stopped_at"] - best["step"] >= rule.patience)
    assert stopping["converged"] or stopping["stopped_at"] == cap
    assert stopping["stopped_at"] - rule.every < best["step"] + rule.patience or stopping["stopped_at"] == cap


@pytest.mark.parametrize("name", [n for n in STORED if recipes.recipe(n).track is not None])
def test_a_tracked_run_measured_its_curve_from_the_start_to_its_last_update(name):
    """A recipe with a ``track`` measurement (the GPT's held-out and training losses) recorded it before the first
    update, every ``track_every`` updates and at the end; the last record agrees with the card's metrics, which
    were measured again on the stored half-precision weights."""
    card, r = zoo.card(name), recipes.recipe(name)
    steps = [t["step"] for t in card["tracked"]]
    assert steps[0] == 0 and steps[-1] == card["recipe"]["steps"], steps
    assert all(0 < b - a <= r.track_every for a, b in zip(steps, steps[1:])), steps
    last = card["tracked"][-1]
    for key in set(last) - {"step"}:
        assert math.isclose(last[key], card["metrics"][key], abs_tol=0.02), (key, last[key], card["metrics"][key])


@pytest.mark.slow
@pytest.mark.parametrize("name", STORED)
def test_the_first_updates_of_the_recipe_reproduce_the_stored_run(name):
    """The recipe's first 5 updates, re-run here, land on the card's ``start``: the same initialisation, batches,
    optimiser and warm-up as the stored run. The start was recorded by a re-run that reproduced the stored
    curve's first record, the mean loss of 25 updates (10 for a fine-tuning): `make zoo-check` re-runs those."""
    torch.set_num_threads(1)
    card = zoo.card(name)
    start, first = card["start"], card["curve"][0]
    assert start["step"] == recipes.START_STEPS <= first["step"], (start, first)
    again = recipes.mean_loss(recipes.replay(name, start["step"]))
    assert math.isclose(again, start["loss"], rel_tol=recipes.REPLAY_RTOL), (
        f"{name}: re-run, the mean loss of the first {start['step']} updates is {again:.6f}; the card's start "
        f"says {start['loss']:.6f}")


@pytest.mark.parametrize("name", STORED)
def test_the_recipe_gives_every_learning_rate_of_the_stored_curve(name):
    """The schedule of the whole run, warm-up and decay, is the recipe's: every logged step's rate."""
    card = zoo.card(name)
    train = recipes.recipe(name).train
    for record in [card["start"], *card["curve"]]:
        assert math.isclose(learning_rate(record["step"], train), record["lr"], rel_tol=1e-9), (
            f"{name}, step {record['step']}: the recipe's rate is {learning_rate(record['step'], train)}, "
            f"the card says {record['lr']}")


@pytest.mark.slow
@pytest.mark.parametrize("name", STORED)
def test_the_stored_weights_reproduce_the_cards_metrics(name):
    torch.set_num_threads(1)
    model, card = zoo.load(name)
    r = recipes.recipe(name)
    measured = r.evaluate(model, torch.device("cpu"))
    for key, value in card["metrics"].items():
        assert math.isclose(measured[key], value, rel_tol=METRIC_ATOL, abs_tol=METRIC_ATOL), (
            f"{name}: {key} is {measured[key]} on the stored weights, the card says {value}")


def test_loading_an_unknown_model_names_the_known_ones():
    with pytest.raises(ValueError, match=r"no model 'nope' in the zoo .*known: \["):
        zoo.load("nope")


def test_weights_round_trip_through_save_and_load(tmp_path):
    torch.manual_seed(0)
    cfg = dict(vocab_size=11, dim=16, n_layers=1, n_heads=2, max_seq_len=8)
    model = zoo.build("decoder_lm", cfg)
    zoo.save("tiny", model, {"model": {"kind": "decoder_lm", "config": cfg}}, dtype="float32", folder=tmp_path)
    loaded, card = zoo.load("tiny", folder=tmp_path)
    x = torch.randint(0, 11, (2, 5))
    torch.testing.assert_close(loaded(x), model.eval()(x))
    assert card["weights"]["dtype"] == "float32"
    with pytest.raises(ValueError, match=r"dtype must be one of .* got 'int8'"):
        zoo.save("tiny", model, {}, dtype="int8", folder=tmp_path)
