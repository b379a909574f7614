"""Planted class C (held out), 02-attention: fourteen learners who worked alone, written after the report was
tuned, as data.

Written apart from classes A and B and never looked at by the report's tuning: each learner's code of each
exercise in a style of its own (a broadcast product instead of a matrix product, logsumexp, a loop over the rows,
float64, a finite fill value, a keep-mask multiplied in, ...), the short exercises mostly the natural way, as a
class writes them. Every one of them passes the hidden checks (``python -m tests.grading.similarity.planted
check c``). class_c.py makes the rings from them.
"""

INDEPENDENT = {
    "arlo": {  # the natural way throughout, the empty rows through nan_to_num of the maximum
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    peak = torch.nan_to_num(scores.amax(dim=-1, keepdim=True), neginf=0.0)
    num = torch.exp(scores - peak)
    den = num.sum(dim=-1, keepdim=True)
    return num / torch.where(den == 0, torch.ones_like(den), den)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.tril(torch.ones(n, n, dtype=torch.bool))
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
    "bea": {  # a scale factor first; a keep-mask of floats multiplied in after the exponential
        "attention_scores": '''
def attention_scores(q, k):
    scale = q.shape[-1] ** -0.5
    return torch.matmul(q * scale, k.transpose(-1, -2))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    keep = torch.ones_like(scores) if mask is None else torch.broadcast_to(mask, scores.shape).to(scores.dtype)
    biggest = torch.where(keep > 0, scores, torch.full_like(scores, -1e30)).amax(-1, keepdim=True)
    weights = torch.exp(torch.where(keep > 0, scores - biggest, torch.zeros_like(scores))) * keep
    norm = weights.sum(-1, keepdim=True)
    return weights / norm.clamp(min=1e-38)
''',
        "causal_mask": '''
def causal_mask(n):
    idx = torch.arange(n)
    return idx.unsqueeze(1) >= idx.unsqueeze(0)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attn = masked_softmax(attention_scores(q, k), mask)
    return torch.matmul(attn, v)
''',
    },
    "cato": {  # a broadcast product summed over the feature axis
        "attention_scores": '''
def attention_scores(q, k):
    products = q.unsqueeze(-2) * k.unsqueeze(-3)
    return products.sum(dim=-1) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones(scores.shape, dtype=torch.bool)
    mask = mask.expand(scores.shape)
    lowest = torch.finfo(scores.dtype).min
    shifted = scores.masked_fill(~mask, lowest)
    shifted = shifted - shifted.max(dim=-1, keepdim=True).values
    e = shifted.exp().masked_fill(~mask, 0.0)
    z = e.sum(dim=-1, keepdim=True)
    return e / (z + (z == 0).to(z.dtype))
''',
        "causal_mask": '''
def causal_mask(n):
    m = torch.zeros(n, n, dtype=torch.bool)
    for row in range(n):
        for col in range(row + 1):
            m[row, col] = True
    return m
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(attention_scores(q, k), mask)
    return torch.einsum("...ij,...jd->...id", weights, v)
''',
    },
    "dina": {  # logsumexp, the empty rows set apart first
        "attention_scores": '''
def attention_scores(q, k):
    return torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(k.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    mask = mask.expand_as(scores)
    has_any = mask.any(dim=-1, keepdim=True)
    logits = torch.where(mask, scores, torch.tensor(-math.inf, dtype=scores.dtype))
    logits = torch.where(has_any, logits, torch.zeros_like(logits))
    out = torch.exp(logits - torch.logsumexp(logits, dim=-1, keepdim=True))
    return torch.where(has_any & mask, out, torch.zeros_like(out))
''',
        "causal_mask": '''
def causal_mask(n):
    return ~torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    probs = masked_softmax(attention_scores(q, k), mask)
    out = probs @ v
    return out
''',
    },
    "ezra": {  # one row at a time
        "attention_scores": '''
def attention_scores(q, k):
    d = q.size(-1)
    return q.matmul(k.transpose(-2, -1)).div(math.sqrt(d))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    width = scores.shape[-1]
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand(scores.shape)
    flat, ok = scores.reshape(-1, width), allowed.reshape(-1, width)
    rows = []
    for i in range(flat.shape[0]):
        row = torch.zeros_like(flat[i])
        if ok[i].any():
            vals = flat[i][ok[i]]
            ex = (vals - vals.max()).exp()
            row = row.masked_scatter(ok[i], ex / ex.sum())
        rows.append(row)
    return torch.stack(rows).reshape(scores.shape)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.tensor([[j <= i for j in range(n)] for i in range(n)], dtype=torch.bool)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.matmul(masked_softmax(attention_scores(q, k), mask), v)
''',
    },
    "fern": {  # float64 inside, the caller's dtype out
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    x = scores.double()
    if mask is not None:
        x = x.masked_fill(~mask, -math.inf)
    top = x.max(dim=-1, keepdim=True).values
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(x - top)
    s = e.sum(dim=-1, keepdim=True)
    out = torch.where(s > 0, e / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(e))
    return out.to(scores.dtype)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n).tril().bool()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
    "gil": {  # swapaxes; the mask as an additive bias of half the dtype's lowest value
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        bias = torch.zeros_like(scores)
        keep = torch.ones_like(scores)
    else:
        keep = mask.to(scores.dtype).expand_as(scores)
        bias = (1.0 - keep) * (torch.finfo(scores.dtype).min / 2)
    z = scores + bias
    z = z - z.amax(-1, keepdim=True)
    p = z.exp() * keep
    total = p.sum(-1, keepdim=True)
    return p / torch.maximum(total, torch.full_like(total, 1e-20))
''',
        "causal_mask": '''
def causal_mask(n):
    r = torch.arange(n)
    return (r.view(-1, 1) - r.view(1, -1)) >= 0
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = masked_softmax(attention_scores(q, k), mask)
    return w @ v
''',
    },
    "hedy": {  # a helper for the stable exponential, in a cell of her own
        "attention_scores": '''
def attention_scores(q, k):
    dk = q.shape[-1]
    raw = q @ k.transpose(-2, -1)
    return raw / math.sqrt(dk)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool)
    e = stable_exp(scores, mask)
    return e / e.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.tril(torch.ones(n, n, dtype=torch.bool))
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
    "ines": {  # isneginf on the row maximum; the sum through a product with ones
        "attention_scores": '''
def attention_scores(q, k):
    return torch.matmul(q, k.mT) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    s = scores if mask is None else scores.masked_fill(mask.logical_not(), float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = m.masked_fill(torch.isneginf(m), 0.0)
    e = torch.exp(s - m)
    ones = torch.ones(e.shape[-1], 1, dtype=e.dtype)
    total = e @ ones
    safe = torch.where(total > 0, total, torch.ones_like(total))
    return e / safe
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.arange(n)[None, :] <= torch.arange(n)[:, None]
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
    "jude": {  # the scale applied to the keys; a masked mean-free exponential
        "attention_scores": '''
def attention_scores(q, k):
    return q @ (k / math.sqrt(k.shape[-1])).transpose(-2, -1)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    valid = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask & torch.ones_like(scores,
                                                                                                  dtype=torch.bool)
    neg = torch.full_like(scores, float("-inf"))
    picked = torch.where(valid, scores, neg)
    row_max = picked.max(dim=-1, keepdim=True)[0]
    row_max = torch.where(valid.any(dim=-1, keepdim=True), row_max, torch.zeros_like(row_max))
    ex = torch.where(valid, torch.exp(picked - row_max), torch.zeros_like(scores))
    return ex / ex.sum(dim=-1, keepdim=True).clamp_min(1e-30)
''',
        "causal_mask": '''
def causal_mask(n):
    m = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        m[i, : i + 1] = True
    return m
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    a = masked_softmax(attention_scores(q, k), mask)
    return torch.einsum("...qk,...kv->...qv", a, v)
''',
    },
    "kofi": {  # everything in one function, attention written out in place
        "attention_scores": '''
def attention_scores(q, k):
    d = q.shape[-1]
    return torch.matmul(q, k.transpose(-2, -1)) / (d ** 0.5)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        mask = mask.expand(scores.shape)
        scores = torch.where(mask, scores, scores.new_tensor(float("-inf")))
    mx = scores.amax(dim=-1, keepdim=True).detach()
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    e = (scores - mx).exp()
    if mask is not None:
        e = e * mask
    denom = e.sum(dim=-1, keepdim=True)
    return e / torch.where(denom > 0, denom, torch.ones_like(denom))
''',
        "causal_mask": '''
def causal_mask(n):
    pos = torch.arange(n)
    return pos.unsqueeze(-1) >= pos
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = attention_scores(q, k)
    weights = masked_softmax(scores, mask)
    return weights @ v
''',
    },
    "lior": {  # logsumexp of the masked scores, the empty rows' NaN replaced after
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    keep = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.broadcast_to(scores.shape)
    empty = ~keep.any(dim=-1, keepdim=True)
    filled = scores.masked_fill(~keep, -math.inf).masked_fill(empty, 0.0)
    lse = filled.logsumexp(dim=-1, keepdim=True)
    return (filled - lse).exp().masked_fill(empty, 0.0)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
    "maya": {  # the maximum taken over the allowed keys by a clamp, the weights renormalised twice
        "attention_scores": '''
def attention_scores(q, k):
    scores = torch.matmul(q, torch.transpose(k, -2, -1))
    return scores * (1.0 / math.sqrt(q.size(-1)))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    allow = torch.ones(scores.shape, dtype=torch.bool) if mask is None else torch.broadcast_to(mask, scores.shape)
    floor = torch.finfo(scores.dtype).min
    best = torch.clamp(scores.masked_fill(~allow, floor).amax(-1, keepdim=True), min=floor)
    e = torch.exp((scores - best).masked_fill(~allow, floor)) * allow
    total = e.sum(-1, keepdim=True)
    probs = e / (total + (total == 0))
    return probs
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.tril(torch.ones(n, n, dtype=torch.bool))
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.matmul(masked_softmax(attention_scores(q, k), mask), v)
''',
    },
    "noor": {  # everything through small helpers of a cell of her own
        "attention_scores": '''
def attention_scores(q, k):
    return dot_all(q, k) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores - finite_row_max(scores))
    return safe_divide(e, e.sum(-1, keepdim=True))
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.arange(n).reshape(n, 1) >= torch.arange(n).reshape(1, n)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
}

#: cells the learners added, each after the solution cell it follows
ADDED = {
    "hedy": [("attention_scores", '''
def stable_exp(scores, mask):
    """exp(scores - row max over the allowed keys), 0 where the mask is False."""
    hidden = scores.masked_fill(~mask, float("-inf"))
    top = hidden.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    return torch.exp(hidden - top)
''')],
    "noor": [("attention_scores", '''
def dot_all(a, b):
    return a @ b.transpose(-2, -1)


def finite_row_max(x):
    m = x.amax(dim=-1, keepdim=True)
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def safe_divide(num, den):
    return num / torch.where(den > 0, den, torch.ones_like(den))
''')],
}
