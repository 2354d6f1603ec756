"""Item thresholds: the kind's, then ``[tool.ragbench.thresholds]``/ragbench.toml, the case's.

The TOML may nest (``[tool.ragbench.thresholds.vector] semantic_similarity = 0.5``)
or use dotted keys (``"vector.semantic_similarity" = 0.5``); both mean the same. Each
kind's defaults are in its :class:`~pytest_ragbench.kinds.ItemKind` (``thresholds``);
whether a metric misses its threshold depends on the metric's direction in the metric
registry (smaller is better for timings).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pytest_ragbench.config.setting_files import finite_numbers
from pytest_ragbench.metrics.registry import REGISTRY
from pytest_ragbench.render.text import comparator

if TYPE_CHECKING:
    from pytest_ragbench.kinds import ItemKind


def flatten(table: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Flatten nested TOML tables into ``{"kind.metric": value}``, each a finite number."""
    return finite_numbers(table, "threshold", prefix)


def resolve(kind: ItemKind, configured: dict[str, Any],
            case_thresholds: dict[str, float] | None) -> dict[str, float]:
    """Return the thresholds that apply to one item of ``kind``."""
    if case_thresholds == {}:
        return {}  # the case records scores without failing
    result = dict(kind.thresholds)
    for name, value in flatten(configured).items():
        item_kind, _, metric = name.partition(".")
        if item_kind == kind.name and metric:
            result[metric] = value
    result.update(case_thresholds or {})
    return result


def for_metrics(limits: dict[str, float], names: Iterable[str]) -> dict[str, float]:
    """The thresholds of one item's metrics: ``x@k`` becomes ``x@5`` for the k it used.

    A threshold named for a cut-off (``source_hit@5``) wins over the generic ``@k`` one.
    """
    result = {name: value for name, value in limits.items() if not name.endswith("@k")}
    for name, value in limits.items():
        if name.endswith("@k"):
            stem = name[:-1]
            for metric in names:
                if metric.startswith(stem) and metric[len(stem):].isdigit():
                    result.setdefault(metric, value)
    return result


def lower_is_better(metric: str) -> bool:
    """True for a metric where smaller values are better (the registry's direction)."""
    return REGISTRY.lower_is_better(metric)


def below(metric: str, value: float, threshold: float) -> bool:
    """True when ``value`` misses ``threshold`` in the metric's direction."""
    if lower_is_better(metric):
        return value > threshold
    return value < threshold


def failures(metrics: dict[str, float], thresholds: dict[str, float]) -> list[str]:
    """One line per metric that misses its threshold (unscored metrics never fail)."""
    lines = []
    for metric, threshold in thresholds.items():
        if metric in metrics and below(metric, metrics[metric], threshold):
            sign = comparator(lower_is_better(metric))
            lines.append(f"{metric} = {metrics[metric]:.4g}, needs {sign} {threshold:g}")
    return lines
