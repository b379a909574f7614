"""The judge out of the learner's process gives the verdicts the in-process checker gives.

Under ``make grade`` the hidden tests run in the nbgrader process and call the
learner's function in its kernel through :class:`grader.judge.RemoteLearner`.
Here a real Jupyter kernel holds the learner's code (the solutions, then every
catalogue entry in turn) and the registry judges it from outside: the
reference keeps full marks, every wrong implementation gets the diagnosis its
catalogue entry states, every right one written differently keeps full marks.
"""

from __future__ import annotations

import runpy
import shutil
import tempfile

import pytest
import torch

from grader.failures import ExerciseFailure
from grader.judge import FileChannel, RemoteLearner
from grader.registry import assignments as registry
from grader.registry import check
from grader.wire import locate, resolve
from nbtools import ROOT, assignments, read_cells

pytestmark = pytest.mark.slow


class Kernel:
    """A Jupyter kernel holding one notebook's code, and the judge's channel to it."""

    def __init__(self):
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(kernel_name="python3")
        self.folder = tempfile.mkdtemp(prefix="judge-test-")

    def run(self, code: str) -> None:
        reply = self.kc.execute_interactive(code, silent=True, timeout=300)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"{reply['content'].get('ename')}: {reply['content'].get('evalue')}")

    def judge(self, slug: str, name: str) -> str | None:
        """None for full marks, else the diagnosis the learner would read."""
        learner = None
        try:
            learner = RemoteLearner(FileChannel(self.folder, self.run), name)
            check(slug, name, learner)
            return None
        except ExerciseFailure as exc:
            return str(exc)
        finally:
            if learner is not None:
                learner.release()

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def _load(slug: str) -> tuple[Kernel, dict[str, str]]:
    cells = read_cells(ROOT / "solutions" / slug / registry()[slug].notebook)
    kernel = Kernel()
    solutions = {}
    for cell in cells:
        if cell.kind == "code" and not (cell.grade and not cell.solution) and not (cell.is_check or cell.is_long):
            kernel.run(cell.source)
            if cell.solution and cell.grade_id:
                solutions[cell.grade_id] = cell.source
    return kernel, solutions


@pytest.mark.parametrize("slug", assignments())
def test_every_catalogue_entry_gets_the_same_verdict_from_outside_the_kernel(slug):
    kernel, solutions = _load(slug)
    catalogue = runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{slug}.py"))
    wrong: list[str] = []
    try:
        for ex in registry()[slug].exercises:
            if not ex.comparisons:
                continue  # a recipe trains for seconds: graded for real through the kernel in test_capstones.py
            verdict = kernel.judge(slug, ex.name)
            assert verdict is None, f"the reference {ex.name} loses its marks when judged from outside: {verdict}"
        for entry in catalogue["WRONG"] + catalogue.get("RIGHT", []):
            if not registry()[slug].exercise(entry["exercise"]).comparisons:
                continue  # a recipe trains for seconds: graded for real through the kernel in test_capstones.py
            kernel.run(entry["source"])
            verdict = kernel.judge(slug, entry["exercise"])
            kernel.run(solutions[entry["exercise"]])  # the next entries see the reference's helpers again
            if "diagnosis" in entry and (verdict is None or entry["diagnosis"] not in verdict):
                wrong.append(f"{entry['exercise']} / {entry['mistake']}: expected {entry['diagnosis']!r}, "
                             f"got {verdict!r}")
            if "diagnosis" not in entry and verdict is not None:
                wrong.append(f"{entry['exercise']} / {entry['how']}: a right implementation is rejected: {verdict}")
    finally:
        kernel.close()
    assert not wrong, (f"{len(wrong)} verdict(s) differ from the catalogue when judged from outside:\n"
                       + "\n".join(wrong))


def test_every_forbidden_routine_and_allowed_block_can_be_named_for_the_kernel():
    for slug, assignment in registry().items():
        for ex in assignment.exercises:
            for comp in ex.comparisons:
                for obj in tuple(comp.forbidden) + tuple(comp.allowed):
                    assert resolve(locate(obj)) is obj, (slug, ex.name, obj)


def test_what_the_kernel_returns_is_read_as_data_and_named_when_it_is_not():
    kernel = Kernel()
    try:
        kernel.run("import numpy, torch\n"
                   "def as_numpy(x):\n    return x.numpy()\n"
                   "def same(x):\n    return x\n"
                   "def scaled(x):\n    return x * 2\n"
                   "def in_place(x):\n    x.mul_(2)\n    return x.clone()\n"
                   "def numpy_ints(x):\n    return (numpy.int64(1), [numpy.float32(0.5)])\n")
        channel = FileChannel(kernel.folder, kernel.run)
        x = torch.arange(4.0)
        out = RemoteLearner(channel, "as_numpy")(x)
        assert type(out).__name__ == "ndarray" and not isinstance(out, torch.Tensor)
        assert RemoteLearner(channel, "same")(x) is x  # the identity of an input survives the trip
        assert torch.equal(RemoteLearner(channel, "scaled")(x), x * 2)
        y = torch.arange(4.0)
        RemoteLearner(channel, "in_place")(y)
        assert torch.equal(y, torch.arange(4.0) * 2)  # an in-place change shows on the judge's copy
        assert RemoteLearner(channel, "numpy_ints")(x) == (1, [0.5])  # numpy scalars compare as the numbers
        with pytest.raises(ExerciseFailure, match="not defined"):
            RemoteLearner(channel, "missing")
    finally:
        kernel.close()


# --- the judge's budgets: a reply file the kernel wrote, whatever it holds -----------------------------------------

class _Sneaky(torch.Tensor):
    """A tensor subclass a learner defines: the judge reads data, never a learner's class."""


def _reply(tmp_path, value) -> dict:
    from grader import wire

    path = tmp_path / "reply.pt"
    torch.save({"out": value}, path)
    return wire.read_reply(str(path))


def test_a_small_reply_that_is_huge_as_a_tree_is_refused_at_once(tmp_path):
    """The issue's reply: 1.4 KB on disk, nested lists 22 deep that share one object; read as a tree it is four
    million values (each level doubles it). The judge counts as it reads and stops, in a fraction of a second."""
    import time

    nest = [torch.zeros(1)]
    for _ in range(22):
        nest = [nest, nest]
    started = time.perf_counter()
    reply = _reply(tmp_path, nest)
    assert (tmp_path / "reply.pt").stat().st_size < 4096
    assert "failure" in reply and "over 200,000 values" in reply["failure"], reply
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("value, why", [
    (torch.empty(3, device="meta"), "meta"),
    (torch.zeros(4, 4).to_sparse(), "sparse"),
    (torch.zeros(1).expand(1 << 27), "numbers"),
    (torch.zeros(2).as_subclass(_Sneaky), "data"),
])
def test_a_tensor_that_is_not_plain_data_in_memory_is_not_read(tmp_path, value, why):
    reply = _reply(tmp_path, value)
    assert "failure" in reply and why in reply["failure"], reply


def test_a_reply_nested_past_the_depth_budget_is_not_read(tmp_path):
    deep = torch.zeros(1)
    for _ in range(60):
        deep = [deep]
    assert "levels deep" in _reply(tmp_path, deep)["failure"]


def test_a_learners_text_is_cut_to_what_a_diagnosis_needs():
    """An exception's message (which could carry a hidden case) and a type's name are quoted at most 200 and 60
    characters long, with terminal escapes shown as text."""
    from grader.failures import learner_text

    quoted = learner_text("x" * 5000 + "\x1b[2J")
    assert quoted.startswith("x" * 200) and "more characters not shown" in quoted and len(quoted) < 260
    assert "\x1b" not in learner_text("\x1b[31mred") and "\\x1b" in learner_text("\x1b[31mred")
