"""Recipes of the course's model zoo, and the command that trains them.

A recipe is everything a checkpoint depends on, as code: the model (kind and
config), the data (made in code or shipped with the course; never
downloaded), the seed, the number of steps, the optimiser and its schedule
(a :class:`course_lib.training.TrainConfig`) and the evaluation that fills the
card's metrics. Each recipe trains with the course's own
:class:`~course_lib.training.Trainer` (progress bar, checkpoints and resume),
on the GPU when there is one and on the CPU otherwise, and writes
``course_lib/zoo/<name>.safetensors`` and its card ``<name>.json``.

    python -m tools.zoo list
    python -m tools.zoo train lm-python-docs        # or: make zoo MODEL=lm-python-docs
    python -m tools.zoo train                       # every recipe: make zoo

Batches are a function of the step (a generator seeded by the recipe's seed
and the step number), so a run that stops and resumes from its checkpoint
(``_build/zoo/<name>.pt``) sees the same batches as one that never stopped,
and ``tests/test_zoo.py`` can re-run the first steps of a recipe and compare
them with the start of the stored curve.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import zoo
from course_lib.data import SCENE_CLASSES, char_corpus, python_docs_text, scenes
from course_lib.training import TrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "_build" / "zoo"


@dataclass
class Recipe:
    """How one checkpoint is made. ``batch(step)`` is the batch of update ``step`` (1-based)."""

    name: str
    kind: str
    config: dict
    train: TrainConfig
    data: str                                    # what the data is, in words, for the card
    batch: Callable[[int], tuple[Tensor, ...]]
    loss_fn: Callable[[nn.Module, tuple], Tensor]
    evaluate: Callable[[nn.Module, torch.device], dict]
    dtype: str = "float16"                       # of the stored weights
    notes: str = ""
    extra: dict = field(default_factory=dict)


def _step_generator(seed: int, step: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


# --------------------------------------------------------------------------
# lm-python-docs: the decoder-only LM of chapters 7 and 8
# --------------------------------------------------------------------------
def _python_docs_split():
    corpus = char_corpus(python_docs_text())
    n_val = len(corpus.ids) // 10
    return corpus, corpus.ids[:-n_val], corpus.ids[-n_val:]


def lm_held_out_loss(model: nn.Module, windows: Tensor, device: torch.device | str = "cpu") -> float:
    """Mean next-character cross-entropy (nats) over ``windows``, in float32."""
    model.eval()
    with torch.no_grad():
        windows = windows.to(device)
        logits = model(windows[:, :-1]).float()
        return F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()


def _lm_recipe() -> Recipe:
    corpus, train_ids, val_ids = _python_docs_split()
    block, batch_size, seed = 128, 32, 0
    windows = zoo.lm_eval_windows(val_ids)

    def batch(step: int) -> tuple[Tensor, Tensor]:
        g = _step_generator(seed, step)
        starts = torch.randint(0, len(train_ids) - block - 1, (batch_size,), generator=g)
        w = torch.stack([train_ids[s:s + block + 1] for s in starts.tolist()])
        return w[:, :-1], w[:, 1:]

    def loss_fn(model, b):
        x, y = b
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    def evaluate(model, device):
        counts = torch.bincount(train_ids, minlength=corpus.vocab_size).double()
        p = counts[counts > 0] / counts.sum()
        loss = lm_held_out_loss(model, windows, device)
        return {"held_out_loss": loss, "held_out_perplexity": math.exp(loss),
                "unigram_entropy": -(p * p.log()).sum().item(), "uniform_loss": math.log(corpus.vocab_size)}

    config = dict(vocab_size=corpus.vocab_size, dim=128, n_layers=4, n_heads=4, n_kv_heads=2, max_seq_len=256,
                  rope_base=10000.0)
    return Recipe(
        name="lm-python-docs", kind="decoder_lm", config=config,
        train=TrainConfig(lr=3e-3, weight_decay=0.1, betas=(0.9, 0.95), warmup_steps=100, max_steps=2000,
                          min_lr_ratio=0.1, grad_clip=1.0, log_every=25, seed=seed),
        data=(f"python_docs_text(): {len(corpus.ids):,} characters of Python's help topics, character-level "
              f"({corpus.vocab_size} symbols); the last 10% held out; batches of {batch_size} random windows of "
              f"{block} characters, drawn from a generator seeded by (seed, step)"),
        batch=batch, loss_fn=loss_fn, evaluate=evaluate,
        extra={"block_size": block, "batch_size": batch_size, "chars": "".join(corpus.chars),
               "eval": "64 held-out windows of 256 characters (course_lib.zoo.lm_eval_windows)"},
    )


# --------------------------------------------------------------------------
# Image classifiers on scenes: the ViT of chapter 9 and its CNN baseline
# --------------------------------------------------------------------------
SCENE_SIZE = 32
SCENE_TEST = 2000


def scene_accuracy(model: nn.Module, device: torch.device | str = "cpu", batch: int = 500) -> float:
    x, y, _ = zoo.scene_test_set(SCENE_TEST, SCENE_SIZE)
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += (model(x[i:i + batch].to(device)).argmax(-1).cpu() == y[i:i + batch]).sum().item()
    return correct / len(x)


def _classifier_recipe(name: str, kind: str, config: dict, *, steps: int, lr: float, batch_size: int = 128,
                       weight_decay: float = 0.05, notes: str = "") -> Recipe:
    seed = 0

    def batch(step: int) -> tuple[Tensor, Tensor]:
        x, y, _ = scenes(batch_size, SCENE_SIZE, _step_generator(seed, step))
        return x, y

    def loss_fn(model, b):
        x, y = b
        return F.cross_entropy(model(x), y)

    def evaluate(model, device):
        return {"test_accuracy": scene_accuracy(model, device)}

    return Recipe(
        name=name, kind=kind, config=config,
        train=TrainConfig(lr=lr, weight_decay=weight_decay, betas=(0.9, 0.999), warmup_steps=steps // 20,
                          max_steps=steps, min_lr_ratio=0.01, grad_clip=1.0, log_every=25, seed=seed),
        data=(f"scenes({batch_size}, {SCENE_SIZE}) per step, fresh images from a generator seeded by (seed, step): "
              f"{len(SCENE_CLASSES)} classes {SCENE_CLASSES}; evaluated on {SCENE_TEST} fixed scenes (course_lib.zoo.scene_test_set)"),
        batch=batch, loss_fn=loss_fn, evaluate=evaluate, notes=notes,
        extra={"batch_size": batch_size, "classes": list(SCENE_CLASSES), "image_size": SCENE_SIZE},
    )


def _vit_recipe() -> Recipe:
    config = dict(image_size=SCENE_SIZE, patch_size=4, dim=96, n_layers=6, n_heads=4, mlp_ratio=2.0,
                  num_classes=len(SCENE_CLASSES), pool="cls")
    return _classifier_recipe("vit-scenes", "vit", config, steps=1500, lr=1e-3)


def _cnn_recipe() -> Recipe:
    config = dict(in_chans=3, widths=(32, 64, 128), blocks=(1, 1, 1), num_classes=len(SCENE_CLASSES))
    return _classifier_recipe("cnn-scenes", "cnn", config, steps=1500, lr=2e-3)


RECIPES: dict[str, Callable[[], Recipe]] = {
    "lm-python-docs": _lm_recipe,
    "vit-scenes": _vit_recipe,
    "cnn-scenes": _cnn_recipe,
}


# --------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------
def recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise SystemExit(f"zoo: no recipe {name!r}; known: {', '.join(sorted(RECIPES))}")
    return RECIPES[name]()


def _batches(r: Recipe, start: int) -> Iterator[tuple[Tensor, ...]]:
    step = start
    while True:
        step += 1
        yield r.batch(step)


def machine() -> dict:
    """The machine a run happened on, for its card."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "python": platform.python_version(),
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}


def start_trainer(r: Recipe, *, max_steps: int | None = None, checkpoint: Path | None = None,
                  device: str | None = None) -> Trainer:
    """A trainer for recipe ``r``: the model built under the recipe's seed, resumed from ``checkpoint`` if it exists."""
    cfg = TrainConfig(**{**asdict(r.train), "max_steps": max_steps or r.train.max_steps, "device": device,
                         "checkpoint_path": None if checkpoint is None else str(checkpoint),
                         "checkpoint_every": 250 if checkpoint is not None else 0})
    torch.manual_seed(r.train.seed)
    model = zoo.build(r.kind, r.config)
    trainer = Trainer(model, r.loss_fn, cfg)
    if checkpoint is not None and checkpoint.exists():
        trainer.load_checkpoint(checkpoint)
        print(f"zoo: {r.name}: resumed at step {trainer.step}")
    return trainer


def first_steps(name: str, steps: int) -> list[dict]:
    """The logged records of the first ``steps`` updates of recipe ``name``, on the CPU (for provenance)."""
    r = recipe(name)
    trainer = start_trainer(r, device="cpu")
    trainer.config.progress = False
    return trainer.fit(_batches(r, 0), steps=steps)


def train(name: str, *, device: str | None = None, resume: bool = True) -> dict:
    """Train recipe ``name`` to the end, evaluate the stored (rounded) weights and write the checkpoint and card."""
    r = recipe(name)
    RUNS.mkdir(parents=True, exist_ok=True)
    checkpoint = RUNS / f"{name}.pt"
    if not resume and checkpoint.exists():
        checkpoint.unlink()
    trainer = start_trainer(r, checkpoint=checkpoint, device=device)
    history = list(trainer.history)
    t0 = time.perf_counter()
    trainer.fit(_batches(r, trainer.step))
    wall = time.perf_counter() - t0
    # the metrics of the weights as stored: round to the card's dtype, then evaluate in float32
    model = trainer.model
    with torch.no_grad():  # parameters and floating buffers (BatchNorm's running statistics) alike
        for t in model.state_dict().values():
            if t.is_floating_point():
                t.copy_(t.to(zoo.DTYPES[r.dtype]).float())
    metrics = r.evaluate(model, trainer.device)
    info = {
        "name": name,
        "model": {"kind": r.kind, "config": r.config, "parameters": sum(p.numel() for p in model.parameters())},
        "recipe": {"train": {k: v for k, v in asdict(r.train).items()
                             if k not in ("checkpoint_path", "checkpoint_every", "device", "progress", "compile")},
                   "data": r.data, "seed": r.train.seed, "steps": trainer.step, **r.extra},
        "metrics": metrics,
        "curve": [{"step": h["step"], "loss": h["loss"], "lr": h["lr"]} for h in trainer.history],
        "wall_time_s": round(wall, 1),
        "machine": machine(),
        "command": f"python -m tools.zoo train {name}",
        "notes": r.notes,
    }
    if history:  # resumed: the wall time of this process alone would understate the run
        info["wall_time_s"] = None
        info["notes"] = (r.notes + " Resumed from a checkpoint; wall time not recorded.").strip()
    path = zoo.save(name, model, info, dtype=r.dtype)
    print(f"zoo: {name}: {trainer.step} steps in {wall:.0f} s; {metrics}; wrote {path} ({path.stat().st_size:,} bytes)")
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.zoo", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the recipes and the stored checkpoints")
    t = sub.add_parser("train", help="train recipes (all when none is named)")
    t.add_argument("names", nargs="*")
    t.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    t.add_argument("--restart", action="store_true", help="ignore an existing run checkpoint")
    args = parser.parse_args(argv)
    if args.command == "list":
        stored = set(zoo.names())
        for name in sorted(RECIPES):
            print(f"{name:<24}{'stored' if name in stored else 'not trained'}")
        return 0
    for name in args.names or sorted(RECIPES):
        train(name, device=args.device, resume=not args.restart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
