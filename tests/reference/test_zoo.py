"""The model zoo: every checkpoint has a recipe, is reproducible from it, and reproduces its card."""

from __future__ import annotations

import json
import math

import pytest
import torch

from course_lib import zoo
from tools import zoo as recipes

STORED = zoo.names()
#: the first updates re-run on this machine agree with the stored curve to this relative tolerance: the same
#: batches and initialisation, float32 on a CPU; only the CPU kernels' rounding may differ
CURVE_RTOL = 2e-3
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
    assert card["recipe"]["seed"] == r.train.seed and card["recipe"]["steps"] == r.train.max_steps
    stored_train = card["recipe"]["train"]
    for key, value in stored_train.items():
        stored = json.loads(json.dumps(getattr(r.train, key)))
        assert stored == value, f"{name}: the recipe's {key} changed since training"
    assert card["curve"][-1]["step"] == r.train.max_steps
    for key in ("cpu", "cores", "threads", "cpu_capability", "torch"):
        assert key in card["machine"]


@pytest.mark.slow
@pytest.mark.parametrize("name", STORED)
def test_the_first_steps_of_the_recipe_reproduce_the_start_of_the_stored_curve(name):
    """The recipe re-run up to the card's first logged step (25 updates; 10 for a short fine-tuning) lands
    on the stored loss: the same initialisation, batches, optimiser and schedule as the stored run."""
    torch.set_num_threads(1)
    curve = zoo.card(name)["curve"]
    first = curve[0]["step"]
    rerun = recipes.first_steps(name, first)
    assert [record["step"] for record in rerun] == [first], f"the re-run logged {rerun}, not step {first}"
    record, ref = rerun[0], curve[0]
    assert math.isclose(record["loss"], ref["loss"], rel_tol=CURVE_RTOL), (
        f"{name}, step {first}: re-run loss {record['loss']:.6f}, stored {ref['loss']:.6f}")
    assert math.isclose(record["lr"], ref["lr"], rel_tol=1e-9)


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
