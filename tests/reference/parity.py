"""Helpers of the Hugging Face parity tests (test_vit, test_dinov2): tiny models built from configs."""

from __future__ import annotations

import torch


def perturbed(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """``model`` in eval mode with every parameter moved by N(0, 0.2^2) noise.

    HF initialises some tensors to zero or a constant (registers, the mask token, LayerScale); a wrong
    mapping of such a tensor would go unseen.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.2)
    return model.eval()
