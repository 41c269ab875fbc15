"""Plain inline SVG charts for the operator's report (``dpone ops report``).

Written here rather than taken from a chart library: the page must work offline with no
external asset, and the charts it needs (grouped bars, horizontal bars, a line) are a few
dozen lines of SVG; no installed library draws them without JavaScript or a CDN. Every text
that reaches the markup goes through :func:`esc`: pipeline, column and table names come from
user files.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

#: Series colours (colour-blind safe, from the Okabe-Ito palette).
COLOURS = ("#0072B2", "#009E73", "#D55E00", "#CC79A7", "#E69F00", "#56B4E9")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ticks(top: float) -> list[float]:
    if top <= 0:
        return [0.0]
    step = 10 ** max(0, len(str(int(top))) - 1)
    while top / step > 5:
        step *= 2
    return [i * step for i in range(int(top // step) + 2) if i * step <= top * 1.0001 + step]


def grouped_bars(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[int]]],
    *,
    title: str,
    width: int = 760,
    height: int = 260,
) -> str:
    """Vertical bars: one group per label (a run), one bar per series (read, loaded...)."""
    left, bottom, top_pad = 56, 46, 14
    plot_w, plot_h = width - left - 12, height - bottom - top_pad
    top = max([1, *(v for _, values in series for v in values)])
    ticks = _ticks(top)
    scale_top = max(ticks[-1], top)
    parts = [_svg_open(width, height, title)]
    for tick in ticks:
        y = top_pad + plot_h - plot_h * tick / scale_top
        parts.append(
            f'<line x1="{left}" x2="{width - 12}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{int(tick):,}</text>'
        )
    groups = max(1, len(labels))
    group_w = plot_w / groups
    every = _label_step(groups, plot_w)
    bar_w = max(2.0, min(28.0, (group_w - 8) / max(1, len(series))))
    for g, label in enumerate(labels):
        x0 = left + g * group_w + (group_w - bar_w * len(series)) / 2
        for s, (name, values) in enumerate(series):
            value = values[g]
            h = plot_h * value / scale_top
            x, y = x0 + s * bar_w, top_pad + plot_h - h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w - 1:.1f}" height="{h:.1f}" '
                f'fill="{COLOURS[s % len(COLOURS)]}"><title>{esc(label)}: {esc(name)} '
                f"{value:,}</title></rect>"
            )
        if g % every == 0:
            parts.append(
                f'<text x="{left + (g + 0.5) * group_w:.1f}" y="{height - bottom + 16}" '
                f'text-anchor="middle">{esc(_short(label))}</text>'
            )
    parts.append(_legend([name for name, _ in series], left, height - 12))
    parts.append("</svg>")
    return "".join(parts)


def horizontal_bars(
    items: Sequence[tuple[str, int]], *, title: str, width: int = 760, colour: str = COLOURS[2]
) -> str:
    """One bar per item (a reason code, a column), longest first as given."""
    row_h, left = 24, 230
    height = max(1, len(items)) * row_h + 16
    top = max([1, *(v for _, v in items)])
    parts = [_svg_open(width, height, title)]
    for i, (label, value) in enumerate(items):
        y = 8 + i * row_h
        w = (width - left - 90) * value / top
        parts.append(
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{esc(_short(label, 30))}</text>'
            f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" fill="{colour}">'
            f"<title>{esc(label)}: {value:,}</title></rect>"
            f'<text x="{left + w + 6:.1f}" y="{y + 15}">{value:,}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def bars_with_line(
    labels: Sequence[str],
    bars: tuple[str, Sequence[int]],
    line: tuple[str, Sequence[int]],
    *,
    title: str,
    width: int = 760,
    height: int = 240,
) -> str:
    """Bars (a value per run) and a line on its own scale (a running total), e.g. DLQ bytes
    per run and the store's growth."""
    left, bottom, top_pad, right = 56, 46, 14, 70
    plot_w, plot_h = width - left - right, height - bottom - top_pad
    bar_top = max([1, *bars[1]])
    line_top = max([1, *line[1]])
    n = max(1, len(labels))
    slot = plot_w / n
    every = _label_step(n, plot_w)
    parts = [_svg_open(width, height, title)]
    parts.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{top_pad + plot_h}" '
        f'y2="{top_pad + plot_h}" class="grid"/>'
        f'<text x="{left - 6}" y="{top_pad + 8}" text-anchor="end">{bar_top:,}</text>'
        f'<text x="{left + plot_w + 6}" y="{top_pad + 8}">{line_top:,}</text>'
    )
    points = []
    for i, label in enumerate(labels):
        value = bars[1][i]
        h = plot_h * value / bar_top
        x = left + i * slot + slot * 0.2
        parts.append(
            f'<rect x="{x:.1f}" y="{top_pad + plot_h - h:.1f}" width="{slot * 0.6:.1f}" '
            f'height="{h:.1f}" fill="{COLOURS[0]}"><title>{esc(label)}: {esc(bars[0])} '
            f"{value:,}</title></rect>"
        )
        if i % every == 0:
            parts.append(
                f'<text x="{left + (i + 0.5) * slot:.1f}" y="{height - bottom + 16}" '
                f'text-anchor="middle">{esc(_short(label))}</text>'
            )
        cy = top_pad + plot_h - plot_h * line[1][i] / line_top
        points.append(f"{left + (i + 0.5) * slot:.1f},{cy:.1f}")
    if points:
        parts.append(
            f'<polyline points="{" ".join(points)}" fill="none" stroke="{COLOURS[2]}" '
            'stroke-width="2"/>'
        )
    parts.append(_legend([bars[0], line[0]], left, height - 12, (COLOURS[0], COLOURS[2])))
    parts.append("</svg>")
    return "".join(parts)


def _svg_open(width: int, height: int, title: str) -> str:
    return (
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">'
        f"<title>{esc(title)}</title>"
    )


def _legend(names: Sequence[str], x: int, y: int, colours: Sequence[str] = COLOURS) -> str:
    parts = []
    for i, name in enumerate(names):
        dx, colour = x + i * 130, colours[i % len(colours)]
        parts.append(
            f'<rect x="{dx}" y="{y - 9}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{dx + 14}" y="{y}">{esc(name)}</text>'
        )
    return "".join(parts)


def _label_step(count: int, plot_w: float) -> int:
    """Label every n-th bar group so that axis labels (about 100 px each) never overlap."""
    return max(1, -(-count * 100 // max(1, int(plot_w))))


def _short(label: str, keep: int = 16) -> str:
    """A label shortened for an axis (a run id's end differs between runs; the tables below
    the charts have it whole)."""
    return label if len(label) <= keep else "…" + label[-(keep - 1) :]


__all__ = ["bars_with_line", "esc", "grouped_bars", "horizontal_bars"]
