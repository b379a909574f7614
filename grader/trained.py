"""What the grader trusts of a model a learner's recipe returns: a capstone's ``(cfg, params)``, read as data.

A capstone's recipe exercise (``train_gpt``, ``train_vit``) trains in the grading kernel and returns its
configuration and its trained parameters; the judge then evaluates them outside the kernel. Everything in
that pair is the learner's, so each step below refuses what it cannot use with an
:class:`~grader.failures.ExerciseFailure` that names the value and the rule, and nothing else happens:

1. :func:`pair`: two dicts, ``(cfg, params)``;
2. :func:`config`: every key of the configuration, each a positive integer (at most ``max_int``) or, for
   the keys named ``reals``, a positive finite number, returned as plain Python numbers;
3. :func:`parameters`: exactly the model's names, each a dense CPU floating tensor of its shape with finite
   values, returned detached as float32.

The rules that depend on the model (which sizes divide which, the largest model the judge evaluates) stay
with each capstone's assignment module.
"""

from __future__ import annotations

import math
import numbers
from typing import Mapping

import torch
from torch import Tensor

from .failures import ExerciseFailure, learner_text


def pair(out, name: str) -> tuple:
    """``out`` as ``(cfg, params)``, two dicts, or a failure that says what to return."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], dict) and isinstance(out[1], dict)):
        raise ExerciseFailure(f"{name} must return a pair (cfg, params) of two dicts; got {type(out).__name__}. "
                              "Return the parameters themselves, a dict of tensors, not the losses or a model.")
    return out[0], out[1]


def config(cfg: dict, keys: tuple[str, ...], reals: tuple[str, ...], max_int: int, name: str) -> dict:
    """The configuration's ``keys`` as Python numbers: ``reals`` positive finite floats, the rest positive
    integers of at most ``max_int``."""
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise ExerciseFailure(f"{name}'s cfg lacks {missing}: it names every one of {list(keys)}.")
    for k in keys:
        v, real = cfg[k], k in reals
        if (isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or not v > 0
                or not real and (int(v) != v or v > max_int)):
            kind = "finite number" if real else f"integer, at most {max_int:,}"
            raise ExerciseFailure(f"{name}'s cfg[{k!r}] = {learner_text(repr(v), 40)}: a positive {kind}.")
    return {k: (float(cfg[k]) if k in reals else int(cfg[k])) for k in keys}


def parameters(params: dict, shapes: Mapping[str, tuple[int, ...]], name: str) -> dict[str, Tensor]:
    """``params`` with exactly the names of ``shapes``, each a dense CPU floating tensor of its shape with finite
    values, as detached float32 tensors."""
    if set(params) != set(shapes):
        wrong = sorted(learner_text(repr(k), 60) for k in set(params) ^ set(shapes))[:4]
        raise ExerciseFailure(f"{name}'s params do not have the names of the model's parameters: "
                              f"{', '.join(wrong)} (missing or not the model's).")
    for k, shape in shapes.items():
        p = params[k]
        if (not isinstance(p, Tensor) or p.layout != torch.strided or p.device.type != "cpu"
                or tuple(p.shape) != shape or not p.is_floating_point()):
            raise ExerciseFailure(f"{name}'s params[{k!r}] must be a floating tensor of shape {shape} (dense, on "
                                  "the CPU).")
        if not torch.isfinite(p).all():
            raise ExerciseFailure(f"{name}'s params[{k!r}] holds NaN or infinite values: the training diverged "
                                  "(is the learning rate too high, or the gradients not clipped?).")
    return {k: params[k].detach().float() for k in shapes}
