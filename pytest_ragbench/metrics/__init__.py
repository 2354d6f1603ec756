"""Metrics: a registry of what each metric is, and one module per family that computes them.

- :mod:`.registry` — names, cutoffs, ranges, directions, needs; ``Unscored``.
- :mod:`.ir` — trec_eval measures through pytrec_eval (``evaluate_run``, ``IREvaluator``).
- :mod:`.sets` — set precision/recall/F1/relevance of memory scenarios.
- :mod:`.answer` — exact match, token F1, numeric match, keyword overlap, entity mention,
  semantic similarity.
- :mod:`.context` — ragas context and text-overlap metrics without a judge.
- :mod:`.judged` — ragas faithfulness, answer relevancy, context precision and recall with
  a judge (``judged_scores``); :mod:`.ragas_bridge` puts our judge and embedder behind
  ragas's interfaces.

Importing this package is cheap: numpy, pytrec_eval and ragas load on first use.
"""

from __future__ import annotations

from pytest_ragbench.metrics.answer import (
    EntityMention,
    entity_mention,
    exact_match,
    keyword_overlap,
    normalize_answer,
    numeric_match,
    semantic_similarities,
    semantic_similarity,
    token_f1,
)
from pytest_ragbench.metrics.ir import IREvaluator, evaluate_run, read_qrels, read_run, write_run
from pytest_ragbench.metrics.judged import JUDGED_METRICS, NO_JUDGE, ajudged_scores, judged_scores
from pytest_ragbench.metrics.registry import (
    REGISTRY,
    DuplicateMetricError,
    Measure,
    MetricSpec,
    Score,
    UnknownMetricError,
    Unscored,
    define_metric,
    get_metric,
    parse_metric,
    register_metric,
)
from pytest_ragbench.metrics.sets import SetScores, set_metrics

__all__ = [
    "JUDGED_METRICS",
    "NO_JUDGE",
    "REGISTRY",
    "DuplicateMetricError",
    "EntityMention",
    "IREvaluator",
    "Measure",
    "MetricSpec",
    "Score",
    "SetScores",
    "UnknownMetricError",
    "Unscored",
    "ajudged_scores",
    "define_metric",
    "entity_mention",
    "evaluate_run",
    "exact_match",
    "get_metric",
    "judged_scores",
    "keyword_overlap",
    "normalize_answer",
    "numeric_match",
    "parse_metric",
    "read_qrels",
    "read_run",
    "register_metric",
    "semantic_similarities",
    "semantic_similarity",
    "set_metrics",
    "token_f1",
    "write_run",
]
