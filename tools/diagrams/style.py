"""The one visual style of the book's diagrams: a canvas in grid units and the shapes every diagram is made of.

A diagram is drawn in matplotlib on a :class:`Canvas` whose coordinates are
grid units (1 unit = :data:`UNIT` inches), with the shapes below: a box for a
tensor or a layer, a grid of cells for a matrix, an arrow for data flow, a sum
node for a residual. Colours come from one colour-blind-safe palette (Okabe
and Ito), one colour per kind of thing, so a reader learns them once:

========== ===================================================
kind       what it stands for
========== ===================================================
tensor     data: tokens, activations, images, patches
attention  any attention layer (self, masked, cross)
norm       a normalization layer (LayerNorm, RMSNorm)
mlp        a feed-forward network
embed      an embedding or a projection with learned weights
output     what the model returns (logits, a class)
========== ===================================================

Text is turned into paths when saved, so an SVG looks the same everywhere
without the fonts; saving is deterministic (no date, a fixed hash salt), so a
rebuilt book has byte-identical diagrams.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

#: inches per grid unit
UNIT = 0.42
#: Okabe-Ito colours, one per kind
FILL = {
    "tensor": "#d6e9f8",    # light sky blue
    "attention": "#f5cf8e",  # orange
    "norm": "#a9dcf3",      # sky blue
    "mlp": "#e3b9d3",       # reddish purple
    "embed": "#f7ef9e",     # yellow
    "output": "#b3dccb",    # bluish green
    "plain": "#ffffff",
    "shade": "#eeeeee",
}
EDGE = {"tensor": "#0072b2", "attention": "#b56d00", "norm": "#2b8cbe", "mlp": "#a0527f", "embed": "#8c7f00",
        "output": "#007a59", "plain": "#555555", "shade": "#999999"}
INK = "#222222"
MUTED = "#666666"
HIGHLIGHT = "#d55e00"  # vermillion: the one thing a diagram points at
FONT = 10


@dataclass
class Canvas:
    """A figure ``width`` x ``height`` grid units, y growing upwards."""

    width: float
    height: float

    def __post_init__(self):
        self.fig = plt.figure(figsize=(self.width * UNIT, self.height * UNIT))
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, self.width)
        self.ax.set_ylim(0, self.height)
        self.ax.set_axis_off()

    # -- shapes ---------------------------------------------------------------
    def box(self, x: float, y: float, w: float, h: float, text: str = "", kind: str = "tensor",
            size: float = FONT, dashed: bool = False, bold: bool = False) -> tuple[float, float, float, float]:
        """A rounded box with its lower left corner at ``(x, y)``; returns it as ``(x, y, w, h)``."""
        self.ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.18",
                                         facecolor=FILL[kind], edgecolor=EDGE[kind], linewidth=1.2,
                                         linestyle="--" if dashed else "-"))
        if text:
            self.text(x + w / 2, y + h / 2, text, size=size, bold=bold)
        return (x, y, w, h)

    def region(self, x: float, y: float, w: float, h: float, label: str = "", where: str = "left") -> None:
        """A light frame around a group of boxes (a block repeated L times, an encoder), labelled at one side."""
        self.ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.3",
                                         facecolor="#f7f7f7", edgecolor="#aaaaaa", linewidth=1.0, zorder=-1))
        if label:
            if where == "left":
                self.text(x - 0.25, y + h / 2, label, ha="right", size=FONT, color=MUTED)
            elif where == "right":
                self.text(x + w + 0.25, y + h / 2, label, ha="left", size=FONT, color=MUTED)
            else:
                self.text(x + w / 2, y + h + 0.3, label, size=FONT, color=MUTED)

    def grid(self, x: float, y: float, rows: int, cols: int, cell: float = 0.5, kind: str = "tensor",
             values=None, cmap: str = "cividis", highlight_rows=(), highlight_cells=(), blank_cells=()) -> None:
        """A matrix of ``rows`` x ``cols`` cells with its lower left corner at ``(x, y)``; row 0 at the top.

        ``values`` (rows x cols, in [0, 1]) colour the cells with a perceptually uniform map;
        ``blank_cells`` are drawn empty (a masked entry); highlighted rows or cells get a vermillion frame.
        """
        cm = matplotlib.colormaps[cmap]
        for r in range(rows):
            for c in range(cols):
                top = y + (rows - 1 - r) * cell
                if (r, c) in blank_cells:
                    face = "#ffffff"
                elif values is not None:
                    face = cm(0.15 + 0.8 * float(values[r][c]))
                else:
                    face = FILL[kind]
                self.ax.add_patch(Rectangle((x + c * cell, top), cell, cell, facecolor=face,
                                            edgecolor=EDGE[kind], linewidth=0.6))
                if (r, c) in blank_cells:
                    self.ax.plot([x + c * cell + 0.1 * cell, x + (c + 0.9) * cell],
                                 [top + 0.1 * cell, top + 0.9 * cell], color="#bbbbbb", linewidth=0.6)
        for r in highlight_rows:
            top = y + (rows - 1 - r) * cell
            self.ax.add_patch(Rectangle((x, top), cols * cell, cell, fill=False, edgecolor=HIGHLIGHT, linewidth=1.8))
        for r, c in highlight_cells:
            top = y + (rows - 1 - r) * cell
            self.ax.add_patch(Rectangle((x + c * cell, top), cell, cell, fill=False, edgecolor=HIGHLIGHT,
                                        linewidth=1.8))

    def arrow(self, start: tuple[float, float], end: tuple[float, float], text: str = "", color: str = INK,
              bend: float = 0.0, dashed: bool = False, size: float = FONT - 1, offset: tuple[float, float] = (0.2, 0)):
        """An arrow for data flowing from ``start`` to ``end``, optionally labelled beside its middle."""
        self.ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=color,
                                          linewidth=1.2, linestyle="--" if dashed else "-",
                                          connectionstyle=f"arc3,rad={bend}", shrinkA=0, shrinkB=0))
        if text:
            mx, my = (start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1]
            self.text(mx, my, text, ha="left", size=size, color=MUTED)

    def path(self, points: list[tuple[float, float]], color: str = INK, dashed: bool = False) -> None:
        """A line through ``points`` ending in an arrow head (a skip connection around a sublayer)."""
        xs, ys = zip(*points)
        self.ax.plot(xs[:-1], ys[:-1], color=color, linewidth=1.2, linestyle="--" if dashed else "-",
                     solid_capstyle="round")
        self.arrow(points[-2], points[-1], color=color, dashed=dashed)

    def add(self, x: float, y: float, r: float = 0.28) -> None:
        """The sum node of a residual connection, centred at ``(x, y)``."""
        self.ax.add_patch(Circle((x, y), r, facecolor="#ffffff", edgecolor=INK, linewidth=1.2))
        self.ax.plot([x - r * 0.6, x + r * 0.6], [y, y], color=INK, linewidth=1.2)
        self.ax.plot([x, x], [y - r * 0.6, y + r * 0.6], color=INK, linewidth=1.2)

    def text(self, x: float, y: float, s: str, size: float = FONT, ha: str = "center", va: str = "center",
             color: str = INK, bold: bool = False, rotation: float = 0) -> None:
        self.ax.text(x, y, s, fontsize=size, ha=ha, va=va, color=color, rotation=rotation,
                     fontweight="bold" if bold else "normal", family="DejaVu Sans")

    # -- output ---------------------------------------------------------------
    def svg(self) -> bytes:
        """The diagram as SVG bytes, the same on every machine and every run."""
        with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "course-diagram", "svg.id": None}):
            buf = io.BytesIO()
            self.fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, transparent=False,
                             facecolor="white")
        plt.close(self.fig)
        return buf.getvalue()

    def png(self, dpi: int = 110) -> bytes:
        """The diagram as PNG bytes (for looking at it while drawing it)."""
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
        plt.close(self.fig)
        return buf.getvalue()
