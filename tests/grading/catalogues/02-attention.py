"""Plausible wrong implementations for assignment 02-attention, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/02-attention/attention.ipynb with ``source``; the hidden tests of
that exercise must fail on it (tests/grading/test_catalogues.py). ``mistake`` says what
a learner got wrong, in the words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ attention_scores
    dict(exercise="attention_scores", diagnosis="Likely mistake: the scores are not scaled:", mistake="no scaling",
         source='''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1)
'''),
    dict(exercise="attention_scores", diagnosis="Likely mistake: the scores are divided by",
         mistake="divides by d_k instead of sqrt(d_k)", source='''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / q.shape[-1]
'''),
    dict(exercise="attention_scores", diagnosis="Likely mistake: the scores are multiplied",
         mistake="multiplies by sqrt(d_k)", source='''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1])
'''),
    dict(exercise="attention_scores", diagnosis="raised",
         mistake="k.T reverses every axis (wrong with batch dimensions)", source='''
def attention_scores(q, k):
    return q @ k.T / math.sqrt(q.shape[-1])
'''),
    dict(exercise="attention_scores", diagnosis="Likely mistake: the result is (n_k, n_q):",
         mistake="keys times queries: (n_k, n_q) result", source='''
def attention_scores(q, k):
    return k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1])
'''),
    dict(exercise="attention_scores", diagnosis="Likely mistake: the scale uses the sequence",
         mistake="d_k read from the wrong axis (q.shape[0])", source='''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[0])
'''),
    dict(exercise="attention_scores", diagnosis="Likely mistake: the scale uses the sequence",
         mistake="scale by the number of keys", source='''
def attention_scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])
'''),
    dict(exercise="attention_scores", diagnosis="returned dtype",
         mistake="casts to float32 (loses float64 inputs' dtype)", source='''
def attention_scores(q, k):
    return q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.shape[-1])
'''),
    dict(exercise="attention_scores", diagnosis="raised", mistake="scales the queries in place", source='''
def attention_scores(q, k):
    q /= math.sqrt(q.shape[-1])
    return q @ k.transpose(-2, -1)
'''),
    dict(exercise="attention_scores", diagnosis="cut off from the autograd graph",
         mistake="detaches the result from autograd", source='''
def attention_scores(q, k):
    return (q @ k.transpose(-2, -1)).detach() / math.sqrt(q.shape[-1])
'''),
    dict(exercise="attention_scores", diagnosis="does the exercise for you",
         mistake="calls torch's fused attention to get the scores", source='''
def attention_scores(q, k):
    import torch.nn.functional as F
    eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-2], -1, -1)
    w = F.scaled_dot_product_attention(q, k, eye)
    return torch.log(w) + 0 * q.sum()
'''),
    dict(exercise="attention_scores", diagnosis="calls the reference", mistake="calls the reference", source='''
def attention_scores(q, k):
    from course_lib.attention import attention_scores as ref
    return ref(q, k)
'''),
    # ------------------------------------------------------------ masked_softmax
    dict(exercise="masked_softmax", diagnosis="Likely mistake: the softmax normalizes over",
         mistake="normalizes over the queries (dim=-2)", source='''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-2, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    s = e.sum(dim=-2, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))
'''),
    dict(exercise="masked_softmax", diagnosis="Likely mistake: the mask is inverted: True",
         mistake="mask inverted (True treated as blocked)", source='''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    s = e.sum(dim=-1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))
'''),
    dict(exercise="masked_softmax", diagnosis="Likely mistake: the mask is ignored: set masked", mistake="mask ignored",
         source='''
def masked_softmax(scores, mask=None):
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
'''),
    dict(exercise="masked_softmax", diagnosis="Likely mistake: masked scores are set to 0",
         mistake="masked scores set to 0 instead of -inf", source='''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
'''),
    dict(exercise="masked_softmax", diagnosis="gradient with respect to",
         mistake="no max subtraction: overflows on large scores", source='''
def masked_softmax(scores, mask=None):
    e = torch.exp(scores)
    if mask is not None:
        e = e * mask
    s = e.sum(dim=-1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))
'''),
    dict(exercise="masked_softmax", diagnosis="contains NaN", mistake="fully masked rows give NaN", source='''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
'''),
    dict(exercise="masked_softmax", diagnosis="Likely mistake: masked weights are zeroed",
         mistake="zeroes masked weights after normalizing (rows no longer sum to 1)", source='''
def masked_softmax(scores, mask=None):
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    w = e / e.sum(dim=-1, keepdim=True)
    return w if mask is None else w * mask
'''),
    dict(exercise="masked_softmax", diagnosis="Likely mistake: a row with no allowed key",
         mistake="a large negative number instead of -inf: fully masked rows become uniform", source='''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
'''),
    dict(exercise="masked_softmax", diagnosis="gradient with respect to",
         mistake="subtracts the global maximum, not each row's: rows underflow to 0/0", source='''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = (torch.exp(scores - scores[torch.isfinite(scores)].max()) if torch.isfinite(scores).any()
         else torch.zeros_like(scores))
    s = e.sum(dim=-1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))
'''),
    dict(exercise="masked_softmax", diagnosis="raised", mistake="masks the scores in place", source='''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    s = e.sum(dim=-1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))
'''),
    dict(exercise="masked_softmax", diagnosis="does the exercise for you",
         mistake="uses torch.softmax (the exercise is to write it out)", source='''
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
'''),
    dict(exercise="masked_softmax", diagnosis="does the exercise for you",
         mistake="uses the Tensor.softmax method through an alias", source='''
_sm = torch.Tensor.softmax
def masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(_sm(scores, -1), nan=0.0)
'''),
    dict(exercise="masked_softmax", diagnosis="calls the reference", mistake="calls the reference through an alias",
         source='''
import course_lib.attention as _ca
_f = _ca.masked_softmax
def masked_softmax(scores, mask=None):
    return _f(scores, mask)
'''),
    dict(exercise="masked_softmax", diagnosis="returned dtype", mistake="computes in float32 whatever the input dtype",
         source='''
def masked_softmax(scores, mask=None):
    scores = scores.float()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    s = e.sum(dim=-1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))
'''),
    # ------------------------------------------------------------ causal_mask
    dict(exercise="causal_mask", diagnosis="Likely mistake: off by one: a token may attend",
         mistake="diagonal excluded (a token cannot see itself)", source='''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril(-1)
'''),
    dict(exercise="causal_mask", diagnosis="Likely mistake: the mask lets tokens see the",
         mistake="upper triangle: tokens see the future", source='''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).triu()
'''),
    dict(exercise="causal_mask", diagnosis="Likely mistake: the mask is inverted: True",
         mistake="inverted: True marks the blocked keys", source='''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).triu(1)
'''),
    dict(exercise="causal_mask", diagnosis="Likely mistake: off by one: key i+1 is in",
         mistake="off by one: each token sees the next one", source='''
def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril(1)
'''),
    dict(exercise="causal_mask", diagnosis="returned dtype", mistake="a float mask instead of a boolean one", source='''
def causal_mask(n):
    return torch.ones(n, n).tril()
'''),
    dict(exercise="causal_mask", diagnosis="returned dtype", mistake="an additive -inf mask instead of a boolean one",
         source='''
def causal_mask(n):
    return torch.zeros(n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
'''),
    dict(exercise="causal_mask", diagnosis="returned shape", mistake="only right for the example size", source='''
def causal_mask(n):
    if n == 1:
        return torch.ones(1, 1, dtype=torch.bool)
    return torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
'''),
    dict(exercise="causal_mask", diagnosis="returned shape", mistake="an extra batch axis", source='''
def causal_mask(n):
    return torch.ones(1, n, n, dtype=torch.bool).tril()
'''),
    # ------------------------------------------------------------ scaled_dot_product_attention
    dict(exercise="scaled_dot_product_attention", diagnosis="Likely mistake: the scores are not scaled",
         mistake="no scaling", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(q @ k.transpose(-2, -1), mask) @ v
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="Likely mistake: the scale uses d_v (the values'",
         mistake="scaled by the values' width d_v", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1]), mask) @ v
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="Likely mistake: the scores are divided by d_k instead",
         mistake="divides the scores by d_k, not sqrt(d_k)", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    d_k = q.shape[-1]
    return masked_softmax(q @ k.transpose(-2, -1) / d_k, mask) @ v
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="Likely mistake: the softmax runs over the",
         mistake="softmax over the queries", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    s = attention_scores(q, k)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-2), nan=0.0)
    return w @ v
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="Likely mistake: the mask is inverted: True",
         mistake="mask inverted", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), None if mask is None else ~mask) @ v
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="Likely mistake: the mask is ignored.",
         mistake="mask ignored", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k)) @ v
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="Likely mistake: the scores are not normalized:",
         mistake="no softmax: raw scores weight the values", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    s = attention_scores(q, k)
    if mask is not None:
        s = s * mask
    return s @ v
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="Likely mistake: the weights are transposed:",
         mistake="transposed weights: keys attend to queries", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask).transpose(-2, -1) @ v
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="returned shape",
         mistake="returns the weights, not the weighted values", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask)
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="contains NaN",
         mistake="torch.softmax on -inf rows: NaN for a fully masked query", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    s = attention_scores(q, k)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="does the exercise for you",
         mistake="calls torch's fused attention", source='''
import torch.nn.functional as F
def scaled_dot_product_attention(q, k, v, mask=None):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.nan_to_num(out)
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="calls the reference", mistake="calls the reference",
         source='''
from course_lib import attention as _ref_attention
def scaled_dot_product_attention(q, k, v, mask=None):
    return _ref_attention.scaled_dot_product_attention(q, k, v, mask)
'''),
    dict(exercise="scaled_dot_product_attention", diagnosis="gradient with respect to",
         mistake="weights cut from autograd with .detach()", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    return masked_softmax(attention_scores(q, k), mask).detach() @ v
'''),
    # numerically naive: right on moderate inputs, wrong where the chapter warns (exp overflows)
    dict(exercise="scaled_dot_product_attention", diagnosis="argument(s) 1, 2 times 40",
         mistake="its own softmax without subtracting the row maximum: exp overflows for large scores", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = torch.exp(scores)
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s > 0, s, torch.ones_like(s))) @ v
'''),
]

RIGHT = [
    # ------------------------------------------------------------ attention_scores
    dict(exercise="attention_scores", how="torch.einsum, multiplied by d_k ** -0.5 after the product", source='''
def attention_scores(q, k):
    return torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
'''),
    dict(exercise="attention_scores",
         how="scales the queries first, then a broadcast product summed over the feature axis", source='''
def attention_scores(q, k):
    q = q / math.sqrt(q.size(-1))
    return (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(dim=-1)
'''),
    # ------------------------------------------------------------ masked_softmax
    dict(exercise="masked_softmax",
         how="torch.where instead of masked_fill, a detached row maximum, a safe denominator", source='''
def masked_softmax(scores, mask=None):
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    masked = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    m = masked.max(dim=-1, keepdim=True).values.detach()
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    e = torch.exp(masked - m)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total == 0, torch.ones_like(total), total)
'''),
    dict(exercise="masked_softmax",
         how="in log space: exp((scores - max) - log(sum)), fully masked rows set to zero with torch.where", source='''
def masked_softmax(scores, mask=None):
    s = scores if mask is None else scores.masked_fill(mask.logical_not(), float("-inf"))
    m = torch.nan_to_num(s.amax(dim=-1, keepdim=True), neginf=0.0)
    total = torch.exp(s - m).sum(dim=-1, keepdim=True)
    has_any = total > 0
    log_w = (s - m) - torch.log(torch.where(has_any, total, torch.ones_like(total)))
    return torch.where(has_any, torch.exp(log_w), torch.zeros_like(s))
'''),
    # ------------------------------------------------------------ causal_mask
    dict(exercise="causal_mask", how="compares a column of query positions with a row of key positions", source='''
def causal_mask(n):
    i = torch.arange(n)
    return i[:, None] >= i[None, :]
'''),
    dict(exercise="causal_mask", how="the negation of the strict upper triangle, built from a float matrix", source='''
def causal_mask(n):
    return torch.triu(torch.ones(n, n), diagonal=1) == 0
'''),
    # ------------------------------------------------------------ scaled_dot_product_attention
    dict(exercise="scaled_dot_product_attention",
         how="everything inline: einsum scores, softmax with torch.where, einsum with v", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    s = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = torch.where(mask, s, torch.tensor(float("-inf"), dtype=s.dtype))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = (s - m).exp()
    z = e.sum(dim=-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    return torch.einsum("...ij,...jd->...id", w, v)
'''),
    dict(exercise="scaled_dot_product_attention",
         how="masks the scores itself with -inf, then calls masked_softmax without a mask", source='''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = (q / math.sqrt(q.shape[-1])) @ k.mT
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    return torch.matmul(masked_softmax(scores), v)
'''),
    dict(exercise='masked_softmax',
         how="exp(s - logsumexp(s)): the log-sum-exp rounded at the scores' size before the exp", source='''
def masked_softmax(scores, mask=None):
    s = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    out = torch.exp(s - lse)
    return torch.nan_to_num(out, nan=0.0)
'''),
]


# ------------------------------------------------------------ predicted_scores_shape (predict, then run)
WRONG += [
    dict(exercise='predicted_scores_shape', diagnosis='Likely mistake: that is the shape of k @ q^T: each row o',
         mistake='that is the shape of k @ q^T: each row of the scores is one query', source='''
def predicted_scores_shape():
    return [2, 9, 6]
'''),
    dict(exercise='predicted_scores_shape', diagnosis='Likely mistake: that is the shape of q^T @ k, a product ',
         mistake='that is the shape of q^T @ k, a product over the tokens', source='''
def predicted_scores_shape():
    return [2, 4, 4]
'''),
    dict(exercise='predicted_scores_shape', diagnosis='Likely mistake: the batch axis was dropped',
         mistake='the batch axis was dropped', source='''
def predicted_scores_shape():
    return [6, 9]
'''),
    dict(exercise='predicted_scores_shape', diagnosis="should return", mistake="answers in words", source='''
def predicted_scores_shape():
    return "I think it is (2, 6, 9)"
'''),
    dict(exercise='predicted_scores_shape', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_scores_shape():
    print((2, 6, 9))
'''),
]
RIGHT += [
    dict(exercise='predicted_scores_shape', how="a tensor", source='''
def predicted_scores_shape():
    return torch.tensor([2.0, 6.0, 9.0])
'''),
    dict(exercise='predicted_scores_shape', how="a tuple of the exact values", source='''
def predicted_scores_shape():
    return (2, 6, 9)
'''),
]
