"""A planted class for the similarity report (tests/grading/test_similarity.py), as data.

Each entry is a learner's solution cell for one exercise. ``PASTER``: course_lib's code pasted under the
release's signatures, its local names changed (and the parts course_lib has beyond the exercise, its other
options, left out). ``SHARED``: one learner's own solutions, written for this class, unlike the reference,
the solution notebook and the catalogues' RIGHT entries. ``SHARED_COPY``: a classmate's copy of ``SHARED``,
its variables renamed and its independent lines reordered. The class's honest learners are the
catalogues' RIGHT entries (tests/grading/catalogues/<assignment>.py), one learner per entry.
"""

PASTER = {  # course_lib's code, pasted under the release's signatures with its names changed
    "02-attention": {
        "attention_scores": '''
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same width d_k, got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}"
        )
    factor = 1.0 / math.sqrt(q.shape[-1])
    return (q @ k.transpose(-2, -1)) * factor
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor (True = may attend), got {mask.dtype}")
    s = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    top = s.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    ex = torch.exp(s - top.detach())
    z = ex.sum(dim=-1, keepdim=True)
    probs = ex / z.clamp_min(1.0)
    return probs.to(scores.dtype)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal=0)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys and values must have the same length n_k, got k {tuple(k.shape)} "
            f"and v {tuple(v.shape)}"
        )
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor (True = may attend), got {mask.dtype}")
    probs = masked_softmax(attention_scores(q, k), mask)
    return probs @ v
''',
    },
    "03-multi-head-attention": {
        "split_heads": '''
def split_heads(x, n_heads):
    bsz, length, width = x.shape
    if width % n_heads:
        raise ValueError(f"model width {width} is not divisible by n_heads={n_heads}")
    return x.view(bsz, length, n_heads, width // n_heads).transpose(1, 2)
''',
        "merge_heads": '''
def merge_heads(x):
    bsz, nh, length, hd = x.shape
    return x.transpose(1, 2).reshape(bsz, length, nh * hd)
''',
        "multi_head_attention": '''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    if w_q.shape[0] % n_heads:
        raise ValueError(f"w_q has {w_q.shape[0]} output features, not divisible by n_heads={n_heads}")
    hd = w_q.shape[0] // n_heads
    queries = split_heads(F.linear(x, w_q), n_heads)           # (batch, n_heads, seq, head_dim)
    keys = split_heads(F.linear(x, w_k), n_heads)
    values = split_heads(F.linear(x, w_v), n_heads)
    out = scaled_dot_product_attention(queries, keys, values, None)
    return F.linear(merge_heads(out), w_o)
''',
        "project_heads_separately": '''
def project_heads_separately(heads, w_o):
    nh, hd = heads.shape[-3], heads.shape[-1]
    if w_o.shape[-1] != nh * hd:
        raise ValueError(f"w_o has {w_o.shape[-1]} input features, expected n_heads * head_dim = {nh * hd}")
    return sum(heads[..., i, :, :] @ w_o[:, i * hd:(i + 1) * hd].T for i in range(nh))
''',
        "mha_param_count": '''
def mha_param_count(dim, n_heads, bias=True):
    if dim % n_heads:
        raise ValueError(f"need n_heads | dim, got dim={dim}, n_heads={n_heads}")
    width = n_heads * (dim // n_heads)
    w = 2 * dim * dim + 2 * dim * width
    b = 2 * dim + 2 * width if bias else 0
    return w + b
''',
    },
}

SHARED = {  # one learner's own solution (sharer1) ...
    "02-attention": {
        "attention_scores": '''
def attention_scores(q, k):
    width = q.size(-1)
    keys_t = k.swapaxes(-1, -2)
    raw = torch.matmul(q, keys_t)
    return raw / width ** 0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    filled = scores.masked_fill(allowed.logical_not(), -math.inf)
    peak = filled.max(dim=-1, keepdim=True).values
    peak = peak.nan_to_num(neginf=0.0)
    numer = (filled - peak).exp()
    denom = numer.sum(-1, keepdim=True)
    safe = torch.where(denom == 0, torch.ones_like(denom), denom)
    return numer / safe
''',
        "causal_mask": '''
def causal_mask(n):
    rows = torch.arange(n).unsqueeze(1)
    cols = torch.arange(n).unsqueeze(0)
    return cols <= rows
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    logits = attention_scores(q, k)
    probs = masked_softmax(logits, mask)
    out = torch.matmul(probs, v)
    return out
''',
    },
    "03-multi-head-attention": {
        "split_heads": '''
def split_heads(x, n_heads):
    b, t, c = x.shape
    hd = c // n_heads
    y = x.view(b, t, n_heads, hd)
    return y.permute(0, 2, 1, 3).contiguous()
''',
        "merge_heads": '''
def merge_heads(x):
    b, h, t, hd = x.shape
    y = x.permute(0, 2, 1, 3).contiguous()
    return y.view(b, t, h * hd)
''',
        "multi_head_attention": '''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    queries = torch.matmul(x, w_q.t())
    keys = torch.matmul(x, w_k.t())
    values = torch.matmul(x, w_v.t())
    qh = split_heads(queries, n_heads)
    kh = split_heads(keys, n_heads)
    vh = split_heads(values, n_heads)
    logits = torch.matmul(qh, kh.transpose(2, 3)) / (qh.size(-1) ** 0.5)
    probs = torch.softmax(logits, dim=-1)
    ctx = merge_heads(torch.matmul(probs, vh))
    return torch.matmul(ctx, w_o.t())
''',
        "project_heads_separately": '''
def project_heads_separately(heads, w_o):
    n_heads = heads.size(-3)
    head_dim = heads.size(-1)
    total = 0
    for h in range(n_heads):
        block = w_o[:, h * head_dim:(h + 1) * head_dim]
        total = total + torch.matmul(heads[..., h, :, :], block.t())
    return total
''',
        "mha_param_count": '''
def mha_param_count(dim, n_heads, bias=True):
    head_dim = dim // n_heads
    inner = head_dim * n_heads
    count = 4 * dim * inner
    if bias:
        count += 3 * inner + dim
    return count
''',
    },
}

SHARED_COPY = {  # ... and the classmate's copy of it: variables renamed, lines reordered
    "02-attention": {
        "attention_scores": '''
def attention_scores(q, k):
    kt = k.swapaxes(-1, -2)
    d = q.size(-1)
    prod = torch.matmul(q, kt)
    return prod / d ** 0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    ok = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    s = scores.masked_fill(ok.logical_not(), -math.inf)
    m = s.max(dim=-1, keepdim=True).values
    m = m.nan_to_num(neginf=0.0)
    top = (s - m).exp()
    bottom = top.sum(-1, keepdim=True)
    nz = torch.where(bottom == 0, torch.ones_like(bottom), bottom)
    return top / nz
''',
        "causal_mask": '''
def causal_mask(n):
    j = torch.arange(n).unsqueeze(0)
    i = torch.arange(n).unsqueeze(1)
    return j <= i
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    s = attention_scores(q, k)
    a = masked_softmax(s, mask)
    res = torch.matmul(a, v)
    return res
''',
    },
    "03-multi-head-attention": {
        "split_heads": '''
def split_heads(x, n_heads):
    batch, seq, width = x.shape
    d = width // n_heads
    out = x.view(batch, seq, n_heads, d)
    return out.permute(0, 2, 1, 3).contiguous()
''',
        "merge_heads": '''
def merge_heads(x):
    batch, heads, seq, d = x.shape
    out = x.permute(0, 2, 1, 3).contiguous()
    return out.view(batch, seq, heads * d)
''',
        "multi_head_attention": '''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    v = torch.matmul(x, w_v.t())
    q = torch.matmul(x, w_q.t())
    k = torch.matmul(x, w_k.t())
    vs = split_heads(v, n_heads)
    ks = split_heads(k, n_heads)
    qs = split_heads(q, n_heads)
    att = torch.matmul(qs, ks.transpose(2, 3)) / (qs.size(-1) ** 0.5)
    p = torch.softmax(att, dim=-1)
    merged = merge_heads(torch.matmul(p, vs))
    return torch.matmul(merged, w_o.t())
''',
        "project_heads_separately": '''
def project_heads_separately(heads, w_o):
    hd = heads.size(-1)
    nh = heads.size(-3)
    acc = 0
    for i in range(nh):
        w = w_o[:, i * hd:(i + 1) * hd]
        acc = acc + torch.matmul(heads[..., i, :, :], w.t())
    return acc
''',
        "mha_param_count": '''
def mha_param_count(dim, n_heads, bias=True):
    d = dim // n_heads
    width = d * n_heads
    n = 4 * dim * width
    if bias:
        n += 3 * width + dim
    return n
''',
    },
}
