"""Figures of the chapter notebooks stay accessible and readable with colour-blind vision.

Four rules, checked on every chapter notebook by parsing each code cell with ``ast``:

1. Every code cell that draws a figure (it has an image output, or calls ``plt.show()``) carries
   alt text in ``metadata.mystnb.image.alt``, which myst-nb renders as the figure's ``<img alt>``:
   a description of what the figure shows, not a file name.
2. A notebook that imports matplotlib applies a colour-blind-safe style
   (``plt.style.use("tableau-colorblind10")``, see ``SAFE_STYLES``) before its first figure, so the
   default colour cycle is not tab10, whose red and green sit side by side.
3. Every colour map named in the code (``cmap=``, ``plt.get_cmap``, ``matplotlib.colormaps[...]``,
   ``plt.cm.<name>``, ``rcParams["image.cmap"]``) is perceptually uniform or a colour-blind-safe
   diverging map (``SAFE_CMAPS``).
4. No cell uses both a red and a green colour (named colours, ``tab:`` colours, hex codes and
   format strings such as ``"r-"``), since red against green is the pair most readers with
   colour-vision deficiencies cannot tell apart.

The checking functions take an nbformat notebook and return a list of problems (empty when the
notebook follows the rule); ``test_checks_flag_a_bad_notebook`` feeds them a synthetic notebook
that breaks every rule.
"""

from __future__ import annotations

import ast
import colorsys
import re
from pathlib import Path

import matplotlib
import matplotlib.colors as mcolors
import nbformat
import pytest

from nbtools import ROOT

NOTEBOOKS = sorted((ROOT / "chapters").glob("*/*.ipynb"))
IMAGE_MIMES = ("image/png", "image/jpeg", "image/svg+xml", "application/pdf")

# Styles whose colour cycle is designed for colour-blind readers (matplotlib's style library).
SAFE_STYLES = {"tableau-colorblind10", "seaborn-v0_8-colorblind"}
# Perceptually uniform sequential maps, greys, and colour-blind-safe diverging maps (each also reversed, "_r").
SAFE_CMAPS = {"viridis", "cividis", "magma", "inferno", "plasma", "Greys", "gray", "grey", "binary",
              "RdBu", "PuOr", "BrBG", "coolwarm"}
# Keyword arguments of matplotlib calls whose value is a colour or a list of colours.
COLOUR_KWARGS = {"color", "colors", "c", "fc", "ec", "facecolor", "facecolors", "edgecolor", "edgecolors",
                 "markerfacecolor", "mfc", "markeredgecolor", "mec", "markerfacecoloralt", "mfcalt",
                 "labelcolor", "gapcolor", "hatchcolor", "ecolor"}
# Calls that take a format string such as "r--" or "go".
FMT_CALLS = {"plot", "loglog", "semilogx", "semilogy", "errorbar", "plot_date"}
FMT = re.compile(r"^[-.:,ov^<>1-4sp*hH+xXDd|_]*([bgrcmykw])[-.:,ov^<>1-4sp*hH+xXDd|_]*$")
HEX = re.compile(r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$")
FILE_NAME = re.compile(r"^\S+\.(?:png|jpe?g|svg|gif|pdf|webp)$", re.I)
MIN_ALT = 40


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _tree(cell) -> ast.Module:
    """The cell's code as an AST; IPython magics and shell escapes become comments."""
    lines = ["# " + line if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines()]
    return ast.parse("\n".join(lines))


def _code_cells(nb):
    return [(i, cell) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]


def _has_image(cell) -> bool:
    return any(mime in out.get("data", {}) for out in cell.get("outputs", []) for mime in IMAGE_MIMES)


def _dotted(node) -> str:
    """'plt.style.use' for the expression plt.style.use; '' for anything that is not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _pyplot_call(call: ast.Call, names: set[str]) -> bool:
    """A call plt.<name>(...) (or pyplot.<name>, matplotlib.pyplot.<name>) with <name> in names."""
    dotted = _dotted(call.func)
    head, _, attr = dotted.rpartition(".")
    return attr in names and head in {"plt", "pyplot", "matplotlib.pyplot"}


def _calls(tree):
    return sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))


def _strings(node) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


# ---------------------------------------------------------------------------------------------
# Rule 1: alt text


def draws_figure(cell) -> bool:
    if _has_image(cell):
        return True
    return any(_pyplot_call(call, {"show"}) for call in _calls(_tree(cell)))


def alt_problems(nb) -> list[str]:
    problems = []
    for i, cell in _code_cells(nb):
        if not draws_figure(cell):
            continue
        alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
        if not isinstance(alt, str) or not alt.strip():
            problems.append(f"cell {i}: figure without alt text (metadata.mystnb.image.alt)")
        elif FILE_NAME.match(alt.strip()) or " " not in alt.strip():
            problems.append(f"cell {i}: alt text is a file name, not a description: {alt!r}")
        elif len(alt.strip()) < MIN_ALT:
            problems.append(f"cell {i}: alt text shorter than {MIN_ALT} characters: {alt!r}")
    return problems


# ---------------------------------------------------------------------------------------------
# Rule 2: colour-blind style before the first figure


def _imports_matplotlib(nb) -> bool:
    for _, cell in _code_cells(nb):
        for node in ast.walk(_tree(cell)):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "matplotlib" for a in node.names):
                return True
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "matplotlib":
                return True
    return False


def _style_names(call: ast.Call) -> list[str] | None:
    """The style names given to a style.use/style.context call (None if they are not literal)."""
    if not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in arg.elts):
        return [e.value for e in arg.elts]
    return None


DRAWING = {"figure", "subplots", "subplot", "subplot_mosaic", "axes", "plot", "imshow", "matshow", "bar", "barh",
           "scatter", "hist", "loglog", "semilogx", "semilogy", "pcolormesh", "contour", "contourf", "errorbar",
           "fill_between", "pie", "boxplot", "violinplot", "show"}


def style_problems(nb) -> list[str]:
    if not _imports_matplotlib(nb):
        return []
    problems, style_at, draw_at = [], None, None
    for i, cell in _code_cells(nb):
        for call in _calls(_tree(cell)):
            where = (i, call.lineno)
            dotted = _dotted(call.func)
            if dotted.endswith(("style.use", "style.context")):
                names = _style_names(call)
                if names is None or not any(name in SAFE_STYLES for name in names):
                    problems.append(f"cell {i}: {dotted}({ast.unparse(call.args[0]) if call.args else ''}) "
                                    f"is not one of the colour-blind-safe styles {sorted(SAFE_STYLES)}")
                elif style_at is None and dotted.endswith("style.use"):
                    style_at = where
            elif dotted.endswith(("rcdefaults", "rc_file_defaults")):
                problems.append(f"cell {i}: {dotted}() resets the colour-blind style")
            elif draw_at is None and _pyplot_call(call, DRAWING):
                draw_at = where
        if draw_at is None and _has_image(cell):
            draw_at = (i, float("inf"))
    if style_at is None:
        problems.append(f'no plt.style.use("tableau-colorblind10") (or another of {sorted(SAFE_STYLES)})')
    elif draw_at is not None and draw_at < style_at:
        problems.append(f"the first figure (cell {draw_at[0]}) comes before the colour-blind style "
                        f"(cell {style_at[0]})")
    return problems


# ---------------------------------------------------------------------------------------------
# Rule 3: colour maps


def _cmap_ok(name: str) -> bool:
    return name.removesuffix("_r") in SAFE_CMAPS


def _string_assignments(nb) -> dict[str, set]:
    """For each variable name, the values assigned to it anywhere in the notebook (strings, or None for others)."""
    values: dict[str, set] = {}
    for _, cell in _code_cells(nb):
        for node in ast.walk(_tree(cell)):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        value = node.value.value if isinstance(node.value, ast.Constant) else None
                        values.setdefault(target.id, set()).add(value)
    return values


def _cmap_names(node, assigned) -> list[str]:
    """The colour-map names an expression given as cmap= evaluates to, where they can be read from the code."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name):
        return [v for v in assigned.get(node.id, ()) if isinstance(v, str)]
    if isinstance(node, ast.Attribute) and node.attr in matplotlib.colormaps:
        return [node.attr]
    return []   # a call or subscript: checked where it is written


def colormap_problems(nb) -> list[str]:
    assigned = _string_assignments(nb)
    problems = []
    for i, cell in _code_cells(nb):
        used = []
        for node in ast.walk(_tree(cell)):
            if isinstance(node, ast.Call):
                dotted = _dotted(node.func)
                for kw in node.keywords:
                    if kw.arg == "cmap":
                        used += _cmap_names(kw.value, assigned)
                if dotted.endswith(("get_cmap", "set_cmap", "colormaps.get")) and node.args:
                    used += _cmap_names(node.args[0], assigned)
                if _pyplot_call(node, set(matplotlib.colormaps)):          # plt.jet() sets the default map
                    used.append(dotted.rpartition(".")[2])
            elif isinstance(node, ast.Subscript) and _dotted(node.value).split(".")[-1] == "colormaps":
                used += _cmap_names(node.slice, assigned)
            elif isinstance(node, ast.Attribute) and _dotted(node.value).split(".")[-1] == "cm" \
                    and node.attr in matplotlib.colormaps:                  # plt.cm.viridis, matplotlib.cm.jet
                used.append(node.attr)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:                                 # rcParams["image.cmap"] = "jet"
                    if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
                            and target.slice.value == "image.cmap":
                        used.append(node.value.value)
        for name in used:
            if not _cmap_ok(name):
                problems.append(f"cell {i}: colour map {name!r} is not in the colour-blind-safe list "
                                f"{sorted(SAFE_CMAPS)}")
    return problems


# ---------------------------------------------------------------------------------------------
# Rule 4: no red with green


def hue_class(spec: str) -> str | None:
    """'red', 'green' or None for a matplotlib colour specification."""
    if spec.startswith("C") and spec[1:].isdigit():   # "C0".."C9": the (colour-blind) cycle
        return None
    try:
        r, g, b = mcolors.to_rgb(spec)
    except ValueError:
        return None
    h, s, v = colorsys.rgb_to_hsv(r, g, b)
    if s < 0.3 or v < 0.2:
        return None                                   # greys, black, white, very dark colours
    degrees = 360 * h
    if degrees < 20 or degrees >= 335:
        return "red"
    if 75 <= degrees <= 160:
        return "green"
    return None


def cell_colours(cell) -> list[str]:
    """Colour specifications a cell's code gives to matplotlib."""
    found = []
    for node in ast.walk(_tree(cell)):
        if isinstance(node, ast.Call):
            attr = _dotted(node.func).rpartition(".")[2]
            for kw in node.keywords:
                if kw.arg in COLOUR_KWARGS:
                    found += _strings(kw.value)
            if attr in FMT_CALLS:
                found += [m.group(1) for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                          for m in [FMT.match(a.value)] if m]
            if attr in {"from_list", "ListedColormap", "LinearSegmentedColormap", "cycler"}:
                found += [s for a in node.args for s in _strings(a)]
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and re.search(r"colou?r|^c_", t.id, re.I)
                for target in node.targets for t in ast.walk(target)):
            found += _strings(node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value in COLOUR_KWARGS and value is not None:
                    found += _strings(value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and (HEX.match(node.value) or node.value.startswith(("tab:", "xkcd:"))):
            found.append(node.value)
    return found


def red_green_problems(nb) -> list[str]:
    problems = []
    for i, cell in _code_cells(nb):
        classes = {}
        for spec in cell_colours(cell):
            if (kind := hue_class(spec)) is not None:
                classes.setdefault(kind, []).append(spec)
        if "red" in classes and "green" in classes:
            problems.append(f"cell {i}: red {sorted(set(classes['red']))} and green {sorted(set(classes['green']))} "
                            "in one figure; use a colour-blind-safe palette (e.g. Okabe-Ito)")
    return problems


# ---------------------------------------------------------------------------------------------
# The tests


def test_there_are_notebooks_with_figures():
    assert len(NOTEBOOKS) >= 20
    figures = sum(draws_figure(c) for p in NOTEBOOKS for _, c in _code_cells(nbformat.read(p, as_version=4)))
    assert figures >= 40, "the chapter notebooks lost their figures, or the glob is wrong"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_every_page_shows_a_figure_or_a_diagram(path):
    nb = nbformat.read(path, as_version=4)
    drawn = any(draws_figure(c) for _, c in _code_cells(nb))
    diagram = any(c.cell_type == "markdown" and "```{diagram}" in c.source for c in nb.cells)
    assert drawn or diagram, f"{_id(path)} has no figure and no diagram: a page shows what it explains"


RULES = {"alt text": alt_problems, "colour-blind style first": style_problems,
         "safe colour maps": colormap_problems, "no red with green": red_green_problems}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_figures_follow_the_rule(path, rule):
    problems = RULES[rule](nbformat.read(path, as_version=4))
    assert not problems, f"{_id(path)} ({rule}):\n" + "\n".join(problems)


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _figure_cell(source, alt=None):
    cell = nbformat.v4.new_code_cell(source)
    figure = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
    cell.outputs = [nbformat.v4.new_output("display_data", data=figure)]
    if alt is not None:
        cell.metadata["mystnb"] = {"image": {"alt": alt}}
    return cell


GOOD_ALT = "Line plot of the loss against the step: it falls from 3 to 0.5 and then levels off."


def test_checks_flag_a_bad_notebook():
    bad = _notebook(
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nimport numpy as np"),
        _figure_cell('plt.imshow(np.eye(3), cmap="jet")\nplt.show()'),                       # no alt, jet
        _figure_cell('fig, ax = plt.subplots()\nax.plot([1, 2], "r-")\nax.plot([2, 1], color="tab:green")',
                     alt="figure.png"),                                                       # file name; red + green
        _figure_cell('cm = plt.get_cmap("RdYlGn")\nplt.scatter([1], [2], c=[0], cmap=plt.cm.rainbow)', alt="a plot"),
        nbformat.v4.new_code_cell('plt.style.use("ggplot")'),
    )
    alt = alt_problems(bad)
    assert any("cell 1" in p and "without alt" in p for p in alt)
    assert any("cell 2" in p and "file name" in p for p in alt)
    assert any("cell 3" in p and "shorter" in p for p in alt)
    cmaps = colormap_problems(bad)
    assert any("'jet'" in p for p in cmaps)
    assert any("'RdYlGn'" in p for p in cmaps)
    assert any("'rainbow'" in p for p in cmaps)
    assert any("cell 2" in p for p in red_green_problems(bad))
    style = style_problems(bad)
    assert any("ggplot" in p for p in style)
    assert any("no plt.style.use" in p for p in style)


def test_style_after_the_first_figure_is_flagged():
    late = _notebook(
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt"),
        _figure_cell("plt.plot([1, 2])\nplt.show()", alt=GOOD_ALT),
        nbformat.v4.new_code_cell('plt.style.use("tableau-colorblind10")'),
    )
    assert any("comes before" in p for p in style_problems(late))


def test_checks_pass_a_good_notebook():
    good = _notebook(
        nbformat.v4.new_code_cell('import matplotlib.pyplot as plt\n\nplt.style.use("tableau-colorblind10")\n'
                                  'cmap = "cividis"'),
        _figure_cell('fig, ax = plt.subplots()\nax.imshow([[0, 1]], cmap=cmap)\n'
                     'ax.plot([1, 2], "o-", color=plt.cm.viridis(0.2))\n'
                     'ax.plot([2, 1], "s--", color="#E69F00")\nax.plot([0, 1], color="#0072B2")\nplt.show()',
                     alt=GOOD_ALT),
        nbformat.v4.new_code_cell('with open("corpus.txt", "r") as f:\n    text = f.read()'),   # "r" is not a colour
    )
    assert alt_problems(good) == []
    assert style_problems(good) == []
    assert colormap_problems(good) == []
    assert red_green_problems(good) == []


@pytest.mark.parametrize("spec, kind", [("r", "red"), ("red", "red"), ("tab:red", "red"), ("#d62728", "red"),
                                        ("crimson", "red"), ("g", "green"), ("tab:green", "green"),
                                        ("#2ca02c", "green"), ("lime", "green"), ("darkgreen", "green"),
                                        ("#0072B2", None), ("#E69F00", None), ("#D55E00", None), ("0.6", None),
                                        ("white", None), ("C2", None)])
def test_hue_classes(spec, kind):
    assert hue_class(spec) == kind
