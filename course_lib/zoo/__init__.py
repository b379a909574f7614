"""The course's model zoo: checkpoints trained once by the recipes in ``tools/zoo.py``, loaded in seconds.

Each model ``name`` is two files in this folder:

* ``name.safetensors``: the weights, in half precision where the card's
  metrics hold with it (the card says which dtype);
* ``name.json``: its **card**, as data: the recipe (model kind and config,
  data, seed, steps, optimiser and schedule), the wall time and the machine it
  was trained on, the final metrics (measured on the stored weights, after
  the rounding to half precision) and the training curve.

:func:`load` builds the course's own model from the card's config and loads
the weights into it by name (strictly: a missing or extra key raises), so a
chapter runs the same classes it teaches. ``tools/zoo.py`` rebuilds every
checkpoint (``make zoo``), and ``tests/test_zoo.py`` checks their provenance:
the first steps of each recipe reproduce the start of the stored curve, and
the stored weights reproduce the card's metrics.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor, nn

from course_lib.cnn import ConvNet, ConvNetConfig
from course_lib.data import date_pairs, scenes, shapes_with_masks, text_windows
from course_lib.decoder_lm import DecoderLM, DecoderLMConfig
from course_lib.deit import DeiT, DeiTConfig
from course_lib.dinov2 import DINOv2, DINOv2Config
from course_lib.hybrid import HybridConfig, HybridViT
from course_lib.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from course_lib.swin import Swin, SwinConfig
from course_lib.vit import ViT, ViTConfig

__all__ = ["ZOO_DIR", "MODEL_KINDS", "names", "card", "build", "load", "save", "lm_eval_windows", "scene_test_set",
           "scene_validation_set", "scene_train_set", "scene_accuracy", "scene_features", "shape_test_set",
           "shape_train_set", "date_test_set"]

ZOO_DIR = Path(__file__).resolve().parent
#: model kind (as written in a card) -> (config class, model class)
MODEL_KINDS: dict[str, tuple[type, type[nn.Module]]] = {
    "decoder_lm": (DecoderLMConfig, DecoderLM),
    "vit": (ViTConfig, ViT),
    "deit": (DeiTConfig, DeiT),
    "dinov2": (DINOv2Config, DINOv2),
    "swin": (SwinConfig, Swin),
    "cnn": (ConvNetConfig, ConvNet),
    "hybrid": (HybridConfig, HybridViT),
    "seq2seq": (Seq2SeqConfig, Seq2SeqTransformer),
}
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def names(folder: Path | None = None) -> list[str]:
    """The models in the zoo (those with both a card and weights), sorted."""
    folder = ZOO_DIR if folder is None else Path(folder)
    return sorted(p.stem for p in folder.glob("*.json") if p.with_suffix(".safetensors").exists())


def card(name: str, folder: Path | None = None) -> dict:
    """The card of model ``name``, as a dict; an unknown name raises ValueError naming the known ones."""
    folder = ZOO_DIR if folder is None else Path(folder)
    path = folder / f"{name}.json"
    if not path.exists():
        raise ValueError(f"no model {name!r} in the zoo ({folder}); known: {names(folder)}")
    return json.loads(path.read_text(encoding="utf-8"))


def build(kind: str, config: dict) -> nn.Module:
    """A freshly initialised course model of ``kind`` (a key of :data:`MODEL_KINDS`) from a config dict."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; known: {sorted(MODEL_KINDS)}")
    config_cls, model_cls = MODEL_KINDS[kind]
    return model_cls(config_cls(**config))


def load(name: str, device: str | torch.device = "cpu", folder: Path | None = None) -> tuple[nn.Module, dict]:
    """Model ``name`` in float32 and eval mode on ``device``, and its card."""
    from safetensors.torch import load_file

    info = card(name, folder)
    folder = ZOO_DIR if folder is None else Path(folder)
    model = build(info["model"]["kind"], info["model"]["config"])
    state = {k: v.float() for k, v in load_file(str(folder / f"{name}.safetensors")).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    params = model.state_dict(keep_vars=True)
    stored = {id(params[k]) for k in state if k in params}
    missing = [k for k in missing if id(params[k]) not in stored]  # a tied parameter is stored once
    if missing or unexpected:
        raise ValueError(f"{name}: the stored weights do not fit the card's model: missing {missing}, "
                         f"unexpected {unexpected}")
    return model.to(device).eval(), info


def save(name: str, model: nn.Module, info: dict, dtype: str = "float16", folder: Path | None = None) -> Path:
    """Write ``model``'s weights (cast to ``dtype``) and the card ``info``; returns the weights' path.

    Tied parameters (the LM's embedding and output layer) are stored once,
    under the first name that holds them.
    """
    from safetensors.torch import save_file

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    folder = ZOO_DIR if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    seen, state = set(), {}
    for key, value in model.state_dict(keep_vars=True).items():
        if id(value) in seen:
            continue
        seen.add(id(value))
        state[key] = value.detach().to("cpu", DTYPES[dtype]).contiguous()
    path = folder / f"{name}.safetensors"
    save_file(state, str(path))
    info = {**info, "weights": {"file": path.name, "dtype": dtype, "bytes": path.stat().st_size}}
    (folder / f"{name}.json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------
# The cards' evaluation sets, fixed once here so that every reader measures on the same data
# --------------------------------------------------------------------------
LM_EVAL_SEED = 1
SCENE_TEST_SEED = 12345


def lm_eval_windows(held_out_ids: Tensor, n: int = 64, length: int = 256) -> Tensor:
    """``(n, length + 1)``: the fixed held-out windows on which a language model's card is measured."""
    return text_windows(held_out_ids, n, length, torch.Generator().manual_seed(LM_EVAL_SEED))


def scene_test_set(n: int = 2000, size: int = 32) -> tuple[Tensor, Tensor, Tensor]:
    """``(images, labels, masks)``: the fixed test scenes on which an image classifier's card is measured."""
    return scenes(n, size, torch.Generator().manual_seed(SCENE_TEST_SEED))


SCENE_TRAIN_SEED = 777_777


def scene_train_set(n: int, size: int = 32) -> tuple[Tensor, Tensor, Tensor]:
    """``(images, labels, masks)``: the fixed set of ``n`` training scenes of the data-regime recipes and the probes.

    Each size is its own seeded draw (the seed depends on ``n``), disjoint in
    seed from the test scenes and from the recipes' per-step batches.
    """
    return scenes(n, size, torch.Generator().manual_seed(SCENE_TRAIN_SEED + n))


SCENE_VALIDATION_SEED = 424_242


def scene_validation_set(n: int = 1000, size: int = 32) -> tuple[Tensor, Tensor, Tensor]:
    """``(images, labels, masks)``: the held-out scenes on which a recipe decides when to stop training.

    Disjoint in seed from the test scenes (which must not choose the stopping step) and from the training sets.
    """
    return scenes(n, size, torch.Generator().manual_seed(SCENE_VALIDATION_SEED))


@torch.no_grad()
def scene_accuracy(model: nn.Module, images: Tensor | None = None, labels: Tensor | None = None,
                   device: torch.device | str = "cpu", batch: int = 500) -> float:
    """Top-1 accuracy of an image classifier on ``(images, labels)``, by default the card's test scenes."""
    if images is None:
        images, labels, _ = scene_test_set()
    model.eval()
    correct = 0
    for i in range(0, len(images), batch):
        correct += (model(images[i:i + batch].to(device)).argmax(-1).cpu() == labels[i:i + batch]).sum().item()
    return correct / len(images)


@torch.no_grad()
def scene_features(backbone: nn.Module, images: Tensor, device: torch.device | str = "cpu",
                   batch: int = 500) -> Tensor:
    """``(n, D)`` float32 features of a backbone (``num_classes=0``: pooled features), on the CPU."""
    backbone.eval()
    return torch.cat([backbone(images[i:i + batch].to(device)).float().cpu() for i in range(0, len(images), batch)])


SHAPE_TEST_SEED, SHAPE_TRAIN_SEED = 424_242, 535_353


def shape_test_set(n: int = 2000, size: int = 32) -> tuple[Tensor, Tensor, Tensor]:
    """``(images, labels, masks)``: the fixed test shapes (:func:`course_lib.data.shapes_with_masks`) of the DINO
    runs' probes and of ``vit-small-shapes``."""
    return shapes_with_masks(n, size, torch.Generator().manual_seed(SHAPE_TEST_SEED))


def shape_train_set(n: int, size: int = 32) -> tuple[Tensor, Tensor, Tensor]:
    """``(images, labels, masks)``: ``n`` fixed labelled shapes, the probes' training set (seeded by ``n``)."""
    return shapes_with_masks(n, size, torch.Generator().manual_seed(SHAPE_TRAIN_SEED + n))


DATE_TEST = 2000
DATE_TEST_SEED = 24_11_2026


def date_test_set() -> tuple[Tensor, Tensor, list[str], list[str]]:
    """``(source, target, source_texts, target_texts)``: the fixed test pairs of the date translator
    (``seq2seq-dates``), from the held-out days only (:func:`course_lib.data.date_pairs` with ``split="test"``)."""
    return date_pairs(DATE_TEST, torch.Generator().manual_seed(DATE_TEST_SEED), split="test")
