"""course_lib.decoder_lm and course_lib.interop.llama: parity with Hugging Face's Llama, caches, GQA, causality."""

from __future__ import annotations

import math
from functools import lru_cache

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import interop
from course_lib.decoder_lm import DecoderLM, DecoderLMConfig
from course_lib.interop import llama as L
from course_lib.multi_head import KVCache

transformers = pytest.importorskip("transformers")

TOL = 1e-4  # float32 parity: max |logits difference|


pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def hf_llama(n_kv_heads=2, tie=False, bias=False, head_dim=None, seed=0, **extra):
    """A tiny random LlamaForCausalLM (float32, eval) whose weights are all far from their init values."""
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=n_kv_heads, head_dim=head_dim,
                                   tie_word_embeddings=tie, attention_bias=bias, mlp_bias=bias,
                                   rms_norm_eps=1e-5, max_position_embeddings=64, **extra)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # norms away from 1, biases away from 0, matrices large enough to matter
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
            else:
                p.normal_(0, 0.15)
    return model


def tiny(preset: str = "tiny", seed: int = 0, **overrides) -> DecoderLM:
    """A CPU-sized DecoderLM (eval) with weights scaled up from the 0.02 init."""
    torch.manual_seed(seed)
    cfg = DecoderLMConfig.preset(preset, **overrides)
    model = DecoderLM(cfg).eval()
    with torch.no_grad():  # so that mistakes show in the logits
        for p in model.parameters():
            p.normal_(0, 0.15) if p.ndim > 1 else p.add_(0.3 * torch.randn_like(p))
    return model


# ====================================================== parity with Hugging Face
@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4], ids=["mqa", "gqa2", "mha"])
def test_logits_match_hf_llama(n_kv_heads, tie, bias, attn_impl):
    hf = hf_llama(n_kv_heads, tie, bias)
    model = L.from_hf(hf, attn_impl=attn_impl)
    ids = torch.randint(0, 101, (3, 23), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        diff = (model(ids) - hf(ids).logits).abs().max().item()
    assert diff <= TOL, f"max |logits - HF logits| = {diff:.2e}"
    assert (model.lm_head.weight is model.tok_emb.weight) == tie


def test_logits_match_hf_llama_with_head_dim_not_dim_over_heads():
    hf = hf_llama(n_kv_heads=2, head_dim=24)
    model = L.from_hf(hf)
    ids = torch.randint(0, 101, (2, 17), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert (model(ids) - hf(ids).logits).abs().max().item() <= TOL


def test_rope_theta_is_read_from_rope_parameters():
    hf = hf_llama(rope_parameters={"rope_type": "default", "rope_theta": 321.0})
    model = L.from_hf(hf)
    assert model.cfg.rope_base == 321.0
    ids = torch.randint(0, 101, (1, 30), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (model(ids) - hf(ids).logits).abs().max().item() <= TOL


def test_registry_converts_llama_into_an_eval_mode_decoder_lm():
    model = interop.from_hf(hf_llama())
    assert isinstance(model, DecoderLM) and not model.training


def test_config_fields_come_from_the_hf_config():
    cfg = L.config_from_hf(hf_llama(n_kv_heads=1, tie=True, bias=True).config)
    assert (cfg.dim, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.mlp_hidden) == (64, 2, 4, 1, 16, 96)
    assert cfg.tie_embeddings and cfg.attn_bias and cfg.mlp_bias and cfg.norm_eps == 1e-5


def test_greedy_generation_matches_hf_generate():
    hf = hf_llama()
    model = L.from_hf(hf)
    ids = torch.randint(0, 101, (2, 5), generator=torch.Generator().manual_seed(4))
    expected = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False,
                           eos_token_id=None, pad_token_id=0)
    assert torch.equal(model.generate(ids, 10, greedy=True), expected)


# ====================================================== caches
@pytest.mark.parametrize("attn_impl", ["eager", "sdpa"])
@pytest.mark.parametrize("chunks", [[1] * 12, [5, 1, 1, 3, 2]], ids=["token-by-token", "prefill-then-chunks"])
def test_incremental_decoding_with_cache_equals_full_forward(attn_impl, chunks):
    model = tiny(attn_impl=attn_impl)
    ids = torch.randint(0, 256, (2, sum(chunks)), generator=torch.Generator().manual_seed(5))
    caches = model.make_caches(2, 16)
    with torch.no_grad():
        full = model(ids)
        pieces, start = [], 0
        for n in chunks:
            pieces.append(model(ids[:, start:start + n], caches=caches))
            start += n
    assert caches[0].length == ids.shape[1]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=TOL, rtol=0)


@pytest.mark.parametrize("preset", ["tiny", "tiny-mqa", "tiny-mha"])
def test_greedy_generation_with_cache_equals_without(preset):
    model = tiny(preset)
    ids = torch.randint(0, 256, (3, 4), generator=torch.Generator().manual_seed(6))
    cached = model.generate(ids, 20, greedy=True, use_cache=True)
    assert cached.shape == (3, 24) and torch.equal(cached[:, :4], ids)
    assert torch.equal(cached, model.generate(ids, 20, greedy=True, use_cache=False))


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.7, 10)])
def test_seeded_sampling_with_cache_equals_without(temperature, top_k):
    model = tiny()
    ids = torch.randint(0, 256, (2, 3), generator=torch.Generator().manual_seed(7))
    runs = [model.generate(ids, 20, temperature=temperature, top_k=top_k, use_cache=c,
                           generator=torch.Generator().manual_seed(8)) for c in (True, False)]
    assert torch.equal(*runs)


def test_top_k_one_sampling_is_greedy():
    model = tiny()
    ids = torch.randint(0, 256, (2, 3), generator=torch.Generator().manual_seed(9))
    assert torch.equal(model.generate(ids, 10, top_k=1), model.generate(ids, 10, greedy=True))


# ====================================================== grouped-query attention
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_gqa_equals_mha_with_each_kv_head_copied_to_its_query_group(n_kv_heads):
    gqa = tiny(n_kv_heads=n_kv_heads)
    mha = DecoderLM(DecoderLMConfig.preset("tiny", n_kv_heads=4)).eval()
    rep, hd = 4 // n_kv_heads, gqa.cfg.head_dim
    state = dict(gqa.state_dict())
    for key, w in gqa.state_dict().items():
        if key.endswith(("k_proj.weight", "v_proj.weight")):  # (n_kv * hd, dim) -> (n_heads * hd, dim)
            state[key] = w.view(n_kv_heads, 1, hd, -1).expand(-1, rep, -1, -1).reshape(4 * hd, -1)
    mha.load_state_dict(state)
    ids = torch.randint(0, 256, (2, 15), generator=torch.Generator().manual_seed(10))
    with torch.no_grad():
        torch.testing.assert_close(mha(ids), gqa(ids), atol=TOL, rtol=0)


def test_n_kv_heads_defaults_to_n_heads():
    assert DecoderLMConfig(n_heads=6, dim=96).n_kv_heads == 6


# ====================================================== causality and positions
@lru_cache(maxsize=None)
def _causal_model(attn_impl: str) -> DecoderLM:
    return tiny(attn_impl=attn_impl)


@settings(max_examples=25, deadline=None)
@given(seq=st.lists(st.integers(0, 255), min_size=2, max_size=20), data=st.data(),
       attn_impl=st.sampled_from(["eager", "sdpa"]))
def test_changing_future_tokens_does_not_change_earlier_logits(seq, data, attn_impl):
    model = _causal_model(attn_impl)
    t = data.draw(st.integers(1, len(seq) - 1), label="first changed position")
    tail = data.draw(st.lists(st.integers(0, 255), min_size=len(seq) - t, max_size=len(seq) - t), label="new tail")
    a, b = torch.tensor([seq]), torch.tensor([seq[:t] + tail])
    with torch.no_grad():
        torch.testing.assert_close(model(a)[:, :t], model(b)[:, :t], atol=1e-5, rtol=0)


def test_shifting_every_position_leaves_logits_unchanged():
    """RoPE encodes only relative positions: adding an offset to all positions changes nothing."""
    model = tiny()
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        torch.testing.assert_close(model(ids, positions=torch.arange(12) + 37), model(ids), atol=TOL, rtol=0)


# ====================================================== loss, presets, no host syncs
def test_loss_is_shifted_next_token_cross_entropy():
    model = tiny()
    ids = torch.randint(0, 256, (2, 10), generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        logits = model(ids)
        expected = F.cross_entropy(logits[:, :-1].reshape(-1, 256), ids[:, 1:].reshape(-1))
        torch.testing.assert_close(model.loss(ids), expected)


def test_freshly_initialised_model_predicts_nearly_uniformly():
    model = DecoderLM(DecoderLMConfig.preset("tiny"))
    ids = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(13))
    with torch.no_grad():
        assert abs(model.loss(ids).item() - math.log(256)) < 0.1


def test_llama_100m_preset_has_about_100m_parameters():
    with torch.device("meta"):
        model = DecoderLM(DecoderLMConfig.preset("llama-100m"))
    assert 95e6 < model.num_params() < 105e6, model.num_params()


def test_forward_and_cached_forward_never_read_tensor_values_on_the_host():
    """On the meta device a tensor has no values: any .item(), bool(t) or .tolist() would raise."""
    with torch.device("meta"):
        model = DecoderLM(DecoderLMConfig.preset("tiny"))
        ids = torch.zeros(2, 8, dtype=torch.long)
        caches = model.make_caches(2, 16)
        assert model(ids).shape == (2, 8, 256)
        model(ids, caches=caches)
        assert model(ids[:, :1], caches=caches).shape == (2, 1, 256)


# ====================================================== bad input
def test_n_kv_heads_that_does_not_divide_n_heads_is_rejected():
    with pytest.raises(ValueError, match=r"n_kv_heads=3 must divide n_heads=4"):
        DecoderLMConfig.preset("tiny", n_kv_heads=3)


def test_sequence_longer_than_max_seq_len_is_rejected_naming_both_lengths():
    model = tiny()
    with pytest.raises(ValueError, match=r"129 tokens.*max_seq_len=128"):
        model(torch.zeros(1, 129, dtype=torch.long))
    with pytest.raises(ValueError, match=r"120.*\+ max_new_tokens=9 = 129.*max_seq_len=128"):
        model.generate(torch.zeros(1, 120, dtype=torch.long), 9)
    caches = model.make_caches(1)
    model(torch.zeros(1, 100, dtype=torch.long), caches=caches)
    with pytest.raises(ValueError, match=r"129 tokens \(100 cached \+ 29 new\).*max_seq_len=128"):
        model(torch.zeros(1, 29, dtype=torch.long), caches=caches)


def test_wrong_number_of_caches_is_rejected():
    model = tiny()
    with pytest.raises(ValueError, match=r"got 1 caches.*n_layers=2"):
        model(torch.zeros(1, 3, dtype=torch.long), caches=[KVCache(1, 2, 8, 16)])


def test_unsupported_rope_type_is_rejected_by_name():
    hf = hf_llama(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})
    with pytest.raises(ValueError, match=r"'linear' is not supported"):
        L.from_hf(hf)


def test_state_dict_for_more_layers_is_rejected():
    state = hf_llama().state_dict()
    cfg = DecoderLMConfig.preset("tiny", vocab_size=101, mlp_hidden=96, n_layers=1)
    with pytest.raises(ValueError, match=r"layer 1.*n_layers=1"):
        L.convert_state_dict(state, cfg)


def test_state_dict_with_unknown_key_is_rejected():
    state = dict(hf_llama().state_dict(), **{"model.layers.0.self_attn.qkv_proj.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match=r"unexpected key 'model.layers.0.self_attn.qkv_proj.weight'"):
        L.convert_state_dict(state, L.config_from_hf(hf_llama().config))


def test_state_dict_with_wrong_shape_or_missing_weight_is_rejected():
    hf = hf_llama(n_kv_heads=2)
    cfg = L.config_from_hf(hf.config, n_kv_heads=4)  # an MHA model cannot hold GQA weights
    state = L.convert_state_dict(hf.state_dict(), cfg)
    with pytest.raises(ValueError, match=r"'blocks.0.attn.k_proj.weight' has shape \(32, 64\).*\(64, 64\)"):
        L.load_checked(DecoderLM(cfg), state)
    del state["norm.weight"]
    with pytest.raises(ValueError, match=r"lacks 1 weight.*'norm.weight'"):
        L.load_checked(DecoderLM(L.config_from_hf(hf.config)), state)
