"""The traffic section of the results document: windows, drift and triggers.

``section(records, settings)`` is the ``traffic`` key of results.json (None without
traffic items); :func:`report_section` its report section, through the hook
``pytest_ragbench_report_sections``: the window table (:func:`window_rows`), the drift
lines, the raised triggers as alarms for the top of the summary and report.html
(:func:`trigger_lines`), each trigger and drift as a JUnit check (:func:`checks`) and the
windows' plot (:func:`window_plot`). Every
figure is an estimate for the whole traffic: metrics scored on every interaction use
the window's values; judged metrics under ``--ragbench-sample`` are weighted by design
(stats/traffic.py), each window standing for the interactions with an answer in it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.render.text import num
from pytest_ragbench.results.records import ItemRecord

KIND = "traffic"
# Seed 004's weekly report first, in its words.
WEEKLY = {"retrieved_count": "average retrieval count", "mean_similarity": "average similarity",
          "user_feedback": "user satisfaction", "no_results": "queries with no results"}
OTHERS = ("top_similarity", "latency_ms", "declined", "faithfulness", "answer_relevancy",
          "judge_relevance")
JUDGED = ("faithfulness", "answer_relevancy", "judge_relevance")
# +1: higher is better; -1: lower is better; 0: neither (listed, never "worse"). A decline
# in traffic is a user left without an answer.
DIRECTION = {"retrieved_count": 0, "mean_similarity": 1, "user_feedback": 1, "no_results": -1,
             "top_similarity": 1, "latency_ms": -1, "declined": -1, "faithfulness": 1,
             "answer_relevancy": 1, "judge_relevance": 1}
ANSWERED = "declined"  # scored exactly when the interaction logged an answer


def _ordered(metrics: Sequence[str]) -> list[str]:
    known = [*WEEKLY, *OTHERS]
    return [m for m in known if m in metrics] + sorted(m for m in metrics if m not in known)


def section(records: Sequence[ItemRecord], settings: RagbenchConfig) -> dict[str, Any] | None:
    """``traffic``: per window each metric's estimate, the whole traffic's, drift, triggers."""
    traffic = [r for r in records if r.kind == KIND and r.category and r.metrics]
    if not traffic:
        return None
    from pytest_ragbench.stats.traffic import (
        Moments,
        drift,
        stratified_estimate,
        window_estimate,
    )

    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    sizes: dict[str, int] = defaultdict(int)
    answered: dict[str, int] = defaultdict(int)
    for record in traffic:
        window = str(record.category)
        sizes[window] += 1
        answered[window] += ANSWERED in record.metrics
        for metric, value in record.metrics.items():
            values[window][metric].append(value)
    windows = sorted(sizes)
    metrics = _ordered(sorted({m for w in windows for m in values[w]}))
    moments = {w: {m: Moments.of(values[w][m]) for m in values[w]} for w in windows}
    sampled = settings.sample is not None

    def population(window: str, metric: str) -> int | None:
        return answered[window] if sampled and metric in JUDGED else None

    rows = []
    for window in windows:
        rows.append({"window": window, "interactions": sizes[window], "metrics": {
            m: window_estimate(moments[window][m], population(window, m)).to_dict()
            for m in metrics if m in moments[window]}})
    overall = {}
    for metric in metrics:
        strata = [(moments[w][metric], population(w, metric) or moments[w][metric].n)
                  for w in windows if metric in moments[w]]
        overall[metric] = stratified_estimate(strata).to_dict()
    changes = drift(windows, moments, DIRECTION)
    latest = rows[-1]
    triggers = [_trigger(rule, latest) for rule in settings.triggers.values()
                if rule["metric"].startswith(f"{KIND}.")]
    failures = []
    if settings.fails_on("drift"):
        failures += [drift_line(c.to_dict()) for c in changes
                     if c.worse and c.after == windows[-1]]
    if settings.fails_on("critical"):
        failures += [t["line"] for t in triggers if t["raised"] and t["level"] == "critical"]
    judged = sum(1 for r in traffic if any(m in r.metrics for m in JUDGED))
    return {
        "window": settings.window,
        "interactions": len(traffic),
        "sample": {"requested": settings.sample, "judged": judged,
                   "answered": sum(answered.values())} if sampled else None,
        "labels": WEEKLY,
        "metrics": metrics,
        "windows": rows,
        "overall": overall,
        "drift": [c.to_dict() for c in changes if c.significant],
        "tested": len(changes),
        "triggers": triggers,
        "failures": failures,
    }


def _trigger(rule: dict[str, Any], latest: dict[str, Any]) -> dict[str, Any]:
    """A trigger on the latest window: raised when the whole interval is past the bound."""
    metric = rule["metric"].split(".", 1)[1]
    estimate = latest["metrics"].get(metric)
    found: dict[str, Any] = {**rule, "window": latest["window"], "raised": False,
                             "mean": None, "low": None, "high": None}
    if estimate is None or estimate["mean"] is None:
        found["line"] = f"{rule['level']}: {rule['metric']} not measured in {latest['window']}"
        return found
    found.update(mean=estimate["mean"], low=estimate["low"], high=estimate["high"])
    if "below" in rule:
        bound, side, certain = rule["below"], "below", estimate["high"]
        found["raised"] = certain is not None and certain < bound
    else:
        bound, side, certain = rule["above"], "above", estimate["low"]
        found["raised"] = certain is not None and certain > bound
    found["line"] = (f"{rule['level']}: {rule['metric']} = {estimate['mean']:.3f} "
                     f"[95% CI {num(estimate['low'])}, {num(estimate['high'])}] in "
                     f"{latest['window']} is {side} {bound:g}"
                     + ("" if found["raised"] else " (not certain: the interval crosses it)"))
    return found


def drift_line(change: dict[str, Any]) -> str:
    """``drift traffic.no_results: 2026-W46 -> 2026-W47 +0.210 [...] (Holm p = 0.0001)``."""
    return (f"drift {KIND}.{change['metric']}: {change['before']} -> {change['after']} "
            f"{change['delta']:+.3f} [95% CI {num(change['low'])}, {num(change['high'])}] "
            f"(Holm p = {change['p_holm']:.2g}){' worse' if change['worse'] else ''}")


def trigger_lines(traffic: dict[str, Any] | None) -> list[str]:
    """The raised alarms, critical first, for the top of the summary and report.html."""
    if not traffic:
        return []
    raised = [t for t in traffic["triggers"] if t["raised"]]
    return [t["line"].upper().split(":", 1)[0] + ":" + t["line"].split(":", 1)[1]
            for t in sorted(raised, key=lambda t: t["level"] != "critical")]


def window_rows(traffic: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The window table: a header and one row per window (mean [low, high] per metric)."""
    metrics = traffic["metrics"]
    header = ["window", "n", *[WEEKLY.get(m, m) for m in metrics]]
    rows = []
    for window in traffic["windows"]:
        cells = [window["window"], str(window["interactions"])]
        for metric in metrics:
            estimate = window["metrics"].get(metric)
            if estimate is None or estimate["mean"] is None:
                cells.append("-")
                continue
            cells.append(f"{estimate['mean']:.3g} [{_short(estimate['low'])}, "
                         f"{_short(estimate['high'])}]")
        rows.append(cells)
    return header, rows


def _short(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def terminal_lines(traffic: dict[str, Any] | None) -> list[str]:
    """The traffic part of the terminal summary: the window table and the drift found."""
    if not traffic:
        return []
    header, rows = window_rows(traffic)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"traffic by {traffic['window']} (mean [95% CI]; "
             + ("judged metrics estimated for the whole traffic from a sample of "
                f"{traffic['sample']['judged']}" if traffic["sample"] else "every interaction")
             + ")"]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
              for row in [header, *rows]]
    if traffic["drift"]:
        lines.append(f"traffic drift (Welch, Holm within each window pair, "
                     f"{traffic['tested']} tests):")
        lines += ["  " + drift_line(change) for change in traffic["drift"]]
    else:
        lines.append(f"traffic drift: none significant ({traffic['tested']} tests, Holm)")
    return lines


def checks(traffic: dict[str, Any]) -> list[Any]:
    """Every trigger and every drift of the latest window, as session checks (JUnit).

    A trigger fails when raised at level critical under ``--ragbench-fail-on critical``,
    a worse drift under ``--ragbench-fail-on drift`` (they are then failure lines); raised
    otherwise, it is reported as found.
    """
    # lazy: the class the session checks sections against (pytester may re-import it)
    from pytest_ragbench.results.sections import SectionCheck

    failing = set(traffic["failures"])
    found = []
    for trigger in traffic["triggers"]:
        outcome = "failed" if trigger["line"] in failing else ("found" if trigger["raised"]
                                                              else "passed")
        found.append(SectionCheck(
            name=f"trigger[{trigger['metric']}]", check="trigger", outcome=outcome,
            line=trigger["line"],
            properties={"ragbench.check": "trigger", "ragbench.message": trigger["line"],
                        "ragbench.level": trigger.get("level"),
                        "ragbench.value": trigger.get("mean")}))
    latest = traffic["windows"][-1]["window"]
    for change in traffic["drift"]:
        if change["after"] != latest:
            continue
        line = drift_line(change)
        found.append(SectionCheck(
            name=f"drift[{KIND}.{change['metric']}]", check="drift",
            outcome="failed" if line in failing else "found", line=line,
            properties={"ragbench.check": "drift", "ragbench.message": line,
                        "ragbench.delta": change.get("delta"),
                        "ragbench.p_holm": change.get("p_holm")}))
    return found


def window_plot(traffic: dict[str, Any]) -> Any:
    """Each metric over the windows: the estimate and its 95% interval as a band."""
    # lazy: the classes of the current sections module (pytester may re-import it)
    from pytest_ragbench.results.sections import BandPanel, BandPlot

    cells = {m: [w["metrics"].get(m) or {} for w in traffic["windows"]]
             for m in traffic["metrics"]}
    return BandPlot(
        x=[w["window"] for w in traffic["windows"]],
        panels=[BandPanel(title=f"{KIND}.{m} by {traffic['window']} (mean, 95% CI)",
                              mean=[c.get("mean") for c in cells[m]],
                              low=[c.get("low") for c in cells[m]],
                              high=[c.get("high") for c in cells[m]])
                for m in traffic["metrics"]])


def report_section(records: Sequence[ItemRecord], settings: RagbenchConfig) -> Any:
    """The traffic section: ``results.json["traffic"]`` and what the report shows of it.

    Its window table and drift lines, its raised triggers (the section's alarms), the lines
    that fail the session (``--ragbench-fail-on drift`` / ``critical``), its JUnit checks
    and its plot; empty without traffic.
    """
    # lazy: the class the session checks sections against (pytester may re-import it)
    from pytest_ragbench.results.sections import ReportSection

    part = section(records, settings)
    if not part:
        return ReportSection(key=KIND, title=KIND, data=None)
    header, rows = window_rows(part)
    lines = terminal_lines(part)
    return ReportSection(key=KIND, title=lines[0], data=part, table=[header, *rows],
                         text=lines[1 + 1 + len(rows):], alarms=trigger_lines(part),
                         failures=part["failures"], checks=checks(part),
                         plots=[window_plot(part)])
