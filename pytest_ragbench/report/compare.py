"""Paired comparisons: systems of one run against each other, and a run against a baseline.

Items are paired by case (kind, case id, and system for a baseline); each metric gets
the paired test that fits it — exact McNemar when every value is 0 or 1, otherwise the
randomization (sign-flip) test — and the p-values of one family of comparisons are
Holm-corrected together. Differences are A − B (current − baseline).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

from pytest_ragbench.records import ItemRecord
from pytest_ragbench.report.aggregate import direction, metric_names, scored_value
from pytest_ragbench.thresholds import LOWER_IS_BETTER

ALPHA = 0.05
SEED = 0
N_RESAMPLES = 10_000
# Timings depend on the machine and on the model cache: compared, never a regression.
TIMING_METRICS = LOWER_IS_BETTER


def choose_test(a: Sequence[float], b: Sequence[float]) -> str:
    """``mcnemar`` for pass/fail (0/1) metrics, else ``randomization``."""
    binary = all(v in (0.0, 1.0) for v in (*a, *b))
    return "mcnemar" if binary else "randomization"


def compare_pairs(name: str, kind: str, metric: str, pairs: list[tuple[float, float]],
                  system: str | None = None) -> dict[str, Any]:
    """One paired test of A against B over ``pairs`` of values."""
    from pytest_ragbench import stats

    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    test = choose_test(a, b)
    result = stats.paired_test(a, b, test=test,  # type: ignore[arg-type]
                               n_resamples=N_RESAMPLES, seed=SEED)
    return {
        "name": name, "kind": kind, "metric": metric, "system": system, "test": test,
        "n": result.n, "mean_a": sum(a) / len(a), "mean_b": sum(b) / len(b),
        "delta": result.diff_mean, "ci_low": result.diff_ci_low,
        "ci_high": result.diff_ci_high, "p_value": result.p_value,
        "effect_size": _finite_or_text(result.effect_size),
        "direction": direction(metric),
    }


def _finite_or_text(value: float) -> float | str:
    """A float, or ``"inf"``/``"-inf"`` (Cohen's d of a constant difference) for JSON."""
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def holm(comparisons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add ``p_holm``, ``significant``, ``better`` and ``worse`` (Holm over the whole list)."""
    from pytest_ragbench import stats

    if not comparisons:
        return comparisons
    adjusted = stats.adjust_pvalues([c["p_value"] for c in comparisons], "holm")
    for comparison, p in zip(comparisons, adjusted, strict=True):
        significant = p < ALPHA
        sign = {"higher": 1.0, "lower": -1.0}.get(comparison["direction"], 0.0)
        comparison.update(p_holm=p, significant=significant,
                          better=significant and sign * comparison["delta"] > 0,
                          worse=significant and sign * comparison["delta"] < 0)
    return comparisons


def system_comparisons(records: Iterable[ItemRecord], systems: Sequence[str]
                       ) -> list[dict[str, Any]]:
    """Every pair of systems (``a_vs_b`` in ``--ragbench-systems`` order) on every metric."""
    # An answer that does not depend on the system (ragbench_llm's) is not compared.
    records = [r for r in records if r.system and not r.system_independent]
    by_case: dict[tuple[str, str, str], dict[str, ItemRecord]] = defaultdict(dict)
    for record in records:
        by_case[(record.kind, record.file, record.case_id)][record.system or ""] = record
    out: list[dict[str, Any]] = []
    for first, second in combinations(systems, 2):
        for kind, metrics in metric_names(records).items():
            for metric in metrics:
                pairs = []
                for (case_kind, _, _), members in sorted(by_case.items()):
                    if case_kind != kind or first not in members or second not in members:
                        continue
                    a = scored_value(members[first], metric)
                    b = scored_value(members[second], metric)
                    if a is not None and b is not None:
                        pairs.append((a, b))
                if pairs:
                    out.append(compare_pairs(f"{first}_vs_{second}", kind, metric, pairs))
    return holm(out)


def _index(records: Iterable[ItemRecord]) -> dict[tuple[str, ...], ItemRecord]:
    """Records by (kind, system, case id); by file as well where a case id repeats."""
    groups: dict[tuple[str, ...], list[ItemRecord]] = defaultdict(list)
    for record in records:
        groups[(record.kind, record.system or "", record.case_id)].append(record)
    index: dict[tuple[str, ...], ItemRecord] = {}
    for key, members in groups.items():
        if len(members) == 1:
            index[key] = members[0]
        else:
            index.update({(*key, m.file): m for m in members})
    return index


def baseline_comparisons(records: Iterable[ItemRecord], baseline: Iterable[ItemRecord]
                         ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Compare the current run (A) with the baseline (B) per kind, system and metric.

    Returns the comparisons and the pairing counts (``paired``, ``only_current``,
    ``only_baseline`` items).
    """
    current, previous = _index(records), _index(baseline)
    shared = sorted(set(current) & set(previous))
    grouped: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    for key in shared:
        a, b = current[key], previous[key]
        for metric in sorted(set(a.metrics) & set(b.metrics)):
            x, y = scored_value(a, metric), scored_value(b, metric)
            if x is not None and y is not None:
                grouped[(a.kind, a.system or "", metric)].append((x, y))
    out = []
    for (kind, system, metric), pairs in sorted(grouped.items()):
        name = f"{system}_vs_baseline" if system else "current_vs_baseline"
        out.append(compare_pairs(name, kind, metric, pairs, system or None))
    counts = {"paired": len(shared), "only_current": len(set(current) - set(previous)),
              "only_baseline": len(set(previous) - set(current))}
    return holm(out), counts


def nest(comparisons: Iterable[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{name: {kind: {metric: comparison}}}`` for ``results.json``."""
    nested: dict[str, dict[str, dict[str, Any]]] = {}
    for c in comparisons:
        nested.setdefault(c["name"], {}).setdefault(c["kind"], {})[c["metric"]] = c
    return nested


def power_section(records: Iterable[ItemRecord]) -> dict[str, dict[str, Any]]:
    """Power of a paired test at d = 0.2, 0.3, 0.5 for each kind's number of cases."""
    from pytest_ragbench import stats

    cases: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for record in records:
        if record.metrics:
            cases[record.kind].add((record.file, record.case_id))
    return {kind: {"n": len(cases[kind]), **stats.power_table(len(cases[kind]))}
            for kind in sorted(cases)}
