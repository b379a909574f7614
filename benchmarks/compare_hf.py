"""course_lib against Hugging Face transformers: same weights, same dtype, same device.

    python benchmarks/compare_hf.py [--device cpu|cuda] [--dtype fp32|bf16]
                                    [--models vit-b/16,dinov2-s/14,swinv2-t,llama-100m]
                                    [--batch N] [--repeats N] [--decode-tokens N] [--decode-model llama-100m|small]

For each model an HF model is built from its config with random weights (no
download), converted with ``course_lib.interop.from_hf``, and both are timed on
the same input: warm-up, then the median of ``--repeats`` runs (CUDA
synchronised). The table reports milliseconds per forward and the ratio
course_lib / HF (below 1.0 means course_lib is faster). Decoding reports
tokens/s of ``DecoderLM.generate`` with and without the KV cache.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from course_lib.interop import from_hf  # noqa: E402


def hf_models():
    import transformers as T

    return {
        # ViT-B/16 at 224: the HF defaults are the base model
        "vit-b/16": (lambda: T.ViTModel(T.ViTConfig(), add_pooling_layer=False), "image", 224),
        "dinov2-s/14": (lambda: T.Dinov2Model(T.Dinov2Config(hidden_size=384, num_attention_heads=6,
                                                             num_hidden_layers=12, image_size=518, patch_size=14)),
                        "image", 224),
        "swinv2-t": (lambda: T.Swinv2Model(T.Swinv2Config(image_size=256, window_size=8, embed_dim=96,
                                                          depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24]),
                                           add_pooling_layer=False), "image", 256),
        # course_lib's "llama-100m" preset: 100.1M parameters with tied embeddings
        "llama-100m": (lambda: T.LlamaForCausalLM(T.LlamaConfig(vocab_size=32000, hidden_size=768,
                                                                intermediate_size=2048, num_hidden_layers=12,
                                                                num_attention_heads=12, num_key_value_heads=4,
                                                                max_position_embeddings=2048,
                                                                tie_word_embeddings=True)), "tokens", 256),
    }


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def forwards(hf, ours, kind, x):
    """The HF and course_lib forwards on input ``x``, as two functions of no argument."""
    if kind == "image":
        return (lambda: hf(pixel_values=x).last_hidden_state), (lambda: ours.forward_features(x))
    return (lambda: hf(input_ids=x).logits), (lambda: ours(x))


def median_ms(fn, device, repeats, warmup=2):
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--models", default="vit-b/16,dinov2-s/14,swinv2-t,llama-100m")
    ap.add_argument("--batch", type=int, default=None,
                    help="images or sequences per forward (default: 8 on GPU, 1 on CPU)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--decode-tokens", type=int, default=512)
    ap.add_argument("--decode-model", choices=["llama-100m", "small"], default="small",
                    help="model for the decoding comparison ('small' is ~10M parameters, practical on a CPU)")
    ap.add_argument("--no-decode", action="store_true")
    ap.add_argument("--train", action="store_true", help="also measure ViT-B/16 training throughput and MFU")
    ap.add_argument("--train-batch", type=int, default=None,
                    help="images per training step (default: 128 on GPU, 4 on CPU)")
    ap.add_argument("--train-model", default="vit-b/16", help="a course_lib ViT preset")
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="the device's peak TFLOP/s in the training dtype, for MFU (H100/H200 bf16 dense: 989)")
    args = ap.parse_args(argv)
    known = list(hf_models())
    wanted = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in known]
    if unknown or not wanted:
        ap.error(f"--models {args.models!r}: {', '.join(map(repr, unknown)) or 'no model'} is not one of "
                 f"{', '.join(known)} (give a comma-separated list)")
    for flag, value, least in (("--repeats", args.repeats, 1), ("--decode-tokens", args.decode_tokens, 1),
                               ("--batch", args.batch, 1), ("--train-batch", args.train_batch, 1)):
        if value is not None and value < least:
            ap.error(f"{flag} {value}: must be at least {least}")
    if args.peak_tflops is not None and not args.peak_tflops > 0:
        ap.error(f"--peak-tflops {args.peak_tflops}: must be a positive number of TFLOP/s")
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        ap.error(f"--device {args.device!r}: must be cpu, cuda or cuda:N")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error(f"--device {args.device}: no CUDA device is available here (use --device cpu)")
    device = torch.device(args.device)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    batch = args.batch or (8 if device.type == "cuda" else 1)
    torch.manual_seed(0)

    where = torch.cuda.get_device_name() if device.type == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"device {device} ({where}), dtype {args.dtype}, batch {batch}, torch {torch.__version__}")
    print(f"{'model':<14}{'params':>10}{'HF ms':>10}{'course_lib ms':>15}{'ratio':>8}{'max |diff|':>12}")
    for name, (make, kind, size) in hf_models().items():
        if name not in wanted:
            continue
        hf = make().eval()
        ours = from_hf(hf).eval()
        hf, ours = hf.to(device, dtype), ours.to(device, dtype)
        if kind == "image":
            x = torch.randn(batch, 3, size, size, device=device, dtype=dtype)
        else:
            x = torch.randint(0, 32000, (batch, size), device=device)
        run_hf, run_ours = forwards(hf, ours, kind, x)
        with torch.inference_mode():
            diff = (run_hf().float() - run_ours().float()).abs().max().item()
            t_hf = median_ms(run_hf, device, args.repeats)
            t_ours = median_ms(run_ours, device, args.repeats)
        params = sum(p.numel() for p in ours.parameters())
        print(f"{name:<14}{params / 1e6:>9.1f}M{t_hf:>10.1f}{t_ours:>15.1f}{t_ours / t_hf:>8.2f}{diff:>12.2e}")
        del hf, ours, run_hf, run_ours  # free this model pair before the next is built

    if not args.no_decode:
        decode(args, device, dtype)
    if args.train:
        train_throughput(args, device, dtype)


def decode(args, device, dtype):
    import transformers as T

    if args.decode_model == "llama-100m":
        cfg = hf_models()["llama-100m"][0]().config
    else:
        cfg = T.LlamaConfig(vocab_size=4096, hidden_size=256, intermediate_size=704, num_hidden_layers=6,
                            num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048)
    model = from_hf(T.LlamaForCausalLM(cfg).eval()).to(device, dtype)
    prompt = torch.randint(0, cfg.vocab_size, (1, 16), device=device)
    n = args.decode_tokens
    n_params = sum(p.numel() for p in model.parameters())
    print(f"\ndecoding {n} new tokens after a 16-token prompt, {n_params / 1e6:.1f}M parameters:")
    results = {}
    with torch.inference_mode():
        for use_cache in (True, False):
            model.generate(prompt, max_new_tokens=4, greedy=True, use_cache=use_cache)  # warm-up
            sync(device)
            t0 = time.perf_counter()
            out = model.generate(prompt, max_new_tokens=n, greedy=True, use_cache=use_cache)
            sync(device)
            results[use_cache] = (n / (time.perf_counter() - t0), out)
    same = torch.equal(results[True][1], results[False][1])
    print(f"  with KV cache    {results[True][0]:>9.1f} tokens/s")
    print(f"  without cache    {results[False][0]:>9.1f} tokens/s")
    print(f"  speed-up         {results[True][0] / results[False][0]:>9.1f}x   (identical tokens: {same})")


def vit_train_flops_per_image(dim: int, depth: int, n_tokens: int, patch_dim: int, mlp_hidden: int) -> float:
    """Matmul FLOPs of one training step per image: 3x the forward (backward is about twice the forward)."""
    per_block = 2 * n_tokens * (4 * dim * dim + 2 * dim * mlp_hidden) + 2 * 2 * n_tokens * n_tokens * dim
    forward = depth * per_block + 2 * n_tokens * patch_dim * dim
    return 3.0 * forward


def train_throughput(args, device, dtype):
    from course_lib.vit import ViT, ViTConfig

    cfg = ViTConfig.preset(args.train_model, num_classes=1000)
    model = ViT(cfg).to(device)
    batch = args.train_batch or (128 if device.type == "cuda" else 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    (h, w), p = cfg.grid, cfg.patch_size
    x = torch.randn(batch, cfg.in_chans, h * p, w * p, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)

    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    ms = median_ms(step, device, args.repeats, warmup=1)
    img_s = batch / (ms / 1000)
    flops = vit_train_flops_per_image(cfg.dim, cfg.n_layers, 1 + h * w, cfg.in_chans * p * p, cfg.mlp_hidden_dim())
    peak = args.peak_tflops
    if peak is None and device.type == "cuda" and dtype == torch.bfloat16:
        name = torch.cuda.get_device_name()
        peak = 989.0 if ("H100" in name or "H200" in name) else None
    mfu = f"{100 * img_s * flops / (peak * 1e12):.1f}%" if peak else "n/a (pass --peak-tflops)"
    print(f"\n{args.train_model} training, batch {batch}, {args.dtype}: {img_s:.1f} img/s, "
          f"{flops / 1e9:.1f} GFLOP per image, MFU {mfu}")


if __name__ == "__main__":
    main()
