"""The landing pages and the guides: the learner's front door, and commands that work.

The front page (intro.md) is the learner's: what the course teaches, what it needs, a learning path
whose hours agree with the chapters as they are, and how to work the exercises; no instructor's or
maintainer's tooling. The instructor's and maintainer's guides are pages of the book (guides/), and
README.md keeps the quick start and points to them. Every command a page gives must exist: a make
target that `make help` lists, with the variables the Makefile or the code reads; a `python -m`
module with the subcommands and options its parser declares; a file of the repository.
That the pages build with warnings as errors, and their links resolve, is test_book.py's.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from nbtools import ROOT

GUIDES = sorted((ROOT / "guides").glob("*.md"))
#: every page a reader of the repository or the book is told to run commands from
PAGES = [ROOT / "intro.md", ROOT / "working-on-exercises.md", ROOT / "README.md", *GUIDES]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def code_spans(text: str) -> list[str]:
    """The code a page shows: fenced and indented blocks, line by line, and inline code spans."""
    blocks = re.findall(r"^(`{3,})[^\n]*\n(.*?)^\1", text, re.S | re.M)
    spans = [line for _, body in blocks for line in body.splitlines()]
    prose = re.sub(r"^(`{3,})[^\n]*\n.*?^\1", "", text, flags=re.S | re.M)
    spans += [m[4:] for m in re.findall(r"^ {4}.*$", prose, re.M)]
    spans += re.findall(r"`([^`\n]+)`", prose)
    return spans


def commands(text: str) -> list[str]:
    """Each command line of a page's code, without its comment."""
    return [span.split("  #")[0].strip() for span in code_spans(text)]


def make_targets() -> set[str]:
    """The targets `make help` lists (the Makefile's head comment)."""
    head = (ROOT / "Makefile").read_text().split("\n\n", 1)[0]
    return set(re.findall(r"^#\s+make ([\w-]+)", head, re.M))


@pytest.fixture(scope="module")
def code_text() -> str:
    """Everything the Makefile and the code could read a variable in."""
    sources = [ROOT / "Makefile", ROOT / "nbgrader_config.py", ROOT / "tests" / "conftest.py"]
    for folder in ("grader", "classroom", "tools", "course_lib", "hub"):
        sources += sorted((ROOT / folder).rglob("*.py"))
    return "\n".join(p.read_text(encoding="utf-8") for p in sources)


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_make_command_of_a_page_is_a_target_make_help_lists(page):
    targets = make_targets() | {"help"}
    named = set(re.findall(r"\bmake ([a-z][\w-]*)", "\n".join(commands(page.read_text()))))
    assert named, f"{page_id(page)} names no make command"
    assert not named - targets, f"{page_id(page)} names make targets that do not exist: {sorted(named - targets)}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_variable_a_command_sets_is_one_the_makefile_or_the_code_reads(page, code_text):
    settings = set()
    for line in commands(page.read_text()):
        if re.search(r"\bmake\b|python -m|nbgrader ", line) or re.fullmatch(r"[A-Z_]+=\S+", line):
            settings |= set(re.findall(r"(?:^|\s)([A-Z][A-Z0-9_]+)=", line))
    unread = sorted(name for name in settings if not re.search(rf"\b{name}\b", code_text))
    assert not unread, f"{page_id(page)} sets variables nothing reads: {unread}"


PYTHON_M = re.compile(r"python -m (tools\.[\w.]+)((?:\s+[\w./~<>-]+)*)")


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_python_command_of_a_page_names_a_module_subcommand_and_options_that_exist(page):
    for line in commands(page.read_text()):
        for module, rest in PYTHON_M.findall(line):
            path = ROOT / Path(*module.split("."))
            path = path / "__main__.py" if path.is_dir() else path.with_suffix(".py")
            assert path.is_file(), f"{page_id(page)}: `{line}` runs {module}, which does not exist"
            source = path.read_text() if path.name != "__main__.py" else \
                "\n".join(p.read_text() for p in path.parent.glob("*.py"))
            words = rest.split()
            for word in words:
                if word.startswith("--"):
                    assert f'"{word}"' in source, f"{page_id(page)}: `{line}`: {module} has no option {word}"
            if words and not words[0].startswith("-") and "add_parser" in source:
                assert f'"{words[0]}"' in source, f"{page_id(page)}: `{line}`: {module} has no command {words[0]}"


#: folders a course run makes (class data, the hub's prefix, build output): named, never committed
MADE_AT_RUN_TIME = ("submitted/", "autograded/", "feedback/", "exports/", "similarity/", "_build/", "env/",
                    "state/", "exchange/", "proxy/", "etc/", "course/", "grading/")
FILE = re.compile(r"[\w.-]+(?:/[\w.-]+)+/?")


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_file_a_page_names_is_in_the_repository(page):
    missing = []
    for span in re.findall(r"(?<![}`])`([^`\n]+)`", page.read_text()):  # not a role's target ({doc}`x`)
        path = span.strip()
        if "/" not in path or not FILE.fullmatch(path) or path.startswith(MADE_AT_RUN_TIME):
            continue  # a bare name is a file of the folder the sentence is about (registry.py of grader/)
        if not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"{page_id(page)} names files the repository does not have: {missing}"


# --------------------------------------------------------------------------------------------------
# The learner's front door
# --------------------------------------------------------------------------------------------------
#: what only an instructor or a maintainer uses: never on the learner's first page
INSTRUCTOR_TOOLING = ("nbval", "grades.csv", "gradebook", "nbgrader", "formgrader", "make grade", "make test",
                      "make feedback", "make similarity", "make export", "make hub", "make book", "make zoo",
                      "make seeds", "make portability", "make notebooks", "make exercises", "course.toml",
                      "deadlines", "grading secret", "ROSTER", "SCHEDULER")


def test_the_front_page_names_no_instructor_or_maintainer_tooling():
    text = (ROOT / "intro.md").read_text()
    named = [term for term in INSTRUCTOR_TOOLING if term.lower() in text.lower()]
    assert not named, f"intro.md names instructor or maintainer tooling: {named}"


def test_the_front_page_says_what_a_learner_will_do_needs_and_how_to_work():
    text = (ROOT / "intro.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    for heading in ("What you will be able to do", "What you need first", "A learning path",
                    "How to work the exercises"):
        assert heading in headings, f"intro.md has no section {heading!r}; it has {headings}"
    assert "make lab" in text and "{doc}`working-on-exercises`" in text


#: the learning path's estimate: prose words and visible code lines read per minute (intro.md says so)
WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE = 120, 10
FOLDED = {"remove-input", "hide-input", "hide-cell", "remove-cell"}


def words(text: str) -> int:
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return len(re.findall(r"[A-Za-z0-9][\w'’-]*", text))


def estimate(slug: str) -> tuple[float, int]:
    """(minutes of reading, minutes of exercises) of a chapter, as intro.md's learning path says it counts them.

    Reading: the chapter's first page and its notebooks' prose at WORDS_PER_MINUTE, and their visible code
    lines (not folded in the book) at CODE_LINES_PER_MINUTE. Exercises: the times the assignment's table of
    exercises states (``| 20 min |``).
    """
    folder = ROOT / "chapters" / slug
    prose, code = words((folder / "index.md").read_text()), 0
    for notebook in sorted(folder.glob("*.ipynb")):
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type == "markdown":
                prose += words(cell.source)
            elif cell.cell_type == "code" and not FOLDED & set(cell.metadata.get("tags", [])):
                code += sum(1 for line in cell.source.splitlines() if line.strip())
    (release,) = sorted((ROOT / "exercises" / slug).glob("*.ipynb"))
    table = nbformat.read(release, as_version=4).cells[0].source
    exercises = sum(int(m) for m in re.findall(r"\|\s*(\d+) min\s*\|", table))
    return prose / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE, exercises


def learning_path() -> list[tuple[str, int, int, float]]:
    """intro.md's table: (chapter title, reading minutes, exercise minutes, hours in all) per row."""
    rows = re.findall(r"^\| (\d+\. [^|]+?) \| [^|]+ \| (\d+) min \| (\d+) min \| ([\d.]+) h \|$",
                      (ROOT / "intro.md").read_text(), re.M)
    return [(title, int(read), int(ex), float(total)) for title, read, ex, total in rows]


def test_the_learning_path_has_a_row_per_chapter_in_order():
    chapters = sorted(p.parent.name for p in (ROOT / "chapters").glob("*/index.md"))
    titles = [(ROOT / "chapters" / slug / "index.md").read_text().splitlines()[0].lstrip("# ") for slug in chapters]
    assert [row[0] for row in learning_path()] == titles


def test_the_learning_paths_hours_agree_with_the_chapters_as_they_are():
    """Reading within 15% (or 10 minutes), exercises exactly, the whole within half an hour of the estimate.

    The failure prints the table as the chapters give it now, to copy into intro.md.
    """
    chapters = sorted(p.parent.name for p in (ROOT / "chapters").glob("*/index.md"))
    wrong, now = [], []
    for slug, (title, read, ex, total) in zip(chapters, learning_path(), strict=True):
        reading, exercises = estimate(slug)
        hours = round((reading + exercises) / 30) / 2
        now.append(f"{title}: reading {5 * round(reading / 5)} min, exercises {exercises} min, in all {hours:g} h")
        if abs(read - reading) > max(10, 0.15 * reading) or ex != exercises or abs(total - hours) > 0.5:
            wrong.append(title)
    assert not wrong, f"intro.md's learning path is out of date for {wrong}; the chapters now give:\n" + "\n".join(now)


def test_the_learning_paths_sums_are_the_sums_of_its_rows():
    text = (ROOT / "intro.md").read_text()
    rows = learning_path()
    total = sum(row[3] for row in rows)
    said = int(re.search(r"about (\d+) hours in all", text).group(1))
    assert abs(said - total) <= 1, f"intro.md says about {said} hours; its rows add up to {total}"
    parts = re.findall(r"([\d.]+)\s+for\s+[\w\s]+?\s\((?:chapters\s)?(\d+)\s+to\s+(\d+)\)", text)
    assert len(parts) == 3, parts
    for hours, first, last in parts:
        assert float(hours) == sum(row[3] for row in rows[int(first) - 1:int(last)]), (hours, first, last)


# --------------------------------------------------------------------------------------------------
# The README points to the guides
# --------------------------------------------------------------------------------------------------
def test_the_readme_keeps_the_quick_start_and_points_to_every_guide():
    text = (ROOT / "README.md").read_text()
    assert "make book" in text and "make test" in text and "What a machine needs" in text
    for guide in GUIDES:
        assert f"`{page_id(guide)}`" in text, f"README.md does not point to {page_id(guide)}"
    assert len(text.splitlines()) <= 100, "README.md is a quick start and a map: the guides hold the rest"


def test_every_guide_is_a_page_of_the_book():
    toc = (ROOT / "_toc.yml").read_text()
    for guide in GUIDES:
        assert f"file: {page_id(guide).removesuffix('.md')}" in toc, f"{page_id(guide)} is not in _toc.yml"


#: the longest code line a page's column shows whole: at 1280 px the book's code blocks are 686 px wide, where a
#: line of 76 characters fits and one of 83 does not (measured in Chromium on the built guides)
CODE_COLUMN = 76


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "README.md"], ids=page_id)
def test_every_code_line_of_a_page_fits_the_books_column(page):
    text = page.read_text()
    blocks = [body for _, body in re.findall(r"^(`{3,})[^\n]*\n(.*?)^\1", text, re.S | re.M)]
    prose = re.sub(r"^(`{3,})[^\n]*\n.*?^\1", "", text, flags=re.S | re.M)
    lines = [line for body in blocks for line in body.splitlines()]
    lines += [m[4:] for m in re.findall(r"^ {4}(?!\d+\.|- ).*$", prose, re.M)]
    long = [line for line in lines if len(line) > CODE_COLUMN]
    assert not long, f"{page_id(page)}: code lines wider than the book's column ({CODE_COLUMN}): {long}"
