"""``report.html``: one self-contained page, read from the top.

1. the verdict (passed / failed, what it covers: which answers were checked by facts, a
   judge or ground-truth data and which were not, and why: gates missed, regressions,
   items that did not pass, unscored judged metrics), with a banner when the run was
   interrupted;
2. the judge (when one was configured): unscored counts, calibration against labels;
3. gates, regressions and which component moved (retrieval or answers);
4. per kind: the metrics with their intervals (a 0/1 metric as a proportion), breakdowns;
5. comparisons, then plots;
6. every item, filterable and searchable, each opening to its evidence (drilldown.py);
7. components, model usage and time, the report sections (the kinds' and plugins':
   ``pytest_ragbench_report_sections``), run details.

CSS and the script are inline, plots are PNG data URIs or inline SVG; a Content
Security Policy forbids any network access. Each section is drawn on its own: one that
fails becomes a note in the page and a line in ``problems`` (a warning at session end),
and the rest of the page is still written. Every key is read defensively, so keys
other parts of the plugin add (``ci_method``, ``judge_calibration``, ``run.status``)
show when present and are skipped when absent. Imported at session end only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from pytest_ragbench.render import drilldown, plots, terminal
from pytest_ragbench.render.text import (
    bound,
    cell_interval,
    comparator,
    finite,
    interval,
    num,
    percent,
    percent_interval,
    seconds,
    section_cell,
)
from pytest_ragbench.results import coverage, stages
from pytest_ragbench.results import verdict as verdict_mod
from pytest_ragbench.results.gates import gate_line, regression_line

CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
       "script-src 'unsafe-inline'")
NAV = (("verdict", "Verdict"), ("judge", "Judge"), ("gates", "Gates"), ("results", "Results"),
       ("comparisons", "Comparisons"), ("best", "Best"), ("plots", "Plots"), ("items", "Items"),
       ("components", "Components"), ("run", "Run"))


def esc(value: Any) -> str:
    """Text for HTML."""
    return escape("" if value is None else str(value))


def table(head: Sequence[Any], rows: Sequence[Sequence[Any]],
          classes: Sequence[Sequence[str]] | None = None, raw: frozenset[int] = frozenset()
          ) -> str:
    """An HTML table; cells in columns ``raw`` are HTML already, the rest is escaped."""
    out = ["<table><thead><tr>", *(f"<th>{esc(c)}</th>" for c in head), "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        out.append("<tr>")
        for j, cell in enumerate(row):
            css = classes[i][j] if classes and j < len(classes[i]) and classes[i][j] else ""
            attr = f' class="{css}"' if css else ""
            out.append(f"<td{attr}>{cell if j in raw else esc(cell)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _rows_table(rows: Sequence[Sequence[Any]]) -> str:
    return table(rows[0], rows[1:]) if len(rows) > 1 else ""


class Page:
    """Sections drawn one by one; a section that fails is named, the others stand."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        self.parts: list[str] = []

    def add(self, part: str, draw: Callable[[], str]) -> None:
        """Append what ``draw`` returns, or a note that ``part`` could not be drawn."""
        try:
            self.parts.append(draw())
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.problems.append(f"report.html: {part} could not be drawn ({detail})")
            self.parts.append(f"<p class=problem>{esc(part)} could not be drawn ({esc(detail)}); "
                              "the numbers are in results.json.</p>")

    def plot(self, part: str, draw: Callable[[], str]) -> str:
        """A plot, or a note that it could not be drawn (and a problem line)."""
        try:
            return draw()
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.problems.append(f"report.html: plot {part} could not be drawn ({detail})")
            return f"<p class=problem>plot {esc(part)} could not be drawn ({esc(detail)})</p>"


# ------------------------------------------------------------------- numbers as text

def pass_rate_text(cell: dict[str, Any]) -> str:
    """The pass rate, with its interval when the document has one."""
    rate = finite(cell.get("pass_rate"))
    if rate is None:
        return "-"
    low, high = finite(cell.get("pass_rate_ci_low")), finite(
        cell.get("pass_rate_ci_high"))
    if low is None or high is None:
        return percent(rate)
    return f"{percent(rate)} {percent_interval(low, high)}"


def threshold_text(cell: dict[str, Any]) -> str:
    """``>=0.6`` / ``<=2000`` / ``-``."""
    return bound(finite(cell.get("threshold")), cell.get("direction") == "lower")


def ci_svg(cell: dict[str, Any], low: float, high: float, width: int = 150) -> str:
    """A small inline SVG: the metric's range, the 95% CI as a band, the mean, the threshold."""
    mean = finite(cell.get("mean"))
    if mean is None:
        return ""
    span = high - low or 1.0

    def x(value: float) -> float:
        return round(4 + (width - 8) * min(max((value - low) / span, 0.0), 1.0), 1)

    parts = [f'<line x1="4" y1="8" x2="{width - 4}" y2="8" stroke="#ccc"/>']
    ci_low, ci_high = finite(cell.get("ci_low")), finite(cell.get("ci_high"))
    if ci_low is not None and ci_high is not None:
        left, right = sorted((x(ci_low), x(ci_high)))
        parts.append(f'<rect x="{left}" y="3" width="{max(right - left, 1.5)}" height="10" '
                     'fill="#9ec5f8"/>')
    limit = finite(cell.get("threshold"))
    if limit is not None:
        parts.append(f'<line x1="{x(limit)}" y1="0" x2="{x(limit)}" y2="16" stroke="#b00020" '
                     'stroke-width="1.5"/>')
    parts.append(f'<circle cx="{x(mean)}" cy="8" r="3.2" fill="#1a3e72"/>')
    title = f"range {low:g} to {high:g}; mean {mean:.4g}"
    return (f'<svg class="ci" width="{width}" height="16" viewBox="0 0 {width} 16" '
            f'role="img"><title>{esc(title)}</title>{"".join(parts)}</svg>')


def value_text(cell: dict[str, Any], binary: bool, ones: int | None) -> str:
    """The mean, or for a 0/1 metric the proportion ``k/n = p%``."""
    mean = finite(cell.get("mean"))
    if mean is None:
        return "-"
    if binary:
        n = cell.get("n") or 0
        count = ones if ones is not None else round(mean * n)
        return f"{count}/{n} = {percent(mean)}"
    return num(mean)


# ------------------------------------------------------------------------- sections

def header(document: dict[str, Any]) -> str:
    """Title and the run's identity."""
    run = document.get("run") or {}
    meta = " · ".join(esc(x) for x in (
        f"run {run.get('id') or '-'}", run.get("time") or "-",
        f"commit {run.get('git_commit') or '-'}",
        f"pytest-ragbench {run.get('plugin_version') or '-'}"))
    return f"<h1>pytest-ragbench report</h1><p class=meta>{meta}</p>"


def navigation(body: str) -> str:
    """Links to the sections the page has."""
    links = "".join(f'<a href="#{key}">{esc(title)}</a>' for key, title in NAV
                    if f"id={key}>" in body or f'id="{key}"' in body)
    return f'<nav class="toc">{links}</nav>'


def verdict_section(document: dict[str, Any]) -> str:
    """The verdict: the word, what it covers, the reasons (each linked), the item tally."""
    decided = verdict_mod.decide(document)
    banner = ""
    if decided.interrupted:
        run = document.get("run") or {}
        hint = f" ({verdict_mod.RESUME_HINT})" if run.get("status") == "interrupted" else ""
        banner = (f'<div class="banner partial">Partial run: '
                  f"{esc(verdict_mod.interrupted_text(run))}.{esc(hint)}</div>")
    resumed = verdict_mod.resumed_text(document.get("run") or {})
    if resumed:
        banner += f'<div class="banner resumed">{esc(resumed[0].upper() + resumed[1:])}.</div>'
    for line in verdict_mod.served_warnings(document):
        banner += (f'<div class="banner partial served">Served model: {esc(line)} '
                   f'(<a href="#components">usage</a>)</div>')
    reasons = []
    for reason in decided.reasons:
        target = "#items?outcome=notpassed" if reason.anchor == "items" else f"#{reason.anchor}"
        css = "failing" if reason.failing else "notefor"
        reasons.append(f'<li class="{css}"><a href="{esc(target)}">{esc(reason.text)}</a></li>')
    if not reasons:
        reasons.append("<li>every item passed, every gate held</li>")
    totals = verdict_mod.item_totals(document)
    tally = " · ".join(f"{totals[s]} {s}" for s in ("passed", "warning", "failed", "error",
                                                      "skipped", "lost") if totals.get(s))
    kinds = ", ".join(f"{kind} {(entry.get('all') or {}).get('items', 0)}"
                      for kind, entry in (document.get("counts") or {}).items())
    css = decided.word.lower()
    covers = coverage.line(document)
    advice = coverage.recommendation(document)
    scope = (f'<p class="coverage">{esc(covers)}</p>' if covers else "") + \
        (f'<p class="coverage hint">{esc(advice[0].upper() + advice[1:])}.</p>' if advice else "")
    return (f'{banner}<section id="verdict" class="verdict {css}">'
            f'<div class="word">{esc(decided.word)}</div><div>{scope}<ul>{"".join(reasons)}</ul>'
            f'<div class="tally">{totals.get("items", 0)} items: {esc(tally or "none")}'
            f'{" · by kind: " + esc(kinds) if kinds else ""}</div></div></section>')


def judge_section(document: dict[str, Any]) -> str:
    """Unscored counts of the judged metrics, the judge's own section, calibration."""
    judged = verdict_mod.judged_metrics(document)
    own = document.get("judge")
    calibration = document.get("judge_calibration")
    if not (verdict_mod.judge_configured(document) or own or calibration):
        return ""
    parts = ["<h2 id=judge>Judge</h2>"]
    judge = (document.get("components") or {}).get("judge")
    if judge:
        parts.append(f"<p class=meta>{esc(judge)}</p>")
    if judged:
        rows, classes = [], []
        for kind, metric, cell in judged:
            n, unscored = cell.get("n") or 0, cell.get("n_unscored") or 0
            total = n + unscored
            reasons = "; ".join(f"{count}: {reason}" for reason, count in
                                (cell.get("unscored_reasons") or {}).items())
            rows.append([kind, metric, n, unscored,
                         percent(unscored / total) if total else "-", reasons or "-"])
            classes.append(["", "", "", "bad" if unscored else "", "", ""])
        parts.append(table(["kind", "metric", "scored", "unscored", "share unscored",
                            "why unscored"], rows, classes))
    if isinstance(own, dict) and own:
        parts.append(generic(own))
    if isinstance(calibration, dict) and calibration:
        parts.append(calibration_table(calibration))
    return "".join(parts)


def calibration_table(calibration: dict[str, Any]) -> str:
    """The judge against human labels: agreement, bias and the prediction-powered mean."""
    rows = []
    for kind, metrics in calibration.items():
        for metric, c in (metrics or {}).items():
            if not isinstance(c, dict):
                continue
            rows.append([kind, metric, num(c.get("n_labeled")),
                         num(c.get("n_judged")), num(c.get("judge_mean")),
                         num(c.get("human_mean")), num(c.get("agreement")),
                         num(c.get("kappa")),
                         f"{num(c.get('bias'))} "
                         f"{interval(c.get('bias_ci_low'), c.get('bias_ci_high'))}",
                         f"{num(c.get('ppi_mean'))} "
                         f"{interval(c.get('ppi_ci_low'), c.get('ppi_ci_high'))}"])
    if not rows:
        return ""
    return ("<h3>Calibration against human labels</h3><p class=meta>bias = judge − human on "
            "the labeled items; the prediction-powered mean (PPI++) estimates the human mean "
            "from every judged item, stratified by category where every category has "
            "labels</p>" + table(
                ["kind", "metric", "labeled", "judged", "judge mean", "human mean",
                 "agreement", "kappa", "bias [95% CI]", "PPI mean [95% CI]"], rows))


def generic(value: Any) -> str:
    """Any JSON value as nested tables (for sections this page does not know yet)."""
    if isinstance(value, dict):
        if value and all(isinstance(v, dict) for v in value.values()):
            keys = list(dict.fromkeys(k for v in value.values() for k in v))
            if all(not isinstance(v.get(k), dict | list) for v in value.values() for k in keys):
                return table(["", *keys], [[name, *(_plain(v.get(k)) for k in keys)]
                                           for name, v in value.items()])
        return ("<dl class=kv>" + "".join(f"<dt>{esc(k)}</dt><dd>{generic(v)}</dd>"
                                          for k, v in value.items()) + "</dl>")
    if isinstance(value, list):
        return "<ul>" + "".join(f"<li>{generic(v)}</li>" for v in value) + "</ul>"
    return esc(_plain(value))


def _plain(value: Any) -> str:
    if isinstance(value, float):
        return num(value)
    return "-" if value is None else str(value)


def gates_section(document: dict[str, Any]) -> str:
    """Gates (passed, missed, not checked), regressions, and which component moved."""
    gates = [g for g in document.get("gates") or [] if isinstance(g, dict)]
    found = [r for r in document.get("regressions") or [] if isinstance(r, dict)]
    moved = stages.lines(document.get("comparisons") or {}, document.get("not_compared") or ())
    if not (gates or found or moved):
        return ""
    parts = ["<h2 id=gates>Gates and regressions</h2>"]
    if gates:
        rows, classes = [], []
        for g in sorted(gates, key=lambda g: {False: 0, None: 1}.get(g.get("passed"), 2)):
            result = {False: "MISSED", None: "not checked"}.get(g.get("passed"), "passed")
            checked = "95% CI bound" if g.get("mode") == "ci-lower" else "mean"
            op = comparator(g.get("direction") == "lower")
            label = "threshold " if g.get("source") == "threshold" else ""
            rows.append([f'<span title="{esc(gate_line(g))}">{esc(label)}{esc(g.get("gate"))}'
                         "</span>", f"{checked} {op} {g.get('bound')}",
                         num(finite(g.get("value"))),
                         num(finite(g.get("mean"))),
                         cell_interval(g), g.get("n", 0), result])
            classes.append([""] * 6 + [{"MISSED": "bad", "passed": "good"}.get(result, "note")])
        parts.append(table(["gate", "checked", "value", "mean", "95% CI", "n", "result"],
                           rows, classes, raw=frozenset({0})))
    failing = {str(line) for line in document.get("failures") or []}
    if found:
        label = (document.get("baseline") or {}).get("label") or "baseline"
        lines = [regression_line(c, label) for c in found]
        parts.append("<h3>Regressions against the baseline</h3><ul>" + "".join(
            f"<li class={'bad' if line in failing else 'note'}>{esc(line)}</li>"
            for line in lines) + "</ul>")
    if moved:
        parts.append("<h3>Which component moved</h3><p class=meta>per comparison and kind: "
                     "retrieval metrics and answer metrics, paired tests with Holm-adjusted "
                     "p &lt; 0.05</p>")
        for name, lines in moved:
            parts.append(f"<p><b>{esc(name)}</b></p><ul>" + "".join(
                f"<li>{esc(line)}</li>" for line in lines) + "</ul>")
    return "".join(parts)


def kind_tables(document: dict[str, Any], values: plots.Values) -> str:
    """Per kind: item counts, then each metric with its interval, then its breakdowns."""
    metrics = document.get("metrics") or {}
    counts = document.get("counts") or {}
    if not metrics and not counts:
        return ""
    several = len(document.get("systems") or []) > 1
    parts = ["<h2 id=results>Results by kind</h2><p class=meta>mean (a 0/1 metric: the "
             "proportion) with its 95% interval; the bar shows the metric's range, the "
             "interval (blue), the mean (dot) and the item threshold (red)</p>"]
    breakdowns = dict(terminal.breakdown_tables_by_kind(document))
    for kind in sorted(set(metrics) | set(counts)):
        entry = (counts.get(kind) or {}).get("all") or {}
        tally = ", ".join(f"{entry[s]} {s}" for s in ("passed", "warning", "failed", "error",
                                                       "skipped", "lost") if entry.get(s))
        parts.append(f"<h3>{esc(kind)}</h3><p class=meta>{entry.get('items', 0)} items"
                     f"{': ' + esc(tally) if tally else ''}</p>")
        rows, classes = [], []
        for metric, cell in (metrics.get(kind) or {}).items():
            if not isinstance(cell, dict):
                continue
            per_system = values.get((kind, metric), {})
            every = [v for vs in per_system.values() for v in vs]
            binary = plots.is_binary(every)
            low, high = plots.metric_range(metric, every)
            cells = (cell.get("systems") or {}) if several else {"": cell}
            for system, c in cells.items():
                series = per_system.get(system, []) if several else every
                ones = int(sum(series)) if binary and len(series) == (c.get("n") or 0) else None
                method = c.get("ci_method")
                ci = cell_interval(c, share=binary) + (
                    f" <span class=note>{esc(method)}</span>" if method else "")
                rows.append([metric, *([system] if several else []), c.get("n", 0),
                             c.get("n_unscored", 0), value_text(c, binary, ones), ci,
                             ci_svg(c, low, high), threshold_text(c), pass_rate_text(c)])
                offset = 1 if several else 0
                classes.append([""] * (3 + offset) + [""] * 5)
        if rows:
            offset = 1 if several else 0
            parts.append(table(["metric", *(["system"] if several else []), "n", "unscored",
                                "mean / proportion", "95% CI", "", "threshold", "pass rate"],
                               rows, classes, raw=frozenset({4 + offset, 5 + offset})))
        notes = [n for n in terminal.unscored_notes(document) if n.startswith(kind)]
        if notes:
            parts.append("<ul class=note>" + "".join(f"<li>{esc(n)}</li>" for n in notes)
                         + "</ul>")
        for title, table_rows in breakdowns.get(kind, []):
            parts.append(f"<h4>{esc(title)}</h4>" + _rows_table(table_rows))
    return "".join(parts)


def comparisons_section(document: dict[str, Any], page: Page) -> str:
    """Paired comparisons, a delta plot per comparison, and the power table."""
    comparisons = document.get("comparisons") or {}
    baseline = terminal.baseline_line(document)
    rows = terminal.comparison_rows(document)
    missing = terminal.not_compared_lines(document)
    if len(rows) < 2 and not baseline and not missing:
        return ""
    marks = {"WORSE": "bad", "better": "good"}
    classes = [[""] * (len(row) - 1) + [marks.get(row[-1], "")] for row in rows[1:]]
    parts = ["<h2 id=comparisons>Comparisons</h2>"]
    if baseline:
        parts.append(f"<p>{esc(baseline)}</p>")
    if len(rows) > 1:
        parts.append("<p class=meta>A − B per metric, paired by case; p Holm-adjusted over "
                     "each family; verdict after Holm at 0.05</p>")
        parts.append(table(rows[0], rows[1:], classes))
    if missing:
        parts.append(f"<p class=note>{esc(missing[0])}</p><ul>"
                     + "".join(f"<li>{esc(line.strip())}</li>" for line in missing[1:])
                     + "</ul>")
    for name, kinds in comparisons.items():
        flat = [c for metrics in (kinds or {}).values() for c in (metrics or {}).values()
                if isinstance(c, dict)]
        parts.append(page.plot(f"{name} deltas", functools.partial(plots.delta_plot, name, flat)))
    if comparisons:
        parts.append(_rows_table(terminal.power_rows(document)))
    return "".join(parts)


@dataclass(frozen=True)
class DrawnPlots:
    """A kind's plots drawn ahead (run/plots_ahead.py), with what they were drawn from."""

    inputs: str  # plot_inputs() of the document they were drawn from
    html: str
    problems: tuple[str, ...] = ()


def best_section(document: dict[str, Any], page: Page) -> str:
    """A sweep's best configuration: each objective's ranking, the Pareto table and plot."""
    best = document.get("best")
    if not best:
        return ""
    # lazy: only a sweep's report has this section
    from pytest_ragbench.render import best as best_text

    parts = ["<h2 id=best>Best configuration</h2>",
             "<p class=meta>Multiple comparisons with the best: each configuration against "
             "the best by the paired test, k − 1 comparisons Holm-corrected at 0.05; the "
             "best set is every configuration not significantly worse than the best.</p>"]
    parts += [f"<p>{esc(line.strip())}</p>" for line in best_text.recommended_lines(best)]
    for objective in best.get("objectives") or ():
        parts.append(f"<h3>{esc(objective['objective'])}</h3>")
        rows = best_text.ranking_rows(objective)
        if len(rows) > 1:
            marks = [[""] * (len(row) - 1) + ["good" if row[-1] == "yes" else "bad"]
                     for row in rows[1:]]
            parts.append(table(rows[0], rows[1:], marks))
        elif objective.get("note"):
            parts.append(f"<p class=note>{esc(objective['note'])}</p>")
    if best.get("pareto"):
        parts.append("<h3>Quality against cost</h3>")
        parts.append(_rows_table(best_text.pareto_rows(best)))
        parts.append(page.plot("the Pareto front", functools.partial(plots.pareto_plot, best)))
    return "".join(parts)


def plot_inputs(document: dict[str, Any], kind: str, values: plots.Values) -> str:
    """Everything a kind's plots are drawn from, as one comparable text."""
    return json.dumps([(document.get("metrics") or {}).get(kind),
                       (document.get("breakdowns") or {}).get(kind),
                       document.get("systems"),
                       sorted((metric, series) for (k, metric), series in values.items()
                              if k == kind)],
                      sort_keys=True, default=str)


def kind_plots(document: dict[str, Any], kind: str, values: plots.Values, page: Page) -> str:
    """One kind's histograms of continuous metrics and intervals per system and category."""
    metrics = (document.get("metrics") or {}).get(kind) or {}
    names = [m for m, e in metrics.items() if isinstance(e, dict) and e.get("n")]
    continuous = plots.continuous_metrics(values, kind, names)
    drawn = [page.plot(f"{kind} distributions",
                       functools.partial(plots.distribution_plot, values, kind, continuous))]
    for name, groups in plots.groupings(document, kind):
        drawn.append(page.plot(f"{kind} by {name}", functools.partial(
            plots.interval_plot, kind, name, groups, values)))
    body = "".join(d for d in drawn if d)
    return f"<h3>{esc(kind)}</h3>{body}" if body else ""


def plots_section(document: dict[str, Any], values: plots.Values, page: Page,
                  ahead: dict[str, DrawnPlots] | None = None) -> str:
    """Per kind: histograms of continuous metrics, intervals per system and category.

    A kind's plots in ``ahead`` are used when they were drawn from what this document
    holds for the kind; otherwise they are drawn here.
    """
    parts = []
    for kind in document.get("metrics") or {}:
        early = (ahead or {}).get(kind)
        if early is not None and early.inputs == plot_inputs(document, kind, values):
            page.problems.extend(early.problems)
            parts.append(early.html)
        else:
            parts.append(kind_plots(document, kind, values, page))
    if not any(parts):
        return ""
    return ("<h2 id=plots>Plots</h2><p class=meta>histograms of continuous metrics (0/1 "
            "metrics are proportions in the tables above); means with 95% intervals by "
            "group; axes span each metric's natural range</p>" + "".join(parts))


def components_section(document: dict[str, Any]) -> str:
    """What answered (the user's own system named), model usage and time per item."""
    found = document.get("components") or {}
    usage = document.get("usage") or {}
    parts = []
    if found:
        rows = []
        for role, text in found.items():
            rows.append([role, text, *_service(usage, role)])
        parts.append(table(["role", "description", "service time p50 / p95 (measured)",
                            "system's latency_s p50 / p95"], rows))
    parts.append(_rows_table(terminal.usage_rows(document)))
    parts.append(_rows_table(terminal.timing_rows(document)))
    body = "".join(p for p in parts if p)
    return f"<h2 id=components>Components, usage and time</h2>{body}" if body else ""


def _service(usage: dict[str, Any], role: str) -> list[str]:
    """Measured service time and the system's own latency for a ``system`` role."""
    if role == "system":
        key = "system"
    elif role.startswith("system "):
        key = f"{role[len('system '):]}/system"
    else:
        return ["", ""]
    row = usage.get(key) or {}

    def pair(p50: Any, p95: Any) -> str:
        if p50 is None:
            return "-"
        return f"{seconds(p50)} / {seconds(p95)}"

    return [pair(row.get("service_p50_s"), row.get("service_p95_s")),
            pair(row.get("latency_p50_s"), row.get("latency_p95_s"))]


def report_section(section: dict[str, Any]) -> str:
    """One report section (a kind's or a plugin's): title, table, text."""
    rows = [[section_cell(c) for c in row] for row in section.get("table") or ()]
    text = [str(line) for line in section.get("text") or ()]
    key = esc(section.get("key"))
    return (f'<section class="report-section" id="section-{key}">'
            f"<h2>{esc(section.get('title') or section.get('key'))}</h2>"
            f"{_rows_table(rows)}{f'<pre>{esc(chr(10).join(text))}</pre>' if text else ''}"
            "</section>")


def section_plots(section: dict[str, Any]) -> str:
    """A report section's plots (the table is the section's own part)."""
    return "".join(plots.band_plot(plot) for plot in section.get("plots") or ()
                   if isinstance(plot, dict))


def alarm_section(document: dict[str, Any]) -> str:
    """The report sections' alarms (raised [triggers]), at the top of the page."""
    return "".join(f"<p class=problem>{esc(line)}</p>" for line in terminal.alarm_lines(document))


def run_section(document: dict[str, Any]) -> str:
    """Machine, versions and settings, folded."""
    run = {k: v for k, v in (document.get("run") or {}).items()}
    config = document.get("config") or {}
    return ("<h2 id=run>Run</h2><details><summary>machine, library versions and settings"
            f"</summary>{generic(run)}{generic(config)}</details>")


def render(document: dict[str, Any], problems: list[str] | None = None,
           plots_ahead: dict[str, DrawnPlots] | None = None) -> str:
    """The whole page; parts that fail are named in ``problems`` and left out.

    ``plots_ahead``: kinds' plots drawn while the items still ran (used where still true).
    """
    problems = [] if problems is None else problems
    page = Page(problems)
    values: plots.Values = {}
    try:
        values = plots.item_values(document)
    except Exception as exc:  # the tables and plots then go without item values
        problems.append(f"report.html: reading the item values failed ({type(exc).__name__})")
    page.add("the alarms", lambda: alarm_section(document))
    page.add("the verdict", lambda: verdict_section(document))
    page.add("the judge section", lambda: judge_section(document))
    page.add("the gates", lambda: gates_section(document))
    page.add("the results by kind", lambda: kind_tables(document, values))
    page.add("the comparisons", lambda: comparisons_section(document, page))
    page.add("the best configuration", lambda: best_section(document, page))
    page.add("the plots", lambda: plots_section(document, values, page, plots_ahead))
    page.add("the items", lambda: drilldown.section(document))
    page.add("the components", lambda: components_section(document))
    for section in terminal.drawn_sections(document):
        page.add(f"the report section {section.get('key')}",
                 lambda section=section: report_section(section))  # type: ignore[misc]
    for section in document.get("sections") or ():
        if isinstance(section, dict) and section.get("plots"):
            page.add(f"the plots of report section {section.get('key')}",
                     lambda section=section: section_plots(section))  # type: ignore[misc]
    page.add("the run details", lambda: run_section(document))
    body = "\n".join(p for p in page.parts if p)
    top = Page(problems)
    top.add("the header", lambda: header(document))
    return wrap(f"{''.join(top.parts)}{navigation(body)}\n{body}", script=True,
                run=document.get("run"))


def run_meta(run: Any) -> str:
    """``<meta>`` tags naming the run and its status: the same run id as every report file."""
    if not isinstance(run, dict):
        return ""
    return "".join(f'<meta name="ragbench-run-{key}" content="{esc(run.get(key))}">'
                   for key in ("id", "status") if run.get(key))


def wrap(body: str, script: bool, run: Any = None) -> str:
    """The document around ``body``: inline CSS (and the script), no outside resources."""
    code = f"<script>{drilldown.asset('report.js')}</script>" if script else ""
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"{run_meta(run)}<title>pytest-ragbench report</title>"
            f"<style>{drilldown.asset('report.css')}</style></head><body><main>\n{body}\n"
            f"</main>{code}</body></html>\n")


def fallback_page(document: dict[str, Any], detail: str) -> str:
    """A page that says the report could not be rendered, with the verdict if possible."""
    try:
        head = verdict_section(document)
    except Exception:
        head = ""
    return wrap(f"<h1>pytest-ragbench report</h1>{head}<p class=problem>report.html could "
                f"not be rendered ({esc(detail)}). The results are in results.json and "
                "items.jsonl beside this page.</p>", script=False, run=document.get("run"))
