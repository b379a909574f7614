"""Training a Transformer: the optimiser, the learning-rate schedule and a small trainer.

One update of the parameters ``theta`` at step ``t = 1, 2, ...`` is::

    loss_t  = loss_fn(model, batch_t)                  (under bf16 autocast if asked)
    g_t     = grad loss_t, rescaled to norm <= grad_clip        (gradient clipping)
    eta_t   = schedule(t)                              (warmup, then decay)
    theta  <- AdamW(theta, g_t, eta_t)                 (decoupled weight decay)

* **AdamW** (Loshchilov & Hutter, 2019) decays a weight by
  ``theta <- theta - eta_t * lambda * theta`` *beside* the Adam update instead
  of adding ``lambda * theta`` to the gradient, where Adam's normalisation
  would scale it away. :func:`param_groups` applies the decay to parameters
  with ``ndim >= 2`` only (the rule is stated there).
* **Schedules**: :func:`warmup_cosine` (linear warmup, then a cosine down to a
  floor, as in GPT-style training) and :func:`course_lib.seq2seq.transformer_lr` (the
  schedule of the original Transformer, Vaswani et al., 2017, section 5.3).
* **Trainer**: :class:`Trainer` runs the loop above on any model and loss,
  logs, clips, checkpoints, resumes exactly, and runs data-parallel under
  ``torchrun``. Its knobs are a :class:`TrainConfig`.
* **Checkpoint averaging**: :func:`average_checkpoints` takes the element-wise
  mean of several snapshots' weights, ``theta_avg = (1/k) sum_i theta_i``, as
  Vaswani et al. (2017, section 6.1) did with the last 5 (base) or 20 (big)
  checkpoints of a run.

Steps count *updates*: ``trainer.step`` is the number of updates done, and
the update that takes it from ``t - 1`` to ``t`` uses the learning rate
``schedule(t)``.
"""

from __future__ import annotations

import itertools
import math
import os
import random
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import torch
import torch.distributed as dist
import tqdm.auto
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from course_lib.seq2seq import transformer_lr

__all__ = [
    "progress",
    "clip_grad_norm",
    "TrainConfig",
    "warmup_cosine",
    "learning_rate",
    "param_groups",
    "make_optimizer",
    "Trainer",
    "average_checkpoints",
]

AMP_DTYPES = {None: None, "bf16": torch.bfloat16}
SCHEDULES = ("cosine", "inverse_sqrt")


# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------
@dataclass
class TrainConfig:
    """Everything a :class:`Trainer` needs besides the model, the loss and the data.

    The batch size is not here: it is whatever the caller's batches hold (times
    the number of processes under data parallelism).

    Attributes:
        lr: peak learning rate, reached at the end of warmup.
        weight_decay: AdamW's decoupled decay ``lambda`` on matrices (see :func:`param_groups`).
        betas, eps: AdamW's moment decay rates and denominator guard.
        warmup_steps: updates of linear warmup.
        max_steps: updates in the whole run; :meth:`Trainer.fit` stops there.
        min_lr_ratio: the cosine schedule ends at ``lr * min_lr_ratio``.
        schedule: ``"cosine"`` (:func:`warmup_cosine`) or ``"inverse_sqrt"``
            (:func:`course_lib.seq2seq.transformer_lr`, rescaled to peak at ``lr``).
        grad_clip: largest global gradient norm; ``None`` turns clipping off.
        log_every: read the loss back from the device every this many updates.
        checkpoint_path: where :meth:`Trainer.fit` saves; ``None`` saves nothing.
        checkpoint_every: also save every this many updates (0: only at the end of ``fit``).
        seed: seeds torch and Python's ``random`` (plus the process rank under DDP).
        device: ``"cpu"``, ``"cuda"``, ...; ``None`` picks CUDA when available.
        amp_dtype: ``None`` (full precision) or ``"bf16"`` (autocast the forward pass to bfloat16).
        compile: run the model through ``torch.compile``.
        progress: show a progress bar (on rank 0 only).
    """

    lr: float = 3e-4
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    warmup_steps: int = 100
    max_steps: int = 1000
    min_lr_ratio: float = 0.1
    schedule: str = "cosine"
    grad_clip: float | None = 1.0
    log_every: int = 50
    checkpoint_path: str | None = None
    checkpoint_every: int = 0
    seed: int = 0
    device: str | None = None
    amp_dtype: str | None = None
    compile: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        self.betas = tuple(self.betas)
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if not 0 <= self.warmup_steps <= self.max_steps:
            raise ValueError(f"warmup_steps must be in [0, max_steps={self.max_steps}], got {self.warmup_steps}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.schedule == "inverse_sqrt" and self.warmup_steps < 1:
            raise ValueError("the inverse_sqrt schedule peaks at warmup_steps, which must then be >= 1, got 0")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be positive or None, got {self.grad_clip}")
        if self.log_every < 1:
            raise ValueError(f"log_every must be >= 1, got {self.log_every}")
        if self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be >= 0 (0 = only at the end), got {self.checkpoint_every}")
        if self.checkpoint_every and self.checkpoint_path is None:
            raise ValueError(f"checkpoint_every={self.checkpoint_every} needs a checkpoint_path")
        if self.amp_dtype not in AMP_DTYPES:
            raise ValueError(f"amp_dtype must be one of {list(AMP_DTYPES)}, got {self.amp_dtype!r}")


# --------------------------------------------------------------------------
# Learning-rate schedules (pure functions of the step)
# --------------------------------------------------------------------------

#: Set (to anything) by `make book` and the test suite: outputs stored in notebooks stay stable.
STATIC_OUTPUT_ENV = "COURSE_STATIC_OUTPUT"


def progress(iterable=None, **kwargs):
    """A ``tqdm.auto`` progress bar (a widget in JupyterLab, text in a terminal).

    When the environment variable ``COURSE_STATIC_OUTPUT`` is set, as it is
    while the book is built and while nbval checks the notebooks, the bar is
    disabled: a bar's final state (its timings) would change every run.
    """
    if os.environ.get(STATIC_OUTPUT_ENV):
        kwargs["disable"] = True
    return tqdm.auto.tqdm(iterable, **kwargs)

def clip_grad_norm(params: Iterable[Tensor], max_norm: float | None, eps: float = 1e-6) -> Tensor:
    """Rescale the gradients of ``params``, in place, so that their global norm is at most ``max_norm``.

    The global norm is taken over every gradient together, as if they were
    one long vector: ``||g|| = sqrt(sum_p ||g_p||^2)``. When it exceeds
    ``max_norm`` every gradient is multiplied by ``max_norm / (||g|| + eps)``
    (the same factor for all, so the update keeps its direction); otherwise
    nothing changes. Parameters without a gradient are skipped. With
    ``max_norm=None`` nothing is clipped and the norm is only measured.

    Returns the global norm *before* clipping, a 0-d tensor on the gradients'
    device (no host sync), as ``torch.nn.utils.clip_grad_norm_`` does.
    """
    if max_norm is not None and not max_norm > 0:
        raise ValueError(f"max_norm must be positive or None, got {max_norm}")
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.detach(), dtype=torch.float32)
                                                  for g in grads]))
    if max_norm is not None:
        factor = torch.clamp(max_norm / (total + eps), max=1.0)
        for g in grads:
            g.detach().mul_(factor.to(g.dtype))
    return total


def warmup_cosine(step: int, max_lr: float, warmup_steps: int, max_steps: int, min_lr: float = 0.0) -> float:
    """Linear warmup to ``max_lr``, then a half cosine down to ``min_lr``::

        lr(t) = max_lr * t / W                                      0 <= t <= W
        lr(t) = min_lr + (max_lr - min_lr) * (1 + cos(pi * p)) / 2,  p = (t - W) / (T - W)
        lr(t) = min_lr                                              t >= T

    with ``W = warmup_steps`` and ``T = max_steps``. The peak is at ``t = W``
    and ``min_lr`` is reached at ``t = T``. With ``W = 0`` the cosine starts at
    ``t = 0``.
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if not 0 <= warmup_steps <= max_steps:
        raise ValueError(f"need 0 <= warmup_steps <= max_steps, got warmup_steps={warmup_steps}, max_steps={max_steps}")
    if not 0 <= min_lr <= max_lr:
        raise ValueError(f"need 0 <= min_lr <= max_lr, got min_lr={min_lr}, max_lr={max_lr}")
    if warmup_steps > 0 and step <= warmup_steps:
        return max_lr * step / warmup_steps
    if step >= max_steps:
        return min_lr
    progress = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def learning_rate(step: int, config: TrainConfig) -> float:
    """The learning rate of update ``step`` under ``config``'s schedule.

    ``"inverse_sqrt"`` is :func:`course_lib.seq2seq.transformer_lr` divided by its peak
    value and multiplied by ``config.lr``, so that ``config.lr`` is the peak of
    either schedule (the ``dim^-0.5`` factor cancels).
    """
    if config.schedule == "cosine":
        return warmup_cosine(step, config.lr, config.warmup_steps, config.max_steps, config.lr * config.min_lr_ratio)
    w = config.warmup_steps
    return config.lr * transformer_lr(step, 1, w) / transformer_lr(w, 1, w)


# --------------------------------------------------------------------------
# AdamW with decay on matrices only
# --------------------------------------------------------------------------
def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Split the trainable parameters into a decayed and an undecayed group.

    The rule: **a parameter is decayed if and only if it has ``ndim >= 2``**.
    Matrices (linear weights, embedding tables, convolution kernels, patch
    projections) are decayed; vectors and scalars (biases, LayerNorm/RMSNorm
    gains and shifts, LayerScale, learned temperatures) are not, since pulling
    a gain towards 0 or a bias towards 0 has no regularising meaning. Note that
    by this rule a learned position embedding of shape ``(1, seq, dim)``
    *is* decayed; a model may exempt parameters by name through a method
    ``no_weight_decay()`` returning a set of names (timm's convention).

    Returns:
        two AdamW parameter groups, ``weight_decay`` first and ``0.0`` second.
    """
    exempt = set(model.no_weight_decay()) if hasattr(model, "no_weight_decay") else set()
    decay, no_decay = [], []
    for name, p in model.named_parameters():  # shared (tied) parameters appear once
        if not p.requires_grad:
            continue
        (decay if p.ndim >= 2 and name not in exempt else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`; the learning rate is set at every step by the :class:`Trainer`."""
    return torch.optim.AdamW(
        param_groups(model, config.weight_decay), lr=config.lr, betas=config.betas, eps=config.eps
    )


# --------------------------------------------------------------------------
# Processes: one, or several under torchrun
# --------------------------------------------------------------------------
def _resolve_device(name: str | None, local_rank: int) -> torch.device:
    if name is None:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", local_rank)  # one GPU per process under torchrun
    return device


def _rng_state(device: torch.device) -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)


def _every_nth(batches: Iterable[tuple], rank: int, world_size: int) -> Iterator[tuple]:
    """Rank ``rank``'s share of a stream: of each ``world_size`` consecutive batches, the ``rank``-th.

    Every rank reads the whole stream, so all of them stay at the same place in
    it; a trailing group of fewer than ``world_size`` batches is dropped.
    """
    it = iter(batches)
    while len(group := list(itertools.islice(it, world_size))) == world_size:
        yield group[rank]


# --------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------
class Trainer:
    """Train ``model`` by minimising ``loss_fn(model, batch)`` with AdamW.

    Usage, in a notebook or a script::

        trainer = Trainer(model, lambda m, b: F.cross_entropy(m(b[0]), b[1]), TrainConfig(max_steps=500))
        history = trainer.fit(batches)     # an iterable of tuples of tensors

    ``fit`` moves the tensors of each batch to the device, and stops after
    ``config.max_steps`` updates in all, after ``steps`` more, or when the
    batches run out, whichever comes first. It may be called again to go on
    (an iterator continues where it stopped; a list starts over).

    **Logging.** The loss stays on the device; every ``log_every`` updates (and
    at ``max_steps``) its mean since the last log is read back, together with
    the learning rate and the gradient norm *before* clipping, appended to
    ``trainer.history`` and shown on the progress bar. That is the only place
    the host waits for the device. After an update, ``p.grad`` still holds
    the (clipped) gradient that was applied; it is cleared at the next step.

    **Checkpoints** (:meth:`save_checkpoint`, :meth:`load_checkpoint`) hold
    the model, the optimizer state, the step (from which the schedule is
    recomputed), the RNG states and the config. Training ``N`` updates equals,
    bit for bit on a CPU in float32, training ``K``, saving, loading into a new
    trainer and training ``N - K``, provided the data resumes where it
    stopped too: the trainer does not own the data, so hand ``fit`` the
    batches from ``trainer.step`` on (e.g. batches drawn from a generator
    seeded by the step, or ``itertools.islice(stream, trainer.step * W, None)``
    for a deterministic stream and ``W`` processes, see below).

    **Data parallelism.** Launched by ``torchrun`` (``RANK``, ``WORLD_SIZE``
    and ``LOCAL_RANK`` set), the trainer joins the process group (NCCL on
    CUDA, Gloo on CPU) unless one exists, wraps the model in
    :class:`~torch.nn.parallel.DistributedDataParallel` (which averages the
    gradients over processes) and shards the data itself: *every rank is
    given the same stream of batches, and rank* ``r`` *of* ``W`` *trains on
    batches* ``r, r + W, r + 2W, ...``. So one update consumes ``W``
    consecutive batches, a global batch ``W`` times the caller's, and the
    calling code is the same in one process or many (seed the data generator
    identically on every rank; generating data ``W`` times over is the price,
    negligible for the synthetic sets of :mod:`course_lib.data`). Only rank 0
    shows progress and writes checkpoints. :meth:`close` (or leaving a
    ``with Trainer(...)`` block) destroys the process group if the trainer
    created it. Without these variables nothing of this happens.

    Args:
        model: any module; moved to ``config.device``.
        loss_fn: ``(model, batch) -> scalar loss tensor``; receives the wrapped
            (DDP, compiled) model, so it should only call it.
        config: a :class:`TrainConfig` (defaults when ``None``).
    """

    def __init__(self, model: nn.Module, loss_fn: Callable[[nn.Module, tuple], Tensor],
                 config: TrainConfig | None = None):
        self.config = config = config if config is not None else TrainConfig()
        self.loss_fn = loss_fn
        self.distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
        self.rank = int(os.environ.get("RANK", 0)) if self.distributed else 0
        self.world_size = int(os.environ.get("WORLD_SIZE", 1)) if self.distributed else 1
        local_rank = int(os.environ.get("LOCAL_RANK", 0)) if self.distributed else 0
        self.device = _resolve_device(config.device, local_rank)
        self._owns_process_group = False
        if self.distributed and not dist.is_initialized():
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
            dist.init_process_group(backend="nccl" if self.device.type == "cuda" else "gloo")
            self._owns_process_group = True

        torch.manual_seed(config.seed + self.rank)
        random.seed(config.seed + self.rank)
        self.model = model.to(self.device)  # the bare module: its state_dict is what is saved
        self.optimizer = make_optimizer(self.model, config)
        wrapped = self.model
        if self.distributed:  # DDP broadcasts rank 0's parameters here
            wrapped = DistributedDataParallel(wrapped,
                                              device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.wrapped = torch.compile(wrapped) if config.compile else wrapped
        self.step = 0
        self.history: list[dict[str, float]] = []

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the process that reports and writes."""
        return self.rank == 0

    # ---------------------------------------------------------------- one update
    def train_step(self, batch: tuple) -> tuple[Tensor, Tensor]:
        """One update on ``batch``; returns the loss and the pre-clipping gradient norm, on the device."""
        cfg = self.config
        lr = learning_rate(self.step + 1, cfg)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        batch = tuple(t.to(self.device, non_blocking=True) if isinstance(t, Tensor) else t for t in batch)
        amp = AMP_DTYPES[cfg.amp_dtype]
        with torch.autocast(self.device.type, dtype=amp) if amp is not None else nullcontext():
            loss = self.loss_fn(self.wrapped, batch)
        loss.backward()  # under DDP, gradients are averaged over ranks here
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        grad_norm = clip_grad_norm(params, cfg.grad_clip)  # the norm before clipping
        self.optimizer.step()
        self.step += 1
        return loss.detach(), grad_norm

    # ---------------------------------------------------------------- the loop
    def fit(self, batches: Iterable[tuple], steps: int | None = None) -> list[dict[str, float]]:
        """Train on ``batches`` until ``max_steps`` (or ``steps`` more updates); returns this call's log records."""
        cfg = self.config
        stop = cfg.max_steps if steps is None else min(cfg.max_steps, self.step + steps)
        shard = _every_nth(batches, self.rank, self.world_size)
        self.model.train()
        first_record = len(self.history)
        loss_sum, n_losses = torch.zeros((), device=self.device), 0
        bar = progress(total=cfg.max_steps, initial=self.step, disable=not (cfg.progress and self.is_main),
                       desc="train")
        while self.step < stop:
            batch = next(shard, None)  # pulled only when needed: a second fit goes on where this one stopped
            if batch is None:
                break
            loss, grad_norm = self.train_step(batch)
            loss_sum += loss.float()
            n_losses += 1
            bar.update(1)
            if self.step % cfg.log_every == 0 or self.step == cfg.max_steps:
                record = self._log(loss_sum / n_losses, grad_norm)
                self.history.append(record)
                bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{record['lr']:.2e}")
                loss_sum, n_losses = torch.zeros((), device=self.device), 0
            if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
                self.save_checkpoint()
        bar.close()
        if cfg.checkpoint_path is not None and not (cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0):
            self.save_checkpoint()
        return self.history[first_record:]

    def _log(self, loss: Tensor, grad_norm: Tensor) -> dict[str, float]:
        if self.distributed:  # the mean over ranks; every rank logs at the same steps
            dist.all_reduce(loss)
            loss = loss / self.world_size
        loss_value, norm_value = torch.stack([loss, grad_norm.float()]).tolist()  # the one host sync
        return {"step": self.step, "loss": loss_value, "lr": learning_rate(self.step, self.config),
                "grad_norm": norm_value}

    # ---------------------------------------------------------------- checkpoints
    def save_checkpoint(self, path: str | os.PathLike | None = None) -> None:
        """Write the training state to ``path`` (``config.checkpoint_path`` by default).

        Under DDP every rank must call it: the ranks' RNG states are gathered,
        and rank 0 writes while the others wait. The file is written to a
        temporary name and renamed, so a crash never leaves half a checkpoint.
        """
        path = path if path is not None else self.config.checkpoint_path
        if path is None:
            raise ValueError("no checkpoint path: pass one or set config.checkpoint_path")
        rng = [_rng_state(self.device)]
        if self.distributed:
            rng = [None] * self.world_size
            dist.all_gather_object(rng, _rng_state(self.device))
        if self.is_main:
            state = {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "step": self.step,
                "rng": rng,
                "config": asdict(self.config),
            }
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            torch.save(state, tmp)
            os.replace(tmp, path)
        if self.distributed:
            dist.barrier()

    def load_checkpoint(self, path: str | os.PathLike | None = None) -> None:
        """Restore the state written by :meth:`save_checkpoint` into this trainer.

        Each rank takes back its own RNG state when the checkpoint was written
        by as many ranks as there are now, and rank 0's otherwise.
        """
        path = path if path is not None else self.config.checkpoint_path
        if path is None:
            raise ValueError("no checkpoint path: pass one or set config.checkpoint_path")
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = state["step"]
        rng = state["rng"]
        _set_rng_state(rng[self.rank] if len(rng) == self.world_size else rng[0], self.device)

    # ---------------------------------------------------------------- the end
    def close(self) -> None:
        """Destroy the process group, if this trainer created it."""
        if self._owns_process_group and dist.is_initialized():
            dist.destroy_process_group()
            self._owns_process_group = False

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------
# Checkpoint averaging
# --------------------------------------------------------------------------
def average_checkpoints(state_dicts: Iterable[dict[str, Tensor]]) -> dict[str, Tensor]:
    """The element-wise mean of ``k`` snapshots of one model: ``theta_avg = (1/k) sum_i theta_i``.

    Vaswani et al. (2017, section 6.1) evaluate a single model whose weights
    are the average of the last checkpoints of a run (5 written at 10-minute
    intervals for the base model, 20 for the big one). The snapshots must be
    of one architecture: every state dict has the same keys, and each key the
    same shape and dtype in all of them.

    * Floating-point (and complex) tensors are averaged, summed in at least
      float32 (a bfloat16 or float16 sum would round at every addition) and
      returned in their own dtype.
    * Other tensors (integer counters such as BatchNorm's
      ``num_batches_tracked``, boolean buffers) cannot be averaged; they are
      taken from the *last* state dict, the most recent snapshot.

    Tied weights (the seq2seq model's embedding and output projection appear
    under three keys) are averaged key by key, which gives them the same
    values; ``model.load_state_dict`` then writes them into the one shared
    tensor. Nothing is modified in place.

    Args:
        state_dicts: ``k >= 1`` mappings from names to tensors, oldest first
            (``model.state_dict()`` of each snapshot, or their copies).

    Returns:
        a new dict with the keys in the first state dict's order, each tensor
        of the same shape and dtype, on the device of the first state dict's
        tensor, ready for ``model.load_state_dict``.

    Raises:
        ValueError: no state dict; keys, shapes or dtypes that differ between them.
        TypeError: an entry that is not a mapping, or a value that is not a tensor.
    """
    snapshots = list(state_dicts)
    if not snapshots:
        raise ValueError("average_checkpoints needs at least one state dict, got an empty list")
    for i, sd in enumerate(snapshots):
        if not hasattr(sd, "keys") or not hasattr(sd, "__getitem__"):
            raise TypeError(f"state_dicts[{i}] must be a mapping of names to tensors (a state_dict), "
                            f"got {type(sd).__name__}")
    first = snapshots[0]
    keys = list(first.keys())
    for i, sd in enumerate(snapshots[1:], start=1):
        missing, extra = [k for k in keys if k not in sd], [k for k in sd.keys() if k not in first]
        if missing or extra:
            raise ValueError(f"state_dicts[{i}] has other keys than state_dicts[0]: all snapshots must be of "
                             f"one model; missing {missing[:5]}, unexpected {extra[:5]}")
    averaged: dict[str, Tensor] = {}
    for key in keys:
        values = [sd[key] for sd in snapshots]
        for i, v in enumerate(values):
            if not isinstance(v, Tensor):
                raise TypeError(f"state_dicts[{i}][{key!r}] must be a tensor, got {type(v).__name__}")
        ref = values[0]
        for i, v in enumerate(values[1:], start=1):
            if v.shape != ref.shape:
                raise ValueError(f"{key!r} has shape {tuple(v.shape)} in state_dicts[{i}] but {tuple(ref.shape)} "
                                 f"in state_dicts[0]: averaged tensors must have one shape")
            if v.dtype != ref.dtype:
                raise ValueError(f"{key!r} has dtype {v.dtype} in state_dicts[{i}] but {ref.dtype} in "
                                 f"state_dicts[0]: averaged tensors must have one dtype")
        if not (ref.is_floating_point() or ref.is_complex()):
            averaged[key] = values[-1].detach().clone().to(ref.device)
            continue
        acc_dtype = torch.promote_types(ref.dtype, torch.float32)
        total = torch.zeros(ref.shape, dtype=acc_dtype, device=ref.device)
        for v in values:
            total += v.detach().to(device=ref.device, dtype=acc_dtype)
        averaged[key] = (total / len(values)).to(ref.dtype)
    return averaged
