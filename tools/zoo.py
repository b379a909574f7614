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
    python -m tools.zoo check --record              # re-run every start: make zoo-check
    python -m tools.zoo evaluate NAME --record      # re-measure a card's metrics after its evaluation changed

Batches are a function of the step (a generator seeded by the recipe's seed
and the step number), so a run that stops and resumes from its checkpoint
(``_build/zoo/<name>.pt``) sees the same batches as one that never stopped,
and the start of a recipe can be re-run and compared with the stored run:
``python -m tools.zoo check`` (``make zoo-check``) re-runs each recipe up to its
curve's first record (25 updates; 10 for a fine-tuning) and records in the card
the mean loss of the first five, which ``tests/reference/test_zoo.py`` re-runs.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
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
from course_lib.augment import random_resized_crop
from course_lib.data import (
    DATE_CHARS,
    DATE_FORMATS,
    DATE_HOLDOUT,
    N_SPECIAL,
    SCENE_CLASSES,
    SHAPES,
    char_corpus,
    date_pairs,
    python_docs_text,
    scenes,
    shapes_dataset,
    text_windows,
)
from course_lib.datasets import mnist, python_stdlib
from course_lib.deit import combine_heads, cutmix
from course_lib.dino import DINOPair, colour_jitter, random_multi_crop, teacher_momentum
from course_lib.positional import resample_pos_embed
from course_lib.probes import knn_accuracy, linear_probe_accuracy, view_retrieval_accuracy
from course_lib.seq2seq import beam_search, greedy_decode
from course_lib.training import TrainConfig, Trainer, learning_rate

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
    #: the module the trainer starts from, when it is not a fresh ``zoo.build(kind, config)`` (a fine-tuning
    #: starts from a stored model; DINO would train student, teacher and center together)
    make_model: Callable[[], nn.Module] | None = None
    #: the stored model, taken from the trained module (DINO would keep the teacher's backbone)
    export: Callable[[nn.Module], nn.Module] | None = None
    #: train until a held-out loss stops improving (``train.max_steps`` is then a cap), not for a fixed budget
    early_stop: EarlyStop | None = None
    #: measured every ``track_every`` updates while training, into the card's ``tracked`` curve (no stopping rule)
    track: Callable[[nn.Module, torch.device], dict] | None = None
    track_every: int = 250


@dataclass
class EarlyStop:
    """The stopping rule of a recipe trained to convergence.

    Every ``every`` updates the trainer stops and measures ``held_out`` (data the recipe never trains on, and
    not the test set, which must not choose the step). Training ends once ``patience`` updates have passed
    without the ``monitor`` metric improving on its best by more than ``min_delta``, or at the recipe's
    ``max_steps``; the stored model is the one of the best measurement. The scene classifiers watch their
    held-out *accuracy*: a ViT on a few thousand images grows overconfident on the images it gets wrong, so its
    held-out loss rises from the first few hundred updates while its accuracy still climbs for a thousand
    more (``vit-small-aug-n1000``, first tried on its loss: best loss at update 250, accuracy 0.24 there and
    0.30 at update 750).
    """

    held_out: Callable[[nn.Module, torch.device], dict]   # -> {"loss": ..., "accuracy": ...}
    data: str                                              # what the held-out data is, for the card
    monitor: str = "accuracy"
    higher_is_better: bool = True
    every: int = 250
    patience: int = 1250
    min_delta: float = 0.005

    def improves(self, value: float, best: float) -> bool:
        return value > best + self.min_delta if self.higher_is_better else value < best - self.min_delta

    def describe(self) -> str:
        return (f"every {self.every} updates, the {self.monitor} on the held-out data; stop once {self.patience} "
                f"updates pass without it {'rising above' if self.higher_is_better else 'falling below'} its best "
                f"by more than {self.min_delta}, and keep the weights of the best measurement")


def _classification_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    """Cross-entropy of a classifier's logits on ``(images, labels)``."""
    x, y = batch
    return F.cross_entropy(model(x), y)


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
# gpt-stdlib-tiny, gpt-stdlib-small: the GPT of chapter 7.2 on Python's standard library, two sizes, one recipe
# --------------------------------------------------------------------------
GPT_BLOCK, GPT_BATCH, GPT_STEPS = 256, 16, 600
#: the fixed windows on which the GPT's card measures: held-out files, and the same number from training files
GPT_EVAL_WINDOWS, GPT_EVAL_SEED = 256, 2
GPT_SIZES = {
    "gpt-stdlib-tiny": dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2),
    "gpt-stdlib-small": dict(dim=128, n_layers=4, n_heads=4, n_kv_heads=2),
}
#: the next size, 3.4 million parameters (6 blocks of width 192, 6 heads sharing 2 key/value heads): about 18 CPU
#: minutes on one thread, which the shared machine did not give it in the session that wrote these recipes (stopped at
#: update 241 of 600); add it to GPT_SIZES as "gpt-stdlib" and train it with make zoo MODEL=gpt-stdlib
GPT_NEXT_SIZE = dict(dim=192, n_layers=6, n_heads=6, n_kv_heads=2)


@functools.cache
def gpt_eval_windows(split: str) -> Tensor:
    """``(256, 257)``: the fixed windows of ``split``'s tokens on which a GPT's card measures its loss."""
    ids = python_stdlib.token_ids(split).long()
    return text_windows(ids, GPT_EVAL_WINDOWS, GPT_BLOCK, torch.Generator().manual_seed(GPT_EVAL_SEED))


def gpt_losses(model: nn.Module, device: torch.device | str = "cpu") -> dict:
    """Mean next-token cross-entropy (nats per token) on the held-out and on the training windows, and the gap."""
    losses = {}
    for split, key in (("held_out", "held_out_loss"), ("train", "train_loss")):
        losses[key] = lm_held_out_loss(model, gpt_eval_windows(split), device)
    losses["gap"] = losses["held_out_loss"] - losses["train_loss"]
    return losses


def _gpt_recipe(name: str) -> Recipe:
    seed = 0
    train_ids = None

    def batch(step: int) -> tuple[Tensor, Tensor]:
        nonlocal train_ids
        if train_ids is None:  # encoded on first use (seconds), not to read the recipe
            train_ids = python_stdlib.token_ids("train")
        g = _step_generator(seed, step)
        starts = torch.randint(0, len(train_ids) - GPT_BLOCK - 1, (GPT_BATCH, 1), generator=g)
        w = train_ids[starts + torch.arange(GPT_BLOCK + 1)].long()
        return w[:, :-1], w[:, 1:]

    def loss_fn(model, b):
        x, y = b
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    def evaluate(model, device):
        held = python_stdlib.text("held_out")
        n_tokens = len(python_stdlib.token_ids("held_out"))
        return {**gpt_losses(model, device), "held_out_chars_per_token": len(held) / n_tokens}

    config = dict(vocab_size=python_stdlib.VOCAB_SIZE + 1, **GPT_SIZES[name], max_seq_len=GPT_BLOCK,
                  rope_base=10000.0)
    n_train = sum(len(t) for t in python_stdlib.documents("train"))
    return Recipe(
        name=name, kind="decoder_lm", config=config,
        train=TrainConfig(lr=2e-3, weight_decay=0.1, betas=(0.9, 0.95), warmup_steps=100, max_steps=GPT_STEPS,
                          min_lr_ratio=0.1, grad_clip=1.0, log_every=25, seed=seed),
        data=(f"course_lib.datasets.python_stdlib: the training text of CPython 3.11.7's standard library "
              f"({n_train:,} characters), tokenized by the corpus's BPE ({python_stdlib.VOCAB_SIZE} ids and "
              f"<|endoftext|> between documents); batches of {GPT_BATCH} random windows of {GPT_BLOCK} tokens, "
              f"drawn from a generator seeded by (seed, step); measured on {GPT_EVAL_WINDOWS} fixed windows of the "
              f"held-out text (every 10th block of about 4,000 characters) and {GPT_EVAL_WINDOWS} of the training "
              f"text"),
        batch=batch, loss_fn=loss_fn, evaluate=evaluate, track=gpt_losses, track_every=100,
        notes="chapter 7.2's GPT: the same recipe at two sizes (gpt-stdlib-tiny, gpt-stdlib-small)",
        extra={"block_size": GPT_BLOCK, "batch_size": GPT_BATCH, "tokens_per_step": GPT_BLOCK * GPT_BATCH,
               "tokenizer": "course_lib/corpora/python_stdlib_bpe.txt",
               "eval": f"{GPT_EVAL_WINDOWS} windows of {GPT_BLOCK} tokens per split (tools.zoo.gpt_eval_windows)"},
    )


# --------------------------------------------------------------------------
# Image classifiers on scenes: the ViT of chapter 9 and its CNN baseline
# --------------------------------------------------------------------------
SCENE_SIZE = 32
SCENE_TEST = 2000


def _classifier_recipe(name: str, kind: str, config: dict, *, steps: int, lr: float, batch_size: int = 128,
                       weight_decay: float = 0.05, train_set: int | None = None, seed: int = 0,
                       augment: bool = False, early_stop: EarlyStop | None = None, notes: str = "") -> Recipe:
    """A scene classifier. ``train_set=None``: fresh scenes at every step; ``n``: batches drawn (with
    replacement) from the ``n`` fixed scenes of :func:`course_lib.zoo.scene_train_set`. ``seed``: of the
    initialisation and of the batches. ``augment``: a random-resized crop and flip of every image
    (:func:`course_lib.augment.random_resized_crop`). ``early_stop``: train to convergence, the learning rate
    constant after its warm-up, ``steps`` only a cap (:class:`EarlyStop`)."""
    @functools.cache
    def fixed() -> tuple[Tensor, Tensor]:  # drawn on first use (16,000 scenes take seconds), not to read the recipe
        return zoo.scene_train_set(train_set, SCENE_SIZE)[:2]

    def batch(step: int) -> tuple[Tensor, Tensor]:
        g = _step_generator(seed, step)
        if train_set is None:
            x, y, _ = scenes(batch_size, SCENE_SIZE, g)
        else:
            idx = torch.randint(0, train_set, (batch_size,), generator=g)
            images, labels = fixed()
            x, y = images[idx], labels[idx]
        return (random_resized_crop(x, g, scale=AUGMENT_SCALE), y) if augment else (x, y)

    def evaluate(model, device):
        metrics = {"test_accuracy": zoo.scene_accuracy(model, device=device)}
        if train_set is not None:  # how well it fits what it saw: the first 2,000 of its training scenes
            images, labels = fixed()
            metrics["train_accuracy"] = zoo.scene_accuracy(model, images[:SCENE_TEST], labels[:SCENE_TEST], device)
        return metrics

    if train_set is None:
        data = f"scenes({batch_size}, {SCENE_SIZE}) per step, fresh images from a generator seeded by (seed, step)"
    else:
        data = (f"{train_set:,} fixed scenes (course_lib.zoo.scene_train_set({train_set})); batches of {batch_size} "
                f"drawn with replacement by a generator seeded by (seed, step)")
    data += (f", each image randomly cropped (a share {AUGMENT_SCALE} of its area, aspect 3/4 to 4/3) and resized "
             f"back, and flipped with probability 1/2 (course_lib.augment.random_resized_crop)" if augment
             else ", no augmentation")
    if early_stop is None:  # warm-up, then a cosine decay to 1% over the fixed budget
        train = TrainConfig(lr=lr, weight_decay=weight_decay, betas=(0.9, 0.999), warmup_steps=steps // 20,
                            max_steps=steps, min_lr_ratio=0.01, grad_clip=1.0, log_every=25, seed=seed)
    else:  # warm-up, then constant (a cosine to the same rate): the held-out loss decides the end
        train = TrainConfig(lr=lr, weight_decay=weight_decay, betas=(0.9, 0.999), warmup_steps=100,
                            max_steps=steps, min_lr_ratio=1.0, grad_clip=1.0, log_every=25, seed=seed)
    return Recipe(
        name=name, kind=kind, config=config, train=train,
        data=(f"{data}: {len(SCENE_CLASSES)} classes {SCENE_CLASSES}; evaluated on {SCENE_TEST} fixed scenes "
              f"(course_lib.zoo.scene_test_set)"),
        batch=batch, loss_fn=_classification_loss, evaluate=evaluate, notes=notes, early_stop=early_stop,
        extra={"batch_size": batch_size, "classes": list(SCENE_CLASSES), "image_size": SCENE_SIZE,
               "train_set": train_set, "augmentation": "random_resized_crop" if augment else None},
    )


#: the crops' share of the scene's area: the scenes' object fills a large part of the image, and a crop of at
#: least 40% of it keeps most of the object, so the label still holds
AUGMENT_SCALE = (0.4, 1.0)
SCENE_VALIDATION = 1000


@functools.cache
def _validation_scenes() -> tuple[Tensor, Tensor]:
    return zoo.scene_validation_set(SCENE_VALIDATION, SCENE_SIZE)[:2]


@torch.no_grad()
def scene_held_out(model: nn.Module, device: torch.device | str = "cpu") -> dict:
    """Loss and accuracy on the held-out validation scenes (course_lib.zoo.scene_validation_set): the stopping rule's
    measurement. Leaves the model in eval mode (the trainer puts it back in training mode)."""
    images, labels = _validation_scenes()
    model.eval()
    logits = torch.cat([model(images[i:i + 500].to(device)).float().cpu() for i in range(0, len(images), 500)])
    return {"loss": F.cross_entropy(logits, labels).item(),
            "accuracy": (logits.argmax(-1) == labels).float().mean().item()}


def _vit_recipe() -> Recipe:
    config = dict(image_size=SCENE_SIZE, patch_size=4, dim=96, n_layers=6, n_heads=4, mlp_ratio=2.0,
                  num_classes=len(SCENE_CLASSES), pool="cls")
    return _classifier_recipe("vit-scenes", "vit", config, steps=1500, lr=1e-3)


def _cnn_recipe() -> Recipe:
    config = dict(in_chans=3, widths=(32, 64, 128), blocks=(1, 1, 1), num_classes=len(SCENE_CLASSES))
    return _classifier_recipe("cnn-scenes", "cnn", config, steps=1500, lr=2e-3)


def _swin_recipe() -> Recipe:
    """Swin at the ViT's size (497k parameters against 461k) and the ViT's recipe: 2x2 patches (a 16x16 map),
    windows of 4x4 patches, three stages (16x16, 8x8, 4x4 tokens; the last is one window)."""
    config = dict(image_size=SCENE_SIZE, patch_size=2, dim=36, depths=(2, 2, 2), n_heads=(2, 4, 8), window_size=4,
                  mlp_ratio=2.0, num_classes=len(SCENE_CLASSES))
    return _classifier_recipe("swin-scenes", "swin", config, steps=1500, lr=1e-3)


def _vit_finetune_recipe(size: int = 48, steps: int = 200, batch_size: int = 64) -> Recipe:
    """vit-scenes fine-tuned at a higher resolution: its position table interpolated to the larger grid
    (course_lib.positional.resample_pos_embed, bicubic), then every weight trained on scenes of ``size`` pixels."""
    base = _vit_recipe()
    config = {**base.config, "image_size": size}
    seed = 0

    def make():
        model = zoo.build("vit", config)
        pretrained, _ = zoo.load(base.name)
        state = pretrained.state_dict()
        grid = (size // config["patch_size"],) * 2
        state["pos_embed"] = resample_pos_embed(state["pos_embed"], grid, old_grid=pretrained.grid, n_prefix=1)
        model.load_state_dict(state)
        return model

    def batch(step: int) -> tuple[Tensor, Tensor]:
        x, y, _ = scenes(batch_size, size, _step_generator(seed, step))
        return x, y

    def evaluate(model, device):
        x, y, _ = zoo.scene_test_set(SCENE_TEST, size)
        return {"test_accuracy": zoo.scene_accuracy(model, x, y, device)}

    return Recipe(
        name=f"vit-scenes-{size}", kind="vit", config=config,
        train=TrainConfig(lr=3e-4, weight_decay=0.05, betas=(0.9, 0.999), warmup_steps=10, max_steps=steps,
                          min_lr_ratio=0.1, grad_clip=1.0, log_every=10, seed=seed),
        data=(f"fine-tuning of {base.name} (its stored weights, positions interpolated from the 8x8 to the "
              f"{size // 4}x{size // 4} grid): scenes({batch_size}, {size}) per step, fresh images from a generator "
              f"seeded by (seed, step); evaluated on {SCENE_TEST} fixed scenes of {size} px "
              f"(course_lib.zoo.scene_test_set({SCENE_TEST}, {size}))"),
        batch=batch, loss_fn=_classification_loss, evaluate=evaluate, make_model=make,
        extra={"batch_size": batch_size, "classes": list(SCENE_CLASSES), "image_size": size, "from": base.name},
    )


# The small runs: the position-embedding and pooling ablations and the data-regime curve (chapter 9).
SMALL_STEPS = 1000
SMALL_VIT = dict(image_size=SCENE_SIZE, patch_size=4, dim=64, n_layers=4, n_heads=4, mlp_ratio=2.0,
                 num_classes=len(SCENE_CLASSES))
SMALL_CNN = dict(in_chans=3, widths=(16, 32, 64), blocks=(1, 1, 1), num_classes=len(SCENE_CLASSES))
DATA_REGIME = (1000, 4000, 16000)


def _small_vit(name: str, lr: float = 1e-3, train_set: int | None = None, seed: int = 0,
               **overrides) -> Callable[[], Recipe]:
    return lambda: _classifier_recipe(name, "vit", {**SMALL_VIT, **overrides}, steps=SMALL_STEPS, lr=lr, seed=seed,
                                      train_set=train_set)


def _small_cnn(name: str, train_set: int | None = None) -> Callable[[], Recipe]:
    return lambda: _classifier_recipe(name, "cnn", SMALL_CNN, steps=SMALL_STEPS, lr=2e-3, train_set=train_set)


# The data-regime curve to convergence: the same three sizes, every model trained with augmentation until its
# held-out loss stops improving. Beside the plain ViT, its small-data form: a convolutional stem (the hybrid of
# chapter 9; Xiao et al. 2021, and the convolutional tokenizer of Hassani et al. 2021), the stem's stride 4
# giving the plain ViT's 64 tokens to the same four blocks of width 64.
CONVERGED_CAP = 8000
SMALL_HYBRID = dict(image_size=SCENE_SIZE, in_chans=3, stem_widths=(16, 32, 64), stem_blocks=(0, 1, 1), dim=64,
                    n_layers=4, n_heads=4, mlp_ratio=2.0, num_classes=len(SCENE_CLASSES))
CONVERGED = {"vit": ("vit", SMALL_VIT, 1e-3), "hybrid": ("hybrid", SMALL_HYBRID, 1e-3), "cnn": ("cnn", SMALL_CNN, 2e-3)}


def _converged(arch: str, train_set: int) -> Callable[[], Recipe]:
    kind, config, lr = CONVERGED[arch]
    name = f"{arch}-small-aug-n{train_set}"
    rule = EarlyStop(scene_held_out, f"{SCENE_VALIDATION} scenes of course_lib.zoo.scene_validation_set")
    return lambda: _classifier_recipe(name, kind, config, steps=CONVERGED_CAP, lr=lr, train_set=train_set,
                                      augment=True, early_stop=rule)


# --------------------------------------------------------------------------
# Chapter 9 on real digits: ViT and CNN on MNIST (course_lib.datasets.mnist), three training-set sizes; DeiT
# --------------------------------------------------------------------------
MNIST_VIT = dict(image_size=mnist.SIZE, patch_size=4, in_chans=1, dim=64, n_layers=6, n_heads=4, mlp_ratio=2.0,
                 num_classes=10)
MNIST_CNN = dict(in_chans=1, widths=(16, 32, 64), blocks=(1, 1, 1), num_classes=10)
#: training-set sizes of the data-regime curve: 30 and 350 images of each digit
MNIST_SIZES = (300, 3500)
MNIST_STEPS, MNIST_BATCH = 1200, 64
#: the most updates a run to convergence may take
MNIST_CAP = 4000
#: a mild random crop (60-100 % of the area, aspect 4/5 to 5/4), resized back; no flips: a flipped digit is
#: another shape
MNIST_CROP = dict(scale=(0.6, 1.0), ratio=(0.8, 1.25), flip=False)
DEIT_MNIST_N, DEIT_SEEDS = 300, (0, 1, 2)


@functools.cache
def mnist_test_set() -> tuple[Tensor, Tensor]:
    """The 1,000 MNIST test images every chapter 9 and 10 card measures on."""
    return mnist.load("test")


@torch.no_grad()
def mnist_held_out(model: nn.Module, device: torch.device | str = "cpu") -> dict:
    """Loss and accuracy on the 500 MNIST validation digits: the stopping rule's measurement (eval mode)."""
    images, labels = mnist.load("val")
    model.eval()
    logits = model(images.to(device)).float().cpu()
    return {"loss": F.cross_entropy(logits, labels).item(),
            "accuracy": (logits.argmax(-1) == labels).float().mean().item()}


def mnist_accuracy(model: nn.Module, images: Tensor | None = None, labels: Tensor | None = None,
                   device: torch.device | str = "cpu") -> float:
    """A classifier's accuracy, by default on the 1,000 MNIST test images."""
    if images is None:
        images, labels = mnist_test_set()
    return zoo.scene_accuracy(model, images, labels, device)


def _mnist_recipe(name: str, kind: str, n: int, seed: int = 0, teacher: str | None = None,
                  mix: bool = False, converge: bool = False) -> Recipe:
    """A classifier trained on the first ``n`` MNIST training images (``n / 10`` per digit), each batch of 64 drawn
    with replacement and randomly cropped. ``mix``: then CutMix (course_lib.deit.cutmix: a box of another image of
    the batch pasted in, the label mixed by area). ``kind="deit"``: the ViT with DeiT's distillation token, trained
    by the hard-label loss against ``teacher`` (a stored CNN) on each augmented image. ``converge``: train until
    the accuracy on the 500 validation digits stops improving (:class:`EarlyStop`), the learning rate constant
    after its warm-up; otherwise 1,200 updates with a cosine decay."""
    config = dict(MNIST_CNN) if kind == "cnn" else dict(MNIST_VIT)

    @functools.cache
    def fixed() -> tuple[Tensor, Tensor]:
        return mnist.load("train", n=n)

    def batch(step: int) -> tuple[Tensor, ...]:
        g = _step_generator(seed, step)
        images, labels = fixed()
        idx = torch.randint(0, n, (MNIST_BATCH,), generator=g)
        x, y = random_resized_crop(images[idx], g, **MNIST_CROP), labels[idx]
        if mix:
            x, y = cutmix(x, y, 10, g)
        if teacher is None:
            return x, y
        with torch.no_grad():
            return x, y, _mnist_teacher(teacher)(x)

    def loss_fn(model, b):
        if teacher is not None:
            return model.distillation_loss(*b, kind="hard")
        return F.cross_entropy(model(b[0]), b[1])

    def evaluate(model, device):
        images, labels = fixed()
        train = mnist_accuracy(model, images, labels, device)
        if kind == "deit":
            return {**deit_accuracies(model, *mnist_test_set(), device), "train_accuracy": train}
        return {"test_accuracy": mnist_accuracy(model, device=device), "train_accuracy": train}

    lr = 2e-3 if kind == "cnn" else 1e-3
    if converge:
        train = TrainConfig(lr=lr, weight_decay=0.05, betas=(0.9, 0.999), warmup_steps=100, max_steps=MNIST_CAP,
                            min_lr_ratio=1.0, grad_clip=1.0, log_every=25, seed=seed)
        early_stop = EarlyStop(mnist_held_out, "the 500 MNIST validation digits (course_lib.datasets.mnist, 'val')",
                               patience=750)
    else:
        train = TrainConfig(lr=lr, weight_decay=0.05, betas=(0.9, 0.999), warmup_steps=MNIST_STEPS // 20,
                            max_steps=MNIST_STEPS, min_lr_ratio=0.01, grad_clip=1.0, log_every=25, seed=seed)
        early_stop = None
    return Recipe(
        name=name, kind=kind, config=config, train=train, early_stop=early_stop,
        data=(f"course_lib.datasets.mnist: the first {n // 10} training images of each digit ({n:,}); batches of "
              f"{MNIST_BATCH} drawn with replacement by a generator seeded by (seed, step), each image randomly "
              f"cropped and resized back (course_lib.augment.random_resized_crop, {MNIST_CROP})"
              + ("; then CutMix (course_lib.deit.cutmix, per-image boxes, lambda uniform, from the same generator)"
                 if mix else "")
              + (f"; the distillation head learns the hard label of {teacher} (stored weights, eval mode) on each "
                 f"augmented image, the CLS head the true (mixed) label" if teacher else "")
              + "; evaluated on the 1,000 test images and on its training images"),
        batch=batch, loss_fn=loss_fn, evaluate=evaluate,
        notes="chapter 9 on MNIST" + (f"; DeiT's student, taught by {teacher}" if teacher else ""),
        extra={"batch_size": MNIST_BATCH, "train_set": n, "image_size": mnist.SIZE, "augmentation": MNIST_CROP,
               "cutmix": mix, "teacher": teacher},
    )


@functools.cache
def _mnist_teacher(name: str) -> nn.Module:
    return zoo.load(name)[0]


@torch.no_grad()
def deit_accuracies(model: nn.Module, images: Tensor, labels: Tensor, device: torch.device | str = "cpu",
                    batch: int = 500) -> dict:
    """A DeiT's accuracy on ``(images, labels)``: its output (the two heads' logits averaged), and each head alone."""
    model.eval()
    correct = torch.zeros(3, dtype=torch.float64)
    for i in range(0, len(images), batch):
        cls_logits, dist_logits = model.forward_heads(model.forward_features(images[i:i + batch].to(device)))
        for j, logits in enumerate((combine_heads(cls_logits, dist_logits), cls_logits, dist_logits)):
            correct[j] += (logits.argmax(-1).cpu() == labels[i:i + batch]).sum()
    test, cls, dist = (correct / len(images)).tolist()
    return {"test_accuracy": test, "cls_head_test_accuracy": cls, "dist_head_test_accuracy": dist}


#: chapter 9.2's curve on digits: the ViT and the CNN on 300 and on 3,500 digits (vit-mnist-n3500 is chapter 9.4's)
MNIST_REGIME: dict[str, Callable[[], Recipe]] = {
    f"{kind}-mnist-n{n}": functools.partial(_mnist_recipe, f"{kind}-mnist-n{n}", kind, n, converge=True)
    for kind in ("vit", "cnn") for n in MNIST_SIZES if (kind, n) != ("vit", 3500)}

MNIST_RECIPES: dict[str, Callable[[], Recipe]] = {
    # the ViT of chapter 9.4, trained until it stops improving (at most MNIST_CAP updates); the same recipe at
    # MNIST_SIZES for both architectures gives chapter 9.2's data-regime curve on digits (MNIST_REGIME)
    "vit-mnist-n3500": functools.partial(_mnist_recipe, "vit-mnist-n3500", "vit", 3500, converge=True),
    # DeiT's teacher: the CNN on the students' 300 digits, 1,200 updates
    "cnn-mnist-teacher": functools.partial(_mnist_recipe, "cnn-mnist-teacher", "cnn", DEIT_MNIST_N),
    # DeiT (chapter 9.6): the plain and the distilled student under CutMix, three seeds each, taught by the CNN
    # trained on the same images
    **{f"vit-mnist-cutmix-seed{k}": functools.partial(_mnist_recipe, f"vit-mnist-cutmix-seed{k}", "vit",
                                                      DEIT_MNIST_N, k, mix=True) for k in DEIT_SEEDS},
    **{f"deit-mnist-cutmix-seed{k}": functools.partial(_mnist_recipe, f"deit-mnist-cutmix-seed{k}", "deit",
                                                       DEIT_MNIST_N, k, teacher="cnn-mnist-teacher", mix=True)
       for k in DEIT_SEEDS},
}


# --------------------------------------------------------------------------
# seq2seq-dates: the encoder-decoder of chapter 6, translating dates
# --------------------------------------------------------------------------
def date_accuracy(model: nn.Module, device: torch.device | str = "cpu", beam_size: int = 1) -> float:
    """Share of the test dates translated exactly (every character and the final EOS), greedy or by beam."""
    src, tgt, _, _ = zoo.date_test_set()
    model.eval()
    labels = tgt[:, 1:]
    with torch.no_grad():
        if beam_size == 1:
            out = greedy_decode(model, src.to(device), max_len=labels.shape[1]).cpu()
        else:
            out = beam_search(model, src.to(device), beam_size=beam_size, max_len=labels.shape[1])[0][:, 0].cpu()
    out = F.pad(out, (0, max(0, labels.shape[1] - out.shape[1])))[:, :labels.shape[1]]
    return (out == labels).all(dim=1).double().mean().item()


def _dates_recipe() -> Recipe:
    seed, batch_size, steps = 0, 64, 2000
    config = dict(vocab_size=N_SPECIAL + len(DATE_CHARS), dim=64, n_heads=4, mlp_hidden=256, n_enc_layers=2,
                  n_dec_layers=2, dropout=0.0, label_smoothing=0.1, max_len=32)

    def batch(step: int) -> tuple[Tensor, Tensor]:
        src, tgt, _, _ = date_pairs(batch_size, _step_generator(seed, step), split="train")
        return src, tgt[:, 1:]

    def loss_fn(model, b):
        src, tgt = b
        return model.loss(src, tgt)

    def evaluate(model, device):
        return {"greedy_accuracy": date_accuracy(model, device), "beam4_accuracy": date_accuracy(model, device, 4)}

    return Recipe(
        name="seq2seq-dates", kind="seq2seq", config=config,
        train=TrainConfig(lr=1e-3, weight_decay=0.01, betas=(0.9, 0.98), warmup_steps=100, max_steps=steps,
                          min_lr_ratio=0.01, grad_clip=1.0, log_every=25, seed=seed),
        data=(f"date_pairs({batch_size}, split='train') per step, fresh pairs from a generator seeded by (seed, step): "
              f"a date between 1900 and 2099 in one of {len(DATE_FORMATS)} formats -> its ISO form, character by "
              f"character; 10 of every {DATE_HOLDOUT} days only; evaluated on {zoo.DATE_TEST} pairs of the "
              f"held-out days (course_lib.zoo.date_test_set), exact match"),
        batch=batch, loss_fn=loss_fn, evaluate=evaluate,
        extra={"batch_size": batch_size, "formats": list(DATE_FORMATS), "chars": DATE_CHARS},
    )


# --------------------------------------------------------------------------
# DINO: the small ViT trained without labels (chapter 10), with and without registers, on shapes
# --------------------------------------------------------------------------
DINO_STEPS = 1500
DINO_BATCH = 64
DINO_VIT = dict(SMALL_VIT, num_classes=0, layerscale=None, mask_token=False)
#: the probes' fixed labelled shapes: k-NN neighbours and the linear probe's training set
PROBE_TRAIN = 2000
DINO_VIEW_SEED = 31337


def dino_test_views() -> tuple[Tensor, Tensor]:
    """Two augmented global views (DINO's crops and colour jitter) of each of the fixed test shapes."""
    g = torch.Generator().manual_seed(DINO_VIEW_SEED)
    views = random_multi_crop(zoo.shape_test_set(SCENE_TEST, SCENE_SIZE)[0], g, n_global=2, n_local=0,
                              global_size=SCENE_SIZE, global_scale=(0.4, 1.0))
    return colour_jitter(views[0], g), colour_jitter(views[1], g)


def probe_metrics(backbone: nn.Module, device: torch.device | str = "cpu") -> dict:
    """What a frozen backbone's features ``(n, D)`` hold: k-NN and linear-probe accuracy of the shape class
    (trained on ``shape_train_set(PROBE_TRAIN)``, measured on ``shape_test_set()``), and view retrieval
    (two augmented views of each test shape finding each other)."""
    tx, ty, _ = zoo.shape_train_set(PROBE_TRAIN, SCENE_SIZE)
    vx, vy, _ = zoo.shape_test_set(SCENE_TEST, SCENE_SIZE)
    tf, vf = zoo.scene_features(backbone, tx, device), zoo.scene_features(backbone, vx, device)
    view_a, view_b = dino_test_views()
    return {"knn_accuracy": knn_accuracy(tf, ty, vf, vy),
            "linear_probe_accuracy": linear_probe_accuracy(tf, ty, vf, vy),
            "view_retrieval_accuracy": view_retrieval_accuracy(zoo.scene_features(backbone, view_a, device),
                                                               zoo.scene_features(backbone, view_b, device))}


def _dino_train(steps: int, seed: int) -> TrainConfig:
    """The DINO runs' optimiser and schedule: AdamW at 1e-3, a tenth of the run warming up, cosine to 1 %."""
    return TrainConfig(lr=1e-3, weight_decay=0.04, betas=(0.9, 0.999), warmup_steps=steps // 10, max_steps=steps,
                       min_lr_ratio=0.01, grad_clip=3.0, log_every=25, seed=seed)


def _dino_pair(config: dict, head: dict, teacher_temp: float, student_temp: float) -> DINOPair:
    """A student and teacher of the chapter's DINO ViT (``config``) with their projection ``head``."""
    return DINOPair(zoo.build("dinov2", config), config["dim"], **head, teacher_temp=teacher_temp,
                    student_temp=student_temp)


def _dino_views(images: Tensor, g: torch.Generator, global_scale: tuple, local_scale: tuple) -> list:
    """DINO's views of a batch: 2 global crops (``SCENE_SIZE`` px) and 4 local ones (16 px), flipped and
    colour-jittered, all drawn from ``g``."""
    crops = random_multi_crop(images, g, n_global=2, n_local=4, global_size=SCENE_SIZE, local_size=16,
                              global_scale=global_scale, local_scale=local_scale)
    return [colour_jitter(c, g) for c in crops]


def _dino_recipe(name: str, n_registers: int = 0) -> Recipe:
    config = dict(DINO_VIT, n_registers=n_registers)
    seed, momentum, teacher_temp, student_temp = 0, 0.99, 0.04, 0.1
    head = dict(out_dim=256, hidden_dim=256, bottleneck_dim=64)

    def make_model():
        return _dino_pair(config, head, teacher_temp, student_temp)

    def batch(step: int) -> tuple:
        g = _step_generator(seed, step)
        views = _dino_views(shapes_dataset(DINO_BATCH, SCENE_SIZE, g)[0], g, (0.4, 1.0), (0.1, 0.4))
        return (*views, teacher_momentum(step - 1, DINO_STEPS, base=momentum))

    def loss_fn(model, b):
        return model.loss(list(b[:-1]), b[-1])

    return Recipe(
        name=name, kind="dinov2", config=config,
        train=_dino_train(DINO_STEPS, seed),
        data=(f"no labels: shapes_dataset({DINO_BATCH}, {SCENE_SIZE}) per step, fresh images from a generator seeded "
              f"by (seed, step), each cut into 2 global crops ({SCENE_SIZE} px, 40-100 % of the area) and 4 local "
              f"crops (16 px, 10-40 %), flipped and colour-jittered (course_lib.dino.random_multi_crop, "
              f"colour_jitter); the stored model is the teacher's backbone; probed (k-NN, linear) with "
              f"{PROBE_TRAIN} labelled shapes (course_lib.zoo.shape_train_set) on the {SCENE_TEST} test shapes "
              f"(course_lib.zoo.shape_test_set)"),
        batch=batch, loss_fn=loss_fn, evaluate=probe_metrics, make_model=make_model,
        export=lambda pair: pair.teacher_backbone,
        extra={"batch_size": DINO_BATCH, "head": head, "teacher_temp": teacher_temp, "student_temp": student_temp,
               "teacher_momentum": f"{momentum} -> 1 (cosine)", "center_momentum": 0.9,
               "crops": "2 x 32 px + 4 x 16 px", "classes": list(SHAPES), "image_size": SCENE_SIZE},
    )


# DINO on the scenes (chapter 10): the settings the DINO paper's small runs depend on, tried once
DINO_SCENES_STEPS = 2500
DINO_SCENES_PROBE = 2000


def scene_probe_metrics(backbone: nn.Module, device: torch.device | str = "cpu") -> dict:
    """What a frozen backbone's features hold of the scenes: k-NN and linear-probe accuracy of the scene's class,
    trained on ``scene_train_set(DINO_SCENES_PROBE)`` and measured on the test scenes."""
    tx, ty, _ = zoo.scene_train_set(DINO_SCENES_PROBE, SCENE_SIZE)
    vx, vy, _ = zoo.scene_test_set(SCENE_TEST, SCENE_SIZE)
    tf, vf = zoo.scene_features(backbone, tx, device), zoo.scene_features(backbone, vx, device)
    return {"knn_accuracy": knn_accuracy(tf, ty, vf, vy),
            "linear_probe_accuracy": linear_probe_accuracy(tf, ty, vf, vy)}


def teacher_temperature(step: int, start: float = 0.04, end: float = 0.07, warmup: int = 750) -> float:
    """DINO's teacher temperature warm-up: linear from ``start`` to ``end`` over ``warmup`` updates, then ``end``."""
    return end if step >= warmup else start + (end - start) * step / warmup


def _dino_scenes_recipe() -> Recipe:
    """DINO on fresh scenes, changed where the DINO paper's small runs need it: the teacher temperature warmed up
    from 0.04 to 0.07 (DINO's schedule), 64 prototypes instead of 256, local crops of 25-50 % of the image (a
    crop of a few percent is mostly background here, where the object fills a large part), global crops of
    50-100 %, and 2,500 updates instead of 1,500."""
    config = dict(DINO_VIT, n_registers=0)
    seed, momentum, student_temp = 0, 0.99, 0.1
    head = dict(out_dim=64, hidden_dim=256, bottleneck_dim=64)

    def make_model():
        return _dino_pair(config, head, teacher_temperature(0), student_temp)

    def batch(step: int) -> tuple:
        g = _step_generator(seed, step)
        views = _dino_views(scenes(DINO_BATCH, SCENE_SIZE, g)[0], g, (0.5, 1.0), (0.25, 0.5))
        return (*views, teacher_temperature(step - 1), teacher_momentum(step - 1, DINO_SCENES_STEPS, base=momentum))

    def loss_fn(model, b):
        model.teacher_temp = b[-2]
        return model.loss(list(b[:-2]), b[-1])

    return Recipe(
        name="dino-vit-scenes", kind="dinov2", config=config,
        train=_dino_train(DINO_SCENES_STEPS, seed),
        data=(f"no labels: scenes({DINO_BATCH}, {SCENE_SIZE}) per step, fresh images from a generator seeded by "
              f"(seed, step), each cut into 2 global crops ({SCENE_SIZE} px, 50-100 % of the area) and 4 local crops "
              f"(16 px, 25-50 %), flipped and colour-jittered; the stored model is the teacher's backbone; probed "
              f"(k-NN, linear) with {DINO_SCENES_PROBE} labelled scenes (course_lib.zoo.scene_train_set) on the "
              f"{SCENE_TEST} test scenes"),
        batch=batch, loss_fn=loss_fn, evaluate=scene_probe_metrics, make_model=make_model,
        export=lambda pair: pair.teacher_backbone,
        extra={"batch_size": DINO_BATCH, "head": head, "teacher_temp": "0.04 -> 0.07 over 750 updates, then 0.07",
               "student_temp": student_temp, "teacher_momentum": f"{momentum} -> 1 (cosine)", "center_momentum": 0.9,
               "crops": "2 x 32 px (50-100 %) + 4 x 16 px (25-50 %)", "classes": list(SCENE_CLASSES),
               "image_size": SCENE_SIZE},
    )


# DINO on real digits (chapter 10): the chapter-9 ViT's shape, trained without labels on the MNIST training images
DINO_MNIST_STEPS = 6000
#: the local crops' side: two patches of 7 pixels
DINO_MNIST_LOCAL = 14
#: chapter 9's MNIST ViT made cheaper, so that the run sees each image a hundred times in a quarter of an hour: four
#: blocks instead of six, patches of 7 pixels (a 4 x 4 grid) instead of 4 (7 x 7)
DINO_MNIST = dict(MNIST_VIT, patch_size=7, n_layers=4, num_classes=0, layerscale=None, mask_token=False,
                  n_registers=0)
#: labelled images per digit of the few-label probe: 10 per digit, 100 in all
FEW_LABELS = 100


#: the share of a digit's area DINO's crops keep: (global, local), each (smallest, largest)
MNIST_CROPS = ((0.4, 1.0), (0.2, 0.5))
#: larger crops, which keep most of the digit: the test of 10.2's account of DINO's errors on 3 and 5, 4 and 9
MNIST_CROPS_LARGE = ((0.7, 1.0), (0.35, 0.6))


def crop_range(scale: tuple[float, float]) -> str:
    """``(0.4, 1.0)`` as the recipes write it: ``"40-100 %"``."""
    return f"{round(scale[0] * 100)}-{round(scale[1] * 100)} %"


def mnist_views(images: Tensor, g: torch.Generator, local_size: int = 16,
                crops: tuple = MNIST_CROPS) -> list[Tensor]:
    """DINO's views of a batch of digits: 2 global crops (28 px) and 4 local crops (``local_size`` px), keeping the
    shares of the digit's area ``crops`` gives (by default 40-100 % and 20-50 %, so that most local crops keep some of
    the digit), not flipped (a flipped digit is another shape), each with a random contrast and brightness (ink and
    background stay apart), all drawn from ``g``."""
    global_scale, local_scale = crops
    views = random_multi_crop(images, g, n_global=2, n_local=4, global_size=mnist.SIZE, local_size=local_size,
                              global_scale=global_scale, local_scale=local_scale, flip=False)
    out = []
    for c in views:
        contrast = 0.6 + 0.4 * torch.rand(len(c), 1, 1, 1, generator=g)
        shift = 0.2 * (torch.rand(len(c), 1, 1, 1, generator=g) - 0.5)
        out.append((c * contrast + shift).clamp(-1, 1))
    return out


@torch.no_grad()
def mnist_probe_metrics(backbone: nn.Module, device: torch.device | str = "cpu", *, knn_only: bool = False) -> dict:
    """What a frozen backbone's features hold of the digits: 20-NN accuracy with the 3,500 labelled training images
    and with 10 per digit, and a linear probe, measured on the 1,000 test images (``knn_only``: the first alone,
    the curve tracked during training)."""
    tx, ty = mnist.load("train")
    vx, vy = mnist_test_set()
    tf, vf = (zoo.scene_features(backbone, x, device) for x in (tx, vx))
    if knn_only:
        return {"knn_accuracy": knn_accuracy(tf, ty, vf, vy)}
    fx, fy = mnist.load("train", n=FEW_LABELS)
    ff = zoo.scene_features(backbone, fx, device)
    return {"knn_accuracy": knn_accuracy(tf, ty, vf, vy),
            "knn_accuracy_10_per_digit": knn_accuracy(ff, fy, vf, vy, k=10),
            "linear_probe_accuracy": linear_probe_accuracy(tf, ty, vf, vy)}


def _dino_mnist_recipe(name: str = "dino-mnist", n_registers: int = 0, crops: tuple = MNIST_CROPS) -> Recipe:
    """DINO on the 3,500 MNIST training images, labels unused: the teacher temperature fixed at 0.04 (the shapes run's),
    256 prototypes, the EMA momentum from 0.99 to 1 along a cosine, and BatchNorm in the projection head (DINO's
    ``use_bn``). Digits are mostly background, so the untrained network's CLS features of any two digits point the
    same way (mean cosine 0.99, against 0.87 for the shapes): without BatchNorm the teacher's targets were the same
    for every image, centering made them uniform, and the loss rose to log K within 100 updates (two tries: the
    teacher temperature warmed up to 0.07, as DINO does, and fixed at 0.04). The BatchNorm takes out the part all
    images share (the bottleneck's mean cosine falls to 0.17). The k-NN accuracy is tracked every eighth of the run."""
    config = dict(DINO_MNIST, n_registers=n_registers)
    seed, momentum, teacher_temp, student_temp, steps = 0, 0.99, 0.04, 0.1, DINO_MNIST_STEPS
    head = dict(out_dim=256, hidden_dim=256, bottleneck_dim=64, use_bn=True)
    images = None

    def make_model():
        return _dino_pair(config, head, teacher_temp, student_temp)

    def batch(step: int) -> tuple:
        nonlocal images
        if images is None:
            images = mnist.load("train")[0]
        g = _step_generator(seed, step)
        idx = torch.randint(0, len(images), (DINO_BATCH,), generator=g)
        views = mnist_views(images[idx], g, local_size=DINO_MNIST_LOCAL, crops=crops)
        return (*views, teacher_momentum(step - 1, steps, base=momentum))

    def loss_fn(model, b):
        return model.loss(list(b[:-1]), b[-1])

    def evaluate(backbone, device):
        torch.manual_seed(seed)
        random = zoo.build("dinov2", config)  # the same network, untrained: the baseline
        return {**mnist_probe_metrics(backbone, device),
                **{f"random_{k}": v for k, v in mnist_probe_metrics(random, device).items()}}

    return Recipe(
        name=name, kind="dinov2", config=config,
        train=_dino_train(steps, seed),
        data=(f"no labels: the 3,500 MNIST training images (course_lib.datasets.mnist), batches of {DINO_BATCH} "
              f"drawn with replacement by a generator seeded by (seed, step), each cut into 2 global crops (28 px, "
              f"{crop_range(crops[0])} of the area) and 4 local crops ({DINO_MNIST_LOCAL} px, {crop_range(crops[1])}), "
              f"with random contrast and "
              f"brightness "
              f"(tools.zoo.mnist_views); the stored model is the teacher's backbone; probed (20-NN with all 3,500 "
              f"labels and 10-NN with 10 per digit, linear) on the 1,000 test images, beside the same network "
              f"untrained (seed 0)"),
        batch=batch, loss_fn=loss_fn, evaluate=evaluate, make_model=make_model,
        export=lambda pair: pair.teacher_backbone,
        track=lambda pair, device: mnist_probe_metrics(pair.teacher_backbone, device, knn_only=True),
        track_every=DINO_MNIST_STEPS // 8,
        extra={"batch_size": DINO_BATCH, "head": head, "teacher_temp": teacher_temp,
               "student_temp": student_temp, "teacher_momentum": f"{momentum} -> 1 (cosine)", "center_momentum": 0.9,
               "crops": f"2 x 28 px ({crop_range(crops[0])}) + 4 x {DINO_MNIST_LOCAL} px ({crop_range(crops[1])})",
               "image_size": mnist.SIZE},
    )


def _vit_shapes_recipe() -> Recipe:
    """The DINO runs' architecture trained with labels, on the same shapes: the supervised reference."""
    seed, batch_size, steps = 0, 128, 1000
    config = dict(SMALL_VIT, num_classes=len(SHAPES))

    def batch(step: int) -> tuple[Tensor, Tensor]:
        return shapes_dataset(batch_size, SCENE_SIZE, _step_generator(seed, step))

    def evaluate(model, device):
        x, y, _ = zoo.shape_test_set(SCENE_TEST, SCENE_SIZE)
        backbone = copy.deepcopy(model)
        backbone.head = nn.Identity()  # the pooled features the probes read
        return {"test_accuracy": zoo.scene_accuracy(model, x, y, device), **probe_metrics(backbone, device)}

    return Recipe(
        name="vit-small-shapes", kind="vit", config=config,
        train=TrainConfig(lr=1e-3, weight_decay=0.05, betas=(0.9, 0.999), warmup_steps=steps // 20, max_steps=steps,
                          min_lr_ratio=0.01, grad_clip=1.0, log_every=25, seed=seed),
        data=(f"shapes_dataset({batch_size}, {SCENE_SIZE}) per step, fresh labelled images from a generator seeded by "
              f"(seed, step), no augmentation: {len(SHAPES)} classes {SHAPES}; evaluated on the {SCENE_TEST} test "
              f"shapes (course_lib.zoo.shape_test_set), and probed like the DINO runs"),
        batch=batch, loss_fn=_classification_loss, evaluate=evaluate,
        extra={"batch_size": batch_size, "classes": list(SHAPES), "image_size": SCENE_SIZE},
    )


RECIPES: dict[str, Callable[[], Recipe]] = {
    "lm-python-docs": _lm_recipe,
    **{name: functools.partial(_gpt_recipe, name) for name in GPT_SIZES},
    **MNIST_RECIPES,
    **MNIST_REGIME,
    "seq2seq-dates": _dates_recipe,
    "vit-scenes": _vit_recipe,
    "cnn-scenes": _cnn_recipe,
    "swin-scenes": _swin_recipe,
    "vit-scenes-48": _vit_finetune_recipe,
    # position embeddings and pooling (the ViT paper's appendix D.4), on the small ViT
    "vit-small": _small_vit("vit-small"),
    "vit-small-pos-none": _small_vit("vit-small-pos-none", positions="none"),
    "vit-small-pos-2d": _small_vit("vit-small-pos-2d", positions="learned_2d"),
    "vit-small-pos-relative": _small_vit("vit-small-pos-relative", positions="relative"),
    "vit-small-gap": _small_vit("vit-small-gap", pool="mean", class_token=False),
    # the same recipe under other seeds: how far one run can land from another
    **{f"vit-small-seed{k}": _small_vit(f"vit-small-seed{k}", seed=k) for k in (1, 2)},
    # the data-regime curve: the small ViT and a small CNN on fixed training sets
    # (and on fresh data: vit-small, cnn-small)
    **{f"vit-small-n{n}": _small_vit(f"vit-small-n{n}", train_set=n) for n in DATA_REGIME},
    "cnn-small": _small_cnn("cnn-small"),
    **{f"cnn-small-n{n}": _small_cnn(f"cnn-small-n{n}", train_set=n) for n in DATA_REGIME},
    # ... and to convergence, with augmentation, the ViT's small-data form (a convolutional stem) beside it
    **{f"{arch}-small-aug-n{n}": _converged(arch, n) for arch in CONVERGED for n in DATA_REGIME},
    # self-supervised (chapter 10)
    "dino-vit": lambda: _dino_recipe("dino-vit"),
    "dino-vit-reg": lambda: _dino_recipe("dino-vit-reg", n_registers=4),
    "vit-small-shapes": _vit_shapes_recipe,
    "dino-vit-scenes": _dino_scenes_recipe,
    "dino-mnist": _dino_mnist_recipe,
    "dino-mnist-large-crops": functools.partial(_dino_mnist_recipe, "dino-mnist-large-crops",
                                                crops=MNIST_CROPS_LARGE),
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
    model = r.make_model() if r.make_model is not None else zoo.build(r.kind, r.config)
    trainer = Trainer(model, r.loss_fn, cfg)
    if checkpoint is not None and checkpoint.exists():
        trainer.load_checkpoint(checkpoint)
        print(f"zoo: {r.name}: resumed at step {trainer.step}")
    return trainer


# --------------------------------------------------------------------------
# Provenance: re-running the start of a recipe
# --------------------------------------------------------------------------
#: the updates ``make test`` re-runs of every recipe (tests/reference/test_zoo.py): enough to pin the
#: initialisation, the batches, the optimiser's state and the warm-up; the card's ``start`` is their mean loss
START_STEPS = 5
#: a re-run on the CPU agrees with the stored run to this relative tolerance: the same batches and
#: initialisation in float32; only the kernels' rounding may differ between machines
REPLAY_RTOL = 2e-3


def replay(name: str, steps: int) -> list[Tensor]:
    """The losses of the first ``steps`` updates of recipe ``name``, re-run on the CPU as the stored run made them."""
    r = recipe(name)
    trainer = start_trainer(r, device="cpu")
    trainer.model.train()
    batches = _batches(r, 0)
    return [trainer.train_step(next(batches))[0] for _ in range(steps)]


def mean_loss(losses: list[Tensor]) -> float:
    """The mean the Trainer logs: the losses summed one by one in float32, then divided."""
    total = torch.zeros(())
    for loss in losses:
        total += loss.float()
    return (total / len(losses)).item()


def check_start(name: str, record: bool = False) -> dict:
    """Re-run recipe ``name`` up to its stored curve's first record and compare; returns the card's ``start``.

    The curve's first record (step 25, or 10 for a fine-tuning) is the mean loss of the stored run's first
    updates. If the re-run lands on it, the mean loss of its first START_STEPS updates is the stored run's
    too: with ``record`` it is written into the card as ``start``, which ``make test`` re-runs (a fifth of
    the updates). Raises SystemExit, naming both values, when the re-run misses the stored curve.
    """
    card = zoo.card(name)
    first = card["curve"][0]
    losses = replay(name, first["step"])
    again = mean_loss(losses)
    if not math.isclose(again, first["loss"], rel_tol=REPLAY_RTOL):
        raise SystemExit(f"zoo: {name}: re-run, the mean loss of the first {first['step']} updates is {again:.6f}; "
                         f"the stored curve says {first['loss']:.6f} (relative tolerance {REPLAY_RTOL:g}): the "
                         "recipe no longer reproduces the stored run")
    start = {"step": START_STEPS, "loss": mean_loss(losses[:START_STEPS]),
             "lr": learning_rate(START_STEPS, recipe(name).train),
             "recorded_by": f"a re-run of the recipe that reproduced the stored curve at step {first['step']} "
                            f"(python -m tools.zoo check {name} --record)"}
    if record:
        card["start"] = start
        (zoo.ZOO_DIR / f"{name}.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    print(f"zoo: {name}: step {first['step']} re-run {again:.6f}, stored {first['loss']:.6f}; "
          f"start (step {START_STEPS}) {start['loss']:.6f}" + (", recorded" if record else ""))
    return start


def _fit_to_convergence(trainer: Trainer, r: Recipe) -> dict:
    """Train ``trainer`` by recipe ``r`` until its :class:`EarlyStop` rule says stop, load the best weights into
    the model, and return the card's ``stopping`` record (the rule, the held-out curve, the chosen step)."""
    rule = r.early_stop
    batches = _batches(r, trainer.step)
    held_out, best = [], None
    while trainer.step < r.train.max_steps:
        trainer.fit(batches, steps=rule.every)
        measured = rule.held_out(trainer.model, trainer.device)
        held_out.append({"step": trainer.step, **measured})
        print(f"zoo: {r.name}: step {trainer.step}, held-out {measured}")
        if best is None or rule.improves(measured[rule.monitor], best["value"]):
            best = {"step": trainer.step, "value": measured[rule.monitor],
                    "state": copy.deepcopy(trainer.model.state_dict())}
        elif trainer.step - best["step"] >= rule.patience:
            break
    trainer.model.load_state_dict(best["state"])
    converged = trainer.step - best["step"] >= rule.patience
    return {"rule": rule.describe(), "best_step": best["step"], "stopped_at": trainer.step,
            "converged": converged, "held_out": held_out,
            "held_out_data": rule.data}


def _fit_tracked(trainer: Trainer, r: Recipe) -> list[dict]:
    """Train ``trainer`` by recipe ``r`` to its last step, measuring ``r.track`` every ``r.track_every`` updates
    (and before the first); the measurements, for the card."""
    batches = _batches(r, trainer.step)
    tracked = [{"step": trainer.step, **r.track(trainer.model, trainer.device)}]
    while trainer.step < r.train.max_steps:
        trainer.fit(batches, steps=min(r.track_every, r.train.max_steps - trainer.step))
        tracked.append({"step": trainer.step, **r.track(trainer.model, trainer.device)})
        trainer.model.train()
        print(f"zoo: {r.name}: {tracked[-1]}")
    return tracked


def train(name: str, *, device: str | None = None, resume: bool = True) -> dict:
    """Train recipe ``name`` to the end, evaluate the stored (rounded) weights and write the checkpoint and card."""
    r = recipe(name)
    RUNS.mkdir(parents=True, exist_ok=True)
    checkpoint = RUNS / f"{name}.pt"
    if not resume and checkpoint.exists():
        checkpoint.unlink()
    if r.early_stop is not None or r.track is not None:  # its checkpoint would not hold the measured curve
        checkpoint = None
    trainer = start_trainer(r, checkpoint=checkpoint, device=device)
    history = list(trainer.history)
    t0, cpu0 = time.perf_counter(), time.process_time()
    stopping, tracked = None, None
    if r.early_stop is not None:
        stopping = _fit_to_convergence(trainer, r)
    elif r.track is not None:
        tracked = _fit_tracked(trainer, r)
    else:
        trainer.fit(_batches(r, trainer.step))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    # the metrics of the weights as stored: round to the card's dtype, then evaluate in float32
    model = trainer.model
    with torch.no_grad():  # parameters and floating buffers (BatchNorm's running statistics) alike
        for t in model.state_dict().values():
            if t.is_floating_point():
                t.copy_(t.to(zoo.DTYPES[r.dtype]).float())
    model = r.export(model) if r.export is not None else model
    metrics = r.evaluate(model, trainer.device)
    info = {
        "name": name,
        "model": {"kind": r.kind, "config": r.config, "parameters": sum(p.numel() for p in model.parameters())},
        "recipe": {"train": {k: v for k, v in asdict(r.train).items()
                             if k not in ("checkpoint_path", "checkpoint_every", "device", "progress", "compile")},
                   "data": r.data, "seed": r.train.seed, "steps": trainer.step, **r.extra},
        "metrics": metrics,
        "curve": [{"step": h["step"], "loss": h["loss"], "lr": h["lr"]} for h in trainer.history],
        **({"stopping": stopping} if stopping is not None else {}),
        **({"tracked": tracked} if tracked is not None else {}),
        "wall_time_s": round(wall, 1),
        "cpu_time_s": round(cpu, 1),
        "machine": machine(),
        "command": f"python -m tools.zoo train {name}",
        "notes": r.notes,
    }
    if history:  # resumed: the wall time of this process alone would understate the run
        info["wall_time_s"] = info["cpu_time_s"] = None
        info["notes"] = (r.notes + " Resumed from a checkpoint; wall time not recorded.").strip()
    path = zoo.save(name, model, info, dtype=r.dtype)
    print(f"zoo: {name}: {trainer.step} steps in {wall:.0f} s; {metrics}; wrote {path} ({path.stat().st_size:,} bytes)")
    info["start"] = check_start(name, record=True)  # what make test re-runs
    return info


def evaluate(name: str, record: bool = False) -> dict:
    """The card's metrics, measured again on the stored weights by the recipe's evaluation (after that evaluation
    changed: its data, or a metric added); with ``record``, written into the card."""
    model, card = zoo.load(name)
    metrics = recipe(name).evaluate(model, torch.device("cpu"))
    print(f"zoo: {name}: card {card['metrics']}; measured now {metrics}" + (", recorded" if record else ""))
    if record:
        card["metrics"] = metrics
        (zoo.ZOO_DIR / f"{name}.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.zoo", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the recipes and the stored checkpoints")
    t = sub.add_parser("train", help="train recipes (all when none is named)")
    t.add_argument("names", nargs="*")
    t.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    t.add_argument("--restart", action="store_true", help="ignore an existing run checkpoint")
    e = sub.add_parser("evaluate", help="re-measure stored models' card metrics with their recipe's evaluation")
    e.add_argument("names", nargs="+")
    e.add_argument("--record", action="store_true", help="write the re-measured metrics into the cards")
    c = sub.add_parser("check", help="re-run the start of recipes (all when none is named) against their curves")
    c.add_argument("names", nargs="*")
    c.add_argument("--record", action="store_true", help="write each card's start (the updates make test re-runs)")
    args = parser.parse_args(argv)
    if args.command == "check":
        for name in args.names or sorted(RECIPES):
            check_start(name, record=args.record)
        return 0
    if args.command == "evaluate":
        for name in args.names:
            evaluate(name, record=args.record)
        return 0
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
