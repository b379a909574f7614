"""Plausible wrong implementations for assignment 08-efficient-attention, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/08-efficient-attention/efficient_attention.ipynb with ``source``; the
hidden tests of that exercise must fail on it (tests/grading/test_catalogues.py).
``mistake`` says what a learner got wrong, in the words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ kv_cache_bytes
    dict(exercise="kv_cache_bytes", diagnosis="Likely mistake: the factor 2 is missing: the",
         mistake="forgets the factor 2 (keys only)", source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return n_layers * n_kv_heads * head_dim * seq_len * batch * dtype_bytes
'''),
    dict(exercise="kv_cache_bytes", diagnosis="Likely mistake: the result is in bits: multiply",
         mistake="counts bits, not bytes", source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return 2 * n_layers * n_kv_heads * head_dim * seq_len * batch * dtype_bytes * 8
'''),
    dict(exercise="kv_cache_bytes", diagnosis="Likely mistake: the number of layers is missing:",
         mistake="one layer only", source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return 2 * n_kv_heads * head_dim * seq_len * batch * dtype_bytes
'''),
    dict(exercise="kv_cache_bytes", diagnosis="Likely mistake: the batch size is missing:", mistake="ignores the batch",
         source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return 2 * n_layers * n_kv_heads * head_dim * seq_len * dtype_bytes
'''),
    dict(exercise="kv_cache_bytes", diagnosis="Likely mistake: return an int (a count of",
         mistake="returns a float (divides by 1)", source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return 2 * n_layers * n_kv_heads * head_dim * seq_len * batch * dtype_bytes / 1
'''),
    dict(exercise="kv_cache_bytes", diagnosis="Likely mistake: the dtype size is missing:",
         mistake="number of values, not bytes", source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return 2 * n_layers * n_kv_heads * head_dim * seq_len * batch
'''),
    dict(exercise="kv_cache_bytes", diagnosis="gives a wrong result", mistake="converts to GiB", source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return 2 * n_layers * n_kv_heads * head_dim * seq_len * batch * dtype_bytes // 1024**3
'''),
    dict(exercise="kv_cache_bytes", diagnosis="Likely mistake: return an int (a count of", mistake="returns a tensor",
         source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return torch.tensor(2 * n_layers * n_kv_heads * head_dim * seq_len * batch * dtype_bytes, dtype=torch.float32)
'''),
    # ------------------------------------------------------------ repeat_kv
    dict(exercise="repeat_kv", diagnosis="Likely mistake: the KV heads are tiled (0,",
         mistake="tiles the heads (repeat) instead of repeating each in place", source='''
def repeat_kv(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)
'''),
    dict(exercise="repeat_kv", diagnosis="Likely mistake: the copies are made along the sequence",
         mistake="repeat_interleave on the sequence axis", source='''
def repeat_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=2)
'''),
    dict(exercise="repeat_kv", diagnosis="Likely mistake: the copies are made along the batch",
         mistake="repeat_interleave on the batch axis", source='''
def repeat_kv(x, n_rep):
    return x.repeat_interleave(n_rep, dim=0)
'''),
    dict(exercise="repeat_kv", diagnosis="Likely mistake: the copies are made along the last axis",
         mistake="repeat_interleave on the last axis (head_dim)", source='''
def repeat_kv(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=-1)
'''),
    dict(exercise="repeat_kv", diagnosis="gives wrong values",
         mistake="new axis after the sequence axis, then a reshape", source='''
def repeat_kv(x, n_rep):
    b, h, n, d = x.shape
    return x[:, :, :, None].expand(b, h, n, n_rep, d).reshape(b, h * n_rep, n, d)
'''),
    dict(exercise="repeat_kv", diagnosis="Likely mistake: the KV heads are tiled (0,",
         mistake="new axis before the heads (tiles)", source='''
def repeat_kv(x, n_rep):
    b, h, n, d = x.shape
    return x[:, None].expand(b, n_rep, h, n, d).reshape(b, h * n_rep, n, d)
'''),
    dict(exercise="repeat_kv", diagnosis="Likely mistake: the KV heads are tiled (0,",
         mistake="cat of n_rep copies along the heads (tiles)", source='''
def repeat_kv(x, n_rep):
    return torch.cat([x] * n_rep, dim=1)
'''),
    dict(exercise="repeat_kv", diagnosis="returned shape", mistake="ignores n_rep when it is not 2", source='''
def repeat_kv(x, n_rep):
    return x.repeat_interleave(2, dim=1) if n_rep > 1 else x
'''),
    dict(exercise="repeat_kv", diagnosis="calls the reference", mistake="calls the reference", source='''
def repeat_kv(x, n_rep):
    from course_lib.multi_head import repeat_kv as _r
    return _r(x, n_rep)
'''),
    # ------------------------------------------------------------ decode_step_with_cache
    dict(exercise="decode_step_with_cache", diagnosis="Likely mistake: the new tokens attend only",
         mistake="ignores the cache in the attention", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    n = q_new.shape[-2]
    allowed = torch.ones(n, n, dtype=torch.bool).tril()
    s = (q_new @ k_new.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, -1) @ v_new, k, v
'''),
    dict(exercise="decode_step_with_cache", diagnosis="Likely mistake: the new tokens are not masked",
         mistake="no causal mask among the new tokens", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    s = q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    return torch.softmax(s, -1) @ v, k, v
'''),
    dict(exercise="decode_step_with_cache", diagnosis="Likely mistake: the causal mask is aligned",
         mistake="causal mask aligned top-left (tril without offset)", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    allowed = torch.ones(q_new.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    s = (q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, -1) @ v, k, v
'''),
    dict(exercise="decode_step_with_cache", diagnosis="Likely mistake: the new keys/values are put",
         mistake="new keys put before the cache", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_new, k_cache], dim=-2)
    v = torch.cat([v_new, v_cache], dim=-2)
    n_new, n_all = q_new.shape[-2], k.shape[-2]
    allowed = torch.ones(n_new, n_all, dtype=torch.bool).tril(n_all - n_new)
    s = (q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, -1) @ v, k, v
'''),
    dict(exercise="decode_step_with_cache", diagnosis="Likely mistake: the scores are not scaled",
         mistake="no 1/sqrt(d_k) scale", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    n_new, n_all = q_new.shape[-2], k.shape[-2]
    allowed = torch.ones(n_new, n_all, dtype=torch.bool).tril(n_all - n_new)
    s = (q_new @ k.transpose(-2, -1)).masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, -1) @ v, k, v
'''),
    dict(exercise="decode_step_with_cache", diagnosis="Likely mistake: the old caches are returned:",
         mistake="returns the old caches", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    n_new, n_all = q_new.shape[-2], k.shape[-2]
    allowed = torch.ones(n_new, n_all, dtype=torch.bool).tril(n_all - n_new)
    s = (q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, -1) @ v, k_cache, v_cache
'''),
    dict(exercise="decode_step_with_cache", diagnosis="raised", mistake="concatenates on the feature axis", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-1)
    v = torch.cat([v_cache, v_new], dim=-1)
    s = q_new @ k_new.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    return torch.softmax(s, -1) @ v_new, k, v
'''),
    dict(exercise="decode_step_with_cache", diagnosis="gives a wrong result", mistake="softmax over the queries",
         source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    n_new, n_all = q_new.shape[-2], k.shape[-2]
    allowed = torch.ones(n_new, n_all, dtype=torch.bool).tril(n_all - n_new)
    s = (q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).masked_fill(~allowed, -1e9)
    return torch.softmax(s, -2) @ v, k, v
'''),
    dict(exercise="decode_step_with_cache", diagnosis="does the exercise for you",
         mistake="uses torch's fused attention", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    import torch.nn.functional as F
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    n_new, n_all = q_new.shape[-2], k.shape[-2]
    allowed = torch.ones(n_new, n_all, dtype=torch.bool).tril(n_all - n_new)
    return F.scaled_dot_product_attention(q_new, k, v, attn_mask=allowed), k, v
'''),
    # ------------------------------------------------------------ online_softmax_attention
    dict(exercise="online_softmax_attention", diagnosis="Likely mistake: the running output is not",
         mistake="does not rescale the running output", source='''
def online_softmax_attention(q, k, v, block_size):
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        l = l * torch.exp(m - m_new) + p.sum(-1, keepdim=True)
        o = o + p @ v[..., start:start + block_size, :]
        m = m_new
    return o / l
'''),
    dict(exercise="online_softmax_attention", diagnosis="Likely mistake: the running sum is not rescaled:",
         mistake="does not rescale the running sum", source='''
def online_softmax_attention(q, k, v, block_size):
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        l = l + p.sum(-1, keepdim=True)
        o = o * torch.exp(m - m_new) + p @ v[..., start:start + block_size, :]
        m = m_new
    return o / l
'''),
    dict(exercise="online_softmax_attention",
         diagnosis="Likely mistake: the maximum is the block's own, not the running",
         mistake="uses the block maximum, not the running maximum", source='''
def online_softmax_attention(q, k, v, block_size):
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale
        m_new = s.amax(-1, keepdim=True)
        p = torch.exp(s - m_new)
        c = torch.exp(m - m_new)
        l = l * c + p.sum(-1, keepdim=True)
        o = o * c + p @ v[..., start:start + block_size, :]
        m = m_new
    return o / l
'''),
    dict(exercise="online_softmax_attention",
         diagnosis="Likely mistake: the scores are exponentiated without subtracting",
         mistake="no running maximum at all: overflows for large scores", source='''
def online_softmax_attention(q, k, v, block_size):
    scale = 1.0 / math.sqrt(q.shape[-1])
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        p = torch.exp(q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale)
        l = l + p.sum(-1, keepdim=True)
        o = o + p @ v[..., start:start + block_size, :]
    return o / l
'''),
    dict(exercise="online_softmax_attention", diagnosis="Likely mistake: the last, shorter block is",
         mistake="skips the last, shorter block", source='''
def online_softmax_attention(q, k, v, block_size):
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for b in range(k.shape[-2] // block_size):
        start = b * block_size
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        c = torch.exp(m - m_new)
        l = l * c + p.sum(-1, keepdim=True)
        o = o * c + p @ v[..., start:start + block_size, :]
        m = m_new
    return o / l
'''),
    dict(exercise="online_softmax_attention", diagnosis="gives wrong values",
         mistake="normalizes each block separately and averages", source='''
def online_softmax_attention(q, k, v, block_size):
    scale = 1.0 / math.sqrt(q.shape[-1])
    outs = []
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale
        p = torch.exp(s - s.amax(-1, keepdim=True))
        outs.append((p / p.sum(-1, keepdim=True)) @ v[..., start:start + block_size, :])
    return sum(outs) / len(outs)
'''),
    dict(exercise="online_softmax_attention", diagnosis="Likely mistake: the scores are not scaled",
         mistake="no 1/sqrt(d_k) scale", source='''
def online_softmax_attention(q, k, v, block_size):
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        c = torch.exp(m - m_new)
        l = l * c + p.sum(-1, keepdim=True)
        o = o * c + p @ v[..., start:start + block_size, :]
        m = m_new
    return o / l
'''),
    dict(exercise="online_softmax_attention", diagnosis="builds a tensor of shape",
         mistake="materialises the full score matrix (softmax written out)", source='''
def online_softmax_attention(q, k, v, block_size):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    p = torch.exp(s - s.amax(-1, keepdim=True))
    return (p / p.sum(-1, keepdim=True)) @ v
'''),
    dict(exercise="online_softmax_attention", diagnosis="does the exercise for you",
         mistake="softmax per block with torch.softmax", source='''
def online_softmax_attention(q, k, v, block_size):
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        w = torch.softmax(s, -1)
        p = (w * torch.exp(s.amax(-1, keepdim=True) - m_new)
             * torch.exp(s - s.amax(-1, keepdim=True)).sum(-1, keepdim=True))
        c = torch.exp(m - m_new)
        l = l * c + p.sum(-1, keepdim=True)
        o = o * c + p @ v[..., start:start + block_size, :]
        m = m_new
    return o / l
'''),
    dict(exercise="online_softmax_attention", diagnosis="does the exercise for you",
         mistake="calls torch's fused attention", source='''
def online_softmax_attention(q, k, v, block_size):
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(q, k, v)
'''),
    dict(exercise="online_softmax_attention", diagnosis="builds a tensor of shape",
         mistake="blocks over the queries, each block still scoring every key", source='''
def online_softmax_attention(q, k, v, block_size):
    outs = []
    for start in range(0, q.shape[-2], block_size):
        s = q[..., start:start + block_size, :] @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        p = torch.exp(s - s.amax(-1, keepdim=True))
        outs.append((p / p.sum(-1, keepdim=True)) @ v)
    return torch.cat(outs, dim=-2)
'''),
    # numerically naive: right on moderate inputs, wrong where the chapter warns (exp overflows)
    dict(exercise="decode_step_with_cache", diagnosis="argument(s) 1 times 1000",
         mistake="softmax written as exp / sum without the maximum subtracted", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    n_new, n_all = q_new.shape[-2], k.shape[-2]
    allowed = torch.ones(n_new, n_all, dtype=torch.bool).tril(diagonal=n_all - n_new)
    e = torch.exp(q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])) * allowed
    return (e / e.sum(-1, keepdim=True)) @ v, k, v
'''),
]

# Correct implementations written differently from the reference solution: each must keep full marks.
RIGHT = [
    # ------------------------------------------------------------ kv_cache_bytes
    dict(exercise="kv_cache_bytes", how="bytes per token of one layer, summed over the layers in a loop", source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    per_token_per_layer = 2 * n_kv_heads * head_dim * dtype_bytes
    total = 0
    for _ in range(n_layers):
        total += per_token_per_layer * seq_len * batch
    return total
'''),
    dict(exercise="kv_cache_bytes", how="math.prod of the factors", source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return math.prod([2, batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes])
'''),
    # ------------------------------------------------------------ repeat_kv
    dict(exercise="repeat_kv", how="torch.repeat_interleave along the heads axis", source='''
def repeat_kv(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)
'''),
    dict(exercise="repeat_kv", how="Tensor.repeat on a new axis, then flatten(1, 2)", source='''
def repeat_kv(x, n_rep):
    return x.unsqueeze(2).repeat(1, 1, n_rep, 1, 1).flatten(1, 2)
'''),
    dict(exercise="repeat_kv", how="index the heads with arange(h * n_rep) // n_rep", source='''
def repeat_kv(x, n_rep):
    return x[:, torch.arange(x.shape[1] * n_rep) // n_rep]
'''),
    # ------------------------------------------------------------ decode_step_with_cache
    dict(exercise="decode_step_with_cache",
         how="a loop over the new tokens, each attending to its visible prefix (einsum)", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    n_past = k_cache.shape[-2]
    outs = []
    for i in range(q_new.shape[-2]):
        seen = n_past + i + 1
        s = torch.einsum("bhd,bhkd->bhk", q_new[:, :, i], k[:, :, :seen]) / math.sqrt(q_new.shape[-1])
        w = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("bhk,bhkd->bhd", w, v[:, :, :seen]))
    return torch.stack(outs, dim=2), k, v
'''),
    dict(exercise="decode_step_with_cache", how="mask from absolute positions with torch.where, softmax written out",
         source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    n_past, n_new = k_cache.shape[-2], q_new.shape[-2]
    k = torch.cat((k_cache, k_new), dim=-2)
    v = torch.cat((v_cache, v_new), dim=-2)
    query_pos = torch.arange(n_new)[:, None] + n_past
    key_pos = torch.arange(n_past + n_new)[None, :]
    scores = q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    scores = torch.where(key_pos <= query_pos, scores, torch.full_like(scores, float("-inf")))
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)) @ v, k, v
'''),
    # ------------------------------------------------------------ online_softmax_attention
    dict(exercise="online_softmax_attention",
         how="each block normalized by its own maximum, then both sides rescaled to the running one (k.split)",
         source='''
def online_softmax_attention(q, k, v, block_size):
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    l = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for kb, vb in zip(k.split(block_size, dim=-2), v.split(block_size, dim=-2)):
        s = torch.einsum("...qd,...kd->...qk", q, kb) * scale
        m_b = s.amax(dim=-1, keepdim=True)
        p = torch.exp(s - m_b)
        m_new = torch.maximum(m, m_b)
        old, new = torch.exp(m - m_new), torch.exp(m_b - m_new)
        l = l * old + p.sum(dim=-1, keepdim=True) * new
        o = o * old + (p @ vb) * new
        m = m_new
    return o / l
'''),
    dict(exercise="online_softmax_attention",
         how="statistics started from the first block, output kept normalized at every step", source='''
def online_softmax_attention(q, k, v, block_size):
    scale = q.shape[-1] ** -0.5
    m = l = o = None
    for start in range(0, k.shape[-2], block_size):
        kb, vb = k[..., start:start + block_size, :], v[..., start:start + block_size, :]
        s = q @ kb.transpose(-2, -1) * scale
        block_max = s.amax(dim=-1, keepdim=True)
        if m is None:
            p = torch.exp(s - block_max)
            l = p.sum(dim=-1, keepdim=True)
            o = (p @ vb) / l
            m = block_max
            continue
        m_new = torch.maximum(m, block_max)
        p = torch.exp(s - m_new)
        old = l * torch.exp(m - m_new)
        l = old + p.sum(dim=-1, keepdim=True)
        o = (o * old + p @ vb) / l
        m = m_new
    return o
'''),
    dict(exercise='online_softmax_attention',
         how='one running log-sum-exp per query (logaddexp) instead of a maximum and a sum', source='''
def online_softmax_attention(q, k, v, block_size):
    scale = q.shape[-1] ** -0.5
    lse = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype)
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale
        b = torch.logsumexp(s, dim=-1, keepdim=True)
        new = torch.logaddexp(lse, b)
        o = o * torch.exp(lse - new) + torch.exp(s - new) @ v[..., start:start + block_size, :]
        lse = new
    return o
'''),
]

# The contract's last gaps (issue 27): the types of returned containers and numbers.
WRONG += [
    dict(exercise="decode_step_with_cache", diagnosis="the result is a list where a tuple is expected",
         mistake="returns [out, k, v] as a list", source='''
def decode_step_with_cache(q_new, k_new, v_new, k_cache, v_cache):
    k = torch.cat([k_cache, k_new], dim=-2)
    v = torch.cat([v_cache, v_new], dim=-2)
    n_new, n_all = q_new.shape[-2], k.shape[-2]
    allowed = torch.ones(n_new, n_all, dtype=torch.bool).tril(diagonal=n_all - n_new)
    scores = (q_new @ k.transpose(-2, -1) / math.sqrt(q_new.shape[-1])).masked_fill(~allowed, float("-inf"))
    return [torch.softmax(scores, dim=-1) @ v, k, v]
'''),
    dict(exercise="kv_cache_bytes", diagnosis="the result is a torch.Tensor where an int is expected",
         mistake="multiplies the sizes as a 0-d int64 tensor (torch.prod)", source='''
def kv_cache_bytes(batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes):
    return 2 * torch.prod(torch.tensor([batch, seq_len, n_layers, n_kv_heads, head_dim, dtype_bytes]))
'''),
]

# The exercise says the inputs come in bfloat16 and float16 too, the running quantities in q's dtype (issue 45).
WRONG += [
    dict(exercise="online_softmax_attention", diagnosis="found BFloat16",
         mistake="running max, sum and output made by torch.full and torch.zeros in the default float32", source='''
def online_softmax_attention(q, k, v, block_size):
    scale = q.shape[-1] ** -0.5
    m = torch.full(q.shape[:-1] + (1,), float("-inf"))
    l = torch.zeros(q.shape[:-1] + (1,))
    o = torch.zeros(q.shape[:-1] + (v.shape[-1],))
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) * scale
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        p = torch.exp(s - m_new)
        l = l * torch.exp(m - m_new) + p.sum(dim=-1, keepdim=True)
        o = o * torch.exp(m - m_new) + p @ v[..., start:start + block_size, :]
        m = m_new
    return o / l
'''),
]


# ------------------------------------------------------------ predicted_cache_gib (predict, then run)
WRONG += [
    dict(exercise='predicted_cache_gib', diagnosis='Likely mistake: only the keys (or only the values) were ',
         mistake='only the keys (or only the values) were counted', source='''
def predicted_cache_gib():
    return 0.375
'''),
    dict(exercise='predicted_cache_gib', diagnosis='Likely mistake: 4 bytes per entry were counted',
         mistake='4 bytes per entry were counted', source='''
def predicted_cache_gib():
    return 1.5
'''),
    dict(exercise='predicted_cache_gib', diagnosis='Likely mistake: the 32 query heads were counted',
         mistake='the 32 query heads were counted', source='''
def predicted_cache_gib():
    return 3.0
'''),
    dict(exercise='predicted_cache_gib', diagnosis='Likely mistake: that is GB (10^9 bytes)',
         mistake='that is GB (10^9 bytes)', source='''
def predicted_cache_gib():
    return 0.805306368
'''),
    dict(exercise='predicted_cache_gib', diagnosis="should return", mistake="answers in words", source='''
def predicted_cache_gib():
    return "I think it is 0.75"
'''),
    dict(exercise='predicted_cache_gib', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_cache_gib():
    print(0.75)
'''),
]
RIGHT += [
    dict(exercise='predicted_cache_gib', how="a 0-d tensor", source='''
def predicted_cache_gib():
    return torch.tensor(0.75)
'''),
    dict(exercise='predicted_cache_gib', how="the exact value", source='''
def predicted_cache_gib():
    return 0.75
'''),
]
