"""The ``judge`` part of the report: unscored judged metrics, self-consistency, inconclusive items.

Built from the records alone (each judged item carries ``record.judge``: the judged
metric names and every sample, see :mod:`pytest_ragbench.metrics.repeated`), so the
numbers are the same under pytest-xdist. ``results.json["judge"]``:

- ``max_unscored``, ``samples``, ``temperature``, ``inconclusive_policy``;
- ``metrics[<kind>][<metric>]``: ``n_items`` (items the judge was asked about),
  ``n_scored``, ``n_unscored``, ``unscored_share``, ``over_limit``, ``top_reason`` (the
  most common reason, quoted replies folded to ``'…'``), ``top_reason_count``,
  ``top_reason_example`` (one such reason in full), ``reasons`` ({reason: count}),
  ``n_samples``, ``within_item_sd`` (mean standard deviation of an item's samples, over
  ``n_sd_items`` items with two or more scored samples), ``verdict_flip_share`` (share of
  ``n_verdict_items`` items, those with a threshold — the item's, else the kind's gate —
  whose samples fall on both sides of it), ``n_inconclusive`` and ``inconclusive_items``
  (node ids), ``structured_output`` (the modes the judge answered in);
- ``failures``: one line per judged metric with more than ``max_unscored`` of its items
  unscored; they fail the session like a missed gate.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pytest_ragbench.config.thresholds import below, flatten
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.metrics.repeated import JudgeSettings, sample_sd, scored
from pytest_ragbench.render.text import num, percent, table
from pytest_ragbench.results.aggregate import scored_value
from pytest_ragbench.results.records import ItemRecord

_QUOTED = re.compile(r"""(?<=: )(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""", re.DOTALL)


def reason_kind(reason: str) -> str:
    """A reason with its quoted reply folded to ``'…'``, so like reasons count together."""
    return _QUOTED.sub("'…'", reason)


def section(records: Iterable[ItemRecord], settings: Any) -> dict[str, Any]:
    """``results.json["judge"]`` (module docstring)."""
    grouped: dict[tuple[str, str], list[ItemRecord]] = defaultdict(list)
    for record in records:
        for metric in (record.judge or {}).get("metrics", ()):
            grouped[(record.kind, str(metric))].append(record)
    limit = float(getattr(settings, "max_unscored", 0.2))
    gates = _gate_bounds(getattr(settings, "gates", {}) or {})
    metrics: dict[str, dict[str, Any]] = {}
    failures = []
    for (kind, metric) in sorted(grouped):
        entry = _metric_entry(kind, metric, grouped[(kind, metric)], limit, gates)
        metrics.setdefault(kind, {})[metric] = entry
        if entry["over_limit"]:
            failures.append(failure_line(kind, metric, entry, limit))

    asked = JudgeSettings.from_config(settings)
    return {"max_unscored": limit, "samples": asked.samples, "temperature": asked.temperature,
            "inconclusive_policy": getattr(settings, "inconclusive", "pass"),
            "metrics": metrics, "failures": failures}


def _metric_entry(kind: str, metric: str, records: Sequence[ItemRecord], limit: float,
                  gates: dict[str, float]) -> dict[str, Any]:
    n_scored = sum(scored_value(r, metric) is not None for r in records)
    reasons: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for record in records:
        if scored_value(record, metric) is None:
            reason = str(record.unscored.get(metric) or "not scored")
            reasons[reason_kind(reason)] += 1
            examples.setdefault(reason_kind(reason), reason)
    n_items = len(records)
    n_unscored = n_items - n_scored
    share = n_unscored / n_items if n_items else 0.0
    top, top_count = reasons.most_common(1)[0] if reasons else (None, 0)
    sds, flips, verdicts = [], 0, 0
    inconclusive = []
    for record in records:
        values = scored(record.judge.get("samples", {}).get(metric, ()))
        if len(values) >= 2:
            sds.append(sample_sd(values))
            bound = record.thresholds.get(metric, gates.get(f"{kind}.{metric}"))
            if isinstance(bound, int | float):
                verdicts += 1
                flips += len({below(metric, v, float(bound)) for v in values}) > 1
        if metric in (record.judge.get("inconclusive") or {}):
            inconclusive.append(record.nodeid)
    modes = sorted({str(m) for r in records if (m := r.judge.get("structured_output"))})
    return {
        "n_items": n_items, "n_scored": n_scored, "n_unscored": n_unscored,
        "unscored_share": share, "over_limit": share > limit,
        "top_reason": top, "top_reason_count": top_count,
        "top_reason_example": examples.get(top) if top else None,
        "reasons": dict(reasons.most_common()),
        "n_samples": max(int(r.judge.get("n_samples") or 1) for r in records),
        "within_item_sd": sum(sds) / len(sds) if sds else None, "n_sd_items": len(sds),
        "verdict_flip_share": flips / verdicts if verdicts else None,
        "n_verdict_items": verdicts,
        "n_inconclusive": len(inconclusive), "inconclusive_items": inconclusive,
        "structured_output": modes,
    }


def _gate_bounds(gates: dict[str, Any]) -> dict[str, float]:
    """Plain ``kind.metric`` gate bounds (no category), for the verdict of a sample."""
    try:
        return {k: v for k, v in flatten(gates).items() if "[" not in k}
    except ConfigError:
        return {}


def failure_line(kind: str, metric: str, entry: dict[str, Any], limit: float) -> str:
    """The session-failing line: metric, unscored/total, the most common reason."""
    line = (f"judged metric {kind}.{metric}: {entry['n_unscored']}/{entry['n_items']} items "
            f"unscored ({100 * entry['unscored_share']:.1f}%), more than "
            f"--ragbench-max-unscored {limit:g}")
    if entry["top_reason"]:
        line += (f"; most common ({entry['top_reason_count']}): "
                 f"{entry['top_reason_example']}")
    return line


def lines(document: dict[str, Any]) -> list[str]:
    """The terminal block: per judged metric, scored and unscored counts, self-consistency."""
    judge = document.get("judge") or {}
    metrics = judge.get("metrics") or {}
    if not metrics:
        return []
    repeated = int(judge.get("samples") or 1) > 1
    head = ["judged metric", "items", "scored", "unscored", "share", "most common reason"]
    if repeated:
        head[5:5] = ["samples", "within-item sd", "verdict flips", "inconclusive"]
    rows: list[list[str]] = [head]
    for kind, by_metric in metrics.items():
        for metric, e in by_metric.items():
            row = [f"{kind}.{metric}", str(e["n_items"]), str(e["n_scored"]),
                   str(e["n_unscored"]), percent(e["unscored_share"]),
                   _short(e["top_reason"]) if e["top_reason"] else "-"]
            if repeated:
                flips = ("-" if e["verdict_flip_share"] is None else
                         f"{percent(e['verdict_flip_share'])} of {e['n_verdict_items']}")
                row[5:5] = [str(e["n_samples"]), num(e["within_item_sd"]), flips,
                            str(e["n_inconclusive"])]
            rows.append(row)
    title = (f"judged metrics (unscored limit {judge['max_unscored']:g}"
             + (f"; {judge['samples']} samples per item at temperature "
                f"{judge['temperature']:g}, inconclusive items {judge['inconclusive_policy']}"
                if repeated else "") + "):")
    return [title, *table(rows)]


def _short(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
