"""A small SVG writer for the report's plots: a figure of stacked panels, each with its axes (linear or log,
nice ticks, grid), lines with markers, error bars, reference lines, horizontal bars and a legend.

Written directly (no plotting library), so the same input gives the same bytes on every machine: coordinates
are rounded to 0.01 px, every text is XML-escaped and drawn as written, and nothing carries an id (several
plots sit inline in one HTML page). Each figure is an image to assistive technology: ``role="img"`` with its
label as ``aria-label`` and ``<title>``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from accelbench.reports.scales import Scale, Tick, domain

TAB10 = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
FONT = "DejaVu Sans, Verdana, sans-serif"
TITLE_PX, LABEL_PX, TICK_PX, LEGEND_PX, CATEGORY_PX = 12.0, 11.0, 10.0, 9.5, 9.0
ErrorBar = tuple[float, float, float, float, float, float]  # x, y, x low, x high, y low, y high
DASHES = {"solid": "", "dashed": "5.5 2.4", "dotted": "1.5 2.5", "dashdot": "6.4 2.4 1.5 2.4"}

# DejaVu Sans advance widths of ' ' … '~' in hundredths of an em (from the font's hmtx table): the layout
# measures texts with them; other characters count as 0.64 em
_WIDTHS = (
    32,
    40,
    46,
    84,
    64,
    95,
    78,
    27,
    39,
    39,
    50,
    84,
    32,
    36,
    32,
    34,
    64,
    64,
    64,
    64,
    64,
    64,
    64,
    64,
    64,
    64,
    34,
    34,
    84,
    84,
    84,
    53,
    100,
    68,
    69,
    70,
    77,
    63,
    58,
    77,
    75,
    30,
    30,
    66,
    56,
    86,
    75,
    79,
    60,
    79,
    69,
    63,
    61,
    73,
    68,
    99,
    68,
    61,
    68,
    39,
    34,
    39,
    84,
    50,
    50,
    61,
    63,
    55,
    63,
    62,
    35,
    63,
    63,
    28,
    28,
    58,
    28,
    97,
    63,
    61,
    63,
    63,
    41,
    52,
    39,
    63,
    59,
    82,
    59,
    59,
    52,
    64,
    34,
    64,
    84,
)


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def num(x: float) -> str:
    """A coordinate as written: at most two decimals, no trailing zeros, never "-0"."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def text_width(text: str, size: float) -> float:
    return size * sum(_WIDTHS[ord(c) - 32] if 32 <= ord(c) < 127 else 64 for c in text) / 100.0


def text(x: float, y: float, content: str, size: float, anchor: str = "start", extra: str = "") -> str:
    """One line of text; ``y`` is the middle of the line (the baseline sits 0.35 em below it)."""
    attrs = f' text-anchor="{anchor}"' if anchor != "start" else ""
    return (
        f'<text x="{num(x)}" y="{num(y + 0.35 * size)}" font-size="{num(size)}"{attrs}{extra}>'
        f"{esc(content)}</text>"
    )


def path(
    d: str, stroke: str, width: float = 1.0, dash: str = "solid", fill: str = "none", extra: str = ""
) -> str:
    dashes = " ".join(num(float(v) * max(width, 1.0) / 1.5) for v in DASHES[dash].split())
    dash_attr = f' stroke-dasharray="{dashes}"' if dashes else ""
    return f'<path d="{d}" fill="{fill}" stroke="{stroke}" stroke-width="{num(width)}"{dash_attr}{extra}/>'


def polyline(points: Sequence[tuple[float, float]]) -> str:
    return "M" + "L".join(f"{num(x)} {num(y)}" for x, y in points)


def _polygon(x: float, y: float, r: float, shape: Sequence[tuple[float, float]]) -> str:
    return polyline([(x + r * dx, y + r * dy) for dx, dy in shape]) + "Z"


_STAR = tuple(
    (
        math.sin(math.pi * i / 5) * (1.2 if i % 2 == 0 else 0.5),
        -math.cos(math.pi * i / 5) * (1.2 if i % 2 == 0 else 0.5),
    )
    for i in range(10)
)
_PLUS = (
    (-0.35, -1.1),
    (0.35, -1.1),
    (0.35, -0.35),
    (1.1, -0.35),
    (1.1, 0.35),
    (0.35, 0.35),
    (0.35, 1.1),
    (-0.35, 1.1),
    (-0.35, 0.35),
    (-1.1, 0.35),
    (-1.1, -0.35),
    (-0.35, -0.35),
)
_SHAPES = {  # outlines of radius about 1 (a circle is drawn as arcs)
    "s": ((-0.9, -0.9), (0.9, -0.9), (0.9, 0.9), (-0.9, 0.9)),
    "^": ((0.0, -1.15), (1.0, 0.7), (-1.0, 0.7)),
    "v": ((0.0, 1.15), (1.0, -0.7), (-1.0, -0.7)),
    "D": ((0.0, -1.15), (0.8, 0.0), (0.0, 1.15), (-0.8, 0.0)),
    "P": _PLUS,
    "X": tuple(((a - b) * 0.7071, (a + b) * 0.7071) for a, b in _PLUS),  # the plus turned 45°
    "*": _STAR,
}


def marker(shape: str, x: float, y: float, r: float, color: str, filled: bool) -> str:
    """A marker centred on (x, y): o s ^ v D P X * filled or hollow, or x (two strokes)."""
    if shape == "x":
        d = f"M{num(x - r)} {num(y - r)}L{num(x + r)} {num(y + r)}M{num(x - r)} {num(y + r)}L{num(x + r)} {num(y - r)}"
        return path(d, color, 2.0)
    if shape == "o":
        d = f"M{num(x - r)} {num(y)}a{num(r)} {num(r)} 0 1 0 {num(2 * r)} 0a{num(r)} {num(r)} 0 1 0 {num(-2 * r)} 0Z"
    else:
        d = _polygon(x, y, r, _SHAPES[shape])
    return path(d, color, 1.2 if not filled else 0.8, fill=color if filled else "none")


@dataclass(frozen=True)
class Style:
    """How a series is drawn: its colour, marker (None: none) and line (None: markers only)."""

    color: str
    marker: str | None = "o"
    filled: bool = True
    line: str | None = "solid"  # a key of DASHES
    width: float = 1.5
    size: float = 4.0  # marker radius, px


@dataclass(frozen=True)
class Bar:
    """A horizontal bar from the axis' left edge to ``value``."""

    value: float
    color: str
    label: str
    opacity: float = 0.95
    hatch: bool = False
    edge: str = "black"
    edge_width: float = 0.6
    low: float | None = None  # a whisker from low to high: a measured 95 % interval, or a projected range
    high: float | None = None
    range_dashed: bool = False  # a projected range: dashed, with open caps, unlike a measured interval


@dataclass
class Axes:
    """One panel: what to draw in data coordinates, and how its axes read."""

    title: str
    xlabel: str
    ylabel: str
    xlog: bool = False
    ylog: bool = False
    height: float = 230.0
    lines: list[tuple[list[tuple[float, float]], Style]] = field(default_factory=list)
    errorbars: list[tuple[list[ErrorBar], str, str]] = field(default_factory=list)  # bars, colour, dash
    bands: list[tuple[list[tuple[float, float, float]], str, str]] = field(default_factory=list)
    refs: list[tuple[str, float, Style]] = field(default_factory=list)  # ("h" | "v", value, style)
    bars: list[Bar] = field(default_factory=list)
    legend: list[tuple[str, Style]] = field(default_factory=list)
    xcategories: list[str] | None = None  # x ticks at 0, 1, …: these labels, drawn at 30°
    note: str | None = None  # said in the middle of an empty panel

    def line(self, points: Sequence[tuple[float, float]], style: Style, label: str | None = None) -> None:
        self.lines.append((list(points), style))
        if label is not None:
            self.legend.append((label, style))

    def errorbar(self, bars: Sequence[ErrorBar], color: str, line: str = "solid") -> None:
        """(x, y, x low, x high, y low, y high) per point: its 95 % interval as a cross with caps (``line``
        "dashed": a projected range)."""
        self.errorbars.append((list(bars), color, line))

    def band(self, points: Sequence[tuple[float, float, float]], color: str, line: str = "solid") -> None:
        """(x, y low, y high) per point: a shaded band between the two curves, outlined with ``line``."""
        self.bands.append((sorted(points), color, line))

    def ref(self, axis: str, value: float, style: Style, label: str) -> None:
        """A line across the whole panel at y = value (axis "h") or x = value ("v")."""
        self.refs.append((axis, value, style))
        self.legend.append((label, style))

    def scales(self) -> tuple[Scale, Scale]:
        if self.bars:  # bars start at the left edge: it sits below the smallest value
            values = [v for b in self.bars for v in (b.value, b.low, b.high) if v is not None and v > 0]
            values += [v for axis, v, _ in self.refs if axis == "v" and v > 0]
            lo, hi = min(values or [1.0]), max(values or [10.0])
            lo = lo / 10 ** max(0.3, 0.12 * math.log10(hi / lo))
            return domain([lo, hi], self.xlog, margin=0.03), Scale(-0.6, len(self.bars) - 0.4)
        xs = [x for pts, _ in self.lines for x, _ in pts]
        ys = [y for pts, _ in self.lines for _, y in pts]
        for pts_err, _, _ in self.errorbars:
            xs += [v for p in pts_err for v in (p[2], p[3])]
            ys += [v for p in pts_err for v in (p[4], p[5])]
        for band, _, _ in self.bands:
            xs += [x for x, _, _ in band]
            ys += [v for _, lo, hi in band for v in (lo, hi)]
        xs += [v for axis, v, _ in self.refs if axis == "v"]
        ys += [v for axis, v, _ in self.refs if axis == "h"]
        xscale = (
            Scale(-0.5, max(len(self.xcategories), 1) - 0.5)
            if self.xcategories is not None
            else domain(xs, self.xlog)
        )
        return xscale, domain(ys, self.ylog)

    def xticks(self, xs: Scale) -> list[Tick]:
        if self.xcategories is None:
            return xs.ticks()
        every = math.ceil(len(self.xcategories) / 16)  # hundreds of runs: a label for every n-th
        return [Tick(float(i), t) for i, t in enumerate(self.xcategories) if i % every == 0]

    def yticks(self, ys: Scale) -> list[Tick]:
        return [Tick(float(i), b.label) for i, b in enumerate(self.bars)] if self.bars else ys.ticks()


_PAD, _TICK, _SAMPLE, _CAP = 8.0, 4.0, 26.0, 2.7
_ROW = LEGEND_PX * 1.5  # one legend entry


@dataclass
class _Layout:
    """One panel with its scales and ticks worked out."""

    ax: Axes
    xs: Scale
    ys: Scale
    xticks: list[Tick]
    yticks: list[Tick]

    @property
    def plot_height(self) -> float:  # a long legend makes the panel taller
        return max(self.ax.height, _legend_size(self.ax.legend)[1])

    @property
    def xtick_height(self) -> float:
        if self.ax.xcategories is None:
            return TICK_PX * 1.4
        return (
            max((text_width(t.label, CATEGORY_PX) * 0.5 for t in self.xticks), default=0.0)
            + CATEGORY_PX * 1.2
        )


class Figure:
    """Panels stacked top to bottom, sharing the left margin and the plot width; legends to the right."""

    def __init__(self, label: str, plot_width: float = 520.0) -> None:
        self.label = label  # what the figure shows, for assistive technology
        self.plot_width = plot_width
        self.panels: list[Axes] = []

    def axes(self, title: str, xlabel: str, ylabel: str, height: float = 230.0) -> Axes:
        ax = Axes(title, xlabel, ylabel, height=height)
        self.panels.append(ax)
        return ax

    def svg(self) -> str:
        layouts = []
        for ax in self.panels:
            xs, ys = ax.scales()
            layouts.append(_Layout(ax, xs, ys, ax.xticks(xs), ax.yticks(ys)))
        ytick_w = max((text_width(t.label, TICK_PX) for lay in layouts for t in lay.yticks), default=0.0)
        ylabel_w = LABEL_PX * 1.3 + 6 if any(lay.ax.ylabel for lay in layouts) else 0.0
        left = _PAD + ylabel_w + ytick_w + _TICK + 4
        for lay in layouts:  # a slanted first run label reaches left of the plot
            if lay.ax.xcategories and lay.xticks:
                reach = (
                    text_width(lay.xticks[0].label, CATEGORY_PX) * 0.87 - lay.xs.frac(0.0) * self.plot_width
                )
                left = max(left, _PAD + reach)
        legend_w = max((_legend_size(lay.ax.legend)[0] for lay in layouts), default=0.0)
        width = left + self.plot_width + (12 + legend_w + _PAD if legend_w else 2 * _PAD)
        titles = [text_width(lay.ax.title, TITLE_PX) for lay in layouts]
        width = max([width] + [left + (self.plot_width + t) / 2 + _PAD for t in titles])
        body, y = [], 0.0
        for lay in layouts:
            top = y + _PAD + TITLE_PX * 1.6
            body += _panel(lay, left, top, self.plot_width)
            y = top + lay.plot_height + _TICK + 4 + lay.xtick_height + LABEL_PX * 1.4 + _PAD + 6
        height = y
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(width)}" height="{num(height)}" '
            f'viewBox="0 0 {num(width)} {num(height)}" role="img" aria-label="{esc(self.label)}" '
            f'font-family="{FONT}" fill="#222">'
        )
        title = f"<title>{esc(self.label)}</title>"
        background = f'<rect width="{num(width)}" height="{num(height)}" fill="white"/>'
        return "\n".join([head, title, background, *body, "</svg>"]) + "\n"


def _panel(lay: _Layout, left: float, top: float, plot_w: float) -> list[str]:
    ax, plot_h = lay.ax, lay.plot_height
    bottom, right = top + plot_h, left + plot_w

    def px(v: float) -> float:
        return left + lay.xs.frac(v) * plot_w

    def py(v: float) -> float:
        return bottom - lay.ys.frac(v) * plot_h

    def shown(x: float, y: float) -> bool:
        return lay.xs.contains(x) and lay.ys.contains(y)

    grid = [f"M{num(px(t.value))} {num(top)}V{num(bottom)}" for t in lay.xticks]
    if not ax.bars:
        grid += [f"M{num(left)} {num(py(t.value))}H{num(right)}" for t in lay.yticks]
    out = ['<g class="panel">', path("".join(grid), "#e3e3e3", 0.8), '<g class="data">']
    out += _bars(ax.bars, px, py, left)
    for axis, value, style in ax.refs:
        d = (
            f"M{num(left)} {num(py(value))}H{num(right)}"
            if axis == "h"
            else f"M{num(px(value))} {num(top)}V{num(bottom)}"
        )
        out.append(path(d, style.color, style.width, style.line or "solid"))
    for band, color, line in ax.bands:
        kept = [(x, lo, hi) for x, lo, hi in band if shown(x, lo) and shown(x, hi)]
        if len(kept) > 1:
            outline = [(px(x), py(hi)) for x, _, hi in kept] + [
                (px(x), py(lo)) for x, lo, _ in reversed(kept)
            ]
            out.append(
                path(polyline(outline) + "Z", color, 0.6, line, fill=color, extra=' fill-opacity="0.15"')
            )
    for bars, color, line in ax.errorbars:
        drawn = [b for b in bars if shown(b[0], b[1]) and shown(b[2], b[4]) and shown(b[3], b[5])]
        out.append(path(_error_path(drawn, px, py), color, 0.8 if line == "solid" else 1.1, line))
    for points, style in ax.lines:
        pts = [(px(x), py(y)) for x, y in points if shown(x, y)]
        if style.line and len(pts) > 1:
            out.append(path(polyline(pts), style.color, style.width, style.line))
        if style.marker:
            out += [marker(style.marker, x, y, style.size, style.color, style.filled) for x, y in pts]
    out.append("</g>")
    out += _frame(lay, left, top, plot_w, px, py)
    out += _legend(ax.legend, right + 12, top)
    if ax.note:
        out.append(text(left + plot_w / 2, top + plot_h / 2, ax.note, LABEL_PX, "middle", ' fill="#666"'))
    return [*out, "</g>"]


def _error_path(bars: list[ErrorBar], px: Callable[[float], float], py: Callable[[float], float]) -> str:
    d = []
    for x, y, xlo, xhi, ylo, yhi in bars:
        cx, cy = px(x), py(y)
        if xhi > xlo:
            x0, x1 = px(xlo), px(xhi)
            d.append(
                f"M{num(x0)} {num(cy)}H{num(x1)}M{num(x0)} {num(cy - _CAP)}V{num(cy + _CAP)}"
                f"M{num(x1)} {num(cy - _CAP)}V{num(cy + _CAP)}"
            )
        if yhi > ylo:
            y0, y1 = py(ylo), py(yhi)
            d.append(
                f"M{num(cx)} {num(y0)}V{num(y1)}M{num(cx - _CAP)} {num(y0)}H{num(cx + _CAP)}"
                f"M{num(cx - _CAP)} {num(y1)}H{num(cx + _CAP)}"
            )
    return "".join(d)


def _hatch(x0: float, y0: float, x1: float, y1: float, spacing: float = 6.0) -> str:
    """Hatching "//" over the rectangle: the lines x + y = c for every multiple c of ``spacing`` that crosses it."""
    d = []
    for k in range(math.ceil((x0 + y0) / spacing), math.floor((x1 + y1) / spacing) + 1):
        c = k * spacing
        xa, xb = max(x0, c - y1), min(x1, c - y0)
        if xb > xa:
            d.append(f"M{num(xa)} {num(c - xa)}L{num(xb)} {num(c - xb)}")
    return "".join(d)


def _bars(
    bars: list[Bar], px: Callable[[float], float], py: Callable[[float], float], left: float
) -> list[str]:
    out = []
    for i, bar in enumerate(bars):
        x1, y0, y1 = px(bar.value), py(i + 0.4), py(i - 0.4)
        out.append(
            f'<rect x="{num(left)}" y="{num(y0)}" width="{num(x1 - left)}" height="{num(y1 - y0)}" '
            f'fill="{bar.color}" fill-opacity="{num(bar.opacity)}"/>'
        )
        if bar.hatch:
            out.append(path(_hatch(left, y0, x1, y1), "#333", 0.6, extra=' stroke-opacity="0.6"'))
        out.append(
            f'<rect x="{num(left)}" y="{num(y0)}" width="{num(x1 - left)}" height="{num(y1 - y0)}" '
            f'fill="none" stroke="{bar.edge}" stroke-width="{num(bar.edge_width)}"/>'
        )
        if bar.low is not None and bar.high is not None and bar.high > bar.low:
            out.append(_whisker(px(bar.low), px(bar.high), py(float(i)), bar.range_dashed))
    return out


def _whisker(x0: float, x1: float, cy: float, dashed: bool) -> str:
    """A measured interval: a solid line with closed caps; a projected range: dashed, with open brackets
    ("[" and "]" turned outwards), so the two never read alike even in grey."""
    if not dashed:
        d = (
            f"M{num(x0)} {num(cy)}H{num(x1)}M{num(x0)} {num(cy - _CAP * 1.5)}V{num(cy + _CAP * 1.5)}"
            f"M{num(x1)} {num(cy - _CAP * 1.5)}V{num(cy + _CAP * 1.5)}"
        )
        return path(d, "#111", 1.4)
    d = f"M{num(x0)} {num(cy)}H{num(x1)}"
    caps = (
        f"M{num(x0 + _CAP)} {num(cy - _CAP * 1.5)}H{num(x0)}V{num(cy + _CAP * 1.5)}H{num(x0 + _CAP)}"
        f"M{num(x1 - _CAP)} {num(cy - _CAP * 1.5)}H{num(x1)}V{num(cy + _CAP * 1.5)}H{num(x1 - _CAP)}"
    )
    return path(d, "#111", 1.4, "dashed") + path(caps, "#111", 1.2)


def _frame(
    lay: _Layout,
    left: float,
    top: float,
    plot_w: float,
    px: Callable[[float], float],
    py: Callable[[float], float],
) -> list[str]:
    """The box, the ticks (minor ones shorter), their labels and the axis labels and title."""
    ax, bottom = lay.ax, top + lay.plot_height
    d = [f"M{num(left)} {num(top)}H{num(left + plot_w)}V{num(bottom)}H{num(left)}Z"]
    d += [f"M{num(px(t.value))} {num(bottom)}v{num(_TICK)}" for t in lay.xticks]
    d += [f"M{num(left)} {num(py(t.value))}h{num(-_TICK)}" for t in lay.yticks]
    d += [f"M{num(px(v))} {num(bottom)}v{num(_TICK / 2)}" for v in lay.xs.minor()]
    d += [f"M{num(left)} {num(py(v))}h{num(-_TICK / 2)}" for v in lay.ys.minor()]
    out = [path("".join(d), "#222", 0.8)]
    label_y = bottom + _TICK + 2
    for t in lay.xticks:
        if ax.xcategories is None:
            out.append(text(px(t.value), label_y + TICK_PX * 0.6, t.label, TICK_PX, "middle"))
        else:  # run labels, slanted so that long ones do not overlap
            x = px(t.value)
            out.append(
                text(
                    x,
                    label_y + 4,
                    t.label,
                    CATEGORY_PX,
                    "end",
                    f' transform="rotate(-30 {num(x)} {num(label_y + 4)})"',
                )
            )
    out += [text(left - _TICK - 3, py(t.value), t.label, TICK_PX, "end") for t in lay.yticks]
    if ax.xlabel:
        xlabel_y = label_y + lay.xtick_height + LABEL_PX * 0.7
        out.append(text(left + plot_w / 2, xlabel_y, ax.xlabel, LABEL_PX, "middle"))
    if ax.ylabel:
        ylabel_x, mid = _PAD + LABEL_PX * 0.6, top + lay.plot_height / 2
        rotate = f' transform="rotate(-90 {num(ylabel_x)} {num(mid)})"'
        out.append(text(ylabel_x, mid, ax.ylabel, LABEL_PX, "middle", rotate))
    if ax.title:  # centred over the plot; a title wider than the figure's left part starts at its edge
        cx = max(left + plot_w / 2, _PAD + text_width(ax.title, TITLE_PX) / 2)
        out.append(text(cx, top - TITLE_PX * 0.9, ax.title, TITLE_PX, "middle"))
    return out


def _legend_size(entries: list[tuple[str, Style]]) -> tuple[float, float]:
    if not entries:
        return 0.0, 0.0
    return 2 * 5 + _SAMPLE + 6 + max(text_width(label, LEGEND_PX) for label, _ in entries), 10 + _ROW * len(
        entries
    )


def _legend(entries: list[tuple[str, Style]], x: float, y: float) -> list[str]:
    """A box of samples (line and marker as drawn) and labels, its top left at (x, y)."""
    if not entries:
        return []
    w, h = _legend_size(entries)
    box = (
        f'<rect x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}" fill="white" stroke="#ccc" '
        'stroke-width="0.8" rx="2"/>'
    )
    out = ['<g class="legend">', box]
    for i, (label, style) in enumerate(entries):
        cy = y + 5 + _ROW * (i + 0.5)
        if style.line:
            out.append(path(f"M{num(x + 5)} {num(cy)}h{num(_SAMPLE)}", style.color, style.width, style.line))
        if style.marker:
            out.append(
                marker(style.marker, x + 5 + _SAMPLE / 2, cy, min(style.size, 4.0), style.color, style.filled)
            )
        out.append(text(x + 5 + _SAMPLE + 6, cy, label, LEGEND_PX))
    return [*out, "</g>"]
