"""The book's diagrams, one function per diagram, each returning its :class:`~tools.diagrams.style.Canvas`.

Names of tensors and shapes follow the notation page (``notation.md``):
tokens are rows, ``Q (n_q, d_k)``, ``K, V (n_k, d_k or d_v)``, ``S``, ``A``,
``W_O``; images ``(B, C, H, W)``, patches ``(B, N, C·P·P)``.
"""

from __future__ import annotations

from .style import HIGHLIGHT, MUTED, Canvas


def attention_lookup() -> Canvas:
    """Chapter 2: attention as a soft lookup. One query row scores every key, the weights mix the value rows."""
    c = Canvas(17.5, 7.8)
    cell = 0.5
    weights = [[0.10, 0.55, 0.05, 0.20, 0.10], [0.05, 0.10, 0.70, 0.05, 0.10], [0.30, 0.20, 0.10, 0.30, 0.10]]
    peak = max(max(r) for r in weights)
    shade = [[w / peak for w in row] for row in weights]
    # queries Q (n_q = 3, d_k = 4), keys as K^T (d_k = 4, n_k = 5) above the weights A (n_q, n_k)
    c.grid(0.6, 1.0, 3, 4, cell, kind="tensor", highlight_rows=[1])
    c.text(1.6, 0.45, "queries $Q$  $(n_q, d_k)$", size=9)
    c.grid(3.6, 3.3, 4, 5, cell, kind="tensor")
    c.text(4.85, 5.65, "keys $K^\\top$  $(d_k, n_k)$", size=9)
    c.grid(3.6, 1.0, 3, 5, cell, values=shade, highlight_rows=[1])
    c.text(4.85, 0.45, "weights $A$  $(n_q, n_k)$", size=9)
    c.text(8.75, 7.1, "$S = QK^\\top/\\sqrt{d_k}$,   $A = \\mathrm{softmax}(S)$ along each row: every row sums to 1",
           size=10)
    c.arrow((2.75, 1.75), (3.5, 1.75))
    # values V (n_k = 5, d_v = 3): row j of V is weighted by column j of A
    c.grid(7.6, 0.75, 5, 3, cell, kind="tensor")
    c.text(8.35, 0.3, "values $V$  $(n_k, d_v)$", size=9)
    c.arrow((6.2, 1.75), (7.45, 1.75), text="$\\times$", offset=(-0.35, 0.25))
    # output O = A V (n_q, d_v)
    c.grid(11.0, 1.0, 3, 3, cell, kind="output", highlight_rows=[1])
    c.text(11.75, 0.45, "output $AV$  $(n_q, d_v)$", size=9)
    c.arrow((9.25, 1.75), (10.85, 1.75), text="$=$", offset=(-0.4, 0.25))
    c.text(13.1, 3.2, "row 2 of the output\nis $\\sum_j A_{2j}\\,V_j$:\nmostly value 3,\nwhose key matched\n"
           "query 2 best", ha="left", size=8.5, color=MUTED)
    c.ax.plot([12.4, 13.0], [1.75, 2.6], color=HIGHLIGHT, linewidth=1.0)
    return c


def encoder_decoder() -> Canvas:
    """Chapter 6: the encoder-decoder Transformer, its three attentions, and the mask each one uses."""
    c = Canvas(17.0, 15.4)

    def attention(x, y, w, name, note):
        c.box(x, y, w, 1.1, kind="attention")
        c.text(x + w / 2, y + 0.72, name, size=9.5)
        c.text(x + w / 2, y + 0.3, note, size=7.5, color=MUTED)

    # -- encoder (left column)
    ex, w = 1.6, 4.8
    c.box(ex, 0.4, w, 0.8, "source tokens $(B, n_{src})$", kind="tensor", size=9)
    c.box(ex, 1.8, w, 0.8, "embedding + positions", kind="embed", size=9)
    c.region(ex - 0.3, 3.2, w + 0.6, 5.0, "$\\times N$", where="left")
    attention(ex, 3.5, w, "self-attention", "mask: source padding")
    c.box(ex, 5.0, w, 0.7, "add & norm", kind="norm", size=9)
    c.box(ex, 6.0, w, 0.9, "feed-forward", kind="mlp", size=9.5)
    c.box(ex, 7.2, w, 0.7, "add & norm", kind="norm", size=9)
    for y0, y1 in [(1.2, 1.8), (2.6, 3.5), (4.6, 5.0), (5.7, 6.0), (6.9, 7.2), (7.9, 8.8)]:
        c.arrow((ex + w / 2, y0), (ex + w / 2, y1))
    c.box(ex, 8.8, w, 0.9, "memory $(B, n_{src}, d_{model})$", kind="tensor", size=9)
    c.text(ex + w / 2, 10.3, "encoder: reads the whole source", size=10, color=MUTED)
    # -- decoder (right column)
    dx = 10.4
    c.box(dx, 0.4, w, 0.8, "target tokens, shifted right", kind="tensor", size=9)
    c.box(dx, 1.8, w, 0.8, "embedding + positions", kind="embed", size=9)
    c.region(dx - 0.3, 3.2, w + 0.6, 7.5, "$\\times N$", where="right")
    attention(dx, 3.5, w, "masked self-attention", "mask: causal and target padding")
    c.box(dx, 5.0, w, 0.7, "add & norm", kind="norm", size=9)
    attention(dx, 6.0, w, "cross-attention", "$K, V$ from memory; mask: source padding")
    c.box(dx, 7.5, w, 0.7, "add & norm", kind="norm", size=9)
    c.box(dx, 8.5, w, 0.9, "feed-forward", kind="mlp", size=9.5)
    c.box(dx, 9.7, w, 0.7, "add & norm", kind="norm", size=9)
    for y0, y1 in [(1.2, 1.8), (2.6, 3.5), (4.6, 5.0), (5.7, 6.0), (7.1, 7.5), (8.2, 8.5), (9.4, 9.7),
                   (10.4, 11.3), (12.1, 12.7)]:
        c.arrow((dx + w / 2, y0), (dx + w / 2, y1))
    c.box(dx, 11.3, w, 0.8, "linear + softmax over $|V|$", kind="output", size=9)
    c.box(dx, 12.7, w, 0.8, "next-token probabilities", kind="tensor", size=9)
    c.text(dx + w / 2, 14.3, "decoder: writes the target, one token after another", size=10, color=MUTED)
    # memory feeds every decoder layer's cross-attention (keys and values)
    c.path([(ex + w, 9.25), (8.4, 9.25), (8.4, 6.55), (dx, 6.55)], color=HIGHLIGHT)
    c.text(8.55, 7.9, "$K, V$", ha="left", size=9, color=HIGHLIGHT)
    c.text(4.0, 12.8, "the three attentions\n1. encoder self-attention: every source\n"
           "   token sees every source token\n"
           "2. masked self-attention: target token $i$\n   sees targets $\\leq i$ only (causal)\n"
           "3. cross-attention: each target token\n   looks at the whole source", size=8.5, color=MUTED)
    return c


def vit_pipeline() -> Canvas:
    """Chapter 9: the Vision Transformer, from an image to a class."""
    c = Canvas(22.8, 6.0)
    mid = 3.3

    def step(x0, x1, label=""):
        c.arrow((x0, mid), (x1, mid))
        if label:
            c.text((x0 + x1) / 2, mid + 0.4, label, size=8.5, color=MUTED)

    # the image cut into a 3 x 3 grid of patches
    colours = [[0.1, 0.3, 0.5], [0.25, 0.6, 0.8], [0.45, 0.7, 0.95]]
    c.grid(0.4, 2.2, 3, 3, 0.75, values=colours, cmap="cividis")
    c.text(1.525, 1.65, "image $(C, H, W)$", size=9)
    c.text(1.525, 1.15, "$N = HW/P^2$ patches", size=8.5, color=MUTED)
    step(2.9, 4.0, "patchify")
    # flattened patches, one row each (its first entry coloured as its patch)
    c.grid(4.2, 1.95, 9, 1, 0.3, values=[[v] for row in colours for v in row], cmap="cividis")
    c.grid(4.5, 1.95, 9, 4, 0.3, kind="tensor")
    c.text(5.1, 1.4, "patches $(N, C{\\cdot}P{\\cdot}P)$", size=9)
    step(5.9, 6.7)
    c.box(6.8, 2.6, 1.9, 1.4, "linear\nprojection $E$", kind="embed", size=9)
    step(8.8, 9.7)
    # tokens: the CLS token on top, then the N patch tokens; the positions are added to all
    c.grid(9.9, 1.95, 9, 4, 0.3, kind="tensor")
    c.grid(9.9, 4.75, 1, 4, 0.3, kind="output", highlight_cells=[(0, j) for j in range(4)])
    c.text(10.5, 5.45, "CLS token", size=8.5, color=HIGHLIGHT)
    c.text(10.5, 1.4, "tokens $(1 + N, D)$", size=9)
    c.text(10.5, 0.9, "$+\\,E_{pos}$ (positions)", size=8.5, color=MUTED)
    step(11.3, 12.1)
    c.region(12.2, 1.7, 3.5, 3.2, "$\\times L$ blocks", where="top")
    c.box(12.5, 3.5, 2.9, 1.0, "multi-head\nself-attention", kind="attention", size=8.5)
    c.box(12.5, 2.0, 2.9, 1.0, "MLP", kind="mlp", size=9)
    c.text(13.95, 3.25, "pre-norm, residual", size=7.5, color=MUTED)
    step(15.8, 16.6)
    c.box(16.7, 2.7, 1.4, 1.2, "Layer\nNorm", kind="norm", size=9)
    step(18.2, 19.4, "token 0")
    c.box(19.5, 2.7, 1.1, 1.2, "head", kind="output", size=9)
    step(20.7, 21.3)
    c.text(21.95, mid, "class\nlogits", size=8.5)
    return c


def block_variants() -> Canvas:
    """Chapter 7: where the norm sits. The 2017 post-norm block, the pre-norm block, and a Llama-style block."""
    c = Canvas(17.0, 10.4)
    columns = [
        ("post-norm (2017)", [("skip", ""), ("attention", "multi-head attention"), ("add", ""), ("norm", "LayerNorm"),
                              ("skip", ""), ("mlp", "FFN (ReLU)"), ("add", ""), ("norm", "LayerNorm")],
         "the norm sits on the\nresidual stream itself"),
        ("pre-norm (GPT-2, ViT)", [("skip", ""), ("norm", "LayerNorm"), ("attention", "multi-head attention"),
                                   ("add", ""), ("skip", ""), ("norm", "LayerNorm"), ("mlp", "FFN (GELU)"),
                                   ("add", "")],
         "the stream is only added to;\none more norm after the last block"),
        ("modern (Llama)", [("skip", ""), ("norm", "RMSNorm"), ("attention", "attention, RoPE on $q, k$"),
                            ("add", ""), ("skip", ""), ("norm", "RMSNorm"), ("mlp", "SwiGLU FFN"), ("add", "")],
         "RMSNorm, rotary positions,\na gated FFN; no biases"),
    ]
    for i, (title, steps, note) in enumerate(columns):
        x = 1.2 + i * 5.6
        c.text(x + 1.8, 0.4, "$x$ (the residual stream)", size=8.5, color=MUTED)
        top = _stack(c, x, 0.8, 3.6, steps)
        c.arrow((x + 1.8, top), (x + 1.8, top + 0.5))
        c.text(x + 1.8, top + 0.95, title, size=10, bold=True)
        c.text(x + 1.8, top + 1.7, note, size=8, color=MUTED)
    return c


def norm_axes() -> Canvas:
    """Chapter 4: which numbers LayerNorm and BatchNorm average over, for tokens ``(B, n, d)`` with padding."""
    c = Canvas(17.0, 7.9)
    rows, cols, cell = 8, 6, 0.5
    pad = {(3, k) for k in range(cols)} | {(7, k) for k in range(cols)}  # the last token of each sequence is padding

    def panel(x, title, note, rows_hi=(), cols_hi=()):
        c.grid(x, 1.3, rows, cols, cell, kind="tensor", blank_cells=pad, highlight_rows=rows_hi)
        for k in cols_hi:
            for r in range(rows):
                if (r, k) not in pad:
                    c.grid(x + k * cell, 1.3 + (rows - 1 - r) * cell, 1, 1, cell, kind="tensor",
                           highlight_cells=[(0, 0)])
        c.text(x + cols * cell / 2, 6.25, title, size=10, bold=True)
        c.text(x + cols * cell / 2, 0.65, note, size=8.5, color=MUTED)
        c.text(x - 0.3, 1.3 + 6 * cell, "sequence 1", size=8, ha="right", color=MUTED)
        c.text(x - 0.3, 1.3 + 2 * cell, "sequence 2", size=8, ha="right", color=MUTED)
        c.ax.plot([x - 0.15, x + cols * cell + 0.15], [1.3 + 4 * cell] * 2, color="#888888", linewidth=0.8,
                  linestyle=":")
        c.text(x + cols * cell / 2, 5.65, "features $d$ $\\rightarrow$", size=8.5, color=MUTED)

    panel(2.6, "LayerNorm", "one mean and variance per token,\nover its $d$ features", rows_hi=[1])
    panel(10.6, "BatchNorm", "one mean and variance per feature, over\nevery real token of the batch "
          "(padding excluded)", cols_hi=[2])
    c.text(8.5, 7.3, "tokens $(B, n, d)$ as rows; crossed-out rows are padding", size=9.5)
    return c


def heads_split() -> Canvas:
    """Chapter 3: splitting the projected queries into heads, attention per head, and merging back."""
    c = Canvas(21.0, 6.0)
    cell = 0.4
    head_kinds = ["tensor", "attention", "mlp", "output"]
    # Q = X W_Q: (n, h * d_k) with its column blocks coloured by head
    for k, kind in enumerate(head_kinds):
        c.grid(0.6 + 2 * k * cell, 1.6, 5, 2, cell, kind=kind)
    c.text(0.6 + 4 * cell, 0.95, "$Q = XW_Q$  $(n, h \\cdot d_k)$", size=9)
    c.arrow((4.0, 2.6), (5.4, 2.6))
    c.text(4.7, 3.0, "split_heads", size=8.5, color=MUTED)
    # h separate (n, d_k) matrices
    for k, kind in enumerate(head_kinds):
        c.grid(5.8 + k * 0.3, 1.3 + (3 - k) * 0.35, 5, 2, cell, kind=kind)
    c.text(6.9, 0.75, "$h$ heads  $(h, n, d_k)$", size=9)
    c.arrow((8.7, 2.6), (9.8, 2.6))
    c.text(9.25, 3.25, "attention\nin each head", size=8.5, color=MUTED)
    for k, kind in enumerate(head_kinds):
        c.grid(10.1 + k * 0.3, 1.3 + (3 - k) * 0.35, 5, 2, cell, kind=kind)
    c.text(11.2, 0.75, "outputs  $(h, n, d_v)$", size=9)
    c.arrow((12.7, 2.6), (14.0, 2.6))
    c.text(13.35, 3.0, "merge_heads", size=8.5, color=MUTED)
    for k, kind in enumerate(head_kinds):
        c.grid(14.3 + 2 * k * cell, 1.6, 5, 2, cell, kind=kind)
    c.text(14.3 + 4 * cell, 0.95, "concatenated  $(n, h \\cdot d_v)$", size=9)
    c.arrow((17.7, 2.6), (18.6, 2.6), text="$W_O$", offset=(-0.35, 0.4))
    c.box(18.8, 2.0, 1.6, 1.2, "$(n, d_{model})$", kind="tensor", size=8.5)
    c.text(10.5, 5.4, "each head works on its own $d_k = d_{model}/h$ columns; the split and the merge are "
           "reshapes, not copies", size=9.5)
    return c


def residual_stream() -> Canvas:
    """Chapter 5: the residual stream. Every sublayer reads the stream and adds its output back."""
    c = Canvas(19.0, 5.4)
    y = 1.5
    c.text(0.7, y, "$x_0$", size=10)
    xs = [1.2, 5.2, 9.2, 13.2, 17.2]
    c.arrow((1.0, y), (18.2, y))
    subs = [("attention", "attention"), ("mlp", "FFN"), ("attention", "attention"), ("mlp", "FFN")]
    for k, (kind, name) in enumerate(subs):
        x_read, x_add = xs[k] + 0.8, xs[k + 1] - 0.6
        c.path([(x_read, y), (x_read, 3.0)], color="#222222")
        c.box(x_read - 0.2, 3.0, x_add - x_read + 0.4, 0.9, "norm, " + name, kind=kind, size=8.5)
        c.path([(x_add, 3.0), (x_add, y + 0.28)], color="#222222")
        c.add(x_add, y)
    c.text(18.6, y, "$x_L$", size=10)
    c.text(9.5, 4.7, "pre-norm: $x_{l+1} = x_l + F_l(\\mathrm{norm}(x_l))$, so $x_L = x_0 + \\sum_l F_l(\\ldots)$",
           size=9.5)
    c.text(9.5, 0.6, "the stream itself is never normalised inside a block: gradients reach $x_0$ through the "
           "sums unchanged", size=8.5, color=MUTED)
    return c


def kv_cache_gqa() -> Canvas:
    """Chapter 8: the KV cache grows by one row per generated token; grouped-query heads share keys and values."""
    c = Canvas(19.0, 7.0)
    cell = 0.38
    # (1) the cache at three decoding steps
    for k, t in enumerate([3, 4, 5]):
        x = 1.6 + k * 2.1
        c.grid(x, 1.4 + (5 - t) * cell, t, 3, cell, kind="tensor",
               highlight_cells=[(t - 1, j) for j in range(3)])
        c.text(x + 1.5 * cell, 0.85, f"step {t}", size=8.5)
    c.text(4.0, 5.6, "1. the KV cache", size=10, bold=True)
    c.text(4.0, 4.95, "each step computes $K, V$ for the new token only\n(framed) and appends them to the cache",
           size=8.5, color=MUTED)
    # (2) grouped-query attention: 8 query heads, 2 key/value heads
    qx, kx = 9.6, 15.2
    for h in range(8):
        c.box(qx + h * 0.62, 1.2, 0.5, 0.6, kind="attention")
    for g in range(2):
        c.box(kx - 3.0 + g * 2.6, 3.4, 1.2, 0.6, kind="tensor")
        for h in range(4 * g, 4 * g + 4):
            c.ax.plot([qx + h * 0.62 + 0.25, kx - 3.0 + g * 2.6 + 0.6], [1.8, 3.4], color="#888888", linewidth=0.8)
    c.text(qx + 2.4, 0.7, "$h = 8$ query heads", size=8.5)
    c.text(kx - 1.1, 4.35, "$h_{kv} = 2$ key/value heads", size=8.5)
    c.text(12.2, 5.6, "2. grouped-query attention", size=10, bold=True)
    c.text(12.2, 4.95, "the cache holds $h_{kv}$ heads, not $h$: 4 times smaller here", size=8.5, color=MUTED)
    return c


def dino_branches() -> Canvas:
    """Chapter 10: DINO's student and teacher, multi-crop, centering and sharpening, and the EMA."""
    c = Canvas(19.0, 9.4)
    c.box(0.5, 4.0, 2.4, 1.2, "image", kind="tensor", size=9.5)
    c.box(4.0, 6.4, 2.6, 1.0, "2 global crops", kind="tensor", size=8.5)
    c.box(4.0, 1.8, 2.6, 1.0, "global and local\ncrops", kind="tensor", size=8.5)
    c.arrow((2.9, 4.9), (4.0, 6.8))
    c.arrow((2.9, 4.3), (4.0, 2.3))
    c.text(3.5, 5.6, "multi-crop", size=8.5, color=MUTED, ha="right")
    # teacher branch (top)
    c.box(7.6, 6.4, 2.6, 1.0, "teacher $g_{\\theta_t}$", kind="embed", size=9)
    c.box(11.2, 6.4, 3.2, 1.0, "$-$ center, then $/\\,\\tau_t$\n(sharpen)", kind="norm", size=8.5)
    c.box(15.3, 6.4, 2.4, 1.0, "softmax $P_t$", kind="output", size=8.5)
    for a, b in [(6.6, 7.6), (10.2, 11.2), (14.4, 15.3)]:
        c.arrow((a, 6.9), (b, 6.9))
    c.text(8.9, 7.75, "no gradient", size=8, color=MUTED)
    # student branch (bottom)
    c.box(7.6, 1.8, 2.6, 1.0, "student $g_{\\theta_s}$", kind="embed", size=9)
    c.box(11.2, 1.8, 3.2, 1.0, "$/\\,\\tau_s$", kind="norm", size=8.5)
    c.box(15.3, 1.8, 2.4, 1.0, "softmax $P_s$", kind="output", size=8.5)
    for a, b in [(6.6, 7.6), (10.2, 11.2), (14.4, 15.3)]:
        c.arrow((a, 2.3), (b, 2.3))
    # the loss, the EMA, the center
    c.box(14.6, 3.9, 3.8, 1.4, "cross-entropy $-P_t \\log P_s$\nover pairs of different views", kind="plain",
          size=8.5)
    c.arrow((16.5, 6.4), (16.5, 5.3))
    c.arrow((16.5, 2.8), (16.5, 3.9))
    c.arrow((8.9, 2.8), (8.9, 6.4), color=HIGHLIGHT, dashed=True)
    c.text(8.7, 4.6, "EMA: $\\theta_t \\leftarrow m\\,\\theta_t + (1 - m)\\,\\theta_s$", size=8.5,
           color=HIGHLIGHT, ha="right")
    c.text(13.6, 8.05, "center: a moving average of the teacher's outputs", size=8, color=MUTED)
    c.text(9.5, 0.8, "only the student learns by gradient; the teacher follows it", size=8.5, color=MUTED)
    return c


def adding_positions() -> Canvas:
    """Chapter 1: token embeddings plus positional encodings, row by row."""
    import math

    c = Canvas(17.0, 5.8)
    ids = ["The", "cat", "sat", "down"]
    cell = 0.7
    for k, word in enumerate(ids):
        mid = 1.3 + (3 - k) * cell + cell / 2
        c.box(0.5, mid - 0.27, 1.6, 0.54, word, kind="plain", size=9)
        c.arrow((2.2, mid), (2.9, mid))
    c.text(1.3, 0.7, "tokens", size=9)
    c.grid(3.1, 1.3, 4, 6, cell, kind="tensor")
    c.text(5.2, 0.7, "embedding rows $E[\\mathrm{id}]$  $(n, d_{model})$", size=9)
    c.text(8.2, 2.7, "$+$", size=16)
    # the sinusoidal table: each column a wave of another frequency down the positions
    values = [[0.5 + 0.5 * math.sin(pos / (4.0 ** (j // 2)) + (math.pi / 2 if j % 2 else 0.0)) for j in range(6)]
              for pos in range(4)]
    c.grid(9.1, 1.3, 4, 6, cell, values=values, cmap="cividis")
    c.text(11.2, 0.7, "positions $P$  $(n, d_{model})$", size=9)
    c.text(13.7, 2.7, "$=$  the input\n    of block 1", size=9, ha="left")
    c.text(8.5, 5.0, "a word has the same embedding row anywhere; its position row says where it is", size=9.5)
    return c


def bpe_merge() -> Canvas:
    """Chapter 1: one BPE training step. Count neighbouring pairs, merge the most frequent into a new id."""
    c = Canvas(16.0, 5.6)
    before = list("aaabdaaabac")
    after = ["Z", "a", "b", "d", "Z", "a", "b", "a", "c"]
    w = 0.85

    def row(tokens, y, hi=()):
        for k, t in enumerate(tokens):
            c.box(1.6 + k * (w + 0.12), y, w, 0.75, t, kind="output" if t == "Z" else "tensor", size=10)
        for k in hi:
            c.ax.add_patch(__import__("matplotlib.patches", fromlist=["Rectangle"]).Rectangle(
                (1.6 + k * (w + 0.12) - 0.06, y - 0.08), 2 * w + 0.24, 0.91, fill=False, edgecolor=HIGHLIGHT,
                linewidth=1.8))

    row(before, 3.4, hi=(0, 5))
    c.text(0.9, 3.78, "ids", size=9, color=MUTED)
    c.arrow((6.9, 3.25), (6.9, 2.1), text="merge (a, a) $\\to$ Z, left to right", offset=(0.2, 0))
    row(after, 1.2)
    c.text(12.9, 3.78, "most frequent pair:\n(a, a), 4 times\n(overlaps count)", size=8.5, color=MUTED, ha="left")
    c.text(11.2, 1.58, "9 ids; Z is added\nto the vocabulary", size=8.5, color=MUTED, ha="left")
    c.text(8.0, 5.0, "one BPE training step: repeat until the vocabulary has the size you want", size=9.5)
    return c


def patch_merging() -> Canvas:
    """Chapter 11: patch merging. Each 2 x 2 group of tokens becomes one token of 4C channels, then 2C."""
    from matplotlib.patches import Rectangle

    c = Canvas(19.0, 6.2)
    pos = ["#e69f00", "#56b4e9", "#cc79a7", "#f0e442"]  # top-left, top-right, bottom-left, bottom-right of a group
    cell = 0.7
    for r in range(4):
        for col in range(4):
            face = pos[2 * (r % 2) + (col % 2)]
            c.ax.add_patch(Rectangle((0.8 + col * cell, 1.4 + (3 - r) * cell), cell, cell, facecolor=face,
                                     edgecolor="#555555", linewidth=0.6))
    for k in (0, 2, 4):
        c.ax.plot([0.8 + k * cell] * 2, [1.4, 1.4 + 4 * cell], color="#222222", linewidth=1.8)
        c.ax.plot([0.8, 0.8 + 4 * cell], [1.4 + k * cell] * 2, color="#222222", linewidth=1.8)
    c.text(2.2, 0.85, "tokens $(H', W', C)$", size=9)
    c.arrow((3.9, 2.8), (5.3, 2.8))
    c.text(4.6, 3.25, "gather each\n$2 \\times 2$ group", size=8, color=MUTED)
    # a 2 x 2 grid of merged tokens, each a column of four C-wide segments
    for r in range(2):
        for col in range(2):
            x, y = 5.6 + col * 1.3, 1.4 + (1 - r) * 1.5
            # the order of course_lib.swin.patch_merging: x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2], x[1::2, 1::2]
            for k, face in enumerate([pos[0], pos[2], pos[1], pos[3]]):
                c.ax.add_patch(Rectangle((x + k * 0.25, y), 0.25, 1.2, facecolor=face, edgecolor="#555555",
                                         linewidth=0.6))
    c.text(6.85, 0.85, "concatenated $(H'/2, W'/2, 4C)$", size=9)
    c.arrow((8.4, 2.8), (9.6, 2.8))
    c.box(9.7, 2.2, 2.0, 1.2, "LayerNorm", kind="norm", size=9)
    c.arrow((11.7, 2.8), (12.4, 2.8))
    c.box(12.5, 2.2, 2.6, 1.2, "linear $4C \\to 2C$\n(no bias)", kind="embed", size=9)
    c.arrow((15.1, 2.8), (15.8, 2.8))
    c.text(17.4, 2.8, "$(H'/2, W'/2, 2C)$", size=9)
    c.text(9.5, 5.3, "half the resolution, twice the width: like a stride-2 convolution stage of a CNN", size=9.5)
    return c


#: colour-blind-safe colours (Okabe-Ito) for the regions of a shifted-window mask
REGIONS = ["#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7", "#999999", "#ffffff"]


def _windows(c: Canvas, x: float, y: float, n: int, m: int, cell: float, faces=None) -> None:
    """An ``n`` x ``n`` token grid cut into ``m`` x ``m`` windows (thick borders); ``faces[r][c]`` colours a cell."""
    from matplotlib.patches import Rectangle

    for r in range(n):
        for col in range(n):
            face = faces[r][col] if faces else "#d6e9f8"
            c.ax.add_patch(Rectangle((x + col * cell, y + (n - 1 - r) * cell), cell, cell, facecolor=face,
                                     edgecolor="#777777", linewidth=0.4))
    for k in range(0, n + 1, m):
        c.ax.plot([x + k * cell, x + k * cell], [y, y + n * cell], color="#222222", linewidth=1.8)
        c.ax.plot([x, x + n * cell], [y + k * cell, y + k * cell], color="#222222", linewidth=1.8)


def swin_windows() -> Canvas:
    """Chapter 11: windows, the shifted windows and their mask, and the four-stage pyramid of patch merging."""
    c = Canvas(22.5, 6.9)
    n, m, cell = 8, 4, 0.42
    # (1) regular windows
    _windows(c, 1.0, 2.2, n, m, cell)
    c.text(1.0 + n * cell / 2, 6.2, "1. windows of $M \\times M$ tokens", size=9.5)
    c.text(1.0 + n * cell / 2, 1.6, "attention inside each window:\ncost linear in $hw$", size=8.5, color=MUTED)
    # (2) shifted by M/2: after the cyclic shift, a window may hold tokens from regions that were not neighbours
    s = m // 2

    def region(i: int) -> int:
        return 0 if i < n - m else (1 if i < n - s else 2)

    faces = [[REGIONS[3 * region(r) + region(col)] for col in range(n)] for r in range(n)]
    _windows(c, 6.4, 2.2, n, m, cell, faces)
    c.text(6.4 + n * cell / 2, 6.2, "2. shift by $M/2$ (cyclically)", size=9.5)
    c.text(6.4 + n * cell / 2, 1.6, "one colour per region of the image;\nin a window, tokens attend only\n"
           "within their own colour (the mask)", size=8.5, color=MUTED)
    # (3) the pyramid: patch merging halves the grid and doubles the channels, four times
    x0, base = 12.4, 2.2
    stages = [(8, "$C$", "$H/4 \\times W/4$"), (4, "$2C$", "$H/8$"), (2, "$4C$", "$H/16$"), (1, "$8C$", "$H/32$")]
    x = x0
    size = 3.36
    for k, (side, ch, res) in enumerate(stages):
        step = size / side
        _windows(c, x, base, side, max(1, min(side, 4)), step, None)
        c.text(x + size / 2 if k == 0 else x + side * step / 2, base - 0.35, f"stage {k + 1}", size=8.5)
        c.text(x + side * step / 2, base - 0.85, f"{res}, {ch}", size=8, color=MUTED)
        if k < 3:
            nxt = x + side * step + 1.0
            c.arrow((x + side * step + 0.1, base + 0.5), (nxt - 0.1, base + 0.5))
            x = nxt
        size = side * step / 2 if k < 3 else size
    c.text(x0 + 4.4, 6.2, "3. patch merging between stages:", size=9.5)
    c.text(x0 + 4.4, 5.7, "each $2 \\times 2$ group of tokens $\\to$ concat ($4C$) $\\to$ linear ($2C$)", size=8.5,
           color=MUTED)
    return c


def deit_tokens() -> Canvas:
    """Chapter 9: DeiT's distillation token beside CLS, its own head, and what each head learns."""
    c = Canvas(21.4, 7.4)
    mid = 3.6
    c.grid(0.4, 2.6, 3, 3, 0.7, kind="tensor")
    c.text(1.45, 2.05, "image, cut into\n$N$ patches", size=8.5)
    c.arrow((2.7, mid), (4.1, mid))
    c.text(3.4, mid + 0.45, "$E$", size=8.5, color=MUTED)
    # the tokens: CLS, then the distillation token, then the patch tokens
    c.grid(4.3, 2.1, 6, 4, 0.3, kind="tensor")
    c.grid(4.3, 4.2, 1, 4, 0.3, kind="output", highlight_cells=[(0, j) for j in range(4)])
    c.grid(4.3, 3.9, 1, 4, 0.3, kind="embed")
    c.text(5.7, 4.35, "CLS", size=8.5, color=HIGHLIGHT, ha="left")
    c.text(5.7, 4.05, "distillation", size=8.5, ha="left")
    c.text(5.7, 3.0, "patches", size=8.5, color=MUTED, ha="left")
    c.text(4.9, 1.55, "tokens $(2 + N, D)$", size=9)
    c.text(4.9, 1.05, "$+\\,E_{pos}$", size=8.5, color=MUTED)
    c.arrow((7.7, mid), (8.8, mid))
    c.region(8.9, 2.0, 3.3, 3.2, "$\\times L$ blocks", where="top")
    c.box(9.2, 3.7, 2.7, 1.0, "multi-head\nself-attention", kind="attention", size=8.5)
    c.box(9.2, 2.3, 2.7, 1.0, "MLP", kind="mlp", size=9)
    # the two heads and their targets
    c.arrow((12.3, 4.1), (13.4, 5.4), "token 0")
    c.arrow((12.3, 3.1), (13.4, 1.8), "token 1")
    c.box(13.5, 4.9, 2.0, 1.0, "head $\\psi_{cls}$", kind="output", size=8.5)
    c.box(13.5, 1.3, 2.0, 1.0, "head $\\psi_{dist}$", kind="embed", size=8.5)
    c.arrow((15.6, 5.4), (16.4, 5.4))
    c.arrow((15.6, 1.8), (16.4, 1.8))
    c.text(18.9, 5.55, "CE with the true label $y$", size=8.5)
    c.text(18.9, 5.05, "(what the data says)", size=8, color=MUTED)
    c.text(18.9, 1.95, "CE with the teacher's label", size=8.5)
    c.text(18.9, 1.45, "$y_t = \\mathrm{argmax}\\,Z_t$", size=8, color=MUTED)
    c.text(17.6, 3.6, "at test time: the average\nof the two heads", size=8, color=HIGHLIGHT)
    return c


#: every diagram of the book, by the name a ``{diagram}`` directive uses
DIAGRAMS = {
    "attention-lookup": attention_lookup,
    "encoder-decoder": encoder_decoder,
    "vit-pipeline": vit_pipeline,
    "block-variants": block_variants,
    "swin-windows": swin_windows,
    "norm-axes": norm_axes,
    "heads-split": heads_split,
    "residual-stream": residual_stream,
    "kv-cache-gqa": kv_cache_gqa,
    "dino-branches": dino_branches,
    "bpe-merge": bpe_merge,
    "patch-merging": patch_merging,
    "adding-positions": adding_positions,
    "deit-tokens": deit_tokens,
}


# --------------------------------------------------------------------------
# helpers shared by the block diagrams
# --------------------------------------------------------------------------
def _stack(c: Canvas, x: float, y: float, w: float, steps: list[tuple[str, str]], gap: float = 0.55,
           h: float = 0.75) -> float:
    """Boxes ``(kind, text)`` from the bottom up, joined by arrows, a kind ``"add"`` being a sum node with the
    skip path from the last ``"skip"`` marker. Returns the top y."""
    cx = x + w / 2
    skip_from = None
    y_now = y
    for kind, text in steps:
        if kind == "skip":  # the residual stream branches here
            skip_from = y_now
            c.ax.plot([cx], [y_now], marker="o", markersize=3.5, color="#222222")
            continue
        if kind == "add":
            cy = y_now + 0.7
            c.arrow((cx, y_now), (cx, cy - 0.28))
            c.add(cx, cy)
            if skip_from is not None:
                c.path([(cx, skip_from), (x - 0.35, skip_from), (x - 0.35, cy), (cx - 0.28, cy)], color=MUTED)
            y_now = cy + 0.28
            skip_from = None
            continue
        c.arrow((cx, y_now), (cx, y_now + gap))
        c.box(x, y_now + gap, w, h, text, kind=kind, size=8.5)
        y_now = y_now + gap + h
    return y_now
