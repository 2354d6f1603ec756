"""The ``ragbench`` terminal section: plain aligned tables rendered from the results document."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.config.prices import dollars
from pytest_ragbench.render.text import (
    bound,
    cell_interval,
    effect,
    num,
    p_text,
    pass_rate,
    percent,
    seconds,
    section_cell,
    signed,
    table,
)
from pytest_ragbench.results import calibration, coverage, judging, stages
from pytest_ragbench.results.aggregate import COUNTED, N_RESAMPLES
from pytest_ragbench.results.gates import gate_line
from pytest_ragbench.results.verdict import (
    RESUME_HINT,
    decide,
    interrupted_text,
    plural,
    resumed_text,
    served_warnings,
)
from pytest_ragbench.stats.intervals import BCA_MIN


def counts_rows(counts: dict[str, Any]) -> list[tuple[str, ...]]:
    """Items per status, per kind and per category within each kind."""
    rows: list[tuple[str, ...]] = [("kind", "category", "items", *COUNTED)]
    for kind, entry in counts.items():
        rows.append(_count_row(kind, "(all)", entry.get("all") or {}))
        categories = entry.get("categories") or {}
        if len(categories) > 1 or "-" not in categories:
            rows += [_count_row("", c, categories[c]) for c in categories]
    return rows


def _count_row(kind: str, category: str, counts: dict[str, int]) -> tuple[str, ...]:
    return (kind, category, str(counts.get("items", 0)), *(str(counts.get(s, 0)) for s in COUNTED))


def _threshold(entry: dict[str, Any]) -> str:
    return bound(entry.get("threshold"), entry.get("direction") == "lower")


# How each cell's interval was made, as the tables name it (pytest_ragbench.stats.intervals).
CI_METHODS = {"wilson": "Wilson", "clopper-pearson": "Clopper-Pearson", "bca": "BCa",
              "percentile": "percentile", "t": "t"}
CI_TAGS = {"wilson": "W", "clopper-pearson": "CP", "bca": "B", "percentile": "P", "t": "t",
           "identical": "identical"}


def ci_method(entry: dict[str, Any]) -> str:
    """The cell's CI method (``n too small`` without one; ``*`` marks the Bernoulli worst case)."""
    method = entry.get("ci_method")
    if not method:
        return "n too small" if entry.get("n") else "-"
    shown = CI_METHODS.get(method, method)
    if entry.get("ci_note") and entry.get("ci_note", "").startswith("no spread"):
        shown += "*"
    if entry.get("n_clusters"):
        shown += f", {entry['n_clusters']} clusters"
    return shown


def stat_cells(entry: dict[str, Any]) -> list[str]:
    return [str(entry.get("n", 0)), str(entry.get("n_unscored", 0)), num(entry.get("mean")),
            cell_interval(entry), ci_method(entry), num(entry.get("std")), _threshold(entry),
            pass_rate(entry)]


def metrics_rows(document: dict[str, Any]) -> list[list[str]]:
    """The metrics table: per kind (and system) and metric."""
    several = len(document.get("systems") or []) > 1
    rows = [["kind", *(["system"] if several else []), "metric", "n", "unscored", "mean",
             "95% CI", "CI method", "std", "threshold", "pass rate [95% CI]"]]
    for kind, by_metric in (document.get("metrics") or {}).items():
        for metric, entry in by_metric.items():
            # a system-independent kind (memory, ...) has one row for every system: "-"
            cells = (entry.get("systems") or {"-": entry}) if several else {"": entry}
            for system, cell in cells.items():
                rows.append([kind, *([system] if several else []), metric, *stat_cells(cell)])
    return rows


def unscored_notes(document: dict[str, Any]) -> list[str]:
    """One line per metric and reason it went unscored."""
    several = len(document.get("systems") or []) > 1
    notes = []
    for kind, by_metric in (document.get("metrics") or {}).items():
        for metric, entry in by_metric.items():
            cells = (entry.get("systems") or {"": entry}) if several else {"": entry}
            for system, cell in cells.items():
                prefix = f"{kind}[{system}]" if system else kind
                notes += [f"{prefix}.{metric}: {count} unscored: {reason}"
                          for reason, count in (cell.get("unscored_reasons") or {}).items()]
    return notes


def metrics_lines(document: dict[str, Any]) -> list[str]:
    """The metrics table, then one line per unscored reason."""
    if not (document.get("metrics") or {}):
        return []
    notes = unscored_notes(document)
    title = ("metrics: mean and 95% CI (Wilson for 0/1 metrics, with Poisson bounds at 1-2 "
             "successes or failures; skew-corrected t clipped to the metric's "
             f"range below n={BCA_MIN}, BCa bootstrap with {N_RESAMPLES} seeded resamples "
             "from there; none below n=2; * no spread: the Bernoulli worst case), std, "
             "item threshold, pass rate [Wilson 95% CI]")
    return [title, *table(metrics_rows(document)),
            *(["unscored metrics:", *(f"  {n}" for n in notes)] if notes else [])]


def breakdown_tables(document: dict[str, Any]) -> list[tuple[str, list[list[str]]]]:
    """``(title, rows)`` per kind and field with two or more values: mean [95% CI] per metric."""
    tables = []
    several = len(document.get("systems") or []) > 1
    for kind, fields in (document.get("breakdowns") or {}).items():
        for name, values in fields.items():
            if len(values) < 2:
                continue
            metrics = sorted({m for by_metric in values.values()
                              for m, e in by_metric.items() if e["n"]})
            rows: list[list[str]] = [[name, *(["system"] if several else []), "n", *metrics]]
            for value, by_metric in values.items():
                systems = (document.get("systems") or []) if several else [""]
                for system in systems:
                    cells = [by_metric.get(m, {}) for m in metrics]
                    if several:
                        cells = [c.get("systems", {}).get(system, {}) for c in cells]
                    if not any(c.get("n") for c in cells):
                        continue
                    rows.append([value, *([system] if several else []),
                                 str(max(c.get("n", 0) for c in cells)),
                                 *(_mean_ci(c) for c in cells)])
            if len(rows) > 1:
                tables.append((f"{kind} by {name} (mean [95% CI] method: {BREAKDOWN_KEY})",
                               rows))
    return tables


BREAKDOWN_KEY = "W Wilson, t, B BCa, * no spread; n<2: none"


def breakdown_tables_by_kind(document: dict[str, Any]
                             ) -> dict[str, list[tuple[str, list[list[str]]]]]:
    """:func:`breakdown_tables` grouped by kind."""
    grouped: dict[str, list[tuple[str, list[list[str]]]]] = {}
    for title, rows in breakdown_tables(document):
        grouped.setdefault(title.split(" by ", 1)[0], []).append((title, rows))
    return grouped


def _mean_ci(cell: dict[str, Any]) -> str:
    if not cell.get("n"):
        return "-"
    if cell.get("ci_low") is None:
        return f"{num(cell.get('mean'))} [n too small]"
    tag = CI_TAGS.get(cell.get("ci_method") or "", "")
    if (cell.get("ci_note") or "").startswith("no spread"):
        tag += "*"
    return f"{num(cell.get('mean'))} {cell_interval(cell)} {tag}".rstrip()


def breakdown_lines(document: dict[str, Any]) -> list[str]:
    """The breakdown tables, separated by blank lines."""
    lines: list[str] = []
    for title, rows in breakdown_tables(document):
        lines += ["", f"{title}:", *table(rows)]
    return lines[1:]


def drawn_sections(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The report sections of ``results.json`` that have something to show."""
    return [s for s in document.get("sections") or ()
            if isinstance(s, dict) and (s.get("table") or s.get("text"))]


def section_lines(section: dict[str, Any]) -> list[str]:
    """One report section: its title, its table, its text."""
    rows = [[section_cell(c) for c in row] for row in section.get("table") or ()]
    return [str(section.get("title") or section.get("key")), *(table(rows) if rows else ()),
            *(str(line) for line in section.get("text") or ())]


def sections_lines(document: dict[str, Any]) -> list[str]:
    """The report sections (built-in kinds' and plugins'), a blank line between them."""
    lines: list[str] = []
    for section in drawn_sections(document):
        lines += ["", *section_lines(section)]
    return lines[1:]


def usage_rows(document: dict[str, Any]) -> list[list[str]]:
    """Model calls, tokens, cache hit rate and call latency per role.

    For the system under test, ``service p50/p95`` is the time the plugin measured
    around each call; ``latency`` is what the system (or model client) reported.
    """
    usage = document.get("usage") or {}
    timed = any("service_p50_s" in row for row in usage.values())
    named = any(row.get("models") for row in usage.values())
    priced = any(row.get("cost") for row in usage.values())
    rows = [["model usage", "calls", "prompt tokens", "completion tokens", "cache hits",
             "latency p50", "latency p95", *(["service p50", "service p95"] if timed else []),
             *(["served model"] if named else []), *(["cost (paid)"] if priced else [])]]
    for role, row in usage.items():
        rows.append([role, str(row.get("calls", 0)), str(row.get("prompt_tokens", 0)),
                     str(row.get("completion_tokens", 0)), percent(row.get("cache_hit_rate")),
                     seconds(row.get("latency_p50_s")), seconds(row.get("latency_p95_s")),
                     *([seconds(row.get("service_p50_s")), seconds(row.get("service_p95_s"))]
                       if timed else []),
                     *([_served(row.get("models"))] if named else []),
                     *([_cost(row.get("cost"))] if priced else [])])
    return rows


def _cost(cost: Any) -> str:
    """``$0.0120 ($0.0060)``: every call at list price, then what reached the model."""
    if not cost:
        return "-"
    return f"{dollars(cost['usd'])} ({dollars(cost['paid_usd'])})"


def _served(models: Any) -> str:
    """The models a role's server said answered, by name (``-`` when it named none)."""
    names = sorted({name for served in (models or {}).values() for name in served})
    return ", ".join(names) or "-"


def timing_rows(document: dict[str, Any]) -> list[list[str]]:
    """Seconds per item, per kind."""
    rows = [["time per item", "n", "p50", "p95", "total"]]
    rows += [[kind, str(t["n"]), seconds(t["p50_s"]), seconds(t["p95_s"]),
              seconds(t["total_s"])] for kind, t in (document.get("timing") or {}).items()]
    return rows


def usage_lines(document: dict[str, Any]) -> list[str]:
    """Model usage, then time per item."""
    parts = [table(rows) for rows in (usage_rows(document), timing_rows(document))
             if len(rows) > 1]
    return [line for i, part in enumerate(parts) for line in ([""] if i else []) + part]


def components_lines(document: dict[str, Any]) -> list[str]:
    """Which embedder, generator and judge answered."""
    found = (document.get("components") or {})
    if not found:
        return []
    return ["components:", *(f"  {role}: {text}" for role, text in found.items())]


def baseline_line(document: dict[str, Any]) -> str | None:
    """Which baseline this run was compared with, and how many items paired."""
    baseline = document.get("baseline")
    if not baseline:
        return None
    return (f"baseline: {baseline['label']} (run {baseline['run_id'] or '?'}, "
            f"{baseline['time'] or '?'}): {baseline['paired']} items paired, "
            f"{baseline['only_current']} new, {baseline['only_baseline']} missing")


def _diff_ci(c: dict[str, Any]) -> str:
    if c.get("ci_low") is None:
        return "n too small"
    tag = CI_TAGS.get(c.get("ci_method") or "", "")
    return f"[{signed(c['ci_low'])}, {signed(c['ci_high'])}] {tag}".rstrip()


def comparison_rows(document: dict[str, Any]) -> list[list[str]]:
    """Paired comparisons: delta, its CI, p, Holm-adjusted p, effect size, verdict."""
    rows = [["comparison", "kind", "metric", "test", "n", "delta", "95% CI (unadjusted)", "p",
             "p Holm", "d", "verdict"]]
    for name, kinds in (document.get("comparisons") or {}).items():
        for kind, metrics in kinds.items():
            for metric, c in metrics.items():
                n = str(c.get("n")) + (f" ({c['n_clusters']} cl.)" if c.get("n_clusters") else "")
                rows.append([name, kind, metric, str(c.get("test")), n, signed(c.get("delta")),
                             _diff_ci(c), p_text(c), p_text(c, "p_holm"),
                             effect(c), verdict(c)])
    return rows


def verdict(c: dict[str, Any]) -> str:
    """``better``, ``WORSE`` or ``-`` (not significant after Holm)."""
    return "better" if c.get("better") else "WORSE" if c.get("worse") else "-"


def power_rows(document: dict[str, Any]) -> list[list[str]]:
    """Power of the tests used, at the Holm alpha used, on the fewest pairs scored."""
    power = (document.get("power_analysis") or {})
    if not power:
        return []
    effects = [k for k in next(iter(power.values())) if k.startswith("d=")]
    rows = [["power (test used, Holm alpha / m)", "test", "n (fewest pairs)", "alpha",
             *effects]]
    for kind, p in power.items():
        for test, row in (p.get("by_test") or {p.get("test", "paired t"): p}).items():
            shown = test if test != "randomization" else "randomization (as paired t)"
            if test == "mcnemar" and "discordance" in row:
                shown += f" ({percent(row['discordance'], 0)} discordant)"
            rows.append([kind, shown, str(row["n"]), f"{row.get('alpha', 0.05):.2g}",
                         *(percent(row[e]) for e in effects)])
    return rows


def not_compared_lines(document: dict[str, Any]) -> list[str]:
    """The metrics a comparison could not pair, each with the reason (none: no lines)."""
    missing = [c for c in document.get("not_compared") or () if isinstance(c, dict)]
    if not missing:
        return []
    lines = [f"not compared ({len(missing)} metric(s) recorded but not paired):"]
    for c in missing:
        system = f" [system={c['system']}]" if c.get("system") else ""
        lines.append(f"  {c.get('name')} {c.get('kind')}.{c.get('metric')}{system}: "
                     f"{c.get('reason')}")
    return lines


def comparison_lines(document: dict[str, Any]) -> list[str]:
    """Baseline, paired comparisons, what could not be compared, the power table."""
    line = baseline_line(document)
    lines = [line] if line else []
    rows = comparison_rows(document)
    if len(rows) > 1:
        families = sorted({c.get("holm_family") or 0 for kinds in document["comparisons"].values()
                           for metrics in kinds.values() for c in metrics.values()})
        family = "/".join(str(f) for f in families)
        lines += [f"paired comparisons (A - B; p Holm-corrected over {family} comparisons, "
                  "alpha 0.05; CIs 95% each, unadjusted):", *table(rows)]
    lines += not_compared_lines(document)
    power = power_rows(document) if len(rows) > 1 else []
    if power:
        lines += ["", *table(power)]
    moved = stages.lines(document.get("comparisons") or {}, document.get("not_compared") or ())
    if moved:
        lines += ["", "which component moved (retrieval / answer metrics):"]
        for name, kinds in moved:
            lines += [f"  {name}:", *(f"    {line}" for line in kinds)]
    return lines


def gate_lines(document: dict[str, Any]) -> list[str]:
    """Gates that passed (or could not be checked), then one FAILED line per failure."""
    lines = [gate_line(v) for v in (document.get("gates") or []) if v.get("passed") is not False]
    lines += [f"FAILED {line}" for line in (document.get("failures") or [])]
    return lines


def verdict_lines(document: dict[str, Any]) -> list[str]:
    """``verdict: FAILED: 2 gates missed; ...``, the notes that do not fail, the warnings."""
    decided = decide(document)
    notes = [f"  note: {r.text}" for r in decided.reasons if not r.failing]
    warnings = [f"WARNING served model: {line}" for line in served_warnings(document)]
    return [*warnings, f"verdict: {decided.summary()}", *notes]


def coverage_lines(document: dict[str, Any]) -> list[str]:
    """The section's first line: what the verdict covers; then advice when no judge checked."""
    found = coverage.line(document)
    advice = coverage.recommendation(document)
    return [line for line in (found, advice and f"  hint: {advice}") if line]


def interrupted_lines(document: dict[str, Any]) -> list[str]:
    """First lines: the run is partial (and how to continue it), or it was resumed."""
    run = document.get("run") or {}
    resumed = resumed_text(run)
    lines = [resumed] if resumed else []
    if decide(document).interrupted:
        lines[:0] = [f"PARTIAL RUN: {interrupted_text(run)}"]
        if run.get("status") == "interrupted":
            lines.insert(1, f"  {RESUME_HINT}")
    else:  # --ragbench-resume continues the newest unfinished run: one of these
        lines += [unfinished_run_text(other) for other in run.get("unfinished_runs") or []
                  if isinstance(other, dict)]
    return lines


def unfinished_run_text(other: dict[str, Any]) -> str:
    """An earlier interrupted run this session did not replace (it ran only part of it)."""
    finished = other.get("finished_items")
    count = f" ({plural(finished, 'finished item')})" if isinstance(finished, int) else ""
    return (f"kept: the interrupted run {other.get('id')}{count}, which this session did not "
            "run whole; continue it with --ragbench-resume")


PARTS: tuple[tuple[str, Callable[[dict[str, Any]], list[str]]], ...] = (
    ("the counts table", lambda d: table(counts_rows(d.get("counts") or {}))),
    ("the metrics table", metrics_lines), ("the judged metrics", lambda d: _judging_lines(d)),
    ("the calibration against people", lambda d: _calibration_lines(d)),
    ("the breakdowns", breakdown_lines),
    ("the report sections", sections_lines),
    ("the usage tables", usage_lines), ("the components", components_lines),
    ("the comparisons", comparison_lines), ("the best configuration", lambda d: _best_lines(d)),
    ("the gates", gate_lines),
    ("the verdict", verdict_lines))


def _best_lines(document: dict[str, Any]) -> list[str]:
    if not document.get("best"):
        return []
    # lazy: only a sweep's report has this part
    from pytest_ragbench.render import best

    return best.lines(document)


def _judging_lines(document: dict[str, Any]) -> list[str]:
    return judging.lines(document)


def _calibration_lines(document: dict[str, Any]) -> list[str]:
    return calibration.lines(document)


def alarm_lines(document: dict[str, Any]) -> list[str]:
    """The report sections' alarms (the traffic kind's raised [triggers]), first of all."""
    return [str(line) for section in document.get("sections") or ()
            if isinstance(section, dict) for line in section.get("alarms") or ()]


def render(document: dict[str, Any], written: Sequence[Path], report_dir: Path | None,
           problems: list[str] | None = None) -> list[str]:
    """The whole section, a blank line between parts.

    A part that cannot be printed is left out and named in ``problems``; the others are
    printed.
    """
    lines: list[str] = []
    for name, part in (("the alarms", alarm_lines), ("the coverage line", coverage_lines),
                       ("the partial-run line", interrupted_lines), *PARTS):
        try:
            produced = part(document)
        except Exception as exc:
            if problems is None:
                raise
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            problems.append(f"the terminal summary: {name} could not be printed ({detail})")
            continue
        if produced:
            lines += ["", *produced] if lines else produced
    if written and report_dir is not None:
        names = ", ".join(_relative(p, report_dir) for p in written)
        lines += ["", f"report: {_relative(report_dir, Path.cwd())}/ ({names})"]
    return lines


def _relative(path: Path, folder: Path) -> str:
    try:
        return str(path.relative_to(folder))
    except ValueError:
        return str(path)
