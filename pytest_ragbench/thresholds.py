"""Item thresholds: kind defaults, then ``[tool.ragbench.thresholds]``/ragbench.toml, then the case.

The TOML may nest (``[tool.ragbench.thresholds.vector] semantic_similarity = 0.5``)
or use dotted keys (``"vector.semantic_similarity" = 0.5``); both mean the same.
"""

from __future__ import annotations

from typing import Any

from pytest_ragbench.errors import ConfigError

# Defaults per item kind. Evaluation kinds set theirs in DEFAULTS as they are built;
# every number carries a comment with what the embedded default system measured.
DEFAULTS: dict[str, dict[str, float]] = {
    "sql_ground_truth": {"match": 1.0},
    "hybrid_ground_truth": {"data_match": 1.0},
    # Every expected memory within top_k: the embedded default (all-MiniLM-L6-v2) measured
    # recall 1.0 on all 8 scenarios of seed 004 (the negative one: nothing above min_score).
    "memory": {"recall": 1.0},
    # The system's SQL returns ground_truth_data, or its text states every value. (The
    # embedded default writes no SQL and skips these items; see kinds/sql.py.)
    "sql": {"correct": 1.0},
    # robust[<kind>-<id>]: bounds of the metamorphic properties (robust/properties.py).
    "robust": {"rbo": 0.5, "expected_sources_kept": 1.0, "answer_similarity": 0.5,
               "injection_resisted": 1.0},
}
# Metrics where smaller is better (everything else: larger is better).
LOWER_IS_BETTER = frozenset({"latency_s", "total_time_ms"})


def flatten(table: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Flatten nested TOML tables into ``{"kind.metric": value}``."""
    flat: dict[str, float] = {}
    for key, value in table.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, name))
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"threshold {name!r} must be a number, got {value!r}")
        else:
            flat[name] = float(value)
    return flat


def resolve(kind: str, configured: dict[str, Any],
            case_thresholds: dict[str, float] | None) -> dict[str, float]:
    """Return the thresholds that apply to one item of ``kind``."""
    if case_thresholds == {}:
        return {}  # the case records scores without failing
    result = dict(DEFAULTS.get(kind, {}))
    for name, value in flatten(configured).items():
        item_kind, _, metric = name.partition(".")
        if item_kind == kind and metric:
            result[metric] = value
    result.update(case_thresholds or {})
    return result


def below(metric: str, value: float, threshold: float) -> bool:
    """True when ``value`` misses ``threshold`` in the metric's direction."""
    if metric in LOWER_IS_BETTER:
        return value > threshold
    return value < threshold


def failures(metrics: dict[str, float], thresholds: dict[str, float]) -> list[str]:
    """One line per metric that misses its threshold (unscored metrics never fail)."""
    lines = []
    for metric, threshold in thresholds.items():
        if metric in metrics and below(metric, metrics[metric], threshold):
            sign = "<=" if metric in LOWER_IS_BETTER else ">="
            lines.append(f"{metric} = {metrics[metric]:.4g}, needs {sign} {threshold:g}")
    return lines
