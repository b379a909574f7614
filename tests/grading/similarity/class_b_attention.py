"""Planted class B, 02-attention: twelve learners who worked alone, written apart from class A, as data.

The copies of class B are not written by hand: class_b.py makes them from these learners with the
disguises of disguise.py, drawn from a seeded generator. Juno writes the book's version.
"""

INDEPENDENT = {
    "abel": {
        "attention_scores": '''
def attention_scores(q, k):
    return torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    top = scores.max(dim=-1, keepdim=True).values
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = (scores - top).exp()
    s = e.sum(dim=-1, keepdim=True)
    return torch.where(s > 0, e / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(e))
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
    "bree": {  # the dtype's lowest value before the maximum, the mask multiplied back after exp
        "attention_scores": '''
def attention_scores(q, k):
    dk = q.size(-1)
    return (q @ k.mT) * (1.0 / math.sqrt(dk))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    allowed = torch.ones_like(scores) if mask is None else mask.to(scores.dtype)
    very_low = torch.finfo(scores.dtype).min
    filled = torch.where(allowed > 0, scores, torch.full_like(scores, very_low))
    stable = filled - filled.amax(dim=-1, keepdim=True).detach()
    num = torch.exp(stable) * allowed
    return num / num.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(num.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n).tril().bool()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(attention_scores(q, k), mask)
    return torch.matmul(weights, v)
''',
    },
    "cruz": {  # one row at a time, through a helper
        "attention_scores": '''
def attention_scores(q, k):
    return torch.einsum("...ik,...jk->...ij", q, k) / math.sqrt(k.shape[-1])
''',
        "masked_softmax": '''
def softmax_row(row, keep):
    out = torch.zeros_like(row)
    if keep.any():
        shifted = row[keep] - row[keep].max()
        out[keep] = shifted.exp() / shifted.exp().sum()
    return out


def masked_softmax(scores, mask=None):
    keep = torch.ones(scores.shape, dtype=torch.bool) if mask is None else mask.expand(scores.shape)
    width = scores.shape[-1]
    rows = [softmax_row(r, m) for r, m in zip(scores.reshape(-1, width), keep.reshape(-1, width))]
    return torch.stack(rows).view(scores.shape)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.tensor([[j <= i for j in range(n)] for i in range(n)], dtype=torch.bool)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.einsum("...ij,...jd->...id", masked_softmax(attention_scores(q, k), mask), v)
''',
    },
    "dana": {  # through logsumexp, empty rows set aside first
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    empty = ~mask.any(dim=-1, keepdim=True)
    logits = scores.masked_fill(~mask | empty, float("-inf")).masked_fill(empty, 0.0)
    out = torch.exp(logits - torch.logsumexp(logits, dim=-1, keepdim=True))
    return out * ~empty
''',
        "causal_mask": '''
def causal_mask(n):
    i = torch.arange(n)
    return i[:, None] >= i
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    p = masked_softmax(attention_scores(q, k), mask)
    return p @ v
''',
    },
    "elio": {  # powers of e, the maximum kept finite with nan_to_num
        "attention_scores": '''
def attention_scores(q, k):
    scale = q.shape[-1] ** -0.5
    return torch.matmul(q * scale, k.transpose(-1, -2))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    x = scores if mask is None else scores.masked_fill(mask == 0, -math.inf)
    m = torch.nan_to_num(x.amax(-1, keepdim=True), neginf=0.0)
    p = torch.pow(math.e, x - m)
    z = p.sum(-1, keepdim=True)
    return p / (z + (z == 0))
''',
        "causal_mask": '''
def causal_mask(n):
    return ~torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.matmul(masked_softmax(attention_scores(q, k), mask), v)
''',
    },
    "faye": {  # normalised with F.normalize (an L1 norm of non-negative weights is their sum)
        "attention_scores": '''
def attention_scores(q, k):
    d = q.shape[-1]
    return torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    peak = scores.amax(dim=-1, keepdim=True)
    peak = peak.masked_fill(peak == float("-inf"), 0.0)
    weights = torch.exp(scores - peak)
    return torch.nn.functional.normalize(weights, p=1.0, dim=-1, eps=torch.finfo(weights.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal=0)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    a = masked_softmax(attention_scores(q, k), mask)
    return a @ v
''',
    },
    "gabe": {  # the reciprocal of the clamped sum
        "attention_scores": '''
def attention_scores(q, k):
    return (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    keep = None if mask is None else mask.broadcast_to(scores.shape)
    s = scores if keep is None else scores.masked_fill(~keep, -float("inf"))
    row_top = s.amax(-1, keepdim=True)
    row_top = torch.where(row_top.isneginf(), torch.zeros_like(row_top), row_top)
    e = torch.exp(s - row_top)
    return e * torch.reciprocal(e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny))
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
    return masked_softmax(attention_scores(q, k), mask).matmul(v)
''',
    },
    "hugo": {  # an additive mask of the lowest finite value, the mask multiplied back
        "attention_scores": '''
def attention_scores(q, k):
    return q.matmul(k.transpose(-2, -1)).div(math.sqrt(q.shape[-1]))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    penalty = (~mask).to(scores.dtype) * torch.finfo(scores.dtype).min
    x = torch.maximum(scores + penalty, torch.full_like(scores, torch.finfo(scores.dtype).min))
    e = torch.exp(x - x.amax(-1, keepdim=True)) * mask
    total = e.sum(-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.arange(n).view(-1, 1) >= torch.arange(n).view(1, -1)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    out = masked_softmax(attention_scores(q, k), mask) @ v
    return out
''',
    },
    "iris": {  # one query row at a time
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    mask = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    pieces = []
    for s, m in zip(scores.unbind(-2), mask.unbind(-2)):
        s = s.masked_fill(~m, float("-inf"))
        hi = s.amax(-1, keepdim=True)
        hi = torch.where(torch.isfinite(hi), hi, torch.zeros_like(hi))
        e = torch.exp(s - hi)
        pieces.append(e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny))
    return torch.stack(pieces, dim=-2)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.tril(torch.ones(n, n)) > 0
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = masked_softmax(attention_scores(q, k), mask)
    return torch.einsum("...qk,...kd->...qd", w, v)
''',
    },
    "juno": {  # the book's version
        "attention_scores": '''
def attention_scores(q, k):
    d_k = q.shape[-1]
    return q @ k.transpose(-2, -1) / math.sqrt(d_k)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)
    total = e.sum(dim=-1, keepdim=True)
    return e / total.clamp_min(torch.finfo(e.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(attention_scores(q, k), mask)
    return weights @ v
''',
    },
    "kai": {  # max(...)[0], and the empty rows' maximum set to zero in place
        "attention_scores": '''
def attention_scores(q, k):
    s = torch.matmul(q, k.transpose(-2, -1))
    return s / torch.sqrt(torch.tensor(float(q.shape[-1]), dtype=s.dtype))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(torch.logical_not(mask), float("-inf"))
    mx = torch.max(scores, dim=-1, keepdim=True)[0]
    mx = mx.masked_fill(~torch.isfinite(mx), 0.0)
    ex = torch.exp(scores - mx)
    den = torch.sum(ex, dim=-1, keepdim=True)
    return ex / torch.where(den > 0, den, torch.ones_like(den))
''',
        "causal_mask": '''
def causal_mask(n):
    r = torch.arange(n)
    return r.unsqueeze(0) <= r.unsqueeze(1)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attn = masked_softmax(attention_scores(q, k), mask)
    return attn @ v
''',
    },
    "lux": {  # the row maximum from a sort
        "attention_scores": '''
def attention_scores(q, k):
    return torch.einsum("...nd,...md->...nm", q, k) * (1 / math.sqrt(q.shape[-1]))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    blocked = torch.zeros_like(scores, dtype=torch.bool) if mask is None else ~mask
    x = scores.masked_fill(blocked, -torch.inf)
    best = x.sort(dim=-1, descending=True).values[..., :1]
    best = torch.nan_to_num(best, neginf=0.0)
    e = torch.exp(x - best)
    return e / torch.clamp(e.sum(dim=-1, keepdim=True), min=torch.finfo(e.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).triu(1).logical_not()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
}

#: learners whose own work holds one exercise copied from a classmate (class_b.py puts the copy in)
COPIERS_OF_ONE = {
    "mara": {
        "attention_scores": '''
def attention_scores(q, k):
    return torch.matmul(q, k.mT) / math.sqrt(k.size(-1))
''',
        "causal_mask": '''
def causal_mask(n):
    idx = torch.arange(n)
    return idx.unsqueeze(1) - idx.unsqueeze(0) >= 0
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    probs = masked_softmax(attention_scores(q, k), mask)
    return torch.bmm(probs.reshape(-1, *probs.shape[-2:]), v.reshape(-1, *v.shape[-2:])).reshape(
        *probs.shape[:-1], v.shape[-1])
''',
    },
}
