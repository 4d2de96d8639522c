"""A static SVG picture of an evalnb figure, drawn here in Python: no browser, no kaleido.

Viewers without JavaScript (GitHub, nbviewer, a mail client) show a picture, not a chart. kaleido
needs a Chrome on the user's machine; evalnb's figures are a small known set (bars with intervals,
forests of intervals, scatter with error bars, heatmaps, reference lines, subplot titles), so this
module draws exactly those from the figure's JSON. It reads plotly's layout (margins, axis domains,
category order, ranges, bar modes) the way plotly does, closely enough for a faithful picture;
hover text and anything else interactive stays with the live chart.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

__all__ = ["figure_svg"]

WIDTH = 800
FONT = "font-family:DejaVu Sans,Arial,sans-serif"
_TAGS = re.compile(r"<[^>]+>")
_BREAK = re.compile(r"<br\s*/?>", re.I)
LINE_PX = 1.25  # a line's height, in font sizes


def figure_svg(figure: Any, width: int = WIDTH) -> str:
    """The figure (a plotly Figure or its JSON) as one ``<svg>`` element with a fixed size."""
    spec = figure.to_plotly_json() if hasattr(figure, "to_plotly_json") else dict(figure)
    return _Drawing(_plain(spec), width).svg()


_TYPED = {"f8": "d", "f4": "f", "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I"}


def _plain(value: Any) -> Any:
    """Plain lists and dicts: numpy and pandas values unwrapped, plotly's typed arrays
    (``{"dtype", "bdata", "shape"}``, how plotly stores numpy data in JSON) decoded."""
    if isinstance(value, dict):
        if "bdata" in value and value.get("dtype") in _TYPED:
            return _typed(value)
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _plain(value.tolist())
    return value


def _typed(spec: dict[str, Any]) -> list[Any]:
    import array
    import base64
    import sys

    values = array.array(_TYPED[spec["dtype"]], base64.b64decode(spec["bdata"]))
    if sys.byteorder != "little":
        values.byteswap()
    flat = values.tolist()
    shape = spec.get("shape")
    if isinstance(shape, str):
        shape = [int(n) for n in shape.split(",")]
    if shape and len(shape) == 2:
        rows, cols = shape
        return [flat[r * cols:(r + 1) * cols] for r in range(rows)]
    return flat


def _text(value: Any) -> str:
    """Plotly's HTML-ish label text as plain, escaped SVG text (a line break becomes a space)."""
    text = _BREAK.sub(" ", str(value if value is not None else ""))
    return html.escape(html.unescape(_TAGS.sub("", text)))


def _lines(value: Any) -> list[str]:
    """Plotly label text split at its ``<br>`` line breaks, each line as `_text`."""
    return [_text(part) for part in _BREAK.split(str(value if value is not None else ""))]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if step * factor >= raw:
            step *= factor
            break
    first = math.ceil(low / step - 1e-9) * step
    ticks, x = [], first
    while x <= high + 1e-9 * step:
        ticks.append(round(x, 12))
        x += step
    return ticks


def _tick_label(value: float, fmt: str | None) -> str:
    if fmt and fmt.endswith("%"):
        digits = int(fmt[1:-1] or 0) if fmt[1:-1].isdigit() else 0
        return f"{value * 100:.{digits}f}%"
    return f"{value:.6g}"


class _Axis:
    """One axis: where it sits on the canvas and how a value maps to a pixel."""

    def __init__(self, name: str, spec: dict[str, Any], start: float, end: float, reverse_pixels: bool):
        self.name, self.spec = name, spec
        self.start, self.end = start, end  # pixels along the axis; y grows downward
        self.reverse_pixels = reverse_pixels
        self.categories: list[str] = list(map(str, spec.get("categoryarray") or []))
        self.numeric_values: list[float] = []
        self.is_category = bool(self.categories) or spec.get("type") == "category"
        self.low, self.high = 0.0, 1.0

    def add(self, values: Any) -> None:
        for v in values or []:
            if isinstance(v, str) and _num(v) is None:
                self.is_category = True
                if v not in self.categories:
                    self.categories.append(v)
            elif (x := _num(v)) is not None:
                self.numeric_values.append(x)

    def settle(self) -> None:
        if self.is_category:
            return
        fixed = self.spec.get("range")
        if fixed and len(fixed) == 2 and all(_num(v) is not None for v in fixed):
            self.low, self.high = float(fixed[0]), float(fixed[1])
            return
        values = self.numeric_values or [0.0, 1.0]
        low, high = min(values), max(values)
        if self.spec.get("rangemode") == "tozero":
            low, high = min(low, 0.0), max(high, 0.0)
        if high == low:
            low, high = low - 1, high + 1
        pad = (high - low) * 0.06
        self.low, self.high = low - pad, high + pad

    def reversed(self) -> bool:
        flip = self.spec.get("autorange") == "reversed"
        return flip != self.reverse_pixels

    def pos(self, value: Any) -> float | None:
        """Pixel of a value (the band centre for a category)."""
        if self.is_category:
            key = str(value)
            if key not in self.categories:
                return None
            n = len(self.categories)
            i = self.categories.index(key)
            share = (i + 0.5) / n
        else:
            x = _num(value)
            if x is None:
                return None
            share = (x - self.low) / (self.high - self.low)
        if self.reversed():
            share = 1 - share
        return self.start + share * (self.end - self.start)

    def band(self) -> float:
        return abs(self.end - self.start) / max(1, len(self.categories))

    def ticks(self) -> list[tuple[float, str]]:
        if self.is_category:
            return [(self.pos(c), c) for c in self.categories]  # type: ignore[misc]
        fmt = self.spec.get("tickformat")
        return [(self.pos(t), _tick_label(t, fmt)) for t in _nice_ticks(self.low, self.high)]  # type: ignore[misc]


class _Drawing:
    def __init__(self, spec: dict[str, Any], width: int):
        self.data = list(spec.get("data") or [])
        self.layout = dict(spec.get("layout") or {})
        self.width = int(self.layout.get("width") or width)
        self.height = int(self.layout.get("height") or 450)
        margin = self.layout.get("margin") or {}
        self.left, self.right = float(margin.get("l", 80)), float(margin.get("r", 40))
        self.top, self.bottom = float(margin.get("t", 80)), float(margin.get("b", 80))
        self.parts: list[str] = []
        self.axes: dict[str, _Axis] = {}

    # -- geometry --------------------------------------------------------------------------

    def plot_box(self) -> tuple[float, float, float, float]:
        return self.left, self.top, self.width - self.right, self.height - self.bottom

    def paper_x(self, x: float) -> float:
        x0, _, x1, _ = self.plot_box()
        return x0 + x * (x1 - x0)

    def paper_y(self, y: float) -> float:
        _, y0, _, y1 = self.plot_box()
        return y1 - y * (y1 - y0)

    def axis(self, ref: str | None, letter: str) -> _Axis:
        ref = ref or letter
        key = f"{letter}axis{ref[1:]}"
        if key not in self.axes:
            spec = dict(self.layout.get(key) or {})
            low, high = spec.get("domain") or [0.0, 1.0]
            if letter == "x":
                self.axes[key] = _Axis(key, spec, self.paper_x(low), self.paper_x(high), False)
            else:  # pixels grow downward: the domain's bottom is the larger pixel
                self.axes[key] = _Axis(key, spec, self.paper_y(low), self.paper_y(high), False)
        return self.axes[key]

    # -- drawing -------------------------------------------------------------------------------

    def svg(self) -> str:
        for trace in self.data:
            xa, ya = self.axis(trace.get("xaxis"), "x"), self.axis(trace.get("yaxis"), "y")
            x, y = list(trace.get("x") or []), list(trace.get("y") or [])
            if trace.get("type") == "heatmap":
                xa.add(x or range(len((trace.get("z") or [[]])[0])))
                ya.add(y or range(len(trace.get("z") or [])))
                continue
            xa.add(x)
            ya.add(y)
            self._extend_for_errors(trace, xa, ya)
            if trace.get("type") == "bar":
                (xa if trace.get("orientation") == "h" else ya).add([0])
                self._extend_for_stacks(trace, xa, ya)
        for axis in self.axes.values():
            axis.settle()
        self._grid()
        stacks: dict[tuple[str, str, str], float] = {}
        bar_groups = self._bar_groups()
        for index, trace in enumerate(self.data):
            kind = trace.get("type")
            if kind == "bar":
                self._bar(index, trace, bar_groups, stacks)
            elif kind == "scatter":
                self._scatter(trace)
            elif kind == "heatmap":
                self._heatmap(trace)
        self._shapes()
        self._annotations()
        self._titles()
        self._legend()
        body = "".join(self.parts)
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="evalnb-figure-svg" width="{self.width}" '
            f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" style="{FONT};font-size:12px">'
            f'<rect width="100%" height="100%" fill="#ffffff"/>{body}</svg>'
        )

    def _stack_mode(self) -> bool:
        return self.layout.get("barmode") in ("stack", "relative")

    def _extend_for_errors(self, trace: dict, xa: _Axis, ya: _Axis) -> None:
        for letter, axis, values in (("x", xa, trace.get("x")), ("y", ya, trace.get("y"))):
            err = trace.get(f"error_{letter}") or {}
            plus, minus = err.get("array") or [], err.get("arrayminus") or err.get("array") or []
            for i, v in enumerate(values or []):
                base = _num(v)
                if base is None:
                    continue
                if i < len(plus) and _num(plus[i]) is not None:
                    axis.add([base + float(plus[i])])
                if i < len(minus) and _num(minus[i]) is not None:
                    axis.add([base - float(minus[i])])

    def _extend_for_stacks(self, trace: dict, xa: _Axis, ya: _Axis) -> None:
        if not self._stack_mode():
            return
        horizontal = trace.get("orientation") == "h"
        value_axis = xa if horizontal else ya
        sums: dict[str, float] = getattr(value_axis, "_stack_sums", {})
        for cat, v in zip(trace.get("y" if horizontal else "x") or [], trace.get("x" if horizontal else "y") or []):
            sums[str(cat)] = sums.get(str(cat), 0.0) + (_num(v) or 0.0)
            value_axis.add([sums[str(cat)]])
        value_axis._stack_sums = sums  # type: ignore[attr-defined]

    def _bar_groups(self) -> dict[int, tuple[int, int]]:
        """Per bar trace: (its slot, the number of slots) among grouped bars on the same axes."""
        if self.layout.get("barmode") != "group":
            return {}
        by_axes: dict[tuple, list[int]] = {}
        for i, t in enumerate(self.data):
            if t.get("type") == "bar":
                by_axes.setdefault((t.get("xaxis"), t.get("yaxis")), []).append(i)
        return {i: (slot, len(members)) for members in by_axes.values() for slot, i in enumerate(members)}

    def _colour(self, trace: dict, i: int = 0) -> str:
        colour = (trace.get("marker") or {}).get("color")
        if isinstance(colour, list):
            colour = colour[i] if i < len(colour) else None
        return colour if isinstance(colour, str) else "#4e79a7"

    def _grid(self) -> None:
        p = self.parts
        for axis in self.axes.values():
            if axis.spec.get("visible") is False:
                continue
            horizontal = axis.name.startswith("x")
            partner = self._partner(axis)
            if partner is None:
                continue
            span = sorted((partner.start, partner.end))
            for pixel, label in axis.ticks():
                if pixel is None:
                    continue
                if horizontal:
                    if not axis.is_category:
                        p.append(f'<line x1="{pixel:.1f}" x2="{pixel:.1f}" y1="{span[0]:.1f}" y2="{span[1]:.1f}" '
                                 f'stroke="#ebf0f8"/>')
                    if axis.spec.get("showticklabels") is not False:
                        at = span[0] - 6 if axis.spec.get("side") == "top" else span[1] + 15
                        p.append(f'<text x="{pixel:.1f}" y="{at:.1f}" text-anchor="middle" fill="#444">'
                                 f'{_text(label)}</text>')
                else:
                    if not axis.is_category:
                        p.append(f'<line x1="{span[0]:.1f}" x2="{span[1]:.1f}" y1="{pixel:.1f}" y2="{pixel:.1f}" '
                                 f'stroke="#ebf0f8"/>')
                    if axis.spec.get("showticklabels") is not False:
                        p.append(f'<text x="{span[0] - 6:.1f}" y="{pixel + 4:.1f}" text-anchor="end" fill="#444">'
                                 f'{_text(label)}</text>')
            title = (axis.spec.get("title") or {}).get("text")
            if title and axis.spec.get("showticklabels") is not False:
                if horizontal:
                    at = span[0] - 24 if axis.spec.get("side") == "top" else span[1] + 36
                    mid = (axis.start + axis.end) / 2
                    p.append(f'<text x="{mid:.1f}" y="{at:.1f}" text-anchor="middle" fill="#333">{_text(title)}</text>')
                else:
                    mid = (axis.start + axis.end) / 2
                    at = max(14.0, span[0] - self.left + 14)
                    p.append(f'<text x="{at:.1f}" y="{mid:.1f}" text-anchor="middle" fill="#333" '
                             f'transform="rotate(-90 {at:.1f} {mid:.1f})">{_text(title)}</text>')

    def _partner(self, axis: _Axis) -> _Axis | None:
        suffix = axis.name[5:]
        other = ("yaxis" if axis.name.startswith("x") else "xaxis") + suffix
        anchor = axis.spec.get("anchor")
        if anchor and anchor != "free":
            other = ("yaxis" if anchor.startswith("y") else "xaxis") + anchor[1:]
        return self.axes.get(other)

    def _bar(self, index: int, trace: dict, groups: dict, stacks: dict) -> None:
        xa, ya = self.axis(trace.get("xaxis"), "x"), self.axis(trace.get("yaxis"), "y")
        horizontal = trace.get("orientation") == "h"
        cat_axis, val_axis = (ya, xa) if horizontal else (xa, ya)
        cats = trace.get("y" if horizontal else "x") or []
        vals = trace.get("x" if horizontal else "y") or []
        gap = float(self.layout.get("bargap", 0.2) if self.layout.get("bargap") is not None else 0.2)
        band = cat_axis.band() * (1 - gap)
        slot, slots = groups.get(index, (0, 1))
        width = band / slots
        texts = trace.get("text") if isinstance(trace.get("text"), list) else []
        err = trace.get("error_x" if horizontal else "error_y") or {}
        for i, (cat, value) in enumerate(zip(cats, vals)):
            centre, v = cat_axis.pos(cat), _num(value)
            if centre is None or v is None:
                continue
            offset = centre - band / 2 + slot * width
            base = 0.0
            if self._stack_mode():
                key = (val_axis.name, cat_axis.name, str(cat))
                base = stacks.get(key, 0.0)
                stacks[key] = base + v
            a, b = val_axis.pos(base), val_axis.pos(base + v)
            if a is None or b is None:
                continue
            lo, hi = sorted((a, b))
            colour = self._colour(trace, i)
            if horizontal:
                self.parts.append(f'<rect x="{lo:.1f}" y="{offset:.1f}" width="{hi - lo:.1f}" height="{width:.1f}" '
                                  f'fill="{colour}"/>')
            else:
                self.parts.append(f'<rect x="{offset:.1f}" y="{lo:.1f}" width="{width:.1f}" height="{hi - lo:.1f}" '
                                  f'fill="{colour}"/>')
            if i < len(texts) and texts[i] not in (None, ""):
                cx, cy = ((lo + hi) / 2, offset + width / 2 + 4) if horizontal else (offset + width / 2, (lo + hi) / 2)
                self.parts.append(f'<text x="{cx:.1f}" y="{cy:.1f}" text-anchor="middle" fill="#fff" '
                                  f'font-size="11">{_text(texts[i])}</text>')
            self._whisker(err, i, base + v, val_axis, offset + width / 2, horizontal)

    def _whisker(self, err: dict, i: int, value: float, axis: _Axis, across: float, horizontal: bool) -> None:
        plus, minus = err.get("array") or [], err.get("arrayminus") or err.get("array") or []
        if err.get("visible") is False or i >= len(plus) or _num(plus[i]) is None:
            return
        low = axis.pos(value - (_num(minus[i]) or 0.0) if i < len(minus) else value)
        high = axis.pos(value + float(plus[i]))
        if low is None or high is None:
            return
        colour = err.get("color") or "#333333"
        cap = float(err.get("width") or 4)
        if horizontal:
            self.parts.append(
                f'<path d="M{low:.1f},{across:.1f}H{high:.1f}M{low:.1f},{across - cap:.1f}V{across + cap:.1f}'
                f'M{high:.1f},{across - cap:.1f}V{across + cap:.1f}" stroke="{colour}" stroke-width="1.5" fill="none"/>')
        else:
            self.parts.append(
                f'<path d="M{across:.1f},{low:.1f}V{high:.1f}M{across - cap:.1f},{low:.1f}H{across + cap:.1f}'
                f'M{across - cap:.1f},{high:.1f}H{across + cap:.1f}" stroke="{colour}" stroke-width="1.5" fill="none"/>')

    def _scatter(self, trace: dict) -> None:
        xa, ya = self.axis(trace.get("xaxis"), "x"), self.axis(trace.get("yaxis"), "y")
        mode = trace.get("mode") or "markers"
        points = [(xa.pos(x), ya.pos(y), i) for i, (x, y) in enumerate(zip(trace.get("x") or [], trace.get("y") or []))]
        points = [(px, py, i) for px, py, i in points if px is not None and py is not None]
        colour = self._colour(trace)
        line = trace.get("line") or {}
        if "lines" in mode and len(points) > 1:
            d = "M" + "L".join(f"{px:.1f},{py:.1f}" for px, py, _ in points)
            dash = ' stroke-dasharray="4,3"' if line.get("dash") else ""
            self.parts.append(f'<path d="{d}" stroke="{line.get("color") or colour}" stroke-width="2" fill="none"{dash}/>')
        xs, ys = trace.get("x") or [], trace.get("y") or []
        for px, py, i in points:
            if _num(xs[i]) is not None:
                self._whisker(trace.get("error_x") or {}, i, float(xs[i]), xa, py, True)
            if _num(ys[i]) is not None:
                self._whisker(trace.get("error_y") or {}, i, float(ys[i]), ya, px, False)
        if "markers" in mode or mode == "none":
            marker = trace.get("marker") or {}
            size = marker.get("size") if isinstance(marker.get("size"), (int, float)) else 8
            for px, py, i in points:
                self.parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="{size / 2:.1f}" fill="{self._colour(trace, i)}" '
                                  f'stroke="#333" stroke-width="0.8"/>')
        texts = trace.get("text") if isinstance(trace.get("text"), list) else []
        if "text" in mode:
            for px, py, i in points:
                if i < len(texts) and texts[i]:
                    self.parts.append(f'<text x="{px:.1f}" y="{py - 10:.1f}" text-anchor="middle" fill="#333" '
                                      f'font-size="11">{_text(texts[i])}</text>')

    def _heatmap(self, trace: dict) -> None:
        xa, ya = self.axis(trace.get("xaxis"), "x"), self.axis(trace.get("yaxis"), "y")
        z = trace.get("z") or []
        xs = trace.get("x") or list(range(len(z[0]) if z else 0))
        ys = trace.get("y") or list(range(len(z)))
        values = [_num(v) for row in z for v in row]
        finite = [v for v in values if v is not None]
        low = _num(trace.get("zmin")) if trace.get("zmin") is not None else min(finite, default=0.0)
        high = _num(trace.get("zmax")) if trace.get("zmax") is not None else max(finite, default=1.0)
        scale = _colourscale(trace.get("colorscale"))
        text = trace.get("text") or []
        bw, bh = xa.band(), ya.band()
        for r, y in enumerate(ys):
            for c, x in enumerate(xs):
                v = _num(z[r][c]) if r < len(z) and c < len(z[r]) else None
                cx, cy = xa.pos(x), ya.pos(y)
                if v is None or cx is None or cy is None:
                    continue
                share = 0.0 if high == low else (v - low) / (high - low)  # type: ignore[operator]
                fill = _mix(scale, share)
                self.parts.append(f'<rect x="{cx - bw / 2:.1f}" y="{cy - bh / 2:.1f}" width="{bw:.1f}" '
                                  f'height="{bh:.1f}" fill="{fill}" stroke="#fff"/>')
                label = text[r][c] if r < len(text) and isinstance(text[r], list) and c < len(text[r]) else None
                if trace.get("texttemplate") and label is None:
                    label = f"{v:g}"
                if label is not None and bh >= 12 and trace.get("texttemplate"):
                    ink = "#fff" if share > 0.6 else "#111"
                    self.parts.append(f'<text x="{cx:.1f}" y="{cy + 4:.1f}" text-anchor="middle" fill="{ink}" '
                                      f'font-size="11">{_text(str(label).split("<br>")[0])[:24]}</text>')

    def _ref_x(self, ref: str | None, value: Any) -> float | None:
        ref = ref or "x"
        if ref == "paper":
            return self.paper_x(_num(value) or 0.0)
        if ref.endswith(" domain"):
            axis = self.axis(ref.split()[0], "x")
            return axis.start + (_num(value) or 0.0) * (axis.end - axis.start)
        return self.axis(ref, "x").pos(value)

    def _ref_y(self, ref: str | None, value: Any) -> float | None:
        ref = ref or "y"
        if ref == "paper":
            return self.paper_y(_num(value) or 0.0)
        if ref.endswith(" domain"):
            axis = self.axis(ref.split()[0], "y")
            return axis.start + (_num(value) or 0.0) * (axis.end - axis.start)
        return self.axis(ref, "y").pos(value)

    def _shapes(self) -> None:
        for shape in self.layout.get("shapes") or []:
            x0, x1 = self._ref_x(shape.get("xref"), shape.get("x0")), self._ref_x(shape.get("xref"), shape.get("x1"))
            y0, y1 = self._ref_y(shape.get("yref"), shape.get("y0")), self._ref_y(shape.get("yref"), shape.get("y1"))
            if None in (x0, x1, y0, y1):
                continue
            line = shape.get("line") or {}
            stroke = line.get("color") or "#888"
            dash = ' stroke-dasharray="4,3"' if line.get("dash") else ""
            if shape.get("type") == "rect":
                yt, yb = sorted((y0, y1))  # type: ignore[type-var]
                if yb - yt < 2:  # a band on one category row: as tall as a third of the row
                    axis = self.axis((shape.get("yref") or "y").split()[0], "y")
                    yt, yb = yt - axis.band() / 6, yb + axis.band() / 6
                xl, xr = sorted((x0, x1))  # type: ignore[type-var]
                fill = shape.get("fillcolor") or "rgba(0,0,0,0.08)"
                self.parts.append(f'<rect x="{xl:.1f}" y="{yt:.1f}" width="{xr - xl:.1f}" height="{yb - yt:.1f}" '
                                  f'fill="{fill}" fill-opacity="{shape.get("opacity", 1)}" stroke="none"/>')
            else:
                self.parts.append(f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{y0:.1f}" y2="{y1:.1f}" stroke="{stroke}" '
                                  f'stroke-width="{line.get("width") or 1}"{dash}/>')

    def _annotations(self) -> None:
        for note in self.layout.get("annotations") or []:
            x, y = self._ref_x(note.get("xref"), note.get("x")), self._ref_y(note.get("yref"), note.get("y"))
            if x is None or y is None:
                continue
            anchor = {"left": "start", "right": "end"}.get(note.get("xanchor"), "middle")
            x += float(note.get("xshift") or 0)
            y -= float(note.get("yshift") or 0)
            size = (note.get("font") or {}).get("size") or 12
            lines = _lines(note.get("text"))
            if note.get("yanchor") == "bottom":  # the last line sits on y
                y -= 6 + (len(lines) - 1) * size * LINE_PX
            spans = "".join(f'<tspan x="{x:.1f}" dy="{0 if i == 0 else size * LINE_PX:.1f}">{line}</tspan>'
                            for i, line in enumerate(lines))
            self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="#333" '
                              f'font-size="{size}">{spans}</text>')

    def _titles(self) -> None:
        title = (self.layout.get("title") or {}).get("text")
        if title:
            self.parts.append(f'<text x="10" y="30" fill="#222" font-size="17">{_text(title)}</text>')

    def _legend(self) -> None:
        if self.layout.get("showlegend") is False:
            return
        seen: dict[str, str] = {}
        for trace in self.data:
            name = trace.get("name")
            if not name or trace.get("showlegend") is False or trace.get("type") == "heatmap" or name in seen:
                continue
            seen[name] = self._colour(trace)
        if not seen:
            return
        legend = self.layout.get("legend") or {}
        title = _text((legend.get("title") or {}).get("text") or "")
        x, y = 10.0, self.height - 10 - 22 * self._legend_rows(list(seen), title) + 14
        if title:
            self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" fill="#333" font-weight="bold">{title}</text>')
            x += 7 * len(title) + 12
        start = x
        for name, colour in seen.items():
            width = 7 * len(name) + 45
            if x + width > self.width and x > start:
                x, y = start, y + 22
            self.parts.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="14" height="12" fill="{colour}"/>'
                              f'<text x="{x + 20:.1f}" y="{y:.1f}" fill="#333">{_text(name)}</text>')
            x += width

    def _legend_rows(self, names: list[str], title: str) -> int:
        room = self.width - (7 * len(title) + 22)
        rows, used = 1, 0.0
        for name in names:
            width = 7 * len(name) + 45
            if used + width > room and used:
                rows, used = rows + 1, 0.0
            used += width
        return rows


def _colourscale(scale: Any) -> list[tuple[float, tuple[int, int, int]]]:
    stops = []
    if isinstance(scale, list):
        for item in scale:
            if isinstance(item, (list, tuple)) and len(item) == 2 and (rgb := _rgb(item[1])) is not None:
                stops.append((float(item[0]), rgb))
    return stops or [(0.0, (247, 251, 255)), (1.0, (8, 48, 107))]


def _rgb(colour: Any) -> tuple[int, int, int] | None:
    text = str(colour).strip()
    if text.startswith("#") and len(text) == 7:
        return int(text[1:3], 16), int(text[3:5], 16), int(text[5:7], 16)
    match = re.match(r"rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)", text)
    if match:
        return tuple(int(float(v)) for v in match.groups())  # type: ignore[return-value]
    return None


def _mix(stops: list[tuple[float, tuple[int, int, int]]], share: float) -> str:
    share = max(0.0, min(1.0, share))
    for (a, ca), (b, cb) in zip(stops, stops[1:]):
        if a <= share <= b:
            t = 0.0 if b == a else (share - a) / (b - a)
            rgb = [round(x + (y - x) * t) for x, y in zip(ca, cb)]
            return "#%02x%02x%02x" % tuple(rgb)
    return "#%02x%02x%02x" % stops[-1][1]
