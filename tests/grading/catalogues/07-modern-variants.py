"""Plausible wrong implementations for assignment 07-modern-variants, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/07-modern-variants/modern_variants.ipynb with ``source``; the hidden
tests of that exercise must fail on it (tests/grading/test_catalogues.py).
``mistake`` says what a learner got wrong, in the words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ pre_ln_block
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: this is the post-LN block:",
         mistake="writes the post-LN block", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = norm1(x + attn(x))
    return norm2(h + mlp(h))
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: the MLP reads x instead of",
         mistake="runs the two sublayers in parallel on x", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    return x + attn(norm1(x)) + mlp(norm2(x))
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: the skip carries the normalized",
         mistake="the skip carries the normalized input", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = norm1(x)
    h = h + attn(h)
    g = norm2(h)
    return g + mlp(g)
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: norm1 and norm2 are swapped:",
         mistake="swaps norm1 and norm2", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = x + attn(norm2(x))
    return h + mlp(norm1(h))
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: the same norm is used before", mistake="uses norm1 twice",
         source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = x + attn(norm1(x))
    return h + mlp(norm1(h))
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: the output is normalized at",
         mistake="adds a final norm to the block output", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = x + attn(norm1(x))
    return norm2(h + mlp(norm2(h)))
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: the skip around the MLP is",
         mistake="forgets the second skip", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = x + attn(norm1(x))
    return mlp(norm2(h))
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: the MLP runs before the attention:",
         mistake="MLP first, then attention", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = x + mlp(norm2(x))
    return h + attn(norm1(h))
'''),
    dict(exercise="pre_ln_block", diagnosis="raised", mistake="updates x in place with +=", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    x += attn(norm1(x))
    x += mlp(norm2(x))
    return x
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: the skip around the attention is missing",
         mistake="forgets the first skip", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = attn(norm1(x))
    return h + mlp(norm2(h))
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: the norms are applied to the sublayer outputs",
         mistake="normalizes the sublayer outputs (x + norm(f(x)))", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = x + norm1(attn(x))
    return h + norm2(mlp(h))
'''),
    dict(exercise="pre_ln_block", diagnosis="Likely mistake: the norms are never applied.",
         mistake="never calls the norms", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = x + attn(x)
    return h + mlp(h)
'''),
    # ------------------------------------------------------------ swiglu
    dict(exercise="swiglu", diagnosis="Likely mistake: the gate and up projections",
         mistake="SiLU on the up branch instead of the gate", source='''
def swiglu(x, w_gate, w_up, w_down):
    up = x @ w_up.T
    return (up * torch.sigmoid(up) * (x @ w_gate.T)) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="Likely mistake: the activation is a sigmoid:",
         mistake="sigmoid gate (GLU) instead of SiLU", source='''
def swiglu(x, w_gate, w_up, w_down):
    return (torch.sigmoid(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="Likely mistake: the two branches are added,", mistake="adds the branches",
         source='''
def swiglu(x, w_gate, w_up, w_down):
    g = x @ w_gate.T
    return (g * torch.sigmoid(g) + x @ w_up.T) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="Likely mistake: the SiLU is applied to the", mistake="SiLU of the product",
         source='''
def swiglu(x, w_gate, w_up, w_down):
    z = (x @ w_gate.T) * (x @ w_up.T)
    return (z * torch.sigmoid(z)) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="does the exercise for you", mistake="calls F.silu", source='''
def swiglu(x, w_gate, w_up, w_down):
    import torch.nn.functional as F
    return (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="Likely mistake: the activation is ReLU: SwiGLU", mistake="ReLU gate (ReGLU)",
         source='''
def swiglu(x, w_gate, w_up, w_down):
    return (torch.relu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="gives wrong values", mistake="SiLU written as z * sigmoid(-z)", source='''
def swiglu(x, w_gate, w_up, w_down):
    g = x @ w_gate.T
    return (g * torch.sigmoid(-g) * (x @ w_up.T)) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="gives wrong values", mistake="down projection not transposed", source='''
def swiglu(x, w_gate, w_up, w_down):
    g = x @ w_gate.T
    return (g * torch.sigmoid(g) * (x @ w_up.T)) @ w_down
'''),
    dict(exercise="swiglu", diagnosis="Likely mistake: the activation is GELU: SwiGLU uses SiLU",
         mistake="GELU gate (GEGLU)", source='''
def swiglu(x, w_gate, w_up, w_down):
    import torch.nn.functional as F
    gate = x @ w_gate.T
    up = x @ w_up.T
    return (F.gelu(gate) * up) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="Likely mistake: the SiLU is missing: the gate is silu",
         mistake="no activation on the gate (bilinear)", source='''
def swiglu(x, w_gate, w_up, w_down):
    gate = x @ w_gate.T
    up = x @ w_up.T
    return (gate * up) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="Likely mistake: the SiLU is applied to both branches",
         mistake="SiLU on the gate and on the up branch", source='''
def swiglu(x, w_gate, w_up, w_down):
    gate = x @ w_gate.T
    up = x @ w_up.T
    return (gate * torch.sigmoid(gate) * up * torch.sigmoid(up)) @ w_down.T
'''),
    dict(exercise="swiglu", diagnosis="Likely mistake: a SiLU is applied after the down projection",
         mistake="SiLU after the down projection as well", source='''
def swiglu(x, w_gate, w_up, w_down):
    gate = x @ w_gate.T
    up = x @ w_up.T
    y = (gate * torch.sigmoid(gate) * up) @ w_down.T
    return y * torch.sigmoid(y)
'''),
    dict(exercise="swiglu", diagnosis="Likely mistake: the down projection is missing",
         mistake="forgets the down projection", source='''
def swiglu(x, w_gate, w_up, w_down):
    gate = x @ w_gate.T
    up = x @ w_up.T
    return gate * torch.sigmoid(gate) * up
'''),
    # ------------------------------------------------------------ apply_rope
    dict(exercise="apply_rope", diagnosis="Likely mistake: the rotation goes the wrong",
         mistake="rotate_half without the minus sign on the right half", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv = base ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    a = positions.to(x.dtype)[:, None] * inv
    a = torch.cat([a, a], -1)
    x1, x2 = x.chunk(2, -1)
    return x * a.cos() + torch.cat([x2, -x1], -1) * a.sin()
'''),
    dict(exercise="apply_rope", diagnosis="Likely mistake: the frequencies are repeated",
         mistake="interleaved frequencies (repeat_interleave) with the half-split rotation", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv = base ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    a = (positions.to(x.dtype)[:, None] * inv).repeat_interleave(2, dim=-1)
    x1, x2 = x.chunk(2, -1)
    return x * a.cos() + torch.cat([-x2, x1], -1) * a.sin()
'''),
    dict(exercise="apply_rope", diagnosis="Likely mistake: this rotates adjacent pairs",
         mistake="rotates adjacent pairs (the paper's interleaved layout)", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv = base ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    a = positions.to(x.dtype)[:, None] * inv
    xe, xo = x[..., 0::2], x[..., 1::2]
    ye = xe * a.cos() - xo * a.sin()
    yo = xe * a.sin() + xo * a.cos()
    return torch.stack([ye, yo], dim=-1).flatten(-2)
'''),
    dict(exercise="apply_rope", diagnosis="Likely mistake: the frequency exponent is",
         mistake="exponent -i/d instead of -2i/d", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv = base ** (-torch.arange(d // 2, dtype=x.dtype) / d)
    a = positions.to(x.dtype)[:, None] * inv
    a = torch.cat([a, a], -1)
    x1, x2 = x.chunk(2, -1)
    return x * a.cos() + torch.cat([-x2, x1], -1) * a.sin()
'''),
    dict(exercise="apply_rope", diagnosis="Likely mistake: the positions are ignored:",
         mistake="uses the index arange(seq) instead of positions", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv = base ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    a = torch.arange(x.shape[-2], dtype=x.dtype)[:, None] * inv
    a = torch.cat([a, a], -1)
    x1, x2 = x.chunk(2, -1)
    return x * a.cos() + torch.cat([-x2, x1], -1) * a.sin()
'''),
    dict(exercise="apply_rope", diagnosis="Likely mistake: `base` is ignored: use the", mistake="hard-codes base 10000",
         source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv = 10000.0 ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    a = positions.to(x.dtype)[:, None] * inv
    a = torch.cat([a, a], -1)
    x1, x2 = x.chunk(2, -1)
    return x * a.cos() + torch.cat([-x2, x1], -1) * a.sin()
'''),
    dict(exercise="apply_rope", diagnosis="gives wrong values",
         mistake="computes the tables in float32 whatever the dtype of x", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    a = positions.float()[:, None] * inv
    a = torch.cat([a, a], -1)
    x1, x2 = x.chunk(2, -1)
    return x * a.cos() + torch.cat([-x2, x1], -1) * a.sin()
'''),
    dict(exercise="apply_rope", diagnosis="Likely mistake: cos and sin are swapped: x", mistake="swaps cos and sin",
         source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv = base ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    a = positions.to(x.dtype)[:, None] * inv
    a = torch.cat([a, a], -1)
    x1, x2 = x.chunk(2, -1)
    return x * a.sin() + torch.cat([-x2, x1], -1) * a.cos()
'''),
    dict(exercise="apply_rope", diagnosis="Likely mistake: the positions are off by one",
         mistake="rotates by (p + 1) * theta_i", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    angles = (positions + 1).to(x.dtype)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rotated = torch.cat([-x2, x1], dim=-1)
    return x * angles.cos() + rotated * angles.sin()
'''),
    dict(exercise="apply_rope", diagnosis="Likely mistake: the rotation goes the wrong",
         mistake="subtracts the sine term (the same function as the reversed rotation)", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    angles = positions.to(x.dtype)[:, None] * inv_freq
    angles = torch.cat([angles, angles], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rotated = torch.cat([-x2, x1], dim=-1)
    return x * angles.cos() - rotated * angles.sin()
'''),
    # ------------------------------------------------------------ next_token_loss
    dict(exercise="next_token_loss", diagnosis="Likely mistake: the logits and targets are", mistake="no shift",
         source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits, dim=-1)
    keep = torch.ones_like(ids, dtype=torch.bool) if ignore_index is None else ids != ignore_index
    nll = -logp.gather(-1, torch.where(keep, ids, 0)[..., None])[..., 0]
    return (nll * keep).sum() / keep.sum()
'''),
    dict(exercise="next_token_loss", diagnosis="Likely mistake: the shift goes the wrong way:",
         mistake="shifts the wrong way", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, 1:], dim=-1)
    t = ids[:, :-1]
    keep = torch.ones_like(t, dtype=torch.bool) if ignore_index is None else t != ignore_index
    nll = -logp.gather(-1, torch.where(keep, t, 0)[..., None])[..., 0]
    return (nll * keep).sum() / keep.sum()
'''),
    dict(exercise="next_token_loss", diagnosis="Likely mistake: the ignored targets are counted",
         mistake="divides by all targets, ignored ones included", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    t = ids[:, 1:]
    keep = torch.ones_like(t, dtype=torch.bool) if ignore_index is None else t != ignore_index
    nll = -logp.gather(-1, torch.where(keep, t, 0)[..., None])[..., 0]
    return (nll * keep).sum() / t.numel()
'''),
    dict(exercise="next_token_loss", diagnosis="Likely mistake: ignore_index is not applied:",
         mistake="ignores ignore_index (and clamps invalid ids to 0)", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    t = ids[:, 1:].clamp(min=0)
    return -logp.gather(-1, t[..., None]).mean()
'''),
    dict(exercise="next_token_loss", diagnosis="Likely mistake: the log-softmax is taken over",
         mistake="log-softmax over the sequence axis", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, :-1], dim=1)
    t = ids[:, 1:]
    keep = torch.ones_like(t, dtype=torch.bool) if ignore_index is None else t != ignore_index
    nll = -logp.gather(-1, torch.where(keep, t, 0)[..., None])[..., 0]
    return (nll * keep).sum() / keep.sum()
'''),
    dict(exercise="next_token_loss", diagnosis="does the exercise for you", mistake="calls F.cross_entropy", source='''
def next_token_loss(logits, ids, ignore_index=None):
    import torch.nn.functional as F
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(),
                           ignore_index=-100 if ignore_index is None else ignore_index)
'''),
    dict(exercise="next_token_loss", diagnosis="Likely mistake: the loss is summed, not averaged",
         mistake="sums instead of averaging", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    t = ids[:, 1:]
    keep = torch.ones_like(t, dtype=torch.bool) if ignore_index is None else t != ignore_index
    nll = -logp.gather(-1, torch.where(keep, t, 0)[..., None])[..., 0]
    return (nll * keep).sum()
'''),
    dict(exercise="next_token_loss", diagnosis="returned dtype", mistake="casts the loss to float32", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    t = ids[:, 1:]
    keep = torch.ones_like(t, dtype=torch.bool) if ignore_index is None else t != ignore_index
    nll = -logp.gather(-1, torch.where(keep, t, 0)[..., None])[..., 0]
    return (nll * keep).sum() / keep.sum()
'''),
    dict(exercise="next_token_loss", diagnosis="Likely mistake: the loss averages each sequence,",
         mistake="mean over the batch of per-sequence means", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    t = ids[:, 1:]
    keep = torch.ones_like(t, dtype=torch.bool) if ignore_index is None else t != ignore_index
    nll = -logp.gather(-1, torch.where(keep, t, 0)[..., None])[..., 0]
    return ((nll * keep).sum(1) / keep.sum(1).clamp(min=1)).mean()
'''),
    dict(exercise="next_token_loss", diagnosis="Likely mistake: the loss is missing its minus sign",
         mistake="averages log p instead of -log p", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    targets = ids[:, 1:]
    keep = torch.ones_like(targets, dtype=torch.bool) if ignore_index is None else targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    ll = logp.gather(-1, safe[..., None])[..., 0]
    ll = torch.where(keep, ll, torch.zeros_like(ll))
    return ll.sum() / keep.sum()
'''),
    dict(exercise="next_token_loss", diagnosis="Likely mistake: the loss uses the raw logit of the target",
         mistake="uses the raw logits (no log-softmax)", source='''
def next_token_loss(logits, ids, ignore_index=None):
    lg = logits[:, :-1]
    targets = ids[:, 1:]
    keep = torch.ones_like(targets, dtype=torch.bool) if ignore_index is None else targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    nll = -lg.gather(-1, safe[..., None])[..., 0]
    nll = torch.where(keep, nll, torch.zeros_like(nll))
    return nll.sum() / keep.sum()
'''),
    # ------------------------------------------------------------ sample_next_token
    dict(exercise="sample_next_token", diagnosis="Likely mistake: the logits are multiplied by the temperature",
         mistake="multiplies by the temperature", source='''
def sample_next_token(logits, temperature, top_k, generator):
    logits = logits * temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)
'''),
    dict(exercise="sample_next_token", diagnosis="Likely mistake: the temperature is not applied:",
         mistake="forgets the temperature", source='''
def sample_next_token(logits, temperature, top_k, generator):
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)
'''),
    dict(exercise="sample_next_token", diagnosis="Likely mistake: top-k keeps one token too many:",
         mistake="top-k keeps one too many (index k instead of k-1)", source='''
def sample_next_token(logits, temperature, top_k, generator):
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.sort(dim=-1, descending=True).values[:, top_k:top_k + 1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)
'''),
    dict(exercise="sample_next_token", diagnosis="Likely mistake: top_k is ignored: keep only", mistake="ignores top_k",
         source='''
def sample_next_token(logits, temperature, top_k, generator):
    return torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)
'''),
    dict(exercise="sample_next_token", diagnosis="Likely mistake: the token is the argmax: sample",
         mistake="returns the argmax", source='''
def sample_next_token(logits, temperature, top_k, generator):
    return logits.argmax(dim=-1, keepdim=True)
'''),
    dict(exercise="sample_next_token", diagnosis="gives wrong values", mistake="uses the global RNG, not the generator",
         source='''
def sample_next_token(logits, temperature, top_k, generator):
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, -1), 1)
'''),
    dict(exercise="sample_next_token", diagnosis="gives wrong values", mistake="masks with zeros instead of -inf",
         source='''
def sample_next_token(logits, temperature, top_k, generator):
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, 0.0)
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)
'''),
    dict(exercise="sample_next_token", diagnosis="returned shape", mistake="returns a (batch,) vector", source='''
def sample_next_token(logits, temperature, top_k, generator):
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]
'''),
    dict(exercise="sample_next_token", diagnosis="Likely mistake: top-k keeps one token too few",
         mistake="top-k drops the k-th largest too (<= instead of <)", source='''
def sample_next_token(logits, temperature, top_k, generator):
    logits = logits / temperature
    if top_k is not None:
        k = min(top_k, logits.shape[-1])
        kth = logits.topk(k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits <= kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)
'''),
    dict(exercise="sample_next_token", diagnosis="Likely mistake: top-k keeps the k smallest logits",
         mistake="topk with largest=False", source='''
def sample_next_token(logits, temperature, top_k, generator):
    logits = logits / temperature
    if top_k is not None:
        k = min(top_k, logits.shape[-1])
        kth = logits.topk(k, dim=-1, largest=False).values[:, -1:]
        logits = logits.masked_fill(logits > kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)
'''),
    # numerically naive: right on moderate inputs, wrong where the chapter warns (exp overflows)
    dict(exercise="next_token_loss", diagnosis="argument(s) 1 times 100",
         mistake="log-sum-exp written out without the maximum subtracted", source='''
def next_token_loss(logits, ids, ignore_index=None):
    x = logits[:, :-1]
    targets = ids[:, 1:]
    keep = torch.ones_like(targets, dtype=torch.bool) if ignore_index is None else targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    nll = torch.log(torch.exp(x).sum(-1)) - x.gather(-1, safe[..., None])[..., 0]
    return torch.where(keep, nll, torch.zeros_like(nll)).sum() / keep.sum()
'''),
    # numerically naive: right on moderate inputs, wrong where the chapter warns (exp overflows)
    dict(exercise="sample_next_token", diagnosis="argument(s) 1 times 40",
         mistake="probabilities as exp / sum without the maximum subtracted", source='''
def sample_next_token(logits, temperature, top_k, generator):
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    e = torch.exp(logits)
    return torch.multinomial(e / e.sum(-1, keepdim=True), 1, generator=generator)
'''),
]

# Correct implementations written differently from the reference solution: each must keep full marks.
RIGHT = [
    # ------------------------------------------------------------ pre_ln_block
    dict(exercise="pre_ln_block", how="a loop over the (norm, sublayer) pairs", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    for norm, sublayer in ((norm1, attn), (norm2, mlp)):
        x = x + sublayer(norm(x))
    return x
'''),
    dict(exercise="pre_ln_block", how="branch first, skip added with Tensor.add", source='''
def pre_ln_block(x, attn, mlp, norm1, norm2):
    h = attn(norm1(x)).add(x)
    return mlp(norm2(h)).add(h)
'''),
    # ------------------------------------------------------------ swiglu
    dict(exercise="swiglu", how="einsum projections, SiLU as gate * sigmoid(gate)", source='''
def swiglu(x, w_gate, w_up, w_down):
    gate = torch.einsum("...d,hd->...h", x, w_gate)
    up = torch.einsum("...d,hd->...h", x, w_up)
    return torch.einsum("...h,dh->...d", gate * torch.sigmoid(gate) * up, w_down)
'''),
    dict(exercise="swiglu", how="one fused projection split in two, sigmoid written with tanh", source='''
def swiglu(x, w_gate, w_up, w_down):
    hidden = w_gate.shape[0]
    gate, up = (x @ torch.cat([w_gate, w_up], dim=0).T).split(hidden, dim=-1)
    silu = gate * 0.5 * (1 + torch.tanh(gate / 2))
    return (silu * up) @ w_down.T
'''),
    # ------------------------------------------------------------ apply_rope
    dict(exercise="apply_rope",
         how="the rotation of each pair written out (x1 cos - x2 sin, x2 cos + x1 sin), torch.outer", source='''
def apply_rope(x, positions, base=10000.0):
    half = x.shape[-1] // 2
    freqs = 1.0 / base ** (torch.arange(0, 2 * half, 2, dtype=x.dtype) / (2 * half))
    angles = torch.outer(positions.to(x.dtype), freqs)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
'''),
    dict(exercise="apply_rope", how="complex multiplication: (x1 + i x2) * exp(i angle) with torch.polar", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    half = d // 2
    inv_freq = base ** (-2 * torch.arange(half, dtype=x.dtype) / d)
    angles = positions.to(x.dtype)[:, None] * inv_freq
    rotation = torch.polar(torch.ones_like(angles), angles)
    z = torch.complex(x[..., :half], x[..., half:]) * rotation
    return torch.cat([z.real, z.imag], dim=-1)
'''),
    # ------------------------------------------------------------ next_token_loss
    dict(exercise="next_token_loss",
         how="flattened pairs, ignored ones dropped by boolean indexing, logsumexp - picked logit", source='''
def next_token_loss(logits, ids, ignore_index=None):
    pred = logits[:, :-1].reshape(-1, logits.shape[-1])
    target = ids[:, 1:].reshape(-1)
    if ignore_index is not None:
        keep = target != ignore_index
        pred, target = pred[keep], target[keep]
    picked = pred.gather(1, target[:, None]).squeeze(1)
    return (torch.logsumexp(pred, dim=-1) - picked).mean()
'''),
    dict(exercise="next_token_loss",
         how="log-softmax written out with the maximum, a one-hot product instead of gather", source='''
def next_token_loss(logits, ids, ignore_index=None):
    z = logits[:, :-1]
    z = z - z.amax(dim=-1, keepdim=True)
    logp = z - z.exp().sum(dim=-1, keepdim=True).log()
    targets = ids[:, 1:]
    if ignore_index is None:
        keep = torch.ones_like(targets, dtype=torch.bool)
    else:
        keep = targets != ignore_index
    hit = targets[..., None] == torch.arange(logits.shape[-1])
    nll = -(logp * hit).sum(dim=-1)
    return (nll * keep).sum() / keep.sum()
'''),
    # ------------------------------------------------------------ sample_next_token
    dict(exercise="sample_next_token", how="k-th value from a sort, torch.where, softmax written out", source='''
def sample_next_token(logits, temperature, top_k, generator):
    scaled = logits / temperature
    if top_k is not None:
        k = min(top_k, scaled.shape[-1])
        kth = scaled.sort(dim=-1, descending=True).values[:, k - 1:k]
        scaled = torch.where(scaled >= kth, scaled, torch.full_like(scaled, float("-inf")))
    e = torch.exp(scaled - scaled.amax(dim=-1, keepdim=True))
    probs = e / e.sum(dim=-1, keepdim=True)
    return torch.multinomial(probs, 1, generator=generator)
'''),
    dict(exercise="sample_next_token", how="top-k applied to the probabilities (zeroed, then renormalized)", source='''
def sample_next_token(logits, temperature, top_k, generator):
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None:
        kth = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values[:, -1:]
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return torch.multinomial(probs, 1, generator=generator)
'''),
    # positions are int64 or int32, as the exercise says (issue 45): both index a table
    dict(exercise="apply_rope", how="a cos/sin table over every position up to the largest, indexed by positions "
         "(as Hugging Face's rotary embedding caches it)", source='''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    inv_freq = base ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    table = torch.arange(int(positions.max()) + 1, dtype=x.dtype)[:, None] * inv_freq
    table = torch.cat([table, table], dim=-1)
    cos, sin = table.cos()[positions], table.sin()[positions]
    rotated = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)
    return x * cos + rotated * sin
'''),
    # ids are int64, as the exercise says (issue 45): one_hot and take_along_dim, which take int64 only, are right
    dict(exercise="next_token_loss", how="targets one-hot encoded (one_hot on the int64 ids)", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    targets = ids[:, 1:]
    keep = torch.ones_like(targets, dtype=torch.bool) if ignore_index is None else targets != ignore_index
    onehot = torch.nn.functional.one_hot(torch.where(keep, targets, 0), logits.shape[-1]).to(logp.dtype)
    nll = -(onehot * logp).sum(-1)
    return (nll * keep).sum() / keep.sum()
'''),
    dict(exercise="next_token_loss", how="the target's log-probability picked with take_along_dim", source='''
def next_token_loss(logits, ids, ignore_index=None):
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    targets = ids[:, 1:]
    keep = torch.ones_like(targets, dtype=torch.bool) if ignore_index is None else targets != ignore_index
    picked = torch.take_along_dim(logp, torch.where(keep, targets, 0)[..., None], dim=-1)[..., 0]
    return -(picked * keep).sum() / keep.sum()
'''),
]


# ------------------------------------------------------------ predicted_loss (predict, then run)
WRONG += [
    dict(exercise='predicted_loss', diagnosis='Likely mistake: the targets are not shifted: each row wa',
         mistake='the targets are not shifted: each row was scored against its own token, not the next one', source='''
def predicted_loss():
    return 0.4904146265
'''),
    dict(exercise='predicted_loss', diagnosis='Likely mistake: the losses were summed, not averaged ove',
         mistake='the losses were summed, not averaged over the predictions', source='''
def predicted_loss():
    return 2.0794415417
'''),
    dict(exercise='predicted_loss', diagnosis='Likely mistake: the logarithm is base 2',
         mistake='the logarithm is base 2', source='''
def predicted_loss():
    return 1.5
'''),
    dict(exercise='predicted_loss', diagnosis="should return", mistake="answers in words", source='''
def predicted_loss():
    return "I think it is 1.04"
'''),
    dict(exercise='predicted_loss', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_loss():
    print(1.04)
'''),
]
RIGHT += [
    dict(exercise='predicted_loss', how="a 0-d tensor", source='''
def predicted_loss():
    return torch.tensor(1.0397207708399179)
'''),
    dict(exercise='predicted_loss', how="the exact value", source='''
def predicted_loss():
    return 1.0397207708399179
'''),
]
