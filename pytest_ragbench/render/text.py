"""The one formatter: numbers, intervals, comparators and tables as every rendering prints them.

The terminal section, report.html, report sections of kinds and plugins, gate lines and
item failure messages format through these functions, so a number, an interval or a
threshold reads the same everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def shorten(text: str, limit: int = 200) -> str:
    """A long text cut to ``limit`` characters for a message, saying how much was left out."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()} … ({len(text) - limit} more characters)"


def table(rows: Sequence[Sequence[Any]]) -> list[str]:
    """Rows as left-aligned columns separated by two spaces."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in cells]


def num(value: Any) -> str:
    """A value for a table: 3 decimals below 100, 1 above, ``-`` when missing."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3f}"


def significant(value: Any) -> str:
    """A value in a sentence (a gate's line): 4 significant digits, ``-`` when missing."""
    return "-" if value is None else f"{value:.4g}"


def comparator(lower_is_better: bool) -> str:
    """``<=`` for a metric where lower is better (timings), else ``>=``."""
    return "<=" if lower_is_better else ">="


def bound(limit: Any, lower_is_better: bool) -> str:
    """A threshold with its comparator (``>=0.6``, ``<=2000``), ``-`` when there is none."""
    if limit is None or isinstance(limit, bool) or not isinstance(limit, int | float):
        return "-"
    return f"{comparator(lower_is_better)}{limit:g}"


def section_cell(value: Any) -> str:
    """A table cell of a report section: numbers as :func:`num`, text as it is."""
    return num(value)


def signed(value: float | None) -> str:
    """A difference with its sign."""
    if value is None:
        return "-"
    return f"{value:+.1f}" if abs(value) >= 100 else f"{value:+.3f}"


def interval(low: Any, high: Any) -> str:
    """``[low, high]`` or ``-``."""
    return "-" if low is None or high is None else f"[{num(low)}, {num(high)}]"


def finite(value: Any) -> float | None:
    """``value`` as a finite float, else None (a saved document may hold anything)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def is_small(cell: Mapping[str, Any]) -> bool:
    """An interval left out because n < 2 (``ci_method`` null), not because nothing scored."""
    return "ci_method" in cell and cell.get("ci_method") is None and (cell.get("n") or 0) > 0 \
        and cell.get("ci_low") is None


def cell_interval(cell: Mapping[str, Any], share: bool = False) -> str:
    """A metric cell's 95% CI ``[low, high]`` (percent with ``share``), ``n too small``, ``-``."""
    if is_small(cell):
        return "n too small"
    low, high = finite(cell.get("ci_low")), finite(cell.get("ci_high"))
    if low is None or high is None:
        return "-"
    return percent_interval(low, high) if share else interval(low, high)


def percent(value: Any, decimals: int = 1) -> str:
    """A share as a percentage."""
    return "-" if value is None else f"{100 * value:.{decimals}f}%"


def percent_interval(low: Any, high: Any) -> str:
    """``[12.0%, 40.5%]`` or ``-``."""
    return "-" if low is None or high is None else f"[{percent(low)}, {percent(high)}]"


def pass_rate(entry: Mapping[str, Any]) -> str:
    """An aggregate entry's pass rate with its Wilson 95% CI, in percent."""
    if entry.get("pass_rate") is None:
        return "-"
    low, high = entry.get("pass_rate_ci_low"), entry.get("pass_rate_ci_high")
    if low is None or high is None:
        return percent(entry["pass_rate"])
    return f"{percent(entry['pass_rate'])} [{100 * low:.1f}, {100 * high:.1f}]"


def seconds(value: Any) -> str:
    """Seconds as ``12 ms`` or ``1.50 s``."""
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def p_text(c: Mapping[str, Any], key: str = "p_value") -> str:
    """A p-value; ``<x`` when it is a bound (below the resampling's resolution), never 0."""
    value = c.get(key)
    if value is None:
        return "undefined"
    method = c.get("p_method") or ""
    floor = c.get("p_resolution")
    bounded = method.startswith("hoeffding bound") or method.endswith("below 1e-300") or (
        method == "monte-carlo" and floor is not None and c["p_value"] <= floor)
    if bounded and value < 1:
        return f"<{max(value, 1e-300):.2g}"
    return f"{value:.3g}"


def effect(c: Mapping[str, Any]) -> str:
    """A comparison's Cohen's d, or why it has none (``n too small``, ``no spread``)."""
    value = c.get("effect_size")
    if value is None or isinstance(value, str):  # a str: "inf" in runs saved before
        return c.get("effect_size_note") or "-"
    return f"{value:+.2f}"
