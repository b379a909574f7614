"""The book's architecture diagrams: drawn from code at build time, offline, in one style.

A chapter places a diagram with the ``{diagram}`` directive (a Sphinx
extension, listed in ``_config.yml``)::

    ```{diagram} encoder-decoder
    :alt: The encoder-decoder Transformer: ... (what the diagram shows, for a reader who cannot see it)

    The caption.
    ```

The name picks a function of :mod:`tools.diagrams.figures`; its drawing is made
of the shapes of :mod:`tools.diagrams.style` and saved as an SVG (text as
paths, no date: the same bytes on every machine) under ``_build/diagrams/``,
from where Sphinx copies it into the site like any other image. The alt text
is required and must describe the diagram (40 characters at least).
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

from .figures import DIAGRAMS

#: the shortest alt text that can say what a diagram shows
MIN_ALT = 40
HERE = Path(__file__).resolve().parent


def render(name: str, folder: Path) -> Path:
    """Draw diagram ``name`` into ``folder/<name>.svg`` (rewritten only when its bytes change); its path."""
    if name not in DIAGRAMS:
        raise KeyError(f"no diagram named {name!r}; the diagrams are {sorted(DIAGRAMS)}")
    svg = DIAGRAMS[name]().svg()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.svg"
    if not path.exists() or path.read_bytes() != svg:
        path.write_bytes(svg)
    return path


class Diagram(SphinxDirective):
    """``{diagram} name`` with ``:alt:`` (required) and an optional caption as its content."""

    required_arguments = 1
    has_content = True
    option_spec = {"alt": directives.unchanged_required, "width": directives.unchanged}

    def run(self):
        name = self.arguments[0]
        alt = " ".join(self.options.get("alt", "").split())
        if len(alt) < MIN_ALT:
            raise self.error(f"diagram {name!r}: its :alt: text is {len(alt)} characters; describe what the "
                             f"diagram shows in {MIN_ALT} or more")
        try:
            path = render(name, Path(self.env.srcdir) / "_build" / "diagrams")
        except KeyError as exc:
            raise self.error(str(exc)) from None
        for source in HERE.glob("*.py"):  # a change in any drawing code redraws the pages that use it
            self.env.note_dependency(str(source))
        image = nodes.image(uri="/" + path.relative_to(self.env.srcdir).as_posix(), alt=alt,
                            width=self.options.get("width", "100%"))
        figure = nodes.figure("", image, classes=["diagram"])
        if self.content:
            caption_text = "\n".join(self.content)
            parsed = nodes.Element()
            self.state.nested_parse(self.content, self.content_offset, parsed)
            caption = nodes.caption(caption_text, "", *parsed.children[0].children) if parsed.children else None
            if caption is not None:
                figure += caption
        return [figure]


def setup(app):
    app.add_directive("diagram", Diagram)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
