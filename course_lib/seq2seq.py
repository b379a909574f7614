"""The encoder-decoder Transformer of "Attention Is All You Need" (chapter 06).

Vaswani et al. (2017) translate a source sentence ``x`` into a target ``y``
one token at a time::

    memory = Encoder(Embed(x) * sqrt(dim) + PE)                 (sec. 3.1, 3.4, 3.5)
    p(y_t | y_<t, x) = softmax(Decoder(Embed(y_<t) * sqrt(dim) + PE, memory) W^T)

Both stacks are post-LN (``x = LayerNorm(x + Sublayer(x))``, sec. 3.1): the
encoder block is self-attention then a ReLU MLP, the decoder block adds
cross-attention to the encoder's output between its masked self-attention and
its MLP. With ``share_embeddings`` the source embedding, the target embedding
and the output projection are one matrix ``W`` (sec. 3.4), which needs one
vocabulary for both languages (the paper's shared BPE).

This module also holds what the chapter trains and decodes with:

* :func:`label_smoothed_loss`: cross-entropy against ``(1 - eps) one_hot + eps / V`` (sec. 5.4);
* :func:`transformer_lr`: the warmup then inverse-square-root schedule (sec. 5.3, eq. 3);
* :func:`greedy_decode` and :func:`beam_search` with the GNMT length penalty
  (Wu et al., 2016), both reusing the decoder's self-attention keys and values
  through a :class:`~course_lib.multi_head.KVCache` per layer.

Shapes: ``n_src`` source and ``n_tgt`` target positions; ``V`` the target vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.attention import attention_weights, padding_mask
from course_lib.blocks import Block, BlockConfig, DecoderBlock
from course_lib.multi_head import KVCache, merge_heads, split_heads
from course_lib.norms import LayerNorm
from course_lib.positional import SinusoidalPositionalEncoding, TokenEmbedding

__all__ = [
    "Seq2SeqConfig",
    "PRESETS",
    "Seq2SeqTransformer",
    "shift_right",
    "decoder_self_attention_mask",
    "cross_attention",
    "label_smoothed_loss",
    "transformer_lr",
    "gnmt_length_penalty",
    "greedy_decode",
    "beam_search",
]


# --------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------
@dataclass
class Seq2SeqConfig:
    """Sizes and switches of :class:`Seq2SeqTransformer` (defaults: the paper's base model).

    Attributes:
        vocab_size: source vocabulary (and target vocabulary when ``tgt_vocab_size`` is None).
        tgt_vocab_size: a separate target vocabulary; ``None`` shares ``vocab_size``.
        dim, n_heads, mlp_hidden: width, attention heads, hidden width of the ReLU MLP.
        n_enc_layers, n_dec_layers: depth of the encoder and the decoder (N = 6 in the paper).
        dropout: on embeddings + positions and on every sublayer's output (P_drop, sec. 5.4).
        attn_dropout: on the attention weights (0 in the paper).
        label_smoothing: eps_ls of the training loss (0.1 in the paper).
        max_len: longest source or target sequence (size of the sinusoidal table).
        pad_id, bos_id, eos_id: special token ids, the same in both vocabularies.
        share_embeddings: tie source embedding, target embedding and output projection.
        norm_position: ``"post"`` (the paper) or ``"pre"`` (then each stack ends with a LayerNorm).
        norm_eps: LayerNorm epsilon (1e-6, as in tensor2tensor).
        attn_impl: ``"eager"`` (explicit masked softmax) or ``"sdpa"`` (fused kernel).
    """

    vocab_size: int = 37000
    tgt_vocab_size: int | None = None
    dim: int = 512
    n_heads: int = 8
    mlp_hidden: int = 2048
    n_enc_layers: int = 6
    n_dec_layers: int = 6
    dropout: float = 0.1
    attn_dropout: float = 0.0
    label_smoothing: float = 0.1
    max_len: int = 512
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    share_embeddings: bool = True
    norm_position: str = "post"
    norm_eps: float = 1e-6
    attn_impl: str = "sdpa"

    def __post_init__(self):
        if self.dim % self.n_heads:
            raise ValueError(f"dim={self.dim} must be divisible by n_heads={self.n_heads}")
        if self.norm_position not in ("post", "pre"):
            raise ValueError(f"norm_position must be 'post' (2017) or 'pre', got {self.norm_position!r}")
        if self.share_embeddings and self.tgt_vocab_size not in (None, self.vocab_size):
            raise ValueError(
                f"share_embeddings needs one vocabulary, got vocab_size={self.vocab_size} and "
                f"tgt_vocab_size={self.tgt_vocab_size}"
            )
        specials = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        for name, i in specials.items():
            if not 0 <= i < min(self.vocab_size, self.n_tgt_vocab):
                raise ValueError(f"{name}={i} must be a valid id in both vocabularies (sizes {self.vocab_size}, "
                                 f"{self.n_tgt_vocab})")

    @property
    def n_tgt_vocab(self) -> int:
        """Size of the target vocabulary (``V`` of the logits)."""
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size

    @classmethod
    def preset(cls, name: str, **overrides) -> "Seq2SeqConfig":
        """The config named ``name`` in :data:`PRESETS`, with ``overrides`` applied."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}: expected one of {sorted(PRESETS)}")
        return cls(**(PRESETS[name] | overrides))


#: Named configs, as keyword arguments: the paper's two models (Table 3; EN-DE dropout) and
#: CPU-sized ones for tests and notebooks.
_TINY = dict(vocab_size=16, dim=64, n_heads=4, mlp_hidden=256, n_enc_layers=2, n_dec_layers=2, dropout=0.0,
             label_smoothing=0.0, max_len=64)
PRESETS: dict[str, dict] = {
    "transformer-base": dict(),
    "transformer-big": dict(dim=1024, n_heads=16, mlp_hidden=4096, dropout=0.3),
    "tiny": _TINY,
    "tiny-untied": _TINY | dict(tgt_vocab_size=20, share_embeddings=False),
}


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------
def shift_right(tgt: Tensor, bos_id: int) -> Tensor:
    """Decoder inputs from targets (teacher forcing): ``[y_1 .. y_n] -> [BOS, y_1 .. y_{n-1}]``.

    ``tgt``: ``(batch, n_tgt)``; returns the same shape. Position ``t`` of the
    result is what the decoder sees when it predicts ``tgt[:, t]``.
    """
    return torch.cat([torch.full_like(tgt[:, :1], bos_id), tgt[:, :-1]], dim=1)


def decoder_self_attention_mask(tgt_lengths: Tensor, n: int) -> Tensor:
    """Causal and key-padding masks of the decoder's self-attention, combined: ``(batch, n, n)`` boolean.

    ``mask[b, i, j]`` is ``True`` (may attend) when ``j <= i`` (no peeking at
    later targets) and ``j < tgt_lengths[b]`` (a real token, not padding).
    ``tgt_lengths``: ``(batch,)`` integer lengths in ``[0, n]``.
    """
    pos = torch.arange(n, device=tgt_lengths.device)
    causal = pos[None, :] <= pos[:, None]                          # (n, n): key j <= query i
    real = pos[None, :] < tgt_lengths[:, None]                     # (batch, n): key j is a real token
    return causal[None, :, :] & real[:, None, :]


def cross_attention(x: Tensor, memory: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, w_o: Tensor, n_heads: int,
                    memory_mask: Tensor | None = None) -> Tensor:
    """Multi-head cross-attention from given weights: queries from ``x``, keys and values from ``memory``.

    ``head_i = softmax(Q_i K_i^T / sqrt(d_head)) V_i`` with ``Q = x W_q^T``,
    ``K = memory W_k^T``, ``V = memory W_v^T`` split into ``n_heads`` blocks of
    columns; the heads are concatenated and projected by ``W_o^T`` (sec. 3.2.3,
    "encoder-decoder attention"). Weights follow ``nn.Linear``, ``(out, in)``.

    Args:
        x: decoder states ``(batch, n_tgt, dim)``.  memory: encoder output ``(batch, n_src, dim)``.
        w_q, w_k, w_v: ``(dim, dim)``.  w_o: ``(dim, dim)``.
        memory_mask: boolean, broadcastable to ``(batch, n_tgt, n_src)``; ``True`` = may attend.

    Returns:
        ``(batch, n_tgt, dim)``.
    """
    q = split_heads(F.linear(x, w_q), n_heads)                     # (batch, heads, n_tgt, d_head)
    k = split_heads(F.linear(memory, w_k), n_heads)                # (batch, heads, n_src, d_head)
    v = split_heads(F.linear(memory, w_v), n_heads)
    if memory_mask is not None and memory_mask.ndim == 3:
        memory_mask = memory_mask.unsqueeze(1)                     # the same mask for every head
    weights = attention_weights(q, k, memory_mask)
    return F.linear(merge_heads(weights @ v), w_o)


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer: ``(src, tgt_in) -> logits (batch, n_tgt, V)``.

    Masks are boolean with ``True`` = may attend. Sequences are right-padded
    with ``pad_id``; the source padding is masked in the encoder's
    self-attention and in the decoder's cross-attention. The target needs no
    padding mask: under the causal mask a real target position only sees
    earlier positions, which are real too, and padded positions are left out of
    the loss.
    """

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.dim
        block = BlockConfig(dim=d, n_heads=cfg.n_heads, mlp_hidden=cfg.mlp_hidden, mlp="relu", norm="layernorm",
                            norm_eps=cfg.norm_eps, norm_position=cfg.norm_position, dropout=cfg.dropout,
                            attn_dropout=cfg.attn_dropout, attn_impl=cfg.attn_impl)
        self.src_emb = TokenEmbedding(cfg.vocab_size, d, scale=True, padding_idx=cfg.pad_id)
        self.tgt_emb = self.src_emb if cfg.share_embeddings else TokenEmbedding(cfg.n_tgt_vocab, d, scale=True,
                                                                                padding_idx=cfg.pad_id)
        self.pos = SinusoidalPositionalEncoding(d, cfg.max_len, dropout=cfg.dropout)
        self.encoder = nn.ModuleList([Block(block) for _ in range(cfg.n_enc_layers)])
        self.decoder = nn.ModuleList([DecoderBlock(block) for _ in range(cfg.n_dec_layers)])
        pre = cfg.norm_position == "pre"  # a pre-LN stack's output has not been normalized yet
        self.enc_norm = LayerNorm(d, cfg.norm_eps) if pre else nn.Identity()
        self.dec_norm = LayerNorm(d, cfg.norm_eps) if pre else nn.Identity()
        self.out_proj = nn.Linear(d, cfg.n_tgt_vocab, bias=False)
        if cfg.share_embeddings:
            self.out_proj.weight = self.tgt_emb.weight  # logits = h W^T with the embedding matrix W

    # ------------------------------------------------------------ masks
    def source_mask(self, src: Tensor, src_lengths: Tensor | None = None) -> Tensor:
        """Key-padding mask ``(batch, 1, n_src)`` from ``src_lengths`` ``(batch,)``, or else from ``src != pad_id``."""
        if src_lengths is not None:
            return padding_mask(src_lengths.to(src.device), src.shape[1])
        return (src != self.cfg.pad_id)[:, None, :]

    def _check_len(self, n: int, offset: int, what: str) -> None:
        if offset + n > self.cfg.max_len:
            raise ValueError(f"{what} of {offset + n} positions exceeds max_len={self.cfg.max_len}")

    # ------------------------------------------------------------ encoder / decoder
    def encode(self, src: Tensor, src_mask: Tensor | None = None, *, src_lengths: Tensor | None = None) -> Tensor:
        """Source ids ``(batch, n_src)`` -> memory ``(batch, n_src, dim)``.

        ``src_mask``: ``(batch, n_src)`` or ``(batch, 1, n_src)`` boolean, ``True`` for
        real tokens; built by :meth:`source_mask` (from ``src_lengths`` or the pad id) when None.
        """
        self._check_len(src.shape[1], 0, "source")
        mask = self.source_mask(src, src_lengths) if src_mask is None else _as_key_mask(src_mask)
        x = self.pos(self.src_emb(src))
        for block in self.encoder:
            x = block(x, mask)
        return self.enc_norm(x)

    def decode(self, tgt_in: Tensor, memory: Tensor, memory_mask: Tensor | None = None, *,
               caches: list[KVCache] | None = None) -> Tensor:
        """Decoder inputs ``(batch, n_tgt)`` and memory ``(batch, n_src, dim)`` -> logits ``(batch, n_tgt, V)``.

        ``memory_mask``: the source key-padding mask, ``(batch, n_src)`` or ``(batch, 1, n_src)``.
        ``caches``: one :class:`KVCache` per decoder layer (see :meth:`make_caches`);
        ``tgt_in`` then holds only the *new* positions, which follow the cached
        ones (positions and the causal mask are offset by the cache length).
        """
        offset = 0 if caches is None else caches[0].length
        self._check_len(tgt_in.shape[1], offset, "target")
        mask = None if memory_mask is None else _as_key_mask(memory_mask)
        x = self.pos(self.tgt_emb(tgt_in), offset=offset)
        for i, block in enumerate(self.decoder):
            x = block(x, memory, memory_mask=mask, cache=None if caches is None else caches[i])
        return self.out_proj(self.dec_norm(x))

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Teacher-forced logits ``(batch, n_tgt, V)`` for ``src (batch, n_src)`` and ``tgt_in (batch, n_tgt)``."""
        mask = self.source_mask(src) if src_mask is None else _as_key_mask(src_mask)
        return self.decode(tgt_in, self.encode(src, mask), mask)

    def loss(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Label-smoothed cross-entropy for targets ``tgt`` ``(batch, n_tgt)`` (ending in EOS, padded with pad_id)."""
        logits = self(src, shift_right(tgt, self.cfg.bos_id), src_mask)
        return label_smoothed_loss(logits, tgt, self.cfg.label_smoothing, self.cfg.pad_id)

    def make_caches(self, batch: int, max_len: int | None = None) -> list[KVCache]:
        """One empty decoder self-attention cache per layer, for ``max_len`` target positions."""
        cfg, p = self.cfg, self.out_proj.weight
        return [KVCache(batch, cfg.n_heads, max_len or cfg.max_len, cfg.dim // cfg.n_heads, dtype=p.dtype,
                        device=p.device) for _ in range(cfg.n_dec_layers)]


def _as_key_mask(mask: Tensor) -> Tensor:
    """``(batch, n_k)`` or ``(batch, 1, n_k)`` boolean -> ``(batch, 1, n_k)``."""
    if mask.dtype != torch.bool:
        raise TypeError(f"padding masks are boolean (True = real token), got {mask.dtype}")
    return mask[:, None, :] if mask.ndim == 2 else mask


# --------------------------------------------------------------------------
# Training: loss and schedule
# --------------------------------------------------------------------------
def label_smoothed_loss(logits: Tensor, target: Tensor, smoothing: float = 0.1, ignore_index: int = -100,
                        reduction: str = "mean") -> Tensor:
    """Cross-entropy against the smoothed target ``q = (1 - eps) one_hot(y) + eps / V`` (sec. 5.4).

    Per position: ``-sum_v q_v log p_v = (1 - eps) * (-log p_y) + eps * mean_v(-log p_v)``.
    The uniform part spreads ``eps`` over all ``V`` classes, the true one
    included, as in ``F.cross_entropy(label_smoothing=eps)``.

    Args:
        logits: ``(..., V)``.  target: ``(...)`` class ids.
        smoothing: eps in ``[0, 1]``.  ignore_index: target id left out (padding).
        reduction: ``"mean"`` over the kept positions, ``"sum"``, or ``"none"`` (0 where ignored).
    """
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"smoothing must be in [0, 1], got {smoothing}")
    if logits.shape[:-1] != target.shape:
        raise ValueError(f"logits {tuple(logits.shape)} must be target {tuple(target.shape)} plus a class axis")
    # Half precision is upcast to float32; float32 and float64 keep their precision.
    logp = F.log_softmax(logits if logits.dtype in (torch.float32, torch.float64) else logits.float(), dim=-1)
    keep = target != ignore_index
    safe = torch.where(keep, target, torch.zeros_like(target))
    nll = -logp.gather(-1, safe[..., None]).squeeze(-1)
    uniform = -logp.mean(dim=-1)
    loss = ((1.0 - smoothing) * nll + smoothing * uniform) * keep
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / keep.sum()
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def transformer_lr(step: int, dim: int, warmup: int = 4000) -> float:
    """The 2017 schedule (sec. 5.3, eq. 3): ``dim^-0.5 * min(step^-0.5, step * warmup^-1.5)``.

    Linear growth for ``warmup`` steps, peak ``(dim * warmup)^-0.5`` at
    ``step == warmup``, then ``1 / sqrt(step)`` decay. ``step = 0`` gives 0.
    Use it as the multiplier of a ``LambdaLR`` over an optimizer with ``lr=1``.
    """
    if step < 0 or dim < 1 or warmup < 1:
        raise ValueError(f"need step >= 0, dim >= 1, warmup >= 1; got step={step}, dim={dim}, "
                         f"warmup={warmup}")
    if step == 0:
        return 0.0
    return dim**-0.5 * min(step**-0.5, step * warmup**-1.5)


# --------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------
def gnmt_length_penalty(length: Tensor, alpha: float) -> Tensor:
    """``lp(Y) = ((5 + |Y|) / 6)^alpha`` (Wu et al., 2016, eq. 14); a hypothesis scores ``log P(Y|X) / lp(Y)``.

    ``alpha = 0`` ranks by raw log-probability (which favours short outputs);
    larger ``alpha`` favours longer ones.
    """
    return ((5.0 + length.float()) / 6.0) ** alpha


def _start(model: Seq2SeqTransformer, src: Tensor, src_mask: Tensor | None, max_len: int):
    if max_len > model.cfg.max_len:
        raise ValueError(f"max_len={max_len} exceeds the model's max_len={model.cfg.max_len}")
    mask = model.source_mask(src) if src_mask is None else _as_key_mask(src_mask)
    return model.encode(src, mask), mask


@torch.no_grad()
def greedy_decode(model: Seq2SeqTransformer, src: Tensor, max_len: int, *, src_mask: Tensor | None = None,
                  use_cache: bool = True) -> Tensor:
    """Pick the most probable token at every step, the whole batch at once.

    Args:
        src: ``(batch, n_src)``.  max_len: most target tokens to generate (EOS included).
        use_cache: feed one token per step through the decoder's KV caches
            (``False`` re-runs the decoder on the whole prefix; same tokens).

    Returns:
        ``(batch, n)`` generated ids without BOS, ``n <= max_len``; each row
        ends at its first EOS and is padded with ``pad_id`` after it. Stops
        early once every row has produced EOS (a host sync per step).
    """
    cfg, b = model.cfg, src.shape[0]
    memory, mask = _start(model, src, src_mask, max_len)
    ys = torch.full((b, 1), cfg.bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    caches = model.make_caches(b, max_len) if use_cache else None
    for _ in range(max_len):
        inp = ys[:, -1:] if use_cache else ys
        nxt = model.decode(inp, memory, mask, caches=caches)[:, -1].argmax(dim=-1)
        nxt = torch.where(done, torch.full_like(nxt, cfg.pad_id), nxt)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done = done | (nxt == cfg.eos_id)
        if done.all():
            break
    return ys[:, 1:]


@torch.no_grad()
def beam_search(model: Seq2SeqTransformer, src: Tensor, beam_size: int = 4, max_len: int = 50, alpha: float = 0.6,
                *, src_mask: Tensor | None = None, use_cache: bool = True) -> tuple[Tensor, Tensor]:
    """Keep the ``beam_size`` best hypotheses per example; batched (``batch * beam_size`` rows decode together).

    Every hypothesis is scored ``log P(Y|X) / lp(|Y|)`` with the GNMT length
    penalty :func:`gnmt_length_penalty`; ``|Y|`` counts generated tokens, EOS
    included. At each step every live hypothesis is extended by every token;
    a finished one (it produced EOS) stays in the running as itself, frozen
    (extended only by padding, at no cost). The ``beam_size`` best of all
    candidates survive. Search ends when every hypothesis of every example
    has finished, or after ``max_len`` tokens. With ``beam_size = 1`` this is
    :func:`greedy_decode`. (The paper's setting: beam 4, alpha 0.6; GNMT's
    coverage penalty is left out.)

    Args:
        src: ``(batch, n_src)``.  beam_size: hypotheses kept per example.
        max_len: most target tokens per hypothesis.  alpha: length-penalty exponent.
        use_cache: reuse decoder self-attention keys/values (the caches are
            reordered with the surviving beams each step); same result either way.

    Returns:
        ``tokens (batch, beam_size, n)``: hypotheses without BOS, best first,
        padded with ``pad_id`` after EOS; ``scores (batch, beam_size)``: their
        length-normalized log-probabilities, sorted in decreasing order.
    """
    cfg, b, k = model.cfg, src.shape[0], beam_size
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    memory, mask = _start(model, src, src_mask, max_len)
    memory, mask = memory.repeat_interleave(k, dim=0), mask.repeat_interleave(k, dim=0)
    dev = src.device
    tokens = torch.full((b * k, 1), cfg.bos_id, dtype=torch.long, device=dev)
    logp_sum = torch.full((b, k), float("-inf"), device=dev)
    logp_sum[:, 0] = 0.0  # start from one hypothesis, not k copies of it
    length = torch.zeros(b, k, dtype=torch.long, device=dev)
    done = torch.zeros(b, k, dtype=torch.bool, device=dev)
    frozen = torch.full((cfg.n_tgt_vocab,), float("-inf"), device=dev)
    frozen[cfg.pad_id] = 0.0  # a finished hypothesis can only be padded, for free
    caches = model.make_caches(b * k, max_len) if use_cache else None
    rows = torch.arange(b, device=dev)[:, None] * k
    scores = logp_sum
    for _ in range(max_len):
        inp = tokens[:, -1:] if use_cache else tokens
        logits = model.decode(inp, memory, mask, caches=caches)[:, -1]
        logp = F.log_softmax(logits.float(), dim=-1).view(b, k, -1)
        logp = torch.where(done[..., None], frozen, logp)
        cand_sum = logp_sum[..., None] + logp                     # (b, k, V)
        cand_len = length + (~done).long()                        # (b, k)
        cand_score = cand_sum / gnmt_length_penalty(cand_len, alpha)[..., None]
        scores, best = cand_score.flatten(1).topk(k, dim=1)       # sorted, (b, k)
        beam, tok = best // logp.shape[-1], best % logp.shape[-1]
        logp_sum = cand_sum.flatten(1).gather(1, best)
        length = cand_len.gather(1, beam)
        done = done.gather(1, beam) | (tok == cfg.eos_id)
        src_rows = (rows + beam).flatten()                        # which row each survivor extends
        tokens = torch.cat([tokens[src_rows], tok.flatten()[:, None]], dim=1)
        if caches is not None:
            for c in caches:
                c.reorder(src_rows)
        if done.all():
            break
    return tokens[:, 1:].view(b, k, -1), scores
