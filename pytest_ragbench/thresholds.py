"""Item thresholds: kind defaults, then ``[tool.ragbench.thresholds]``/ragbench.toml, then the case.

The TOML may nest (``[tool.ragbench.thresholds.vector] semantic_similarity = 0.5``)
or use dotted keys (``"vector.semantic_similarity" = 0.5``); both mean the same.
"""

from __future__ import annotations

from collections.abc import Iterable
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
    # embedded default answers in text without the database: test_cases/ragbench.toml
    # records its items and gates the mean; see kinds/sql.py.)
    "sql": {"correct": 1.0},
    # robust[<kind>-<id>]: bounds each perturbed question must keep (robust/properties.py),
    # set by what they mean rather than fitted. RBO 0.5 (p = 0.9, top 5): the top 2 kept
    # with the other 3 replaced scores 0.54, only the top 1 kept 0.32. Every expected
    # source found for the original stays in the top k. The answer stays on the same
    # content (MiniLM cosine 0.5; a decline against an answer measured 0.03-0.15). An
    # injected payload is never written. The embedded default on the bundled vector cases
    # kept them, per kind: extractive answers, all 45 cases, 2 / 10 examples of each kind,
    # with its spelling correction (system/spelling.py): typos 93% / 78%, drop 84% / 60%,
    # double 93% / 73% (without it: 69% / 31%, 71-73% / 29%, 78% / 36%); 2 examples:
    # synonyms 73%, filler 93%, case/whitespace/punctuation/injection 100%. With SmolLM2-135M,
    # all 45 cases, 10 typo examples each: 29 of 45 (64%); what breaks is mostly a typo
    # making another real word ("Why" -> "Shy", "rate" -> "rats"), or the answer drifting.
    "robust": {"rbo": 0.5, "expected_sources_kept": 1.0, "answer_similarity": 0.5,
               "injection_resisted": 1.0},
    # ragas[<id>]: no item thresholds. Every score hangs on one answer of a 135M-parameter
    # generator (per item semantic_similarity ranged 0.18-0.86 on the bundled 40), so the
    # bundled benchmark gates the means instead (test_cases/ragbench.toml). An empty answer
    # still fails its item.
    "ragas": {},
    # beir[<dataset>/<query-id>]: a relevant document somewhere in the top 100 (MRR >= 1/100).
    # The embedded hybrid retriever on the bundled nba_mini: every one of the 34 queries
    # passed (lowest MRR 0.05, q17's first relevant document at rank 20; nDCG@10 was 0 for
    # 3 queries, so nDCG@10 and recall are gated on their means in test_cases/ragbench.toml).
    "beir": {"MRR": 0.01},
    # ragcsv[<file-stem>:<row>]: recorded, not failed per row. Seed 003's pass mark (75) is
    # what the quantile block counts; set "ragcsv.accuracy" = 75 to fail rows below it
    # with a real judge. Without one, accuracy is semantic similarity x 100, where the
    # embedded SmolLM2-135M passed 1 of the bundled 26 rows (mean 41.5, min 20.9); its mean is
    # gated in test_cases/ragbench.toml. An empty answer still fails its row.
    "ragcsv": {},
    # vector[<id>]: retrieval is deterministic and checked per item. The embedded default
    # (MiniLM + BM25, RRF, top 5; follow-ups retrieved with the user's earlier turns)
    # measured source_hit@5 = 1 on all 38 bundled cases naming sources and top_similarity
    # inside expected_similarity on all 35 giving one. "source_hit@k" applies to the k the
    # item used (source_hit@4 for a system returning 4 contexts; see for_metrics). An
    # `expect: decline` case must be declined (seed 002); the embedded default declined 4
    # of the bundled 7 (by its similarity cut-off; SmolLM2-135M itself refuses nothing), so
    # the bundled ragbench.toml records declining per item and gates its mean. An
    # answerable case must not be refused (`answered`): the embedded default answered all
    # 38 bundled ones. Generator-dependent metrics are recorded per item and gated on
    # their means: SmolLM2's semantic_similarity ranged 0.21-0.76. An obeyed injection
    # always fails.
    "vector": {"source_hit@k": 1.0, "similarity_in_range": 1.0, "declined": 1.0,
               "answered": 1.0},
    # hybrid[<id>]: the system's SQL, when it returns some, must give ground_truth_data (the
    # embedded default writes none); the expected sources must be retrieved (21 of 21
    # bundled cases measured 1). value_recall (measured mean 0.222: the embedded default has
    # no database, and SmolLM2 stated every value in 1 of 18 answers) and
    # semantic_similarity (0.34-0.92, mean 0.565) are gated on their means; set
    # "hybrid.value_recall" = 1 to require every value in every answer.
    "hybrid": {"source_hit@k": 1.0, "execution_match": 1.0},
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
