"""Random cases and likely mistakes for the GPT capstone (after chapter 08): a whole GPT from its parts, trained.

The parts are compared with :mod:`course_lib.lm_recipe` as every exercise is;
the recipe is judged on what the model learns.

* ``count_params(cfg)``: the learner's prediction of the model's size, as a formula (an integer).
* ``gpt_logits(params, ids, cfg)``: the forward pass from a dict of tensors with DecoderLM's
  state-dict names (float64 cases, grouped-query attention, gains far from 1).
* ``get_batch(ids, batch_size, block_size, generator)``: one ``torch.randint`` draw of the starts.
* ``lr_at(step, max_lr, warmup_steps, max_steps, min_lr)``: warm-up and cosine (a Python float).
* ``train_loop(params, ids, cfg, hp, generator)``: a few float64 updates of a tiny model compared
  loss by loss and parameter by parameter (:func:`train_result` runs it on copies).
* ``evaluate(params, ids, cfg, block_size)``: every target of a held-out stream counted once.
* ``train_gpt(train_ids, vocab_size, steps, seed)``: the learner's whole recipe, run in the grading
  kernel on standard-library code whose token ids are relabelled by a permutation drawn from the
  learner's seed, then judged here on held-out files the kernel never sees (:func:`check_recipe`).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib import lm_recipe as R
from grader import trained
from grader.cases import Case, randint, randn
from grader.checker import call_learner
from grader.diagnosis import Mistake
from grader.failures import ExerciseFailure
from grader.registry import Assignment, Comparison, Exercise


def _cfg(g: torch.Generator, vocab: int | None = None) -> dict:
    n_heads = [1, 2, 4][randint(g, 0, 3)]
    divisors = [h for h in (1, 2, 4) if n_heads % h == 0]
    n_kv = divisors[randint(g, 0, 3) % len(divisors)]
    head_dim = [2, 4][randint(g, 0, 2)]
    return dict(vocab_size=vocab or randint(g, 5, 40), dim=n_heads * head_dim, n_layers=randint(g, 1, 3),
                n_heads=n_heads, n_kv_heads=n_kv, mlp_hidden=randint(g, 3, 20),
                rope_base=[10000.0, 100.0, 10.0][randint(g, 0, 3)], norm_eps=[1e-5, 1e-6][randint(g, 0, 2)])


def _cfg_label(cfg: Mapping) -> str:
    return ", ".join(f"{k}={cfg[k]}" for k in R.CONFIG_KEYS)


def _params(g: torch.Generator, cfg: Mapping, grad: bool = False) -> dict[str, Tensor]:
    """float64 parameters large enough that every part shows: matrices N(0, 0.5^2 / fan-in * 4), gains in [0.5, 2]."""
    out = {}
    for name, shape in R.param_shapes(cfg).items():
        if len(shape) == 1:
            p = 0.5 + 1.5 * torch.rand(shape, generator=g, dtype=torch.float64)
        else:
            p = randn(g, shape, scale=1.0 if name == "tok_emb.weight" else 1.2 * shape[1] ** -0.5)
        out[name] = p.requires_grad_(grad)
    return out


# --------------------------------------------------------------------------
# Exercise: predict, then run: the number of parameters
# --------------------------------------------------------------------------
def count_cases(seed: int = 0, n: int = 24) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        cfg = _cfg(g, vocab=[50257, 4097, 256, 32000][i % 4] if i % 3 == 0 else None)
        if i % 5 == 1:
            cfg |= dict(dim=768, n_heads=12, n_kv_heads=4, mlp_hidden=2048, n_layers=12)
        cases.append(Case((cfg,), label=_cfg_label(cfg)))
    return cases


def _count(cfg, head=False, norms=True, final_norm=True, kv_full=False, mlp_mats=3, embedding=True):
    d, L, h = cfg["dim"], cfg["n_layers"], cfg["mlp_hidden"]
    kv = d if kv_full else cfg["n_kv_heads"] * d // cfg["n_heads"]
    per_layer = 2 * d * d + 2 * d * kv + mlp_mats * d * h + (2 * d if norms else 0)
    return (cfg["vocab_size"] * d * (int(embedding) + int(head)) + L * per_layer
            + (d if final_norm and norms else 0))


COUNT_MISTAKES = [
    Mistake("the head is counted twice: it is the embedding matrix (tied), counted once.",
            lambda cfg: _count(cfg, head=True)),
    Mistake("the RMSNorm gains are left out: each block has two vectors of dim, and the final norm one more.",
            lambda cfg: _count(cfg, norms=False)),
    Mistake("the final RMSNorm's gain (dim numbers) is left out.", lambda cfg: _count(cfg, final_norm=False)),
    Mistake("the keys and values are counted at full width: with n_kv_heads key/value heads each projection "
            "has n_kv_heads * dim / n_heads outputs.", lambda cfg: _count(cfg, kv_full=True)),
    Mistake("the MLP is counted with two matrices: SwiGLU has three (gate, up and down).",
            lambda cfg: _count(cfg, mlp_mats=2)),
    Mistake("the embedding is left out: V x dim numbers, the largest matrix of a small model.",
            lambda cfg: _count(cfg, embedding=False)),
]


# --------------------------------------------------------------------------
# Exercise: the forward pass
# --------------------------------------------------------------------------
def gpt_cases(seed: int = 0, n: int = 14) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        cfg = _cfg(g)
        if i == 0:
            cfg |= dict(n_heads=4, n_kv_heads=2, dim=8, n_layers=2)
        params = _params(g, cfg)
        batch, seq = randint(g, 1, 4), randint(g, 1, 10) if i else 6
        ids = torch.randint(cfg["vocab_size"], (batch, seq), generator=g)
        cases.append(Case((params, ids, cfg), label=f"ids {tuple(ids.shape)}, {_cfg_label(cfg)}"))
    return cases


def _rope(x: Tensor, base: float, layout: str = "half") -> Tensor:
    if layout == "none":
        return x
    n, hd = x.shape[-2], x.shape[-1]
    inv = base ** (-torch.arange(0, hd, 2, dtype=x.dtype) / hd)
    ang = torch.arange(n, dtype=x.dtype)[:, None] * inv
    if layout == "interleaved":
        ang = ang.repeat_interleave(2, dim=-1)
        pairs = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
        return x * ang.cos() + pairs * ang.sin()
    ang = torch.cat([ang, ang], dim=-1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * ang.cos() + torch.cat([-x2, x1], dim=-1) * ang.sin()


def _rms(x, w, eps, gain=True):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y * w if gain else y


def _logits(params, ids, cfg, causal=True, rope="half", groups="interleave", final_norm=True, post_ln=False,
            emb_scale=False, scaled=True, gains=True, rope_values=False):
    """The forward pass with one thing changed: the variants of the likely mistakes."""
    eps, base, H, K = cfg["norm_eps"], cfg["rope_base"], cfg["n_heads"], cfg["n_kv_heads"]
    emb = params["tok_emb.weight"]
    h = emb[ids] * (cfg["dim"] ** 0.5 if emb_scale else 1.0)
    norm = lambda x, w: _rms(x, w, eps, gains)  # noqa: E731
    heads = lambda t, k: t.unflatten(-1, (k, -1)).transpose(-3, -2)  # noqa: E731
    n = ids.shape[-1]
    for i in range(cfg["n_layers"]):
        p = R.params_of_block(params, i)
        x = h if post_ln else norm(h, p("attn_res.norm.weight"))
        q = _rope(heads(x @ p("attn.q_proj.weight").T, H), base, rope)
        k = _rope(heads(x @ p("attn.k_proj.weight").T, K), base, rope)
        v = heads(x @ p("attn.v_proj.weight").T, K)
        v = _rope(v, base, rope) if rope_values else v
        if groups == "interleave":
            k, v = k.repeat_interleave(H // K, dim=-3), v.repeat_interleave(H // K, dim=-3)
        else:
            k, v = k.repeat(1, H // K, 1, 1), v.repeat(1, H // K, 1, 1)
        s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scaled else 1.0)
        if causal:
            s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        a = (s.softmax(-1) @ v).transpose(-3, -2).flatten(-2) @ p("attn.out_proj.weight").T
        h = norm(h + a, p("attn_res.norm.weight")) if post_ln else h + a
        x = h if post_ln else norm(h, p("mlp_res.norm.weight"))
        m = (F.silu(x @ p("mlp.gate_proj.weight").T) * (x @ p("mlp.up_proj.weight").T)) @ p("mlp.down_proj.weight").T
        h = norm(h + m, p("mlp_res.norm.weight")) if post_ln else h + m
    return (norm(h, params["norm.weight"]) if final_norm else h) @ emb.T


GPT_MISTAKES = [
    Mistake("the attention is not causal: position t must see only the tokens at or before t, or the model reads "
            "the token it is asked to predict.", functools.partial(_logits, causal=False)),
    Mistake("no rotary embedding: RoPE turns q and k by their position in every layer; without it the model "
            "cannot tell the order of the tokens.", functools.partial(_logits, rope="none")),
    Mistake("RoPE pairs neighbouring features (2i, 2i + 1): the course's layout pairs feature i with i + head_dim/2.",
            functools.partial(_logits, rope="interleaved")),
    Mistake("RoPE is applied to the values too: it rotates queries and keys only.",
            functools.partial(_logits, rope_values=True)),
    Mistake("the key/value heads are shared in the wrong order: query head j uses key/value head "
            "j // (n_heads / n_kv_heads) (repeat_interleave on the head axis), not j % n_kv_heads (repeat).",
            functools.partial(_logits, groups="repeat")),
    Mistake("the scores are not scaled by 1/sqrt(head_dim).", functools.partial(_logits, scaled=False)),
    Mistake("the final RMSNorm before the head is missing.", functools.partial(_logits, final_norm=False)),
    Mistake("this is a post-LN model: the norms go before each sublayer, x + f(norm(x)), not after the sum.",
            functools.partial(_logits, post_ln=True, final_norm=False)),
    Mistake("the embeddings are scaled by sqrt(dim): this model (Llama's) does not scale them.",
            functools.partial(_logits, emb_scale=True)),
    Mistake("the RMSNorm gains are not applied: multiply each normalized vector by its norm's weight.",
            functools.partial(_logits, gains=False)),
]


# --------------------------------------------------------------------------
# Exercise: a batch of windows
# --------------------------------------------------------------------------
def batch_cases(seed: int = 0, n: int = 16) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        length, block = randint(g, 12, 200), randint(g, 1, 11)
        ids = torch.randint(1000, (length,), generator=g, dtype=[torch.int64, torch.int32][i % 2])
        batch = randint(g, 1, 7)
        gen = torch.Generator().manual_seed(randint(g, 0, 2**31 - 1))
        cases.append(Case((ids, batch, block, gen),
                          label=f"{length} {str(ids.dtype).removeprefix('torch.')} ids, batch_size={batch}, "
                                f"block_size={block}"))
    return cases


def batch_result(get_batch: Callable) -> Callable:
    """The learner's ``get_batch`` on a copy of the generator: the case's own stays as it was drawn, so the
    check that no input changed holds, and every variant draws from the same state."""
    def result(ids, batch_size, block_size, generator):
        fresh = torch.Generator()
        fresh.set_state(generator.get_state())
        return get_batch(ids, batch_size, block_size, fresh)
    return result


def reference_batch_result(ids, batch_size, block_size, generator):
    return batch_result(R.get_batch)(ids, batch_size, block_size, generator)


def _windows(ids, starts, block, shift=1):
    return (torch.stack([ids[s:s + block] for s in starts.tolist()]).long(),
            torch.stack([ids[s + shift:s + shift + block] for s in starts.tolist()]).long())


def _starts(ids, batch, block, g, high=None):
    return torch.randint(len(ids) - block if high is None else high, (batch,), generator=g)


BATCH_MISTAKES = [
    Mistake("the targets are not shifted: y[b, t] is the token after x[b, t], the window one position later.",
            lambda ids, b, k, g: _windows(ids, _starts(ids, b, k, g), k, shift=0)),
    Mistake("the targets are shifted the wrong way: y starts one token after x, not before.",
            lambda ids, b, k, g: _windows(ids, _starts(ids, b, k, g, len(ids) - k - 1) + 1, k, shift=-1)),
    Mistake("the starts are drawn from n - block_size - 1 positions: torch.randint(n - block_size, ...) is the "
            "range that keeps every target inside ids.",
            lambda ids, b, k, g: _windows(ids, _starts(ids, b, k, g, len(ids) - k - 1), k)),
    Mistake("the inputs and targets are swapped: x is the window, y the window one token later.",
            lambda ids, b, k, g: tuple(reversed(_windows(ids, _starts(ids, b, k, g), k)))),
]


def check_int64(learner, name: str, seed: int | None = None) -> None:
    """The windows are int64 whatever the stream's integer dtype: cross_entropy takes int64 targets."""
    g = torch.Generator().manual_seed(203 if seed is None else seed)
    ids = torch.randint(100, (40,), generator=g, dtype=torch.int32)
    case = Case((ids, 3, 5, torch.Generator().manual_seed(1)), label="40 int32 ids, batch_size=3, block_size=5")
    out = call_learner(learner, case, name)
    dtypes = [getattr(t, "dtype", None) for t in out] if isinstance(out, (tuple, list)) else [None]
    if any(d != torch.int64 for d in dtypes):
        shown = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ExerciseFailure(f"{name} returned x and y as {shown} ({case.label}): return int64 (.long()), the "
                              "dtype cross_entropy takes for its targets and an embedding for its indices.")


# --------------------------------------------------------------------------
# Exercise: the learning-rate schedule
# --------------------------------------------------------------------------
def lr_cases(seed: int = 0, n: int = 40) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        total = randint(g, 2, 200)
        warm = [0, 1, randint(g, 0, total + 1), total // 10][i % 4]
        step = [0, warm, total, total + randint(g, 1, 50), randint(g, 0, total + 1), max(warm - 1, 0),
                warm + 1][i % 7]
        max_lr = float(torch.empty(()).uniform_(1e-4, 1e-2, generator=g))
        min_lr = [0.0, max_lr / 10, max_lr][i % 3 if i % 9 else 2]
        cases.append(Case((step, max_lr, warm, total, min_lr),
                          label=f"step={step}, max_lr={max_lr:.4g}, warmup_steps={warm}, max_steps={total}, "
                                f"min_lr={min_lr:.4g}"))
    return cases


def _lr(step, max_lr, warm, total, min_lr, plus_one=False, floor=True, span="after", shape="cos", warm_on=True):
    if warm_on and warm > 0 and step <= warm:
        return max_lr * ((step + 1) if plus_one else step) / warm
    if step >= total:
        return min_lr if floor else 0.0
    p = (step - warm) / (total - warm) if span == "after" else step / total
    lo = min_lr if floor else 0.0
    return lo + (max_lr - lo) * ((1 + math.cos(math.pi * p)) / 2 if shape == "cos" else 1 - p)


LR_MISTAKES = [
    Mistake("the warm-up is missing: the rate rises linearly from 0 at step 0 to max_lr at step warmup_steps.",
            functools.partial(_lr, warm_on=False)),
    Mistake("the warm-up is one step ahead: lr(t) = max_lr * t / warmup_steps, which is 0 at t = 0.",
            functools.partial(_lr, plus_one=True)),
    Mistake("the cosine decays to 0: it ends at min_lr, lr = min_lr + (max_lr - min_lr) * (1 + cos(pi p)) / 2.",
            functools.partial(_lr, floor=False)),
    Mistake("the cosine's progress counts from step 0: p = (t - warmup_steps) / (max_steps - warmup_steps).",
            functools.partial(_lr, span="all")),
    Mistake("the decay is linear: after the warm-up it follows half a cosine.", functools.partial(_lr, shape="lin")),
]


# --------------------------------------------------------------------------
# Exercise: the training loop
# --------------------------------------------------------------------------
def train_result(train_loop: Callable) -> Callable:
    """The learner's in-place loop as a function of its result: ``(losses, parameters after)``, on copies.

    Inline, every line: the guards let this adapter's own code through, not what it calls (a generator
    copied by ``copy.deepcopy`` would go through the grader's own reducer)."""
    def result(params, ids, cfg, hp, generator):
        params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
        fresh = torch.Generator()
        fresh.set_state(generator.get_state())
        losses = train_loop(params, ids, dict(cfg), dict(hp), fresh)
        return losses, [p.detach().clone() for p in params.values()]
    return result


def reference_train_result(params, ids, cfg, hp, generator):
    return train_result(R.train_loop)(params, ids, cfg, hp, generator)


def train_cases(seed: int = 0, n: int = 6) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        cfg = dict(vocab_size=randint(g, 9, 20), dim=8, n_layers=1, n_heads=2, n_kv_heads=[1, 2][i % 2],
                   mlp_hidden=randint(g, 6, 16), rope_base=10000.0, norm_eps=1e-5)
        params = _params(g, cfg)
        ids = torch.randint(cfg["vocab_size"], (randint(g, 30, 80),), generator=g)
        steps = randint(g, 4, 8)
        hp = dict(steps=steps, batch_size=randint(g, 2, 4), block_size=randint(g, 3, 7),
                  max_lr=[0.05, 0.02, 0.1][i % 3], min_lr=[0.0, 0.005][i % 2], warmup_steps=[2, 0, 3][i % 3],
                  weight_decay=[0.1, 0.5, 0.0][i % 3], max_norm=[0.5, 100.0, 2.0][i % 3])
        gen = torch.Generator().manual_seed(randint(g, 0, 2**31 - 1))
        cases.append(Case((params, ids, cfg, hp, gen), label=f"{len(ids)} ids, hp {hp}, {_cfg_label(cfg)}"))
    return cases


def _loop(params, ids, cfg, hp, generator, zero_grad=True, clip="before", schedule="step", fresh_opt=False,
          decay=True, betas=R.BETAS, optimizer="adamw"):
    """The training loop with one thing changed: the variants of the likely mistakes."""
    params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    fresh = torch.Generator()
    fresh.set_state(generator.get_state())
    generator = fresh
    make = lambda: (torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam)(  # noqa: E731
        list(params.values()), lr=hp["max_lr"], betas=betas, weight_decay=hp["weight_decay"] if decay else 0.01)
    opt, losses = make(), []
    with torch.enable_grad():
        for step in range(1, hp["steps"] + 1):
            if fresh_opt:
                opt = make()
            x, y = R.get_batch(ids, hp["batch_size"], hp["block_size"], generator)
            loss = F.cross_entropy(R.gpt_logits(params, x, cfg).flatten(0, 1), y.flatten())
            if zero_grad:
                opt.zero_grad()
            loss.backward()
            if clip == "before":
                R.clip_global_norm(params.values(), hp["max_norm"])
            t = {"step": step, "zero": step - 1, "none": None}[schedule]
            for group in opt.param_groups:
                group["lr"] = hp["max_lr"] if t is None else R.lr_at(t, hp["max_lr"], hp["warmup_steps"], hp["steps"],
                                                                     hp["min_lr"])
            opt.step()
            losses.append(loss.item())
    return losses, [p.detach().clone() for p in params.values()]


TRAIN_MISTAKES = [
    Mistake("the gradients are never zeroed: each backward pass adds to the last one's, so every update uses the "
            "sum of all the gradients so far (optimizer.zero_grad() before backward).",
            functools.partial(_loop, zero_grad=False)),
    Mistake("the gradients are not clipped before the step: when their global norm exceeds max_norm, scale them "
            "all by max_norm / (norm + 1e-6) between backward and opt.step() (clipping after the step changes "
            "nothing: the next update zeroes them).", functools.partial(_loop, clip="never")),
    Mistake("the learning rate stays at max_lr: set each parameter group's lr to lr_at(step, ...) before the step.",
            functools.partial(_loop, schedule="none")),
    Mistake("the schedule counts the updates from 0: update s = 1 .. steps uses lr_at(s, ...), so the first "
            "update is not wasted at a rate of 0.", functools.partial(_loop, schedule="zero")),
    Mistake("a new optimizer is made at every update: AdamW's moment estimates must carry over from step to step.",
            functools.partial(_loop, fresh_opt=True)),
    Mistake("the weight decay is AdamW's default (0.01): pass weight_decay=hp['weight_decay'].",
            functools.partial(_loop, decay=False)),
    Mistake("the betas are PyTorch's defaults (0.9, 0.999): the recipe uses betas=(0.9, 0.95).",
            functools.partial(_loop, betas=(0.9, 0.999))),
    Mistake("this is Adam with an L2 penalty (torch.optim.Adam): AdamW decays the weights apart from the "
            "gradient.", functools.partial(_loop, optimizer="adam")),
]


# --------------------------------------------------------------------------
# Exercise: held-out evaluation
# --------------------------------------------------------------------------
def eval_cases(seed: int = 0, n: int = 10) -> list[Case]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    for i in range(n):
        cfg = _cfg(g)
        params = _params(g, cfg)
        block = randint(g, 2, 9)
        length = block * randint(g, 1, 6) + 1 + [0, randint(g, 1, block)][i % 2] + (block if i % 3 == 0 else 0)
        ids = torch.randint(cfg["vocab_size"], (length,), generator=g)
        cases.append(Case((params, ids, cfg, block), label=f"{length} ids, block_size={block}, {_cfg_label(cfg)}"))
    return cases


def _eval(params, ids, cfg, block, stride=None, tail=False, shift=1, per_window=False):
    stride = stride or block
    starts = list(range(0, len(ids) - block - (shift if shift else 0) + 1, stride)) if not tail else \
        list(range(0, len(ids) - 1, stride))
    total, count, means = 0.0, 0, []
    for s in starts:
        w = ids[s:s + block + 1].long()[None]
        logits = R.gpt_logits(params, w[:, :-1] if shift else w[:, :-1], cfg)
        target = w[:, 1:] if shift else w[:, :-1]
        if target.shape[1] == 0:
            continue
        nll = F.cross_entropy(logits[0, :target.shape[1]], target[0], reduction="sum").item()
        total, count = total + nll, count + target.shape[1]
        means.append(nll / target.shape[1])
    return sum(means) / len(means) if per_window else total / count


EVAL_MISTAKES = [
    Mistake("the windows do not overlap: window w starts at w * block_size and holds block_size + 1 tokens, so the "
            "first token of each window is the last target of the one before.",
            lambda p, i, c, b: _eval(p, i, c, b, stride=b + 1)),
    Mistake("the tail is scored too: only whole windows of block_size + 1 tokens count.",
            lambda p, i, c, b: _eval(p, i, c, b, tail=True)),
    Mistake("the targets are not shifted: each position is scored on the token after it.",
            lambda p, i, c, b: _eval(p, i, c, b, shift=0)),
    Mistake("the windows' means are averaged: a short window would weigh as much as a whole one; average over "
            "every target.", lambda p, i, c, b: _eval(p, i, c, b, tail=True, per_window=True)),
]


# --------------------------------------------------------------------------
# Exercise: the whole recipe, judged on what it learns
# --------------------------------------------------------------------------
#: updates the grading run asks for (each about 25 ms of CPU with the recipe's model)
GRADING_STEPS = 300
#: characters of standard-library code to train on, and of held-out files to judge on
TRAIN_CHARS, HELD_OUT_CHARS = 800_000, 120_000
#: the held-out loss (nats per token) a recipe must reach in GRADING_STEPS updates (tools/capstone_calibration.py)
BAR = 6.3
#: the largest model the judge evaluates
MAX_PARAMS, MAX_LAYERS = 2_000_000, 8
BLOCK = 64


def encode_documents(documents, chars: int) -> Tensor:
    """``(n,)`` int32: the first ``documents``, whole, until ``chars`` characters are taken, in the corpus's BPE
    with ``<|endoftext|>`` after each (about a second per million characters)."""
    from course_lib.datasets import python_stdlib

    tok = python_stdlib.tokenizer()
    eot = tok.special_tokens[python_stdlib.EOT]
    ids: list[int] = []
    taken = 0
    for doc in documents:
        if taken >= chars:
            break
        ids += tok.encode_ordinary(doc) + [eot]
        taken += len(doc)
    return torch.tensor(ids, dtype=torch.int32)


@functools.cache
def corpus() -> tuple[Tensor, Tensor, int]:
    """``(train ids, held-out ids, vocab_size)``: the first files of each split of the standard library."""
    from course_lib.datasets import python_stdlib

    return (encode_documents(python_stdlib.documents("train"), TRAIN_CHARS),
            encode_documents(python_stdlib.documents("held_out"), HELD_OUT_CHARS), python_stdlib.VOCAB_SIZE + 1)


def relabelled(seed: int | None) -> tuple[Tensor, Tensor, int]:
    """The corpus with its token ids permuted by a permutation drawn from ``seed`` (the learner's)."""
    train, held, vocab = corpus()
    perm = torch.randperm(vocab, generator=torch.Generator().manual_seed(7 if seed is None else seed))
    return perm[train.long()].to(torch.int32), perm[held.long()].to(torch.int32), vocab


def recipe_output(out, vocab: int, name: str) -> tuple[dict, dict[str, Tensor]]:
    """The learner's ``(cfg, params)``, checked against the contract, or a failure that names what is wrong."""
    cfg, params = trained.pair(out, name)
    cfg = trained.config(cfg, R.CONFIG_KEYS, ("rope_base", "norm_eps"), MAX_PARAMS, name)
    if cfg["vocab_size"] != vocab:
        raise ExerciseFailure(f"{name}'s cfg has vocab_size={cfg['vocab_size']}: the text has {vocab} token ids.")
    if cfg["dim"] % cfg["n_heads"] or cfg["n_heads"] % cfg["n_kv_heads"] or (cfg["dim"] // cfg["n_heads"]) % 2:
        raise ExerciseFailure(f"{name}'s cfg ({_cfg_label(cfg)}): n_heads must divide dim into an even head "
                              "width, and n_kv_heads must divide n_heads.")
    if cfg["n_layers"] > MAX_LAYERS or R.param_count(cfg) > MAX_PARAMS:
        raise ExerciseFailure(f"{name}'s model has {cfg['n_layers']} layers and {R.param_count(cfg):,} parameters: "
                              f"the grader evaluates at most {MAX_LAYERS} layers and {MAX_PARAMS:,} parameters.")
    return cfg, trained.parameters(params, R.param_shapes(cfg), name)


def _held_out_loss(params, ids, cfg, causal=True, shift=1) -> float:
    """The held-out loss of a model changed for a diagnosis: read without the causal mask, or scored on the
    token each position reads (the judged loss itself is the reference's ``evaluate``)."""
    n = (len(ids) - 1) // BLOCK
    w = torch.stack([ids[i * BLOCK: i * BLOCK + BLOCK + 1] for i in range(n)]).long()
    total = 0.0
    with torch.no_grad():
        for chunk in w.split(32):
            logits = R.gpt_logits(params, chunk[:, :-1], cfg) if causal else _logits(params, chunk[:, :-1], cfg,
                                                                                     causal=False)
            target = chunk[:, 1:] if shift else chunk[:, :-1]
            total += F.cross_entropy(logits.flatten(0, 1).float(), target.flatten(), reduction="sum").item()
    return total / (n * BLOCK)


def check_recipe(learner, name: str, seed: int | None = None) -> None:
    """Train the learner's recipe in their kernel on relabelled code, then judge its held-out loss here."""
    train, held, vocab = relabelled(seed)
    case = Case((train, vocab, GRADING_STEPS, 0 if seed is None else seed % 1000),
                label=f"{len(train):,} training tokens, vocab_size={vocab}, steps={GRADING_STEPS}")
    cfg, params = recipe_output(call_learner(learner, case, name), vocab, name)
    loss = R.evaluate(params, held, cfg, BLOCK)  # exercise 6's evaluation, the reference's
    if loss <= BAR:
        return
    unigram = _unigram_loss(train, held, vocab)
    why = ""
    if loss > math.log(vocab) and _held_out_loss(params, held, cfg, shift=0) < unigram - 1.0:
        why = (" The model predicts the token it reads, not the next one: are the targets shifted by one "
               "(y = the window one token later)?")
    elif _held_out_loss(params, held, cfg, causal=False) < loss - 1.0:
        why = (" The model does much better when it may look ahead: was it trained without the causal mask, "
               "reading the tokens it was asked to predict?")
    elif loss > math.log(vocab) - 0.5:
        why = (" That is no better than a uniform guess over the vocabulary: did the parameters you return change "
               "during training (the optimizer given these tensors, each update applied)?")
    raise ExerciseFailure(
        f"{name}'s model reaches a held-out loss of {loss:.3f} nats per token after {GRADING_STEPS} updates; the "
        f"recipe must reach {BAR} or less (a model that knows only how often each token occurs reaches "
        f"{unigram:.2f}, a uniform guess {math.log(vocab):.2f}).{why}")


def _unigram_loss(train: Tensor, held: Tensor, vocab: int) -> float:
    counts = torch.bincount(train.long(), minlength=vocab).double() + 1.0
    logp = (counts / counts.sum()).log()
    return float(-logp[held.long()].mean())


# --------------------------------------------------------------------------
# The registry entry: what the hidden tests of 08x-capstone-gpt run
# --------------------------------------------------------------------------
ASSIGNMENT = Assignment("08x-capstone-gpt", "capstone_gpt.ipynb", (
    Exercise("count_params", 1, (
        Comparison(R.param_count, count_cases, seed=201, mistakes=COUNT_MISTAKES, layouts=False),
    )),
    Exercise("gpt_logits", 5, (
        Comparison(R.gpt_logits, gpt_cases, seed=202, mistakes=GPT_MISTAKES),
    )),
    Exercise("get_batch", 2, (
        Comparison(reference_batch_result, batch_cases, seed=203, mistakes=BATCH_MISTAKES, layouts=False),
        check_int64,
    ), adapt=batch_result, function=R.get_batch),
    Exercise("lr_at", 2, (
        Comparison(R.lr_at, lr_cases, seed=204, mistakes=LR_MISTAKES, layouts=False),
    )),
    Exercise("train_loop", 4, (
        Comparison(reference_train_result, train_cases, seed=205, mistakes=TRAIN_MISTAKES, layouts=False),
    ), adapt=train_result, function=R.train_loop),
    Exercise("evaluate", 2, (
        Comparison(R.evaluate, eval_cases, seed=206, mistakes=EVAL_MISTAKES, layouts=False),
    )),
    Exercise("train_gpt", 4, (check_recipe,), function=R.train_gpt),
), chapter="08-efficient-attention")
