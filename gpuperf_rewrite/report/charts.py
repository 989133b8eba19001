"""Static SVG charts from matplotlib's SVG backend, inlined into the page.

Every series carries a ``gid`` (the ``id`` of its ``<g>`` in the SVG) so that a test, or a reader
of the page's source, finds each series and counts its points: a line's vertices are the ``M``/``L``
commands of its path (path simplification is off, so every point drawn is a vertex), a scatter's
points are its ``<use>`` elements. Text stays text (``svg.fonttype: none``): small, searchable,
and drawn in the browser's own font. Long series are down-sampled to :data:`MAX_POINTS` bins (the
mean per bin, the min-max band behind it), so 100,000 steps make a page of the same size as 1,000.
"""

from __future__ import annotations

import io
import math
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from gpuperf_rewrite.report.errors import MissingExtra

MAX_POINTS = 600  # per series: a 1,200-pixel-wide chart shows no more
COLORS = {"A": "#4C72B0", "B": "#DD8452"}
_STYLE = {"svg.fonttype": "none", "svg.hashsalt": "gpuperf", "path.simplify": False, "font.size": 9,
          "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3}


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg/SVG backends; :class:`MissingExtra` when the extra is missing."""
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingExtra() from exc
    matplotlib.use("Agg")  # never a window: the page is written, not shown
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def figure(width: float = 8.0, height: float = 3.0) -> Iterator[tuple[Any, Any]]:
    """A (figure, axes) pair in the report's style, closed afterwards."""
    plt = pyplot()
    import matplotlib

    with matplotlib.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(width, height))
        try:
            yield fig, ax
        finally:
            plt.close(fig)


def to_svg(fig: Any, chart_id: str) -> str:
    """The figure as an inline ``<svg>`` element (no XML prologue), its root id ``chart_id``."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({**_STYLE, "svg.id": chart_id}):
        fig.tight_layout()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    start, end = text.find("<metadata>"), text.find("</metadata>")
    if 0 <= start < end:  # RDF about the file's creator: bytes no reader needs
        text = text[:start] + text[end + len("</metadata>"):]
    return text


def finite(v: Any) -> float | None:
    """``v`` as a float when it is a finite number, else None (JSON null, NaN, inf, strings)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def points(series: Sequence[Any], start: int = 0) -> tuple[list[float], list[float]]:
    """(x, y) of a per-step series from step ``start``; a non-finite value is a gap (NaN)."""
    xs = [float(start + i) for i in range(len(series))]
    ys = [math.nan if finite(v) is None else float(v) for v in series]
    return xs, ys


def carry_forward(series: Sequence[Any]) -> list[Any]:
    """A strided series (the shim reads memory every 2nd, 4th... step, None between) as a line:
    the last reading carried over the steps between readings (None before the first)."""
    out, last = [], None
    for v in series:
        last = v if finite(v) is not None else last
        out.append(last)
    return out


def downsample(xs: Sequence[float], ys: Sequence[float],
               limit: int = MAX_POINTS) -> tuple[list[float], list[float], list[float], list[float]]:
    """(x, mean, low, high) over at most ``limit`` bins of consecutive points; with no more points
    than that, the points themselves (low = high = y). NaN stays NaN in a bin with no finite value."""
    n = len(xs)
    if n <= limit:
        return list(xs), list(ys), list(ys), list(ys)
    out: tuple[list[float], list[float], list[float], list[float]] = ([], [], [], [])
    for k in range(limit):
        lo, hi = k * n // limit, (k + 1) * n // limit
        vals = [y for y in ys[lo:hi] if not math.isnan(y)]
        out[0].append((xs[lo] + xs[hi - 1]) / 2)
        out[1].append(sum(vals) / len(vals) if vals else math.nan)
        out[2].append(min(vals) if vals else math.nan)
        out[3].append(max(vals) if vals else math.nan)
    return out


def series(ax: Any, xs: Sequence[float], ys: Sequence[float], gid: str, **style: Any) -> int:
    """Draw one per-step line (down-sampled, with its min-max band when it was); returns the
    number of points drawn."""
    x, mean, low, high = downsample(xs, ys)
    if len(x) < len(xs):
        ax.fill_between(x, low, high, color=style.get("color"), alpha=0.15, linewidth=0, gid=f"{gid}-band")
    if len(x) == 1:  # a line of one point draws nothing: mark it
        style = {**style, "marker": "o"}
    ax.plot(x, mean, gid=gid, **style)
    return len(x)


def bytes_axis(ax: Any) -> None:
    """Label the y axis in MiB/GiB instead of raw bytes."""
    from matplotlib.ticker import FuncFormatter

    def fmt(v: float, _pos: Any) -> str:
        for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if abs(v) >= size:
                return f"{v / size:.4g} {unit}"
        return f"{v:.0f} B"

    ax.yaxis.set_major_formatter(FuncFormatter(fmt))


def clip_outliers(ax: Any, values: Sequence[float]) -> None:
    """Keep the y range on the steady steps: the first step (imports, compilation) can be 100x
    the others. What is cut off is written on the chart, not hidden."""
    vals = sorted(v for v in values if finite(v) is not None)
    if len(vals) >= 10:
        high = vals[int(0.9 * (len(vals) - 1))]
        if vals[-1] > 3 * high > 0:
            ax.set_ylim(0, 3 * high)
            ax.annotate(f"y axis cut at {3 * high:,.0f}: the slowest step took {vals[-1]:,.0f}", xy=(0.01, 0.93),
                        xycoords="axes fraction", fontsize=7)
