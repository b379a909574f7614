"""Plausible wrong implementations for assignment 03-multi-head-attention, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/03-multi-head-attention/multi_head_attention.ipynb with ``source``;
the hidden tests of that exercise must fail on it (tests/grading/test_catalogues.py).
``mistake`` says what a learner got wrong, in the words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ split_heads
    dict(exercise="split_heads", diagnosis="Likely mistake: the shape is right but the",
         mistake="reshape straight to (b, h, n, d) without transposing: right shape, wrong content", source='''
def split_heads(x, n_heads):
    b, n, d = x.shape
    return x.reshape(b, n_heads, n, d // n_heads)
'''),
    dict(exercise="split_heads", diagnosis="Likely mistake: the shape is right but the",
         mistake="view to (b, h, n, d): the same bug with view", source='''
def split_heads(x, n_heads):
    b, n, d = x.shape
    return x.view(b, n_heads, n, d // n_heads)
'''),
    dict(exercise="split_heads", diagnosis="Likely mistake: the result is (batch, seq,",
         mistake="forgets the transpose: returns (b, n, h, d)", source='''
def split_heads(x, n_heads):
    b, n, d = x.shape
    return x.reshape(b, n, n_heads, d // n_heads)
'''),
    dict(exercise="split_heads", diagnosis="Likely mistake: each head gets every n_heads-th",
         mistake="interleaved heads: splits the features as (head_dim, n_heads)", source='''
def split_heads(x, n_heads):
    b, n, d = x.shape
    return x.reshape(b, n, d // n_heads, n_heads).permute(0, 3, 1, 2)
'''),
    dict(exercise="split_heads", diagnosis="Likely mistake: head_dim and n_heads are swapped:",
         mistake="swaps n_heads and head_dim in the reshape", source='''
def split_heads(x, n_heads):
    b, n, d = x.shape
    return x.reshape(b, n, d // n_heads, n_heads).transpose(1, 2)
'''),
    dict(exercise="split_heads", diagnosis="Likely mistake: the last two axes are swapped:",
         mistake="transposes the wrong pair of axes: (b, h, d, n)", source='''
def split_heads(x, n_heads):
    b, n, d = x.shape
    return x.reshape(b, n, n_heads, d // n_heads).permute(0, 2, 3, 1)
'''),
    dict(exercise="split_heads", diagnosis="Likely mistake: the shape is right but the",
         mistake="uses torch.chunk on the sequence axis instead of the features", source='''
def split_heads(x, n_heads):
    b, n, d = x.shape
    return torch.stack(torch.chunk(x.reshape(b, n * n_heads, d // n_heads), n_heads, dim=1), dim=1)
'''),
    dict(exercise="split_heads", diagnosis="calls the reference", mistake="calls the reference", source='''
def split_heads(x, n_heads):
    from course_lib.multi_head import split_heads as ref
    return ref(x, n_heads)
'''),
    dict(exercise="split_heads", diagnosis="cut off from the autograd graph", mistake="detaches (numpy round trip)",
         source='''
def split_heads(x, n_heads):
    b, n, d = x.shape
    return torch.from_numpy(x.detach().numpy().reshape(b, n, n_heads, d // n_heads).transpose(0, 2, 1, 3).copy())
'''),
    # ------------------------------------------------------------ merge_heads
    dict(exercise="merge_heads", diagnosis="Likely mistake: the shape is right but the",
         mistake="reshape without transposing back: right shape, wrong content", source='''
def merge_heads(x):
    b, h, n, d = x.shape
    return x.reshape(b, n, h * d)
'''),
    dict(exercise="merge_heads", diagnosis="raised", mistake="transposes then .view: fails on a non-contiguous tensor",
         source='''
def merge_heads(x):
    b, h, n, d = x.shape
    return x.transpose(1, 2).view(b, n, h * d)
'''),
    dict(exercise="merge_heads", diagnosis="Likely mistake: the result is still (batch,",
         mistake="forgets to flatten: returns (b, n, h, d)", source='''
def merge_heads(x):
    return x.transpose(1, 2)
'''),
    dict(exercise="merge_heads", diagnosis="Likely mistake: the heads come out interleaved",
         mistake="interleaves the heads: permute to (b, n, d, h)", source='''
def merge_heads(x):
    b, h, n, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(b, n, h * d)
'''),
    dict(exercise="merge_heads", diagnosis="Likely mistake: the shape is right but the",
         mistake="concatenates along the sequence axis", source='''
def merge_heads(x):
    b, h, n, d = x.shape
    return torch.cat([x[:, i] for i in range(h)], dim=1).reshape(b, n, h * d)
'''),
    dict(exercise="merge_heads", diagnosis="gives wrong values", mistake="sums the heads instead of concatenating them",
         source='''
def merge_heads(x):
    b, h, n, d = x.shape
    return x.sum(dim=1).repeat(1, 1, h)
'''),
    dict(exercise="merge_heads", diagnosis="Likely mistake: the heads come out in reverse",
         mistake="heads in reverse order", source='''
def merge_heads(x):
    b, h, n, d = x.shape
    return x.flip(1).transpose(1, 2).reshape(b, n, h * d)
'''),
    dict(exercise="merge_heads", diagnosis="Likely mistake: the result is (batch, n_heads, seq*head_dim)",
         mistake="flattens the last two axes of (b, h, n, d): keeps the head axis second", source='''
def merge_heads(x):
    b, h, n, d = x.shape
    return x.reshape(b, h, n * d)
'''),
    # ------------------------------------------------------------ multi_head_attention
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: the scores are not scaled:",
         mistake="no 1/sqrt(d_k) scale", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    return merge_heads(torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: the scores are scaled by 1/sqrt(dim):",
         mistake="scales by sqrt(dim) instead of sqrt(head_dim)", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
    return merge_heads(torch.softmax(s, dim=-1) @ v) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: attention runs once over the",
         mistake="one full-width head: ignores n_heads", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1] // n_heads)
    return torch.softmax(s, dim=-1) @ v @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: this is single-head attention at full width:",
         mistake="plain single-head attention: n_heads unused, scale 1/sqrt(dim)", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ v @ w_o.T
'''),
    dict(exercise="multi_head_attention",
         diagnosis="Likely mistake: the heads are split by reshaping (batch, seq, dim) straight",
         mistake="splits and merges the heads by reshape alone, no transposes", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    b, n, d = x.shape
    q, k, v = ((x @ w.T).reshape(b, n_heads, n, d // n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)
    return (torch.softmax(s, dim=-1) @ v).reshape(b, n, d) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: the features are dealt to the heads interleaved:",
         mistake="splits the features as (head_dim, n_heads): head i gets every n_heads-th feature", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    b, n, d = x.shape
    hd = d // n_heads
    q, k, v = ((x @ w.T).reshape(b, n, hd, n_heads).permute(0, 3, 1, 2) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(hd)
    out = torch.softmax(s, dim=-1) @ v              # (b, h, n, hd)
    return out.permute(0, 2, 3, 1).reshape(b, n, d) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: the heads are split with a",
         mistake="splits heads by reshape without transpose", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    b, n, d = x.shape
    q, k, v = ((x @ w.T).reshape(b, n_heads, n, d // n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)
    return merge_heads(torch.softmax(s, dim=-1) @ v) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: the heads are split correctly",
         mistake="merges heads by reshape without transpose", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    b, n, d = x.shape
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(d // n_heads)
    return (torch.softmax(s, dim=-1) @ v).reshape(b, n, d) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: the output projection W_O",
         mistake="forgets the output projection", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return merge_heads(torch.softmax(s, dim=-1) @ v)
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: the weights are used untransposed:",
         mistake="uses the weights untransposed (x @ w)", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return merge_heads(torch.softmax(s, dim=-1) @ v) @ w_o
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: the output weight is used",
         mistake="only the output weight untransposed", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return merge_heads(torch.softmax(s, dim=-1) @ v) @ w_o
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: the softmax runs over the",
         mistake="softmax over the queries (dim=-2)", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return merge_heads(torch.softmax(s, dim=-2) @ v) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="Likely mistake: a causal mask is applied;",
         mistake="adds a causal mask nobody asked for", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    n = s.shape[-1]
    s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return merge_heads(torch.softmax(s, dim=-1) @ v) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="gives wrong values",
         mistake="keys from the value weights (copy-paste slip)", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_v, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return merge_heads(torch.softmax(s, dim=-1) @ v) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="gives wrong values",
         mistake="averages the heads' outputs instead of concatenating", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    heads = torch.softmax(s, dim=-1) @ v
    return heads.mean(dim=1).repeat(1, 1, n_heads) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="does the exercise for you",
         mistake="calls torch's fused scaled_dot_product_attention", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    import torch.nn.functional as F
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    return merge_heads(F.scaled_dot_product_attention(q, k, v)) @ w_o.T
'''),
    dict(exercise="multi_head_attention", diagnosis="does the exercise for you",
         mistake="uses nn.MultiheadAttention with the given weights", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    d = x.shape[-1]
    layer = torch.nn.MultiheadAttention(d, n_heads, bias=False, batch_first=True).to(x.dtype)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        layer.out_proj.weight.copy_(w_o)
    return layer(x, x, x, need_weights=False)[0]
'''),
    dict(exercise="multi_head_attention", diagnosis="calls the reference", mistake="calls the reference", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    from course_lib.multi_head import multi_head_attention as ref
    return ref(x, w_q, w_k, w_v, w_o, n_heads)
'''),
    dict(exercise="multi_head_attention", diagnosis="returned dtype",
         mistake="computes in float32 (loses float64 inputs' dtype)", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    x, w_q, w_k, w_v, w_o = (t.float() for t in (x, w_q, w_k, w_v, w_o))
    q, k, v = (split_heads(x @ w.T, n_heads) for w in (w_q, w_k, w_v))
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return merge_heads(torch.softmax(s, dim=-1) @ v) @ w_o.T
'''),
    # ------------------------------------------------------------ project_heads_separately
    dict(exercise="project_heads_separately", diagnosis="Likely mistake: the per-head projections are",
         mistake="averages the per-head projections", source='''
def project_heads_separately(heads, w_o):
    h, d = heads.shape[-3], heads.shape[-1]
    return sum(heads[..., i, :, :] @ w_o[:, i * d:(i + 1) * d].T for i in range(h)) / h
'''),
    dict(exercise="project_heads_separately", diagnosis="Likely mistake: head i is paired with the",
         mistake="interleaved columns w_o[:, i::h]", source='''
def project_heads_separately(heads, w_o):
    h = heads.shape[-3]
    return sum(heads[..., i, :, :] @ w_o[:, i::h].T for i in range(h))
'''),
    dict(exercise="project_heads_separately",
         diagnosis="Likely mistake: the heads are paired with the blocks of w_o in reverse",
         mistake="counts the blocks of w_o from the end", source='''
def project_heads_separately(heads, w_o):
    h, d = heads.shape[-3], heads.shape[-1]
    out = 0
    for i in range(h):
        j = h - 1 - i
        out = out + heads[..., i, :, :] @ w_o[:, j * d:(j + 1) * d].T
    return out
'''),
    dict(exercise="project_heads_separately", diagnosis="Likely mistake: head i is paired with a block",
         mistake="takes blocks of rows of w_o (works only when square)", source='''
def project_heads_separately(heads, w_o):
    h, d = heads.shape[-3], heads.shape[-1]
    return sum(heads[..., i, :, :] @ w_o[i * d:(i + 1) * d, :] for i in range(h))
'''),
    dict(exercise="project_heads_separately", diagnosis="Likely mistake: the heads are concatenated",
         mistake="concatenates by reshape without transpose", source='''
def project_heads_separately(heads, w_o):
    *lead, h, n, d = heads.shape
    return heads.reshape(*lead, n, h * d) @ w_o.T
'''),
    dict(exercise="project_heads_separately", diagnosis="Likely mistake: only the first head is projected:",
         mistake="off by one in the loop: skips the last head", source='''
def project_heads_separately(heads, w_o):
    h, d = heads.shape[-3], heads.shape[-1]
    out = 0
    for i in range(h - 1):
        out = out + heads[..., i, :, :] @ w_o[:, i * d:(i + 1) * d].T
    return out if h > 1 else heads[..., 0, :, :] @ w_o.T
'''),
    dict(exercise="project_heads_separately", diagnosis="raised",
         mistake="indexes the head on axis 1 (assumes one batch axis)", source='''
def project_heads_separately(heads, w_o):
    h, d = heads.shape[1], heads.shape[-1]
    return sum(heads[:, i] @ w_o[:, i * d:(i + 1) * d].T for i in range(h))
'''),
    dict(exercise="project_heads_separately", diagnosis="raised",
         mistake="head width taken from dim // n_heads (assumes dim == n_heads * head_dim)", source='''
def project_heads_separately(heads, w_o):
    h = heads.shape[-3]
    d = w_o.shape[0] // h
    return sum(heads[..., i, :, :d] @ w_o[:, i * d:(i + 1) * d].T for i in range(h))
'''),
    dict(exercise="project_heads_separately", diagnosis="Likely mistake: the per-head outputs are returned",
         mistake="returns the per-head contributions without summing", source='''
def project_heads_separately(heads, w_o):
    h, d = heads.shape[-3], heads.shape[-1]
    return torch.stack([heads[..., i, :, :] @ w_o[:, i * d:(i + 1) * d].T for i in range(h)], dim=-3)
'''),
    dict(exercise="project_heads_separately", diagnosis="calls the reference", mistake="calls the reference", source='''
def project_heads_separately(heads, w_o):
    from course_lib.multi_head import mha_output_as_head_sum
    return mha_output_as_head_sum(heads, w_o)
'''),
    # ------------------------------------------------------------ mha_param_count
    dict(exercise="mha_param_count", diagnosis="Likely mistake: the output projection W_O", mistake="forgets W_O",
         source='''
def mha_param_count(dim, n_heads, bias=True):
    return 3 * dim * dim + (3 * dim if bias else 0)
'''),
    dict(exercise="mha_param_count", diagnosis="Likely mistake: the biases are missing: each",
         mistake="ignores the biases", source='''
def mha_param_count(dim, n_heads, bias=True):
    return 4 * dim * dim
'''),
    dict(exercise="mha_param_count", diagnosis="Likely mistake: biases are counted even when",
         mistake="counts biases even when bias=False", source='''
def mha_param_count(dim, n_heads, bias=True):
    return 4 * dim * dim + 4 * dim
'''),
    dict(exercise="mha_param_count", diagnosis="Likely mistake: the count is a float: use",
         mistake="returns a float (true division)", source='''
def mha_param_count(dim, n_heads, bias=True):
    head_dim = dim / n_heads
    return 4 * n_heads * head_dim * dim + (4 * dim if bias else 0)
'''),
    dict(exercise="mha_param_count", diagnosis="Likely mistake: the weights are counted once",
         mistake="full-width weights per head", source='''
def mha_param_count(dim, n_heads, bias=True):
    return n_heads * (4 * dim * dim) + (4 * dim if bias else 0)
'''),
    dict(exercise="mha_param_count", diagnosis="Likely mistake: each head is counted as head_dim",
         mistake="each head's projection counted as head_dim x head_dim", source='''
def mha_param_count(dim, n_heads, bias=True):
    head_dim = dim // n_heads
    return 4 * n_heads * head_dim * head_dim + (4 * dim if bias else 0)
'''),
    dict(exercise="mha_param_count", diagnosis="Likely mistake: only one projection's biases",
         mistake="one bias vector only", source='''
def mha_param_count(dim, n_heads, bias=True):
    return 4 * dim * dim + (dim if bias else 0)
'''),
    dict(exercise="mha_param_count", diagnosis="Likely mistake: the biases are counted once",
         mistake="bias counted per head", source='''
def mha_param_count(dim, n_heads, bias=True):
    return 4 * dim * dim + (4 * n_heads * dim if bias else 0)
'''),
    dict(exercise="mha_param_count", diagnosis="Likely mistake: the biases are missing: each",
         mistake="bias given a default of False", source='''
def mha_param_count(dim, n_heads, bias=False):
    return 4 * dim * dim + (4 * dim if bias else 0)
'''),
    # numerically naive: right on moderate inputs, wrong where the chapter warns (exp overflows)
    dict(exercise="multi_head_attention", diagnosis="argument(s) 1 times 12",
         mistake="softmax written as exp / sum without the maximum subtracted", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    b, n, d = x.shape
    hd = d // n_heads
    q, k, v = ((x @ w.T).reshape(b, n, n_heads, hd).transpose(1, 2) for w in (w_q, w_k, w_v))
    e = torch.exp(q @ k.transpose(-2, -1) / math.sqrt(hd))
    heads = (e / e.sum(-1, keepdim=True)) @ v
    return heads.transpose(1, 2).reshape(b, n, d) @ w_o.T
'''),
]

RIGHT = [
    # ------------------------------------------------------------ split_heads
    dict(exercise="split_heads", how="unflatten the last axis, then permute", source='''
def split_heads(x, n_heads):
    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)
'''),
    dict(exercise="split_heads", how="chunk the features into n_heads pieces and stack them on a new axis 1", source='''
def split_heads(x, n_heads):
    return torch.stack(torch.chunk(x, n_heads, dim=-1), dim=1)
'''),
    # ------------------------------------------------------------ merge_heads
    dict(exercise="merge_heads", how="concatenates the heads (unbind on axis 1) along the features", source='''
def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)
'''),
    dict(exercise="merge_heads", how="permute, then flatten the last two axes", source='''
def merge_heads(x):
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)
'''),
    # ------------------------------------------------------------ multi_head_attention
    dict(exercise="multi_head_attention",
         how="a loop over the heads with row blocks of the weights, outputs concatenated", source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    dim = x.shape[-1]
    d = dim // n_heads
    outs = []
    for h in range(n_heads):
        rows = slice(h * d, (h + 1) * d)
        q = x @ w_q[rows].T
        k = x @ w_k[rows].T
        v = x @ w_v[rows].T
        weights = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), dim=-1)
        outs.append(weights @ v)
    return torch.cat(outs, dim=-1) @ w_o.T
'''),
    dict(exercise="multi_head_attention", how="einsum with the weights unflattened per head, softmax written out",
         source='''
def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    dim = x.shape[-1]
    d = dim // n_heads
    q = torch.einsum("bsi,hdi->bhsd", x, w_q.reshape(n_heads, d, dim))
    k = torch.einsum("bsi,hdi->bhsd", x, w_k.reshape(n_heads, d, dim))
    v = torch.einsum("bsi,hdi->bhsd", x, w_v.reshape(n_heads, d, dim))
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * d ** -0.5
    e = torch.exp(s - s.amax(dim=-1, keepdim=True))
    a = torch.einsum("bhqk,bhkd->bhqd", e / e.sum(dim=-1, keepdim=True), v)
    return torch.einsum("bhsd,ohd->bso", a, w_o.reshape(dim, n_heads, d))
'''),
    # ------------------------------------------------------------ project_heads_separately
    dict(exercise="project_heads_separately", how="one einsum with w_o unflattened to (dim, n_heads, head_dim)",
         source='''
def project_heads_separately(heads, w_o):
    n_heads, head_dim = heads.shape[-3], heads.shape[-1]
    return torch.einsum("...hsd,ohd->...so", heads, w_o.reshape(w_o.shape[0], n_heads, head_dim))
'''),
    dict(exercise="project_heads_separately",
         how="concatenate the heads, then one projection (the identity the exercise shows)", source='''
def project_heads_separately(heads, w_o):
    concat = heads.transpose(-3, -2).flatten(-2)
    return torch.matmul(concat, w_o.transpose(0, 1))
'''),
    dict(exercise="project_heads_separately", how="per-head products on column chunks of w_o, stacked and summed",
         source='''
def project_heads_separately(heads, w_o):
    blocks = w_o.chunk(heads.shape[-3], dim=1)
    parts = [heads.select(-3, i) @ b.T for i, b in enumerate(blocks)]
    return torch.stack(parts).sum(dim=0)
'''),
    # ------------------------------------------------------------ mha_param_count
    dict(exercise="mha_param_count", how="four equal weight matrices plus the bias terms counted together", source='''
def mha_param_count(dim, n_heads, bias=True):
    inner = n_heads * (dim // n_heads)
    weights = 4 * dim * inner
    biases = 3 * inner + dim
    return weights + biases if bias else weights
'''),
    dict(exercise="mha_param_count", how="sums over the four projections listed with their (in, out) sizes", source='''
def mha_param_count(dim, n_heads, bias=True):
    inner = (dim // n_heads) * n_heads
    total = 0
    for fan_in, fan_out in [(dim, inner), (dim, inner), (dim, inner), (inner, dim)]:
        total += fan_in * fan_out
        if bias:
            total += fan_out
    return total
'''),
]


# ------------------------------------------------------------ predicted_mha_counts (predict, then run)
WRONG += [
    dict(exercise='predicted_mha_counts', diagnosis='Likely mistake: the output projection is left out: a lay',
         mistake='the output projection is left out: a layer has four projections, W_Q, W_K, W_V and W_O', source='''
def predicted_mha_counts():
    return [108, 126]
'''),
    dict(exercise='predicted_mha_counts', diagnosis='Likely mistake: one bias vector was counted, not one per',
         mistake='one bias vector was counted, not one per projection', source='''
def predicted_mha_counts():
    return [144, 150]
'''),
    dict(exercise='predicted_mha_counts', diagnosis="Likely mistake: each projection was counted as one head'",
         mistake="each projection was counted as one head's slice (dim x head_dim), not the whole dim x dim map",
         source='''
def predicted_mha_counts():
    return [48, 56]
'''),
    dict(exercise='predicted_mha_counts', diagnosis="should return", mistake="answers in words", source='''
def predicted_mha_counts():
    return "I think it is [144, 168]"
'''),
    dict(exercise='predicted_mha_counts', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_mha_counts():
    print([144, 168])
'''),
]
RIGHT += [
    dict(exercise='predicted_mha_counts', how="a tensor", source='''
def predicted_mha_counts():
    return torch.tensor([144.0, 168.0])
'''),
    dict(exercise='predicted_mha_counts', how="a tuple of the exact values", source='''
def predicted_mha_counts():
    return (144, 168)
'''),
]
