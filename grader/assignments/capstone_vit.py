"""Random cases and likely mistakes for the ViT capstone (after chapter 11): a whole ViT from its parts, trained.

The parts are compared with :mod:`course_lib.vit_recipe` as every exercise is;
the recipe is judged on what the model learns.

* ``count_params(cfg)``: the learner's prediction of the model's size, as a formula (an integer).
* ``vit_logits(params, images, cfg)``: the forward pass from a dict of tensors with the ViT's
  state-dict names (float64 cases, several channels, gains and shifts far from 1 and 0).
* ``augment(images, max_shift, generator)``: random shifts, one ``torch.randint`` draw.
* ``train_loop(params, images, labels, cfg, hp, generator)``: a few float64 updates of a tiny model
  compared loss by loss and parameter by parameter (:func:`train_result` runs it on copies).
* ``evaluate(params, images, labels, cfg, batch_size)``: the mean loss and the accuracy, every image once.
* ``train_vit(images, labels, num_classes, steps, seed)``: the learner's whole recipe, run in the
  grading kernel on MNIST's training digits with their classes renamed by a permutation drawn from
  the learner's seed, then judged here on held-out digits the kernel never sees (:func:`check_recipe`).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib import vit_recipe as R
from grader import trained
from grader.cases import Case, randint, randn
from grader.checker import call_learner
from grader.diagnosis import Mistake
from grader.failures import ExerciseFailure
from grader.registry import Assignment, Comparison, Exercise


def _cfg(g: torch.Generator) -> dict:
    n_heads = [1, 2, 4][randint(g, 0, 3)]
    patch = randint(g, 1, 5)
    return dict(image_size=patch * randint(g, 1, 4), patch_size=patch, in_chans=randint(g, 1, 4),
                num_classes=randint(g, 2, 11), dim=n_heads * [2, 4][randint(g, 0, 2)], n_layers=randint(g, 1, 3),
                n_heads=n_heads, mlp_hidden=randint(g, 3, 20), norm_eps=[1e-6, 1e-5][randint(g, 0, 2)])


def _cfg_label(cfg: Mapping) -> str:
    return ", ".join(f"{k}={cfg[k]}" for k in R.CONFIG_KEYS)


def _params(g: torch.Generator, cfg: Mapping, grad: bool = False) -> dict[str, Tensor]:
    """float64 parameters large enough that every part shows: matrices N(0, 1.2^2 / fan-in), gains in [0.5, 2],
    shifts and biases N(0, 0.5^2), the class token and the positions N(0, 1)."""
    out = {}
    for name, shape in R.param_shapes(cfg).items():
        if name.endswith("norm.weight"):
            p = 0.5 + 1.5 * torch.rand(shape, generator=g, dtype=torch.float64)
        elif len(shape) == 1:
            p = randn(g, shape, scale=0.5)
        elif name in ("cls_token", "pos_embed"):
            p = randn(g, shape)
        else:
            p = randn(g, shape, scale=1.2 * math.prod(shape[1:]) ** -0.5)
        out[name] = p.requires_grad_(grad)
    return out


def _images(g: torch.Generator, n: int, cfg: Mapping) -> Tensor:
    s = cfg["image_size"]
    return (2 * torch.rand((n, cfg["in_chans"], s, s), generator=g, dtype=torch.float64) - 1)


# --------------------------------------------------------------------------
# Exercise: predict, then run: the number of parameters
# --------------------------------------------------------------------------
def count_cases(seed: int = 0, n: int = 24) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        cfg = _cfg(g)
        if i % 4 == 1:  # ViT-B/16 on ImageNet, and its neighbours
            cfg |= dict(image_size=224, patch_size=[16, 14, 32][i % 3], in_chans=3, dim=768, n_heads=12,
                        mlp_hidden=3072, n_layers=12, num_classes=1000)
        cases.append(Case((cfg,), label=_cfg_label(cfg)))
    return cases


def _count(cfg, cls=True, biases=True, norm_shift=True, final_norm=True, head=True, qkv=3,
           patches=None):
    d, h, p, c, k = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"], cfg["in_chans"], cfg["num_classes"]
    n = patches(cfg) if patches else (cfg["image_size"] // p) ** 2
    b = int(biases)
    per_norm = d * (1 + int(norm_shift))
    block = (qkv + 1) * (d * d + b * d) + 2 * d * h + b * (h + d) + 2 * per_norm
    return ((c * p * p + b) * d + d * int(cls) + (n + 1) * d + cfg["n_layers"] * block
            + per_norm * int(final_norm) + (k * d + b * k) * int(head))


COUNT_MISTAKES = [
    Mistake("dim numbers are missing: the class token (one learned vector of dim) or its position (pos_embed has "
            "N + 1 rows, the class token's first).", lambda cfg: _count(cfg, cls=False)),
    Mistake("the biases are left out: every linear map of this ViT (the patch projection, q, k, v, out, fc1, fc2, "
            "the head) has one.", lambda cfg: _count(cfg, biases=False)),
    Mistake("each LayerNorm is counted with its gain only: it has a shift too, 2 x dim numbers.",
            lambda cfg: _count(cfg, norm_shift=False)),
    Mistake("the final LayerNorm before the head is left out.", lambda cfg: _count(cfg, final_norm=False)),
    Mistake("the classification head is left out: num_classes x dim weights and num_classes biases.",
            lambda cfg: _count(cfg, head=False)),
    Mistake("the attention is counted with three matrices: q, k, v and the output projection make four.",
            lambda cfg: _count(cfg, qkv=2)),
    Mistake("the number of patches is image_size / patch_size: the grid is (image_size / patch_size) squared.",
            lambda cfg: _count(cfg, patches=lambda c: c["image_size"] // c["patch_size"])),
]


# --------------------------------------------------------------------------
# Exercise: the forward pass
# --------------------------------------------------------------------------
def vit_cases(seed: int = 0, n: int = 14) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        cfg = _cfg(g)
        if i == 0:
            cfg |= dict(image_size=6, patch_size=3, in_chans=3, n_heads=2, dim=8, n_layers=2)
        params = _params(g, cfg)
        images = _images(g, randint(g, 1, 4), cfg)
        cases.append(Case((params, images, cfg), label=f"images {tuple(images.shape)}, {_cfg_label(cfg)}"))
    return cases


def _ln(x, w, b, eps, shift=True):
    mean = x.mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt((x - mean).pow(2).mean(-1, keepdim=True) + eps) * w
    return y + b if shift else y


def _logits(params, images, cfg, positions=True, pool="cls", final_norm=True, post_ln=False, scaled=True,
            causal=False, order="chw", cls_last=False, gelu="none", shift=True):
    """The forward pass with one thing changed: the variants of the likely mistakes."""
    eps, H, P = cfg["norm_eps"], cfg["n_heads"], cfg["patch_size"]
    norm = lambda x, name: _ln(x, params[name + ".weight"], params[name + ".bias"], eps, shift)  # noqa: E731
    lin = lambda x, name: x @ params[name + ".weight"].T + params[name + ".bias"]  # noqa: E731
    b, c, s, _ = images.shape
    g = s // P
    perm = (0, 2, 4, 1, 3, 5) if order == "chw" else (0, 2, 4, 3, 5, 1)  # "hwc": (row, column, channel)
    x = images.reshape(b, c, g, P, g, P).permute(*perm).reshape(b, g * g, -1)
    w = params["patch_embed.proj.weight"].flatten(1)
    x = x @ w.T + params["patch_embed.proj.bias"]
    cls = params["cls_token"].expand(b, -1, -1)
    z = torch.cat([x, cls], 1) if cls_last else torch.cat([cls, x], 1)
    if positions:
        z = z + params["pos_embed"]
    n = z.shape[1]
    heads = lambda t: t.unflatten(-1, (H, -1)).transpose(1, 2)  # noqa: E731
    for i in range(cfg["n_layers"]):
        p = f"blocks.{i}."
        h = z if post_ln else norm(z, p + "attn_res.norm")
        q, k, v = (heads(lin(h, p + f"attn.{m}")) for m in ("q_proj", "k_proj", "v_proj"))
        scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scaled else 1.0)
        if causal:
            scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        a = lin((scores.softmax(-1) @ v).transpose(1, 2).flatten(2), p + "attn.out_proj")
        z = norm(z + a, p + "attn_res.norm") if post_ln else z + a
        h = z if post_ln else norm(z, p + "mlp_res.norm")
        m = lin(F.gelu(lin(h, p + "mlp.fc1"), approximate=gelu), p + "mlp.fc2")
        z = norm(z + m, p + "mlp_res.norm") if post_ln else z + m
    if final_norm:
        z = norm(z, "norm")
    pooled = {"cls": z[:, -1] if cls_last else z[:, 0], "mean": z[:, 1:].mean(1), "all": z.mean(1)}[pool]
    return lin(pooled, "head")


VIT_MISTAKES = [
    Mistake("the positions are not added: add pos_embed to the tokens (class token first) before the first block; "
            "without them the patches are a set and the model cannot tell where each one sits.",
            functools.partial(_logits, positions=False)),
    Mistake("the head reads the mean of the patch tokens: this ViT classifies the class token's output, "
            "norm(z)[:, 0].", functools.partial(_logits, pool="mean")),
    Mistake("the head reads the mean of every token: this ViT classifies the class token's output, norm(z)[:, 0].",
            functools.partial(_logits, pool="all")),
    Mistake("the class token is appended after the patches: it goes first, at position 0, and pos_embed[0, 0] is "
            "its position.", functools.partial(_logits, cls_last=True)),
    Mistake("the attention is causal: a ViT's patches see each other in every direction, with no mask.",
            functools.partial(_logits, causal=True)),
    Mistake("the final LayerNorm before the head is missing.", functools.partial(_logits, final_norm=False)),
    Mistake("this is a post-LN model: the norms go before each sublayer, z + f(LN(z)), not after the sum.",
            functools.partial(_logits, post_ln=True, final_norm=False)),
    Mistake("the scores are not scaled by 1/sqrt(head_dim).", functools.partial(_logits, scaled=False)),
    Mistake("the patch vectors are in (row, column, channel) order: a Conv2d weight (dim, C, P, P) flattens to "
            "(channel, row, column), so the patches must too (permute the channel axis before the pixel axes).",
            functools.partial(_logits, order="hwc")),
    Mistake("the GELU is the tanh approximation: this ViT uses the exact one, x * Phi(x) "
            "(torch.nn.functional.gelu's default).", functools.partial(_logits, gelu="tanh")),
    Mistake("the LayerNorm shifts (bias) are not added: each norm is (x - mean) / std * weight + bias.",
            functools.partial(_logits, shift=False)),
]


# --------------------------------------------------------------------------
# Exercise: augmentation by random shifts
# --------------------------------------------------------------------------
def augment_cases(seed: int = 0, n: int = 16) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        size = randint(g, 3, 10)
        images = 2 * torch.rand((randint(g, 1, 7), randint(g, 1, 3), size, size + randint(g, 0, 3)), generator=g,
                                dtype=torch.float64) - 1
        shift = [0, 1, 2, randint(g, 1, size)][i % 4]
        gen = torch.Generator().manual_seed(randint(g, 0, 2**31 - 1))
        cases.append(Case((images, shift, gen), label=f"images {tuple(images.shape)}, max_shift={shift}"))
    return cases


def augment_result(augment: Callable) -> Callable:
    """The learner's ``augment`` on a copy of the generator: the case's own stays as it was drawn."""
    def result(images, max_shift, generator):
        fresh = torch.Generator()
        fresh.set_state(generator.get_state())
        return augment(images, max_shift, fresh)
    return result


def reference_augment_result(images, max_shift, generator):
    return augment_result(R.augment)(images, max_shift, generator)


def _shifted(images, max_shift, generator, fill=R.BACKGROUND, wrap=False, swap=False, sign=1, shared=False):
    fresh = torch.Generator()
    fresh.set_state(generator.get_state())
    b, _, height, width = images.shape
    shape = (2,) if shared else (b, 2)
    shifts = torch.randint(-max_shift, max_shift + 1, shape, generator=fresh).expand(b, 2) * sign
    out = []
    for img, (dy, dx) in zip(images, shifts.tolist()):
        dy, dx = (dx, dy) if swap else (dy, dx)
        if wrap:
            out.append(torch.roll(img, (dy, dx), dims=(1, 2)))
            continue
        m = max_shift
        padded = F.pad(img, (m, m, m, m), value=fill)
        out.append(padded[:, m - dy: m - dy + height, m - dx: m - dx + width])
    return torch.stack(out)


AUGMENT_MISTAKES = [
    Mistake("the images wrap around (torch.roll): the pixels a shift uncovers are background (-1), not the ink "
            "that left on the other side.", functools.partial(_shifted, wrap=True)),
    Mistake("the uncovered pixels are 0: in these images 0 is grey; the background is -1.",
            functools.partial(_shifted, fill=0.0)),
    Mistake("the two shifts are swapped: shifts[b, 0] moves the image down (rows), shifts[b, 1] right (columns).",
            functools.partial(_shifted, swap=True)),
    Mistake("the images move the opposite way: a positive dy moves the image down, out[i] = images[i - dy].",
            functools.partial(_shifted, sign=-1)),
    Mistake("every image of the batch moves by the same shift: draw one (dy, dx) per image, a (batch, 2) draw.",
            functools.partial(_shifted, shared=True)),
]


# --------------------------------------------------------------------------
# Exercise: the training loop
# --------------------------------------------------------------------------
def train_result(train_loop: Callable) -> Callable:
    """The learner's in-place loop as a function of its result: ``(losses, parameters after)``, on copies.

    Inline, every line: the guards let this adapter's own code through, not what it calls."""
    def result(params, images, labels, cfg, hp, generator):
        params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
        fresh = torch.Generator()
        fresh.set_state(generator.get_state())
        losses = train_loop(params, images, labels, dict(cfg), dict(hp), fresh)
        return losses, [p.detach().clone() for p in params.values()]
    return result


def reference_train_result(params, images, labels, cfg, hp, generator):
    return train_result(R.train_loop)(params, images, labels, cfg, hp, generator)


def train_cases(seed: int = 0, n: int = 6) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        cfg = dict(image_size=4, patch_size=2, in_chans=[1, 2][i % 2], num_classes=randint(g, 2, 5), dim=8,
                   n_layers=1, n_heads=2, mlp_hidden=randint(g, 6, 16), norm_eps=1e-6)
        params = _params(g, cfg)
        count = randint(g, 10, 30)
        images, labels = _images(g, count, cfg), torch.randint(cfg["num_classes"], (count,), generator=g)
        hp = dict(steps=randint(g, 4, 8), batch_size=randint(g, 2, 6), max_lr=[0.05, 0.02, 0.1][i % 3],
                  min_lr=[0.0, 0.005][i % 2], warmup_steps=[2, 0, 3][i % 3], weight_decay=[0.1, 0.5, 0.3][i % 3],
                  max_norm=[0.5, 100.0, 2.0][i % 3], max_shift=[1, 2, 1][i % 3])
        gen = torch.Generator().manual_seed(randint(g, 0, 2**31 - 1))
        cases.append(Case((params, images, labels, cfg, hp, gen),
                          label=f"{count} images, hp {hp}, {_cfg_label(cfg)}"))
    return cases


def _loop(params, images, labels, cfg, hp, generator, zero_grad=True, clip=True, schedule="step", fresh_opt=False,
          groups="ndim", optimizer="adamw", augmented=True, order="batch_first", targets="batch"):
    """The training loop with one thing changed: the variants of the likely mistakes."""
    params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    fresh = torch.Generator()
    fresh.set_state(generator.get_state())
    generator = fresh

    def make():
        chosen = (R.decay_groups(params, hp["weight_decay"]) if groups == "ndim"
                  else [{"params": list(params.values()), "weight_decay": hp["weight_decay"]}])
        return (torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam)(chosen, lr=hp["max_lr"],
                                                                                 betas=R.BETAS)
    opt, losses = make(), []
    with torch.enable_grad():
        for step in range(1, hp["steps"] + 1):
            if fresh_opt:
                opt = make()
            if order == "batch_first":
                idx = torch.randint(len(images), (hp["batch_size"],), generator=generator)
                x = R.augment(images[idx], hp["max_shift"], generator) if augmented else images[idx]
            else:  # every image shifted first, then the batch drawn
                moved = R.augment(images, hp["max_shift"], generator)
                idx = torch.randint(len(images), (hp["batch_size"],), generator=generator)
                x = moved[idx]
            y = labels[idx] if targets == "batch" else labels[:hp["batch_size"]]
            loss = F.cross_entropy(R.vit_logits(params, x, cfg), y)
            if zero_grad:
                opt.zero_grad()
            loss.backward()
            if clip:
                R.clip_global_norm(params.values(), hp["max_norm"])
            t = {"step": step, "zero": step - 1, "none": None}[schedule]
            for group in opt.param_groups:
                group["lr"] = hp["max_lr"] if t is None else R.lr_at(t, hp["max_lr"], hp["warmup_steps"], hp["steps"],
                                                                     hp["min_lr"])
            opt.step()
            losses.append(loss.item())
    return losses, [p.detach().clone() for p in params.values()]


TRAIN_MISTAKES = [
    Mistake("the gradients are never zeroed: each backward pass adds to the last one's (optimizer.zero_grad() "
            "before backward).", functools.partial(_loop, zero_grad=False)),
    Mistake("the images are not augmented: shift each batch with augment(images[idx], hp['max_shift'], generator) "
            "after drawing it.", functools.partial(_loop, augmented=False)),
    Mistake("the whole set is shifted before the batch is drawn: draw the batch's indices first, then shift the "
            "batch (the generator's draws come in that order, and only the batch needs shifting).",
            functools.partial(_loop, order="augment_first")),
    Mistake("the labels are not the batch's: y = labels[idx], the labels of the images drawn.",
            functools.partial(_loop, targets="first")),
    Mistake("every parameter is decayed: decay the matrices only (ndim >= 2, as chapter 7's param_groups); a "
            "LayerNorm gain pulled to 0 or a bias pulled to 0 is no regularisation.",
            functools.partial(_loop, groups="all")),
    Mistake("the gradients are not clipped before the step: when their global norm exceeds max_norm, scale them "
            "all by max_norm / (norm + 1e-6) between backward and opt.step().",
            functools.partial(_loop, clip=False)),
    Mistake("the learning rate stays at max_lr: set each parameter group's lr to lr_at(step, ...) before the step.",
            functools.partial(_loop, schedule="none")),
    Mistake("the schedule counts the updates from 0: update s = 1 .. steps uses lr_at(s, ...).",
            functools.partial(_loop, schedule="zero")),
    Mistake("a new optimizer is made at every update: AdamW's moment estimates must carry over from step to step.",
            functools.partial(_loop, fresh_opt=True)),
    Mistake("this is Adam with an L2 penalty (torch.optim.Adam): AdamW decays the weights apart from the "
            "gradient.", functools.partial(_loop, optimizer="adam")),
]


# --------------------------------------------------------------------------
# Exercise: the held-out loss and accuracy
# --------------------------------------------------------------------------
def eval_cases(seed: int = 0, n: int = 10) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        cfg = _cfg(g)
        params = _params(g, cfg)
        batch = randint(g, 2, 7)
        count = batch * randint(g, 1, 4) + [0, randint(g, 1, batch)][i % 2 if i else 1]
        images, labels = _images(g, count, cfg), torch.randint(cfg["num_classes"], (count,), generator=g)
        if i % 3 == 2:  # a model that gets some of them right: labels from its own predictions, some changed
            with torch.no_grad():
                labels = R.vit_logits(params, images, cfg).argmax(-1)
            flip = torch.rand(count, generator=g) < 0.4
            labels = torch.where(flip, (labels + 1) % cfg["num_classes"], labels)
        cases.append(Case((params, images, labels, cfg, batch),
                          label=f"{count} images, batch_size={batch}, {_cfg_label(cfg)}"))
    return cases


def _eval(params, images, labels, cfg, batch_size, count=False, chunk_means=False, swapped=False):
    losses, corrects = [], []
    for x, y in zip(images.split(batch_size), labels.split(batch_size)):
        logits = R.vit_logits(params, x, cfg).detach()
        losses.append(F.cross_entropy(logits, y, reduction="sum").item() / (len(y) if chunk_means else 1))
        corrects.append(int((logits.argmax(-1) == y).sum()))
    loss = sum(losses) / (len(losses) if chunk_means else len(images))
    acc = sum(corrects) if count else sum(corrects) / len(images)
    return (float(acc), loss) if swapped else (loss, float(acc))


EVAL_MISTAKES = [
    Mistake("the accuracy is a count: return the share of the images whose largest logit is their label.",
            functools.partial(_eval, count=True)),
    Mistake("the loss is the mean of the chunks' means: a short last chunk would weigh as much as a whole one; "
            "sum the losses and divide by the number of images.", functools.partial(_eval, chunk_means=True)),
    Mistake("the pair is (accuracy, loss): return (loss, accuracy).", functools.partial(_eval, swapped=True)),
]


# --------------------------------------------------------------------------
# Exercise: the whole recipe, judged on what it learns
# --------------------------------------------------------------------------
#: updates the grading run asks for (each about 25-40 ms of CPU with the recipe's model, as the notebook writes it)
GRADING_STEPS = 400
#: the held-out accuracy a recipe must reach in GRADING_STEPS updates (tools/capstone_calibration.py)
BAR = 0.75
#: the largest model the judge evaluates
MAX_PARAMS, MAX_LAYERS = 1_000_000, 8
#: what the images are: MNIST's digits, 28 x 28 grey
IMAGE = dict(image_size=28, in_chans=1, num_classes=10)


@functools.cache
def digits() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(train images, train labels, held-out images, held-out labels)``: MNIST's training and test splits."""
    from course_lib.datasets import mnist

    return (*mnist.load("train"), *mnist.load("test"))


def relabelled(seed: int | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The digits with their classes renamed by a permutation of 0-9 drawn from ``seed`` (the learner's)."""
    train, train_y, held, held_y = digits()
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(11 if seed is None else seed))
    return train, perm[train_y], held, perm[held_y]


def recipe_output(out, name: str) -> tuple[dict, dict[str, Tensor]]:
    """The learner's ``(cfg, params)``, checked against the contract, or a failure that names what is wrong."""
    cfg, params = trained.pair(out, name)
    cfg = trained.config(cfg, R.CONFIG_KEYS, ("norm_eps",), MAX_PARAMS, name)
    for k, v in IMAGE.items():
        if cfg[k] != v:
            raise ExerciseFailure(f"{name}'s cfg has {k}={cfg[k]}: the digits are {IMAGE['image_size']} x "
                                  f"{IMAGE['image_size']} pixels, {IMAGE['in_chans']} channel, "
                                  f"{IMAGE['num_classes']} classes.")
    if cfg["image_size"] % cfg["patch_size"] or cfg["dim"] % cfg["n_heads"]:
        raise ExerciseFailure(f"{name}'s cfg ({_cfg_label(cfg)}): patch_size must divide image_size and n_heads "
                              "must divide dim.")
    if cfg["n_layers"] > MAX_LAYERS or R.param_count(cfg) > MAX_PARAMS:
        raise ExerciseFailure(f"{name}'s model has {cfg['n_layers']} layers and {R.param_count(cfg):,} parameters: "
                              f"the grader evaluates at most {MAX_LAYERS} layers and {MAX_PARAMS:,} parameters.")
    return cfg, trained.parameters(params, R.param_shapes(cfg), name)


def _accuracy(params, images, labels, cfg, **change) -> float:
    """The held-out accuracy of a model read otherwise, for a diagnosis (the judged one is ``R.evaluate``'s)."""
    with torch.no_grad():
        logits = torch.cat([_logits(params, x.double(), cfg, **change) for x in images.split(250)])
    return float((logits.argmax(-1) == labels).double().mean())


def check_recipe(learner, name: str, seed: int | None = None) -> None:
    """Train the learner's recipe in their kernel on relabelled digits, then judge its held-out accuracy here."""
    train, train_y, held, held_y = relabelled(seed)
    case = Case((train, train_y, 10, GRADING_STEPS, 0 if seed is None else seed % 1000),
                label=f"{len(train):,} training digits, num_classes=10, steps={GRADING_STEPS}")
    cfg, params = recipe_output(call_learner(learner, case, name), name)
    accuracy = R.evaluate(params, held, held_y, cfg)[1]  # exercise 5's evaluation, the reference's
    if accuracy >= BAR:
        return
    p64 = {k: v.double() for k, v in params.items()}
    why = ""
    if max(_accuracy(p64, held, held_y, cfg, pool="mean"), _accuracy(p64, held, held_y, cfg, pool="all")) > \
            accuracy + 0.2:
        why = (" It does much better when the head reads the mean of the tokens: this ViT classifies the class "
               "token's output, norm(z)[:, 0].")
    elif accuracy < 0.2:
        why = (" That is chance: did the parameters you return change during training (the optimizer given these "
               "tensors, each update applied), and are a batch's labels its images' labels?")
    raise ExerciseFailure(
        f"{name}'s model classifies {accuracy:.1%} of the held-out digits correctly after {GRADING_STEPS} updates; "
        f"the recipe must reach {BAR:.0%} (a guess is right 10% of the time).{why}")


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 11x-capstone-vit run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("11x-capstone-vit", "capstone_vit.ipynb", (
    Exercise("count_params", 1, (
        Comparison(R.param_count, count_cases, seed=301, mistakes=COUNT_MISTAKES, layouts=False),
    )),
    Exercise("vit_logits", 5, (
        Comparison(R.vit_logits, vit_cases, seed=302, mistakes=VIT_MISTAKES),
    )),
    Exercise("augment", 2, (
        Comparison(reference_augment_result, augment_cases, seed=303, mistakes=AUGMENT_MISTAKES, layouts=False),
    ), adapt=augment_result, function=R.augment),
    Exercise("train_loop", 4, (
        Comparison(reference_train_result, train_cases, seed=304, mistakes=TRAIN_MISTAKES, layouts=False),
    ), adapt=train_result, function=R.train_loop),
    Exercise("evaluate", 2, (
        Comparison(R.evaluate, eval_cases, seed=305, mistakes=EVAL_MISTAKES, layouts=False),
    )),
    Exercise("train_vit", 4, (check_recipe,), function=R.train_vit),
), chapter="11-swin")
