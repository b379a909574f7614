"""course_lib.lm_recipe: the GPT capstone's reference, a GPT as a function of its weights and its recipe."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_lib import lm_recipe as R
from course_lib.decoder_lm import DecoderLM
from course_lib.training import clip_grad_norm, warmup_cosine

CFG = dict(vocab_size=50, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, mlp_hidden=24, rope_base=10000.0,
           norm_eps=1e-5)


def _module(params, cfg=CFG):
    model = DecoderLM(R.decoder_config(cfg, attn_impl="eager", max_seq_len=64))
    state = {k: v.detach() for k, v in params.items()}
    model.load_state_dict(state | {"lm_head.weight": state["tok_emb.weight"]})
    return model


@pytest.mark.parametrize("n_kv", [1, 2, 4])
def test_the_function_of_the_weights_is_chapter_sevens_model_with_those_weights(n_kv):
    cfg = dict(CFG, n_kv_heads=n_kv)
    params = R.init_params(cfg, torch.Generator().manual_seed(n_kv), std=0.3)
    with torch.no_grad():
        for p in params.values():
            if p.ndim == 1:
                p.uniform_(0.5, 2.0)  # gains far from 1, so that every norm shows
    ids = torch.randint(50, (3, 11), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(R.gpt_logits(params, ids, cfg), _module(params, cfg)(ids), rtol=1e-5, atol=1e-5)


def test_the_names_shapes_and_count_are_the_modules():
    model = DecoderLM(R.decoder_config(CFG))
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items() if k != "lm_head.weight"}
    assert R.param_shapes(CFG) == shapes
    assert R.param_count(CFG) == model.num_params() == sum(p.numel() for p in R.init_params(
        CFG, torch.Generator()).values())
    big = dict(CFG, vocab_size=3000, dim=192, n_layers=3, n_heads=12, n_kv_heads=4, mlp_hidden=512)
    assert R.param_count(big) == DecoderLM(R.decoder_config(big, max_seq_len=8)).num_params()


def test_the_initialisation_is_the_modules_std_and_unit_gains():
    params = R.init_params(dict(CFG, vocab_size=4000), torch.Generator().manual_seed(0))
    assert abs(params["tok_emb.weight"].std().item() - 0.02) < 0.001
    assert all(p.requires_grad and p.is_leaf for p in params.values())
    assert torch.equal(params["norm.weight"], torch.ones(16))


def test_a_batch_is_windows_and_their_next_tokens_inside_the_stream():
    ids = torch.arange(1000, 1040, dtype=torch.int32)
    x, y = R.get_batch(ids, 64, 7, torch.Generator().manual_seed(3))
    assert x.dtype == y.dtype == torch.int64 and x.shape == (64, 7)
    assert torch.equal(y, x + 1) and y.max() <= 1039 and torch.equal(x[:, 1:], y[:, :-1])
    assert x[:, 0].max() == 1000 + 40 - 7 - 1  # every start is drawn: the last one keeps its target inside


def test_the_schedule_is_chapter_sevens():
    for t in range(0, 130, 7):
        assert R.lr_at(t, 1e-3, 10, 120, 1e-4) == warmup_cosine(t, 1e-3, 10, 120, 1e-4)


def test_the_loop_learns_a_repeating_text_and_is_reproducible():
    cfg = dict(CFG, vocab_size=12, n_layers=1)
    text = torch.arange(12).repeat(30)
    hp = dict(steps=80, batch_size=8, block_size=8, max_lr=0.02, min_lr=0.002, warmup_steps=5, weight_decay=0.0,
              max_norm=1.0)
    runs = []
    for _ in range(2):
        params = R.init_params(cfg, torch.Generator().manual_seed(0), std=0.2)
        runs.append((R.train_loop(params, text, cfg, hp, torch.Generator().manual_seed(1)), params))
    (losses, params), (again, _) = runs
    assert losses == again and len(losses) == 80
    assert losses[-1] < 0.05 * losses[0] and R.evaluate(params, text, cfg, 8) < 0.1


def test_the_held_out_loss_counts_every_target_of_the_whole_windows_once():
    params = R.init_params(CFG, torch.Generator().manual_seed(5), std=0.3)
    ids = torch.randint(50, (30,), generator=torch.Generator().manual_seed(1))
    block = 4  # windows [0:5], [4:9], ..., [24:29]: targets 1..28, the last token left out
    got = R.evaluate(params, ids, CFG, block)
    with torch.no_grad():
        nll = [F.cross_entropy(R.gpt_logits(params, ids[w:w + block][None], CFG)[0], ids[w + 1:w + block + 1],
                               reduction="none") for w in range(0, 28, block)]
    assert isinstance(got, float) and math.isclose(got, torch.cat(nll).mean().item(), rel_tol=1e-6)
    with pytest.raises(ValueError, match="at least block_size \\+ 1 = 5 tokens, got 4"):
        R.evaluate(params, ids[:4], CFG, block)


def test_the_recipe_trains_the_course_model_and_returns_detached_weights():
    cfg, params = R.train_gpt(torch.arange(40).repeat(20), 40, 30, 0)
    assert cfg == dict(vocab_size=40, **R.RECIPE_CONFIG)
    assert set(params) == set(R.param_shapes(cfg)) and not any(p.requires_grad for p in params.values())


def test_clipping_is_chapter_sevens_and_keeps_float64():
    p = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    p.grad = torch.tensor([3.0, 4.0, 0.0], dtype=torch.float64) * (1 + 1e-12)
    total = R.clip_global_norm([p], 1.0)
    assert total.dtype == torch.float64 and abs(total.item() - 5.0 * (1 + 1e-12)) < 1e-14
    torch.testing.assert_close(p.grad, torch.tensor([0.6, 0.8, 0.0], dtype=torch.float64), rtol=0, atol=1e-6)
    q = torch.zeros(2, requires_grad=True)
    for clip in (R.clip_global_norm, clip_grad_norm):
        q.grad = torch.tensor([6.0, 8.0])
        clip([q], 2.0)
        torch.testing.assert_close(q.grad, torch.tensor([1.2, 1.6]))
        q.grad = torch.tensor([0.3, 0.4])  # under the bar: untouched
        clip([q], 2.0)
        assert torch.equal(q.grad, torch.tensor([0.3, 0.4]))
