"""Planted class D (held out), 02-attention: fifteen learners who worked alone, written once the rule that the
book's code is evidence of nothing between two learners was final, as data.

Written apart from classes A, B and C and never measured before the report was final: each learner's code in a
style of its own (``Tensor.mT``, ``swapaxes``, an einsum, a reciprocal square root, the scale folded into the
queries, a keep-mask of floats, a log-space softmax, float64 inside, ``torch.finfo(...).min``, a mask built from
index differences or ``triu`` inverted, ...), the short exercises mostly the natural way, as a class writes
them. Two learners write the book's code on most exercises: bex as the book shows it, gwen behind helpers in a
cell of her own. Every one of them passes the hidden checks (``python -m tests.grading.similarity.planted check
d``). class_d.py makes the rings from them.
"""

INDEPENDENT = {
    "alma": {  # Tensor.mT; the row maximum clamped from below, a keep-mask multiplied in
        "attention_scores": '''
def attention_scores(q, k):
    return (q @ k.mT) / q.size(-1) ** 0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    keep = torch.ones_like(scores) if mask is None else mask.to(scores.dtype).expand_as(scores)
    safe = torch.where(keep.bool(), scores, torch.full_like(scores, -torch.inf))
    top = safe.amax(dim=-1, keepdim=True).clamp(min=torch.finfo(scores.dtype).min)
    num = torch.exp(torch.where(keep.bool(), scores - top, torch.zeros_like(scores))) * keep
    return num / num.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(scores.dtype).tiny)
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
    "bex": {  # the book's code, as the chapter shows it
        "attention_scores": '''
def attention_scores(q, k):
    d_k = q.shape[-1]
    return q @ k.transpose(-2, -1) / math.sqrt(d_k)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    s = e.sum(dim=-1, keepdim=True)
    return torch.where(s > 0, e / s.clamp_min(torch.finfo(e.dtype).tiny), torch.zeros_like(e))
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
    "cyra": {  # an einsum; a softmax in log space
        "attention_scores": '''
def attention_scores(q, k):
    return torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    mask = mask.expand(scores.shape)
    s = scores.masked_fill(~mask, float("-inf"))
    peak = s.amax(-1, keepdim=True)
    peak = peak.masked_fill(~torch.isfinite(peak), 0.0)
    log_z = torch.log(torch.exp(s - peak).sum(-1, keepdim=True))
    log_w = (s - peak - log_z).masked_fill(~mask, float("-inf"))
    return torch.exp(log_w).nan_to_num(0.0)
''',
        "causal_mask": '''
def causal_mask(n):
    i = torch.arange(n)
    return i[:, None] >= i[None, :]
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = masked_softmax(attention_scores(q, k), mask)
    return torch.einsum("...ij,...jd->...id", w, v)
''',
    },
    "dax": {  # the scale folded into the queries; float64 inside the softmax
        "attention_scores": '''
def attention_scores(q, k):
    q = q * (1.0 / math.sqrt(q.shape[-1]))
    return torch.matmul(q, k.transpose(-1, -2))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    x = scores.double()
    if mask is not None:
        x = x.masked_fill(mask.logical_not(), -math.inf)
    hi = x.max(dim=-1, keepdim=True).values
    hi = torch.nan_to_num(hi, neginf=0.0)
    ex = (x - hi).exp()
    tot = ex.sum(dim=-1, keepdim=True)
    out = ex / torch.where(tot > 0, tot, torch.ones_like(tot))
    return out.to(scores.dtype)
''',
        "causal_mask": '''
def causal_mask(n):
    return ~torch.ones(n, n, dtype=torch.bool).triu(1)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = attention_scores(q, k)
    return torch.matmul(masked_softmax(scores, mask), v)
''',
    },
    "edda": {  # swapaxes and a reciprocal square root; the dtype's lowest value as the fill
        "attention_scores": '''
def attention_scores(q, k):
    scale = torch.rsqrt(torch.tensor(float(q.shape[-1]), dtype=q.dtype))
    return (q @ k.swapaxes(-1, -2)) * scale
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    lowest = torch.finfo(scores.dtype).min
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.broadcast_to(scores.shape)
    filled = torch.where(allowed, scores, torch.full_like(scores, lowest))
    top = filled.max(dim=-1, keepdim=True)[0]
    ex = torch.where(allowed, torch.exp(filled - top), torch.zeros_like(filled))
    den = ex.sum(dim=-1, keepdim=True)
    return ex / (den + (den == 0).to(den.dtype))
''',
        "causal_mask": '''
def causal_mask(n):
    rows = torch.arange(n).unsqueeze(1)
    cols = torch.arange(n).unsqueeze(0)
    return (rows - cols) >= 0
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attn = masked_softmax(attention_scores(q, k), mask)
    return attn.matmul(v)
''',
    },
    "flo": {  # a loop over the query rows of the softmax
        "attention_scores": '''
def attention_scores(q, k):
    d = q.shape[-1]
    return q.matmul(k.transpose(-2, -1)) / d ** 0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    mask = mask.expand(scores.shape)
    rows = []
    for i in range(scores.shape[-2]):
        s = scores[..., i, :]
        m = mask[..., i, :]
        s = s.masked_fill(~m, float("-inf"))
        top = s.amax(dim=-1, keepdim=True)
        top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
        e = torch.exp(s - top)
        z = e.sum(dim=-1, keepdim=True)
        rows.append(torch.where(z > 0, e / z.clamp_min(1e-38), torch.zeros_like(e)))
    return torch.stack(rows, dim=-2)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.tril(torch.ones(n, n)).bool()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
    "gwen": {  # the book's code, behind helpers in a cell of her own
        "attention_scores": '''
def attention_scores(q, k):
    return dot_scores(q, k) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = hide(scores, mask)
    e = torch.exp(scores - finite_row_max(scores))
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, e / total.clamp_min(torch.finfo(e.dtype).tiny), torch.zeros_like(e))
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
    "ike": {  # a product broadcast over the feature axis; a boolean keep-mask summed into the count
        "attention_scores": '''
def attention_scores(q, k):
    prod = q[..., :, None, :] * k[..., None, :, :]
    return prod.sum(-1) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    ok = torch.ones(scores.shape, dtype=torch.bool) if mask is None else mask.expand(scores.shape)
    any_ok = ok.any(dim=-1, keepdim=True)
    s = scores.masked_fill(~ok, float("-inf"))
    s = s - torch.where(any_ok, s.amax(dim=-1, keepdim=True), torch.zeros_like(s[..., :1]))
    e = s.exp()
    return torch.where(any_ok, e / e.sum(dim=-1, keepdim=True).clamp_min(1e-38), torch.zeros_like(e))
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.arange(n).view(1, n) <= torch.arange(n).view(n, 1)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = masked_softmax(attention_scores(q, k), mask)
    return (w[..., :, :, None] * v[..., None, :, :]).sum(-2)
''',
    },
    "joss": {  # divisions spelled out; the denominator replaced where it is zero
        "attention_scores": '''
def attention_scores(q, k):
    return torch.div(torch.matmul(q, torch.transpose(k, -2, -1)), math.sqrt(k.shape[-1]))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    mx = torch.amax(scores, dim=-1, keepdim=True)
    mx = torch.where(mx == float("-inf"), torch.zeros_like(mx), mx)
    numer = torch.exp(torch.sub(scores, mx))
    denom = torch.sum(numer, dim=-1, keepdim=True)
    denom = torch.where(denom == 0, torch.ones_like(denom), denom)
    return torch.div(numer, denom)
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
    s = attention_scores(q, k)
    p = masked_softmax(s, mask)
    return torch.matmul(p, v)
''',
    },
    "kit": {  # everything on one line where it fits
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    s = scores if mask is None else scores.masked_fill(~mask, -float("inf"))
    e = torch.exp(s - s.amax(-1, keepdim=True).nan_to_num(0.0, neginf=0.0))
    return e / e.sum(-1, keepdim=True).clamp(min=torch.finfo(e.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n).tril() > 0
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
    "lum": {  # logsumexp, the empty rows found first
        "attention_scores": '''
def attention_scores(q, k):
    k_t = k.transpose(-2, -1)
    return (q @ k_t) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
    full = mask.expand(scores.shape)
    empty = ~full.any(dim=-1, keepdim=True)
    s = scores.masked_fill(~full, float("-inf")).masked_fill(empty, 0.0)
    w = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
    return w.masked_fill(empty, 0.0)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal=0)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.matmul(masked_softmax(attention_scores(q, k), mask), v)
''',
    },
    "mika": {  # close to the book, written out by hand
        "attention_scores": '''
def attention_scores(q, k):
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1)
    return scores / math.sqrt(d_k)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask == False, float("-inf"))  # noqa: E712
    biggest = scores.amax(dim=-1, keepdim=True)
    biggest = torch.where(biggest.isfinite(), biggest, torch.zeros_like(biggest))
    e = torch.exp(scores - biggest)
    z = e.sum(dim=-1, keepdim=True)
    return torch.where(z > 0, e / z, torch.zeros_like(e))
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(attention_scores(q, k), mask)
    out = weights @ v
    return out
''',
    },
    "nash": {  # the mask as an additive bias of the dtype's lowest value
        "attention_scores": '''
def attention_scores(q, k):
    return torch.matmul(q / math.sqrt(q.shape[-1]), k.mT)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones((), dtype=torch.bool)
    mask = mask.expand(scores.shape)
    bias = torch.zeros_like(scores).masked_fill(~mask, torch.finfo(scores.dtype).min)
    z = (scores + bias).clamp(min=torch.finfo(scores.dtype).min)
    z = z - z.amax(dim=-1, keepdim=True)
    e = z.exp() * mask
    tot = e.sum(dim=-1, keepdim=True)
    return e / torch.where(tot > 0, tot, torch.ones_like(tot))
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool)).T
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    probs = masked_softmax(attention_scores(q, k), mask)
    return probs @ v
''',
    },
    "oda": {  # a flattened batch and bmm
        "attention_scores": '''
def attention_scores(q, k):
    *batch, n_q, d = q.shape
    n_k = k.shape[-2]
    qf = q.reshape(-1, n_q, d)
    kf = k.reshape(-1, n_k, d)
    out = torch.bmm(qf, kf.transpose(1, 2)) / math.sqrt(d)
    return out.reshape(*batch, n_q, n_k)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.max(dim=-1, keepdim=True).values
    m = m.masked_fill(m == float("-inf"), 0)
    e = torch.exp(scores - m)
    d = e.sum(dim=-1, keepdim=True)
    return e / d.masked_fill(d == 0, 1)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.full((n, n), True).tril()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = masked_softmax(attention_scores(q, k), mask)
    *batch, n_q, n_k = w.shape
    out = torch.bmm(w.reshape(-1, n_q, n_k), v.reshape(-1, n_k, v.shape[-1]))
    return out.reshape(*batch, n_q, v.shape[-1])
''',
    },
    "pim": {  # the softmax over exponents shifted by a detached maximum; sums kept as float64
        "attention_scores": '''
def attention_scores(q, k):
    return (q @ k.transpose(-2, -1)).div(math.sqrt(q.shape[-1]))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    neg = torch.tensor(float("-inf"), dtype=scores.dtype)
    s = scores if mask is None else torch.where(mask, scores, neg)
    shift = s.detach().amax(-1, keepdim=True)
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    e = torch.exp(s - shift)
    total = e.double().sum(-1, keepdim=True)
    safe = torch.where(total > 0, total, torch.ones_like(total))
    return (e.double() / safe).to(scores.dtype)
''',
        "causal_mask": '''
def causal_mask(n):
    idx = torch.arange(n)
    return idx.unsqueeze(0).le(idx.unsqueeze(1))
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    a = masked_softmax(attention_scores(q, k), mask)
    return a @ v
''',
    },
}

#: cells a learner added, each after the solution cell it follows
ADDED = {
    "gwen": [("attention_scores", '''
def dot_scores(q, k):
    return q @ k.transpose(-2, -1)


def hide(scores, mask):
    return scores.masked_fill(~mask, float("-inf"))


def finite_row_max(scores):
    row_max = scores.amax(dim=-1, keepdim=True)
    return torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
''')],
}
