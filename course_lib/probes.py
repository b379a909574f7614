"""Probes of frozen features (chapter 10): how much of a label can be read off features learned without it.

A backbone trained without labels (DINO) is judged by what a *frozen* copy
of it gives a simple reader: a :func:`knn_accuracy` vote (:func:`knn_predict`) among the nearest
training images, or a :func:`linear_probe_accuracy`, a logistic regression on
the features. Neither reader can learn new features, so the accuracy measures
the features themselves. The same probes on a random initialisation and on a
supervised model of the same architecture put the number in context.

Shapes: ``train_f (n, D)``, ``train_y (n,)`` integer labels, ``test_f (m, D)``, ``test_y (m,)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["knn_predict", "knn_accuracy", "linear_probe_accuracy", "view_retrieval_accuracy"]


def _check(train_f: Tensor, train_y: Tensor, test_f: Tensor, test_y: Tensor) -> None:
    if train_f.ndim != 2 or test_f.ndim != 2 or train_f.shape[1] != test_f.shape[1]:
        raise ValueError(f"features must be (n, D) and (m, D) with one D, got {tuple(train_f.shape)} "
                         f"and {tuple(test_f.shape)}")
    if train_y.shape != train_f.shape[:1] or test_y.shape != test_f.shape[:1]:
        raise ValueError(f"one label per feature row: {tuple(train_y.shape)} labels for {len(train_f)} rows, "
                         f"{tuple(test_y.shape)} for {len(test_f)}")


@torch.no_grad()
def knn_predict(train_f: Tensor, train_y: Tensor, test_f: Tensor, k: int = 20, temperature: float = 0.07,
                n_classes: int | None = None) -> Tensor:
    """The weighted k-NN vote on cosine similarity (Wu et al., 2018, as DINO evaluates): ``(m,)`` labels.

    Each test feature ``(m, D)`` finds its ``k`` most similar training features
    ``(n, D)``; neighbour ``j`` votes for its label with weight
    ``exp(sim_j / temperature)``; the label with the largest total wins.
    Computed in float64.
    """
    if train_f.ndim != 2 or test_f.ndim != 2 or train_f.shape[1] != test_f.shape[1] or len(train_y) != len(train_f):
        raise ValueError(f"need train features (n, D) with n labels and test features (m, D), got "
                         f"{tuple(train_f.shape)}, {tuple(train_y.shape)} and {tuple(test_f.shape)}")
    if not 1 <= k <= len(train_f):
        raise ValueError(f"k must be between 1 and the {len(train_f)} training features, got {k}")
    a, b = F.normalize(train_f.double(), dim=1), F.normalize(test_f.double(), dim=1)
    sim, idx = (b @ a.T).topk(k, dim=1)                                   # (m, k)
    n_classes = n_classes or int(train_y.max()) + 1
    votes = torch.zeros(len(test_f), n_classes, dtype=torch.float64)
    votes.scatter_add_(1, train_y[idx], (sim / temperature).exp())
    return votes.argmax(1)


def knn_accuracy(train_f: Tensor, train_y: Tensor, test_f: Tensor, test_y: Tensor, k: int = 20,
                 temperature: float = 0.07) -> float:
    """Accuracy of :func:`knn_predict` on ``(test_f, test_y)``."""
    _check(train_f, train_y, test_f, test_y)
    n_classes = int(max(train_y.max(), test_y.max())) + 1
    return (knn_predict(train_f, train_y, test_f, k, temperature, n_classes) == test_y).double().mean().item()


def linear_probe_accuracy(train_f: Tensor, train_y: Tensor, test_f: Tensor, test_y: Tensor,
                          weight_decay: float = 1e-3, steps: int = 100) -> float:
    """Test accuracy of a multinomial logistic regression trained on frozen features.

    Features are standardised with the training set's mean and deviation; the
    regression (L2 penalty ``weight_decay``) is fitted full-batch by L-BFGS in
    float64, from zeros, so the result does not depend on a seed.
    """
    _check(train_f, train_y, test_f, test_y)
    mean, std = train_f.double().mean(0), train_f.double().std(0).clamp_min(1e-6)
    x, xt = (train_f.double() - mean) / std, (test_f.double() - mean) / std
    n_classes = int(max(train_y.max(), test_y.max())) + 1
    w = torch.zeros(x.shape[1], n_classes, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(x @ w + b, train_y) + weight_decay * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return ((xt @ w + b).argmax(1) == test_y).double().mean().item()


@torch.no_grad()
def view_retrieval_accuracy(view_a: Tensor, view_b: Tensor) -> float:
    """Share of images whose two views find each other: row ``i`` of ``view_a`` is most similar (cosine)
    to row ``i`` of ``view_b`` among all ``m`` rows. ``(m, D), (m, D) -> float``; chance is ``1 / m``.

    What DINO's loss asks for directly (two views of one image, one answer),
    whatever the image's label: it measures what the features keep of an
    image across augmentations, where the probes above measure what they keep
    of its class.
    """
    if view_a.ndim != 2 or view_a.shape != view_b.shape:
        raise ValueError(f"views must be two (m, D) tensors of one shape, got {tuple(view_a.shape)} "
                         f"and {tuple(view_b.shape)}")
    sim = F.normalize(view_a.double(), dim=1) @ F.normalize(view_b.double(), dim=1).T
    return (sim.argmax(1) == torch.arange(len(view_a))).double().mean().item()
