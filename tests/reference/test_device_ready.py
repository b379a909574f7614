"""Every model is device- and dtype-agnostic and free of host syncs in its forward pass.

Two checks that need no GPU:

* **the meta device.** A model moved to ``meta`` runs its forward on tensors
  with shapes but no data. Any tensor the forward creates without
  ``device=`` lands on the CPU and mixing it with meta tensors fails, and any
  host sync (``.item()``, ``bool(tensor)``, ``.tolist()``) fails because there
  is no data to read. What runs on meta runs on any accelerator.
* **a guard** that raises on the torch calls that copy data to the host.
"""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

from course_lib.decoder_lm import DecoderLM, DecoderLMConfig
from course_lib.dinov2 import DINOv2, DINOv2Config
from course_lib.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from course_lib.swin import Swin, SwinConfig
from course_lib.vit import ViT, ViTConfig

HOST_SYNCS = {torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__bool__, torch.Tensor.cpu,
              torch.Tensor.__int__, torch.Tensor.__float__, torch.Tensor.__index__, torch.Tensor.nonzero}


class NoHostSync(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in HOST_SYNCS:
            raise AssertionError(f"host sync in forward: {getattr(func, '__name__', func)}")
        return func(*args, **(kwargs or {}))


def image_models():
    return {
        "vit": (lambda impl: ViT(ViTConfig.preset("vit-tiny-test", attn_impl=impl)), (2, 3, 32, 48)),
        "vit-mean": (lambda impl: ViT(ViTConfig.preset("vit-tiny-mean-test", attn_impl=impl)), (2, 3, 32, 32)),
        "dinov2-reg": (lambda impl: DINOv2(DINOv2Config.preset("dinov2-tiny-reg-test", attn_impl=impl)),
                       (2, 3, 42, 56)),
        "swin": (lambda impl: Swin(SwinConfig.preset("swin-tiny-test", attn_impl=impl)), (2, 3, 44, 36)),
        "swinv2": (lambda impl: Swin(SwinConfig.preset("swinv2-tiny-test", attn_impl=impl)), (2, 3, 32, 32)),
    }


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("name", list(image_models()))
def test_forward_runs_on_the_meta_device(name, impl):
    make, shape = image_models()[name]
    model = make(impl).eval().to("meta")
    out = model(torch.empty(shape, device="meta"))
    assert out.device.type == "meta"


@pytest.mark.parametrize("name", list(image_models()))
def test_forward_makes_no_host_sync(name):
    make, shape = image_models()[name]
    model = make("sdpa").eval()
    with torch.no_grad(), NoHostSync():
        model(torch.randn(shape))


@pytest.mark.parametrize("name", list(image_models()))
def test_forward_in_float64_and_bfloat16(name):
    make, shape = image_models()[name]
    torch.manual_seed(0)
    model = make("sdpa").eval()
    x = torch.randn(shape)
    with torch.no_grad():
        ref = model.double()(x.double())
        assert ref.dtype == torch.float64
        low = model.bfloat16()(x.bfloat16())
    assert low.dtype == torch.bfloat16
    assert (low.double() - ref).abs().max() < 0.1 * ref.abs().max() + 0.1


def sequence_models():
    return {
        "decoder-lm": lambda impl: DecoderLM(DecoderLMConfig.preset("tiny", attn_impl=impl)),
        "seq2seq": lambda impl: Seq2SeqTransformer(Seq2SeqConfig.preset("tiny", attn_impl=impl)),
    }


def run_sequence_model(name, model, device):
    if name == "decoder-lm":
        return model(torch.zeros(2, 7, dtype=torch.long, device=device))
    return model(torch.zeros(2, 5, dtype=torch.long, device=device), torch.zeros(2, 6, dtype=torch.long, device=device))


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
@pytest.mark.parametrize("name", list(sequence_models()))
def test_sequence_models_run_on_the_meta_device(name, impl):
    model = sequence_models()[name](impl).eval().to("meta")
    assert run_sequence_model(name, model, "meta").device.type == "meta"


@pytest.mark.parametrize("name", list(sequence_models()))
def test_sequence_models_make_no_host_sync(name):
    model = sequence_models()[name]("sdpa").eval()
    with torch.no_grad(), NoHostSync():
        run_sequence_model(name, model, "cpu")


def test_cached_decoding_step_makes_no_host_sync():
    model = sequence_models()["decoder-lm"]("sdpa").eval()
    caches = model.make_caches(2, 16)
    with torch.no_grad():
        model(torch.zeros(2, 4, dtype=torch.long), caches=caches)
        with NoHostSync():
            model(torch.zeros(2, 1, dtype=torch.long), caches=caches)


def all_models():
    out = {name: (lambda impl, make=make, shape=shape: (make(impl), (torch.randn(shape),)))
           for name, (make, shape) in image_models().items()}
    out["decoder-lm"] = lambda impl: (sequence_models()["decoder-lm"](impl), (torch.randint(0, 256, (2, 7)),))
    out["seq2seq"] = lambda impl: (sequence_models()["seq2seq"](impl),
                                   (torch.randint(3, 8, (2, 5)), torch.randint(3, 8, (2, 6))))
    return out


@pytest.mark.parametrize("name", list(all_models()))
def test_compiles_as_one_graph_with_the_same_output(name):
    torch.manual_seed(0)
    torch._dynamo.reset()
    model, args = all_models()[name]("sdpa")
    model.eval()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)  # fullgraph: a graph break is an error
    with torch.no_grad():
        torch.testing.assert_close(compiled(*args), model(*args), atol=1e-5, rtol=1e-5)


def test_inductor_compiles_a_vit_and_matches_eager():
    torch._dynamo.reset()
    model = ViT(ViTConfig.preset("vit-tiny-test")).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model)(x), model(x), atol=1e-4, rtol=1e-4)
