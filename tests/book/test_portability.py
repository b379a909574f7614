"""The chapter notebooks print the same outputs on other CPU kernels, and take their seed from one setting.

The suite's own nbval run (pyproject.toml) uses this machine's kernels with one
thread. This file runs every chapter notebook again, strictly, under torch's
portable ``default`` kernels with two threads, so a stored output that only
one machine's rounding prints fails here rather than on a maintainer's CI.
``make portability`` runs the whole matrix; ``make seeds`` the claims over seeds.
"""

from __future__ import annotations

import ast
import re

import nbformat
import pytest

from nbtools import ROOT
from tools import portability

CHAPTER_NOTEBOOKS = portability.chapter_notebooks()


def _chapters() -> dict[str, list]:
    """The chapter notebooks by chapter: one nbval run each, so the chapters share out the cores."""
    out: dict[str, list] = {}
    for path in CHAPTER_NOTEBOOKS:
        out.setdefault(path.parent.name, []).append(path)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("chapter", sorted(_chapters()))
def test_every_chapter_notebook_prints_its_stored_outputs_under_the_portable_kernels_with_two_threads(chapter):
    code, report = portability.run_nbval(_chapters()[chapter], portability.variant_env("default", 2))
    cells = portability.failed_cells(report)
    assert code == 0, ("stored outputs that ATEN_CPU_CAPABILITY=default with 2 threads does not print "
                       "(make them portable: tools/portability.py):\n  " + "\n  ".join(cells) + "\n" + report[-5000:])
    assert re.search(r"(\d+) passed", report)


def test_the_portable_run_covers_every_chapter_notebook_once():
    runs = [p for paths in _chapters().values() for p in paths]
    assert sorted(runs) == sorted(CHAPTER_NOTEBOOKS) and len(set(runs)) == len(runs) >= 30


# ---- one seed setting ----------------------------------------------------------------------------

def _code_cells(path):
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def seeding_problems(cells: list[str]) -> list[str]:
    """Where a notebook seeds randomness with a number of its own instead of COURSE_SEED."""
    found = []
    if not cells or "start()" not in cells[0]:
        found.append("the first code cell does not call course_lib.experiment.start()")
    for i, src in enumerate(cells):
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("manual_seed", "seed") and node.args and isinstance(node.args[0], ast.Constant):
                found.append(f"code cell {i}: {ast.unparse(node)} (use generator(k) or reseed(k))")
    return found


@pytest.mark.parametrize("path", CHAPTER_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_notebook_takes_its_seed_from_one_setting(path):
    found = seeding_problems(_code_cells(path))
    assert not found, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(found)


def test_the_seeding_check_catches_a_fixed_seed():
    assert seeding_problems(["import torch\ntorch.manual_seed(0)"])
    assert seeding_problems(["SEED = start()", "g = torch.Generator().manual_seed(3)"])
    assert seeding_problems(["SEED = start()", "np.random.seed(1)"])
    assert not seeding_problems(["SEED = start()",
                                 "g = generator(3)\nreseed(4)\nh = torch.Generator().manual_seed(SEED)"])


# ---- the runner's arguments and its summary ------------------------------------------------------

def test_variants_and_seeds_are_parsed_and_bad_ones_named():
    assert portability.parse_variants("default:1,avx2:2") == [("default", 1), ("avx2", 2)]
    assert portability.parse_variants("native:2")[0][0] == portability.native_capability()
    for bad, message in (("sse:1", "'sse' is not a CPU capability"), ("default:x", "'x'"), ("default:0", ">= 1")):
        with pytest.raises(SystemExit, match=message):
            portability.parse_variants(bad)
    assert portability.parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert portability.parse_seeds("0,3,7") == [0, 3, 7]
    for bad in ("4-0", "a", "1-"):
        with pytest.raises(SystemExit, match="--seeds"):
            portability.parse_seeds(bad)


def test_the_default_matrix_has_the_portable_kernels_and_two_thread_counts():
    variants = portability.default_variants()
    assert ("default", 1) in variants and {n for _, n in variants} == {1, 2}
    assert (portability.native_capability(), 1) in variants


def test_the_summary_gives_each_claims_worst_seed_and_its_failures():
    def rec(statement, seed, value, holds, relative):
        return {"notebook": "nb", "statement": statement, "op": ">", "seed": seed, "value": value, "holds": holds,
                "margin": relative, "relative": relative}

    records = [rec("a", 0, 1.0, True, 0.5), rec("a", 1, 0.9, True, 0.2), rec("b", 0, 0.1, False, -0.3),
               rec("b", 1, 2.0, True, 0.9), {**rec("c", 0, 1, True, None), "op": "=="}]
    table = portability.summarise(records)
    assert [s["statement"] for s in table] == ["b", "a", "c"]
    b, a, c = table
    assert b["failed"] == [0] and b["held"] == [1] and b["relative"] == -0.3
    assert a["relative"] == 0.2 and a["worst_value"] == 0.9 and a["failed"] == []
    assert c["relative"] is None
