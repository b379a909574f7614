"""Load real weights: convert Hugging Face ``transformers`` models into course_lib models.

    model = course_lib.interop.from_hf(hf_model)      # an HF model object
    model = course_lib.interop.load_hf_checkpoint(path)  # a local folder: config.json + *.safetensors

Each family has a module here with a ``from_hf(hf_model)`` function that reads
sizes, epsilon, activation and biases from the HF config, builds the course_lib
model and maps the state dict key by key (one function per family, not
modules nested to mimic HF's key names). The returned model is in eval mode,
holds the same weights and gives the same outputs:

* backbones (``ViTModel``, ``Dinov2Model``, ``Dinov2WithRegistersModel``,
  ``SwinModel``, ``Swinv2Model``): ``model.forward_features(pixel_values)``
  equals HF's ``last_hidden_state``;
* classifiers and language models (``ViTForImageClassification``,
  ``LlamaForCausalLM``): ``model(x)`` equals HF's ``logits``.

Nothing here touches the network: ``load_hf_checkpoint`` reads only the
local folder it is given.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from torch import nn

__all__ = ["from_hf", "load_hf_checkpoint", "SUPPORTED"]

#: HF class name -> module of this package that converts it.
SUPPORTED = {
    "ViTModel": "vit",
    "ViTForImageClassification": "vit",
    "Dinov2Model": "dinov2",
    "Dinov2WithRegistersModel": "dinov2",
    "SwinModel": "swin",
    "Swinv2Model": "swin",
    "LlamaForCausalLM": "llama",
}


def from_hf(hf_model: nn.Module, **options) -> nn.Module:
    """The course_lib model equivalent to ``hf_model``, with its weights, in eval mode.

    ``options`` go to the family's converter, e.g. ``attn_impl="eager"``.
    """
    name = type(hf_model).__name__
    if name not in SUPPORTED:
        raise ValueError(f"cannot convert {name}: supported Hugging Face classes are {sorted(SUPPORTED)}")
    family = importlib.import_module(f"{__name__}.{SUPPORTED[name]}")
    return family.from_hf(hf_model, **options).eval()


def load_hf_checkpoint(path: str | Path, **options) -> nn.Module:
    """Build the HF model stored in a local folder (``config.json`` + safetensors) and convert it.

    The architecture is read from ``config.json``'s ``architectures``; the
    weights are loaded with ``local_files_only=True``, so a missing file is an
    error, never a download.
    """
    import transformers

    path = Path(path)
    config_file = path / "config.json"
    if not config_file.is_file():
        raise ValueError(f"{path} is not a Hugging Face checkpoint folder: {config_file} does not exist")
    config = json.loads(config_file.read_text())
    archs = [a for a in config.get("architectures") or [] if a in SUPPORTED]
    if not archs:
        raise ValueError(
            f"{config_file} names architectures {config.get('architectures')}; supported: {sorted(SUPPORTED)}"
        )
    hf_class = getattr(transformers, archs[0])
    hf_model = hf_class.from_pretrained(path, local_files_only=True)
    return from_hf(hf_model, **options)
