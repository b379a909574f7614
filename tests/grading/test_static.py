"""The judge reads the submission's source before any of it runs (grader.static).

Honest code, written any way, has no finding: the solutions, the untouched
releases and every right implementation of the catalogues. Code that reaches
into Python's or torch's machinery, or names a forbidden routine, has one, in
the exercises it touches and only those.
"""

from __future__ import annotations

import runpy

import nbformat
import pytest

from grader.guards import FUSED_ATTENTION, SOFTMAX
from grader.notebook import cells_of, learner_code
from grader.registry import assignments as registry
from grader.static import Forbidden, GradedFunction, assignment_findings, findings
from nbtools import ROOT, assignments


def _cells(nb, replace: dict[str, str] | None = None) -> list[tuple[str | None, str | None]]:
    return learner_code(cells_of(nb), replace)


@pytest.mark.parametrize("slug", assignments())
def test_honest_code_has_no_finding(slug):
    assignment = registry()[slug]
    solution = nbformat.read(ROOT / "solutions" / slug / assignment.notebook, as_version=4)
    release = nbformat.read(ROOT / "exercises" / slug / assignment.notebook, as_version=4)
    for nb in (solution, release):
        assert not any(assignment_findings(_cells(nb), assignment).values())
    for entry in runpy.run_path(str(ROOT / "tests" / "grading" / "catalogues" / f"{slug}.py")).get("RIGHT", []):
        found = assignment_findings(_cells(solution, {entry["exercise"]: entry["source"]}), assignment)
        assert not found[entry["exercise"]], (entry["how"], [str(f) for f in found[entry["exercise"]]])


HEAD = "def f(q, k, v):\n"
#: (what, the function's body): each reaches around the language or names a forbidden routine
ATTACKS = [
    ("imports sys", "    import sys\n    sys.setprofile(None)\n    return q\n"),
    ("imports from sys", "    from sys import setprofile\n    setprofile(None)\n    return q\n"),
    ("imports gc", "    import gc\n    return q\n"),
    ("imports the reference",
     "    from course_lib.attention import attention_scores\n    return attention_scores(q, k)\n"),
    ("imports the grader", "    import grader.guards as g\n    g.first_change = lambda s: None\n    return q\n"),
    ("imports builtins", "    import builtins\n    return q\n"),
    ("imports operator", "    import operator\n    return operator.attrgetter('x')(q)\n"),
    ("uses torch._C", "    with torch._C.DisableTorchFunction():\n        return q\n"),
    ("uses torch.overrides", "    m = torch.overrides.TorchFunctionMode\n    return q\n"),
    ("uses torch.ops", "    return torch.ops.aten.mul(q, 2)\n"),
    ("uses torch.jit", "    return torch.jit.wait(torch.jit.fork(torch.mul, q, 2))\n"),
    ("uses torch.library", "    lib = torch.library.Library('aten', 'IMPL')\n    return q\n"),
    ("assigns to torch", "    torch.allclose = lambda *a, **k: True\n    return q\n"),
    ("assigns through an alias", "    T = torch.Tensor\n    T.softmax = lambda self, d: self\n    return q\n"),
    ("deletes from torch", "    del torch.nn.functional.softmax\n    return q\n"),
    ("setattr", "    setattr(torch, 'allclose', None)\n    return q\n"),
    ("getattr with a computed name", "    return getattr(torch, 'soft' + 'max')(q, -1)\n"),
    ("getattr of a private name", "    return getattr(torch, '_softmax')(q, -1, False)\n"),
    ("getattr passed around", "    g = getattr\n    return g(torch, 'mul')(q, 2)\n"),
    ("exec", "    exec('import sys')\n    return q\n"),
    ("eval", "    return eval('q')\n"),
    ("globals", "    globals()['torch'] = None\n    return q\n"),
    ("vars", "    vars(torch)['allclose'] = None\n    return q\n"),
    ("__import__", "    return __import__('sys')\n"),
    ("__builtins__", "    return __builtins__\n"),
    ("a dunder attribute", "    return f.__globals__\n"),
    ("a dunder via type", "    return type(q).__mro__\n"),
    ("a dunder in a string", "    return '{0.__class__}'.format(q)\n"),
    ("a template built at run time", "    t = '{0.' + '_' * 2 + 'class' + '_' * 2 + '}'\n    return t.format(q)\n"),
    ("a private attribute", "    return q._base\n"),
    ("open", "    open('x', 'w').write('y')\n    return q\n"),
    ("fused attention", "    return torch.nn.functional.scaled_dot_product_attention(q, k, v)\n"),
    ("fused attention by getattr",
     "    return getattr(torch.nn.functional, 'scaled_dot_product_attention')(q, k, v)\n"),
    ("softmax as a method", "    return q.softmax(-1)\n"),
    ("softmax imported by name", "    from torch import softmax\n    return softmax(q, -1)\n"),
]


def _exercise():
    return [GradedFunction("f", 2, Forbidden.of(SOFTMAX + FUSED_ATTENTION)), GradedFunction("g", 4, Forbidden.of(()))]


@pytest.mark.parametrize("what, body", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_code_that_reaches_around_the_language_is_found_in_the_exercise_it_touches(what, body):
    cells = ["import torch", HEAD + body, None, "def g(x):\n    return x * 2\n", None]
    found = findings(cells, _exercise())
    assert found["f"], what
    assert not found["g"], f"{what}: a function that does not touch f keeps its marks: {found['g']}"


def test_a_helper_reached_by_name_carries_its_findings_to_every_exercise_that_calls_it():
    cells = ["import torch",
             "def helper(x):\n    import sys\n    return x\n",
             "def f(q, k, v):\n    return helper(q)\n", None,
             "def g(x):\n    return [helper][0](x)\n", None,
             "def h(x):\n    return x\n", None]
    found = findings(cells, [GradedFunction("f", 3), GradedFunction("g", 5), GradedFunction("h", 7)])
    assert found["f"] and found["g"] and not found["h"]


def test_top_level_patching_costs_every_later_exercise_and_no_earlier_one():
    cells = ["import torch\nimport sys",
             "def f(x):\n    return x\n", None,
             "sys.setprofile(None)\ntorch.allclose = lambda *a, **k: True",
             "def g(x):\n    return x\n", None]
    found = findings(cells, [GradedFunction("f", 2), GradedFunction("g", 5)])
    assert not found["f"]
    assert [f.what for f in found["g"]][:2] == ["uses sys", "assigns to an attribute of the module torch (allclose)"]


def test_an_import_at_the_top_level_touches_nothing_by_itself():
    cells = ["import os\nimport torch", "def f(x):\n    return x.unfold(0, 2, 1)\n", None]
    assert not findings(cells, [GradedFunction("f", 2, Forbidden.of((torch_unfold(),)))])["f"]


def torch_unfold():
    import torch.nn.functional as F

    return F.unfold
