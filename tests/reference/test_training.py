"""course_lib.training and course_lib.data: schedules, AdamW's decay rule, the trainer, data parallelism, synthetic
data."""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from course_lib import data as D
from course_lib import training as T
from course_lib.seq2seq import transformer_lr

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The models here are tiny: one thread is fastest, and immune to a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def config(**overrides) -> T.TrainConfig:
    """A CPU config without a progress bar, for tests."""
    defaults = dict(device="cpu", progress=False, lr=1e-2, warmup_steps=2, max_steps=10, log_every=1)
    return T.TrainConfig(**(defaults | overrides))


def regression_batches(start: int = 0, batch: int = 8, width: int = 4):
    """Batch ``i`` depends only on ``i``: a stream that can be resumed at any step."""
    for i in itertools.count(start):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(batch, width, generator=g)
        yield x, torch.sin(x).sum(1, keepdim=True)


def mse(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


# ========================================================== schedules
def test_warmup_is_linear_from_zero_and_peaks_at_warmup_steps():
    lr = [T.warmup_cosine(t, 1.0, 10, 100, 0.1) for t in range(0, 11)]
    assert lr == pytest.approx([t / 10 for t in range(0, 11)])
    assert max(T.warmup_cosine(t, 1.0, 10, 100, 0.1) for t in range(101)) == lr[10] == 1.0


def test_cosine_decays_monotonically_to_min_lr_at_max_steps_and_stays_there():
    after = [T.warmup_cosine(t, 1.0, 10, 100, 0.1) for t in range(10, 150)]
    assert all(a >= b for a, b in zip(after, after[1:]))
    assert T.warmup_cosine(100, 1.0, 10, 100, 0.1) == pytest.approx(0.1)
    assert T.warmup_cosine(99, 1.0, 10, 100, 0.1) > 0.1
    assert T.warmup_cosine(149, 1.0, 10, 100, 0.1) == pytest.approx(0.1)
    midway = T.warmup_cosine(55, 1.0, 10, 100, 0.1)  # cos(pi / 2) = 0: halfway between max and min
    assert midway == pytest.approx(0.55)


def test_without_warmup_the_cosine_starts_at_the_peak():
    assert T.warmup_cosine(0, 2.0, 0, 10) == 2.0
    assert T.warmup_cosine(10, 2.0, 0, 10) == 0.0


def test_the_2017_schedule_rises_linearly_peaks_at_warmup_then_decays_as_inverse_sqrt():
    dim, warmup = 512, 4000
    lr = lambda t: transformer_lr(t, dim, warmup)
    assert lr(0) == 0.0
    assert lr(2000) == pytest.approx(lr(1000) * 2)  # linear during warmup
    steps = range(1, 3 * warmup, 7)
    assert max(steps, key=lr) in range(warmup - 7, warmup + 7)
    assert lr(warmup) == pytest.approx((dim * warmup) ** -0.5)
    assert lr(4 * warmup) == pytest.approx(lr(warmup) / 2)  # 1 / sqrt(t) after warmup


@pytest.mark.parametrize("schedule", ["cosine", "inverse_sqrt"])
def test_config_lr_is_the_peak_of_either_schedule(schedule):
    cfg = config(lr=3e-3, warmup_steps=5, max_steps=50, schedule=schedule)
    lrs = [T.learning_rate(t, cfg) for t in range(51)]
    assert max(lrs) == pytest.approx(3e-3) and lrs.index(max(lrs)) == 5


# ========================================================== configuration
@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(lr=-1e-3), "lr must be positive"),
        (dict(lr=0.0), "lr must be positive"),
        (dict(weight_decay=-0.1), "weight_decay"),
        (dict(betas=(0.9, 1.0)), "betas"),
        (dict(warmup_steps=20, max_steps=10), "warmup_steps must be in"),
        (dict(warmup_steps=-1), "warmup_steps"),
        (dict(max_steps=0), "max_steps"),
        (dict(min_lr_ratio=1.5), "min_lr_ratio"),
        (dict(schedule="linear"), "schedule must be one of"),
        (dict(schedule="inverse_sqrt", warmup_steps=0), "inverse_sqrt"),
        (dict(grad_clip=0.0), "grad_clip"),
        (dict(log_every=0), "log_every"),
        (dict(checkpoint_every=5), "needs a checkpoint_path"),
        (dict(amp_dtype="fp16"), "amp_dtype must be one of"),
    ],
)
def test_a_bad_config_is_refused_with_a_message_naming_the_value(bad, message):
    with pytest.raises(ValueError, match=message):
        config(**bad)


# ========================================================== AdamW and the decay rule
class TinyLM(nn.Module):
    """Matrices, vectors and a tied weight: every case of the decay rule."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(7, 4)
        self.norm = nn.LayerNorm(4)
        self.head = nn.Linear(4, 7)
        self.head.weight = self.embed.weight  # tied: one parameter
        self.scale = nn.Parameter(torch.tensor(1.0))

    def forward(self, x):
        return self.head(self.norm(self.embed(x))) * self.scale


def test_only_parameters_with_two_or_more_dims_are_in_the_decayed_group():
    model = TinyLM()
    decay, no_decay = T.param_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert {id(p) for p in decay["params"]} == {id(model.embed.weight)}  # the tied matrix, once
    expected = {id(model.norm.weight), id(model.norm.bias), id(model.head.bias), id(model.scale)}
    assert {id(p) for p in no_decay["params"]} == expected


def test_a_model_can_exempt_a_matrix_by_name():
    model = TinyLM()
    model.no_weight_decay = lambda: {"embed.weight"}
    decay, no_decay = T.param_groups(model, 0.1)
    assert decay["params"] == [] and any(p is model.embed.weight for p in no_decay["params"])


def test_with_zero_gradients_weight_decay_shrinks_matrices_and_leaves_vectors_alone():
    # A zero gradient makes Adam's step exactly zero, so only the decay moves anything.
    model = TinyLM()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = config(lr=0.1, weight_decay=0.5, warmup_steps=0, min_lr_ratio=1.0, max_steps=3)
    T.Trainer(model, lambda m, b: 0.0 * sum(p.sum() for p in m.parameters()), cfg).fit(itertools.repeat(()))
    after = model.state_dict()
    torch.testing.assert_close(after["embed.weight"], before["embed.weight"] * (1 - 0.1 * 0.5) ** 3)
    for name in ["norm.weight", "norm.bias", "head.bias", "scale"]:
        assert torch.equal(after[name], before[name]), f"{name} (1-D) was decayed"


# ========================================================== the trainer
class ReverseMLP(nn.Module):
    """Embed every source token, flatten, and predict every target token at once."""

    def __init__(self, length: int, vocab: int, width: int = 16, hidden: int = 128):
        super().__init__()
        self.length, self.vocab = length, vocab
        self.embed = nn.Embedding(vocab, width)
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(width * (length + 1), hidden), nn.GELU(),
                                 nn.Linear(hidden, length * vocab))

    def forward(self, source):  # (batch, length + 1) -> (batch, length, vocab)
        return self.net(self.embed(source)).view(-1, self.length, self.vocab)


def reverse_loss(model, batch):
    source, target = batch
    return F.cross_entropy(model(source).flatten(0, 1), target[:, 1:-1].flatten())


def test_a_tiny_model_learns_to_reverse_sequences():
    torch.manual_seed(0)
    length, vocab = 5, 8
    model = ReverseMLP(length, vocab)
    held_out = D.sequence_task("reverse", 256, length, vocab, torch.Generator().manual_seed(-1))
    g = torch.Generator().manual_seed(0)
    batches = (D.sequence_task("reverse", 32, length, vocab, g) for _ in itertools.count())
    with torch.no_grad():
        before = reverse_loss(model, held_out).item()
    cfg = config(lr=3e-3, warmup_steps=10, max_steps=60, log_every=20, weight_decay=0.0)
    history = T.Trainer(model, reverse_loss, cfg).fit(batches)
    with torch.no_grad():
        after = reverse_loss(model, held_out).item()
    assert [r["step"] for r in history] == [20, 40, 60]
    assert after < 0.1 * before, f"held-out loss went from {before:.3f} to {after:.3f} only"


def test_gradient_clipping_rescales_the_gradient_to_grad_clip_and_reports_the_norm_before():
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    batch = next(regression_batches())
    steep = lambda m, b: 100.0 * mse(m, b)
    reference = nn.Linear(4, 1)
    reference.load_state_dict(model.state_dict())
    steep(reference, batch).backward()
    raw = torch.cat([p.grad.flatten() for p in reference.parameters()])

    trainer = T.Trainer(model, steep, config(grad_clip=0.5, warmup_steps=0, max_steps=1))
    trainer.fit([batch])
    applied = torch.cat([p.grad.flatten() for p in model.parameters()])  # the grads stay until the next step
    assert raw.norm() > 0.5
    assert trainer.history[-1]["grad_norm"] == pytest.approx(raw.norm().item(), rel=1e-5)
    assert applied.norm().item() == pytest.approx(0.5, rel=1e-5)
    torch.testing.assert_close(applied, raw * 0.5 / raw.norm(), rtol=1e-5, atol=1e-7)  # same direction


def test_without_clipping_the_gradient_is_applied_as_it_is_and_its_norm_still_reported():
    torch.manual_seed(0)
    model, reference = nn.Linear(4, 1), nn.Linear(4, 1)
    reference.load_state_dict(model.state_dict())
    batch = next(regression_batches())
    mse(reference, batch).backward()
    trainer = T.Trainer(model, mse, config(grad_clip=None, warmup_steps=0, max_steps=1))
    trainer.fit([batch])
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.equal(p.grad, q.grad)
    raw_norm = torch.cat([q.grad.flatten() for q in reference.parameters()]).norm().item()
    assert trainer.history[-1]["grad_norm"] == pytest.approx(raw_norm, rel=1e-6)


def test_bf16_autocast_runs_the_forward_pass_in_bfloat16_and_keeps_float32_weights():
    seen = []

    def loss_fn(model, batch):
        out = model(batch[0])
        seen.append(out.dtype)
        return F.mse_loss(out.float(), batch[1])

    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    history = T.Trainer(model, loss_fn, config(amp_dtype="bf16", max_steps=3)).fit(regression_batches())
    assert seen == [torch.bfloat16] * 3
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(math.isfinite(r["loss"]) for r in history)


def test_fit_stops_at_max_steps_without_taking_a_batch_too_many():
    stream = regression_batches()
    trainer = T.Trainer(nn.Linear(4, 1), mse, config(max_steps=10))
    trainer.fit(stream, steps=4)
    trainer.fit(stream)
    assert trainer.step == 10
    assert [r["step"] for r in trainer.history] == list(range(1, 11))
    x_next, _ = next(stream)
    assert torch.equal(x_next, next(regression_batches(start=10))[0])


class DropoutNet(nn.Module):
    """Dropout makes the result depend on the RNG state, which a checkpoint must restore."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 32), nn.LayerNorm(32), nn.GELU(), nn.Dropout(0.2), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x)


def fresh_dropout_net(seed: int) -> DropoutNet:
    torch.manual_seed(seed)
    return DropoutNet()


def test_resuming_from_a_checkpoint_is_bitwise_identical_to_training_without_a_break(tmp_path):
    n, k = 12, 5
    cfg = dict(lr=1e-2, warmup_steps=3, max_steps=n, grad_clip=0.1, weight_decay=0.1, log_every=4)

    straight = fresh_dropout_net(0)
    T.Trainer(straight, mse, config(**cfg)).fit(regression_batches())

    # Checkpoint every k steps; crash while fetching the batch of step k + 3.
    def crashing_batches():
        for i, batch in enumerate(regression_batches()):
            if i == k + 2:
                raise RuntimeError("the machine went down")
            yield batch

    ckpt = tmp_path / "run" / "ckpt.pt"
    interrupted = T.Trainer(fresh_dropout_net(0), mse, config(**cfg, checkpoint_path=str(ckpt), checkpoint_every=k))
    with pytest.raises(RuntimeError, match="went down"):
        interrupted.fit(crashing_batches())
    assert interrupted.step == k + 2

    resumed_model = fresh_dropout_net(123)  # different weights: the checkpoint must overwrite them
    resumed = T.Trainer(resumed_model, mse, config(**cfg))
    resumed.load_checkpoint(ckpt)
    assert resumed.step == k
    resumed.fit(regression_batches(start=k))

    assert resumed.step == n
    for name, value in straight.state_dict().items():
        assert torch.equal(value, resumed_model.state_dict()[name]), f"{name} differs after resuming"


# ========================================================== data parallelism
DDP_WORKER = """
import os, sys
import torch, torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from course_lib.training import Trainer, TrainConfig

out = sys.argv[1]
torch.manual_seed(int(os.environ["RANK"]))  # different weights on each rank: DDP must broadcast rank 0's
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
initial = {k: v.clone() for k, v in model.state_dict().items()}

def batches():  # the same stream on every rank; the trainer takes its share
    for i in range(1000):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(8, 4, generator=g)
        yield x, torch.sin(x).sum(1, keepdim=True)

cfg = TrainConfig(lr=1e-2, warmup_steps=2, max_steps=6, log_every=3, device="cpu", progress=True,
                  checkpoint_path=os.path.join(out, "ckpt.pt"))
with Trainer(model, lambda m, b: F.mse_loss(m(b[0]), b[1]), cfg) as trainer:
    assert trainer.distributed and trainer.world_size == 2
    trainer.fit(batches())
torch.save({"initial": initial, "final": model.state_dict(), "history": trainer.history,
            "group_destroyed": not dist.is_initialized()}, os.path.join(out, f"rank{trainer.rank}.pt"))
"""


def test_two_ddp_processes_end_with_the_same_weights_as_one_process_on_the_global_batch(tmp_path):
    script = tmp_path / "ddp_worker.py"
    script.write_text(textwrap.dedent(DDP_WORKER))
    launcher = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "COURSE_STATIC_OUTPUT")
    env = {k: v for k, v in os.environ.items() if k not in launcher}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))}
    start = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script),
         str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=120,
    )
    print(f"torchrun took {time.perf_counter() - start:.1f} s")
    assert res.returncode == 0, f"torchrun failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))

    for name, value in rank0["final"].items():
        assert torch.equal(value, rank1["final"][name]), f"{name} differs between the ranks"
    assert not torch.equal(rank0["final"]["0.weight"], rank0["initial"]["0.weight"]), "training changed nothing"
    assert rank0["history"] == rank1["history"] and [r["step"] for r in rank0["history"]] == [3, 6]
    assert rank0["group_destroyed"] and rank1["group_destroyed"]
    assert res.stderr.count("0/6") == 1, "the progress bar should be shown by rank 0 only"
    checkpoint = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert checkpoint["step"] == 6 and len(checkpoint["rng"]) == 2
    assert all(torch.equal(v, rank0["final"][k]) for k, v in checkpoint["model"].items())

    # One process on the global batch (rank 0's and rank 1's batches together) from rank 0's
    # initial weights: DDP's gradient average equals the gradient of the mean loss.
    single = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    single.load_state_dict(rank0["initial"])
    stream = regression_batches()
    global_batches = ((torch.cat([a[0], b[0]]), torch.cat([a[1], b[1]])) for a, b in zip(stream, stream))
    T.Trainer(single, mse, config(lr=1e-2, warmup_steps=2, max_steps=6)).fit(global_batches)
    for name, value in single.state_dict().items():
        torch.testing.assert_close(rank0["final"][name], value, rtol=0, atol=1e-6)


# ========================================================== data: sequence tasks
def expected_output(kind: str, tokens: list[int]) -> list[int]:
    return {"copy": tokens, "reverse": tokens[::-1], "sort": sorted(tokens)}[kind]


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(D.TASKS),
    n=st.integers(0, 6),
    length=st.integers(1, 9),
    vocab=st.integers(D.N_SPECIAL + 1, 20),
    shortest=st.floats(0, 1),
    seed=st.integers(0, 2**31),
)
def test_every_example_follows_the_token_conventions_and_solves_its_task(kind, n, length, vocab, shortest, seed):
    min_length = max(1, round(shortest * length))
    source, target = D.sequence_task(kind, n, length, vocab, torch.Generator().manual_seed(seed), min_length=min_length)
    assert source.shape == (n, length + 1) and target.shape == (n, length + 2)
    assert source.dtype == target.dtype == torch.long
    for src, tgt in zip(source.tolist(), target.tolist()):
        size = src.index(D.EOS)
        tokens = src[:size]
        assert min_length <= size <= length
        assert all(D.N_SPECIAL <= t < vocab for t in tokens)
        assert src[size + 1:] == [D.PAD] * (length - size)
        assert tgt == [D.BOS] + expected_output(kind, tokens) + [D.EOS] + [D.PAD] * (length - size)


def test_sequence_tasks_are_deterministic_given_a_generator():
    a = D.sequence_task("sort", 16, 7, 12, torch.Generator().manual_seed(5), min_length=2)
    b = D.sequence_task("sort", 16, 7, 12, torch.Generator().manual_seed(5), min_length=2)
    c = D.sequence_task("sort", 16, 7, 12, torch.Generator().manual_seed(6), min_length=2)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize(
    "args, message",
    [
        (("shuffle", 4, 5, 10), "kind must be one of"),
        (("copy", 4, 0, 10), "length >= 1"),
        (("copy", 4, 5, 3), "vocab=3"),
    ],
)
def test_a_bad_sequence_task_is_refused(args, message):
    with pytest.raises(ValueError, match=message):
        D.sequence_task(*args)


# ========================================================== data: shapes
def test_shapes_dataset_returns_normalised_images_and_every_label():
    images, labels = D.shapes_dataset(200, size=24, generator=torch.Generator().manual_seed(0))
    assert images.shape == (200, 3, 24, 24) and images.dtype == torch.float32
    assert labels.shape == (200,) and labels.dtype == torch.long
    assert images.min() >= -1 and images.max() <= 1
    assert set(labels.tolist()) == set(range(len(D.SHAPES)))
    bright = (images.mean(1) > 0).float().mean((1, 2))  # shape pixels are bright, background dark
    assert ((bright > 0) & (bright < 0.5)).all(), "every image should show one shape, smaller than the frame"


def test_each_shape_fills_its_bounding_box_as_its_geometry_says():
    images, labels = D.shapes_dataset(400, size=48, generator=torch.Generator().manual_seed(1), noise=0.0)
    bright = images.mean(1) > 0
    rows, cols = bright.any(2), bright.any(1)
    fill = bright.sum((1, 2)) / (rows.sum(1) * cols.sum(1))  # area / bounding-box area
    by_class = {name: fill[labels == k] for k, name in enumerate(D.SHAPES)}
    assert (by_class["square"] == 1).all()
    assert ((by_class["circle"] > 0.70) & (by_class["circle"] < 0.86)).all()  # pi / 4 = 0.785
    assert (by_class["triangle"] < 0.65).all() and (by_class["cross"] < 0.65).all()


def test_shapes_are_deterministic_given_a_generator():
    a = D.shapes_dataset(8, generator=torch.Generator().manual_seed(3))
    b = D.shapes_dataset(8, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


# ========================================================== data: text
def test_char_corpus_round_trips_and_refuses_unknown_characters():
    corpus = D.char_corpus("to be or not to be")
    assert corpus.chars == sorted(set("to be or not to be")) and corpus.vocab_size == 7
    assert corpus.decode(corpus.ids) == "to be or not to be"
    with pytest.raises(ValueError, match="'z'"):
        corpus.encode("zebra")


def test_text_batch_targets_are_the_inputs_shifted_by_one_token():
    ids = D.char_corpus("the quick brown fox jumps over the lazy dog " * 3).ids
    x, y = next(D.text_batches(ids, batch_size=6, block_size=10, generator=torch.Generator().manual_seed(0)))
    assert x.shape == y.shape == (6, 10)
    assert torch.equal(x[:, 1:], y[:, :-1])
    windows = ids.unfold(0, 11, 1)  # every window of block_size + 1 tokens
    full = torch.cat([x, y[:, -1:]], dim=1)
    assert all((windows == row).all(1).any() for row in full), "each row must be a contiguous piece of the text"


def test_text_batches_are_deterministic_given_a_generator():
    ids = torch.arange(100)
    a = list(itertools.islice(D.text_batches(ids, 4, 8, torch.Generator().manual_seed(2)), 3))
    b = list(itertools.islice(D.text_batches(ids, 4, 8, torch.Generator().manual_seed(2)), 3))
    assert all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1]) for p, q in zip(a, b))


def test_progress_is_a_bar_interactively_and_silent_in_static_builds(monkeypatch):
    from course_lib.training import progress

    monkeypatch.delenv("COURSE_STATIC_OUTPUT", raising=False)
    assert not progress(range(3)).disable
    monkeypatch.setenv("COURSE_STATIC_OUTPUT", "1")
    assert progress(range(3)).disable


# ---- gradient clipping as a function --------------------------------------------------------------

def _grads(seed, scale):
    g = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(4, 3, generator=g)), torch.nn.Parameter(torch.randn(5, generator=g)),
              torch.nn.Parameter(torch.randn(2))]
    for p in params[:2]:
        p.grad = torch.randn(p.shape, generator=g) * scale
    return params  # the last one has no gradient


@pytest.mark.parametrize("scale, max_norm", [(10.0, 1.0), (0.01, 1.0), (3.0, 0.5), (1.0, None)])
def test_clip_grad_norm_matches_torch_and_returns_the_norm_before(scale, max_norm):
    from course_lib.training import clip_grad_norm

    ours, theirs = _grads(0, scale), _grads(0, scale)
    before = torch.sqrt(sum((p.grad ** 2).sum() for p in ours[:2]))
    n_ours = clip_grad_norm(ours, max_norm)
    n_theirs = torch.nn.utils.clip_grad_norm_(theirs, max_norm if max_norm is not None else float("inf"))
    torch.testing.assert_close(n_ours, before)
    torch.testing.assert_close(n_ours, n_theirs)
    for a, b in zip(ours[:2], theirs[:2]):
        torch.testing.assert_close(a.grad, b.grad)
    after = torch.sqrt(sum((p.grad ** 2).sum() for p in ours[:2]))
    if max_norm is not None and before > max_norm:
        assert after == pytest.approx(max_norm, rel=1e-5)
        direction = [p.grad / after for p in ours[:2]]  # same direction as before
        ref = _grads(0, scale)
        for d, p in zip(direction, ref[:2]):
            torch.testing.assert_close(d, p.grad / before, rtol=1e-5, atol=1e-7)
    else:
        assert after == pytest.approx(before.item(), rel=1e-6)
    assert ours[2].grad is None


def test_clip_grad_norm_refuses_a_bad_limit_and_handles_no_gradients():
    from course_lib.training import clip_grad_norm

    with pytest.raises(ValueError, match="max_norm must be positive or None, got 0"):
        clip_grad_norm(_grads(0, 1.0), 0)
    assert clip_grad_norm([torch.nn.Parameter(torch.ones(2))], 1.0).item() == 0.0
