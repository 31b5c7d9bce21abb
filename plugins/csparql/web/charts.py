"""Small charts as inline SVG, drawn on the server: no script, no external library, nothing to download.

``time_chart`` plots values over time (window ends, hours) as a line with a dot per point, or as bars; each
point carries a ``<title>`` (its instant and value), which browsers show on hover. Every label is escaped.
"""

from __future__ import annotations

import math
from html import escape

from csparql.core.windows import format_instant

WIDTH, HEIGHT = 560, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 28, 34


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10ⁿ at or above ``value`` (1 for 0 or less), for the top of an axis."""
    if value <= 0:
        return 1
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        candidate = step * 10**exponent
        if candidate >= value:
            return candidate
    return 10 ** (exponent + 1)


def _number(value: float) -> str:
    if value >= 10_000:
        return f"{value / 1000:,.0f}k"
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.1f}"


def time_chart(points: list[tuple[int, float]], *, title: str, unit: str, bars: bool = False,
               chart_id: str | None = None, width: int = WIDTH, height: int = HEIGHT) -> str:
    """An SVG chart of ``(instant µs, value)`` points in time order; a short message instead when empty."""
    label = escape(title)
    ident = f' id="{escape(chart_id)}"' if chart_id else ""
    if not points:
        return (f'<svg{ident} class="chart empty" role="img" aria-label="{label}: no data yet" viewBox="0 0 {width} 60" '
                f'width="{width}" height="60" xmlns="http://www.w3.org/2000/svg"><text x="{width / 2}" y="34" '
                f'text-anchor="middle" class="chart-empty">{label}: no data yet</text></svg>')
    points = sorted(points)
    plot_w, plot_h = width - LEFT - RIGHT, height - TOP - BOTTOM
    top = nice_ceiling(max(v for _, v in points))
    first, last = points[0][0], points[-1][0]
    span = max(last - first, 1)
    slot = plot_w / len(points)

    def x(index: int, instant: int) -> float:
        if bars:
            return LEFT + slot * index + slot / 2
        return LEFT + (plot_w / 2 if last == first else (instant - first) / span * plot_w)

    def y(value: float) -> float:
        return TOP + plot_h - value / top * plot_h

    parts = [
        f'<svg{ident} class="chart" role="img" aria-label="{label}" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" data-points="{len(points)}" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="{LEFT}" y="16" class="chart-title">{label} ({escape(unit)})</text>',
    ]
    for fraction in (0, 0.5, 1):
        level = TOP + plot_h - fraction * plot_h
        parts.append(f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{level:.1f}" y2="{level:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{level + 4:.1f}" text-anchor="end" class="tick">'
                     f'{escape(_number(top * fraction))}</text>')
    parts.append(f'<text x="{LEFT}" y="{height - 8}" class="tick">{escape(format_instant(first))}</text>')
    if last != first:
        parts.append(f'<text x="{width - RIGHT}" y="{height - 8}" text-anchor="end" class="tick">'
                     f'{escape(format_instant(last))}</text>')
    if bars:
        bar_width = min(24.0, max(1.0, slot * 0.7))
        for index, (instant, value) in enumerate(points):
            cx = x(index, instant)
            parts.append(f'<rect class="bar" x="{cx - bar_width / 2:.1f}" y="{y(value):.1f}" width="{bar_width:.1f}" '
                         f'height="{TOP + plot_h - y(value):.1f}"><title>{escape(format_instant(instant))}: '
                         f'{escape(_number(value))} {escape(unit)}</title></rect>')
    else:
        path = " ".join(f"{'M' if i == 0 else 'L'}{x(i, t):.1f},{y(v):.1f}" for i, (t, v) in enumerate(points))
        parts.append(f'<path class="line" d="{path}"/>')
        for index, (instant, value) in enumerate(points):
            parts.append(f'<circle class="dot" cx="{x(index, instant):.1f}" cy="{y(value):.1f}" r="3"><title>'
                         f'{escape(format_instant(instant))}: {escape(_number(value))} {escape(unit)}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)
