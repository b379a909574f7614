"""The chapter notebooks print the same outputs on other CPU kernels, and take their seed from one setting.

The stored outputs are written on torch's portable ``default`` kernels
(:func:`tools.notebooks.writing_kernels`), and the suite's nbval run executes
every chapter notebook once, strictly, on the machine's own kernels
(``chapters/conftest.py``, :func:`tools.portability.suite_kernels`), so a
stored output that only one set of kernels prints fails in ``make test``
rather than on a maintainer's CI. ``make portability`` runs the whole matrix
(every kernel set the machine has, one and two threads, CUDA); ``make seeds``
the claims over seeds.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import nbformat
import pytest

from nbtools import ROOT
from tools import notebooks, portability

CHAPTER_NOTEBOOKS = portability.chapter_notebooks()


def _capability_notebook(path, stored: str | None) -> None:
    """A notebook whose one cell prints the kernel's CPU capability; its stored output ``stored`` (or none)."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("import torch\nprint(torch.backends.cpu.get_cpu_capability())")
    if stored is not None:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{stored}\n")]
        cell.execution_count = 1
    nb.cells = [cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _nbval_with_the_chapters_conftest(folder, env: dict, stored: str) -> subprocess.CompletedProcess:
    """nbval, strict, on the capability notebook with ``stored`` as its output and ``chapters/conftest.py``
    as the chapter notebooks have it."""
    _capability_notebook(folder / "capability.ipynb", stored)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest", "--nbval",
         "--rootdir", str(folder), str(folder / "capability.ipynb")],
        cwd=folder, capture_output=True, text=True,
        env={**env, "PYTHONPATH": os.pathsep.join([str(ROOT / "chapters"), str(ROOT)])})


@pytest.mark.slow
def test_a_chapter_notebooks_kernel_runs_on_the_machines_own_kernels_unless_the_environment_names_others(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    own = portability.native_capability().upper()
    suite = _nbval_with_the_chapters_conftest(tmp_path, env, own)
    assert suite.returncode == 0 and "1 passed" in suite.stdout, suite.stdout[-3000:] + suite.stderr[-2000:]
    named = _nbval_with_the_chapters_conftest(tmp_path, {**env, "ATEN_CPU_CAPABILITY": "default"}, own)
    assert own == "DEFAULT" or (named.returncode == 1 and "DEFAULT" in named.stdout), named.stdout[-3000:]


@pytest.mark.slow
def test_a_refresh_writes_the_outputs_on_the_portable_kernels(tmp_path, monkeypatch):
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    path = tmp_path / "capability.ipynb"
    _capability_notebook(path, None)
    notebooks.refresh(path)
    (cell,) = nbformat.read(path, as_version=4).cells
    assert [o.get("text") for o in cell.outputs] == ["DEFAULT\n"], cell.outputs
    assert "ATEN_CPU_CAPABILITY" not in os.environ


def test_writing_kernels_sets_the_capability_only_while_a_kernel_starts(monkeypatch):
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    with notebooks.writing_kernels() as capability:
        assert capability == os.environ["ATEN_CPU_CAPABILITY"] == notebooks.WRITING_CAPABILITY == "default"
    assert "ATEN_CPU_CAPABILITY" not in os.environ
    named, capability = portability.suite_kernels()
    assert named is None and capability == portability.native_capability()
    assert "ATEN_CPU_CAPABILITY" not in os.environ
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    with notebooks.writing_kernels() as capability:
        assert capability == "avx2"
    named, capability = portability.suite_kernels()
    assert named == capability == "avx2"
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2"
    child = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
                             env={**os.environ, "ATEN_CPU_CAPABILITY": "default"}, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "up\n"  # started: its environment is its own
        assert portability.started_with(child.pid) == "default"
    finally:
        child.kill()
        child.communicate()


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
    assert portability.parse_seeds("0-2,7,fresh:2", draw=lambda n: [99, 5][:n]) == [0, 1, 2, 7, 99, 5]
    for bad in ("4-0", "a", "1-", "fresh:0", "fresh", "", "0,,1", str(2**31)):
        with pytest.raises(SystemExit, match=r"--seeds .*give fresh:N .* a range like 0-4, a list like 0,3,7"):
            portability.parse_seeds(bad)


def test_make_seeds_draws_fresh_seeds_on_every_run():
    first, second = portability.parse_seeds("fresh:5"), portability.parse_seeds("fresh:5")
    assert len(first) == len(set(first)) == 5 and first != second
    assert all(0 <= s < 2**31 for s in first + second)
    makefile = (ROOT / "Makefile").read_text()
    assert "SEEDS ?= fresh:5" in makefile and "--seeds $(SEEDS)" in makefile


def test_a_seeds_run_says_which_seeds_it_drew(tmp_path, capsys):
    out = tmp_path / "seeds.json"
    assert portability.seeds_run([], [1234567, 89], 1, out, "fresh:2") == 0
    assert capsys.readouterr().out.startswith("seeds: 1234567, 89  (--seeds fresh:2)")
    written = json.loads(out.read_text())
    assert written["seeds"] == [1234567, 89] and written["asked"] == "fresh:2"


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
    assert a["values"] == [[0, 1.0], [1, 0.9]] and (a["lowest"], a["highest"]) == (0.9, 1.0)
    assert (b["lowest"], b["highest"]) == (0.1, 2.0)
    assert c["relative"] is None
