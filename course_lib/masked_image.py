"""Masked image modelling (chapter 10): hide some patches of an image, predict what was hidden.

BERT (Devlin et al., 2019) learns language by filling in masked words. Three
vision models carry the idea over to patches; this module holds each one's
corruption and target, built from the ViT of :mod:`course_lib.vit`:

* **masked patch prediction**, the ViT paper's own experiment (Dosovitskiy et
  al., 2021, appendix B.1.2): half the patch *embeddings* are corrupted
  (:func:`corrupt_patches`: 80 % replaced by a learned mask embedding, 10 % by
  another patch's embedding, 10 % left as they are) and the model predicts the
  3-bit mean colour of each corrupted patch, one of 512 classes
  (:func:`mean_colour_classes`);
* **MAE** (He et al., 2022): :func:`random_masking` drops 75 % of the patches;
  the encoder (:class:`MAE`) runs on the visible quarter only, a light decoder
  fills the sequence back with a mask token and predicts every patch's
  normalised pixels (:func:`patch_targets`); the loss counts the masked
  patches only (:func:`masked_patch_loss`);
* **BEiT** (Bao et al., 2022): :func:`blockwise_mask` hides about 40 % of the
  patches in rectangular blocks, and the model predicts, for each masked
  patch, the discrete *visual token* that a tokenizer gives it
  (:func:`masked_token_loss`). BEiT's tokenizer is the encoder of a trained
  discrete VAE (DALL-E's, 8192 codes); :class:`PatchKMeansTokenizer` is a
  **stand-in** for it: a k-means codebook of raw patches, fitted in code in a
  second, so that the objective can be run without downloading anything. It
  has the dVAE's interface (image -> one code per patch), not its quality.

Notation (``notation.md``): ``B`` batch, ``C`` channels, ``P`` patch size,
``(gh, gw)`` the patch grid, ``N = gh * gw`` patches, ``D`` = ``dim``,
``n_keep`` the visible patches, ``K`` codebook size. A mask is boolean
``(B, N)`` in the patches' row-major order, **True where a patch is hidden**
(as :meth:`course_lib.dinov2.DINOv2.embed`'s ``masks``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib.blocks import Block
from course_lib.norms import LayerNorm
from course_lib.positional import sincos_2d
from course_lib.vit import ViT, ViTConfig, patchify

__all__ = ["random_masking", "unshuffle", "patch_targets", "masked_patch_loss", "MAEConfig", "MAE",
           "corrupt_patches", "CORRUPTION_KINDS", "mean_colour_classes", "blockwise_mask", "PatchKMeansTokenizer",
           "masked_token_loss"]


def _check_ratio(name: str, ratio: float) -> None:
    if not (isinstance(ratio, (int, float)) and 0.0 < ratio < 1.0):
        raise ValueError(f"{name}={ratio!r} must be a fraction strictly between 0 and 1")


def _check_mask(mask: Tensor, shape: tuple[int, int], name: str = "mask") -> None:
    if mask.dtype != torch.bool or tuple(mask.shape) != tuple(shape):
        raise ValueError(f"{name} must be boolean of shape (batch, N) = {tuple(shape)}, "
                         f"got {mask.dtype} {tuple(mask.shape)}")


# --------------------------------------------------------------------------
# MAE: random masking, the encoder on visible patches, a light decoder
# --------------------------------------------------------------------------
def random_masking(tokens: Tensor, mask_ratio: float, generator: torch.Generator | None = None
                   ) -> tuple[Tensor, Tensor, Tensor]:
    """MAE's per-sample random masking: keep ``n_keep = floor(N (1 - mask_ratio))`` tokens of each sequence.

    Each token gets a uniform noise value; sorting the noise shuffles the
    sequence (``ids_shuffle``), and the first ``n_keep`` tokens of the shuffle
    are kept, in shuffled order. ``ids_restore = argsort(ids_shuffle)`` is the
    inverse permutation: :func:`unshuffle` uses it to put a full-length
    sequence of (kept + mask) tokens back in the original order.

    Args:
        tokens: ``(B, N, D)``, positions already added (the kept tokens keep their place that way).
        mask_ratio: the share of tokens to hide, in ``(0, 1)``.
        generator: source of the noise (on ``tokens``' device).
    Returns:
        ``(kept (B, n_keep, D), mask (B, N) bool True = hidden, ids_restore (B, N) long)``.
    """
    _check_ratio("mask_ratio", mask_ratio)
    if tokens.ndim != 3:
        raise ValueError(f"tokens must be (batch, N, dim), got shape {tuple(tokens.shape)}")
    b, n, d = tokens.shape
    n_keep = int(n * (1 - mask_ratio) + 1e-9)
    if n_keep < 1:
        raise ValueError(f"mask_ratio={mask_ratio} hides every one of the N={n} tokens: at least one must stay visible")
    noise = torch.rand(b, n, generator=generator, device=tokens.device)
    ids_shuffle = noise.argsort(dim=1)
    ids_restore = ids_shuffle.argsort(dim=1)
    ids_keep = ids_shuffle[:, :n_keep]
    kept = tokens.gather(1, ids_keep[..., None].expand(-1, -1, d))
    mask = torch.ones(b, n, dtype=torch.bool, device=tokens.device)
    mask[:, :n_keep] = False                      # in shuffled order: the first n_keep are visible
    return kept, mask.gather(1, ids_restore), ids_restore


def unshuffle(tokens: Tensor, ids_restore: Tensor) -> Tensor:
    """``(B, N, D)`` tokens in shuffled order (kept first, then mask tokens) -> the original order."""
    if tokens.shape[:2] != ids_restore.shape:
        raise ValueError(f"tokens {tuple(tokens.shape)} and ids_restore {tuple(ids_restore.shape)} "
                         "differ in (batch, N)")
    return tokens.gather(1, ids_restore[..., None].expand(-1, -1, tokens.shape[-1]))


def patch_targets(images: Tensor, patch_size: int, normalize: bool = True, eps: float = 1e-6) -> Tensor:
    """MAE's targets ``(B, C, H, W) -> (B, N, C * P * P)``: each patch's pixels, normalised per patch if asked.

    With ``normalize`` each patch is shifted and scaled to mean 0 and variance 1
    over its own ``C * P * P`` values (``(x - mean) / sqrt(var + eps)``), which
    MAE found gives better features: the model must predict structure, not
    brightness.
    """
    if images.ndim != 4:
        raise ValueError(f"images must be (batch, channels, height, width), got shape {tuple(images.shape)}")
    h, w = images.shape[-2:]
    if h % patch_size or w % patch_size:
        raise ValueError(f"image size {h}x{w} is not a multiple of patch_size={patch_size}")
    x = patchify(images, patch_size)
    if normalize:
        x = (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, unbiased=False) + eps).sqrt()
    return x


def masked_patch_loss(pred: Tensor, target: Tensor, mask: Tensor) -> Tensor:
    """Mean squared error per patch, averaged over the **hidden** patches only: a scalar.

    ``pred``, ``target``: ``(B, N, C * P * P)``; ``mask``: ``(B, N)`` bool, True
    where hidden. A visible patch's prediction has no effect on the loss.
    """
    if pred.shape != target.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} must have one shape")
    _check_mask(mask, pred.shape[:2])
    if not mask.any():
        raise ValueError("mask hides no patch: the loss is an average over hidden patches")
    per_patch = (pred - target).pow(2).mean(-1)   # (B, N)
    return per_patch[mask].mean()


@dataclass
class MAEConfig:
    """A masked autoencoder: a ViT encoder and a narrower, shallower decoder (defaults: a CPU-sized model).

    Attributes:
        image_size, patch_size, in_chans: as :class:`~course_lib.vit.ViTConfig`.
        dim, n_layers, n_heads, mlp_ratio: the encoder (a ViT without head).
        decoder_dim, decoder_layers, decoder_heads: the decoder (MAE's ViT-L uses 512, 8, 16).
        mask_ratio: share of patches hidden in training (MAE: 0.75).
        norm_pix_loss: predict per-patch normalised pixels (MAE's default) or raw pixels.
        fixed_positions: fixed 2-D sin-cos positions in both halves, as MAE (else the
            encoder's learned ViT table; the decoder keeps sin-cos).
        attn_impl: ``"eager"`` or ``"sdpa"``.
    """

    image_size: int = 32
    patch_size: int = 4
    in_chans: int = 3
    dim: int = 64
    n_layers: int = 4
    n_heads: int = 4
    mlp_ratio: float = 4.0
    decoder_dim: int = 32
    decoder_layers: int = 1
    decoder_heads: int = 4
    mask_ratio: float = 0.75
    norm_pix_loss: bool = True
    fixed_positions: bool = True
    attn_impl: str = "sdpa"

    def __post_init__(self):
        _check_ratio("mask_ratio", self.mask_ratio)
        if self.decoder_dim % self.decoder_heads:
            raise ValueError(f"decoder_dim={self.decoder_dim} must be divisible by decoder_heads={self.decoder_heads}")
        if self.decoder_dim % 4 or (self.fixed_positions and self.dim % 4):
            raise ValueError(f"2-D sin-cos positions need widths divisible by 4, got dim={self.dim}, "
                             f"decoder_dim={self.decoder_dim}")
        self.encoder_config()  # the ViT's own checks (patch size divides the image, heads divide dim)

    def encoder_config(self) -> ViTConfig:
        return ViTConfig(image_size=self.image_size, patch_size=self.patch_size, in_chans=self.in_chans, dim=self.dim,
                         n_layers=self.n_layers, n_heads=self.n_heads, mlp_ratio=self.mlp_ratio, num_classes=0,
                         attn_impl=self.attn_impl)

    def decoder_config(self) -> ViTConfig:
        """The decoder's blocks, as a ViT config (its patch embedding and head are not used)."""
        return ViTConfig(image_size=self.image_size, patch_size=self.patch_size, in_chans=self.in_chans,
                         dim=self.decoder_dim, n_layers=self.decoder_layers, n_heads=self.decoder_heads,
                         mlp_ratio=self.mlp_ratio, num_classes=0, attn_impl=self.attn_impl)

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    def n_keep(self, mask_ratio: float | None = None) -> int:
        """Visible patches per image, as :func:`random_masking` keeps them."""
        ratio = self.mask_ratio if mask_ratio is None else mask_ratio
        return int(self.n_patches * (1 - ratio) + 1e-9)


class MAE(nn.Module):
    """Masked autoencoder (He et al., 2022): ``images (B, C, H, W) -> (loss, pred (B, N, C * P * P), mask (B, N))``.

    Encoder: the patch embedding, positions, CLS token, blocks and final norm of
    a :class:`~course_lib.vit.ViT`, run on ``[CLS; the visible patches]`` only:
    hidden patches never enter it. Decoder: a linear map to ``decoder_dim``, a
    learned **mask token** appended for every hidden patch, the sequence put back
    in order (:func:`unshuffle`), its own sin-cos positions, a few blocks, a norm
    and a linear map to the ``C * P * P`` pixel values of each patch.
    """

    def __init__(self, cfg: MAEConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = ViT(cfg.encoder_config())
        gh, gw = self.encoder.grid
        if cfg.fixed_positions:  # MAE: fixed 2-D sin-cos, a zero vector for CLS
            table = torch.cat([torch.zeros(1, cfg.dim), sincos_2d(gh, gw, cfg.dim)])[None]
            self.encoder.pos_embed.data.copy_(table)
            self.encoder.pos_embed.requires_grad_(False)
        dec = cfg.decoder_config()
        self.decoder_embed = nn.Linear(cfg.dim, cfg.decoder_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, cfg.decoder_dim))
        nn.init.normal_(self.mask_token, std=0.02)
        self.register_buffer("decoder_pos", torch.cat([torch.zeros(1, cfg.decoder_dim),
                                                       sincos_2d(gh, gw, cfg.decoder_dim)])[None], persistent=False)
        self.decoder_blocks = nn.ModuleList(Block(dec.block_config()) for _ in range(cfg.decoder_layers))
        self.decoder_norm = LayerNorm(cfg.decoder_dim, dec.norm_eps)
        self.decoder_pred = nn.Linear(cfg.decoder_dim, cfg.patch_size ** 2 * cfg.in_chans)

    def forward_encoder(self, images: Tensor, mask_ratio: float | None = None,
                        generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """``(B, C, H, W) -> (latent (B, 1 + n_keep, D), mask (B, N), ids_restore (B, N))``."""
        enc = self.encoder
        patches, grid = enc.patch_embed.tokens_and_grid(images)        # (B, N, D)
        if tuple(grid) != tuple(enc.grid):
            raise ValueError(f"the MAE was built for {self.cfg.image_size}x{self.cfg.image_size} images "
                             f"(a {enc.grid} grid), got {tuple(images.shape[-2:])}")
        pos = enc.pos_embed_for(grid)                                  # (1, 1 + N, D)
        patches = patches + pos[:, 1:]                                 # positions first, then drop patches
        kept, mask, ids_restore = random_masking(patches, self.cfg.mask_ratio if mask_ratio is None else mask_ratio,
                                                 generator)
        cls = (enc.cls_token + pos[:, :1]).expand(images.shape[0], -1, -1)
        tokens = torch.cat([cls, kept], dim=1)
        for block in enc.blocks:
            tokens = block(tokens)
        return enc.norm(tokens), mask, ids_restore

    def forward_decoder(self, latent: Tensor, ids_restore: Tensor) -> Tensor:
        """``latent (B, 1 + n_keep, D)``, ``ids_restore (B, N)`` -> ``pred (B, N, C * P * P)``."""
        x = self.decoder_embed(latent)
        b, n = ids_restore.shape
        fill = self.mask_token.expand(b, n + 1 - x.shape[1], -1).to(x.dtype)
        patches = unshuffle(torch.cat([x[:, 1:], fill], dim=1), ids_restore)  # (B, N, decoder_dim), original order
        x = torch.cat([x[:, :1], patches], dim=1) + self.decoder_pos
        for block in self.decoder_blocks:
            x = block(x)
        return self.decoder_pred(self.decoder_norm(x))[:, 1:]

    def forward(self, images: Tensor, mask_ratio: float | None = None,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """``(loss, pred (B, N, C * P * P), mask (B, N))``: the loss on the hidden patches only."""
        latent, mask, ids_restore = self.forward_encoder(images, mask_ratio, generator)
        pred = self.forward_decoder(latent, ids_restore)
        target = patch_targets(images, self.cfg.patch_size, normalize=self.cfg.norm_pix_loss)
        return masked_patch_loss(pred, target, mask), pred, mask

    def forward_features(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, 1 + N, D)``: the encoder on every patch (no masking), as used after pre-training."""
        return self.encoder.forward_features(images)


# --------------------------------------------------------------------------
# The ViT paper's masked patch prediction
# --------------------------------------------------------------------------
#: What :func:`corrupt_patches` did to each patch: the index in this tuple is the code it returns.
CORRUPTION_KINDS = ("untouched", "mask embedding", "random patch", "kept but predicted")


def corrupt_patches(embeddings: Tensor, mask_embedding: Tensor, ratio: float = 0.5,
                    generator: torch.Generator | None = None, *,
                    probs: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> tuple[Tensor, Tensor, Tensor]:
    """BERT's corruption rule on patch embeddings, as the ViT paper's masked patch prediction uses it.

    In each image ``round(ratio * N)`` patches are chosen at random; each chosen
    patch, independently, is replaced by ``mask_embedding`` (probability
    ``probs[0]``), by the embedding of another patch drawn uniformly from the
    whole batch (``probs[1]``), or left as it is (``probs[2]``). All chosen
    patches are predicted, including those left as they are.

    Args:
        embeddings: ``(B, N, D)`` patch embeddings.  mask_embedding: ``(D,)`` or ``(1, 1, D)``.
    Returns:
        ``(corrupted (B, N, D), chosen (B, N) bool, kind (B, N) long)``, ``kind``
        indexing :data:`CORRUPTION_KINDS` (0 for patches not chosen).
    """
    _check_ratio("ratio", ratio)
    if len(probs) != 3 or min(probs) < 0 or abs(sum(probs) - 1) > 1e-6:
        raise ValueError(f"probs={probs!r} must be three non-negative probabilities (mask, random, keep) summing to 1")
    if embeddings.ndim != 3:
        raise ValueError(f"embeddings must be (batch, N, dim), got shape {tuple(embeddings.shape)}")
    b, n, d = embeddings.shape
    if mask_embedding.numel() != d:
        raise ValueError(f"mask_embedding has {mask_embedding.numel()} values, the embeddings have dim={d}")
    if b * n < 2:
        raise ValueError("need at least two patches in the batch to draw a random other patch")
    n_chosen = max(1, round(ratio * n))
    ids = torch.rand(b, n, generator=generator, device=embeddings.device).argsort(dim=1)[:, :n_chosen]
    chosen = torch.zeros(b, n, dtype=torch.bool, device=embeddings.device).scatter(1, ids, True)
    u = torch.rand(b, n, generator=generator, device=embeddings.device)
    kind = torch.where(u < probs[0], 1, torch.where(u < probs[0] + probs[1], 2, 3)) * chosen
    flat = embeddings.reshape(b * n, d)
    own = torch.arange(b * n, device=embeddings.device)
    other = torch.randint(0, b * n - 1, (b * n,), generator=generator, device=embeddings.device)
    other = other + (other >= own).long()       # any patch of the batch but itself
    out = torch.where((kind == 1)[..., None], mask_embedding.reshape(1, 1, d).to(embeddings), embeddings)
    out = torch.where((kind == 2)[..., None], flat[other].reshape(b, n, d), out)
    return out, chosen, kind


def mean_colour_classes(images: Tensor, patch_size: int, bits: int = 3,
                        value_range: tuple[float, float] = (-1.0, 1.0)) -> Tensor:
    """The ViT paper's target: each patch's mean colour, ``bits`` bits per channel, as one class ``(B, N)`` long.

    Each channel's mean over the patch is mapped from ``value_range`` to
    ``[0, 1]`` and cut into ``2**bits`` equal bins (3 bits: 8 levels); the class
    is ``(r * L + g) * L + b`` with ``L = 2**bits``, one of ``L**3`` (512) classes.

    Args:
        images: ``(B, 3, H, W)`` with values in ``value_range`` (the course's images are in ``[-1, 1]``).
    """
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"images must be RGB, (batch, 3, height, width), got shape {tuple(images.shape)}")
    if bits < 1:
        raise ValueError(f"bits={bits} must be at least 1")
    lo, hi = value_range
    if images.min() < lo - 1e-6 or images.max() > hi + 1e-6:
        raise ValueError(f"image values span [{images.min().item():.3g}, {images.max().item():.3g}], "
                         f"outside value_range={value_range}")
    h, w = images.shape[-2:]
    if h % patch_size or w % patch_size:
        raise ValueError(f"image size {h}x{w} is not a multiple of patch_size={patch_size}")
    levels = 2 ** bits
    means = F.avg_pool2d(images, patch_size).flatten(2).transpose(1, 2)   # (B, N, 3), row-major grid
    q = ((means - lo) / (hi - lo) * levels).floor().long().clamp(0, levels - 1)
    return (q[..., 0] * levels + q[..., 1]) * levels + q[..., 2]


# --------------------------------------------------------------------------
# BEiT: blockwise masking, visual tokens, the masked-token loss
# --------------------------------------------------------------------------
def blockwise_mask(batch: int, grid: tuple[int, int], mask_ratio: float = 0.4,
                   generator: torch.Generator | None = None, *, min_patches: int = 16,
                   max_aspect: float = 3.0, attempts: int = 10) -> Tensor:
    """BEiT's blockwise masking: rectangles of patches until ``round(mask_ratio * N)`` are hidden. ``(B, N)`` bool.

    Each block draws an area ``s`` uniformly between ``min_patches`` (capped at
    the target) and the number still to hide, and an aspect ratio log-uniform
    in ``[1 / max_aspect, max_aspect]``; it is placed at a uniform position
    inside the grid and accepted only if it hides at least one new patch and
    no more than are still to hide; after ``attempts`` rejected blocks in a row
    the mask is left as it is, a little short of the target (Bao et al., 2022,
    algorithm 1). BEiT uses ``min_patches=16`` on a 14 x 14 grid. Neighbouring
    patches are hidden together, so a hidden patch cannot be copied from its
    visible neighbours.
    """
    _check_ratio("mask_ratio", mask_ratio)
    gh, gw = grid
    if batch < 0 or gh < 1 or gw < 1:
        raise ValueError(f"need batch >= 0 and a grid of at least 1x1, got batch={batch}, grid={grid}")
    if max_aspect < 1:
        raise ValueError(f"max_aspect={max_aspect} must be >= 1")
    target = round(mask_ratio * gh * gw)
    low = max(1, min(min_patches, target))
    log_aspect = math.log(max_aspect)
    masks = torch.zeros(batch, gh, gw, dtype=torch.bool)
    for i in range(batch):
        m = masks[i]
        while (left := target - int(m.sum())) > 0:
            for _ in range(attempts):
                area = low + float(torch.rand((), generator=generator)) * (max(left, low) - low)
                aspect = math.exp((2 * float(torch.rand((), generator=generator)) - 1) * log_aspect)
                h, w = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
                h, w = min(max(h, 1), gh), min(max(w, 1), gw)
                top = int(torch.randint(0, gh - h + 1, (), generator=generator))
                lft = int(torch.randint(0, gw - w + 1, (), generator=generator))
                new = h * w - int(m[top:top + h, lft:lft + w].sum())
                if 0 < new <= left:
                    m[top:top + h, lft:lft + w] = True
                    break
            else:  # no block fits what is left: stop a little short of the target, as BEiT does
                break
    return masks.flatten(1)


class PatchKMeansTokenizer:
    """A **stand-in** for BEiT's dVAE tokenizer: k-means over raw patches, one code per patch.

    BEiT maps each patch to one of 8192 visual tokens with the encoder of a
    discrete VAE trained beforehand (DALL-E's). Here a codebook of ``K``
    centroids of flattened patches (:func:`~course_lib.vit.patchify` order) is
    fitted by Lloyd's k-means in code; a patch's token is its nearest centroid.
    It gives the objective its shape (discrete targets, a softmax over ``K``)
    but not the dVAE's learned, more semantic codes.
    """

    def __init__(self, codebook: Tensor, patch_size: int):
        if codebook.ndim != 2:
            raise ValueError(f"codebook must be (K, C * P * P), got shape {tuple(codebook.shape)}")
        self.codebook, self.patch_size = codebook, patch_size

    @classmethod
    def fit(cls, images: Tensor, patch_size: int, n_codes: int, iters: int = 20,
            generator: torch.Generator | None = None) -> "PatchKMeansTokenizer":
        """Fit ``n_codes`` centroids to the patches of ``images (B, C, H, W)``, from ``n_codes`` random patches."""
        patches = patch_targets(images, patch_size, normalize=False).reshape(-1, images.shape[1] * patch_size ** 2)
        if not 1 <= n_codes <= len(patches):
            raise ValueError(f"n_codes={n_codes} must be between 1 and the {len(patches)} patches given")
        centroids = patches[torch.randperm(len(patches), generator=generator)[:n_codes]].clone()
        for _ in range(iters):
            assign = torch.cdist(patches, centroids).argmin(1)
            sums = torch.zeros_like(centroids).index_add_(0, assign, patches)
            counts = torch.bincount(assign, minlength=n_codes)[:, None]
            centroids = torch.where(counts > 0, sums / counts.clamp_min(1), centroids)  # an empty code stays put
        return cls(centroids, patch_size)

    @property
    def n_codes(self) -> int:
        return self.codebook.shape[0]

    def encode(self, images: Tensor) -> Tensor:
        """``(B, C, H, W) -> (B, N)`` long: each patch's nearest centroid."""
        patches = patch_targets(images, self.patch_size, normalize=False)
        if patches.shape[-1] != self.codebook.shape[1]:
            raise ValueError(f"patches have {patches.shape[-1]} values, the codebook's {self.codebook.shape[1]}")
        return torch.cdist(patches, self.codebook.to(patches)[None].expand(len(patches), -1, -1)).argmin(-1)

    def decode(self, codes: Tensor) -> Tensor:
        """``(B, N)`` codes -> ``(B, N, C * P * P)`` centroid patches."""
        return self.codebook[codes]


def masked_token_loss(logits: Tensor, tokens: Tensor, mask: Tensor) -> Tensor:
    """Cross-entropy of the predicted visual tokens, averaged over the **hidden** patches only: a scalar.

    ``logits``: ``(B, N, K)``; ``tokens``: ``(B, N)`` long in ``[0, K)``;
    ``mask``: ``(B, N)`` bool, True where hidden. BEiT's objective, and the ViT
    paper's with ``K = 512`` mean-colour classes.
    """
    if logits.ndim != 3 or tokens.shape != logits.shape[:2]:
        raise ValueError(f"logits must be (batch, N, K) and tokens (batch, N), got {tuple(logits.shape)} "
                         f"and {tuple(tokens.shape)}")
    _check_mask(mask, tokens.shape)
    if not mask.any():
        raise ValueError("mask hides no patch: the loss is an average over hidden patches")
    if tokens.min() < 0 or tokens.max() >= logits.shape[-1]:
        raise ValueError(f"tokens must lie in [0, K={logits.shape[-1]}), "
                         f"got [{int(tokens.min())}, {int(tokens.max())}]")
    return F.cross_entropy(logits[mask], tokens[mask])
