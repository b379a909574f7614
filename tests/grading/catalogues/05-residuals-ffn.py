"""Plausible wrong implementations for assignment 05-residuals-ffn, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/05-residuals-ffn/residuals_ffn.ipynb with ``source``; the hidden
tests of that exercise must fail on it (tests/grading/test_catalogues.py).
``mistake`` says what a learner got wrong, in the words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ position_wise_ffn
    dict(exercise="position_wise_ffn", diagnosis="Likely mistake: the first bias b1 is missing:",
         mistake="forgets the first bias", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    y = torch.relu(x @ w1.T) @ w2.T
    return y if b2 is None else y + b2
'''),
    dict(exercise="position_wise_ffn", diagnosis="Likely mistake: the second bias b2 is missing:",
         mistake="forgets the second bias", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = x @ w1.T
    if b1 is not None:
        h = h + b1
    return torch.relu(h) @ w2.T
'''),
    dict(exercise="position_wise_ffn", diagnosis="Likely mistake: a ReLU is applied after the",
         mistake="ReLU after the second layer as well", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = x @ w1.T + (0 if b1 is None else b1)
    y = torch.relu(h) @ w2.T + (0 if b2 is None else b2)
    return torch.relu(y)
'''),
    dict(exercise="position_wise_ffn", diagnosis="Likely mistake: the activation is GELU; this",
         mistake="GELU instead of ReLU", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    import torch.nn.functional as F
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
'''),
    dict(exercise="position_wise_ffn", diagnosis="gives wrong values",
         mistake="weights not transposed (x @ W, reshaped to fit)", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = x @ w1.reshape(w1.shape[1], w1.shape[0])
    if b1 is not None:
        h = h + b1
    y = torch.relu(h) @ w2.reshape(w2.shape[1], w2.shape[0])
    return y if b2 is None else y + b2
'''),
    dict(exercise="position_wise_ffn", diagnosis="Likely mistake: the weights are not transposed: nn.Linear",
         mistake="weights used without transposing (named on the "
                 "square case; a shape error whenever mlp_hidden != dim)",
         source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = x @ w1
    if b1 is not None:
        h = h + b1
    y = torch.relu(h) @ w2
    return y if b2 is None else y + b2
'''),
    dict(exercise="position_wise_ffn",
         diagnosis="Likely mistake: the FFN mixes the sequence axis (the tokens-as-columns",
         mistake="tokens-as-columns formula: mixes the sequence axis", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    xt = x.transpose(-2, -1) if x.ndim > 1 else x
    h = xt @ w1.T
    if b1 is not None:
        h = h + b1
    y = torch.relu(h) @ w2.T
    if b2 is not None:
        y = y + b2
    return y.transpose(-2, -1) if x.ndim > 1 else y
'''),
    dict(exercise="position_wise_ffn", diagnosis="Likely mistake: the FFN mixes the sequence axis and transposes back",
         mistake="tokens-as-columns formula W x, transposed back at the end", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = w1 @ x
    if b1 is not None:
        h = h + b1[:, None]
    y = w2 @ torch.relu(h)
    if b2 is not None:
        y = y + b2[:, None]
    return y.transpose(-2, -1)
'''),
    dict(exercise="position_wise_ffn", diagnosis="raised", mistake="always adds the biases (crashes on None)",
         source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    return torch.relu(x @ w1.T + b1) @ w2.T + b2
'''),
    dict(exercise="position_wise_ffn", diagnosis="Likely mistake: the activation is the tanh approximation of GELU",
         mistake="tanh-approximate GELU instead of ReLU", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    import math
    h = x @ w1.T
    if b1 is not None:
        h = h + b1
    h = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    y = h @ w2.T
    return y if b2 is None else y + b2
'''),
    dict(exercise="position_wise_ffn", diagnosis="Likely mistake: the ReLU is missing: without",
         mistake="no activation at all", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = x @ w1.T + (0 if b1 is None else b1)
    return h @ w2.T + (0 if b2 is None else b2)
'''),
    dict(exercise="position_wise_ffn", diagnosis="Likely mistake: the ReLU comes before the first layer",
         mistake="ReLU applied to the input, before the first layer", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = torch.relu(x) @ w1.T
    if b1 is not None:
        h = h + b1
    y = h @ w2.T
    return y if b2 is None else y + b2
'''),
    dict(exercise="position_wise_ffn", diagnosis="raised", mistake="adds the bias into b1's storage in place",
         source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = x @ w1.T
    if b1 is not None:
        b1 += 0.0
        h = h + b1
    b = w2.T
    b.mul_(1.0)
    y = torch.relu(h) @ w2.T
    if b2 is not None:
        b2.add_(x.mean())
        y = y + b2
    return y
'''),
    dict(exercise="position_wise_ffn", diagnosis="cut off from the autograd graph",
         mistake="detaches the result (numpy round trip)", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = x @ w1.T
    if b1 is not None:
        h = h + b1
    y = torch.relu(h) @ w2.T
    if b2 is not None:
        y = y + b2
    return torch.from_numpy(y.detach().numpy())
'''),
    dict(exercise="position_wise_ffn", diagnosis="returned dtype",
         mistake="computes in float32 whatever the input dtype", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = x.float() @ w1.float().T
    if b1 is not None:
        h = h + b1.float()
    y = torch.relu(h) @ w2.float().T
    return y if b2 is None else y + b2.float()
'''),
    dict(exercise="position_wise_ffn", diagnosis="calls the reference", mistake="calls the course's MLP", source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    from course_lib.mlp import MLP
    mlp = MLP(w1.shape[1], w1.shape[0], act="relu", bias=False).to(x.dtype)
    with torch.no_grad():
        mlp.fc1.weight.copy_(w1)
        mlp.fc2.weight.copy_(w2)
    y = mlp(x)
    return y
'''),
    # ------------------------------------------------------------ residual
    dict(exercise="residual", diagnosis="Likely mistake: the norm positions 'pre' and", mistake="pre and post swapped",
         source='''
def residual(x, sublayer, norm, position):
    if position == "pre":
        return norm(x + sublayer(x))
    if position == "post":
        return x + sublayer(norm(x))
    return x + norm(sublayer(x))
'''),
    dict(exercise="residual", diagnosis="Likely mistake: 'res_post' normalizes the sum;",
         mistake="res_post normalizes the sum (same as post)", source='''
def residual(x, sublayer, norm, position):
    if position == "pre":
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))
'''),
    dict(exercise="residual", diagnosis="Likely mistake: the skip connection is missing:",
         mistake="missing skip connection", source='''
def residual(x, sublayer, norm, position):
    if position == "pre":
        return sublayer(norm(x))
    if position == "post":
        return norm(sublayer(x))
    return norm(sublayer(x))
'''),
    dict(exercise="residual", diagnosis="Likely mistake: x is added twice: the skip", mistake="skip added twice",
         source='''
def residual(x, sublayer, norm, position):
    if position == "pre":
        out = x + sublayer(norm(x))
    elif position == "post":
        out = norm(x + sublayer(x))
    else:
        out = x + norm(sublayer(x))
    return out + x if position != "post" else out
'''),
    dict(exercise="residual", diagnosis="Likely mistake: the result is only the sublayer's",
         mistake="returns the sublayer's output only", source='''
def residual(x, sublayer, norm, position):
    return sublayer(x)
'''),
    dict(exercise="residual", diagnosis="Likely mistake: in 'pre' the skip carries",
         mistake="pre: the skip carries norm(x)", source='''
def residual(x, sublayer, norm, position):
    if position == "pre":
        h = norm(x)
        return h + sublayer(h)
    if position == "post":
        return norm(x + sublayer(x))
    return x + norm(sublayer(x))
'''),
    dict(exercise="residual", diagnosis="Likely mistake: `position` is ignored: every case is computed",
         mistake="ignores position (always pre)", source='''
def residual(x, sublayer, norm, position):
    return x + sublayer(norm(x))
'''),
    dict(exercise="residual", diagnosis="Likely mistake: 'res_post' normalizes the sublayer's",
         mistake="res_post applies the norm before the sublayer", source='''
def residual(x, sublayer, norm, position):
    if position == "post":
        return norm(x + sublayer(x))
    return x + sublayer(norm(x))
'''),
    dict(exercise="residual", diagnosis="Likely mistake: 'post' normalizes the branch",
         mistake="post normalizes only the branch", source='''
def residual(x, sublayer, norm, position):
    if position == "pre":
        return x + sublayer(norm(x))
    return x + norm(sublayer(x))
'''),
    dict(exercise="residual", diagnosis="raised", mistake="adds in place into x", source='''
def residual(x, sublayer, norm, position):
    if position == "pre":
        x += sublayer(norm(x))
        return x
    if position == "post":
        return norm(x + sublayer(x))
    x += norm(sublayer(x))
    return x
'''),
    dict(exercise="residual", diagnosis="Likely mistake: 'post' also normalizes the",
         mistake="norm applied twice in post (before and after)", source='''
def residual(x, sublayer, norm, position):
    if position == "pre":
        return x + sublayer(norm(x))
    if position == "post":
        return norm(x + sublayer(norm(x)))
    return x + norm(sublayer(x))
'''),
    dict(exercise="residual", diagnosis="Likely mistake: the norm is never applied.", mistake="never applies the norm",
         source='''
def residual(x, sublayer, norm, position):
    return x + sublayer(x)
'''),
    dict(exercise="residual", diagnosis="calls the reference", mistake="calls the course's residual", source='''
def residual(x, sublayer, norm, position):
    from course_lib import blocks
    return blocks.residual(x, sublayer, norm, position)
'''),
    # ------------------------------------------------------------ ffn_param_count
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: the biases are missing: with",
         mistake="forgets the biases", source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    return 2 * dim * mlp_hidden
'''),
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: biases are counted even when",
         mistake="counts biases whatever the flag", source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    return 2 * dim * mlp_hidden + mlp_hidden + dim
'''),
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: only the first layer's bias",
         mistake="only the hidden bias", source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    return 2 * dim * mlp_hidden + (mlp_hidden if bias else 0)
'''),
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: only the second layer's bias (dim) is counted",
         mistake="only the output bias", source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    count = 2 * dim * mlp_hidden
    if bias:
        count += dim
    return count
'''),
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: both biases are counted as mlp_hidden",
         mistake="both biases of width mlp_hidden", source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    count = 2 * dim * mlp_hidden
    if bias:
        count += 2 * mlp_hidden
    return count
'''),
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: both biases are counted as dim:",
         mistake="both biases of width dim", source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    return 2 * dim * mlp_hidden + (2 * dim if bias else 0)
'''),
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: only one weight matrix is", mistake="one weight matrix",
         source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    return dim * mlp_hidden + (mlp_hidden + dim if bias else 0)
'''),
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: mlp_hidden is taken as 4 *",
         mistake="assumes mlp_hidden = 4 dim", source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    mlp_hidden = 4 * dim
    return 2 * dim * mlp_hidden + (mlp_hidden + dim if bias else 0)
'''),
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: the count is a float: use", mistake="returns a float",
         source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    return 2.0 * dim * mlp_hidden + (mlp_hidden + dim if bias else 0)
'''),
    dict(exercise="ffn_param_count", diagnosis="Likely mistake: the biases are missing: with",
         mistake="default bias=False", source='''
def ffn_param_count(dim, mlp_hidden, bias=False):
    return 2 * dim * mlp_hidden + (mlp_hidden + dim if bias else 0)
'''),
    dict(exercise="ffn_param_count", diagnosis="gives a wrong result",
         mistake="squares instead of multiplying (dim^2 + mlp_hidden^2)", source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    return dim * dim + mlp_hidden * mlp_hidden + (mlp_hidden + dim if bias else 0)
'''),
    dict(exercise="ffn_param_count", diagnosis="calls the reference", mistake="builds the layers with course_lib",
         source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    from course_lib.counting import mlp_param_count
    return mlp_param_count(dim, mlp_hidden, bias)
'''),
    # ------------------------------------------------------------ layer_flops
    dict(exercise="layer_flops", diagnosis="Likely mistake: multiply-adds are counted",
         mistake="counts multiply-adds, not FLOPs", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return {"projections": 4 * n * d * d, "attention": 2 * n * n * d, "ffn": 2 * n * d * mlp_hidden}
'''),
    dict(exercise="layer_flops", diagnosis="Likely mistake: only three projections are",
         mistake="forgets the output projection", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return {"projections": 2 * 3 * n * d * d, "attention": 4 * n * n * d, "ffn": 4 * n * d * mlp_hidden}
'''),
    dict(exercise="layer_flops", diagnosis="Likely mistake: \"attention\" counts only Q", mistake="counts only Q K^T",
         source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return {"projections": 8 * n * d * d, "attention": 2 * n * n * d, "ffn": 4 * n * d * mlp_hidden}
'''),
    dict(exercise="layer_flops", diagnosis="Likely mistake: \"ffn\" counts one matrix product;",
         mistake="one FFN matrix", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return {"projections": 8 * n * d * d, "attention": 4 * n * n * d, "ffn": 2 * n * d * mlp_hidden}
'''),
    dict(exercise="layer_flops", diagnosis="Likely mistake: mlp_hidden is taken as 4 *",
         mistake="ignores mlp_hidden (uses 4 dim)", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return {"projections": 8 * n * d * d, "attention": 4 * n * n * d, "ffn": 16 * n * d * d}
'''),
    dict(exercise="layer_flops", diagnosis="Likely mistake: \"attention\" grows like N D^2;",
         mistake="N and D swapped in the attention products", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return {"projections": 8 * n * d * d, "attention": 4 * n * d * d, "ffn": 4 * n * d * mlp_hidden}
'''),
    dict(exercise="layer_flops", diagnosis="Likely mistake: the counts are floats: use",
         mistake="float division gives float counts", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    macs = {"projections": 4 * n * d * d, "attention": 2 * n * n * d, "ffn": 2 * n * d * mlp_hidden}
    return {k: v / 0.5 for k, v in macs.items()}
'''),
    dict(exercise="layer_flops", diagnosis="expected", mistake="returns a tuple instead of a dict", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return (8 * n * d * d, 4 * n * n * d, 4 * n * d * mlp_hidden)
'''),
    dict(exercise="layer_flops", diagnosis="gives a wrong result",
         mistake="counts attention per head of width d/8 without multiplying by the heads", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return {"projections": 8 * n * d * d, "attention": 4 * n * n * max(d // 8, 1), "ffn": 4 * n * d * mlp_hidden}
'''),
    dict(exercise="layer_flops", diagnosis="Likely mistake: \"projections\" grow like N^2",
         mistake="projection cost N^2 D", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return {"projections": 8 * n * n * d, "attention": 4 * n * n * d, "ffn": 4 * n * d * mlp_hidden}
'''),
    dict(exercise="layer_flops", diagnosis="expected", mistake="wrong key names", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    n, d = n_tokens, dim
    return {"qkvo": 8 * n * d * d, "attention": 4 * n * n * d, "ffn": 4 * n * d * mlp_hidden}
'''),
]

RIGHT = [
    # ------------------------------------------------------------ position_wise_ffn
    dict(exercise="position_wise_ffn", how="torch.nn.functional.linear for both maps, clamp(min=0) for the ReLU",
         source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = torch.nn.functional.linear(x, w1, b1).clamp(min=0)
    return torch.nn.functional.linear(h, w2, b2)
'''),
    dict(exercise="position_wise_ffn", how="einsum, the ReLU as torch.where(h > 0, h, 0), biases added only when given",
         source='''
def position_wise_ffn(x, w1, b1, w2, b2):
    h = torch.einsum("...d,hd->...h", x, w1)
    if b1 is not None:
        h = h + b1
    h = torch.where(h > 0, h, torch.zeros_like(h))
    y = torch.einsum("...h,dh->...d", h, w2)
    return y if b2 is None else y + b2
'''),
    # ------------------------------------------------------------ residual
    dict(exercise="residual", how="a dict of the three forms as lambdas, sums written branch first", source='''
def residual(x, sublayer, norm, position):
    forms = {
        "pre": lambda: sublayer(norm(x)) + x,
        "post": lambda: norm(sublayer(x) + x),
        "res_post": lambda: norm(sublayer(x)) + x,
    }
    if position not in forms:
        raise ValueError(f"unknown position {position!r}")
    return forms[position]()
'''),
    dict(exercise="residual", how="computes the branch input and output step by step with torch.add", source='''
def residual(x, sublayer, norm, position):
    if position not in ("pre", "post", "res_post"):
        raise ValueError(position)
    branch_in = norm(x) if position == "pre" else x
    branch = sublayer(branch_in)
    if position == "res_post":
        branch = norm(branch)
    out = torch.add(x, branch)
    return norm(out) if position == "post" else out
'''),
    # ------------------------------------------------------------ ffn_param_count
    dict(exercise="ffn_param_count", how="the two layers counted separately, bias as 0 or 1 times the outputs",
         source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    first = dim * mlp_hidden + (mlp_hidden if bias else 0)
    second = mlp_hidden * dim + (dim if bias else 0)
    return first + second
'''),
    dict(exercise="ffn_param_count", how="(fan_in + bias) * fan_out per layer, with int(bias)", source='''
def ffn_param_count(dim, mlp_hidden, bias=True):
    b = int(bool(bias))
    return (dim + b) * mlp_hidden + (mlp_hidden + b) * dim
'''),
    # ------------------------------------------------------------ layer_flops
    dict(exercise="layer_flops", how="multiply-adds first, then every count doubled", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    macs = {
        "ffn": n_tokens * dim * mlp_hidden * 2,
        "attention": n_tokens * n_tokens * dim * 2,
        "projections": n_tokens * dim * dim * 4,
    }
    return {part: 2 * m for part, m in macs.items()}
'''),
    dict(exercise="layer_flops", how="a helper for the cost of one (m, k) @ (k, p) product, summed per part", source='''
def layer_flops(n_tokens, dim, mlp_hidden):
    def matmul(m, k, p):
        return 2 * m * k * p
    n, d, f = n_tokens, dim, mlp_hidden
    return {
        "projections": sum(matmul(n, d, d) for _ in range(4)),
        "attention": matmul(n, d, n) + matmul(n, n, d),
        "ffn": matmul(n, d, f) + matmul(n, f, d),
    }
'''),
]


# ------------------------------------------------------------ predicted_flops (predict, then run)
WRONG += [
    dict(exercise='predicted_flops', diagnosis='Likely mistake: multiply-adds were counted, not FLOPs: e',
         mistake='multiply-adds were counted, not FLOPs: each multiply-add is 2 FLOPs', source='''
def predicted_flops():
    return [80, 100, 160]
'''),
    dict(exercise='predicted_flops', diagnosis='Likely mistake: attention was counted as one product (Q ',
         mistake='attention was counted as one product (Q K^T)', source='''
def predicted_flops():
    return [160, 100, 320]
'''),
    dict(exercise='predicted_flops', diagnosis='Likely mistake: the FFN was counted as one map',
         mistake='the FFN was counted as one map', source='''
def predicted_flops():
    return [160, 200, 160]
'''),
    dict(exercise='predicted_flops', diagnosis="should return", mistake="answers in words", source='''
def predicted_flops():
    return "I think it is [160, 200, 320]"
'''),
    dict(exercise='predicted_flops', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_flops():
    print([160, 200, 320])
'''),
]
RIGHT += [
    dict(exercise='predicted_flops', how="a tensor", source='''
def predicted_flops():
    return torch.tensor([160.0, 200.0, 320.0])
'''),
    dict(exercise='predicted_flops', how="a tuple of the exact values", source='''
def predicted_flops():
    return (160, 200, 320)
'''),
]
