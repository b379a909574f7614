"""The chapter notebooks' stored outputs: the policy, a check and a refresh.

Policy. The narrative notebooks under ``chapters/`` are committed **with their
outputs**: a reader of the repository sees the figures, and nbval compares a
fresh run against them in ``make test``. The outputs must come from one run
of the whole notebook, top to bottom, with progress bars off
(``COURSE_STATIC_OUTPUT=1``), against the code as it is now. The assignment
notebooks (``solutions/``, ``exercises/``) are committed **without outputs**:
a learner receives a clean notebook.

To know "against the code as it is now" without running anything, a refresh
stamps each notebook's metadata with a digest of what produced its outputs:
its code cells and every ``course_lib`` module and data file they use (the
same dependencies that key the book's execution cache, ``tools/course_book.py``).
A module counts by its code (``course_book.code_of``): editing a docstring or a
comment stales nothing. A notebook whose stamp differs from the digest of
today's sources has stale outputs.

    python -m tools.notebooks check            # what is stale or malformed (exit 1 if anything)
    python -m tools.notebooks refresh          # re-execute the stale notebooks in place, then stamp them
    python -m tools.notebooks refresh --all    # re-execute every chapter notebook
    python -m tools.notebooks refresh chapters/02-attention/scaling-and-masks.ipynb

The notebooks also keep the book readable: the code a reader sees (every cell not tagged ``remove-input``
or ``remove-cell``; folded ``hide-*`` cells included) calls none of ``course_lib.experiment``'s checking
helpers (``claim``, ``check``, ``quote`` belong in cells the book removes), and no line of it, nor of its
printed output, is longer than :data:`LINE_WIDTH` characters, what the book's text column holds.

A refresh writes the outputs on torch's portable CPU kernels (``ATEN_CPU_CAPABILITY=default``, no SIMD:
:func:`writing_kernels`), with the notebooks' own one thread. ``make test`` then runs every notebook on the
machine's own kernels (AVX2 or AVX-512 on an x86-64 machine) and compares: a stored output that only one
set of kernels prints fails there, on any machine, and the suite runs on the faster kernels.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat

from tools.course_book import ROOT, dependencies, digest, tree_text

STAMP = "course"  # metadata key: {"outputs_digest": ...}
TIMEOUT = 600  # seconds per cell
#: the CPU kernels the stored outputs are written with: torch's portable ones, without SIMD, which no
#: machine picks for itself, so that the suite's run on any machine's own kernels is a second opinion
WRITING_CAPABILITY = "default"


@contextmanager
def writing_kernels():
    """``os.environ`` while a kernel that writes stored outputs starts; the capability it gets is yielded.

    ``ATEN_CPU_CAPABILITY`` is :data:`WRITING_CAPABILITY` unless the caller's environment names one already.
    It is set only while the kernel starts: the kernel inherits it, and this process is left as it was.
    """
    named = os.environ.get("ATEN_CPU_CAPABILITY")
    if named:
        yield named
        return
    os.environ["ATEN_CPU_CAPABILITY"] = WRITING_CAPABILITY
    try:
        yield WRITING_CAPABILITY
    finally:
        os.environ.pop("ATEN_CPU_CAPABILITY", None)


def chapter_notebooks() -> list[Path]:
    return sorted(p for p in (ROOT / "chapters").glob("*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def assignment_notebooks() -> list[Path]:
    return sorted([*(ROOT / "solutions").glob("*/*.ipynb"), *(ROOT / "exercises").glob("*/*.ipynb")])


def outputs_digest(nb: nbformat.NotebookNode) -> str:
    """What the outputs of ``nb`` depend on: its code cells, in order, and the sources they use."""
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(cell_code(cell.source).encode())
            h.update(b"\0")
    h.update(digest(dependencies(nb)).encode())
    return h.hexdigest()


def cell_code(source: str) -> str:
    """What of a code cell its outputs depend on: its syntax tree (a comment changes no output), or its text
    where it does not parse as Python (an IPython magic)."""
    try:
        return tree_text(ast.parse(source))
    except SyntaxError:
        return source


#: how many characters a line of code or printed output may have where the book shows it (or folds it): the text
#: column holds about 93 at 1280 px (_static/course.css), so nothing a reader sees is cut off or wrapped
LINE_WIDTH = 88
#: tags that keep a cell's code out of the book (its outputs show); ``hide-*`` fold it one click away
REMOVED_INPUT = ("remove-input", "remove-cell", "remove_input", "remove_cell")
FOLDED_INPUT = ("hide-input", "hide-cell", "hide_input", "hide_cell")
REMOVED_OUTPUT = ("remove-output", "remove-cell", "remove_output", "remove_cell")
#: the calls that check the prose (course_lib.experiment): they belong in cells the book removes
CHECK_CALLS = re.compile(r"(?<![\w.])(claim|check|quote)\(")

#: the tags of a chapter notebook's set-up cell (imports, ``SEED = start()``, the device): folded in the book
#: (``hide-cell``), its output (the device's name) not compared by nbval
HARNESS_TAGS = ("hide-cell", "nbval-ignore-output")
#: where a cell tagged ``nbval-ignore-output`` says why: ``metadata[COURSE_META][IGNORE_REASON]``
COURSE_META = "course"
IGNORE_REASON = "ignore_output"


def problems(path: Path) -> list[str]:
    """Why the stored outputs of a chapter notebook break the policy ([] if they do not)."""
    nb = nbformat.read(path, as_version=4)
    found = []
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    counts = [c.get("execution_count") for c in code]
    if counts != list(range(1, len(code) + 1)):
        found.append(f"not saved from one top-to-bottom run (execution counts {counts})")
    for i, cell in enumerate(code, 1):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"code cell {i} stored an error: {out.get('ename')}: {out.get('evalue')}")
            text = out.get("text", "") if out.get("output_type") == "stream" else ""
            if "\r" in text or "it/s]" in text:
                found.append(f"code cell {i} stored a live progress bar (run with COURSE_STATIC_OUTPUT=1)")
    for i, cell in enumerate(code, 1):
        found += [f"code cell {i}: {p}" for p in marker_problems(cell) + reading_problems(cell)]
    if "widgets" in nb.metadata:
        found.append("widget state saved in the metadata")
    stamp = nb.metadata.get(STAMP, {}).get("outputs_digest")
    if stamp is None:
        found.append("no outputs stamp: run `python -m tools.notebooks refresh` on it")
    elif stamp != outputs_digest(nb):
        found.append("stale outputs: its code or the course_lib modules it uses changed since it was run")
    return found


def marker_problems(cell: nbformat.NotebookNode) -> list[str]:
    """What breaks the rules of nbval's markers in a code cell: they are tags, each ignored output says why in
    the cell's metadata (a reader sees no harness comments), and the set-up cell is folded in the book."""
    found = []
    tags = cell.metadata.get("tags", [])
    comments = [line.strip().lstrip("# ") for line in cell.source.splitlines() if line.strip().startswith("#")]
    if any(c.startswith("NBVAL_") for c in comments):
        found.append("an NBVAL_ comment: tag the cell instead (nbval-ignore-output, with the reason in its "
                     f"metadata course.{IGNORE_REASON})")
    if "nbval-ignore-output" in tags and len(cell.metadata.get(COURSE_META, {}).get(IGNORE_REASON, "").strip()) < 10:
        found.append(f"tagged nbval-ignore-output without its reason (metadata course.{IGNORE_REASON}: what is "
                     "truly unstable, a timing, a device name)")
    if re.search(r"^SEED = start\(", cell.source, re.M) and not set(HARNESS_TAGS) <= set(tags):
        found.append(f"the set-up cell (SEED = start()) is not tagged {' and '.join(HARNESS_TAGS)}")
    return found


def reading_problems(cell: nbformat.NotebookNode) -> list[str]:
    """What of a code cell gets in the reader's way in the book: the checking in code the reader sees (claims,
    checks and quotes belong in a cell tagged ``remove-input`` or ``remove-cell``), and a line of code or of
    printed output too long for the text column (:data:`LINE_WIDTH`)."""
    found = []
    tags = set(cell.metadata.get("tags", []))
    if not tags & set(REMOVED_INPUT):
        calls = sorted({m.group(1) for m in CHECK_CALLS.finditer(cell.source)})
        if calls and not tags & set(FOLDED_INPUT):
            found.append(f"calls {', '.join(calls)}() in code the reader sees: move them to a cell tagged "
                         "remove-input (a claim's finding shows) or remove-cell (checks and quotes)")
        long = [n for n, line in enumerate(cell.source.splitlines(), 1) if len(line) > LINE_WIDTH]
        if long:
            found.append(f"code lines longer than {LINE_WIDTH} characters (lines {long[:5]}): the book's column "
                         "cuts them")
    if not tags & set(REMOVED_OUTPUT):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = out.get("text", "") if out.get("output_type") == "stream" else (
                "" if "text/html" in data or any(m.startswith("image/") for m in data) else data.get("text/plain", ""))
            text = "".join(text) if isinstance(text, list) else text
            if any(len(line) > LINE_WIDTH for line in text.splitlines()):
                found.append(f"printed output with lines longer than {LINE_WIDTH} characters: the book's column "
                             "cuts them")
                break
    return found


def assignment_problems(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    found = []
    for i, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), 1):
        if cell.get("outputs") or cell.get("execution_count") is not None:
            found.append(f"code cell {i} has stored outputs (assignments are committed without outputs)")
    return found


def refresh(path: Path) -> float:
    """Execute ``path`` top to bottom in its own folder, save it with its stamp; the seconds it took."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    os.environ["COURSE_STATIC_OUTPUT"] = "1"
    start = time.perf_counter()
    folder = {"metadata": {"path": str(path.parent)}}
    with writing_kernels():  # the kernel starts on them (this process's torch has chosen its own already)
        NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3", shutdown_kernel="immediate",
                       resources=folder).execute()
    elapsed = time.perf_counter() - start
    nb.metadata.pop("widgets", None)
    nb.metadata[STAMP] = {"outputs_digest": outputs_digest(nb)}
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.notebooks", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="list notebooks whose stored outputs break the policy")
    r = sub.add_parser("refresh", help="re-execute stale chapter notebooks in place")
    r.add_argument("paths", nargs="*", type=Path, help="notebooks to re-execute (default: the stale ones)")
    r.add_argument("--all", action="store_true", help="re-execute every chapter notebook")
    args = parser.parse_args(argv)

    if args.command == "check":
        bad = 0
        for path in chapter_notebooks():
            for p in problems(path):
                print(f"{path.relative_to(ROOT)}: {p}")
                bad += 1
        for path in assignment_notebooks():
            for p in assignment_problems(path):
                print(f"{path.relative_to(ROOT)}: {p}")
                bad += 1
        print("notebook outputs: " + ("all up to date" if not bad else f"{bad} problem(s)"))
        return 1 if bad else 0

    for path in args.paths:
        if path.resolve().parent.parent != ROOT / "chapters" or path.suffix != ".ipynb":
            parser.error(f"{path}: not a chapter notebook (chapters/<chapter>/<name>.ipynb)")
    todo = ([p.resolve() for p in args.paths] if args.paths else
            chapter_notebooks() if args.all else [p for p in chapter_notebooks() if problems(p)])
    if not todo:
        print("every chapter notebook is up to date")
    for path in todo:
        print(f"{path.relative_to(ROOT)}: executing ...", end=" ", flush=True)
        print(f"{refresh(path):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
