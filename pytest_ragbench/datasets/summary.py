"""``ragbench dataset stats``: counts per stratum and what the sample size buys.

The half-width is the normal-approximation (Wald) 95% interval of a proportion,
``z·√(p(1−p)/n)`` with the worst case ``p = 0.5`` by default (±4.4% at 500,
±3.5% at 800) — computed by :mod:`pytest_ragbench.stats`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragbench.datasets.sample import NormalizedSample
from pytest_ragbench.stats import proportion_half_width, sample_size_for_half_width


@dataclass(frozen=True)
class DatasetStats:
    """Counts of a dataset and the interval widths they give."""

    n: int
    by_doc_type: dict[str, int]
    by_stratum: dict[str, int]
    by_difficulty: dict[str, int]
    by_source: dict[str, int]
    unanswerable: int
    half_width: float | None
    half_width_by_doc_type: dict[str, float]
    target_half_width: float
    n_for_target: int
    confidence: float
    p: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (``--json``)."""
        return dict(self.__dict__)


def dataset_stats(samples: Sequence[NormalizedSample], target_half_width: float = 0.035,
                  confidence: float = 0.95, p: float = 0.5) -> DatasetStats:
    """Counts per doc_type, doc_type × question_type, difficulty and source."""
    n = len(samples)
    doc_types = Counter(s.doc_type for s in samples)
    return DatasetStats(
        n=n, by_doc_type=dict(sorted(doc_types.items())),
        by_stratum=dict(sorted(Counter(f"{s.doc_type}/{s.question_type}"
                                       for s in samples).items())),
        by_difficulty=dict(sorted(Counter(s.difficulty for s in samples).items())),
        by_source=dict(sorted(Counter(s.source_dataset for s in samples).items())),
        unanswerable=sum(not s.answerable for s in samples),
        half_width=proportion_half_width(n, p, confidence) if n else None,
        half_width_by_doc_type={k: proportion_half_width(v, p, confidence)
                                for k, v in sorted(doc_types.items())},
        target_half_width=target_half_width,
        n_for_target=sample_size_for_half_width(target_half_width, p, confidence),
        confidence=confidence, p=p)


def format_stats(stats: DatasetStats) -> str:
    """The plain-text table printed by ``ragbench dataset stats``."""
    level = f"{stats.confidence:.0%}"
    lines = [f"samples: {stats.n}"]
    if stats.n:
        share = stats.unanswerable / stats.n
        lines.append(f"unanswerable: {stats.unanswerable} ({share:.1%})")
        lines.append(f"{level} CI half-width of a proportion (p={stats.p:g}) at n={stats.n}: "
                     f"±{stats.half_width:.1%}")
    lines.append(f"n needed for ±{stats.target_half_width:.1%}: {stats.n_for_target}")
    lines.append("")
    lines.append(f"{'doc_type':<24} {'n':>6} {'half-width':>11}")
    for name, count in stats.by_doc_type.items():
        lines.append(f"{name:<24} {count:>6} {stats.half_width_by_doc_type[name]:>10.1%}")
    for title, counts in (("doc_type/question_type", stats.by_stratum),
                          ("difficulty", stats.by_difficulty),
                          ("source_dataset", stats.by_source)):
        lines.append("")
        lines.append(f"{title:<40} {'n':>6}")
        lines.extend(f"{name:<40} {count:>6}" for name, count in counts.items())
    return "\n".join(lines)
