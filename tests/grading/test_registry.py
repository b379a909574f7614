"""The grader's registry: exercises as data, in step with the notebooks, and the grader apart from course_lib."""

from __future__ import annotations

import subprocess
import sys

import pytest

import grader
from grader.registry import assignments as registry
from nbtools import HIDDEN, ROOT, assignments, read_cells


def test_every_assignment_has_one_registry_entry_and_no_more():
    assert sorted(registry()) == assignments()


@pytest.mark.parametrize("assignment", assignments())
def test_the_registry_lists_the_notebooks_exercises_with_their_points(assignment):
    entry = registry()[assignment]
    cells = read_cells(ROOT / "solutions" / assignment / entry.notebook)
    solutions = [c.grade_id for c in cells if c.solution]
    assert [e.name for e in entry.exercises] == solutions
    points = {c.grade_id: c.points for c in cells if c.grade and not c.solution}
    for ex in entry.exercises:
        assert points.get(f"test_{ex.name}") == ex.points, (
            f"{assignment}/{ex.name}: the registry gives {ex.points} points, "
            f"the test cell {points.get(f'test_{ex.name}')}")
        assert ex.steps, f"{assignment}/{ex.name} has no steps"


@pytest.mark.parametrize("assignment", assignments())
def test_every_hidden_test_is_the_one_line_naming_its_exercise(assignment):
    entry = registry()[assignment]
    for cell in read_cells(ROOT / "solutions" / assignment / entry.notebook):
        if not (cell.grade and not cell.solution):
            continue
        name = cell.grade_id.removeprefix("test_")
        blocks = [m.group(1).strip() for m in HIDDEN.finditer(cell.source)]
        assert blocks == [f'from grader import check; check("{assignment}", "{name}", {name})'], (
            f"{assignment}/{cell.grade_id}: the hidden block must be one line naming the exercise, not {blocks}")


@pytest.mark.parametrize("assignment", assignments())
def test_an_assignment_found_by_its_slug_alone_is_the_registrys(assignment):
    """registry.assignment imports the one module named after the slug; it finds what the whole registry has."""
    assert grader.registry.assignment(assignment) is registry()[assignment]
    assert grader.registry.exercise(assignment, registry()[assignment].exercises[0].name) is \
        registry()[assignment].exercises[0]


def test_an_unknown_assignment_or_exercise_is_named_with_what_exists():
    with pytest.raises(KeyError, match="no assignment '02-atention'.*02-attention"):
        grader.check("02-atention", "attention_scores", lambda q, k: q)
    with pytest.raises(KeyError, match="no exercise 'attention_score'.*attention_scores"):
        grader.check("02-attention", "attention_score", lambda q, k: q)
    for slug in ("attention", "99-attention", "02-attention-", "02-", ""):  # a module's name, not its slug
        with pytest.raises(KeyError, match=f"no assignment {slug!r}; the assignments are .*02-attention"):
            grader.registry.assignment(slug)


def test_something_not_callable_fails_the_exercise_by_name():
    with pytest.raises(grader.ExerciseFailure, match="causal_mask is not a function"):
        grader.check("02-attention", "causal_mask", 3)


def test_an_adapted_exercise_still_forbids_the_reference():
    from course_lib.dino import ema_update

    def lazy(teacher, student, momentum):
        ema_update(teacher, student, momentum)

    with pytest.raises(grader.ForbiddenCall, match="course_lib.dino.ema_update"):
        grader.check("10-dinov2", "ema_update", lazy)


def test_calling_the_grader_from_the_learners_function_is_calling_the_reference():
    def leaning(q, k):
        from grader.assignments import attention

        return attention.SCORE_MISTAKES[0].variant(q, k)

    with pytest.raises(grader.ForbiddenCall, match="reference grader.assignments.attention"):
        grader.check("02-attention", "attention_scores", leaning)


def test_a_contract_step_runs_the_learners_code_under_the_guards():
    from course_lib.efficient import tiled_attention
    from grader.assignments.efficient_attention import check_never_materialises
    from grader.assignments.encoder_decoder import check_float_results

    def borrowed(q, k, v, block_size):
        return tiled_attention(q, k, v, block_size)

    with pytest.raises(grader.ForbiddenCall, match="course_lib.efficient.tiled_attention"):
        check_never_materialises(borrowed, "online_softmax_attention", None)

    def patching(step, dim, warmup):
        import torch

        torch.allclose = lambda *a, **k: True
        return 0.0

    import torch

    original = torch.allclose
    try:
        with pytest.raises(grader.ForbiddenCall, match="replaced torch.allclose"):
            check_float_results(patching, "transformer_lr", None)
    finally:
        torch.allclose = original


def in_a_fresh_python(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]


def test_course_lib_never_imports_the_grader_and_the_grader_loads_nbgrader_only_for_autograde():
    code = (
        "import importlib, pkgutil, sys, course_lib\n"
        "for m in pkgutil.walk_packages(course_lib.__path__, 'course_lib.'):\n"
        "    if '.interop' not in m.name: importlib.import_module(m.name)\n"
        "assert not any(n == 'grader' or n.startswith('grader.') for n in sys.modules), 'course_lib imports grader'\n"
        "import grader, grader.registry, grader.sandbox\n"
        "grader.registry.assignments()\n"
        "assert 'nbgrader' not in sys.modules, 'the grader imports nbgrader outside grader.autograde'\n"
    )
    in_a_fresh_python(code)


def test_the_kernels_side_of_grading_imports_without_the_reference_or_the_assignments():
    """Inside the fence neither course_lib nor grader.assignments exists: the runner must not need them."""
    code = (
        "import sys\n"
        "class Closed:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'course_lib' or name.startswith(('course_lib.', 'grader.assignments')):\n"
        "            raise ImportError(f'{name} is closed in the grading kernel')\n"
        "sys.meta_path.insert(0, Closed())\n"
        "from grader.sandbox import KERNEL_MODULES\n"
        "import importlib\n"
        "for name in KERNEL_MODULES: importlib.import_module(name)\n"
        "import grader\n"
        "assert not any(n.startswith(('course_lib', 'grader.assignments')) for n in sys.modules)\n"
    )
    in_a_fresh_python(code)


def test_the_kernels_side_loads_exactly_the_kernel_modules_and_never_the_judge():
    """grader.sandbox.KERNEL_MODULES is what the runner needs (loaded before the fence closes), no more, no less;
    the wire format is the only module the judge and the kernel share."""
    code = (
        "import sys\n"
        "import grader.runner\n"
        "from grader.sandbox import KERNEL_MODULES\n"
        "loaded = {n for n in sys.modules if n.startswith('grader.')} - {'grader.sandbox'}\n"
        "assert 'grader.judge' not in loaded, 'the kernel side imports the judge'\n"
        "assert loaded == set(KERNEL_MODULES), (sorted(loaded - set(KERNEL_MODULES)), "
        "sorted(set(KERNEL_MODULES) - loaded))\n"
    )
    in_a_fresh_python(code)
