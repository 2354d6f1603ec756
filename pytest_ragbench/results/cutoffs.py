"""Metrics whose k follows the system, compared between runs or systems of different k.

``source_hit@k``, ``source_recall@k`` and ``source_ndcg@k`` are recorded at the k the
system was asked for (``source_hit@4``). Where two paired records used different k, a
comparison puts them side by side twice:

- as ``source_hit@k``: each at the k its system was asked for (what its answers could
  use: a system asked for fewer contexts that loses an expected source is worse here);
- at the common k, the smallest of the pair family (``source_hit@2``): the larger-k
  records rescored from the ranked source names they keep (``ItemRecord.retrieval``), so
  that the ranking itself is compared. A record that keeps no ranking (saved by an older
  version), or whose kept ranking does not give back its own recorded value, cannot be
  rescored: the metric is then listed as not compared, with the reason.
"""

from __future__ import annotations

import math
from typing import Any

from pytest_ragbench.results.aggregate import scored_value
from pytest_ragbench.results.records import ItemRecord

SYSTEM_K = ("source_hit", "source_recall", "source_ndcg")


def split(metric: str) -> tuple[str, int] | None:
    """``("source_hit", 4)`` for ``source_hit@4``; None for any other metric."""
    stem, at, k = metric.rpartition("@")
    if at and stem in SYSTEM_K and k.isdigit() and int(k) > 0:
        return stem, int(k)
    return None


def own_k(record: ItemRecord, stem: str) -> int | None:
    """The k at which ``record`` scored ``stem`` (None when it did not score it)."""
    for metric in record.metrics:
        found = split(metric)
        if found is not None and found[0] == stem and scored_value(record, metric) is not None:
            return found[1]
    return None


def value_at(record: ItemRecord, stem: str, k: int) -> float | None:
    """``stem@k`` of a record: as recorded, else rescored from its kept ranking (or None)."""
    recorded = scored_value(record, f"{stem}@{k}")
    if recorded is not None:
        return recorded
    kept = record.retrieval or {}
    own = kept.get("k")
    expected = [str(e) for e in kept.get("expected") or ()]
    ranked = [str(n) for n in kept.get("ranked") or ()]
    if not isinstance(own, int) or own < k or not expected \
            or len(ranked) < min(int(kept.get("n_ranked") or 0), max(own, k)):
        return None  # no ranking kept, a larger k asked for, or a cut ranking
    # lazy: loads pytrec_eval
    from pytest_ragbench.kinds.answer_common import source_scores

    check = scored_value(record, f"{stem}@{own}")
    again = _float(source_scores(expected, ranked, own).get(f"{stem}@{own}"))
    if check is None or again is None or not math.isclose(check, again, abs_tol=1e-9):
        return None  # the kept ranking does not give back the recorded value
    return _float(source_scores(expected, ranked, k).get(f"{stem}@{k}"))


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        return None
    return float(value)
