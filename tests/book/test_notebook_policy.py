"""Stored outputs follow one policy, and the book's execution cache knows what a notebook runs.

Policy (tools/notebooks.py): chapter notebooks are committed with the outputs of
one top-to-bottom run against today's code, stamped with a digest of that code;
assignment notebooks are committed without outputs. `make check` runs this file.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_notebook, new_output

from nbtools import ROOT
from tools import course_book, notebooks

CHAPTER_NOTEBOOKS = notebooks.chapter_notebooks()


@pytest.mark.parametrize("path", CHAPTER_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_chapter_notebooks_store_fresh_outputs_of_one_run(path):
    found = notebooks.problems(path)
    assert not found, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(found) + (
        "\nRe-execute it with `make notebooks` (python -m tools.notebooks refresh).")


@pytest.mark.parametrize("path", notebooks.assignment_notebooks(),
                         ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_assignment_notebooks_are_committed_without_outputs(path):
    assert not notebooks.assignment_problems(path)


# ---- the checks catch what they claim to catch ----------------------------------------------

def stamped(nb):
    nb.metadata[notebooks.STAMP] = {"outputs_digest": notebooks.outputs_digest(nb)}
    return nb


def write(tmp_path, nb) -> Path:
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    return path


def good_notebook():
    cells = [new_code_cell("import math\nprint(math.pi)", execution_count=1,
                           outputs=[new_output("stream", name="stdout", text="3.14\n")]),
             new_code_cell("1 + 1", execution_count=2,
                           outputs=[new_output("execute_result", data={"text/plain": "2"}, execution_count=2)])]
    return stamped(new_notebook(cells=cells))


def test_a_well_formed_notebook_passes(tmp_path):
    assert notebooks.problems(write(tmp_path, good_notebook())) == []


def test_edited_code_after_the_run_is_stale(tmp_path):
    nb = good_notebook()
    nb.cells[1].source = "1 + 2"
    assert any("stale" in p for p in notebooks.problems(write(tmp_path, nb)))


def test_out_of_order_execution_is_flagged(tmp_path):
    nb = good_notebook()
    nb.cells[0].execution_count, nb.cells[1].execution_count = 2, 1
    assert any("top-to-bottom" in p for p in notebooks.problems(write(tmp_path, nb)))


def test_an_unexecuted_cell_is_flagged(tmp_path):
    nb = good_notebook()
    nb.cells.append(new_code_cell("x = 3"))
    assert any("top-to-bottom" in p for p in notebooks.problems(write(tmp_path, stamped(nb))))


def test_error_outputs_and_live_progress_bars_are_flagged(tmp_path):
    nb = good_notebook()
    nb.cells[0].outputs.append(new_output("error", ename="ValueError", evalue="bad", traceback=[]))
    bar = "\r 50%|#####     | 5/10 [00:01<00:01, 4.2it/s]"
    nb.cells[1].outputs.append(new_output("stream", name="stderr", text=bar))
    found = notebooks.problems(write(tmp_path, nb))
    assert any("ValueError" in p for p in found) and any("progress bar" in p for p in found)


def test_an_ignored_output_is_a_tag_that_says_why_in_the_metadata(tmp_path):
    nb = good_notebook()
    nb.cells[0].source = "# NBVAL_IGNORE_OUTPUT\n# the time differs on every run and machine\nprint(math.pi)"
    assert any("an NBVAL_ comment" in p for p in notebooks.problems(write(tmp_path, stamped(nb))))
    nb = good_notebook()
    nb.cells[0].metadata["tags"] = ["nbval-ignore-output"]
    assert any("without its reason" in p for p in notebooks.problems(write(tmp_path, nb)))
    nb.cells[0].metadata["course"] = {"ignore_output": "the time differs on every run and machine"}
    assert notebooks.problems(write(tmp_path, nb)) == []


def test_the_set_up_cell_is_folded_in_the_book_and_its_device_not_compared(tmp_path):
    nb = good_notebook()
    nb.cells[0].source = "import torch\nSEED = start()\nprint('Running on: cpu')"
    nb = stamped(nb)
    assert any("set-up cell" in p for p in notebooks.problems(write(tmp_path, nb)))
    nb.cells[0].metadata.update(tags=list(notebooks.HARNESS_TAGS), course={"ignore_output": "the device's name"})
    assert notebooks.problems(write(tmp_path, nb)) == []


@pytest.mark.parametrize("call", ['claim("The loss is {:.2f}.", loss, "<", 1)', 'check("no NaN", n, "==", 0)',
                                  'quote("loss", loss)'])
def test_checking_in_code_the_reader_sees_is_flagged_and_a_removed_cell_is_not(tmp_path, call):
    nb = good_notebook()
    nb.cells[1].source = f"loss = 0.5\n{call}"
    found = notebooks.problems(write(tmp_path, stamped(nb)))
    assert any("in code the reader sees" in p and call.split("(")[0] in p for p in found)
    for tags in (["remove-input"], ["remove-cell"]):
        nb.cells[1].metadata["tags"] = tags
        assert not any("reader sees" in p for p in notebooks.problems(write(tmp_path, stamped(nb))))
    nb.cells[1].metadata["tags"] = []
    nb.cells[1].source = "loss = 0.5\nprint(precheck(loss), self.claim(loss), my_quote(1))"  # other names
    assert not any("reader sees" in p for p in notebooks.problems(write(tmp_path, stamped(nb))))


def test_a_line_wider_than_the_column_is_flagged_in_code_and_in_printed_output(tmp_path):
    wide = "x" * (notebooks.LINE_WIDTH + 1)
    nb = good_notebook()
    nb.cells[1].source = f"{wide} = 2\n{wide}"
    found = notebooks.problems(write(tmp_path, stamped(nb)))
    assert any(f"longer than {notebooks.LINE_WIDTH} characters (lines [1, 2])" in p for p in found)
    nb.cells[1].metadata["tags"] = ["remove-input"]  # the book shows no code: any width
    assert not any("longer than" in p for p in notebooks.problems(write(tmp_path, stamped(nb))))
    nb = good_notebook()
    nb.cells[0].outputs = [new_output("stream", name="stdout", text=f"short\n{wide}\n")]
    assert any("printed output" in p for p in notebooks.problems(write(tmp_path, nb)))
    nb.cells[0].metadata["tags"] = ["remove-output"]
    assert notebooks.problems(write(tmp_path, nb)) == []
    nb = good_notebook()  # a finding is HTML the book wraps: its plain-text line may be long
    nb.cells[0].outputs = [new_output("display_data", data={"text/plain": wide, "text/html": "<p>x</p>"})]
    assert notebooks.problems(write(tmp_path, nb)) == []


def test_a_comment_changes_no_stamp_and_code_does(tmp_path):
    nb = good_notebook()
    nb.cells[1].source = "# the sum, spelled out\n1 + 1  # two"
    assert notebooks.problems(write(tmp_path, nb)) == []
    nb.cells[1].source = "1 + 1 + 0"
    assert any("stale" in p for p in notebooks.problems(write(tmp_path, nb)))


def test_a_notebook_without_a_stamp_is_flagged(tmp_path):
    nb = good_notebook()
    del nb.metadata[notebooks.STAMP]
    assert any("no outputs stamp" in p for p in notebooks.problems(write(tmp_path, nb)))


def test_assignment_outputs_are_flagged(tmp_path):
    nb = new_notebook(cells=[new_code_cell("x = 1", execution_count=1)])
    assert notebooks.assignment_problems(write(tmp_path, nb))


# ---- the execution cache's key follows course_lib ---------------------------------------------

def test_a_notebook_depends_on_the_modules_it_imports_and_theirs():
    nb = new_notebook(cells=[new_code_cell("from course_lib.vit import ViT\nimport torch")])
    deps = {p.relative_to(ROOT).as_posix() for p in course_book.dependencies(nb)}
    assert {"course_lib/vit.py", "course_lib/blocks.py", "course_lib/attention.py", "course_lib/__init__.py"} <= deps
    assert "course_lib/swin.py" not in deps and "grader/__init__.py" not in deps


def test_from_package_import_module_and_data_files_count():
    code = "from course_lib import tokenizer as T\ntext = Path('corpus.txt').read_text()"
    nb = new_notebook(cells=[new_code_cell(code)])
    deps = {p.relative_to(ROOT).as_posix() for p in course_book.dependencies(nb)}
    assert "course_lib/tokenizer.py" in deps and "chapters/01-tokenization/corpus.txt" in deps


def test_dynamic_imports_count_the_whole_package():
    nb = new_notebook(cells=[new_code_cell("from course_lib import interop")])
    deps = {p.relative_to(ROOT).as_posix() for p in course_book.dependencies(nb)}
    assert {"course_lib/interop/vit.py", "course_lib/interop/swin.py", "course_lib/swin.py"} <= deps


@pytest.fixture
def course_lib_copy(tmp_path, monkeypatch):
    """A copy of course_lib that course_book reads instead of the real one: edit it freely."""
    shutil.copytree(ROOT / "course_lib", tmp_path / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "chapters").mkdir()
    monkeypatch.setattr(course_book, "ROOT", tmp_path)
    course_book._module_closure.cache_clear()
    yield tmp_path / "course_lib"
    course_book._module_closure.cache_clear()


def test_the_cache_key_changes_with_a_dependency_and_only_then(course_lib_copy):
    """Edit a copy of course_lib: the notebook using the edited module gets a new key, the other keeps its own."""
    uses_swin = nbformat.writes(new_notebook(cells=[new_code_cell("from course_lib.swin import window_partition")]))
    uses_norms = nbformat.writes(new_notebook(cells=[new_code_cell("from course_lib.norms import rms_norm")]))
    key = lambda text: course_book.read_notebook(text).metadata.kernelspec[course_book.KEY]  # noqa: E731
    before = key(uses_swin), key(uses_norms)
    swin = course_lib_copy / "swin.py"
    swin.write_text(swin.read_text() + "\nEDITED = True\n")
    course_book._module_closure.cache_clear()
    after = key(uses_swin), key(uses_norms)
    assert after[0] != before[0], "editing course_lib/swin.py must re-execute a notebook that imports it"
    assert after[1] == before[1], "a notebook that does not use course_lib/swin.py must stay cached"


def test_a_docstring_or_comment_edit_keeps_the_stamp_and_a_code_edit_stales_it(course_lib_copy, tmp_path):
    """The stamp is keyed on code: prose edited in a module the notebook runs leaves its outputs fresh."""
    nb = new_notebook(cells=[new_code_cell("from course_lib.swin import window_partition", execution_count=1)])
    path = write(tmp_path, stamped(nb))
    assert notebooks.problems(path) == []
    swin = course_lib_copy / "swin.py"
    original = swin.read_text()
    doc = '"""``(B, H, W, C) -> (B * nW, ws * ws, C)``: non-overlapping windows, row-major within and across."""'
    assert doc in original, "the docstring this test edits moved: pick another one"
    prose = original.replace(doc, '"""Windows of ``ws x ws`` tokens: reworded."""', 1)
    prose = prose.replace("import math\n", "import math  # a comment\n\n# another comment\n", 1)
    prose = prose.replace('"""Swin Transformer V1 and V2', '"""Swin Transformer (V1 and V2)', 1)  # the module's
    prose = prose.replace("def fit_window(res: int, ws: int, shift: int) -> tuple[int, int]:",
                          "def fit_window(res: int, ws: int,\n               shift: int) -> tuple[int, int]:", 1)
    assert prose.count("reworded") == 1 and prose.count("a comment") == 1 and "(V1 and V2)" in prose
    swin.write_text(prose)
    course_book._module_closure.cache_clear()
    assert notebooks.problems(path) == [], "a docstring, a comment or a wrapped line changed the stamp"
    swin.write_text(prose.replace("x.reshape(-1, ws * ws, c)", "x.reshape(-1, ws * ws, c).clone()", 1))
    course_book._module_closure.cache_clear()
    assert any("stale" in p for p in notebooks.problems(path)), "a code edit left the stamp fresh"


def test_code_of_a_module_drops_its_docstrings_and_nothing_else(tmp_path):
    def code_of(text: str, name: str = "m.py") -> bytes:
        path = tmp_path / name
        path.write_text(text)
        return course_book.code_of(path)

    base = code_of('def f(x):\n    """Twice x."""\n    return 2 * x  # doubled\n')
    assert code_of('def f(x):\n    """Two times x."""\n    return 2 * x\n') == base
    assert code_of("def f(x):\n    return (2 *\n            x)\n") == base
    assert code_of('def f(x):\n    """Twice x."""\n    return 3 * x\n') != base
    assert code_of('def f(x):\n    """Twice x."""\n    return "2 * x"\n') != base, "a string that is a value counts"
    assert code_of("# not Python: every byte counts\n", "corpus.txt") == b"# not Python: every byte counts\n"


def test_the_book_reads_notebooks_through_the_keyed_reader_and_loads_no_thebe():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    assert config["config"]["nb_custom_formats"] == {".ipynb": "course_book.read_notebook"}
    assert config["local_extensions"] == {"course_book": "tools/", "diagrams": "tools/"}
    assert "course_book" in config["config"]["extensions"] and "diagrams" in config["config"]["extensions"]
    assert "sphinx_thebe" not in config["config"]["extensions"]


def test_sphinx_rereads_a_notebook_when_a_module_it_runs_changes():
    """Sphinx re-reads only pages whose noted dependencies are newer: every module a notebook runs is noted."""
    noted: list[str] = []

    class Env:
        suffix = ".ipynb"

        def doc2path(self, docname):
            return ROOT / f"{docname}{self.suffix}"

        def note_dependency(self, path):
            noted.append(path)

    class App:
        env = Env()

    nb = nbformat.writes(new_notebook(cells=[new_code_cell("from course_lib.swin import window_partition")]))
    course_book.note_dependencies(App(), "chapters/11-swin/shifted-windows", [nb])
    assert str(ROOT / "course_lib" / "swin.py") in noted and str(ROOT / "course_lib" / "attention.py") in noted
    noted.clear()
    App.env.suffix = ".md"
    course_book.note_dependencies(App(), "intro", ["# a page"])
    assert noted == []


# ---- every notebook says where it runs, and every training loop shows progress ------------------

def _code(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", CHAPTER_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_notebook_picks_the_gpu_when_there_is_one_and_says_which_device(path):
    first = _code(path)[0]
    assert "torch.cuda.is_available()" in first, f"{path.name}: the setup cell does not pick the GPU when present"
    nb = nbformat.read(path, as_version=4)
    shown = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "Running on: cpu" in shown or "Running on: cuda" in shown, f"{path.name} does not say which device it uses"


def training_loops_without_progress(source: str) -> list[str]:
    """`for` loops that update a model (backward, an optimiser step) with no progress bar around them."""
    tree = ast.parse(source)
    found = []

    def visit(node, shown: bool):
        if isinstance(node, ast.For):
            here = shown or "progress(" in ast.unparse(node.iter)
            body = "\n".join(ast.unparse(n) for n in node.body)
            trains = ".backward(" in body or "train_step(" in body
            if trains and not here and not _calls_progress_inside(node):
                found.append(f"line {node.lineno}: for {ast.unparse(node.target)} in {ast.unparse(node.iter)}")
            for child in node.body:
                visit(child, here)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, shown)

    visit(tree, False)
    return found


def _calls_progress_inside(loop: ast.For) -> bool:
    return any(isinstance(n, ast.For) and "progress(" in ast.unparse(n.iter) for n in ast.walk(loop) if n is not loop)


@pytest.mark.parametrize("path", CHAPTER_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_training_loop_shows_progress(path):
    problems = []
    for i, src in enumerate(_code(path)):
        try:
            loops = training_loops_without_progress(src)
        except SyntaxError:
            continue
        if loops and "progress(" not in src:  # a loop inside a function the cell calls under a progress bar passes
            problems += [f"code cell {i}: {loop}" for loop in loops]
    assert not problems, f"{path.name}: training loops with no progress bar (course_lib.training.progress):\n" + \
        "\n".join(problems)


def test_the_progress_check_catches_a_bare_training_loop():
    bare = "for step in range(100):\n    loss = model(x).sum()\n    loss.backward()\n    opt.step()\n"
    shown = "for step in progress(range(100)):\n    loss = model(x).sum()\n    loss.backward()\n"
    outer = "for run in progress(runs):\n    for step in range(10):\n        loss.backward()\n"
    assert training_loops_without_progress(bare) and not training_loops_without_progress(shown)
    assert not training_loops_without_progress(outer)
