"""Plausible wrong implementations for assignment 04-normalization, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/04-normalization/normalization.ipynb with ``source``; the hidden
tests of that exercise must fail on it (tests/grading/test_catalogues.py). ``mistake``
says what a learner got wrong, in the words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ layer_norm
    dict(exercise="layer_norm", diagnosis="Likely mistake: the variance is unbiased (divided",
         mistake="torch.var's default: the unbiased variance", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="the variance is computed as E[x^2] - E[x]^2",
         mistake="one-pass variance E[x^2] - E[x]^2 (cancellation in float32)", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x ** 2).mean(dim=-1, keepdim=True) - mean ** 2
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: eps is added outside the square",
         mistake="eps outside the square root (std + eps)", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    std = x.std(dim=-1, unbiased=False, keepdim=True)
    return (x - mean) / (std + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: eps is missing: divide by", mistake="eps forgotten",
         source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: the statistics are taken over the first",
         mistake="statistics over the batch axis (BatchNorm)", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=0, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: the statistics are taken over the leading (batch) axes",
         mistake="statistics over every axis but the last (BatchNorm)", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    dims = tuple(range(x.ndim - 1))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: the statistics are taken over the whole",
         mistake="statistics over the whole tensor (no dim)", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean()
    var = ((x - mean) ** 2).mean()
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: the centered input is divided",
         mistake="divides by the variance, not the standard deviation", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / (var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: gamma and beta are swapped:",
         mistake="gamma and beta swapped", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * beta + gamma
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: the gain gamma is not applied: multiply",
         mistake="forgets the gain gamma", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) + beta
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: the mean is not subtracted from the numerator",
         mistake="divides x itself, not x - mean, by the standard deviation", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="Likely mistake: the shift beta is not added.",
         mistake="forgets the shift beta", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma
'''),
    dict(exercise="layer_norm", diagnosis="modified one of its inputs in place", mistake="centers x in place",
         source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    x -= x.mean(dim=-1, keepdim=True)
    var = (x ** 2).mean(dim=-1, keepdim=True)
    return x / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", diagnosis="returned dtype",
         mistake="computes in float32 (float64 inputs lose their dtype)", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    x = x.float()
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma.float() + beta.float()
'''),
    dict(exercise="layer_norm", diagnosis="does the exercise for you", mistake="calls torch's layer_norm", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), gamma, beta, eps)
'''),
    dict(exercise="layer_norm", diagnosis="calls the reference", mistake="calls the reference", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    from course_lib.norms import layer_norm as ref
    return ref(x, gamma, beta, eps)
'''),
    dict(exercise="layer_norm", diagnosis="gradient with respect to",
         mistake="mean and variance detached from autograd", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True).detach()
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True).detach()
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    # ------------------------------------------------------------ rms_norm
    dict(exercise="rms_norm", diagnosis="Likely mistake: the mean is subtracted: RMSNorm",
         mistake="subtracts the mean (LayerNorm without shift)", source='''
def rms_norm(x, gamma, eps=1e-6):
    x = x - x.mean(dim=-1, keepdim=True)
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * gamma
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: the square root of the *sum*",
         mistake="square root of the sum of squares (the L2 norm)", source='''
def rms_norm(x, gamma, eps=1e-6):
    return x / torch.sqrt((x * x).sum(dim=-1, keepdim=True) + eps) * gamma
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: eps is added outside the square",
         mistake="eps outside the square root", source='''
def rms_norm(x, gamma, eps=1e-6):
    return x / (torch.sqrt((x * x).mean(dim=-1, keepdim=True)) + eps) * gamma
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: the gain gamma is not applied.", mistake="forgets gamma",
         source='''
def rms_norm(x, gamma, eps=1e-6):
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: eps is missing: divide by",
         mistake="F.normalize times sqrt(d): eps handled as a clamp on the norm", source='''
def rms_norm(x, gamma, eps=1e-6):
    import torch.nn.functional as F
    return F.normalize(x, dim=-1, eps=eps) * math.sqrt(x.shape[-1]) * gamma
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: x is divided by its standard",
         mistake="uses the standard deviation (std) instead of the RMS", source='''
def rms_norm(x, gamma, eps=1e-6):
    return x / torch.sqrt(x.var(dim=-1, unbiased=False, keepdim=True) + eps) * gamma
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: the mean square is taken over the first",
         mistake="mean square over the first axis", source='''
def rms_norm(x, gamma, eps=1e-6):
    return x / torch.sqrt((x * x).mean(dim=0, keepdim=True) + eps) * gamma
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: x is divided by the mean square;", mistake="no square root",
         source='''
def rms_norm(x, gamma, eps=1e-6):
    return x / ((x * x).mean(dim=-1, keepdim=True) + eps) * gamma
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: x is multiplied by the RMS;",
         mistake="multiplies by the RMS instead of dividing", source='''
def rms_norm(x, gamma, eps=1e-6):
    rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)
    return x * rms * gamma
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: the mean square is taken over the leading axes;",
         mistake="mean square over every axis but the last (one per feature)", source='''
def rms_norm(x, gamma, eps=1e-6):
    dims = tuple(range(x.ndim - 1))
    return x / torch.sqrt((x * x).mean(dim=dims, keepdim=True) + eps) * gamma
'''),
    dict(exercise="rms_norm", diagnosis="Likely mistake: the mean square is taken over the whole tensor;",
         mistake="mean square of the whole tensor (no dim)", source='''
def rms_norm(x, gamma, eps=1e-6):
    return x / torch.sqrt((x * x).mean() + eps) * gamma
'''),
    dict(exercise="rms_norm", diagnosis="does the exercise for you", mistake="calls torch's rms_norm", source='''
def rms_norm(x, gamma, eps=1e-6):
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), gamma, eps)
'''),
    # ------------------------------------------------------------ batch_norm
    dict(exercise="batch_norm", diagnosis="Likely mistake: the statistics are taken over each",
         mistake="normalizes over the feature axis (LayerNorm)", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="batch_norm", diagnosis="Likely mistake: the padding slots enter the",
         mistake="ignores the mask: padding enters the statistics", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    dims = tuple(range(x.ndim - 1))
    mean = x.mean(dim=dims)
    var = ((x - mean) ** 2).mean(dim=dims)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="batch_norm", diagnosis="Likely mistake: the variance is unbiased (divided",
         mistake="unbiased variance of the real tokens", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    tokens = x.reshape(-1, x.shape[-1])
    if mask is not None:
        tokens = tokens[mask.reshape(-1)]
    mean, var = tokens.mean(0), tokens.var(0)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="batch_norm", diagnosis="Likely mistake: the statistics are taken over the",
         mistake="statistics over the batch axis only, per position", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    m = torch.ones(x.shape[:-1], dtype=x.dtype) if mask is None else mask.to(x.dtype)
    m = m[..., None]
    n = m.sum(dim=0)
    mean = (x * m).sum(dim=0) / n
    var = (((x - mean) ** 2) * m).sum(dim=0) / n
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="batch_norm", diagnosis="Likely mistake: the masked sums are divided",
         mistake="masked sums divided by all positions", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    dims = tuple(range(x.ndim - 1))
    m = torch.ones(x.shape[:-1], dtype=x.dtype) if mask is None else mask.to(x.dtype)
    m = m[..., None]
    n = x[..., 0].numel()
    mean = (x * m).sum(dim=dims) / n
    var = (((x - mean) ** 2) * m).sum(dim=dims) / n
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="batch_norm", diagnosis="Likely mistake: the mean uses the real tokens",
         mistake="mask used for the mean but not for the variance", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    dims = tuple(range(x.ndim - 1))
    if mask is None:
        mean = x.mean(dim=dims)
    else:
        mean = x[mask].mean(dim=0)
    var = ((x - mean) ** 2).mean(dim=dims)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="batch_norm", diagnosis="Likely mistake: the padded outputs are set",
         mistake="zeroes the padded outputs", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    tokens = x.reshape(-1, x.shape[-1])
    if mask is not None:
        tokens = tokens[mask.reshape(-1)]
    mean = tokens.mean(0)
    var = ((tokens - mean) ** 2).mean(0)
    y = (x - mean) / torch.sqrt(var + eps) * gamma + beta
    return y if mask is None else y * mask[..., None]
'''),
    dict(exercise="batch_norm", diagnosis="gives wrong values",
         mistake="only handles (batch, seq, d): statistics over dims (0, 1) always", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    m = torch.ones(x.shape[:2], dtype=x.dtype) if mask is None else mask.to(x.dtype)
    while m.ndim < 2:
        m = m[:, None]
    m = m.reshape(m.shape[0], m.shape[1], *([1] * (x.ndim - 2)))
    n = m.sum(dim=(0, 1))
    mean = (x * m).sum(dim=(0, 1)) / n
    var = (((x - mean) ** 2) * m).sum(dim=(0, 1)) / n
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="batch_norm", diagnosis="Likely mistake: eps is added outside the square",
         mistake="eps outside the square root", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    tokens = x.reshape(-1, x.shape[-1])
    if mask is not None:
        tokens = tokens[mask.reshape(-1)]
    mean = tokens.mean(0)
    std = tokens.std(0, unbiased=False)
    return (x - mean) / (std + eps) * gamma + beta
'''),
    dict(exercise="batch_norm", diagnosis="Likely mistake: the gain gamma is not applied.",
         mistake="forgets the gain gamma", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    tokens = x.reshape(-1, x.shape[-1])
    if mask is not None:
        tokens = tokens[mask.reshape(-1)]
    mean = tokens.mean(0)
    var = ((tokens - mean) ** 2).mean(0)
    return (x - mean) / torch.sqrt(var + eps) + beta
'''),
    dict(exercise="batch_norm", diagnosis="Likely mistake: the shift beta is not added.",
         mistake="forgets the shift beta", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    tokens = x.reshape(-1, x.shape[-1])
    if mask is not None:
        tokens = tokens[mask.reshape(-1)]
    mean = tokens.mean(0)
    var = ((tokens - mean) ** 2).mean(0)
    return (x - mean) / torch.sqrt(var + eps) * gamma
'''),
    dict(exercise="batch_norm", diagnosis="does the exercise for you",
         mistake="calls torch's batch_norm on the real tokens", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    tokens = x.reshape(-1, x.shape[-1])
    real = tokens if mask is None else tokens[mask.reshape(-1)]
    mean, var = real.mean(0), real.var(0, unbiased=False)
    y = torch.nn.functional.batch_norm(tokens, mean, var, gamma, beta, training=False, eps=eps)
    return y.reshape(x.shape)
'''),
    # ------------------------------------------------------------ layer_norm_backward
    dict(exercise="layer_norm_backward", diagnosis="Likely mistake: the mean and the variance",
         mistake="treats mean and variance as constants", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    return grad_out * gamma / sigma
'''),
    dict(exercise="layer_norm_backward", diagnosis="Likely mistake: the path through the variance",
         mistake="forgets the path through the variance", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    g = grad_out * gamma
    return (g - g.mean(dim=-1, keepdim=True)) / sigma
'''),
    dict(exercise="layer_norm_backward", diagnosis="Likely mistake: the path through the mean",
         mistake="forgets the path through the mean", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    xhat = (x - mean) / sigma
    g = grad_out * gamma
    return (g - xhat * (g * xhat).mean(dim=-1, keepdim=True)) / sigma
'''),
    dict(exercise="layer_norm_backward", diagnosis="Likely mistake: the gain is left out: the", mistake="forgets gamma",
         source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    xhat = (x - mean) / sigma
    g = grad_out
    return (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True)) / sigma
'''),
    dict(exercise="layer_norm_backward", diagnosis="Likely mistake: the correction terms use sums",
         mistake="sums instead of means (a factor d on the correction terms)", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    xhat = (x - mean) / sigma
    g = grad_out * gamma
    return (g - g.sum(dim=-1, keepdim=True) - xhat * (g * xhat).sum(dim=-1, keepdim=True)) / sigma
'''),
    dict(exercise="layer_norm_backward", diagnosis="Likely mistake: the variance is unbiased (divided",
         mistake="unbiased variance", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt(x.var(dim=-1, keepdim=True) + eps)
    xhat = (x - mean) / sigma
    g = grad_out * gamma
    return (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True)) / sigma
'''),
    dict(exercise="layer_norm_backward", diagnosis="Likely mistake: the variance term has the wrong sign:",
         mistake="adds the variance term instead of subtracting it", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    xhat = (x - mean) / sigma
    g = grad_out * gamma
    return (g - g.mean(dim=-1, keepdim=True) + xhat * (g * xhat).mean(dim=-1, keepdim=True)) / sigma
'''),
    dict(exercise="layer_norm_backward", diagnosis="Likely mistake: the result is multiplied by sqrt(var + eps);",
         mistake="multiplies by the standard deviation instead of dividing", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    sigma = torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    xhat = (x - mean) / sigma
    g = grad_out * gamma
    return (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True)) * sigma
'''),
    dict(exercise="layer_norm_backward", diagnosis="does the exercise for you",
         mistake="uses autograd on a forward pass", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    with torch.enable_grad():
        xr = x.detach().clone().requires_grad_(True)
        mean = xr.mean(dim=-1, keepdim=True)
        y = (xr - mean) / torch.sqrt(((xr - mean) ** 2).mean(dim=-1, keepdim=True) + eps) * gamma
        (dx,) = torch.autograd.grad((y * grad_out).sum(), xr)
    return dx
'''),
    dict(exercise="layer_norm_backward", diagnosis="does the exercise for you", mistake="uses torch.func.vjp",
         source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    import torch.func
    def f(t):
        mean = t.mean(dim=-1, keepdim=True)
        return (t - mean) / torch.sqrt(((t - mean) ** 2).mean(dim=-1, keepdim=True) + eps) * gamma
    _, vjp = torch.func.vjp(f, x)
    return vjp(grad_out)[0]
'''),
]

RIGHT = [
    # ------------------------------------------------------------ layer_norm
    dict(exercise="layer_norm", how="torch.var_mean with correction=0 and torch.rsqrt", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm", how="sums divided by d written out, gain and shift with torch.addcmul", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    d = x.shape[-1]
    centered = x - x.sum(dim=-1, keepdim=True) / d
    var = centered.pow(2).sum(dim=-1, keepdim=True) / d
    return torch.addcmul(beta, centered / (var + eps).sqrt(), gamma)
'''),
    # ------------------------------------------------------------ rms_norm
    dict(exercise="rms_norm", how="multiplies by torch.rsqrt of the mean of x ** 2", source='''
def rms_norm(x, gamma, eps=1e-6):
    return gamma * (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps))
'''),
    dict(exercise="rms_norm", how="the mean square as an einsum dot product of x with itself, divided by d", source='''
def rms_norm(x, gamma, eps=1e-6):
    ms = torch.einsum("...i,...i->...", x, x).unsqueeze(-1) / x.shape[-1]
    return x / (ms + eps) ** 0.5 * gamma
'''),
    # ------------------------------------------------------------ batch_norm
    dict(exercise="batch_norm", how="weighted sums with the mask as 0/1 weights, no boolean indexing", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    dims = tuple(range(x.dim() - 1))
    if mask is None:
        w = torch.ones(x.shape[:-1] + (1,), dtype=x.dtype)
    else:
        w = mask.unsqueeze(-1).to(x.dtype)
    n = w.sum(dim=dims, keepdim=True)
    mean = (torch.where(w > 0, x, torch.zeros_like(x))).sum(dim=dims, keepdim=True) / n
    dev = torch.where(w > 0, x - mean, torch.zeros_like(x))
    var = dev.pow(2).sum(dim=dims, keepdim=True) / n
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
'''),
    dict(exercise="batch_norm", how="index_select of the real tokens, torch.var_mean over them, torch.rsqrt", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    tokens = x.flatten(0, -2) if x.dim() > 1 else x.unsqueeze(0)
    if mask is not None:
        keep = mask.reshape(-1).nonzero().squeeze(1)
        tokens = tokens.index_select(0, keep)
    var, mean = torch.var_mean(tokens, dim=0, correction=0)
    return (x - mean) * torch.rsqrt(var + eps) * gamma + beta
'''),
    # ------------------------------------------------------------ layer_norm_backward
    dict(exercise="layer_norm_backward", how="the formula with sums: (d g - sum g - xhat sum(g xhat)) / (d sigma)",
         source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    d = x.shape[-1]
    centered = x - x.mean(dim=-1, keepdim=True)
    inv_sigma = torch.rsqrt(centered.pow(2).mean(dim=-1, keepdim=True) + eps)
    xhat = centered * inv_sigma
    g = gamma * grad_out
    total = g.sum(dim=-1, keepdim=True)
    proj = (g * xhat).sum(dim=-1, keepdim=True)
    return inv_sigma / d * (d * g - total - xhat * proj)
'''),
    dict(exercise="layer_norm_backward",
         how="staged chain rule through the variance and the mean (the computational graph)", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    d = x.shape[-1]
    mu = x.mean(dim=-1, keepdim=True)
    xc = x - mu
    var = (xc * xc).mean(dim=-1, keepdim=True)
    inv = 1.0 / torch.sqrt(var + eps)
    dxhat = grad_out * gamma
    dvar = (dxhat * xc).sum(dim=-1, keepdim=True) * (-0.5) * inv ** 3
    dmu = -(dxhat * inv).sum(dim=-1, keepdim=True) + dvar * (-2.0 * xc).mean(dim=-1, keepdim=True)
    return dxhat * inv + dvar * 2.0 * xc / d + dmu / d
'''),
]

# The contract's last gaps (issue 27): a large mean wherever a variance is computed or differentiated through.
WRONG += [
    dict(exercise="layer_norm", diagnosis="the variance is computed as E[x^2] - E[x]^2",
         mistake="one-pass variance from sums (torch.var_mean would be fine; sum(x^2)/d - mean^2 is not)", source='''
def layer_norm(x, gamma, beta, eps=1e-5):
    d = x.shape[-1]
    s1, s2 = x.sum(-1, keepdim=True), (x * x).sum(-1, keepdim=True)
    mean = s1 / d
    var = (s2 - s1 * mean) / d
    return (x - mean) * torch.rsqrt(var + eps) * gamma + beta
'''),
    dict(exercise="batch_norm", diagnosis="the variance is computed as E[x^2] - E[x]^2",
         mistake="one-pass masked variance E[x^2] - E[x]^2 over the real tokens", source='''
def batch_norm(x, gamma, beta, eps=1e-5, mask=None):
    m = torch.ones(x.shape[:-1], dtype=x.dtype) if mask is None else mask.to(x.dtype)
    m = m[..., None]
    dims = tuple(range(x.ndim - 1))
    n = m.sum(dim=dims)
    mean = (x * m).sum(dim=dims) / n
    var = (x * x * m).sum(dim=dims) / n - mean ** 2
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta
'''),
    dict(exercise="layer_norm_backward", diagnosis="the variance is computed as E[x^2] - E[x]^2",
         mistake="the backward pass with the one-pass variance E[x^2] - E[x]^2", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
    rstd = 1.0 / torch.sqrt(var + eps)
    xhat = (x - mean) * rstd
    g = grad_out * gamma
    return (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True)) * rstd
'''),
    dict(exercise="layer_norm_backward", diagnosis="the variance is computed as E[x^2] - E[x]^2",
         mistake="the backward pass written with sums and the one-pass variance", source='''
def layer_norm_backward(grad_out, x, gamma, eps=1e-5):
    d = x.shape[-1]
    s1, s2 = x.sum(-1, keepdim=True), (x * x).sum(-1, keepdim=True)
    var = s2 / d - (s1 / d) ** 2
    xhat = (x - s1 / d) / torch.sqrt(var + eps)
    g = grad_out * gamma
    dxhat_sum, dxhat_xhat_sum = g.sum(-1, keepdim=True), (g * xhat).sum(-1, keepdim=True)
    return (d * g - dxhat_sum - xhat * dxhat_xhat_sum) / (d * torch.sqrt(var + eps))
'''),
]


# ------------------------------------------------------------ predicted_ln_gradient (predict, then run)
WRONG += [
    dict(exercise='predicted_ln_gradient', diagnosis='Likely mistake: only the direct path g / sigma: the path',
         mistake='only the direct path g / sigma: the paths through the mean and through sigma are missing', source='''
def predicted_ln_gradient():
    return [1.0, 0.0, 0.0, 0.0]
'''),
    dict(exercise='predicted_ln_gradient', diagnosis='Likely mistake: the path through sigma is missing (the t',
         mistake='the path through sigma is missing (the term xhat * mean(g * xhat))', source='''
def predicted_ln_gradient():
    return [0.75, -0.25, -0.25, -0.25]
'''),
    dict(exercise='predicted_ln_gradient', diagnosis='Likely mistake: the path through sigma has the wrong sig',
         mistake='the path through sigma has the wrong sign: it is subtracted, xhat * mean(g * xhat)', source='''
def predicted_ln_gradient():
    return [1.0, 0.0, -0.5, -0.5]
'''),
    dict(exercise='predicted_ln_gradient', diagnosis="should return", mistake="answers in words", source='''
def predicted_ln_gradient():
    return "I think it is [0.5, -0.5, 0.0, 0.0]"
'''),
    dict(exercise='predicted_ln_gradient', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_ln_gradient():
    print([0.5, -0.5, 0.0, 0.0])
'''),
]
RIGHT += [
    dict(exercise='predicted_ln_gradient', how="a tensor", source='''
def predicted_ln_gradient():
    return torch.tensor([0.5, -0.5, 0.0, 0.0])
'''),
    dict(exercise='predicted_ln_gradient', how="a tuple of the exact values", source='''
def predicted_ln_gradient():
    return (0.5, -0.5, 0.0, 0.0)
'''),
]
