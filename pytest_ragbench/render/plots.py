"""The plots of report.html, drawn with matplotlib's object API (no pyplot state).

Every axis of a metric spans its natural range (``[0, 1]`` for a share, the registry's
range where it is finite), so constant data is a point on a sensible scale, not a
±0.04 axis; error bars are clipped at zero (a mean that rounds a step below its CI's
bound draws a zero-length bar, never a negative one). A 0/1 metric is a proportion with
its interval (in the tables), never a histogram. Imported at session end only.
"""

from __future__ import annotations

import base64
import contextlib
import io
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pytest_ragbench.metrics.registry import REGISTRY, UnknownMetricError
from pytest_ragbench.render.text import finite

MAX_METRICS_PER_FIGURE = 12
Values = dict[tuple[str, str], dict[str, list[float]]]


def item_values(document: dict[str, Any]) -> Values:
    """Scored values per (kind, metric), per system (``""`` when one system ran)."""
    several = len(document.get("systems") or []) > 1
    out: Values = {}
    for item in document.get("items") or []:
        if not isinstance(item, dict):
            continue
        system = str(item.get("system") or "") if several else ""
        for metric, value in (item.get("metrics") or {}).items():
            number = finite(value)
            if number is not None:
                out.setdefault((str(item.get("kind")), metric), {}).setdefault(
                    system, []).append(number)
    return out


def is_binary(values: Iterable[float]) -> bool:
    """True when every value is 0 or 1 (a pass/fail metric, shown as a proportion)."""
    seen = False
    for value in values:
        if value not in (0.0, 1.0):
            return False
        seen = True
    return seen


def metric_range(metric: str, values: Sequence[float] = ()) -> tuple[float, float]:
    """The axis of a metric: its natural range where known, else one that holds the values."""
    present = [v for v in values if math.isfinite(v)]
    try:
        spec = REGISTRY.parse(metric).spec
        low, high = spec.low, spec.high
    except (UnknownMetricError, ValueError):
        low, high = (0.0, 1.0) if all(0.0 <= v <= 1.0 for v in present) else (-math.inf,
                                                                               math.inf)
    if low < 0 and present and min(present) >= 0:
        low = 0.0  # e.g. cosine similarity: [-1, 1] in theory, [0, 1] in practice
    if not math.isfinite(low):
        low = min(present, default=0.0)
        low = 0.0 if low >= 0 else low
    if not math.isfinite(high):
        high = max(present, default=1.0)
        high = high * 1.05 if high > 0 else high + 1.0
    if high <= low:
        high = low + 1.0
    return float(low), float(high)


def clipped_errors(mean: float, low: Any, high: Any) -> tuple[float, float]:
    """Lengths of the error bar below and above ``mean``: never negative."""
    lower = mean - low if finite(low) is not None else 0.0
    upper = high - mean if finite(high) is not None else 0.0
    return max(0.0, lower), max(0.0, upper)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Keep matplotlib's notes on the user's labels (a glyph the font lacks) out of pytest."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def png(figure: Any) -> str:
    """A figure as an ``<img>`` with a base64 PNG data URI."""
    buffer = io.BytesIO()
    with quiet():
        figure.tight_layout()  # fits the labels: bbox_inches="tight" would draw once more
        # zlib level 1: a tenth larger than the default 6, and a third of its encoding time
        figure.savefig(buffer, format="png", dpi=90, metadata={"Software": None},
                       pil_kwargs={"compress_level": 1})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _grid(count: int) -> tuple[int, int]:
    columns = max(1, min(3, count))
    return -(-count // columns), columns


def continuous_metrics(values: Values, kind: str, metrics: Iterable[str]) -> list[str]:
    """Metrics of ``kind`` worth a histogram: not 0/1, and not one value throughout."""
    chosen = []
    for metric in metrics:
        per_system = values.get((kind, metric), {})
        every = [v for vs in per_system.values() for v in vs]
        if len(set(every)) >= 2 and not is_binary(every):
            chosen.append(metric)
    return chosen[:MAX_METRICS_PER_FIGURE]


def distribution_plot(values: Values, kind: str, metrics: Sequence[str]) -> str:
    """Histograms of a kind's continuous metrics on their natural range, a colour per system."""
    from matplotlib.figure import Figure

    if not metrics:
        return ""
    rows, columns = _grid(len(metrics))
    figure = Figure(figsize=(4.2 * columns, 2.8 * rows))
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(rows, columns, index + 1)
        per_system = values.get((kind, metric), {})
        low, high = metric_range(metric, [v for vs in per_system.values() for v in vs])
        edges = [low + (high - low) * i / 20 for i in range(21)]
        for system, series in per_system.items():
            axes.hist([min(max(v, low), high) for v in series], bins=edges, alpha=0.6,
                      label=system or None)
        axes.set_xlim(low, high)
        axes.set_title(f"{kind}.{metric}", fontsize=9)
        axes.set_ylabel("items", fontsize=8)
        if len(per_system) > 1:
            axes.legend(fontsize=7)
    return png(figure)


def interval_plot(kind: str, name: str, per_metric: dict[str, dict[str, dict[str, Any]]],
                  values: Values) -> str:
    """Mean and 95% CI of each metric for each group (category value, system, ...)."""
    from matplotlib.figure import Figure

    metrics = [m for m in per_metric if any(finite(c.get("mean")) is not None
                                            for c in per_metric[m].values())]
    metrics = metrics[:MAX_METRICS_PER_FIGURE]
    if not metrics:
        return ""
    rows, columns = _grid(len(metrics))
    height = max(2.4, 0.3 * max(len(per_metric[m]) for m in metrics) + 1)
    figure = Figure(figsize=(4.5 * columns, height * rows))
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(rows, columns, index + 1)
        cells = {label: c for label, c in per_metric[metric].items()
                 if finite(c.get("mean")) is not None}
        labels = list(cells)
        means = [float(cells[label]["mean"]) for label in labels]
        bars = [clipped_errors(m, cells[label].get("ci_low"), cells[label].get("ci_high"))
                for m, label in zip(means, labels, strict=True)]
        positions = list(range(len(labels)))
        axes.errorbar(means, positions, xerr=[[b[0] for b in bars], [b[1] for b in bars]],
                      fmt="o", capsize=3)
        seen = [v for vs in values.get((kind, metric), {}).values() for v in vs]
        low, high = metric_range(metric, seen + means)
        margin = 0.03 * (high - low)  # so that a bar ending on the range's edge shows its cap
        axes.set_xlim(low - margin, high + margin)
        axes.set_yticks(positions, labels, fontsize=7)
        axes.set_ylim(len(labels) - 0.5, -0.5)
        axes.set_title(f"{kind}.{metric} by {name} (mean, 95% CI)", fontsize=9)
    return png(figure)


def band_plot(plot: dict[str, Any]) -> str:
    """A report section's plot: each panel's estimate over ``x``, its 95% interval a band.

    Panels with no estimate at all are left out, and at most MAX_METRICS_PER_FIGURE drawn.
    """
    from matplotlib.figure import Figure

    x = [str(v) for v in plot.get("x") or ()]
    panels = [p for p in plot.get("panels") or ()
              if any(finite(v) is not None for v in p.get("mean") or ())
              ][:MAX_METRICS_PER_FIGURE]
    if not panels or not x:
        return ""
    rows, columns = _grid(len(panels))
    figure = Figure(figsize=(4.5 * columns, 2.6 * rows))
    positions = list(range(len(x)))
    nan = float("nan")

    def points(values: Any) -> list[float]:
        found = [finite(v) for v in values or ()]
        return [nan if v is None else v for v in found]

    for index, panel in enumerate(panels):
        axes = figure.add_subplot(rows, columns, index + 1)
        axes.fill_between(positions, points(panel.get("low")), points(panel.get("high")),
                          alpha=0.25)
        axes.plot(positions, points(panel.get("mean")), marker="o")
        axes.set_xticks(positions, x, fontsize=7, rotation=30)
        axes.set_title(str(panel.get("title")), fontsize=9)
    return png(figure)


def delta_plot(name: str, comparisons: list[dict[str, Any]]) -> str:
    """Deltas (A − B) with their 95% CI for one comparison, red where significantly worse."""
    from matplotlib.figure import Figure

    shown = [c for c in comparisons if finite(c.get("delta")) is not None]
    if not shown:
        return ""
    figure = Figure(figsize=(7, 0.35 * len(shown) + 1.2))
    axes = figure.add_subplot(1, 1, 1)
    labels = [f"{c.get('kind')}.{c.get('metric')}" for c in shown]
    for position, c in enumerate(shown):
        colour = "#b00020" if c.get("worse") else "#1b5e20" if c.get("better") else "#555555"
        delta = float(c["delta"])
        lower, upper = clipped_errors(delta, c.get("ci_low"), c.get("ci_high"))
        axes.errorbar([delta], [position], fmt="o", color=colour, capsize=3,
                      xerr=[[lower], [upper]])
    axes.axvline(0.0, color="#999999", linewidth=1)
    axes.set_yticks(range(len(labels)), labels, fontsize=7)
    axes.set_ylim(len(labels) - 0.5, -0.5)
    axes.set_title(f"{name}: delta and 95% CI", fontsize=9)
    return png(figure)


def pareto_plot(best: dict[str, Any]) -> str:
    """A sweep's configurations: quality against latency and against model calls per item.

    The Pareto front (no configuration better on quality and cheaper on both) in green, the
    recommended configuration circled.
    """
    from matplotlib.figure import Figure

    rows = [r for r in best.get("pareto") or () if finite(r.get("quality")) is not None]
    if not rows:
        return ""
    chosen = (best.get("recommended") or {}).get("system")
    objective = (best.get("recommended") or {}).get("objective", "quality")
    figure = Figure(figsize=(9, 3.6))
    for index, (key, label) in enumerate((("latency_s", "seconds per item"),
                                          ("model_calls", "model calls per item")), 1):
        axes = figure.add_subplot(1, 2, index)
        for row in rows:
            x = finite(row.get(key)) or 0.0
            colour = "#1b5e20" if row.get("pareto") else "#777777"
            axes.plot([x], [row["quality"]], "o", color=colour)
            if row["system"] == chosen:
                axes.plot([x], [row["quality"]], "o", markersize=13, fillstyle="none",
                          color="#0d47a1")
            axes.annotate(str(row["system"]), (x, row["quality"]), fontsize=6,
                          xytext=(3, 3), textcoords="offset points")
        axes.set_xlabel(label, fontsize=8)
        axes.set_ylabel(str(objective), fontsize=8)
    figure.suptitle("configurations: quality against cost (green: Pareto front)", fontsize=9)
    return png(figure)


def groupings(document: dict[str, Any], kind: str
              ) -> list[tuple[str, dict[str, dict[str, dict[str, Any]]]]]:
    """What to draw intervals for: each system (when several), and each category.

    Without a category the first breakdown field with two or more values is used; with
    several systems each group is labelled ``value [system]``.
    """
    out = []
    several = len(document.get("systems") or []) > 1
    metrics = (document.get("metrics") or {}).get(kind) or {}
    if several:
        per_system = {m: {s: c for s, c in (e.get("systems") or {}).items() if c.get("n")}
                      for m, e in metrics.items()}
        per_system = {m: cells for m, cells in per_system.items() if cells}
        if per_system:
            out.append(("system", per_system))
    fields = (document.get("breakdowns") or {}).get(kind) or {}
    for name in sorted(fields, key=lambda f: (f != "category", f)):
        if len(fields[name]) < 2:
            continue
        per_metric: dict[str, dict[str, dict[str, Any]]] = {}
        for value, by_metric in fields[name].items():
            for metric, entry in by_metric.items():
                cells = (entry.get("systems") or {}) if several else {"": entry}
                for system, cell in cells.items():
                    if cell.get("n"):
                        label = f"{value} [{system}]" if system else value
                        per_metric.setdefault(metric, {})[label] = cell
        if per_metric:
            out.append((name, per_metric))
            break
    return out
