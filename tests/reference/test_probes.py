"""course_lib.probes (k-NN and linear probes of frozen features) and DINO's trainable pair (course_lib.dino)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.dino import DINOPair, dino_train_step, teacher_momentum
from course_lib.probes import knn_accuracy, knn_predict, linear_probe_accuracy, view_retrieval_accuracy


def _clusters(n_per: int, n_classes: int, dim: int, spread: float, seed: int):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(n_classes, dim, generator=g) * 3
    y = torch.arange(n_classes).repeat_interleave(n_per)
    return centres[y] + spread * torch.randn(len(y), dim, generator=g), y


def test_knn_reads_separated_clusters_perfectly_and_noise_at_chance():
    train_f, train_y = _clusters(40, 4, 8, 0.1, 0)
    test_f, test_y = _clusters(20, 4, 8, 0.1, 0)
    assert knn_accuracy(train_f, train_y, test_f + 0.01, test_y, k=5) == 1.0
    g = torch.Generator().manual_seed(3)
    noise_acc = knn_accuracy(torch.randn(400, 8, generator=g), torch.randint(0, 4, (400,), generator=g),
                             torch.randn(400, 8, generator=g), torch.randint(0, 4, (400,), generator=g))
    assert abs(noise_acc - 0.25) < 0.1


def test_knn_with_one_neighbour_copies_the_nearest_label_by_cosine():
    train_f = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    train_y = torch.tensor([0, 1, 2])
    test_f = torch.tensor([[10.0, 1.0], [0.1, 3.0], [-2.0, -0.5]])  # scale does not matter, direction does
    assert knn_accuracy(train_f, train_y, test_f, torch.tensor([0, 1, 2]), k=1) == 1.0
    assert knn_accuracy(train_f, train_y, test_f, torch.tensor([1, 1, 1]), k=1) == pytest.approx(1 / 3)


def test_probes_name_bad_arguments():
    f, y = torch.randn(10, 3), torch.zeros(10, dtype=torch.long)
    with pytest.raises(ValueError, match="k must be between 1 and the 10 training features, got 11"):
        knn_accuracy(f, y, f, y, k=11)
    with pytest.raises(ValueError, match="features must be"):
        linear_probe_accuracy(f, y, torch.randn(10, 4), y)
    with pytest.raises(ValueError, match="one label per feature row"):
        knn_accuracy(f, y[:5], f, y)


def test_a_linear_probe_separates_what_is_linearly_separable_and_not_noise():
    train_f, train_y = _clusters(50, 3, 6, 1.0, 1)
    test_f, test_y = _clusters(50, 3, 6, 1.0, 1)
    assert linear_probe_accuracy(train_f, train_y, test_f, test_y) > 0.95
    g = torch.Generator().manual_seed(4)
    acc = linear_probe_accuracy(torch.randn(300, 6, generator=g), torch.randint(0, 3, (300,), generator=g),
                                torch.randn(300, 6, generator=g), torch.randint(0, 3, (300,), generator=g))
    assert abs(acc - 1 / 3) < 0.12
    # deterministic: no seed inside
    first = linear_probe_accuracy(train_f, train_y, test_f, test_y)
    assert linear_probe_accuracy(train_f, train_y, test_f, test_y) == first


def test_views_find_each_other_when_features_keep_the_image():
    g = torch.Generator().manual_seed(6)
    base = torch.randn(200, 16, generator=g)
    assert view_retrieval_accuracy(base + 0.05 * torch.randn(200, 16, generator=g), 3 * base) == 1.0
    shuffled = base[torch.randperm(200, generator=g)]
    assert view_retrieval_accuracy(base, shuffled) < 0.05  # each row's partner is elsewhere
    half = base.clone()
    half[100:] = torch.randn(100, 16, generator=g)  # half the pairs lose their common content
    assert 0.45 <= view_retrieval_accuracy(base, half) <= 0.55
    expected = r"views must be two \(m, D\) tensors of one shape, got \(200, 16\) and \(199, 16\)"
    with pytest.raises(ValueError, match=expected):
        view_retrieval_accuracy(base, base[:199])


def test_teacher_momentum_follows_a_half_cosine_from_base_to_one():
    assert teacher_momentum(0, 100) == pytest.approx(0.996)
    assert teacher_momentum(100, 100) == pytest.approx(1.0)
    assert teacher_momentum(50, 100) == pytest.approx(0.998)
    values = [teacher_momentum(s, 100) for s in range(101)]
    assert all(a <= b for a, b in zip(values, values[1:]))
    with pytest.raises(ValueError, match="step=101, max_steps=100"):
        teacher_momentum(101, 100)


class _Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 16))

    def forward(self, x):
        return self.net(nn.functional.interpolate(x, size=(8, 8), mode="bilinear", align_corners=False))


def test_the_pair_driven_by_an_optimiser_is_dino_train_step():
    torch.manual_seed(0)
    pair = DINOPair(_Backbone(), 16, out_dim=32, hidden_dim=24, bottleneck_dim=8)
    student, teacher = copy.deepcopy(pair.student), copy.deepcopy(pair.teacher)
    center = torch.zeros(1, 32)
    opt_a = torch.optim.SGD(pair.parameters(), lr=0.5)
    opt_b = torch.optim.SGD(student.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(1)
    steps = [[torch.randn(4, 3, 16, 16, generator=g) for _ in range(2)] + [torch.randn(4, 3, 8, 8, generator=g)]
             for _ in range(3)]
    for i, crops in enumerate(steps):
        m = teacher_momentum(i, 3, base=0.9)
        loss_a = pair.loss(crops, teacher_momentum(i - 1, 3, base=0.9) if i else 0.5)  # the EMA of the previous update
        opt_a.zero_grad()
        loss_a.backward()
        assert all(p.grad is None for p in pair.teacher.parameters()), "the teacher received gradients"
        opt_a.step()
        loss_b, _, center = dino_train_step(student, teacher, crops, center, opt_b, ema_momentum=m)
        assert loss_a.item() == pytest.approx(loss_b, rel=1e-5)
        torch.testing.assert_close(pair.center, center)
    from course_lib.dino import ema_update
    ema_update(pair.teacher, pair.student, teacher_momentum(2, 3, base=0.9))  # the last update's EMA step
    for (name, a), b in zip(pair.teacher.named_parameters(), teacher.parameters()):
        torch.testing.assert_close(a, b, msg=name)
    assert pair.teacher_backbone is pair.teacher[0]
    with pytest.raises(ValueError, match="need the 2 global crops and at least one more, got 2 crops"):
        pair.loss(steps[0][:2], 0.9)


def test_colour_jitter_changes_colours_not_shapes():
    from course_lib.data import scenes
    from course_lib.dino import colour_jitter

    images, _, masks = scenes(64, 16, torch.Generator().manual_seed(0))
    before = images.clone()
    out = colour_jitter(images, torch.Generator().manual_seed(1))
    assert torch.equal(images, before), "the input was modified"
    assert out.shape == images.shape and out.min() >= -1 and out.max() <= 1
    changed = (out - images).abs().flatten(1).amax(1) > 1e-3
    assert 0.7 < changed.float().mean() < 1.0 + 1e-9  # most images change colour, by design not all
    same = colour_jitter(images, torch.Generator().manual_seed(1))
    assert torch.equal(out, same)  # the generator decides everything
    # an object's outline survives: the object differs from its surroundings before and after, where it did before
    identity = colour_jitter(images, torch.Generator().manual_seed(1), p=0.0, shuffle_p=0.0, grayscale_p=0.0)
    torch.testing.assert_close(identity, images, atol=1e-6, rtol=0)
    gray = colour_jitter(images, torch.Generator().manual_seed(1), p=0.0, shuffle_p=0.0, grayscale_p=1.0)
    assert torch.allclose(gray[:, 0], gray[:, 1]) and torch.allclose(gray[:, 1], gray[:, 2])
    with pytest.raises(ValueError, match=r"images must be \(batch, 3, height, width\), got \(3, 16, 16\)"):
        colour_jitter(images[0])


def test_knn_predict_is_the_vote_knn_accuracy_scores():
    g = torch.Generator().manual_seed(3)
    train_f, train_y = torch.randn(200, 6, generator=g), torch.randint(0, 5, (200,), generator=g)
    test_f, test_y = torch.randn(50, 6, generator=g), torch.randint(0, 5, (50,), generator=g)
    predicted = knn_predict(train_f, train_y, test_f, k=7)
    assert predicted.shape == (50,) and predicted.dtype == torch.long
    assert knn_accuracy(train_f, train_y, test_f, test_y, k=7) == (predicted == test_y).double().mean().item()
    # one neighbour: the label of the most similar training feature, by cosine
    nearest = (F.normalize(test_f, dim=1) @ F.normalize(train_f, dim=1).T).argmax(1)
    assert torch.equal(knn_predict(train_f, train_y, test_f, k=1), train_y[nearest])
    with pytest.raises(ValueError, match="k must be between 1 and the 200"):
        knn_predict(train_f, train_y, test_f, k=201)
