"""Every result on the page, once, in a learner's words (tools/reading.py), on every chapter of the book.

Each rule runs over every chapter notebook (or every chapter's first page), and each is shown catching a
planted fault in a notebook made for the purpose. The pages other engineers are rewriting are listed in
:data:`PENDING`: their failures are expected until that work lands.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from nbtools import ROOT
from tools import notebooks, reading

NOTEBOOKS = notebooks.chapter_notebooks()
CHAPTERS = reading.chapters()

#: pages being rewritten by other engineers under issue 51 (chapters 9 and 10, and the decoder-only language model
#: rebuilt on a real corpus): their failures are expected until that work lands, and then this list goes. Not strict,
#: because the rewrite fixes them one rule at a time; `python -m tools.reading` lists what is left
PENDING: tuple[str, ...] = ()


def page_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def pending(path: Path) -> bool:
    return page_id(path).startswith(PENDING)


def cases():
    return [pytest.param(path, rule, id=f"{page_id(path)}:{rule}",
                         marks=[pytest.mark.xfail(reason="pending: issue 51, another engineer's page")]
                         if pending(path) else [])
            for path in NOTEBOOKS for rule in reading.NOTEBOOK_CHECKS]


@pytest.mark.parametrize(("path", "rule"), cases())
def test_every_chapter_notebook_shows_its_results_once_in_a_learners_words(path, rule):
    found = reading.NOTEBOOK_CHECKS[rule](nbformat.read(path, as_version=4))
    assert not found, f"{path.relative_to(ROOT)}: {rule}:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_a_chapters_first_page_summarises_what_its_pages_show(chapter):
    found = reading.index_problems(chapter) + reading.page_problems(chapter / "index.md")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", reading.FRONT_MATTER)
def test_the_front_matter_speaks_to_learners(page):
    assert not reading.page_problems(ROOT / page)


def test_the_pending_list_names_pages_that_exist():
    assert all(any(page_id(p).startswith(prefix) for p in NOTEBOOKS) for prefix in PENDING)


# ---- each rule catches what it claims to catch -----------------------------------------------------------------

def code(source, *, tags=(), outputs=(), alt=None):
    cell = new_code_cell(source, outputs=list(outputs))
    if tags:
        cell.metadata["tags"] = list(tags)
    if alt:
        cell.metadata["mystnb"] = {"image": {"alt": alt}}
    return cell


def printed(text):
    return new_output("stream", name="stdout", text=text)


def glue_record(name, value):
    return new_output("display_data", data={reading.GLUE_MIME: repr(value)},
                      metadata={"scrapbook": {"name": name, "mime_prefix": "application/papermill.record/"}})


def finding_box(sentence):
    return new_output("display_data", data={"text/plain": f"✓ {sentence}  [measured 3 >= 1, margin +2]",
                                            "text/html": f'<details class="course-claim"><summary>{sentence}</summary>'
                                                         '<p class="course-claim-check">Checked as the page runs: '
                                                         'the measured value must be at least 1 (margin +2).</p>'
                                                         '</details>'})


def causal_page(*, shown: bool):
    """The issue's own example: a visible cell computes the outputs before and after changing the last token,
    and a hidden cell checks that the earlier outputs stay the same."""
    visible = ("out = attend(x)\nx2 = x.clone()\nx2[-1] = 5.0\nout2 = attend(x2)\n"
               "change = (out2 - out).abs().amax(-1)\n")
    outputs = []
    if shown:
        visible += 'print(f"largest change in outputs 0-4: {change[:-1].max():.1f}")\n'
        outputs = [printed("largest change in outputs 0-4: 0.0\n")]
    return new_notebook(cells=[
        new_markdown_cell("Change the last token and every earlier output must stay exactly the same:"),
        code(visible, outputs=outputs),
        code('check("outputs 0-4 unchanged", change[:-1].max(), "==", 0)', tags=["remove-cell"]),
    ])


def test_a_silent_cell_whose_result_only_a_hidden_check_reads_is_caught():
    found = reading.hidden_evidence(causal_page(shown=False))
    assert len(found) == 1 and found[0].startswith("cell 1 computes") and "`change`" in found[0]
    assert reading.hidden_evidence(causal_page(shown=True)) == []


def test_a_cell_that_prints_something_else_does_not_show_the_checked_value():
    nb = causal_page(shown=False)
    nb.cells[1].source += 'print("shapes:", out.shape)\n'
    nb.cells[1].outputs = [printed("shapes: (6, 4)\n")]
    assert reading.hidden_evidence(nb), "printing the shape of out is not showing the change"


def test_the_evidence_may_show_in_a_later_cell_or_a_figure_before_the_check_and_not_after():
    nb = causal_page(shown=False)
    plot = code("ax.plot(change)\nplt.show()", outputs=[new_output("display_data", data={"image/png": "iVBOR"})])
    nb.cells.insert(2, plot)
    assert reading.hidden_evidence(nb) == []
    nb.cells.append(nb.cells.pop(2))  # the figure after the check: the reader meets the check's claim first
    assert reading.hidden_evidence(nb)
    nb = causal_page(shown=True)
    nb.cells[1].metadata["tags"] = ["remove-output"]  # printed, but the book hides it
    assert reading.hidden_evidence(nb)


def test_a_value_the_prose_quotes_is_shown_and_one_it_does_not_is_not():
    nb = causal_page(shown=False)
    nb.cells[2].source = 'claim("Outputs 0-4 move by {:.1f}.", change[:-1].max(), "<", 1e-6, glue="moved")'
    assert reading.hidden_evidence(nb)
    nb.cells.append(new_markdown_cell("The earlier outputs move by {glue:text}`moved:.1f`."))
    assert reading.hidden_evidence(nb) == []


def test_values_spelled_out_in_the_code_need_no_printing():
    nb = new_notebook(cells=[code("sizes = [256, 300, 350]\ngen = generator(1)"),
                             code('check("three sizes", len(sizes), "==", 3)', tags=["remove-cell"])])
    assert reading.hidden_evidence(nb) == []


def test_a_claims_box_in_the_book_is_caught_and_a_removed_one_is_not():
    nb = new_notebook(cells=[code('claim("{} of the 4 runs split.", n, ">=", 1)', tags=["remove-input"],
                                  outputs=[finding_box("4 of the 4 runs split.")])])
    assert reading.finding_boxes(nb)
    nb.cells[0].metadata["tags"] = ["remove-cell"]
    assert reading.finding_boxes(nb) == []


@pytest.mark.parametrize("text", ["In 4.0 of the 4 runs the heads split", "The sentence costs 41.0 tokens.",
                                  "18.0 of the 24 entries land in the wrong place", "⟨3.0⟩ of the first 20 merges",
                                  "6.0 out of 16 patches"])
def test_a_count_printed_as_a_float_is_caught(text):
    assert reading.float_counts_in(text)


@pytest.mark.parametrize("text", ["In 4 of the 4 runs", "a norm of 1.0 on average", "grows 4.0 times",
                                  "the ratio is 2.0 per token", "temperature 1.0 lies between", "x = 16.0 here",
                                  "from 0.5 to 1.0 and back", "at 2.0 bytes per token"])
def test_a_measurement_that_happens_to_be_whole_is_not_a_count(text):
    assert reading.float_counts_in(text) == []


def test_a_glued_count_rendered_as_a_float_is_caught_in_the_prose():
    nb = new_notebook(cells=[code('quote("runs", 4.0)', tags=["remove-cell"], outputs=[glue_record("runs", 4.0)]),
                             new_markdown_cell("In {glue:text}`runs` of the 4 runs the heads split the work.")])
    assert reading.float_counts(nb)
    nb.cells[1].source = "In {glue:text}`runs:.0f` of the 4 runs the heads split the work."
    assert reading.float_counts(nb) == []


def test_maintainer_words_are_caught_in_prose_outputs_and_visible_comments_not_in_hidden_cells():
    nb = new_notebook(cells=[
        new_markdown_cell("The claims ask for less; `make seeds` runs the page under others."),
        code("x = 1  # the check allows 5%", outputs=[printed("threshold 0.5, margin +0.2\n")]),
        code("x = 2  # nbval masks this", tags=["remove-cell"]),
        code("SEED = start()  # seeds torch from COURSE_SEED", tags=["hide-cell", "nbval-ignore-output"]),
    ])
    found = reading.maintainer_words(nb)
    words = {hit.split("'")[1] for hit in found}
    assert words == {"the claims", "make seeds", "the check", "threshold", "margin"}, found
    assert not any("cell 2" in f or "cell 3" in f for f in found)
    assert reading.maintainer_words_in("DINO keeps the patches above DINO's own threshold of attention.") == []
    assert reading.maintainer_words_in("The same kernel slides over every position.") == []


def test_alt_text_numbers_must_be_the_figures_data():
    figure = code("ax.plot(sizes, bpt)\nplt.show()", alt="Bytes per token rise from 1.0 to about 2.3 over 256 "
                                                          "to 600 ids, the embedding from 131 to 307 thousand.",
                  outputs=[new_output("display_data", data={"image/png": "iVBOR"})])
    nb = new_notebook(cells=[code("sizes = [256, 300, 600]\nbpt = [1.0] + measure(sizes[1:])"), figure])
    found = reading.alt_numbers(nb)
    assert len(found) == 1 and all(f"'{n}'" in found[0] for n in ("2.3", "131", "307")) and "'1.0'" not in found[0]
    nb.cells.insert(1, code('quote("bpt_600", bpt[-1])\nquote("emb", [131.072, 307.2])', tags=["remove-cell"],
                            outputs=[glue_record("bpt_600", 2.2861), glue_record("emb", [131.072, 307.2])]))
    assert reading.alt_numbers(nb) == []
    nb.cells[2].metadata["mystnb"]["image"]["alt"] = "Bytes per token rise to about 2.4."  # 2.2861 is not 2.4
    assert reading.alt_numbers(nb)


def test_a_percentage_in_alt_text_matches_a_glued_fraction():
    nb = new_notebook(cells=[code('quote("share", 0.8231)', tags=["remove-cell"],
                                  outputs=[glue_record("share", 0.8231)]),
                             code("plt.show()", alt="The two most likely characters take 82% of the probability.")])
    assert reading.alt_numbers(nb) == []
    nb.cells[1].metadata["mystnb"]["image"]["alt"] = "The two most likely characters take over 90% of it."
    assert reading.alt_numbers(nb)


@pytest.fixture
def chapter(tmp_path, monkeypatch):
    """A chapter of one page that measures a speed-up of 3.27 and glues it."""
    monkeypatch.setattr(reading, "ROOT", tmp_path)
    folder = tmp_path / "chapters" / "99-test"
    folder.mkdir(parents=True)
    nb = new_notebook(cells=[
        new_markdown_cell("# 99.1 A page\n\nThe cache makes decoding {glue:text}`speedup:.1f` times faster."),
        code('quote("speedup", speedup)', tags=["remove-cell"], outputs=[glue_record("speedup", 3.27)]),
    ])
    nbformat.write(nb, folder / "page.ipynb")
    return folder


def index_page(folder, summary):
    (folder / "index.md").write_text(f"# 99. Test\n\n## What this chapter covers\n\n- {{doc}}`page` {summary}\n\n"
                                     "## Learning goals\n\n1. read.\n")


def test_a_number_in_a_chapter_summary_must_be_one_its_page_shows_or_glues(chapter):
    index_page(chapter, "measures the KV cache's speed-up, 3.3 times on this machine.")
    assert reading.index_problems(chapter) == []
    index_page(chapter, "measures the KV cache's speed-up, 4.5 times on this machine.")
    assert any("says 4.5" in p for p in reading.index_problems(chapter))
    index_page(chapter, "measures the KV cache's speed-up, {glue:text}`page.ipynb::speedup:.1f` times.")
    assert reading.index_problems(chapter) == []
    index_page(chapter, "measures the KV cache's speed-up, {glue:text}`page.ipynb::slowdown:.1f` times.")
    assert any("does not record" in p for p in reading.index_problems(chapter))


def test_the_command_line_reports_and_fails(capsys):
    assert reading.main([str(CHAPTERS[0])]) in (0, 1)
    assert "reading:" in capsys.readouterr().out
