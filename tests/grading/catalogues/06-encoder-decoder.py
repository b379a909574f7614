"""Plausible wrong implementations for assignment 06-encoder-decoder, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/06-encoder-decoder/encoder_decoder.ipynb with ``source``; the hidden
tests of that exercise must fail on it (tests/grading/test_catalogues.py).
"""

WRONG = []

WRONG += [
    # ------------------------------------------------------------ shift_right
    dict(exercise="shift_right", diagnosis="Likely mistake: you shifted left (dropped", mistake="shifts left",
         source='''
def shift_right(tgt, bos_id):
    return torch.cat([tgt[:, 1:], torch.full_like(tgt[:, :1], bos_id)], dim=1)
'''),
    dict(exercise="shift_right", diagnosis="Likely mistake: you kept the whole target",
         mistake="keeps the last token (one too long)", source='''
def shift_right(tgt, bos_id):
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt], dim=1)
'''),
    dict(exercise="shift_right", diagnosis="Likely mistake: torch.roll wraps the last",
         mistake="torch.roll without replacing the wrapped token", source='''
def shift_right(tgt, bos_id):
    return torch.roll(tgt, 1, dims=1)
'''),
    dict(exercise="shift_right", diagnosis="modified one of its inputs in place",
         mistake="overwrites the first token in place", source='''
def shift_right(tgt, bos_id):
    tgt[:, 0] = bos_id
    return tgt
'''),
    dict(exercise="shift_right", diagnosis="gives wrong values", mistake="BOS hard-coded to 1", source='''
def shift_right(tgt, bos_id):
    return torch.cat([torch.full_like(tgt[:, :1], 1), tgt[:, :-1]], dim=1)
'''),
    dict(exercise="shift_right", diagnosis="returned dtype", mistake="float BOS column changes the dtype", source='''
def shift_right(tgt, bos_id):
    return torch.cat([torch.full((tgt.shape[0], 1), float(bos_id)), tgt[:, :-1].float()], dim=1)
'''),
    dict(exercise="shift_right", diagnosis="Likely mistake: you shifted along the batch",
         mistake="shifts along the batch axis", source='''
def shift_right(tgt, bos_id):
    return torch.cat([torch.full_like(tgt[:1], bos_id), tgt[:-1]], dim=0)
'''),
    dict(exercise="shift_right", diagnosis="Likely mistake: you replaced the first token by BOS instead",
         mistake="overwrites the first token with BOS (on a copy)", source='''
def shift_right(tgt, bos_id):
    out = tgt.clone()
    out[:, 0] = bos_id
    return out
'''),
    # ------------------------------------------------------------ decoder_self_attention_mask
    dict(exercise="decoder_self_attention_mask", diagnosis="Likely mistake: the causal part is transposed:",
         mistake="upper triangle (j >= i)", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    pos = torch.arange(n)
    return (pos[None, :] >= pos[:, None])[None] & (pos[None, :] < tgt_lengths[:, None])[:, None, :]
'''),
    dict(exercise="decoder_self_attention_mask", diagnosis="Likely mistake: the causal part excludes the",
         mistake="strict causal mask (no diagonal)", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    pos = torch.arange(n)
    return (pos[None, :] < pos[:, None])[None] & (pos[None, :] < tgt_lengths[:, None])[:, None, :]
'''),
    dict(exercise="decoder_self_attention_mask", diagnosis="Likely mistake: the padding is masked along",
         mistake="padding applied to the query rows", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    pos = torch.arange(n)
    return (pos[None, :] <= pos[:, None])[None] & (pos[None, :] < tgt_lengths[:, None])[:, :, None]
'''),
    dict(exercise="decoder_self_attention_mask", diagnosis="Likely mistake: the padding mask is missing:",
         mistake="padding forgotten", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    return torch.ones(len(tgt_lengths), n, n, dtype=torch.bool).tril()
'''),
    dict(exercise="decoder_self_attention_mask", diagnosis="Likely mistake: off by one in the padding:",
         mistake="off by one in the padding (j <= length)", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    pos = torch.arange(n)
    return (pos[None, :] <= pos[:, None])[None] & (pos[None, :] <= tgt_lengths[:, None])[:, None, :]
'''),
    dict(exercise="decoder_self_attention_mask", diagnosis="Likely mistake: the two masks are combined",
         mistake="masks combined with or", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    pos = torch.arange(n)
    return (pos[None, :] <= pos[:, None])[None] | (pos[None, :] < tgt_lengths[:, None])[:, None, :]
'''),
    dict(exercise="decoder_self_attention_mask", diagnosis="returned dtype", mistake="returns a float 0/1 mask",
         source='''
def decoder_self_attention_mask(tgt_lengths, n):
    pos = torch.arange(n)
    return ((pos[None, :] <= pos[:, None])[None] & (pos[None, :] < tgt_lengths[:, None])[:, None, :]).float()
'''),
    dict(exercise="decoder_self_attention_mask",
         diagnosis="Likely mistake: the causal mask is missing: only the padding", mistake="causal mask forgotten",
         source='''
def decoder_self_attention_mask(tgt_lengths, n):
    pos = torch.arange(n)
    real = pos[None, :] < tgt_lengths[:, None]
    return real[:, None, :].expand(len(tgt_lengths), n, n)
'''),
    dict(exercise="decoder_self_attention_mask", diagnosis="Likely mistake: the mask is inverted: True must mean",
         mistake="True marks the blocked positions", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    pos = torch.arange(n)
    future = pos[None, :] > pos[:, None]
    pad = pos[None, :] >= tgt_lengths[:, None]
    return future[None, :, :] | pad[:, None, :]
'''),
    # ------------------------------------------------------------ transformer_lr
    dict(exercise="transformer_lr", diagnosis="Likely mistake: the factor dim^-0.5 is missing.",
         mistake="no dim factor", source='''
def transformer_lr(step, dim, warmup):
    if step == 0:
        return 0.0
    return min(step ** -0.5, step * warmup ** -1.5)
'''),
    dict(exercise="transformer_lr", diagnosis="Likely mistake: the warmup is raised to -0.5",
         mistake="warmup^-0.5 in the linear branch", source='''
def transformer_lr(step, dim, warmup):
    if step == 0:
        return 0.0
    return dim ** -0.5 * min(step ** -0.5, step * warmup ** -0.5)
'''),
    dict(exercise="transformer_lr", diagnosis="Likely mistake: max instead of min: the schedule",
         mistake="max instead of min", source='''
def transformer_lr(step, dim, warmup):
    if step == 0:
        return 0.0
    return dim ** -0.5 * max(step ** -0.5, step * warmup ** -1.5)
'''),
    dict(exercise="transformer_lr", diagnosis="raised", mistake="step 0 not handled", source='''
def transformer_lr(step, dim, warmup):
    return dim ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
'''),
    dict(exercise="transformer_lr", diagnosis="Likely mistake: the step is counted from 1",
         mistake="step counted from 1 (uses step + 1)", source='''
def transformer_lr(step, dim, warmup):
    step = step + 1
    return dim ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
'''),
    dict(exercise="transformer_lr", diagnosis="expected", mistake="returns a tensor, not a float", source='''
def transformer_lr(step, dim, warmup):
    if step == 0:
        return torch.tensor([0.0])
    return torch.tensor([dim ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)])
'''),
    dict(exercise="transformer_lr", diagnosis="Likely mistake: the linear branch is step",
         mistake="linear branch step / warmup (missing warmup^-0.5)", source='''
def transformer_lr(step, dim, warmup):
    if step == 0:
        return 0.0
    return dim ** -0.5 * min(step ** -0.5, step / warmup)
'''),
    dict(exercise="transformer_lr", diagnosis="Likely mistake: dim is raised to +0.5 instead",
         mistake="dim ** 0.5 instead of dim ** -0.5", source='''
def transformer_lr(step, dim, warmup):
    if step == 0:
        return 0.0
    return dim ** 0.5 * min(step ** -0.5, step * warmup ** -1.5)
'''),
    dict(exercise="transformer_lr", diagnosis="Likely mistake: the warmup branch uses step^-0.5 * warmup^-1.5",
         mistake="warmup branch step^-0.5 * warmup^-1.5", source='''
def transformer_lr(step, dim, warmup):
    if step == 0:
        return 0.0
    return dim ** -0.5 * min(step ** -0.5, step ** -0.5 * warmup ** -1.5)
'''),
    # ------------------------------------------------------------ label_smoothed_loss
    dict(exercise="label_smoothed_loss", diagnosis="Likely mistake: padding positions are counted:",
         mistake="divides by all positions, padding included", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    logp = torch.log_softmax(logits, dim=-1)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    loss = ((1 - smoothing) * nll + smoothing * -logp.mean(-1)) * keep
    return loss.mean()
'''),
    dict(exercise="label_smoothed_loss", diagnosis="Likely mistake: eps is spread over the V -",
         mistake="eps spread over the V - 1 wrong classes", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    logp = torch.log_softmax(logits, dim=-1)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    V = logits.shape[-1]
    q = torch.full_like(logp, smoothing / (V - 1)).scatter(-1, safe[..., None], 1 - smoothing)
    loss = -(q * logp).sum(-1) * keep
    return loss.sum() / keep.sum()
'''),
    dict(exercise="label_smoothed_loss", diagnosis="Likely mistake: the uniform part sums -log",
         mistake="sum over the vocabulary instead of mean", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    logp = torch.log_softmax(logits, dim=-1)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    loss = ((1 - smoothing) * nll + smoothing * -logp.sum(-1)) * keep
    return loss.sum() / keep.sum()
'''),
    dict(exercise="label_smoothed_loss", diagnosis="Likely mistake: the true class keeps weight",
         mistake="true class weight 1 instead of 1 - eps", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    logp = torch.log_softmax(logits, dim=-1)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    loss = (nll + smoothing * -logp.mean(-1)) * keep
    return loss.sum() / keep.sum()
'''),
    dict(exercise="label_smoothed_loss", diagnosis="contains NaN", mistake="log of softmax overflows (no log_softmax)",
         source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    logp = torch.log(torch.exp(logits) / torch.exp(logits).sum(-1, keepdim=True))
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    loss = ((1 - smoothing) * nll + smoothing * -logp.mean(-1)) * keep
    return loss.sum() / keep.sum()
'''),
    dict(exercise="label_smoothed_loss", diagnosis="does the exercise for you", mistake="calls F.cross_entropy",
         source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    import torch.nn.functional as F
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                           ignore_index=ignore_index, label_smoothing=smoothing)
'''),
    dict(exercise="label_smoothed_loss", diagnosis="Likely mistake: ignore_index is not ignored:",
         mistake="padding positions not ignored", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    logp = torch.log_softmax(logits, dim=-1)
    safe = torch.where(target != ignore_index, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    return ((1 - smoothing) * nll + smoothing * -logp.mean(-1)).mean()
'''),
    dict(exercise="label_smoothed_loss", diagnosis="returned dtype", mistake="casts to float32", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    logp = torch.log_softmax(logits.float(), dim=-1)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    loss = ((1 - smoothing) * nll + smoothing * -logp.mean(-1)) * keep
    return loss.sum() / keep.sum()
'''),
    dict(exercise="label_smoothed_loss", diagnosis="Likely mistake: the uniform part has the wrong sign.",
         mistake="subtracts the uniform part", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    logp = torch.log_softmax(logits, dim=-1)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    uniform = logp.mean(dim=-1)
    loss = ((1 - smoothing) * nll + smoothing * uniform) * keep
    return loss.sum() / keep.sum()
'''),
    dict(exercise="label_smoothed_loss", diagnosis="Likely mistake: the sum over positions is returned, not the mean",
         mistake="returns the sum over positions", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    logp = torch.log_softmax(logits, dim=-1)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    uniform = -logp.mean(dim=-1)
    loss = ((1 - smoothing) * nll + smoothing * uniform) * keep
    return loss.sum()
'''),
    # ------------------------------------------------------------ cross_attention
    dict(exercise="cross_attention", diagnosis="Likely mistake: queries and keys/values are",
         mistake="queries from the memory, keys/values from x", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    x, memory = memory, x
    b, n_t, d = x.shape
    n_s = memory.shape[1]
    hd = d // n_heads
    q = (x @ w_q.T).view(b, n_t, n_heads, hd).transpose(1, 2)
    k = (memory @ w_k.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    v = (memory @ w_v.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(hd)
    return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, n_t, d) @ w_o.T
'''),
    dict(exercise="cross_attention", diagnosis="Likely mistake: the scores are scaled by sqrt(dim);",
         mistake="scale by sqrt(dim)", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    b, n_t, d = x.shape
    n_s = memory.shape[1]
    hd = d // n_heads
    q = (x @ w_q.T).view(b, n_t, n_heads, hd).transpose(1, 2)
    k = (memory @ w_k.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    v = (memory @ w_v.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    if memory_mask is not None:
        s = s.masked_fill(~memory_mask[:, None], float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, n_t, d) @ w_o.T
'''),
    dict(exercise="cross_attention", diagnosis="Likely mistake: memory_mask is ignored: masked", mistake="mask ignored",
         source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    b, n_t, d = x.shape
    n_s = memory.shape[1]
    hd = d // n_heads
    q = (x @ w_q.T).view(b, n_t, n_heads, hd).transpose(1, 2)
    k = (memory @ w_k.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    v = (memory @ w_v.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(hd)
    return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, n_t, d) @ w_o.T
'''),
    dict(exercise="cross_attention", diagnosis="Likely mistake: the heads are merged without",
         mistake="heads merged with view without transposing back", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    b, n_t, d = x.shape
    n_s = memory.shape[1]
    hd = d // n_heads
    q = (x @ w_q.T).view(b, n_t, n_heads, hd).transpose(1, 2)
    k = (memory @ w_k.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    v = (memory @ w_v.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if memory_mask is not None:
        s = s.masked_fill(~memory_mask[:, None], float("-inf"))
    return (torch.softmax(s, -1) @ v).reshape(b, n_t, d) @ w_o.T
'''),
    dict(exercise="cross_attention", diagnosis="Likely mistake: the output projection w_o",
         mistake="no output projection", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    b, n_t, d = x.shape
    n_s = memory.shape[1]
    hd = d // n_heads
    q = (x @ w_q.T).view(b, n_t, n_heads, hd).transpose(1, 2)
    k = (memory @ w_k.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    v = (memory @ w_v.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if memory_mask is not None:
        s = s.masked_fill(~memory_mask[:, None], float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, n_t, d)
'''),
    dict(exercise="cross_attention", diagnosis="Likely mistake: the weights are not transposed:",
         mistake="weights not transposed (x @ w)", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    b, n_t, d = x.shape
    n_s = memory.shape[1]
    hd = d // n_heads
    q = (x @ w_q).view(b, n_t, n_heads, hd).transpose(1, 2)
    k = (memory @ w_k).view(b, n_s, n_heads, hd).transpose(1, 2)
    v = (memory @ w_v).view(b, n_s, n_heads, hd).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if memory_mask is not None:
        s = s.masked_fill(~memory_mask[:, None], float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, n_t, d) @ w_o
'''),
    dict(exercise="cross_attention", diagnosis="Likely mistake: a causal mask was added: cross-attention",
         mistake="causal mask added to cross-attention", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    b, n_t, d = x.shape
    n_s = memory.shape[1]
    hd = d // n_heads
    q = (x @ w_q.T).view(b, n_t, n_heads, hd).transpose(1, 2)
    k = (memory @ w_k.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    v = (memory @ w_v.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    s = q @ k.transpose(-2, -1) / math.sqrt(hd)
    causal = torch.ones(n_t, n_s, dtype=torch.bool).tril()
    m = causal if memory_mask is None else causal & memory_mask[:, None]
    s = s.masked_fill(~m, float("-inf"))
    return torch.nan_to_num(torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, n_t, d) @ w_o.T
'''),
    dict(exercise="cross_attention", diagnosis="Likely mistake: the heads are never split: that is one head",
         mistake="computes head_dim for the scale but never splits the heads", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    hd = x.shape[-1] // n_heads
    q = x @ w_q.T
    k = memory @ w_k.T
    v = memory @ w_v.T
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if memory_mask is not None:
        scores = scores.masked_fill(~memory_mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v @ w_o.T
'''),
    dict(exercise="cross_attention", diagnosis="Likely mistake: the softmax runs over the queries (dim=-2)",
         mistake="softmax over the query axis", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    b, n_t, d = x.shape
    n_s = memory.shape[1]
    hd = d // n_heads
    q = (x @ w_q.T).view(b, n_t, n_heads, hd).transpose(1, 2)
    k = (memory @ w_k.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    v = (memory @ w_v.T).view(b, n_s, n_heads, hd).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
    if memory_mask is not None:
        scores = scores.masked_fill(~memory_mask[:, None], float("-inf"))
    heads = torch.softmax(scores, dim=-2) @ v
    return heads.transpose(1, 2).reshape(b, n_t, d) @ w_o.T
'''),
    # numerically naive: right on moderate inputs, wrong where the chapter warns (exp overflows)
    dict(exercise="cross_attention", diagnosis="argument(s) 1, 2 times 12",
         mistake="softmax written as exp / sum without the maximum subtracted", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    b, n_t, d = x.shape
    n_s = memory.shape[1]
    hd = d // n_heads
    q = (x @ w_q.T).reshape(b, n_t, n_heads, hd).transpose(1, 2)
    k = (memory @ w_k.T).reshape(b, n_s, n_heads, hd).transpose(1, 2)
    v = (memory @ w_v.T).reshape(b, n_s, n_heads, hd).transpose(1, 2)
    e = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(hd))
    if memory_mask is not None:
        e = e * memory_mask[:, None]
    heads = (e / e.sum(-1, keepdim=True)) @ v
    return heads.transpose(1, 2).reshape(b, n_t, d) @ w_o.T
'''),
]

# Correct implementations written differently from the reference solution: each must keep full marks.
RIGHT = [
    # ------------------------------------------------------------ shift_right
    dict(exercise="shift_right", how="a tensor filled with BOS, the target copied into columns 1:", source='''
def shift_right(tgt, bos_id):
    out = tgt.new_full(tgt.shape, bos_id)
    out[:, 1:] = tgt[:, :-1]
    return out
'''),
    dict(exercise="shift_right", how="torch.roll, then the wrapped-around token replaced by BOS", source='''
def shift_right(tgt, bos_id):
    out = torch.roll(tgt, shifts=1, dims=1)
    out[:, 0] = bos_id
    return out
'''),
    # ------------------------------------------------------------ decoder_self_attention_mask
    dict(exercise="decoder_self_attention_mask", how="tril of a ones matrix, lengths reshaped to (batch, 1, 1)",
         source='''
def decoder_self_attention_mask(tgt_lengths, n):
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    real_keys = torch.arange(n).reshape(1, 1, n) < tgt_lengths.reshape(-1, 1, 1)
    return causal & real_keys
'''),
    dict(exercise="decoder_self_attention_mask", how="a loop over the batch and the query rows, masks stacked",
         source='''
def decoder_self_attention_mask(tgt_lengths, n):
    masks = []
    for length in tgt_lengths.tolist():
        m = torch.zeros(n, n, dtype=torch.bool)
        for i in range(n):
            m[i, : min(i + 1, length)] = True
        masks.append(m)
    return torch.stack(masks)
'''),
    # ------------------------------------------------------------ transformer_lr
    dict(exercise="transformer_lr", how="divides by math.sqrt(dim) in a conditional expression", source='''
def transformer_lr(step, dim, warmup):
    return 0.0 if step == 0 else min(step ** -0.5, step * warmup ** -1.5) / math.sqrt(dim)
'''),
    dict(exercise="transformer_lr", how="an explicit branch on step < warmup instead of min (step 0 falls out)",
         source='''
def transformer_lr(step, dim, warmup):
    if step < warmup:
        factor = step / warmup ** 1.5
    else:
        factor = 1 / math.sqrt(step)
    return float(factor / math.sqrt(dim))
'''),
    # ------------------------------------------------------------ label_smoothed_loss
    dict(exercise="label_smoothed_loss", how="logits - logsumexp, a smoothed one-hot target distribution, torch.where",
         source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    V = logits.shape[-1]
    logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    one_hot = (torch.arange(V) == safe[..., None]).to(logits.dtype)
    q = (1 - smoothing) * one_hot + smoothing / V
    per_position = -(q * logp).sum(dim=-1)
    per_position = torch.where(keep, per_position, torch.zeros_like(per_position))
    return per_position.sum() / keep.sum()
'''),
    dict(exercise="label_smoothed_loss",
         how="boolean indexing of the kept rows, log-softmax written out with the maximum", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    keep = target != ignore_index
    rows = logits[keep]
    t = target[keep]
    shifted = rows - rows.amax(dim=-1, keepdim=True).detach()
    logp = shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
    nll = -logp[torch.arange(t.shape[0]), t]
    uniform = -logp.mean(dim=-1)
    return ((1 - smoothing) * nll + smoothing * uniform).mean()
'''),
    # ------------------------------------------------------------ cross_attention
    dict(exercise="cross_attention", how="einsum with per-head weight blocks, torch.where for the mask", source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    d = x.shape[-1]
    hd = d // n_heads
    q = torch.einsum("btd,hed->bhte", x, w_q.reshape(n_heads, hd, d))
    k = torch.einsum("bsd,hed->bhse", memory, w_k.reshape(n_heads, hd, d))
    v = torch.einsum("bsd,hed->bhse", memory, w_v.reshape(n_heads, hd, d))
    scores = torch.einsum("bhte,bhse->bhts", q, k) / math.sqrt(hd)
    if memory_mask is not None:
        scores = torch.where(memory_mask[:, None], scores, torch.full_like(scores, float("-inf")))
    weights = torch.softmax(scores, dim=-1)
    heads = torch.einsum("bhts,bhse->bhte", weights, v)
    return torch.einsum("bhte,ohe->bto", heads, w_o.reshape(d, n_heads, hd))
'''),
    dict(exercise="cross_attention", how="a loop over heads (column slices), softmax written out with the maximum",
         source='''
def cross_attention(x, memory, w_q, w_k, w_v, w_o, n_heads, memory_mask=None):
    d = x.shape[-1]
    hd = d // n_heads
    q_all, k_all, v_all = x @ w_q.T, memory @ w_k.T, memory @ w_v.T
    outs = []
    for h in range(n_heads):
        cols = slice(h * hd, (h + 1) * hd)
        scores = q_all[..., cols] @ k_all[..., cols].transpose(-2, -1) * hd ** -0.5
        if memory_mask is not None:
            scores = scores.masked_fill(~memory_mask, float("-inf"))
        e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        outs.append((e / e.sum(dim=-1, keepdim=True)) @ v_all[..., cols])
    return torch.cat(outs, dim=-1) @ w_o.T
'''),
    # the targets are int64, as the exercise says (issue 45): one_hot, which takes int64 only, is right
    dict(exercise="label_smoothed_loss", how="the smoothed target built with one_hot on the int64 targets", source='''
def label_smoothed_loss(logits, target, smoothing, ignore_index):
    V = logits.shape[-1]
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    q = torch.nn.functional.one_hot(safe, V).to(logits.dtype) * (1 - smoothing) + smoothing / V
    loss = -(q * torch.log_softmax(logits, dim=-1)).sum(-1)
    return (loss * keep).sum() / keep.sum()
'''),
]

# The contract's last gaps (issue 27): ids and lengths in any integer dtype, the result's dtype following them.
WRONG += [
    dict(exercise="shift_right", diagnosis="the dtype should follow the input",
         mistake="BOS column made with torch.full (int64): int32 ids come back int64", source='''
def shift_right(tgt, bos_id):
    bos = torch.full((tgt.shape[0], 1), bos_id)
    return torch.cat([bos, tgt[:, :-1]], dim=1)
'''),
    dict(exercise="shift_right", diagnosis="the dtype should follow the input",
         mistake="result allocated as a long tensor, filled by slices", source='''
def shift_right(tgt, bos_id):
    out = torch.empty(tgt.shape, dtype=torch.long)
    out[:, 0] = bos_id
    out[:, 1:] = tgt[:, :-1]
    return out
'''),
    dict(exercise="decoder_self_attention_mask", diagnosis="only handles int64 integer inputs",
         mistake="padding from one_hot(lengths).cumsum (one_hot takes int64 only)", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    padding = torch.nn.functional.one_hot(tgt_lengths, n + 1).cumsum(-1)[:, :n].bool()
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    return causal[None] & ~padding[:, None, :]
'''),
    dict(exercise="decoder_self_attention_mask", diagnosis="only handles int64 integer inputs",
         mistake="padding marked with scatter_ at each length (scatter takes int64 indices only)", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    first_pad = torch.zeros(tgt_lengths.shape[0], n + 1).scatter_(1, tgt_lengths[:, None], 1.0)
    real = first_pad.cumsum(-1)[:, :n] == 0
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    return causal[None] & real[:, None, :]
'''),
    # the exercise names uint8 among the lengths' dtypes, and says that 0 - 1 is 255 there (issue 45)
    dict(exercise="decoder_self_attention_mask", diagnosis="integer inputs in uint8",
         mistake="real keys as j <= length - 1: an empty sequence's 0 - 1 wraps round to 255 in uint8", source='''
def decoder_self_attention_mask(tgt_lengths, n):
    pos = torch.arange(n)
    causal = pos[None, :] <= pos[:, None]
    real = pos[None, :] <= (tgt_lengths - 1)[:, None]
    return causal[None] & real[:, None, :]
'''),
    dict(exercise="transformer_lr", diagnosis="where a float is expected",
         mistake="computed with 0-d tensors (torch.minimum): returns a tensor, not a Python float", source='''
def transformer_lr(step, dim, warmup):
    if step == 0:
        return 0.0
    s = torch.tensor(float(step), dtype=torch.float64)
    return dim ** -0.5 * torch.minimum(s ** -0.5, s * warmup ** -1.5)
'''),
]


# ------------------------------------------------------------ predicted_rates (predict, then run)
WRONG += [
    dict(exercise='predicted_rates', diagnosis='Likely mistake: the rate decays as 1/step after the warm',
         mistake='the rate decays as 1/step after the warm-up', source='''
def predicted_rates():
    return [0.25, 0.1111111111111111]
'''),
    dict(exercise='predicted_rates', diagnosis='Likely mistake: the warm-up grows as sqrt(step)',
         mistake='the warm-up grows as sqrt(step)', source='''
def predicted_rates():
    return [0.5, 0.3333333333333333]
'''),
    dict(exercise='predicted_rates', diagnosis='Likely mistake: the rate decays as 1/step and the warm-u',
         mistake='the rate decays as 1/step and the warm-up grows as sqrt(step): the two exponents are swapped',
         source='''
def predicted_rates():
    return [0.5, 0.1111111111111111]
'''),
    dict(exercise='predicted_rates', diagnosis="should return", mistake="answers in words", source='''
def predicted_rates():
    return "I think it is [0.25, 0.33]"
'''),
    dict(exercise='predicted_rates', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_rates():
    print([0.25, 0.33])
'''),
]
RIGHT += [
    dict(exercise='predicted_rates', how="a tensor", source='''
def predicted_rates():
    return torch.tensor([0.25, 0.3333333333333333])
'''),
    dict(exercise='predicted_rates', how="a tuple of the exact values", source='''
def predicted_rates():
    return (0.25, 0.3333333333333333)
'''),
]
