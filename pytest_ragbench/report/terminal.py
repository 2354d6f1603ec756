"""The ``ragbench`` terminal section: plain aligned tables rendered from the results document."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.intervals import BCA_MIN
from pytest_ragbench.report.aggregate import COUNTED, N_RESAMPLES


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


def signed(value: float) -> str:
    """A difference with its sign."""
    return f"{value:+.1f}" if abs(value) >= 100 else f"{value:+.3f}"


def interval(low: Any, high: Any) -> str:
    """``[low, high]`` or ``-``."""
    return "-" if low is None or high is None else f"[{num(low)}, {num(high)}]"


def percent(value: Any) -> str:
    """A share as a percentage."""
    return "-" if value is None else f"{100 * value:.1f}%"


def counts_rows(counts: dict[str, Any]) -> list[tuple[str, ...]]:
    """Items per status, per kind and per category within each kind."""
    rows: list[tuple[str, ...]] = [("kind", "category", "items", *COUNTED)]
    for kind, entry in counts.items():
        rows.append(_count_row(kind, "(all)", entry["all"]))
        categories = entry["categories"]
        if len(categories) > 1 or "-" not in categories:
            rows += [_count_row("", c, categories[c]) for c in categories]
    return rows


def _count_row(kind: str, category: str, counts: dict[str, int]) -> tuple[str, ...]:
    return (kind, category, str(counts["items"]), *(str(counts[s]) for s in COUNTED))


def _threshold(entry: dict[str, Any]) -> str:
    if entry.get("threshold") is None:
        return "-"
    return ("<=" if entry["direction"] == "lower" else ">=") + f"{entry['threshold']:g}"


# How each cell's interval was made, as the tables name it (pytest_ragbench.intervals).
CI_METHODS = {"wilson": "Wilson", "clopper-pearson": "Clopper-Pearson", "bca": "BCa",
              "percentile": "percentile", "t": "t"}
CI_TAGS = {"wilson": "W", "clopper-pearson": "CP", "bca": "B", "percentile": "P", "t": "t"}


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


def pass_rate(entry: dict[str, Any]) -> str:
    """The pass rate with its Wilson 95% CI, in percent."""
    if entry.get("pass_rate") is None:
        return "-"
    low, high = entry.get("pass_rate_ci_low"), entry.get("pass_rate_ci_high")
    if low is None or high is None:
        return percent(entry["pass_rate"])
    return f"{percent(entry['pass_rate'])} [{100 * low:.1f}, {100 * high:.1f}]"


def stat_cells(entry: dict[str, Any]) -> list[str]:
    return [str(entry["n"]), str(entry["n_unscored"]), num(entry["mean"]),
            interval(entry["ci_low"], entry["ci_high"]), ci_method(entry), num(entry["std"]),
            _threshold(entry), pass_rate(entry)]


def metrics_rows(document: dict[str, Any]) -> list[list[str]]:
    """The metrics table: per kind (and system) and metric."""
    several = len(document["systems"]) > 1
    rows = [["kind", *(["system"] if several else []), "metric", "n", "unscored", "mean",
             "95% CI", "CI method", "std", "threshold", "pass rate [95% CI]"]]
    for kind, by_metric in document["metrics"].items():
        for metric, entry in by_metric.items():
            # a system-independent kind (memory, ...) has one row for every system: "-"
            cells = (entry.get("systems") or {"-": entry}) if several else {"": entry}
            for system, cell in cells.items():
                rows.append([kind, *([system] if several else []), metric, *stat_cells(cell)])
    return rows


def unscored_notes(document: dict[str, Any]) -> list[str]:
    """One line per metric and reason it went unscored."""
    several = len(document["systems"]) > 1
    notes = []
    for kind, by_metric in document["metrics"].items():
        for metric, entry in by_metric.items():
            cells = (entry.get("systems") or {"": entry}) if several else {"": entry}
            for system, cell in cells.items():
                prefix = f"{kind}[{system}]" if system else kind
                notes += [f"{prefix}.{metric}: {count} unscored: {reason}"
                          for reason, count in cell["unscored_reasons"].items()]
    return notes


def metrics_lines(document: dict[str, Any]) -> list[str]:
    """The metrics table, then one line per unscored reason."""
    if not document["metrics"]:
        return []
    notes = unscored_notes(document)
    title = ("metrics: mean and 95% CI (Wilson for 0/1 metrics; t clipped to the metric's "
             f"range below n={BCA_MIN}, BCa bootstrap with {N_RESAMPLES} seeded resamples "
             "from there; none below n=2; * no spread: the Bernoulli worst case), std, "
             "item threshold, pass rate [Wilson 95% CI]")
    return [title, *table(metrics_rows(document)),
            *(["unscored metrics:", *(f"  {n}" for n in notes)] if notes else [])]


def breakdown_tables(document: dict[str, Any]) -> list[tuple[str, list[list[str]]]]:
    """``(title, rows)`` per kind and field with two or more values: mean [95% CI] per metric."""
    tables = []
    several = len(document["systems"]) > 1
    for kind, fields in document["breakdowns"].items():
        for name, values in fields.items():
            if len(values) < 2:
                continue
            metrics = sorted({m for by_metric in values.values()
                              for m, e in by_metric.items() if e["n"]})
            rows: list[list[str]] = [[name, *(["system"] if several else []), "n", *metrics]]
            for value, by_metric in values.items():
                systems = document["systems"] if several else [""]
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


def _mean_ci(cell: dict[str, Any]) -> str:
    if not cell.get("n"):
        return "-"
    if cell.get("ci_low") is None:
        return f"{num(cell['mean'])} [n too small]"
    tag = CI_TAGS.get(cell.get("ci_method") or "", "")
    if (cell.get("ci_note") or "").startswith("no spread"):
        tag += "*"
    return f"{num(cell['mean'])} {interval(cell['ci_low'], cell['ci_high'])} {tag}".rstrip()


def breakdown_lines(document: dict[str, Any]) -> list[str]:
    """The breakdown tables, separated by blank lines."""
    lines: list[str] = []
    for title, rows in breakdown_tables(document):
        lines += ["", f"{title}:", *table(rows)]
    return lines[1:]


def ragcsv_lines(document: dict[str, Any]) -> list[str]:
    """Seed 003's quantile blocks, in its exact format."""
    lines: list[str] = []
    for system, block in document["ragcsv"].items():
        tag = f" [{system}]" if system else ""
        accuracy = block.get("accuracy")
        if accuracy:
            lines += ["", f"=== RAGCSV Eval Accuracy{tag} (n={block['n']}) ==="]
            if block.get("accuracy_method"):
                lines.append(f"  accuracy: {block['accuracy_method']}")
            lines += [f"  {k}:  {v:.1f}%" for k, v in accuracy.items()]
            lines.append(f"  pass (>={block['pass_threshold']:g}%): {block['pass']}/{block['n']}")
        times = block.get("total_time_ms")
        if times:
            lines += ["", f"=== RAGCSV Eval Total Time{tag} (n={times['n']}) ==="]
            lines += [f"  {k}:  {v:.0f}ms" for k, v in times.items() if k != "n"]
    return lines[1:]


def beir_lines(document: dict[str, Any]) -> list[str]:
    """Dataset-level BEIR metrics (trec_eval over the whole run), one row per system."""
    lines: list[str] = []
    for dataset, systems in document.get("beir", {}).items():
        names = sorted({m for result in systems.values() for m in result["metrics"]})
        rows = [[f"BEIR {dataset}", "queries", *names]]
        rows += [[system or "(all)", str(result["judged_queries"]),
                  *(num(result["metrics"].get(m)) for m in names)]
                 for system, result in systems.items()]
        retrievers = sorted({r["retriever"] for r in systems.values() if r.get("retriever")})
        lines += ["", *table(rows), *(f"  retrieved by {r}" for r in retrievers)]
    return lines[1:]


def usage_rows(document: dict[str, Any]) -> list[list[str]]:
    """Model calls, tokens, cache hit rate and call latency per role."""
    rows = [["model usage", "calls", "prompt tokens", "completion tokens", "cache hits",
             "latency p50", "latency p95"]]
    for role, row in document["usage"].items():
        rows.append([role, str(row["calls"]), str(row["prompt_tokens"]),
                     str(row["completion_tokens"]), percent(row["cache_hit_rate"]),
                     _seconds(row["latency_p50_s"]), _seconds(row["latency_p95_s"])])
    return rows


def timing_rows(document: dict[str, Any]) -> list[list[str]]:
    """Seconds per item, per kind."""
    rows = [["time per item", "n", "p50", "p95", "total"]]
    rows += [[kind, str(t["n"]), _seconds(t["p50_s"]), _seconds(t["p95_s"]),
              _seconds(t["total_s"])] for kind, t in document["timing"].items()]
    return rows


def usage_lines(document: dict[str, Any]) -> list[str]:
    """Model usage, then time per item."""
    parts = [table(rows) for rows in (usage_rows(document), timing_rows(document))
             if len(rows) > 1]
    return [line for i, part in enumerate(parts) for line in ([""] if i else []) + part]


def _seconds(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def components_lines(document: dict[str, Any]) -> list[str]:
    """Which embedder, generator and judge answered."""
    found = document["components"]
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


def p_text(c: dict[str, Any], key: str = "p_value") -> str:
    """A p-value; ``<x`` when it is a bound (below the resampling's resolution), never 0."""
    value = c.get(key)
    if value is None:
        return "undefined"
    floor = c.get("p_resolution")
    bounded = c.get("p_method") == "hoeffding bound" or (
        c.get("p_method") == "monte-carlo" and floor is not None and c["p_value"] <= floor)
    if bounded and value < 1:
        return f"<{max(value, 1e-300):.2g}"
    return f"{value:.3g}"


def _diff_ci(c: dict[str, Any]) -> str:
    if c.get("ci_low") is None:
        return "n too small"
    tag = CI_TAGS.get(c.get("ci_method") or "", "")
    return f"[{signed(c['ci_low'])}, {signed(c['ci_high'])}] {tag}".rstrip()


def comparison_rows(document: dict[str, Any]) -> list[list[str]]:
    """Paired comparisons: delta, its CI, p, Holm-adjusted p, effect size, verdict."""
    rows = [["comparison", "kind", "metric", "test", "n", "delta", "95% CI (unadjusted)", "p",
             "p Holm", "d", "verdict"]]
    for name, kinds in document["comparisons"].items():
        for kind, metrics in kinds.items():
            for metric, c in metrics.items():
                n = str(c["n"]) + (f" ({c['n_clusters']} cl.)" if c.get("n_clusters") else "")
                rows.append([name, kind, metric, c["test"], n, signed(c["delta"]),
                             _diff_ci(c), p_text(c), p_text(c, "p_holm"),
                             effect(c["effect_size"]), verdict(c)])
    return rows


def verdict(c: dict[str, Any]) -> str:
    """``better``, ``WORSE`` or ``-`` (not significant after Holm)."""
    return "better" if c["better"] else "WORSE" if c["worse"] else "-"


def power_rows(document: dict[str, Any]) -> list[list[str]]:
    """Power of the tests used, at the Holm alpha used, on the fewest pairs scored."""
    power = document["power_analysis"]
    if not power:
        return []
    effects = [k for k in next(iter(power.values())) if k.startswith("d=")]
    rows = [["power (test used, Holm alpha / m)", "test", "n (fewest pairs)", "alpha",
             *effects]]
    for kind, p in power.items():
        for test, row in (p.get("by_test") or {p.get("test", "paired t"): p}).items():
            shown = test if test != "randomization" else "randomization (as paired t)"
            if test == "mcnemar" and "discordance" in row:
                shown += f" ({100 * row['discordance']:.0f}% discordant)"
            rows.append([kind, shown, str(row["n"]), f"{row.get('alpha', 0.05):.2g}",
                         *(percent(row[e]) for e in effects)])
    return rows


def comparison_lines(document: dict[str, Any]) -> list[str]:
    """Baseline, paired comparisons and the power table (only when something was compared)."""
    line = baseline_line(document)
    lines = [line] if line else []
    rows = comparison_rows(document)
    if len(rows) > 1:
        families = sorted({c.get("holm_family") or 0 for kinds in document["comparisons"].values()
                           for metrics in kinds.values() for c in metrics.values()})
        family = "/".join(str(f) for f in families)
        lines += [f"paired comparisons (A - B; p Holm-corrected over {family} comparisons, "
                  "alpha 0.05; CIs 95% each, unadjusted):", *table(rows)]
        power = power_rows(document)
        if power:
            lines += ["", *table(power)]
    return lines


def effect(value: Any) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else f"{value:+.2f}"


def gate_lines(document: dict[str, Any]) -> list[str]:
    """Gates that passed (or could not be checked), then one FAILED line per failure."""
    from pytest_ragbench.report.gates import gate_line

    lines = [gate_line(v) for v in document["gates"] if v["passed"] is not False]
    lines += [f"FAILED {line}" for line in document["failures"]]
    return lines


def render(document: dict[str, Any], written: Sequence[Path], report_dir: Path | None
           ) -> list[str]:
    """The whole section: counts first (then a blank line before each further part)."""
    from pytest_ragbench.report import calibration, judging, robustness

    parts = [metrics_lines(document), judging.lines(document), calibration.lines(document),
             breakdown_lines(document),
             robustness.lines(document),
             ragcsv_lines(document), beir_lines(document), usage_lines(document),
             components_lines(document), comparison_lines(document), gate_lines(document)]
    lines = table(counts_rows(document["counts"]))
    for part in parts:
        if part:
            lines += ["", *part]
    if written and report_dir is not None:
        names = ", ".join(_relative(p, report_dir) for p in written)
        lines += ["", f"report: {_relative(report_dir, Path.cwd())}/ ({names})"]
    return lines


def _relative(path: Path, folder: Path) -> str:
    try:
        return str(path.relative_to(folder))
    except ValueError:
        return str(path)
