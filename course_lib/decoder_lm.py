"""A decoder-only language model in the Llama style (chapter 07).

A GPT-style model predicts each token from the ones before it::

    h_0 = Embed(ids)                                        (no sqrt(d) scale, no position table)
    h_l = Block_l(h_{l-1})                                  (pre-RMSNorm, causal, RoPE, GQA, SwiGLU)
    p(x_{t+1} | x_<=t) = softmax(RMSNorm(h_L) W_head^T)

Compared with the 2017 decoder it drops cross-attention (there is no encoder)
and it takes Llama's choices (Touvron et al., 2023): RMSNorm *before* each
sublayer and once at the end, rotary position embeddings (in the half-split
``rotate_half`` layout of Hugging Face's Llama) on queries and keys, a SwiGLU
MLP, no biases, and grouped-query attention (``n_kv_heads`` key/value heads
shared by ``n_heads`` query heads). The blocks are the shared
:class:`~course_lib.blocks.Block` run with ``is_causal=True``.

Generation keeps one static, preallocated :class:`~course_lib.multi_head.KVCache`
per layer, so each new token costs one position of attention instead of the
whole prefix; cached and uncached generation give the same tokens.

Shapes: ``(batch, seq)`` token ids, ``V`` = ``vocab_size``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.attention import ATTN_IMPLS
from course_lib.blocks import Block, BlockConfig
from course_lib.mlp import swiglu, swiglu_hidden_dim  # swiglu: chapter 07's exercise, run by mlp.SwiGLU
from course_lib.multi_head import KVCache
from course_lib.norms import RMSNorm
from course_lib.positional import RotaryEmbedding, TokenEmbedding

__all__ = ["DecoderLMConfig", "PRESETS", "DecoderLM", "sample_next_token", "next_token_loss", "swiglu"]


@dataclass
class DecoderLMConfig:
    """Sizes and switches of :class:`DecoderLM` (Hugging Face ``LlamaConfig`` name in brackets).

    Attributes:
        vocab_size [vocab_size]; dim [hidden_size]; n_layers [num_hidden_layers].
        n_heads [num_attention_heads]; n_kv_heads [num_key_value_heads]: must divide
            ``n_heads``; ``None`` = ``n_heads`` (multi-head attention), 1 = multi-query.
        head_dim [head_dim]: width per head; ``None`` = ``dim // n_heads``.
        mlp_hidden [intermediate_size]: SwiGLU hidden width; ``None`` =
            ``swiglu_hidden_dim(dim, 4, 256)`` (Llama's 2/3 * 4 * dim rounded up to 256).
        norm_eps [rms_norm_eps]; rope_base [rope_theta].
        max_seq_len [max_position_embeddings]: longest sequence (RoPE table and caches).
        tie_embeddings [tie_word_embeddings]: the LM head reuses the embedding matrix.
        attn_bias [attention_bias]: biases on q, k, v and the output projection.
        mlp_bias [mlp_bias]: biases on the three SwiGLU projections.
        dropout: on sublayer outputs while training (0 for Llama).
        init_std [initializer_range]: std of the normal initialisation of every matrix.
        attn_impl: ``"eager"`` (explicit masked softmax) or ``"sdpa"`` (fused kernel).
    """

    vocab_size: int = 32000
    dim: int = 768
    n_layers: int = 12
    n_heads: int = 12
    n_kv_heads: int | None = None
    head_dim: int | None = None
    mlp_hidden: int | None = None
    norm_eps: float = 1e-5
    rope_base: float = 10000.0
    max_seq_len: int = 2048
    tie_embeddings: bool = True
    attn_bias: bool = False
    mlp_bias: bool = False
    dropout: float = 0.0
    init_std: float = 0.02
    attn_impl: str = "sdpa"

    def __post_init__(self):
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads={self.n_kv_heads} must divide n_heads={self.n_heads}: each key/value "
                             f"head serves a whole group of n_heads / n_kv_heads query heads")
        if self.head_dim is None:
            if self.dim % self.n_heads:
                raise ValueError(f"dim={self.dim} must be divisible by n_heads={self.n_heads} (or set head_dim)")
            self.head_dim = self.dim // self.n_heads
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even: RoPE rotates pairs of features")
        if self.mlp_hidden is None:
            self.mlp_hidden = swiglu_hidden_dim(self.dim, 4.0, 256)
        if self.attn_impl not in ATTN_IMPLS:
            raise ValueError(f"attn_impl must be one of {ATTN_IMPLS}, got {self.attn_impl!r}")

    @classmethod
    def preset(cls, name: str, **overrides) -> "DecoderLMConfig":
        """The config named ``name`` in :data:`PRESETS`, with ``overrides`` applied."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}: expected one of {sorted(PRESETS)}")
        return cls(**(PRESETS[name] | overrides))


#: Named configs, as keyword arguments (fields left out keep their defaults or are derived, e.g.
#: ``head_dim``, after overrides). "llama-100m" (~100M parameters, tied) is the benchmark size;
#: the "tiny" ones run on a CPU in tests and notebooks.
PRESETS: dict[str, dict] = {
    "llama-100m": dict(vocab_size=32000, dim=768, n_layers=12, n_heads=12, n_kv_heads=4, mlp_hidden=2048,
                       max_seq_len=2048),
    "tiny": dict(vocab_size=256, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, mlp_hidden=172, max_seq_len=128),
    "tiny-mha": dict(vocab_size=256, dim=64, n_layers=2, n_heads=4, mlp_hidden=172, max_seq_len=128),
    "tiny-mqa": dict(vocab_size=256, dim=64, n_layers=2, n_heads=4, n_kv_heads=1, mlp_hidden=172, max_seq_len=128),
}


class DecoderLM(nn.Module):
    """Llama-style decoder-only LM: ids ``(batch, seq)`` -> next-token logits ``(batch, seq, V)``."""

    def __init__(self, cfg: DecoderLMConfig):
        super().__init__()
        self.cfg = cfg
        block = BlockConfig(dim=cfg.dim, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim,
                            mlp_hidden=cfg.mlp_hidden,
                            mlp="swiglu", norm="rmsnorm", norm_eps=cfg.norm_eps, norm_position="pre",
                            qkv_bias=cfg.attn_bias, out_bias=cfg.attn_bias, mlp_bias=cfg.mlp_bias,
                            dropout=cfg.dropout, attn_impl=cfg.attn_impl)
        self.tok_emb = TokenEmbedding(cfg.vocab_size, cfg.dim, scale=False)
        self.rope = RotaryEmbedding(cfg.head_dim, cfg.max_seq_len, cfg.rope_base)
        self.blocks = nn.ModuleList([Block(block) for _ in range(cfg.n_layers)])
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight

    def _init_weights(self, m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, TokenEmbedding)):
            nn.init.normal_(m.weight, std=self.cfg.init_std)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    # ------------------------------------------------------------ forward
    def forward_features(self, ids: Tensor, positions: Tensor | None = None,
                         caches: list[KVCache] | None = None) -> Tensor:
        """Final hidden states ``(batch, seq, dim)``, after the last RMSNorm.

        Args:
            ids: ``(batch, seq)`` token ids.
            positions: ``(seq,)`` or ``(batch, seq)`` integer positions, each
                below ``max_seq_len``; by default ``cache_length + arange(seq)``.
            caches: one :class:`KVCache` per layer (:meth:`make_caches`); the
                new keys/values are appended and ``ids`` attend to everything
                cached before them.
        """
        cfg = self.cfg
        start = 0
        if caches is not None:
            if len(caches) != cfg.n_layers:
                raise ValueError(f"got {len(caches)} caches for a model of n_layers={cfg.n_layers}: one per layer")
            start = caches[0].length  # a Python int: no host sync
        n = ids.shape[1]
        if start + n > cfg.max_seq_len:
            raise ValueError(f"sequence of {start + n} tokens ({start} cached + {n} new) exceeds "
                             f"max_seq_len={cfg.max_seq_len}")
        if positions is None:
            positions = torch.arange(start, start + n, device=ids.device)
        rope = self.rope(positions)
        x = self.tok_emb(ids)
        for i, block in enumerate(self.blocks):
            x = block(x, is_causal=True, rope=rope, cache=None if caches is None else caches[i])
        return self.norm(x)

    def forward_head(self, h: Tensor) -> Tensor:
        """Hidden states ``(..., dim)`` -> logits ``(..., V)``."""
        return self.lm_head(h)

    def forward(self, ids: Tensor, positions: Tensor | None = None, caches: list[KVCache] | None = None) -> Tensor:
        """Logits ``(batch, seq, V)``: row ``t`` scores the token at ``t + 1``.

        Arguments as :meth:`forward_features`.
        """
        return self.forward_head(self.forward_features(ids, positions, caches))

    def loss(self, ids: Tensor) -> Tensor:
        """Mean next-token cross-entropy of ``ids`` ``(batch, seq)``: predict ``ids[:, 1:]`` from ``ids[:, :-1]``."""
        logits = self(ids[:, :-1])
        return F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())

    # ------------------------------------------------------------ generation
    def make_caches(self, batch: int, max_len: int | None = None) -> list[KVCache]:
        """One empty static KV cache per layer for ``max_len`` positions (``max_seq_len`` by default)."""
        cfg, w = self.cfg, self.lm_head.weight
        max_len = cfg.max_seq_len if max_len is None else max_len
        return [KVCache(batch, cfg.n_kv_heads, max_len, cfg.head_dim, dtype=w.dtype, device=w.device)
                for _ in range(cfg.n_layers)]

    @torch.no_grad()
    def generate(self, ids: Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 greedy: bool = False, use_cache: bool = True, generator: torch.Generator | None = None) -> Tensor:
        """Extend ``ids`` ``(batch, n)`` by ``max_new_tokens`` tokens -> ``(batch, n + max_new_tokens)``.

        Each step samples from ``softmax(logits / temperature)`` restricted to
        the ``top_k`` most likely tokens (all if None), or takes the argmax when
        ``greedy``. With ``use_cache`` the prompt fills one static cache per
        layer and each later step feeds a single token; without it every step
        re-runs the whole sequence. Both give the same tokens (for sampling,
        pass the same seeded ``generator``). Call ``model.eval()`` first if the
        config has dropout. Every row of ``ids`` has the same length (no padding).
        """
        b, n = ids.shape
        if n + max_new_tokens > self.cfg.max_seq_len:
            raise ValueError(f"prompt of {n} tokens + max_new_tokens={max_new_tokens} = {n + max_new_tokens} "
                             f"exceeds max_seq_len={self.cfg.max_seq_len}")
        caches = self.make_caches(b, n + max_new_tokens) if use_cache else None
        out, step_in = ids, ids
        for _ in range(max_new_tokens):
            logits = self(step_in if use_cache else out, caches=caches)[:, -1]
            nxt = sample_next_token(logits, temperature, top_k, greedy, generator)
            out = torch.cat([out, nxt], dim=1)
            step_in = nxt
        return out

    # ------------------------------------------------------------ accounting
    def num_params(self, non_embedding: bool = False) -> int:
        """Parameters, each shared tensor counted once; ``non_embedding`` leaves out the embedding matrix."""
        n = sum(p.numel() for p in self.parameters())
        return n - self.tok_emb.weight.numel() if non_embedding else n


def sample_next_token(logits: Tensor, temperature: float = 1.0, top_k: int | None = None, greedy: bool = False,
                      generator: torch.Generator | None = None) -> Tensor:
    """Choose one token per row of ``logits`` ``(batch, V)`` -> ``(batch, 1)`` ids.

    ``greedy``: argmax. Otherwise divide by ``temperature`` (> 0; lower is
    sharper), keep the ``top_k`` largest logits (ties at the k-th value kept),
    and draw from the softmax with ``torch.multinomial``.
    """
    if greedy:
        return logits.argmax(dim=-1, keepdim=True)
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 for sampling (use greedy=True for argmax), got {temperature}")
    logits = logits.float() / temperature
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)


def next_token_loss(logits: Tensor, ids: Tensor, ignore_index: int | None = None) -> Tensor:
    """Mean next-token cross-entropy when ``logits`` were computed from ``ids`` itself.

    ``logits``: ``(batch, seq, V)``, row ``t`` scoring the token at ``t + 1``;
    ``ids``: ``(batch, seq)``. The last row of logits has no target and the
    first token is never predicted, so the loss pairs ``logits[:, :-1]`` with
    ``ids[:, 1:]``::

        loss = -1/|T| sum_{(b, t) in T} log softmax(logits[b, t])[ids[b, t + 1]]

    where ``T`` holds the pairs whose target is not ``ignore_index`` (all of
    them when it is None). Computed in the dtype of ``logits``.
    """
    if logits.ndim != 3 or ids.shape != logits.shape[:2]:
        raise ValueError(f"expected logits (batch, seq, V) and ids (batch, seq), got {tuple(logits.shape)} "
                         f"and {tuple(ids.shape)}")
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(),
                           ignore_index=-100 if ignore_index is None else ignore_index)
