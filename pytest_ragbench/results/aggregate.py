"""Cells of scores and their statistics: metrics per kind, breakdowns, usage, timing.

A *cell* is the set of items of one kind (optionally one system and some field values)
scored on one metric. Each cell's 95% CI is chosen from its data
(:mod:`pytest_ragbench.stats.intervals`: Wilson for 0/1 values and pass rates, skew-corrected t
for small n, a batched, seeded BCa bootstrap from n = 30, none below n = 2), over values in node-id
order, so the numbers do not depend on how pytest-xdist scheduled the items. Items that
share a ``cluster`` (the case field, or the one ``ragbench_cluster_by`` names) are
resampled together, and so are the systems' answers to one case in the pooled cell of
several systems. Imported at session end.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragbench import served
from pytest_ragbench.config.thresholds import below
from pytest_ragbench.metrics.registry import REGISTRY
from pytest_ragbench.results.entries import MetricStats
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.stats import core as stats
from pytest_ragbench.stats import intervals

CONFIDENCE = 0.95
N_RESAMPLES = 10_000
SEED = 0
COUNTED = ("passed", "failed", "warning", "error", "skipped", "lost")
USAGE_COUNTS = ("calls", "prompt_tokens", "completion_tokens", "cache_hits")


@dataclass(frozen=True)
class Cell:
    """Items of ``kind`` (of one ``system``, with field values ``where``) on ``metric``."""

    kind: str
    metric: str
    system: str | None = None
    where: tuple[tuple[str, str], ...] = ()

    def sort_key(self) -> tuple[str, str, int, str, tuple[tuple[str, str], ...]]:
        """Kinds, then metrics, the pooled cell before each system's, then field values."""
        return (self.kind, self.metric, self.system is not None, self.system or "", self.where)


def direction(metric: str) -> str:
    """``higher``, ``lower`` (timings) or ``none`` (also for a name the registry lacks)."""
    return REGISTRY.direction(metric)


ITEM_ERROR = "item error"
ITEM_LOST = "item lost (its worker crashed)"


def metric_range(metric: str) -> tuple[float | None, float | None]:
    """The range a metric's values lie in, from the registry (None for an unbounded side)."""
    spec = REGISTRY.lookup(metric)
    if spec is None:
        return None, None
    low, high = spec.low, spec.high
    return (low if math.isfinite(low) else None), (high if math.isfinite(high) else None)


def cluster_key(record: ItemRecord, by_case: bool) -> tuple[str, ...] | None:
    """The record's cluster: its ``cluster`` field, else its case when ``by_case``."""
    value = record.fields.get("cluster")
    if value is not None and value != "":
        return ("cluster", str(value))
    return ("case", record.file, record.case_id) if by_case else None


def field_value(record: ItemRecord, name: str) -> str | None:
    """A record's value of a breakdown field (``system`` included) as text, or None."""
    value = record.system if name == "system" else record.fields.get(name)
    return None if value is None or value == "" else str(value)


def select(records: Iterable[ItemRecord], cell: Cell) -> list[ItemRecord]:
    """The records of ``cell`` (any metric status)."""
    return [r for r in records if r.kind == cell.kind
            and (cell.system is None or r.system == cell.system)
            and all(field_value(r, k) == v for k, v in cell.where)]


def metric_names(records: Iterable[ItemRecord]) -> dict[str, list[str]]:
    """``{kind: [metric, ...]}`` over every scored or unscored metric, sorted."""
    names: dict[str, set[str]] = defaultdict(set)
    for record in records:
        names[record.kind].update(record.metrics, record.unscored)
    return {kind: sorted(names[kind]) for kind in sorted(names) if names[kind]}


def systems_in(records: Iterable[ItemRecord], preferred: Sequence[str] = ()) -> list[str]:
    """The systems of the records: those of ``--ragbench-systems`` first, in its order."""
    found = {r.system for r in records if r.system}
    return [s for s in preferred if s in found] + sorted(found - set(preferred))


def scored_value(record: ItemRecord, metric: str) -> float | None:
    """The record's value of ``metric`` as a float (None when absent or not a number)."""
    value = record.metrics.get(metric)
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        return None
    return float(value)


def compute_cells(cells: dict[Cell, list[ItemRecord]]) -> dict[Cell, MetricStats]:
    """Statistics of every cell: n, unscored counts, mean, 95% CI, std, threshold, pass rate."""
    result: dict[Cell, dict[str, Any]] = {}
    wanted: list[intervals.CellData] = []
    owners: list[tuple[Cell, str]] = []  # (cell, "ci" or "pass_rate") of each wanted interval
    for cell in sorted(cells, key=Cell.sort_key):
        records = cells[cell]
        pooled = len({r.system for r in records}) > 1  # several systems' answers per case
        values: list[float] = []
        clusters: list[tuple[str, ...] | None] = []
        passes: list[float] = []
        pass_clusters: list[tuple[str, ...] | None] = []
        limits: list[float] = []
        reasons: Counter[str] = Counter()
        for record in records:
            value = scored_value(record, cell.metric)
            if value is None:
                if cell.metric in record.unscored:
                    reasons[str(record.unscored[cell.metric])] += 1
                elif cell.metric in record.metrics:
                    reasons["not a finite number"] += 1
                elif record.status == "lost":
                    reasons[ITEM_LOST] += 1
                elif record.status == "error" or record.error is not None:
                    reasons[ITEM_ERROR] += 1
                continue
            values.append(value)
            clusters.append(cluster_key(record, pooled))
            limit = record.thresholds.get(cell.metric)
            if isinstance(limit, int | float):
                limits.append(float(limit))
                passes.append(float(not below(cell.metric, value, float(limit))))
                pass_clusters.append(clusters[-1])
        entry: dict[str, Any] = {
            "n": len(values), "n_unscored": sum(reasons.values()), "mean": None,
            "ci_low": None, "ci_high": None, "ci_95": None, "ci_method": None,
            "ci_note": None, "ci_gate_low": None, "ci_gate_high": None,
            "ci_gate_method": None, "n_clusters": None, "std": None,
            "threshold": _common(limits),
            "pass_rate": sum(passes) / len(passes) if passes else None,
            "pass_rate_ci_low": None, "pass_rate_ci_high": None,
            "direction": direction(cell.metric),
            "unscored_reasons": dict(sorted(reasons.items())),
        }
        if values:
            summary = stats.summarize(values)
            entry.update(mean=summary.mean, std=summary.std if len(values) > 1 else None)
            low, high = metric_range(cell.metric)
            wanted.append(intervals.CellData(values, clusters, low, high))
            owners.append((cell, "ci"))
        if passes:
            wanted.append(intervals.CellData(passes, pass_clusters, 0.0, 1.0))
            owners.append((cell, "pass_rate"))
        result[cell] = entry
    found = intervals.cell_intervals(wanted, CONFIDENCE, n_resamples=N_RESAMPLES, seed=SEED)
    for (cell, part), interval in zip(owners, found, strict=True):
        entry = result[cell]
        if part == "pass_rate":
            entry.update(pass_rate_ci_low=interval.low, pass_rate_ci_high=interval.high)
            continue
        entry.update(ci_low=interval.low, ci_high=interval.high, ci_method=interval.method,
                     ci_note=interval.note, ci_gate_low=interval.gate_low,
                     ci_gate_high=interval.gate_high, ci_gate_method=interval.gate_method,
                     n_clusters=interval.n_clusters)
        if interval.low is not None:
            entry["ci_95"] = [interval.low, interval.high]
    return {cell: MetricStats(**entry) for cell, entry in result.items()}


def _common(values: list[float]) -> float | None:
    """The most frequent value (the smallest on a tie), or None."""
    if not values:
        return None
    counts = Counter(values)
    best = max(counts.values())
    return min(v for v, c in counts.items() if c == best)


def plan_cells(records: list[ItemRecord], systems: Sequence[str],
               breakdown: Sequence[str]) -> dict[Cell, list[ItemRecord]]:
    """The cells of the metrics table and of the breakdowns (per system when several)."""
    cells: dict[Cell, list[ItemRecord]] = {}
    per_system: list[str | None] = [None, *systems] if len(systems) > 1 else [None]
    for kind, metrics in metric_names(records).items():
        of_kind = [r for r in records if r.kind == kind]
        wheres: list[tuple[tuple[str, str], ...]] = [()]
        for name in breakdown:
            values = sorted({v for r in of_kind if (v := field_value(r, name)) is not None})
            wheres += [((name, value),) for value in values]
        for where in wheres:
            for system in per_system:
                chosen = select(of_kind, Cell(kind, "", system, where))
                if chosen:
                    for metric in metrics:
                        cells[Cell(kind, metric, system, where)] = chosen
    return cells


def metrics_section(stats: dict[Cell, MetricStats], systems: Sequence[str]
                    ) -> dict[str, dict[str, MetricStats]]:
    """``metrics[kind][metric]`` (with ``systems[name]`` when several systems ran)."""
    section: dict[str, dict[str, MetricStats]] = {}
    for cell in sorted((c for c in stats if not c.where and c.system is None), key=Cell.sort_key):
        section.setdefault(cell.kind, {})[cell.metric] = _with_systems(stats, cell, systems)
    return section


def breakdowns_section(stats: dict[Cell, MetricStats], systems: Sequence[str]
                       ) -> dict[str, dict[str, dict[str, dict[str, MetricStats]]]]:
    """``breakdowns[kind][field][value][metric]`` for single-field cells."""
    section: dict[str, dict[str, dict[str, dict[str, MetricStats]]]] = {}
    for cell in sorted((c for c in stats if len(c.where) == 1 and c.system is None),
                       key=Cell.sort_key):
        (name, value), = cell.where
        section.setdefault(cell.kind, {}).setdefault(name, {}).setdefault(value, {})[
            cell.metric] = _with_systems(stats, cell, systems)
    return section


def _with_systems(stats: dict[Cell, MetricStats], cell: Cell, systems: Sequence[str]
                  ) -> MetricStats:
    """The pooled cell, holding each system's cell when several systems ran."""
    if len(systems) < 2:
        return stats[cell]
    return dataclasses.replace(stats[cell], systems={
        s: stats[key] for s in systems
        if (key := Cell(cell.kind, cell.metric, s, cell.where)) in stats})


def counts_section(records: Iterable[ItemRecord]) -> dict[str, dict[str, Any]]:
    """Items per status, per kind and per category within each kind."""
    by_kind: dict[str, list[ItemRecord]] = defaultdict(list)
    for record in records:
        by_kind[record.kind].append(record)
    section: dict[str, dict[str, Any]] = {}
    for kind in sorted(by_kind):
        categories: dict[str, list[ItemRecord]] = defaultdict(list)
        for record in by_kind[kind]:
            categories[record.category or "-"].append(record)
        section[kind] = {"all": _counts(by_kind[kind]),
                         "categories": {c: _counts(categories[c]) for c in sorted(categories)}}
    return section


def _counts(records: list[ItemRecord]) -> dict[str, int]:
    counts = Counter(r.status for r in records)
    return {"items": len(records), **{s: counts.get(s, 0) for s in COUNTED}}


# ---------------------------------------------------------------- usage and timing


def _roles(usage: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{role: counts}``; a flat usage dict (``calls`` at the top) is the role ``model``."""
    if any(key in usage for key in (*USAGE_COUNTS, "latency_s")):
        return {"model": usage}
    return {str(k): v for k, v in usage.items() if isinstance(v, dict)}


def usage_section(records: Iterable[ItemRecord], systems: Sequence[str]
                  ) -> dict[str, dict[str, Any]]:
    """Model calls, tokens, cache hit rate and call latency p50/p95, per role (and system).

    The record contract: ``usage = {role: {"calls", "prompt_tokens", "completion_tokens",
    "cache_hits", "latency_s": [seconds of each call that reached the model]}}``; the
    ``system`` role also has ``service_s``, the seconds of each call as the plugin timed it;
    a role whose server named its model has ``models = {asked: {served: calls}}``
    (:mod:`pytest_ragbench.served`), summed into its row.
    """
    totals: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(USAGE_COUNTS, 0))
    latencies: dict[str, list[float]] = defaultdict(list)
    service: dict[str, list[float]] = defaultdict(list)
    cached: set[str] = set()  # roles that report cache hits at all
    models: dict[str, served.Models] = defaultdict(dict)
    for record in records:
        for role, counts in _roles(record.usage or {}).items():
            key = f"{record.system}/{role}" if len(systems) > 1 and record.system else role
            total = totals[key]  # a role with no counts still gets a row
            if "cache_hits" in counts:
                cached.add(key)
            for name in USAGE_COUNTS:
                value = counts.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    total[name] += value
            latency = counts.get("latency_s")
            if isinstance(latency, int | float) and not isinstance(latency, bool):
                latency = [latency]
            if isinstance(latency, list):
                latencies[key] += _seconds_list(latency)
            if isinstance(counts.get("service_s"), list):
                service[key] += _seconds_list(counts["service_s"])
            served.add(models[key], counts.get("models"))
    section: dict[str, dict[str, Any]] = {}
    for key in sorted(totals):
        row: dict[str, Any] = {name: int(totals[key][name]) for name in USAGE_COUNTS}
        calls = row["calls"]
        row["cache_hit_rate"] = row["cache_hits"] / calls if calls and key in cached else None
        p50, p95 = _percentiles(latencies[key], (50, 95))
        row.update(latency_p50_s=p50, latency_p95_s=p95, latency_n=len(latencies[key]))
        if service[key]:
            p50, p95 = _percentiles(service[key], (50, 95))
            row.update(service_p50_s=p50, service_p95_s=p95, service_n=len(service[key]))
        if models[key]:
            row["models"] = models[key]
        section[key] = row
    return section


def _seconds_list(values: list[Any]) -> list[float]:
    return [float(x) for x in values if isinstance(x, int | float) and not isinstance(x, bool)
            and math.isfinite(x)]


def _percentiles(values: list[float], points: Sequence[float]) -> list[float | None]:
    if not values:
        return [None] * len(points)
    import numpy as np

    return [float(v) for v in np.percentile(np.asarray(values, dtype=float), points)]


def timing_section(records: Iterable[ItemRecord]) -> dict[str, dict[str, Any]]:
    """Seconds per item (``duration``), p50/p95/mean per kind."""
    durations: dict[str, list[float]] = defaultdict(list)
    for record in records:
        if record.status in ("passed", "failed", "warning"):
            durations[record.kind].append(float(record.duration or 0.0))
    section = {}
    for kind in sorted(durations):
        values = durations[kind]
        p50, p95 = _percentiles(values, (50, 95))
        section[kind] = {"n": len(values), "p50_s": p50, "p95_s": p95,
                         "mean_s": sum(values) / len(values), "total_s": sum(values)}
    return section
