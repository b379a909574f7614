"""Planted class A, 02-attention: seventeen learners who worked alone, in seventeen styles, as data.

Each learner maps an exercise (its solution cell's grade_id) to the cell they handed in. Every one of them
passes the hidden checks (``python -m tests.grading.similarity.planted check``). They were written to be
as varied as a real class and no more: on the short exercises most of them write the one natural form
(``q @ k.transpose(-2, -1) / math.sqrt(d)``), on masked_softmax they differ in how they mask (-inf, the
dtype's lowest value, a multiplicative mask, a loop over rows), how they keep an empty row finite, and how
they normalise. Ada and Jo write the textbook version, close to the book's.
"""

INDEPENDENT = {
    "ada": {  # the textbook version
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
    row_max = torch.nan_to_num(row_max, neginf=0.0)
    e = torch.exp(scores - row_max)
    return e / e.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
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
    "ben": {  # the dtype's lowest value instead of -inf, then the mask multiplied back in
        "attention_scores": '''
def attention_scores(q, k):
    scale = 1.0 / math.sqrt(k.size(-1))
    return torch.matmul(q, k.transpose(-1, -2)) * scale
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    lowest = torch.finfo(scores.dtype).min
    filled = scores.masked_fill(~mask, lowest)
    shifted = filled - filled.max(dim=-1, keepdim=True)[0]
    w = shifted.exp() * mask
    denom = w.sum(-1, keepdim=True)
    denom = torch.where(denom == 0, torch.ones_like(denom), denom)
    return w / denom
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.tril(torch.ones(n, n)).bool()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = attention_scores(q, k)
    probs = masked_softmax(scores, mask)
    return torch.matmul(probs, v)
''',
    },
    "cara": {  # a loop over the rows
        "attention_scores": '''
def attention_scores(q, k):
    d = q.shape[-1]
    return torch.einsum("...id,...jd->...ij", q, k) / d ** 0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    n = scores.shape[-1]
    if mask is None:
        mask = torch.ones(scores.shape, dtype=torch.bool)
    keep = torch.broadcast_to(mask, scores.shape).reshape(-1, n)
    rows = []
    for row, ok in zip(scores.reshape(-1, n), keep):
        out = torch.zeros_like(row)
        if ok.any():
            allowed = row[ok]
            ex = torch.exp(allowed - allowed.max())
            out[ok] = ex / ex.sum()
        rows.append(out)
    return torch.stack(rows).reshape(scores.shape)
''',
        "causal_mask": '''
def causal_mask(n):
    idx = torch.arange(n)
    return idx[:, None] >= idx[None, :]
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attn = masked_softmax(attention_scores(q, k), mask)
    return torch.einsum("...ij,...jd->...id", attn, v)
''',
    },
    "dev": {  # logsumexp, with empty rows handled before it
        "attention_scores": '''
def attention_scores(q, k):
    return q.matmul(k.mT) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
    mask = mask.expand(scores.shape)
    empty = ~mask.any(dim=-1, keepdim=True)
    logits = scores.masked_fill(~mask, -math.inf).masked_fill(empty, 0.0)
    log_z = torch.logsumexp(logits, dim=-1, keepdim=True)
    return torch.exp(logits - log_z).masked_fill(empty, 0.0)
''',
        "causal_mask": '''
def causal_mask(n):
    return ~torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
    "eli": {  # a multiplicative mask and a detached floor, no infinity anywhere
        "attention_scores": '''
def attention_scores(q, k):
    dk = k.shape[-1]
    return (q / math.sqrt(dk)) @ k.transpose(-2, -1)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    keep = torch.ones_like(scores) if mask is None else mask.to(scores.dtype).expand_as(scores)
    floor = scores.detach().min()
    filled = keep * scores + (1 - keep) * floor
    top = filled.amax(-1, keepdim=True)
    num = torch.exp(filled - top) * keep
    den = num.sum(-1, keepdim=True)
    return num / (den + (den == 0).to(den.dtype))
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
    a = masked_softmax(s, mask)
    out = a @ v
    return out
''',
    },
    "fay": {  # fills a copy in place
        "attention_scores": '''
def attention_scores(q, k):
    return torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    s = scores.clone()
    if mask is not None:
        s[~mask.expand_as(s)] = float("-inf")
    peak = s.amax(-1, keepdim=True)
    peak = torch.where(torch.isneginf(peak), torch.zeros_like(peak), peak)
    ex = (s - peak).exp()
    z = ex.sum(-1, keepdim=True)
    return ex / torch.where(z > 0, z, torch.ones_like(z))
''',
        "causal_mask": '''
def causal_mask(n):
    rows = torch.arange(n).unsqueeze(1)
    cols = torch.arange(n).unsqueeze(0)
    return cols <= rows
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(attention_scores(q, k), mask)
    return torch.matmul(weights, v)
''',
    },
    "gus": {  # torch.where everywhere, max then unsqueeze
        "attention_scores": '''
def attention_scores(q, k):
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1)
    return scores / math.sqrt(d_k)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand(scores.shape)
    neg = torch.tensor(float("-inf"), dtype=scores.dtype)
    z = torch.where(allowed, scores, neg)
    peak = z.max(-1).values.unsqueeze(-1)
    peak = peak.masked_fill(~allowed.any(-1, keepdim=True), 0)
    num = (z - peak).exp()
    return num / num.sum(-1).unsqueeze(-1).clamp(min=torch.finfo(num.dtype).tiny)
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
    "hana": {  # a nested helper for the stable exponential
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    def stable_exp(x):
        top = x.amax(dim=-1, keepdim=True).detach()
        top = torch.nan_to_num(top, nan=0.0, posinf=0.0, neginf=0.0)
        return torch.exp(x - top)

    if mask is not None:
        scores = torch.masked_fill(scores, ~mask, -torch.inf)
    ex = stable_exp(scores)
    total = ex.sum(dim=-1, keepdim=True)
    return ex / total.clamp_min(torch.finfo(ex.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones((n, n), dtype=torch.bool).tril(0)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    p = masked_softmax(attention_scores(q, k), mask=mask)
    return p @ v
''',
    },
    "ivan": {  # which rows have any key, then a masked normaliser
        "attention_scores": '''
def attention_scores(q, k):
    k_t = k.transpose(-2, -1)
    return torch.matmul(q, k_t) / (q.shape[-1] ** 0.5)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = scores.new_ones(scores.shape, dtype=torch.bool)
    mask = mask & torch.ones_like(scores, dtype=torch.bool)
    has_any = mask.any(dim=-1, keepdim=True)
    hidden = scores.masked_fill(~mask, float("-inf"))
    offset = torch.where(has_any, hidden.amax(-1, keepdim=True), torch.zeros_like(has_any, dtype=scores.dtype))
    w = torch.exp(hidden - offset)
    norm = torch.where(has_any, w.sum(-1, keepdim=True), torch.ones_like(offset))
    return w / norm
''',
        "causal_mask": '''
def causal_mask(n):
    r = torch.arange(n)
    return r.view(n, 1) >= r.view(1, n)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = masked_softmax(attention_scores(q, k), mask)
    return w.matmul(v)
''',
    },
    "jo": {  # the textbook version, with a clamp at the dtype's lowest value
        "attention_scores": '''
def attention_scores(q, k):
    d_k = q.shape[-1]
    return q @ k.transpose(-2, -1) / math.sqrt(d_k)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    logits = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    finite_max = torch.clamp(logits.amax(-1, keepdim=True), min=torch.finfo(logits.dtype).min)
    unnorm = (logits - finite_max).exp()
    return unnorm / unnorm.sum(-1, keepdim=True).clamp_min(torch.finfo(logits.dtype).tiny)
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
    "kim": {  # flattens to rows and back
        "attention_scores": '''
def attention_scores(q, k):
    return torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    shape = scores.shape
    x = scores.reshape(-1, shape[-1])
    if mask is not None:
        m = mask.broadcast_to(shape).reshape(-1, shape[-1])
        x = x.masked_fill(m.logical_not(), -float("inf"))
    row_max, _ = x.max(dim=1, keepdim=True)
    row_max = row_max.masked_fill(row_max.isinf(), 0.0)
    e = (x - row_max).exp()
    out = e / e.sum(dim=1, keepdim=True).clamp(min=torch.finfo(e.dtype).tiny)
    return out.reshape(shape)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.arange(n).unsqueeze(-1) - torch.arange(n).unsqueeze(0) >= 0
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attention = masked_softmax(attention_scores(q, k), mask)
    return attention @ v
''',
    },
    "lena": {  # where() on the exponent: masked keys become exp(-inf)
        "attention_scores": '''
def attention_scores(q, k):
    return (q @ k.swapaxes(-1, -2)).div(math.sqrt(k.shape[-1]))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    keep = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    minus_inf = scores.new_tensor(-float("inf"))
    shift = torch.where(keep, scores, minus_inf).amax(dim=-1, keepdim=True)
    shift = torch.where(shift.isfinite(), shift, shift.new_zeros(()))
    numer = torch.exp(torch.where(keep, scores - shift, minus_inf))
    return numer / numer.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(numer.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    full = torch.ones(n, n, dtype=torch.bool)
    return torch.tril(full, diagonal=0)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = attention_scores(q, k)
    return masked_softmax(scores, mask) @ v
''',
    },
    "nia": {  # the row sums as a product with a column of ones
        "attention_scores": '''
def attention_scores(q, k):
    d = q.shape[-1]
    return q @ k.transpose(-2, -1) / math.sqrt(d)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    n_k = scores.shape[-1]
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    peak = scores.max(dim=-1, keepdim=True).values
    peak = torch.where(peak == float("-inf"), torch.zeros_like(peak), peak)
    e = torch.exp(scores - peak)
    ones = torch.ones(n_k, 1, dtype=e.dtype)
    denom = e @ ones
    return e / torch.where(denom > 0, denom, torch.ones_like(denom))
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n).tril().to(torch.bool)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    },
    "omar": {  # the mask as an additive bias
        "attention_scores": '''
def attention_scores(q, k):
    d_k = k.shape[-1]
    return torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    bias = torch.zeros_like(scores)
    if mask is not None:
        bias = bias.masked_fill(~mask, float("-inf"))
    logits = scores + bias
    best = logits.amax(dim=-1, keepdim=True)
    best = best.masked_fill(torch.isinf(best), 0.0)
    exps = torch.exp(logits - best)
    sums = exps.sum(dim=-1, keepdim=True)
    sums = sums.masked_fill(sums == 0, 1.0)
    return exps / sums
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1).logical_not()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    a = masked_softmax(attention_scores(q, k), mask)
    return torch.matmul(a, v)
''',
    },
    "pia": {  # a top-level helper for the row maximum, written in a cell of her own
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask == False, -math.inf)  # noqa: E712
    peak = safe_row_max(scores)
    weights = (scores - peak).exp()
    norm = weights.sum(-1, keepdim=True)
    return weights / torch.maximum(norm, torch.full_like(norm, 1e-30))
''',
        "causal_mask": '''
def causal_mask(n):
    out = torch.ones(n, n, dtype=torch.bool)
    return torch.tril(out)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask).matmul(v)
''',
    },
    "quinn": {  # everything in float64, then back
        "attention_scores": '''
def attention_scores(q, k):
    scale = math.sqrt(q.shape[-1])
    return torch.matmul(q, torch.transpose(k, -2, -1)) / scale
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    x = scores.double()
    if mask is not None:
        x = x.masked_fill(~mask, float("-inf"))
    hi = x.amax(dim=-1, keepdim=True)
    hi = torch.where(torch.isfinite(hi), hi, torch.zeros_like(hi))
    p = torch.exp(x - hi)
    total = p.sum(dim=-1, keepdim=True)
    p = p / torch.where(total == 0, torch.ones_like(total), total)
    return p.to(scores.dtype)
''',
        "causal_mask": '''
def causal_mask(n):
    i = torch.arange(n).reshape(n, 1)
    j = torch.arange(n).reshape(1, n)
    return j <= i
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(attention_scores(q, k), mask)
    return weights @ v
''',
    },
    "mona": {  # names that shadow builtins: input, max, sum, type
        "attention_scores": '''
def attention_scores(q, k):
    type = q.dtype
    return (q @ k.transpose(-2, -1)) / torch.sqrt(torch.tensor(q.shape[-1], dtype=type))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    input = scores
    if mask is not None:
        input = input.masked_fill(~mask, -float("inf"))
    max = input.amax(dim=-1, keepdim=True)
    max = max.clamp_min(torch.finfo(input.dtype).min)
    input = torch.exp(input - max)
    sum = input.sum(dim=-1, keepdim=True)
    sum = torch.where(sum == 0, torch.ones_like(sum), sum)
    return input / sum
''',
        "causal_mask": '''
def causal_mask(n):
    all = torch.ones(n, n, dtype=torch.bool)
    return all.triu(1).logical_not()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    map = masked_softmax(attention_scores(q, k), mask)
    return map @ v
''',
    },
}

#: cells a learner added to the notebook: (the solution cell it follows, its code)
ADDED = {
    "pia": [("attention_scores", '''
def safe_row_max(x):
    """The row maximum, 0 where a row has no finite entry (so that exp(x - max) stays finite)."""
    m = x.amax(dim=-1, keepdim=True)
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))
''')],
}

#: the planted copies: who copied whom (a learner of INDEPENDENT, or the reference), under which disguise, and
#: what they handed in (their own work where they did not copy)
COPIES = [
    dict(learner="rosa", source="cara", disguise="renamed", cells={
        "attention_scores": '''
def attention_scores(q, k):
    dim = q.shape[-1]
    return torch.einsum("...ad,...bd->...ab", q, k) / dim ** 0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    width = scores.shape[-1]
    if mask is None:
        mask = torch.ones(scores.shape, dtype=torch.bool)
    visible = torch.broadcast_to(mask, scores.shape).reshape(-1, width)
    result = []
    for line, seen in zip(scores.reshape(-1, width), visible):
        probs = torch.zeros_like(line)
        if seen.any():
            vals = line[seen]
            exps = torch.exp(vals - vals.max())
            probs[seen] = exps / exps.sum()
        result.append(probs)
    return torch.stack(result).reshape(scores.shape)
''',
        "causal_mask": '''
def causal_mask(n):
    pos = torch.arange(n)
    return pos[:, None] >= pos[None, :]
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = masked_softmax(attention_scores(q, k), mask)
    return torch.einsum("...qk,...kv->...qv", w, v)
''',
    }),
    dict(learner="sam", source="ben", disguise="added cells", cells={
        "attention_scores": '''
def attention_scores(q, k):
    return _scores(q, k)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    return _normalise(scores, mask)
''',
        "causal_mask": '''
def causal_mask(n):
    return _lower(n)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return _attend(q, k, v, mask)
''',
    }, added=[("attention_scores", '''
def _scores(q, k):
    factor = 1.0 / math.sqrt(k.size(-1))
    return torch.matmul(q, k.transpose(-1, -2)) * factor


def _normalise(scores, mask):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    smallest = torch.finfo(scores.dtype).min
    x = scores.masked_fill(~mask, smallest)
    x = x - x.max(dim=-1, keepdim=True)[0]
    num = x.exp() * mask
    den = num.sum(-1, keepdim=True)
    den = torch.where(den == 0, torch.ones_like(den), den)
    return num / den


def _lower(n):
    return torch.tril(torch.ones(n, n)).bool()


def _attend(q, k, v, mask):
    s = attention_scores(q, k)
    p = masked_softmax(s, mask)
    return torch.matmul(p, v)
''')]),
    dict(learner="tara", source="hana", disguise="one exercise copied", exercises=["masked_softmax"], cells={
        "attention_scores": '''
def attention_scores(q, k):
    return torch.matmul(q, k.transpose(-2, -1)).mul(1 / math.sqrt(q.shape[-1]))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    def safe_exp(t):
        m = t.amax(dim=-1, keepdim=True).detach()
        m = torch.nan_to_num(m, nan=0.0, posinf=0.0, neginf=0.0)
        return torch.exp(t - m)

    if mask is not None:
        scores = torch.masked_fill(scores, ~mask, -torch.inf)
    num = safe_exp(scores)
    den = num.sum(dim=-1, keepdim=True)
    return num / den.clamp_min(torch.finfo(num.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    upper = torch.ones(n, n, dtype=torch.bool).triu(1)
    return ~upper
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = attention_scores(q, k)
    weights = masked_softmax(scores, mask)
    return torch.einsum("...nm,...md->...nd", weights, v)
''',
    }),
    dict(learner="uma", source="fay", disguise="dead code", cells={
        "attention_scores": '''
def attention_scores(q, k):
    n_q = q.shape[-2]
    out = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    check = out.shape
    return out
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    s = scores.clone()
    original = scores.detach().clone()
    if mask is not None:
        s[~mask.expand_as(s)] = float("-inf")
        n_masked = (~mask).sum()
    peak = s.amax(-1, keepdim=True)
    lowest = s.amin(-1, keepdim=True)
    peak = torch.where(torch.isneginf(peak), torch.zeros_like(peak), peak)
    debug = peak.mean()
    ex = (s - peak).exp()
    backup = ex.clone()
    z = ex.sum(-1, keepdim=True)
    if False:
        z = z + 1e-9
    return ex / torch.where(z > 0, z, torch.ones_like(z))
''',
        "causal_mask": '''
def causal_mask(n):
    rows = torch.arange(n).unsqueeze(1)
    size = rows.numel()
    cols = torch.arange(n).unsqueeze(0)
    print(rows.shape, cols.shape)
    return cols <= rows
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    d = q.shape[-1]
    weights = masked_softmax(attention_scores(q, k), mask)
    unused = weights.sum(-1)
    return torch.matmul(weights, v)
''',
    }),
    dict(learner="vic", source="hana", disguise="helpers inlined", cells={
        "attention_scores": '''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = torch.masked_fill(scores, ~mask, -torch.inf)
    biggest = scores.amax(dim=-1, keepdim=True).detach()
    biggest = torch.nan_to_num(biggest, nan=0.0, posinf=0.0, neginf=0.0)
    expd = torch.exp(scores - biggest)
    total = expd.sum(dim=-1, keepdim=True)
    return expd / total.clamp_min(torch.finfo(expd.dtype).tiny)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones((n, n), dtype=torch.bool).tril(0)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    p = masked_softmax(attention_scores(q, k), mask=mask)
    return p @ v
''',
    }),
    dict(learner="wes", source="kim", disguise="helpers extracted", cells={
        "attention_scores": '''
def attention_scores(q, k):
    return torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def as_rows(x, width):
    return x.reshape(-1, width)


def zero_empty(peaks):
    return peaks.masked_fill(peaks.isinf(), 0.0)


def normalise_rows(e):
    return e / e.sum(dim=1, keepdim=True).clamp(min=torch.finfo(e.dtype).tiny)


def masked_softmax(scores, mask=None):
    shape = scores.shape
    x = as_rows(scores, shape[-1])
    if mask is not None:
        x = x.masked_fill(as_rows(mask.broadcast_to(shape), shape[-1]).logical_not(), -float("inf"))
    peaks, _ = x.max(dim=1, keepdim=True)
    e = (x - zero_empty(peaks)).exp()
    return normalise_rows(e).reshape(shape)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.arange(n).unsqueeze(-1) - torch.arange(n).unsqueeze(0) >= 0
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attention = masked_softmax(attention_scores(q, k), mask)
    return attention @ v
''',
    }),
    dict(learner="xia", source="cara", disguise="loop style changed", cells={
        "attention_scores": '''
def attention_scores(q, k):
    d = q.shape[-1]
    return torch.einsum("...id,...jd->...ij", q, k) / d ** 0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    n = scores.shape[-1]
    if mask is None:
        mask = torch.ones(scores.shape, dtype=torch.bool)
    keep = torch.broadcast_to(mask, scores.shape).reshape(-1, n)
    flat = scores.reshape(-1, n)
    rows = []
    i = 0
    while i < len(flat):
        row, ok = flat[i], keep[i]
        out = torch.zeros_like(row)
        if ok.any():
            allowed = row[ok]
            ex = torch.exp(allowed - allowed.max())
            out[ok] = ex / ex.sum()
        rows.append(out)
        i += 1
    return torch.stack(rows).reshape(scores.shape)
''',
        "causal_mask": '''
def causal_mask(n):
    idx = torch.arange(n)
    return idx[:, None] >= idx[None, :]
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    attn = masked_softmax(attention_scores(q, k), mask)
    return torch.einsum("...ij,...jd->...id", attn, v)
''',
    }),
    dict(learner="yan", source="ivan", disguise="calls respelled", cells={
        "attention_scores": '''
def attention_scores(q, k):
    k_t = torch.transpose(k, dim0=-2, dim1=-1)
    return q.matmul(k_t) / (q.size(-1) ** 0.5)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = scores.new_ones(scores.size(), dtype=torch.bool)
    mask = torch.logical_and(mask, torch.ones_like(scores, dtype=torch.bool))
    has_any = torch.any(mask, -1, True)
    hidden = torch.masked_fill(scores, torch.logical_not(mask), float("-inf"))
    offset = torch.where(has_any, torch.amax(hidden, -1, True), torch.zeros_like(has_any, dtype=scores.dtype))
    w = (hidden - offset).exp()
    norm = torch.where(has_any, torch.sum(w, dim=-1, keepdim=True), offset.new_ones(offset.size()))
    return torch.div(w, norm)
''',
        "causal_mask": '''
def causal_mask(n):
    r = torch.arange(n)
    return torch.ge(r.view(n, 1), r.view(1, n))
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    w = masked_softmax(attention_scores(q, k), mask=mask)
    return torch.matmul(w, v)
''',
    }),
    dict(learner="zed", source="mona", disguise="builtin-named locals renamed", cells={
        "attention_scores": '''
def attention_scores(q, k):
    kind = q.dtype
    return (q @ k.transpose(-2, -1)) / torch.sqrt(torch.tensor(q.shape[-1], dtype=kind))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    x = scores
    if mask is not None:
        x = x.masked_fill(~mask, -float("inf"))
    top = x.amax(dim=-1, keepdim=True)
    top = top.clamp_min(torch.finfo(x.dtype).min)
    x = torch.exp(x - top)
    total = x.sum(dim=-1, keepdim=True)
    total = torch.where(total == 0, torch.ones_like(total), total)
    return x / total
''',
        "causal_mask": '''
def causal_mask(n):
    full = torch.ones(n, n, dtype=torch.bool)
    return full.triu(1).logical_not()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(attention_scores(q, k), mask)
    return weights @ v
''',
    }),
    dict(learner="ari", source="dev", disguise="reordered", cells={
        "attention_scores": '''
def attention_scores(q, k):
    return q.matmul(k.mT) / math.sqrt(q.shape[-1])
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is None:
        return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
    mask = mask.expand(scores.shape)
    blocked = ~mask
    empty = ~mask.any(dim=-1, keepdim=True)
    x = scores.masked_fill(blocked, -math.inf).masked_fill(empty, 0.0)
    lz = torch.logsumexp(x, dim=-1, keepdim=True)
    return torch.exp(x - lz).masked_fill(empty, 0.0)
''',
        "causal_mask": '''
def causal_mask(n):
    return ~torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    }),
    dict(learner="bo", source="eli", disguise="several at once (renamed, reordered, respelled, dead code, added cell)",
         cells={
        "attention_scores": '''
def attention_scores(q, k):
    width = k.size(-1)
    unused = q.size(0)
    return torch.matmul(q / math.sqrt(width), k.transpose(-1, -2))
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    lowest = scores.detach().min()
    w = torch.ones_like(scores) if mask is None else mask.to(scores.dtype).expand_as(scores)
    mixed = scores * w + lowest * (1 - w)
    maxima = torch.amax(mixed, -1, True)
    spare = mixed.clone()
    numer = w * torch.exp(mixed - maxima)
    denom = torch.sum(numer, -1, keepdim=True)
    return numer / (denom + (denom == 0).to(denom.dtype))
''',
        "causal_mask": '''
def causal_mask(n):
    return _staircase(n)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(attention_scores(q, k), mask)
    result = torch.matmul(weights, v)
    return result
''',
    }, added=[("causal_mask", '''
def _staircase(n):
    grid = torch.zeros(n, n, dtype=torch.bool)
    for row in range(n):
        grid[row, : row + 1] = True
    return grid
''')]),
    dict(learner="cy", source="gus", disguise="several at once (extracted helper, respelled, renamed)", cells={
        "attention_scores": '''
def attention_scores(q, k):
    dk = q.size(-1)
    product = torch.matmul(q, k.transpose(-2, -1))
    return product / math.sqrt(dk)
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    ok = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand(scores.size())
    z = torch.where(ok, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    top = _row_peak(z, ok)
    e = torch.exp(z - top)
    return e / torch.clamp(torch.sum(e, -1).unsqueeze(-1), min=torch.finfo(e.dtype).tiny)


def _row_peak(z, ok):
    top = torch.max(z, dim=-1).values.unsqueeze(-1)
    return top.masked_fill(~torch.any(ok, dim=-1, keepdim=True), 0)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril()
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask).matmul(v)
''',
    }),
    dict(learner="dee", source="(reference)", disguise="the reference pasted, names changed", cells={
        "attention_scores": '''
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_k, got {tuple(q.shape)} and {tuple(k.shape)}")
    scale = 1.0 / math.sqrt(q.shape[-1])
    return (q @ k.transpose(-2, -1)) * scale
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"mask must be boolean, got {mask.dtype}")
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    if mask is not None:
        x = x.masked_fill(~mask, float("-inf"))
    m = x.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m.detach())
    z = e.sum(dim=-1, keepdim=True)
    return (e / z.clamp_min(1.0)).to(scores.dtype)
''',
        "causal_mask": '''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal=0)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must share n_k, got {tuple(k.shape)} and {tuple(v.shape)}")
    return masked_softmax(attention_scores(q, k), mask) @ v
''',
    }),
    dict(learner="eve", source="cara", disguise="calls respelled (a second copy of one source)", cells={
        "attention_scores": '''
def attention_scores(q, k):
    return torch.einsum("...xd,...yd->...xy", q, k) / q.size(-1) ** 0.5
''',
        "masked_softmax": '''
def masked_softmax(scores, mask=None):
    n = scores.size(-1)
    if mask is None:
        mask = torch.ones(scores.size(), dtype=torch.bool)
    keep = mask.broadcast_to(scores.size()).reshape(-1, n)
    rows = []
    for row, ok in zip(torch.reshape(scores, (-1, n)), keep):
        out = torch.zeros_like(row)
        if torch.any(ok):
            allowed = row[ok]
            ex = (allowed - torch.max(allowed)).exp()
            out[ok] = torch.div(ex, torch.sum(ex))
        rows.append(out)
    return torch.reshape(torch.stack(rows, dim=0), scores.size())
''',
        "causal_mask": '''
def causal_mask(n):
    idx = torch.arange(n)
    return torch.ge(idx.unsqueeze(1), idx.unsqueeze(0))
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.einsum("...ij,...jd->...id", masked_softmax(attention_scores(q, k), mask), v)
''',
    }),
]
