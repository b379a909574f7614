"""Plausible wrong implementations for the GPT capstone, 08x-capstone-gpt, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/08x-capstone-gpt/capstone_gpt.ipynb with ``source``; the hidden tests
of that exercise must fail on it (tests/grading/test_catalogues.py).
``mistake`` says what a learner got wrong, in the words of a reviewer. The
recipe's entries (``train_gpt``) train for real, as grading does: each costs
the seconds of one grading run.
"""

# the solution's forward pass with one line to change, for the gpt_logits entries
_GPT = '''
def gpt_logits(params, ids, cfg):
    n_heads, n_kv, eps = cfg["n_heads"], cfg["n_kv_heads"], cfg["norm_eps"]
    emb = params["tok_emb.weight"]
    h = EMBED
    b, n, d = h.shape

    def heads(t, count):
        return t.reshape(b, n, count, -1).transpose(1, 2)

    for i in range(cfg["n_layers"]):
        p = f"blocks.{i}."
        x = rms_norm(h, params[p + "attn_res.norm.weight"], eps)
        q = rope(heads(x @ params[p + "attn.q_proj.weight"].T, n_heads), cfg["rope_base"])
        k = rope(heads(x @ params[p + "attn.k_proj.weight"].T, n_kv), cfg["rope_base"])
        v = heads(x @ params[p + "attn.v_proj.weight"].T, n_kv)
        k, v = GROUP
        a = (ATTEND).transpose(1, 2).reshape(b, n, d)
        h = h + a @ params[p + "attn.out_proj.weight"].T
        x = rms_norm(h, params[p + "mlp_res.norm.weight"], eps)
        h = h + swiglu(x, params[p + "mlp.gate_proj.weight"], params[p + "mlp.up_proj.weight"],
                       params[p + "mlp.down_proj.weight"])
    return FINAL @ emb.T
'''
_RIGHT_GPT = dict(EMBED="emb[ids]", GROUP="k.repeat_interleave(n_heads // n_kv, dim=1), "
                  "v.repeat_interleave(n_heads // n_kv, dim=1)", ATTEND="causal_attention(q, k, v)",
                  FINAL='rms_norm(h, params["norm.weight"], eps)')


def _gpt(**change):
    source = _GPT
    for key, value in {**_RIGHT_GPT, **change}.items():
        source = source.replace(key, value)
    return source


def _loop(change: dict[str, str]) -> str:
    source = '''
def train_loop(params, ids, cfg, hp, generator):
    opt = torch.optim.AdamW(list(params.values()), lr=hp["max_lr"], betas=(0.9, 0.95),
                            weight_decay=hp["weight_decay"])
    losses = []
    for step in range(1, hp["steps"] + 1):
        x, y = get_batch(ids, hp["batch_size"], hp["block_size"], generator)
        logits = gpt_logits(params, x, cfg)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        CLIP_BEFORE
        for group in opt.param_groups:
            group["lr"] = lr_at(step, hp["max_lr"], hp["warmup_steps"], hp["steps"], hp["min_lr"])
        opt.step()
        CLIP_AFTER
        losses.append(loss.item())
    return losses
'''
    clip = '''with torch.no_grad():
            grads = [p.grad for p in params.values() if p.grad is not None]
            norm = torch.sqrt(sum((g * g).sum() for g in grads))
            if norm > hp["max_norm"]:
                for g in grads:
                    g.mul_(hp["max_norm"] / (norm + 1e-6))'''
    change = {"CLIP_BEFORE": clip, "CLIP_AFTER": "", **change}
    for key, value in change.items():
        source = source.replace(key, value)
    return source


def _recipe(body: str) -> str:
    return '''
def train_gpt(train_ids, vocab_size, steps, seed):
    cfg = dict(RECIPE, vocab_size=vocab_size)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    hp = dict(steps=steps, batch_size=8, block_size=32, max_lr=3e-3, min_lr=1e-3, warmup_steps=20,
              weight_decay=0.1, max_norm=1.0)
''' + body


WRONG = [
    # ------------------------------------------------------------ count_params
    dict(exercise="count_params", diagnosis="Likely mistake: the head is counted twice:",
         mistake="counts an untied output head", source='''
def count_params(cfg):
    d, h = cfg["dim"], cfg["mlp_hidden"]
    kv = cfg["n_kv_heads"] * (d // cfg["n_heads"])
    return 2 * cfg["vocab_size"] * d + cfg["n_layers"] * (2 * d * d + 2 * kv * d + 3 * h * d + 2 * d) + d
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the RMSNorm gains are left out:",
         mistake="forgets every norm gain", source='''
def count_params(cfg):
    d, h = cfg["dim"], cfg["mlp_hidden"]
    kv = cfg["n_kv_heads"] * (d // cfg["n_heads"])
    return cfg["vocab_size"] * d + cfg["n_layers"] * (2 * d * d + 2 * kv * d + 3 * h * d)
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the final RMSNorm's gain",
         mistake="forgets the final norm", source='''
def count_params(cfg):
    d, h = cfg["dim"], cfg["mlp_hidden"]
    kv = cfg["n_kv_heads"] * (d // cfg["n_heads"])
    return cfg["vocab_size"] * d + cfg["n_layers"] * (2 * d * d + 2 * kv * d + 3 * h * d + 2 * d)
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the keys and values are counted at full width",
         mistake="ignores grouped-query attention", source='''
def count_params(cfg):
    d, h = cfg["dim"], cfg["mlp_hidden"]
    return cfg["vocab_size"] * d + cfg["n_layers"] * (4 * d * d + 3 * h * d + 2 * d) + d
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the MLP is counted with two matrices",
         mistake="counts a GELU MLP's two matrices", source='''
def count_params(cfg):
    d, h = cfg["dim"], cfg["mlp_hidden"]
    kv = cfg["n_kv_heads"] * (d // cfg["n_heads"])
    return cfg["vocab_size"] * d + cfg["n_layers"] * (2 * d * d + 2 * kv * d + 2 * h * d + 2 * d) + d
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the embedding is left out",
         mistake="counts the blocks only", source='''
def count_params(cfg):
    d, h = cfg["dim"], cfg["mlp_hidden"]
    kv = cfg["n_kv_heads"] * (d // cfg["n_heads"])
    return cfg["n_layers"] * (2 * d * d + 2 * kv * d + 3 * h * d + 2 * d) + d
'''),
    dict(exercise="count_params", diagnosis="gives a wrong result", mistake="returns a float (a mean over heads)",
         source='''
def count_params(cfg):
    d, h = cfg["dim"], cfg["mlp_hidden"]
    kv = cfg["n_kv_heads"] * d / cfg["n_heads"]
    return cfg["vocab_size"] * d + cfg["n_layers"] * (2 * d * d + 2 * kv * d + 3 * h * d + 2 * d) + d + 0.5
'''),
    # ------------------------------------------------------------ gpt_logits
    dict(exercise="gpt_logits", diagnosis="Likely mistake: the attention is not causal:",
         mistake="attends to every token", source=_gpt(
             ATTEND="((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])).softmax(-1) @ v")),
    dict(exercise="gpt_logits", diagnosis="Likely mistake: the key/value heads are shared in the wrong order:",
         mistake="repeats the key/value stack instead of each head", source=_gpt(
             GROUP="k.repeat(1, n_heads // n_kv, 1, 1), v.repeat(1, n_heads // n_kv, 1, 1)")),
    dict(exercise="gpt_logits", diagnosis="Likely mistake: the final RMSNorm before the head is missing.",
         mistake="skips the final norm", source=_gpt(FINAL="h")),
    dict(exercise="gpt_logits", diagnosis="Likely mistake: the embeddings are scaled by sqrt(dim):",
         mistake="scales the embeddings as the 2017 Transformer does",
         source=_gpt(EMBED="emb[ids] * math.sqrt(emb.shape[1])")),
    dict(exercise="gpt_logits", diagnosis="Likely mistake: no rotary embedding:", mistake="never calls rope",
         source=_gpt().replace("rope(heads(x @ params[p + \"attn.q_proj.weight\"].T, n_heads), cfg[\"rope_base\"])",
                               "heads(x @ params[p + \"attn.q_proj.weight\"].T, n_heads)").replace(
             "rope(heads(x @ params[p + \"attn.k_proj.weight\"].T, n_kv), cfg[\"rope_base\"])",
             "heads(x @ params[p + \"attn.k_proj.weight\"].T, n_kv)")),
    dict(exercise="gpt_logits", diagnosis="Likely mistake: RoPE is applied to the values too:",
         mistake="turns the values as well", source=_gpt().replace(
             "v = heads(x @ params[p + \"attn.v_proj.weight\"].T, n_kv)",
             "v = rope(heads(x @ params[p + \"attn.v_proj.weight\"].T, n_kv), cfg[\"rope_base\"])")),
    dict(exercise="gpt_logits", diagnosis="Likely mistake: RoPE pairs neighbouring features",
         mistake="writes RoPE with interleaved pairs", source='''
def my_rope(x, base):
    n, d = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    angles = (torch.arange(n, dtype=x.dtype)[:, None] * inv_freq).repeat_interleave(2, dim=-1)
    turned = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * angles.cos() + turned * angles.sin()
''' + _gpt().replace("rope(heads", "my_rope(heads")),
    dict(exercise="gpt_logits", diagnosis="Likely mistake: the scores are not scaled by 1/sqrt(head_dim).",
         mistake="forgets the 1/sqrt(d) scale", source=_gpt(ATTEND='''(q @ k.transpose(-2, -1)).masked_fill(
            ~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf")).softmax(-1) @ v''')),
    dict(exercise="gpt_logits", diagnosis="Likely mistake: this is a post-LN model:",
         mistake="writes the 2017 post-LN block", source='''
def gpt_logits(params, ids, cfg):
    n_heads, n_kv, eps = cfg["n_heads"], cfg["n_kv_heads"], cfg["norm_eps"]
    emb = params["tok_emb.weight"]
    h = emb[ids]
    b, n, d = h.shape
    for i in range(cfg["n_layers"]):
        p = f"blocks.{i}."
        q = rope((h @ params[p + "attn.q_proj.weight"].T).reshape(b, n, n_heads, -1).transpose(1, 2), cfg["rope_base"])
        k = rope((h @ params[p + "attn.k_proj.weight"].T).reshape(b, n, n_kv, -1).transpose(1, 2), cfg["rope_base"])
        v = (h @ params[p + "attn.v_proj.weight"].T).reshape(b, n, n_kv, -1).transpose(1, 2)
        k, v = k.repeat_interleave(n_heads // n_kv, 1), v.repeat_interleave(n_heads // n_kv, 1)
        a = causal_attention(q, k, v).transpose(1, 2).reshape(b, n, d) @ params[p + "attn.out_proj.weight"].T
        h = rms_norm(h + a, params[p + "attn_res.norm.weight"], eps)
        m = swiglu(h, params[p + "mlp.gate_proj.weight"], params[p + "mlp.up_proj.weight"],
                   params[p + "mlp.down_proj.weight"])
        h = rms_norm(h + m, params[p + "mlp_res.norm.weight"], eps)
    return h @ emb.T
'''),
    dict(exercise="gpt_logits", diagnosis="Likely mistake: the RMSNorm gains are not applied:",
         mistake="normalizes without the gains", source='''
def plain_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
''' + _gpt().replace("rms_norm(", "plain_norm(")),
    dict(exercise="gpt_logits", diagnosis="gives wrong values", mistake="merges the heads without transposing back",
         source=_gpt().replace("a = (causal_attention(q, k, v)).transpose(1, 2).reshape(b, n, d)",
                               "a = causal_attention(q, k, v).reshape(b, n, d)")),
    dict(exercise="gpt_logits", diagnosis="gives wrong values", mistake="splits the heads with the head axis last",
         source=_gpt(
        ).replace("return t.reshape(b, n, count, -1).transpose(1, 2)", "return t.reshape(b, count, n, -1)").replace(
        "a = causal_attention(q, k, v).transpose(1, 2)", "a = causal_attention(q, k, v.transpose(-1, -2))")),
    # ------------------------------------------------------------ get_batch
    dict(exercise="get_batch", diagnosis="Likely mistake: the targets are not shifted:",
         mistake="returns the window as its own target", source='''
def get_batch(ids, batch_size, block_size, generator):
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)
    x = torch.stack([ids[s:s + block_size] for s in starts]).long()
    return x, x.clone()
'''),
    dict(exercise="get_batch", diagnosis="Likely mistake: the targets are shifted the wrong way:",
         mistake="takes the targets from the window before", source='''
def get_batch(ids, batch_size, block_size, generator):
    starts = torch.randint(len(ids) - block_size - 1, (batch_size,), generator=generator) + 1
    x = torch.stack([ids[s:s + block_size] for s in starts]).long()
    y = torch.stack([ids[s - 1:s - 1 + block_size] for s in starts]).long()
    return x, y
'''),
    dict(exercise="get_batch", diagnosis="Likely mistake: the starts are drawn from n - block_size - 1",
         mistake="draws one start too few", source='''
def get_batch(ids, batch_size, block_size, generator):
    starts = torch.randint(len(ids) - block_size - 1, (batch_size,), generator=generator)
    x = torch.stack([ids[s:s + block_size] for s in starts]).long()
    y = torch.stack([ids[s + 1:s + 1 + block_size] for s in starts]).long()
    return x, y
'''),
    dict(exercise="get_batch", diagnosis="Likely mistake: the inputs and targets are swapped:",
         mistake="returns (y, x)", source='''
def get_batch(ids, batch_size, block_size, generator):
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)
    x = torch.stack([ids[s:s + block_size] for s in starts]).long()
    y = torch.stack([ids[s + 1:s + 1 + block_size] for s in starts]).long()
    return y, x
'''),
    dict(exercise="get_batch", diagnosis="gives a wrong result", mistake="draws the starts without the generator",
         source='''
def get_batch(ids, batch_size, block_size, generator):
    starts = torch.randint(len(ids) - block_size, (batch_size,))
    x = torch.stack([ids[s:s + block_size] for s in starts]).long()
    y = torch.stack([ids[s + 1:s + 1 + block_size] for s in starts]).long()
    return x, y
'''),
    dict(exercise="get_batch", diagnosis="returned x and y as int32",
         mistake="keeps the ids' dtype (int32 stays int32)",
         source='''
def get_batch(ids, batch_size, block_size, generator):
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator)
    x = torch.stack([ids[s:s + block_size] for s in starts])
    y = torch.stack([ids[s + 1:s + 1 + block_size] for s in starts])
    return x, y
'''),
    # ------------------------------------------------------------ lr_at
    dict(exercise="lr_at", diagnosis="Likely mistake: the warm-up is missing:", mistake="no warm-up", source='''
def lr_at(step, max_lr, warmup_steps, max_steps, min_lr):
    if step >= max_steps:
        return min_lr
    p = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * p)) / 2
'''),
    dict(exercise="lr_at", diagnosis="Likely mistake: the warm-up is one step ahead:",
         mistake="warms up with (step + 1) / warmup_steps", source='''
def lr_at(step, max_lr, warmup_steps, max_steps, min_lr):
    if warmup_steps > 0 and step <= warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return min_lr
    p = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * p)) / 2
'''),
    dict(exercise="lr_at", diagnosis="Likely mistake: the cosine decays to 0:", mistake="ignores min_lr", source='''
def lr_at(step, max_lr, warmup_steps, max_steps, min_lr):
    if warmup_steps > 0 and step <= warmup_steps:
        return max_lr * step / warmup_steps
    if step >= max_steps:
        return 0.0
    p = (step - warmup_steps) / (max_steps - warmup_steps)
    return max_lr * (1 + math.cos(math.pi * p)) / 2
'''),
    dict(exercise="lr_at", diagnosis="Likely mistake: the cosine's progress counts from step 0:",
         mistake="measures the cosine's progress as step / max_steps", source='''
def lr_at(step, max_lr, warmup_steps, max_steps, min_lr):
    if warmup_steps > 0 and step <= warmup_steps:
        return max_lr * step / warmup_steps
    if step >= max_steps:
        return min_lr
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * step / max_steps)) / 2
'''),
    dict(exercise="lr_at", diagnosis="Likely mistake: the decay is linear:", mistake="decays linearly", source='''
def lr_at(step, max_lr, warmup_steps, max_steps, min_lr):
    if warmup_steps > 0 and step <= warmup_steps:
        return max_lr * step / warmup_steps
    if step >= max_steps:
        return min_lr
    return max_lr - (max_lr - min_lr) * (step - warmup_steps) / (max_steps - warmup_steps)
'''),
    dict(exercise="lr_at", diagnosis="raised", mistake="divides by zero without a warm-up", source='''
def lr_at(step, max_lr, warmup_steps, max_steps, min_lr):
    if step <= warmup_steps:
        return max_lr * step / warmup_steps
    if step >= max_steps:
        return min_lr
    p = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * p)) / 2
'''),
    # ------------------------------------------------------------ train_loop
    dict(exercise="train_loop", diagnosis="Likely mistake: the gradients are never zeroed:",
         mistake="forgets zero_grad", source=_loop({"opt.zero_grad()": "pass"})),
    dict(exercise="train_loop", diagnosis="Likely mistake: the gradients are not clipped before the step:",
         mistake="clips after the step", source=_loop({"CLIP_AFTER": "CLIP", "CLIP_BEFORE": "pass"}).replace(
             "        CLIP\n", '''        with torch.no_grad():
            grads = [p.grad for p in params.values() if p.grad is not None]
            norm = torch.sqrt(sum((g * g).sum() for g in grads))
            if norm > hp["max_norm"]:
                for g in grads:
                    g.mul_(hp["max_norm"] / (norm + 1e-6))
''')),
    dict(exercise="train_loop", diagnosis="Likely mistake: the gradients are not clipped before the step:",
         mistake="never clips", source=_loop({"CLIP_BEFORE": "pass"})),
    dict(exercise="train_loop", diagnosis="Likely mistake: the learning rate stays at max_lr:",
         mistake="never sets the schedule's rate", source=_loop({'group["lr"] = lr_at(step, hp["max_lr"], '
                                                                'hp["warmup_steps"], hp["steps"], hp["min_lr"])':
                                                                "pass"})),
    dict(exercise="train_loop", diagnosis="Likely mistake: the schedule counts the updates from 0:",
         mistake="uses lr_at(step - 1)", source=_loop({"lr_at(step,": "lr_at(step - 1,"})),
    dict(exercise="train_loop", diagnosis="Likely mistake: a new optimizer is made at every update:",
         mistake="makes the optimizer inside the loop", source=_loop({
             "        x, y = get_batch(": '''        opt = torch.optim.AdamW(list(params.values()), lr=hp["max_lr"],
                                betas=(0.9, 0.95),
                                weight_decay=hp["weight_decay"])
        x, y = get_batch('''})),
    dict(exercise="train_loop", diagnosis="Likely mistake: the weight decay is AdamW's default",
         mistake="leaves out weight_decay",
         source=_loop({'\n                            weight_decay=hp["weight_decay"])': ")"})),
    dict(exercise="train_loop", diagnosis="Likely mistake: the betas are PyTorch's defaults",
         mistake="keeps AdamW's default betas", source=_loop({"betas=(0.9, 0.95)": "betas=(0.9, 0.999)"})),
    dict(exercise="train_loop", diagnosis="Likely mistake: this is Adam with an L2 penalty",
         mistake="uses torch.optim.Adam", source=_loop({"torch.optim.AdamW": "torch.optim.Adam"})),
    dict(exercise="train_loop", diagnosis="is a torch.Tensor where a float is expected",
         mistake="returns the losses as tensors",
         source=_loop({"losses.append(loss.item())": "losses.append(loss.detach())"})),
    # ------------------------------------------------------------ evaluate
    dict(exercise="evaluate", diagnosis="Likely mistake: the windows do not overlap:",
         mistake="steps block_size + 1 tokens from window to window", source='''
def evaluate(params, ids, cfg, block_size):
    total, count = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(ids) - block_size, block_size + 1):
            w = ids[s:s + block_size + 1].long()[None]
            logits = gpt_logits(params, w[:, :-1], cfg)
            total += torch.nn.functional.cross_entropy(logits[0], w[0, 1:], reduction="sum").item()
            count += block_size
    return total / count
'''),
    dict(exercise="evaluate", diagnosis="Likely mistake: the tail is scored too:",
         mistake="scores the partial last window", source='''
def evaluate(params, ids, cfg, block_size):
    total, count = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(ids) - 1, block_size):
            w = ids[s:s + block_size + 1].long()[None]
            logits = gpt_logits(params, w[:, :-1], cfg)
            total += torch.nn.functional.cross_entropy(logits[0], w[0, 1:], reduction="sum").item()
            count += w.shape[1] - 1
    return total / count
'''),
    dict(exercise="evaluate", diagnosis="Likely mistake: the targets are not shifted:",
         mistake="scores each position on its own token", source='''
def evaluate(params, ids, cfg, block_size):
    n = (len(ids) - 1) // block_size
    total = 0.0
    with torch.no_grad():
        for w in range(n):
            x = ids[w * block_size: w * block_size + block_size].long()[None]
            total += torch.nn.functional.cross_entropy(gpt_logits(params, x, cfg)[0], x[0], reduction="sum").item()
    return total / (n * block_size)
'''),
    dict(exercise="evaluate", diagnosis="Likely mistake: the windows' means are averaged:",
         mistake="averages the windows' means, the short tail included", source='''
def evaluate(params, ids, cfg, block_size):
    means = []
    with torch.no_grad():
        for s in range(0, len(ids) - 1, block_size):
            w = ids[s:s + block_size + 1].long()[None]
            logits = gpt_logits(params, w[:, :-1], cfg)
            means.append(torch.nn.functional.cross_entropy(logits[0], w[0, 1:]).item())
    return sum(means) / len(means)
'''),
    dict(exercise="evaluate", diagnosis="the result is a torch.Tensor where a float is expected",
         mistake="returns a 0-d tensor", source='''
def evaluate(params, ids, cfg, block_size):
    n = (len(ids) - 1) // block_size
    windows = torch.stack([ids[w * block_size: w * block_size + block_size + 1] for w in range(n)]).long()
    with torch.no_grad():
        logits = gpt_logits(params, windows[:, :-1], cfg)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))
'''),
    dict(exercise="evaluate", diagnosis="gives a wrong result", mistake="averages over windows of block_size + 1",
         source='''
def evaluate(params, ids, cfg, block_size):
    n = (len(ids) - 1) // block_size
    total = 0.0
    with torch.no_grad():
        for w in range(n):
            window = ids[w * block_size: w * block_size + block_size + 1].long()[None]
            logits = gpt_logits(params, window[:, :-1], cfg)
            total += torch.nn.functional.cross_entropy(logits[0], window[0, 1:], reduction="sum").item()
    return total / (n * (block_size + 1))
'''),
    # ------------------------------------------------------------ train_gpt
    dict(exercise="train_gpt", diagnosis="are the targets shifted by one",
         mistake="trains each position on its own token (y = x)", source='''
def train_gpt(train_ids, vocab_size, steps, seed):
    cfg = dict(RECIPE, vocab_size=vocab_size)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.AdamW(list(params.values()), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    for step in range(steps):
        x, _ = get_batch(train_ids, 8, 32, g)
        logits = gpt_logits(params, x, cfg)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return cfg, {name: p.detach() for name, p in params.items()}
'''),
    dict(exercise="train_gpt", diagnosis="trained without the causal mask",
         mistake="trains with attention that sees the whole window", source='''
def train_gpt(train_ids, vocab_size, steps, seed):
    global causal_attention
    cfg = dict(RECIPE, vocab_size=vocab_size)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    hp = dict(steps=steps, batch_size=8, block_size=32, max_lr=3e-3, min_lr=1e-3, warmup_steps=20,
              weight_decay=0.1, max_norm=1.0)
    right = causal_attention
    causal_attention = lambda q, k, v: ((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])).softmax(-1) @ v
    try:
        train_loop(params, train_ids, cfg, hp, torch.Generator().manual_seed(seed + 1))
    finally:
        causal_attention = right
    return cfg, {name: p.detach() for name, p in params.items()}
'''),
    dict(exercise="train_gpt", diagnosis="no better than a uniform guess",
         mistake="returns freshly initialised parameters, not the trained ones", source=_recipe('''
    train_loop(init_params(cfg, torch.Generator().manual_seed(seed)), train_ids, cfg, dict(hp, steps=5),
               torch.Generator().manual_seed(seed + 1))
    return cfg, {name: p.detach() for name, p in params.items()}
''')),
    dict(exercise="train_gpt", diagnosis="the recipe must reach", mistake="trains for 30 updates only",
         source=_recipe('''
    train_loop(params, train_ids, cfg, dict(hp, steps=30), torch.Generator().manual_seed(seed + 1))
    return cfg, {name: p.detach() for name, p in params.items()}
''')),
    dict(exercise="train_gpt", diagnosis="holds NaN or infinite values", mistake="a learning rate that diverges",
         source=_recipe('''
    train_loop(params, train_ids, cfg, dict(hp, steps=3, max_lr=1e30, min_lr=1e30, warmup_steps=0, max_norm=1e30),
               torch.Generator().manual_seed(seed + 1))
    return cfg, {name: p.detach() for name, p in params.items()}
''')),
    dict(exercise="train_gpt", diagnosis="must return a pair (cfg, params)", mistake="returns the losses",
         source=_recipe('''
    return train_loop(params, train_ids, cfg, dict(hp, steps=2), torch.Generator().manual_seed(seed + 1))
''')),
    dict(exercise="train_gpt", diagnosis="cfg has vocab_size=", mistake="keeps RECIPE's vocabulary size",
         source='''
def train_gpt(train_ids, vocab_size, steps, seed):
    cfg = dict(RECIPE, vocab_size=vocab_size + 1)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    return cfg, {name: p.detach() for name, p in params.items()}
'''),
]

RIGHT = [
    dict(exercise="count_params", how="from the shapes, without the embedding first", source='''
def count_params(cfg):
    d = cfg["dim"]
    head = d // cfg["n_heads"]
    attention = d * d * 2 + 2 * d * head * cfg["n_kv_heads"]
    mlp = 3 * d * cfg["mlp_hidden"]
    return cfg["n_layers"] * (attention + mlp + 2 * d) + d * (cfg["vocab_size"] + 1)
'''),
    dict(exercise="gpt_logits", how="einsum for the heads, the norm written inline", source='''
def gpt_logits(params, ids, cfg):
    H, K, eps = cfg["n_heads"], cfg["n_kv_heads"], cfg["norm_eps"]
    E = params["tok_emb.weight"]
    h = torch.nn.functional.embedding(ids, E)
    b, n, d = h.shape
    hd = d // H
    norm = lambda t, w: t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + eps) * w
    for i in range(cfg["n_layers"]):
        W = lambda name: params[f"blocks.{i}.{name}.weight"]
        x = norm(h, W("attn_res.norm"))
        q = rope(torch.einsum("bnd,ed->bne", x, W("attn.q_proj")).view(b, n, H, hd).permute(0, 2, 1, 3),
                 cfg["rope_base"])
        k = rope(torch.einsum("bnd,ed->bne", x, W("attn.k_proj")).view(b, n, K, hd).permute(0, 2, 1, 3),
                 cfg["rope_base"])
        v = torch.einsum("bnd,ed->bne", x, W("attn.v_proj")).view(b, n, K, hd).permute(0, 2, 1, 3)
        group = torch.arange(H) // (H // K)
        out = causal_attention(q, k[:, group], v[:, group])
        h = h + out.permute(0, 2, 1, 3).reshape(b, n, d) @ W("attn.out_proj").T
        x = norm(h, W("mlp_res.norm"))
        h = h + swiglu(x, W("mlp.gate_proj"), W("mlp.up_proj"), W("mlp.down_proj"))
    return norm(h, params["norm.weight"]) @ E.T
'''),
    dict(exercise="get_batch", how="a loop over the starts with torch.stack", source='''
def get_batch(ids, batch_size, block_size, generator):
    starts = torch.randint(len(ids) - block_size, (batch_size,), generator=generator).tolist()
    xs, ys = [], []
    for s in starts:
        chunk = ids[s:s + block_size + 1].to(torch.int64)
        xs.append(chunk[:-1])
        ys.append(chunk[1:])
    return torch.stack(xs), torch.stack(ys)
'''),
    dict(exercise="lr_at", how="one expression per phase, the cosine through a progress clamp", source='''
def lr_at(step, max_lr, warmup_steps, max_steps, min_lr):
    if step < warmup_steps:
        return max_lr * step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, max_steps - warmup_steps))
    return float(min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress)))
'''),
    dict(exercise="train_loop", how="zero_grad(set_to_none=True), the norm through torch.linalg", source='''
def train_loop(params, ids, cfg, hp, generator):
    tensors = list(params.values())
    opt = torch.optim.AdamW(tensors, lr=0.0, betas=(0.9, 0.95), weight_decay=hp["weight_decay"])
    losses = []
    for s in range(hp["steps"]):
        x, y = get_batch(ids, hp["batch_size"], hp["block_size"], generator)
        opt.zero_grad(set_to_none=True)
        logits = gpt_logits(params, x, cfg)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        loss.backward()
        total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t.grad) for t in tensors]))
        scale = min(1.0, hp["max_norm"] / (float(total) + 1e-6))
        with torch.no_grad():
            for t in tensors:
                t.grad *= scale
        lr = lr_at(s + 1, hp["max_lr"], hp["warmup_steps"], hp["steps"], hp["min_lr"])
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        losses.append(float(loss))
    return losses
'''),
    dict(exercise="evaluate", how="every window in one batch", source='''
def evaluate(params, ids, cfg, block_size):
    n = (len(ids) - 1) // block_size
    windows = torch.stack([ids[w * block_size: w * block_size + block_size + 1] for w in range(n)]).long()
    with torch.no_grad():
        logits = gpt_logits(params, windows[:, :-1], cfg)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))
    return loss.item()
'''),
    dict(exercise="train_gpt", how="Adam at a constant rate, no decay and no clipping, in a loop of its own",
         source='''
def train_gpt(train_ids, vocab_size, steps, seed):
    cfg = dict(RECIPE, vocab_size=vocab_size)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.Adam(list(params.values()), lr=2e-3)
    for step in range(steps):
        x, y = get_batch(train_ids, 8, 32, g)
        logits = gpt_logits(params, x, cfg)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return cfg, {name: p.detach() for name, p in params.items()}
'''),
    dict(exercise="train_gpt", how="PyTorch's AdamW betas, no clipping, a wider model", source='''
def train_gpt(train_ids, vocab_size, steps, seed):
    cfg = dict(RECIPE, vocab_size=vocab_size, dim=96, n_heads=6, n_kv_heads=6, mlp_hidden=256, n_layers=1)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(list(params.values()), lr=2e-3, weight_decay=0.01)
    for step in range(steps):
        x, y = get_batch(train_ids, 8, 32, g)
        logits = gpt_logits(params, x, cfg)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return cfg, {name: p.detach() for name, p in params.items()}
'''),
]
