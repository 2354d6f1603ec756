"""``report.html``: one self-contained page (inline CSS, plots as base64 PNG data URIs).

Plots are drawn with matplotlib's object API (``matplotlib.figure.Figure``, no pyplot
state): metric distributions, means with 95% CI error bars per category (and per
system), and deltas with their CI against a baseline or between systems.
Imported at session end only.
"""

from __future__ import annotations

import base64
import io
from html import escape
from typing import Any

from pytest_ragbench.report import robustness, terminal

MAX_METRICS_PER_FIGURE = 12
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{padding:.2em .6em;text-align:left;
border-bottom:1px solid #eee;font-variant-numeric:tabular-nums}th{background:#f4f4f4}
td.bad{color:#b00020;font-weight:bold}td.good{color:#1b5e20}
img{max-width:100%;display:block;margin:.5em 0}pre{background:#f8f8f8;padding:.6em}
.fail{color:#b00020;font-weight:bold}.meta{color:#555}
"""


def _table(rows: list[list[Any]], classes: list[list[str]] | None = None) -> str:
    head, *body = rows
    out = ["<table><thead><tr>", *(f"<th>{escape(str(c))}</th>" for c in head),
           "</tr></thead><tbody>"]
    for i, row in enumerate(body):
        out.append("<tr>")
        for j, cell in enumerate(row):
            css = classes[i][j] if classes and classes[i][j] else ""
            attr = f' class="{css}"' if css else ""
            out.append(f"<td{attr}>{escape(str(cell))}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight",
                   metadata={"Software": None})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _grid(count: int) -> tuple[int, int]:
    columns = min(3, count)
    return -(-count // columns), columns


def _values(document: dict[str, Any], kind: str, metric: str) -> dict[str, list[float]]:
    """Scored values of a metric per system (``""`` when one system)."""
    several = len(document["systems"]) > 1
    out: dict[str, list[float]] = {}
    for item in document["items"]:
        value = item["metrics"].get(metric)
        if item["kind"] == kind and isinstance(value, int | float):
            out.setdefault((item.get("system") or "") if several else "", []).append(value)
    return out


def distribution_plot(document: dict[str, Any], kind: str) -> str:
    """Histograms of each metric of a kind (one colour per system)."""
    from matplotlib.figure import Figure

    metrics = [m for m, e in document["metrics"][kind].items() if e["n"]]
    metrics = metrics[:MAX_METRICS_PER_FIGURE]
    if not metrics:
        return ""
    rows, columns = _grid(len(metrics))
    figure = Figure(figsize=(4.2 * columns, 2.8 * rows))
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(rows, columns, index + 1)
        for system, values in _values(document, kind, metric).items():
            axes.hist(values, bins=min(20, max(5, len(set(values)))), alpha=0.6,
                      label=system or None)
        axes.set_title(f"{kind}.{metric}", fontsize=9)
        axes.set_ylabel("items", fontsize=8)
        if len(document["systems"]) > 1:
            axes.legend(fontsize=7)
    figure.tight_layout()
    return _png(figure)


def _errorbars(axes: Any, labels: list[str], entries: list[dict[str, Any]]) -> None:
    means = [e["mean"] for e in entries]
    # No interval below n = 2; a rounding step may put the mean just outside its interval.
    lower = [max(0.0, e["mean"] - e["ci_low"]) if e.get("ci_low") is not None else 0.0
             for e in entries]
    upper = [max(0.0, e["ci_high"] - e["mean"]) if e.get("ci_high") is not None else 0.0
             for e in entries]
    positions = list(range(len(labels)))
    axes.errorbar(means, positions, xerr=[lower, upper], fmt="o", capsize=3)
    axes.set_yticks(positions, labels, fontsize=7)
    axes.invert_yaxis()


def interval_plot(document: dict[str, Any], kind: str, name: str,
                  per_metric: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Mean and 95% CI of each metric for each group (category value, system, ...)."""
    from matplotlib.figure import Figure

    metrics = list(per_metric)[:MAX_METRICS_PER_FIGURE]
    rows, columns = _grid(len(metrics))
    height = max(2.4, 0.3 * max(len(per_metric[m]) for m in metrics) + 1)
    figure = Figure(figsize=(4.5 * columns, height * rows))
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(rows, columns, index + 1)
        labels = list(per_metric[metric])
        _errorbars(axes, labels, [per_metric[metric][label] for label in labels])
        axes.set_title(f"{kind}.{metric} by {name} (mean, 95% CI)", fontsize=9)
    figure.tight_layout()
    return _png(figure)


def groupings(document: dict[str, Any], kind: str
              ) -> list[tuple[str, dict[str, dict[str, dict[str, Any]]]]]:
    """What to draw intervals for: each system (when several), and each category.

    Without a category the first breakdown field with two or more values is used; with
    several systems each group is labelled ``value [system]``.
    """
    out = []
    several = len(document["systems"]) > 1
    if several:
        per_system = {m: {s: c for s, c in e.get("systems", {}).items() if c["n"]}
                      for m, e in document["metrics"][kind].items()}
        per_system = {m: cells for m, cells in per_system.items() if cells}
        if per_system:
            out.append(("system", per_system))
    fields = document["breakdowns"].get(kind, {})
    for name in sorted(fields, key=lambda f: (f != "category", f)):
        if len(fields[name]) < 2:
            continue
        per_metric: dict[str, dict[str, dict[str, Any]]] = {}
        for value, metrics in fields[name].items():
            for metric, entry in metrics.items():
                cells = entry.get("systems", {}) if several else {"": entry}
                for system, cell in cells.items():
                    if cell["n"]:
                        label = f"{value} [{system}]" if system else value
                        per_metric.setdefault(metric, {})[label] = cell
        if per_metric:
            out.append((name, per_metric))
            break
    return out


def delta_plot(document: dict[str, Any], name: str) -> str:
    """Deltas (A − B) with their 95% CI for one comparison, red where significantly worse."""
    from matplotlib.figure import Figure

    comparisons = [c for kinds in [document["comparisons"][name]]
                   for metrics in kinds.values() for c in metrics.values()]
    if not comparisons:
        return ""
    figure = Figure(figsize=(7, 0.35 * len(comparisons) + 1.2))
    axes = figure.add_subplot(1, 1, 1)
    labels = [f"{c['kind']}.{c['metric']}" for c in comparisons]
    for position, c in enumerate(comparisons):
        colour = "#b00020" if c["worse"] else "#1b5e20" if c["better"] else "#555555"
        axes.errorbar([c["delta"]], [position], fmt="o", color=colour, capsize=3,
                      xerr=[[c["delta"] - c["ci_low"]], [c["ci_high"] - c["delta"]]])
    axes.axvline(0.0, color="#999999", linewidth=1)
    axes.set_yticks(range(len(labels)), labels, fontsize=7)
    axes.invert_yaxis()
    axes.set_title(f"{name}: delta and 95% CI", fontsize=9)
    figure.tight_layout()
    return _png(figure)


def _rows_table(rows: list[list[str]] | list[tuple[str, ...]]) -> str:
    return _table([list(r) for r in rows]) if len(rows) > 1 else ""


def _comparison_table(document: dict[str, Any]) -> str:
    rows = terminal.comparison_rows(document)
    marks = {"WORSE": "bad", "better": "good"}
    classes = [[""] * (len(row) - 1) + [marks.get(row[-1], "")] for row in rows[1:]]
    return _table([list(r) for r in rows], classes) if len(rows) > 1 else ""


def _beir_tables(document: dict[str, Any]) -> list[str]:
    parts = []
    for dataset, systems in document["beir"].items():
        names = sorted({m for result in systems.values() for m in result["metrics"]})
        rows = [["system", "queries", *names]]
        rows += [[system or "-", str(result["judged_queries"]),
                  *(terminal.num(result["metrics"].get(m)) for m in names)]
                 for system, result in systems.items()]
        parts.append(f"<h2>BEIR {escape(dataset)}</h2>" + _table(rows))
    return parts


def _section(title: str, *content: str) -> str:
    body = "".join(c for c in content if c)
    return f"<h2>{escape(title)}</h2>{body}" if body else ""


def render(document: dict[str, Any]) -> str:
    """The whole page."""
    run = document["run"]
    meta = " · ".join(escape(str(x)) for x in (
        f"run {run.get('id')}", run.get("time"), f"commit {run.get('git_commit') or '-'}",
        f"pytest-ragbench {run.get('plugin_version') or '-'}"))
    parts = [f"<h1>pytest-ragbench report</h1><p class=meta>{meta}</p>"]
    if document["failures"]:
        parts.append("<h2>Session failed</h2><ul>" + "".join(
            f"<li class=fail>{escape(line)}</li>" for line in document["failures"]) + "</ul>")
    parts.append(_section("Components", _rows_table(
        [["role", "description"], *([r, d] for r, d in document["components"].items())])))
    parts.append(_section("Items", _rows_table(terminal.counts_rows(document["counts"]))))
    notes = terminal.unscored_notes(document)
    parts.append(_section(
        "Metrics", "<p class=meta>mean and 95% bootstrap BCa interval per kind and metric</p>"
        if document["metrics"] else "", _rows_table(terminal.metrics_rows(document)),
        "<ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>" if notes else ""))
    for kind in document["metrics"]:
        plots = [interval_plot(document, kind, name, groups)
                 for name, groups in groupings(document, kind)]
        parts.append(_section(f"{kind}: distributions and intervals",
                              distribution_plot(document, kind), *plots))
    parts.append(_section("Breakdowns", *(
        f"<h3>{escape(title)}</h3>" + _rows_table(rows)
        for title, rows in terminal.breakdown_tables(document))))
    baseline = terminal.baseline_line(document)
    parts.append(_section(
        "Comparisons", f"<p>{escape(baseline)}</p>" if baseline else "",
        _comparison_table(document),
        *(delta_plot(document, name) for name in document["comparisons"]),
        _rows_table(terminal.power_rows(document)) if document["comparisons"] else ""))
    ragcsv = terminal.ragcsv_lines(document)
    parts.append(_section("RAGCSV", f"<pre>{escape(chr(10).join(ragcsv))}</pre>"
                          if ragcsv else ""))
    parts += _beir_tables(document)
    parts.append(robustness.html(document))
    parts.append(_section("Model usage and time", _rows_table(terminal.usage_rows(document)),
                          _rows_table(terminal.timing_rows(document))))
    gates = document["gates"]
    if gates:
        from pytest_ragbench.report.gates import gate_line

        parts.append(_section("Gates", "<ul>" + "".join(
            f"<li{' class=fail' if g['passed'] is False else ''}>{escape(gate_line(g))}</li>"
            for g in gates) + "</ul>"))
    body = "\n".join(p for p in parts if p)
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            "<title>pytest-ragbench report</title>"
            f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n")
