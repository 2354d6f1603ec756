"""Repeated judging: N samples of a judged metric per item, their mean, and its interval.

``--ragbench-judge-samples N`` asks the judge N times per item with distinct seeds
(sample ``i`` uses seed ``i``, so sample 0 is the single-sample run's call and an extra
sample asks only for itself through the response cache) at ``--ragbench-judge-temperature``
(default 0 for one sample, 0.7 for more). The item's score is the mean of its scored
samples. With N >= 3 an item whose threshold lies inside its own judge interval (the
t-interval of its samples) is *inconclusive*.

Each kind puts what it judged on its :class:`~pytest_ragbench.results.records.Outcome` as
``judge`` (see :func:`outcome_judge`); :func:`inconclusive` reads it when thresholds are
applied (``items.py``) and the report reads it at session end (``results/judging.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragbench.metrics.registry import Score, Unscored
from pytest_ragbench.render.text import comparator

DEFAULT_TEMPERATURE = 0.0
SAMPLING_TEMPERATURE = 0.7
CONFIDENCE = 0.95
MIN_SAMPLES_FOR_VERDICT = 3


@dataclass(frozen=True)
class JudgeSettings:
    """How often and how hot the judge is asked for each item."""

    samples: int = 1
    temperature: float = DEFAULT_TEMPERATURE

    @classmethod
    def from_config(cls, config: Any) -> JudgeSettings:
        """From a :class:`~pytest_ragbench.config.settings.RagbenchConfig` (or defaults)."""
        samples = int(getattr(config, "judge_samples", 1) or 1)
        temperature = getattr(config, "judge_temperature", None)
        if temperature is None:
            temperature = DEFAULT_TEMPERATURE if samples == 1 else SAMPLING_TEMPERATURE
        return cls(samples, float(temperature))

    @property
    def seeds(self) -> range:
        """The seed of each sample."""
        return range(self.samples)


def combine(samples: Sequence[Score]) -> Score:
    """The mean of the scored samples; all unscored: the most common reason."""
    values = [float(s) for s in samples if not isinstance(s, Unscored)]
    if values:
        return sum(values) / len(values)
    reasons = Counter(s.reason for s in samples if isinstance(s, Unscored))
    if not reasons:
        return Unscored("the judge was not asked")
    reason, count = reasons.most_common(1)[0]
    if len(samples) > 1:
        reason = f"{reason} ({count} of {len(samples)} samples)"
    return Unscored(reason)


def as_json(samples: Sequence[Score]) -> list[float | str]:
    """Samples for a record: the value, or the reason it is unscored."""
    return [s.reason if isinstance(s, Unscored) else float(s) for s in samples]


def scored(values: Sequence[Any]) -> list[float]:
    """The numeric samples of a record's list (reasons dropped)."""
    return [float(v) for v in values
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]


def interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The t-interval of the mean of ``values`` (two or more)."""
    from scipy import stats

    n = len(values)
    mean = sum(values) / n
    sd = sample_sd(values)
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def sample_sd(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1); 0 for fewer than two values."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))


def outcome_judge(samples: Mapping[str, Sequence[Score]], settings: JudgeSettings,
                  judge: Any = None, **extra: Any) -> dict[str, Any]:
    """The ``judge`` part of an Outcome: which metrics the judge scored, and every sample.

    ``metrics`` lists the metrics the judge was asked about for this item (the report's
    unscored limit counts those; a metric without samples was not asked, e.g. nothing was
    retrieved); ``samples`` is ``{metric: [value or reason, ...]}``, one entry per sample.
    """
    asked = {name: values for name, values in samples.items() if values}
    info: dict[str, Any] = {
        "metrics": sorted(asked),
        "samples": {name: as_json(values) for name, values in sorted(asked.items())},
        "n_samples": settings.samples, "temperature": settings.temperature,
    }
    mode = getattr(judge, "structured_output", None)
    if mode:
        info["structured_output"] = mode
    info.update(extra)
    return info


def evidence_lines(samples: Mapping[str, Sequence[Score]]) -> str:
    """``metric: v1, v2, ... (mean m, sd s)`` per metric, for a failure message."""
    lines = []
    for name, values in sorted(samples.items()):
        if not values:
            continue
        shown = ", ".join(f"unscored ({s.reason})" if isinstance(s, Unscored) else f"{s:.4g}"
                          for s in values)
        numbers = [float(s) for s in values if not isinstance(s, Unscored)]
        if len(numbers) > 1:
            shown += f" (mean {sum(numbers) / len(numbers):.4g}, sd {sample_sd(numbers):.3g})"
        lines.append(f"{name}: {shown}")
    return "\n".join(lines)


def inconclusive(judge: Mapping[str, Any] | None, thresholds: Mapping[str, float],
                 lower_is_better: frozenset[str] = frozenset()) -> dict[str, str]:
    """``{metric: why}`` for each judged metric whose threshold lies in its judge interval.

    Only with three or more samples asked and at least two of them scored.
    """
    if not judge or int(judge.get("n_samples") or 1) < MIN_SAMPLES_FOR_VERDICT:
        return {}
    found: dict[str, str] = {}
    for name, raw in (judge.get("samples") or {}).items():
        threshold = thresholds.get(name)
        values = scored(raw)
        if threshold is None or len(values) < 2 or sample_sd(values) == 0.0:
            continue
        low, high = interval(values)
        if low <= threshold <= high:
            sign = comparator(name in lower_is_better)
            found[name] = (f"{name}: inconclusive, threshold {sign} {threshold:g} lies inside "
                           f"the judge interval [{low:.4g}, {high:.4g}] of {len(values)} "
                           f"samples (mean {sum(values) / len(values):.4g})")
    return found
