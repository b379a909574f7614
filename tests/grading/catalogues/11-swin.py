"""Plausible wrong implementations for assignment 11-swin, as data.

Each entry replaces the solution cell ``exercise`` of solutions/11-swin/swin.ipynb
with ``source``; the hidden tests of that exercise must fail on it
(tests/grading/test_catalogues.py). ``mistake`` says what a learner got wrong, in the
words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ window_partition
    dict(exercise="window_partition", diagnosis="Likely mistake: a window is not a ws x ws",
         mistake="reshapes without swapping axes: strips, not squares", source='''
def window_partition(x, ws):
    b, h, w, c = x.shape
    return x.reshape(-1, ws * ws, c)
'''),
    dict(exercise="window_partition", diagnosis="Likely mistake: the result is 4-D: flatten",
         mistake="keeps batch and window axes apart (4-D result)", source='''
def window_partition(x, ws):
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, -1, ws * ws, c)
'''),
    dict(exercise="window_partition", diagnosis="Likely mistake: the tokens inside each window",
         mistake="column-major tokens inside each window", source='''
def window_partition(x, ws):
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 4, 2, 5)
    return x.reshape(-1, ws * ws, c)
'''),
    dict(exercise="window_partition", diagnosis="Likely mistake: the windows are numbered column",
         mistake="windows numbered column by column", source='''
def window_partition(x, ws):
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 3, 1, 2, 4, 5)
    return x.reshape(-1, ws * ws, c)
'''),
    dict(exercise="window_partition", diagnosis="gives wrong values",
         mistake="splits the width before the height (view(b, w//ws, ws, h//ws, ...))", source='''
def window_partition(x, ws):
    b, h, w, c = x.shape
    x = x.reshape(b, w // ws, ws, h // ws, ws, c).transpose(2, 3)
    return x.reshape(-1, ws * ws, c)
'''),
    dict(exercise="window_partition", diagnosis="Likely mistake: the batch index is not the",
         mistake="window index outermost, batch inside", source='''
def window_partition(x, ws):
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c).permute(1, 3, 0, 2, 4, 5)
    return x.reshape(-1, ws * ws, c)
'''),
    dict(exercise="window_partition", diagnosis="returned dtype",
         mistake="uses unfold on a float32 copy (loses float64)", source='''
def window_partition(x, ws):
    b, h, w, c = x.shape
    cols = F.unfold(x.float().permute(0, 3, 1, 2), ws, stride=ws)  # (b, c * ws * ws, nW)
    return cols.view(b, c, ws * ws, -1).permute(0, 3, 2, 1).reshape(-1, ws * ws, c)
'''),
    dict(exercise="window_partition", diagnosis="calls the reference", mistake="calls the reference", source='''
def window_partition(x, ws):
    from course_lib.swin import window_partition as wp
    return wp(x, ws)
'''),
    # ------------------------------------------------------------ window_reverse
    dict(exercise="window_reverse", diagnosis="Likely mistake: the windows were put back",
         mistake="reshapes straight to (B, H, W, C) without the transpose", source='''
def window_reverse(windows, ws, h, w):
    return windows.reshape(-1, h, w, windows.shape[-1])
'''),
    dict(exercise="window_reverse", diagnosis="Likely mistake: height and width are swapped",
         mistake="swaps h and w in the view", source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    x = windows.reshape(-1, w // ws, h // ws, ws, ws, c).transpose(2, 3)
    return x.reshape(-1, h, w, c)
'''),
    dict(exercise="window_reverse", diagnosis="Likely mistake: the tokens of each window",
         mistake="column-major tokens inside a window", source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    x = windows.reshape(-1, h // ws, w // ws, ws, ws, c).permute(0, 1, 4, 2, 3, 5)
    return x.reshape(-1, h, w, c)
'''),
    dict(exercise="window_reverse", diagnosis="Likely mistake: the axes are permuted as (0,",
         mistake="wrong permutation (0, 1, 3, 4, 2, 5)", source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    x = windows.reshape(-1, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 4, 2, 5)
    return x.reshape(-1, h, w, c)
'''),
    dict(exercise="window_reverse", diagnosis="Likely mistake: the windows are placed column by column;",
         mistake="reads the window index as column-major", source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    x = windows.view(-1, w // ws, h // ws, ws, ws, c).permute(0, 2, 3, 1, 4, 5)
    return x.reshape(-1, h, w, c)
'''),
    dict(exercise="window_reverse", diagnosis="Likely mistake: the result has the windows' layout",
         mistake="stops after the view: returns the 6-D window grid", source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    return windows.view(-1, h // ws, w // ws, ws, ws, c)
'''),
    dict(exercise="window_reverse", diagnosis="raised",
         mistake="batch size taken from windows.shape[0] (one image per window)", source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    b = windows.shape[0]
    x = windows.reshape(b, -1, w // ws, ws, ws, c).transpose(2, 3)
    return x.reshape(b, -1, w, c)
'''),
    dict(exercise="window_reverse", diagnosis="returned shape", mistake="returns the flat (B, H*W, C) map", source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    x = windows.reshape(-1, h // ws, w // ws, ws, ws, c).transpose(2, 3)
    return x.reshape(-1, h * w, c)
'''),
    dict(exercise="window_reverse", diagnosis="cut off from the autograd graph", mistake="detaches the result",
         source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    x = windows.detach().reshape(-1, h // ws, w // ws, ws, ws, c).transpose(2, 3)
    return x.reshape(-1, h, w, c)
'''),
    # ------------------------------------------------------------ shifted_window_mask
    dict(exercise="shifted_window_mask", diagnosis="-inf (or NaN) in the mask", mistake="-inf instead of -100",
         source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= n - ws).long() + (r >= n - shift).long()
    label = regions(h)[:, None] * 3 + regions(w)[None, :]
    label = label.view(h // ws, ws, w // ws, ws).transpose(1, 2).reshape(-1, ws * ws)
    differ = label[:, :, None] != label[:, None, :]
    return torch.zeros(differ.shape).masked_fill(differ, float("-inf"))
'''),
    dict(exercise="shifted_window_mask", diagnosis="Likely mistake: the mask is inverted: 0 between",
         mistake="inverted: -100 within a region", source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= n - ws).long() + (r >= n - shift).long()
    label = regions(h)[:, None] * 3 + regions(w)[None, :]
    label = label.view(h // ws, ws, w // ws, ws).transpose(1, 2).reshape(-1, ws * ws)
    same = label[:, :, None] == label[:, None, :]
    return torch.zeros(same.shape).masked_fill(same, -100.0)
'''),
    dict(exercise="shifted_window_mask", diagnosis="Likely mistake: the regions are those of the",
         mistake="labels the regions of the unrolled map (cuts at shift and ws)", source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= shift).long() + (r >= ws).long()
    label = regions(h)[:, None] * 3 + regions(w)[None, :]
    label = label.view(h // ws, ws, w // ws, ws).transpose(1, 2).reshape(-1, ws * ws)
    differ = label[:, :, None] != label[:, None, :]
    return torch.zeros(differ.shape).masked_fill(differ, -100.0)
'''),
    dict(exercise="shifted_window_mask", diagnosis="Likely mistake: the labels of the two axes",
         mistake="row and column labels added (collisions)", source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= n - ws).long() + (r >= n - shift).long()
    label = regions(h)[:, None] + regions(w)[None, :]
    label = label.view(h // ws, ws, w // ws, ws).transpose(1, 2).reshape(-1, ws * ws)
    differ = label[:, :, None] != label[:, None, :]
    return torch.zeros(differ.shape).masked_fill(differ, -100.0)
'''),
    dict(exercise="shifted_window_mask", diagnosis="gives wrong values",
         mistake="labels reshaped into windows without the transpose (strips)", source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= n - ws).long() + (r >= n - shift).long()
    label = regions(h)[:, None] * 3 + regions(w)[None, :]
    label = label.reshape(-1, ws * ws)
    differ = label[:, :, None] != label[:, None, :]
    return torch.zeros(differ.shape).masked_fill(differ, -100.0)
'''),
    dict(exercise="shifted_window_mask", diagnosis="returned dtype",
         mistake="boolean mask instead of an additive float mask", source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= n - ws).long() + (r >= n - shift).long()
    label = regions(h)[:, None] * 3 + regions(w)[None, :]
    label = label.view(h // ws, ws, w // ws, ws).transpose(1, 2).reshape(-1, ws * ws)
    return label[:, :, None] != label[:, None, :]
'''),
    dict(exercise="shifted_window_mask", diagnosis="gives wrong values", mistake="height regions used for both axes",
         source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= n - ws).long() + (r >= n - shift).long()
    rh = regions(h)
    rw = regions(w) if h == w else torch.cat([rh, rh.new_zeros(max(w - h, 0))])[-w:]
    label = rh[:, None] * 3 + rw[None, :]
    label = label.view(h // ws, ws, w // ws, ws).transpose(1, 2).reshape(-1, ws * ws)
    differ = label[:, :, None] != label[:, None, :]
    return torch.zeros(differ.shape).masked_fill(differ, -100.0)
'''),
    dict(exercise="shifted_window_mask", diagnosis="Likely mistake: height and width are swapped.",
         mistake="labels a (w, h) map", source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= n - ws).long() + (r >= n - shift).long()
    label = regions(w)[:, None] * 3 + regions(h)[None, :]
    label = label.view(w // ws, ws, h // ws, ws).transpose(1, 2).reshape(-1, ws * ws)
    differ = label[:, :, None] != label[:, None, :]
    return torch.zeros(differ.shape).masked_fill(differ, -100.0)
'''),
    dict(exercise="shifted_window_mask", diagnosis="Likely mistake: the cut between the first",
         mistake="first cut at n - 2 * shift", source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= n - 2 * shift).long() + (r >= n - shift).long()
    label = regions(h)[:, None] * 3 + regions(w)[None, :]
    label = label.view(h // ws, ws, w // ws, ws).transpose(1, 2).reshape(-1, ws * ws)
    differ = label[:, :, None] != label[:, None, :]
    return torch.zeros(differ.shape).masked_fill(differ, -100.0)
'''),
    dict(exercise="shifted_window_mask", diagnosis="returned dtype",
         mistake="float64 mask (torch.full with a Python float and dtype=float64)", source='''
def shifted_window_mask(h, w, ws, shift):
    def regions(n):
        r = torch.arange(n)
        return (r >= n - ws).long() + (r >= n - shift).long()
    label = regions(h)[:, None] * 3 + regions(w)[None, :]
    label = label.view(h // ws, ws, w // ws, ws).transpose(1, 2).reshape(-1, ws * ws)
    differ = label[:, :, None] != label[:, None, :]
    return torch.where(differ, -100.0, 0.0).double()
'''),
    # ------------------------------------------------------------ relative_position_index
    dict(exercise="relative_position_index", diagnosis="Likely mistake: the offsets are not shifted",
         mistake="no shift by ws - 1 (negative indices)", source='''
def relative_position_index(ws):
    y, x = torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")
    y, x = y.flatten(), x.flatten()
    return (y[:, None] - y[None, :]) * (2 * ws - 1) + (x[:, None] - x[None, :])
'''),
    dict(exercise="relative_position_index", diagnosis="Likely mistake: the row offset is multiplied by ws;",
         mistake="row stride ws instead of 2 ws - 1", source='''
def relative_position_index(ws):
    y, x = torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")
    y, x = y.flatten(), x.flatten()
    return (y[:, None] - y[None, :] + ws - 1) * ws + x[:, None] - x[None, :] + ws - 1
'''),
    dict(exercise="relative_position_index", diagnosis="Likely mistake: the row offset is multiplied by 2*ws;",
         mistake="row stride 2 ws instead of 2 ws - 1", source='''
def relative_position_index(ws):
    y, x = torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")
    y, x = y.flatten(), x.flatten()
    return (y[:, None] - y[None, :] + ws - 1) * 2 * ws + x[:, None] - x[None, :] + ws - 1
'''),
    dict(exercise="relative_position_index", diagnosis="Likely mistake: only one of the two offsets is shifted",
         mistake="shifts dy by ws - 1 but not dx", source='''
def relative_position_index(ws):
    y, x = torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")
    y, x = y.flatten(), x.flatten()
    dy = y[:, None] - y[None, :] + ws - 1
    dx = x[:, None] - x[None, :]
    return dy * (2 * ws - 1) + dx
'''),
    dict(exercise="relative_position_index", diagnosis="Likely mistake: the offsets are pos_j - pos_i;",
         mistake="pos_j - pos_i (transposed)", source='''
def relative_position_index(ws):
    y, x = torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")
    y, x = y.flatten(), x.flatten()
    return (y[None, :] - y[:, None] + ws - 1) * (2 * ws - 1) + x[None, :] - x[:, None] + ws - 1
'''),
    dict(exercise="relative_position_index", diagnosis="Likely mistake: dy and dx are swapped: the",
         mistake="meshgrid with indexing='xy' (dy and dx swapped)", source='''
def relative_position_index(ws):
    y, x = torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="xy")
    y, x = y.flatten(), x.flatten()
    return (y[:, None] - y[None, :] + ws - 1) * (2 * ws - 1) + x[:, None] - x[None, :] + ws - 1
'''),
    dict(exercise="relative_position_index", diagnosis="returned dtype", mistake="float index (arange of floats)",
         source='''
def relative_position_index(ws):
    y, x = torch.meshgrid(torch.arange(float(ws)), torch.arange(float(ws)), indexing="ij")
    y, x = y.flatten(), x.flatten()
    return (y[:, None] - y[None, :] + ws - 1) * (2 * ws - 1) + x[:, None] - x[None, :] + ws - 1
'''),
    dict(exercise="relative_position_index", diagnosis="Likely mistake: the offsets are shifted by",
         mistake="shifts by ws instead of ws - 1", source='''
def relative_position_index(ws):
    y, x = torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")
    y, x = y.flatten(), x.flatten()
    return (y[:, None] - y[None, :] + ws) * (2 * ws - 1) + x[:, None] - x[None, :] + ws
'''),
    dict(exercise="relative_position_index", diagnosis="gives wrong values",
         mistake="index of the absolute positions (i * N + j)", source='''
def relative_position_index(ws):
    n = ws * ws
    return torch.arange(n)[:, None] * n + torch.arange(n)[None, :]
'''),
    # ------------------------------------------------------------ patch_merging
    dict(exercise="patch_merging", diagnosis="Likely mistake: the four neighbours are concatenated",
         mistake="row-major neighbour order (TL, TR, BL, BR)", source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    g = F.pad(x.view(b, h, w, c), (0, 0, 0, w % 2, 0, h % 2))
    g = torch.cat([g[:, 0::2, 0::2], g[:, 0::2, 1::2], g[:, 1::2, 0::2], g[:, 1::2, 1::2]], dim=-1)
    return reduction(norm(g.reshape(b, -1, 4 * c)))
'''),
    dict(exercise="patch_merging", diagnosis="Likely mistake: an odd side is cropped instead",
         mistake="crops an odd side instead of padding", source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    g = x.view(b, h, w, c)[:, : h // 2 * 2, : w // 2 * 2]
    g = torch.cat([g[:, 0::2, 0::2], g[:, 1::2, 0::2], g[:, 0::2, 1::2], g[:, 1::2, 1::2]], dim=-1)
    return reduction(norm(g.reshape(b, -1, 4 * c)))
'''),
    dict(exercise="patch_merging", diagnosis="Likely mistake: the LayerNorm is skipped:",
         mistake="forgets the LayerNorm", source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    g = F.pad(x.view(b, h, w, c), (0, 0, 0, w % 2, 0, h % 2))
    g = torch.cat([g[:, 0::2, 0::2], g[:, 1::2, 0::2], g[:, 0::2, 1::2], g[:, 1::2, 1::2]], dim=-1)
    return reduction(g.reshape(b, -1, 4 * c))
'''),
    dict(exercise="patch_merging", diagnosis="Likely mistake: the tokens are read as a (W,",
         mistake="views the tokens as (W, H)", source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    g = x.view(b, w, h, c).transpose(1, 2)
    g = F.pad(g, (0, 0, 0, w % 2, 0, h % 2))
    g = torch.cat([g[:, 0::2, 0::2], g[:, 1::2, 0::2], g[:, 0::2, 1::2], g[:, 1::2, 1::2]], dim=-1)
    return reduction(norm(g.reshape(b, -1, 4 * c)))
'''),
    dict(exercise="patch_merging", diagnosis="Likely mistake: an odd side is padded at the",
         mistake="pads at the top/left instead of bottom/right", source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    g = F.pad(x.view(b, h, w, c), (0, 0, w % 2, 0, h % 2, 0))
    g = torch.cat([g[:, 0::2, 0::2], g[:, 1::2, 0::2], g[:, 0::2, 1::2], g[:, 1::2, 1::2]], dim=-1)
    return reduction(norm(g.reshape(b, -1, 4 * c)))
'''),
    dict(exercise="patch_merging", diagnosis="Likely mistake: the same neighbour is taken four times:",
         mistake="copy-pasted slices: x[0::2, 0::2] four times", source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    g = F.pad(x.view(b, h, w, c), (0, 0, 0, w % 2, 0, h % 2))
    x0 = g[:, 0::2, 0::2]
    x1 = g[:, 0::2, 0::2]
    x2 = g[:, 0::2, 0::2]
    x3 = g[:, 0::2, 0::2]
    return reduction(norm(torch.cat([x0, x1, x2, x3], dim=-1).reshape(b, -1, 4 * c)))
'''),
    dict(exercise="patch_merging", diagnosis="First divergence",
         mistake="concatenates along the token axis then reshapes", source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    g = F.pad(x.view(b, h, w, c), (0, 0, 0, w % 2, 0, h % 2))
    g = torch.stack([g[:, 0::2, 0::2], g[:, 1::2, 0::2], g[:, 0::2, 1::2], g[:, 1::2, 1::2]], dim=1)
    return reduction(norm(g.reshape(b, -1, 4 * c)))
'''),
    dict(exercise="patch_merging", diagnosis="Likely mistake: an odd side is padded by repeating",
         mistake="pads with the edge value (replicate) instead of zeros", source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    g = x.view(b, h, w, c)
    if h % 2:
        g = torch.cat([g, g[:, -1:]], dim=1)
    if w % 2:
        g = torch.cat([g, g[:, :, -1:]], dim=2)
    g = torch.cat([g[:, 0::2, 0::2], g[:, 1::2, 0::2], g[:, 0::2, 1::2], g[:, 1::2, 1::2]], dim=-1)
    return reduction(norm(g.reshape(b, -1, 4 * c)))
'''),
    # ------------------------------------------------------------ cosine_attention
    dict(exercise="cosine_attention", diagnosis="Likely mistake: the temperature is not clamped:",
         mistake="no clamp on the temperature", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * logit_scale.exp()
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-1) @ v
'''),
    dict(exercise="cosine_attention", diagnosis="Likely mistake: the clamp is applied to tau",
         mistake="clamps tau (not its log) at log 100", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    tau = logit_scale.exp().clamp(max=math.log(100.0))
    scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * tau
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-1) @ v
'''),
    dict(exercise="cosine_attention", diagnosis="Likely mistake: the cosine scores are also",
         mistake="keeps the 1/sqrt(d) scale as well", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    tau = logit_scale.clamp(max=math.log(100.0)).exp()
    scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * tau / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-1) @ v
'''),
    dict(exercise="cosine_attention", diagnosis="Likely mistake: the vectors are normalized",
         mistake="normalizes over the tokens (dim=-2)", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    tau = logit_scale.clamp(max=math.log(100.0)).exp()
    scores = F.normalize(q, dim=-2) @ F.normalize(k, dim=-2).transpose(-2, -1) * tau
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-1) @ v
'''),
    dict(exercise="cosine_attention", diagnosis="Likely mistake: queries and keys are not L2-normalized:",
         mistake="dot product, no normalization", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    tau = logit_scale.clamp(max=math.log(100.0)).exp()
    scores = q @ k.transpose(-2, -1) * tau
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-1) @ v
'''),
    dict(exercise="cosine_attention", diagnosis="Likely mistake: logit_scale is used as the",
         mistake="uses the log-scale as the temperature", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    tau = logit_scale.clamp(max=math.log(100.0))
    scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * tau
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-1) @ v
'''),
    dict(exercise="cosine_attention", diagnosis="Likely mistake: the bias is multiplied by",
         mistake="multiplies the bias by tau too", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    tau = logit_scale.clamp(max=math.log(100.0)).exp()
    scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores * tau, dim=-1) @ v
'''),
    dict(exercise="cosine_attention", diagnosis="Likely mistake: the bias is ignored: add it",
         mistake="never uses the bias", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    tau = logit_scale.clamp(max=math.log(100.0)).exp()
    scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * tau
    return torch.softmax(scores, dim=-1) @ v
'''),
    dict(exercise="cosine_attention", diagnosis="Likely mistake: the softmax runs over the queries",
         mistake="softmax over dim=-2", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    tau = logit_scale.clamp(max=math.log(100.0)).exp()
    scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * tau
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-2) @ v
'''),
    dict(exercise="cosine_attention", diagnosis="does the exercise for you", mistake="calls torch's fused attention",
         source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    tau = logit_scale.clamp(max=math.log(100.0)).exp()
    return F.scaled_dot_product_attention(F.normalize(q, dim=-1) * tau, F.normalize(k, dim=-1), v,
                                          attn_mask=bias, scale=1.0)
'''),
    dict(exercise="cosine_attention", diagnosis="modified one of its inputs in place",
         mistake="clamps the log-scale in place (modifies the parameter)", source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    with torch.no_grad():
        logit_scale.clamp_(max=math.log(100.0))
    scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * logit_scale.exp()
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-1) @ v
'''),
]

# Correct implementations written differently from the reference solution: each must keep full marks.
RIGHT = [
    # ------------------------------------------------------------ window_partition
    dict(exercise="window_partition", how="a loop over the windows, row by row, slices stacked per image", source='''
def window_partition(x, ws):
    b, h, w, c = x.shape
    windows = [x[:, top:top + ws, left:left + ws].reshape(b, ws * ws, c)
               for top in range(0, h, ws) for left in range(0, w, ws)]
    return torch.stack(windows, dim=1).reshape(-1, ws * ws, c)
'''),
    dict(exercise="window_partition", how="Tensor.unfold on both spatial axes, then a permute", source='''
def window_partition(x, ws):
    c = x.shape[-1]
    t = x.unfold(1, ws, ws).unfold(2, ws, ws)          # (B, nh, nw, C, ws, ws)
    return t.permute(0, 1, 2, 4, 5, 3).reshape(-1, ws * ws, c)
'''),
    # ------------------------------------------------------------ window_reverse
    dict(exercise="window_reverse", how="a new map filled window by window with slice assignment", source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    nh, nw = h // ws, w // ws
    grid = windows.reshape(-1, nh, nw, ws, ws, c)
    out = windows.new_zeros(grid.shape[0], h, w, c)
    for i in range(nh):
        for j in range(nw):
            out[:, i * ws:(i + 1) * ws, j * ws:(j + 1) * ws] = grid[:, i, j]
    return out
'''),
    dict(exercise="window_reverse", how="the axis swap written as an einsum on a reshaped tensor", source='''
def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    grid = windows.reshape(-1, h // ws, w // ws, ws, ws, c)
    return torch.einsum("bijrsc->birjsc", grid).reshape(-1, h, w, c)
'''),
    # ------------------------------------------------------------ shifted_window_mask
    dict(exercise="shifted_window_mask",
         how="the original Swin recipe: slices label an image, window_partition, label differences", source='''
def shifted_window_mask(h, w, ws, shift):
    img = torch.zeros(1, h, w, 1)
    count = 0
    for rows in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
        for cols in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            img[:, rows, cols, :] = count
            count += 1
    labels = window_partition(img, ws).squeeze(-1)           # (nW, ws * ws)
    diff = labels[:, None, :] - labels[:, :, None]
    return torch.where(diff != 0, torch.tensor(-100.0), torch.tensor(0.0))
'''),
    dict(exercise="shifted_window_mask", how="region labels by nested torch.where, a loop over the windows", source='''
def shifted_window_mask(h, w, ws, shift):
    def region(n):
        i = torch.arange(n)
        return torch.where(i < n - ws, 0, torch.where(i < n - shift, 1, 2))

    label = region(h)[:, None] * 3 + region(w)[None, :]
    masks = []
    for top in range(0, h, ws):
        for left in range(0, w, ws):
            lab = label[top:top + ws, left:left + ws].flatten()
            masks.append(torch.where(lab[:, None] != lab[None, :], -100.0, 0.0))
    return torch.stack(masks)
'''),
    # ------------------------------------------------------------ relative_position_index
    dict(exercise="relative_position_index", how="two Python loops over the token pairs", source='''
def relative_position_index(ws):
    n = ws * ws
    out = torch.empty(n, n, dtype=torch.long)
    for i in range(n):
        for j in range(n):
            dy = i // ws - j // ws + ws - 1
            dx = i % ws - j % ws + ws - 1
            out[i, j] = dy * (2 * ws - 1) + dx
    return out
'''),
    dict(exercise="relative_position_index", how="coordinates from the flat index (// and %), broadcasting", source='''
def relative_position_index(ws):
    t = torch.arange(ws * ws)
    row, col = t // ws, t % ws
    dy = row[:, None] - row[None, :]
    dx = col[:, None] - col[None, :]
    return (dy + ws - 1) * (2 * ws - 1) + (dx + ws - 1)
'''),
    # ------------------------------------------------------------ patch_merging
    dict(exercise="patch_merging",
         how="a zero map of even size filled by slice assignment, the 2x2 gather as reshape + permute", source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    h2, w2 = (h + 1) // 2, (w + 1) // 2
    grid = x.new_zeros(b, 2 * h2, 2 * w2, c)
    grid[:, :h, :w] = x.reshape(b, h, w, c)
    g = grid.reshape(b, h2, 2, w2, 2, c).permute(0, 1, 3, 4, 2, 5)   # (B, h2, w2, col, row, C)
    return reduction(norm(g.reshape(b, h2 * w2, 4 * c)))
'''),
    dict(exercise="patch_merging", how="zero rows/columns appended with torch.cat, slices listed by a comprehension",
         source='''
def patch_merging(x, h, w, norm, reduction):
    b, _, c = x.shape
    g = x.reshape(b, h, w, c)
    if h % 2:
        g = torch.cat([g, g.new_zeros(b, 1, w, c)], dim=1)
    if w % 2:
        g = torch.cat([g, g.new_zeros(b, g.shape[1], 1, c)], dim=2)
    parts = [g[:, r::2, s::2] for s in (0, 1) for r in (0, 1)]
    return reduction(norm(torch.cat(parts, dim=-1).flatten(1, 2)))
'''),
    # ------------------------------------------------------------ cosine_attention
    dict(exercise="cosine_attention", how="cosine as dot / (|q| |k|), torch.where for the clamp, softmax written out",
         source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    cap = math.log(100.0)
    tau = torch.exp(torch.where(logit_scale > cap, torch.full_like(logit_scale, cap), logit_scale))
    dots = torch.einsum("...nd,...md->...nm", q, k)
    norms = torch.linalg.vector_norm(q, dim=-1)[..., :, None] * torch.linalg.vector_norm(k, dim=-1)[..., None, :]
    scores = dots / norms.clamp_min(1e-12) * tau
    if bias is not None:
        scores = scores + bias
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)) @ v
'''),
    dict(exercise="cosine_attention", how="normalization with rsqrt of the sum of squares, torch.minimum for the clamp",
         source='''
def cosine_attention(q, k, v, logit_scale, bias=None):
    qn = q * torch.rsqrt((q * q).sum(dim=-1, keepdim=True).clamp_min(1e-24))
    kn = k * torch.rsqrt((k * k).sum(dim=-1, keepdim=True).clamp_min(1e-24))
    tau = torch.minimum(logit_scale, torch.tensor(math.log(100.0), dtype=logit_scale.dtype)).exp()
    scores = torch.matmul(qn, kn.transpose(-2, -1)) * tau
    if bias is not None:
        scores = scores + bias
    return torch.softmax(scores, dim=-1) @ v
'''),
]


# ------------------------------------------------------------ predicted_window_shape (predict, then run)
WRONG += [
    dict(exercise='predicted_window_shape', diagnosis="Likely mistake: only one image's windows were counted",
         mistake="only one image's windows were counted", source='''
def predicted_window_shape():
    return [2, 16, 7]
'''),
    dict(exercise='predicted_window_shape', diagnosis='Likely mistake: that is the shape before the last reshap',
         mistake="that is the shape before the last reshape: each window's tokens become one axis of ws * ws",
         source='''
def predicted_window_shape():
    return [6, 4, 4, 7]
'''),
    dict(exercise='predicted_window_shape', diagnosis='Likely mistake: a window has ws * ws tokens, not ws',
         mistake='a window has ws * ws tokens, not ws', source='''
def predicted_window_shape():
    return [6, 4, 7]
'''),
    dict(exercise='predicted_window_shape', diagnosis="should return", mistake="answers in words", source='''
def predicted_window_shape():
    return "I think it is (6, 16, 7)"
'''),
    dict(exercise='predicted_window_shape', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_window_shape():
    print((6, 16, 7))
'''),
]
RIGHT += [
    dict(exercise='predicted_window_shape', how="a tensor", source='''
def predicted_window_shape():
    return torch.tensor([6.0, 16.0, 7.0])
'''),
    dict(exercise='predicted_window_shape', how="a tuple of the exact values", source='''
def predicted_window_shape():
    return (6, 16, 7)
'''),
]
