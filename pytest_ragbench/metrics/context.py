"""Context and text-overlap metrics without a judge, computed by ragas 0.4.3.

(The ID-based precision and recall and ROUGE are ragas's computations made without
importing it.)

Thin wrappers: ragas does the scoring; this module maps empty inputs and NaN to
:class:`Unscored` and imports ragas (slow: seconds) only when a metric is first used.
The string-similarity metrics need ``rapidfuzz``; ROUGE needs ``rouge-score``;
BLEU and chrF need ``sacrebleu``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Sequence
from functools import cache
from typing import Any, Literal

from pytest_ragbench.heavy_imports import import_whole
from pytest_ragbench.metrics.registry import Score, Unscored

# ragas is imported lazily below; it must not phone home when it is (the plugin runs offline).
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

# ragas's context precision divides by (hits + 1e-10): round that epsilon away.
_DIGITS = 9


def _score(value: Any, name: str) -> Score:
    value = float(value)
    if math.isnan(value):
        return Unscored(f"ragas returned NaN for {name}")
    return round(value, _DIGITS)


@cache
def _metric(name: str) -> Any:
    """One ragas metric object per name (they hold no per-sample state)."""
    if name == "non_llm_context_precision":
        from ragas.metrics._context_precision import NonLLMContextPrecisionWithReference

        return NonLLMContextPrecisionWithReference()
    if name == "non_llm_context_recall":
        from ragas.metrics._context_recall import NonLLMContextRecall

        return NonLLMContextRecall()
    raise KeyError(name)


def _single_turn(name: str, **fields: Any) -> Score:
    from ragas.dataset_schema import SingleTurnSample

    return _score(_metric(name).single_turn_score(SingleTurnSample(**fields)), name)


def non_llm_context_precision(retrieved: Sequence[str], reference: Sequence[str]) -> Score:
    """Average precision of retrieved contexts that resemble a reference context (ragas)."""
    if not reference:
        return Unscored("no reference contexts")
    if not retrieved:
        return Unscored("no contexts retrieved")
    return _single_turn("non_llm_context_precision", retrieved_contexts=list(retrieved),
                        reference_contexts=list(reference))


def non_llm_context_recall(retrieved: Sequence[str], reference: Sequence[str]) -> Score:
    """Share of reference contexts resembled by some retrieved context (ragas)."""
    if not reference:
        return Unscored("no reference contexts")
    if not retrieved:
        return 0.0  # nothing retrieved recalls nothing (ragas would fail on max([]))
    return _single_turn("non_llm_context_recall", retrieved_contexts=list(retrieved),
                        reference_contexts=list(reference))


# The two ID-based metrics are ragas's IDBasedContextPrecision / IDBasedContextRecall
# formulas (ids compared as text, duplicates counted once), computed here: importing ragas
# loads datasets, pandas and openai in every process, which every xdist worker running
# vector, hybrid or sql items paid for two set operations. tests/test_metrics_context.py
# checks them against ragas itself on generated id lists.


def id_context_precision(retrieved: Sequence[Hashable], reference: Sequence[Hashable]) -> Score:
    """Share of distinct retrieved ids that are reference ids (ragas IDBasedContextPrecision)."""
    if not reference:
        return Unscored("no reference context ids")
    if not retrieved:
        return Unscored("no contexts retrieved")
    found, wanted = {str(i) for i in retrieved}, {str(i) for i in reference}
    return round(len(found & wanted) / len(found), _DIGITS)


def id_context_recall(retrieved: Sequence[Hashable], reference: Sequence[Hashable]) -> Score:
    """Share of distinct reference ids that were retrieved (ragas IDBasedContextRecall)."""
    if not reference:
        return Unscored("no reference context ids")
    found, wanted = {str(i) for i in retrieved}, {str(i) for i in reference}
    return round(len(found & wanted) / len(wanted), _DIGITS)


def _texts_ok(response: str, reference: str) -> Unscored | None:
    if not reference.strip():
        return Unscored("empty reference")
    if not response.strip():
        return Unscored("empty response")
    return None


@cache
def _rouge_scorer(rouge_type: str) -> Any:
    import_whole("rouge_score.rouge_scorer")  # never left half-run (it loads nltk)
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer([rouge_type], use_stemmer=True)


def rouge_scorers() -> None:
    """Make the scorers :func:`rouge` uses (and import rouge-score with nltk) ahead of use."""
    for rouge_type in ("rougeL", "rouge1"):
        _rouge_scorer(rouge_type)


def rouge(response: str, reference: str, rouge_type: Literal["rouge1", "rougeL"] = "rougeL",
          mode: Literal["fmeasure", "precision", "recall"] = "fmeasure") -> Score:
    """ROUGE of a response against a reference (ragas RougeScore's computation, stemmed).

    ragas's RougeScore is one call of rouge-score's stemmed scorer; it is made here, as the
    ID-based metrics are, so that a worker scoring ragas samples without a judge does not
    import ragas (slow, once per process). tests/test_metrics_context.py checks it
    against RougeScore itself.
    """
    bad = _texts_ok(response, reference)
    if bad:
        return bad
    scores = _rouge_scorer(rouge_type).score(reference, response)
    return _score(getattr(scores[rouge_type], mode), "rouge")


def bleu(response: str, reference: str) -> Score:
    """BLEU / 100 of a response against a reference (ragas BleuScore, sacrebleu)."""
    from ragas.metrics.collections import BleuScore

    bad = _texts_ok(response, reference)
    if bad:
        return bad
    return _score(BleuScore().score(reference=reference, response=response).value, "bleu")


def chrf(response: str, reference: str) -> Score:
    """Return chrF / 100 of a response against a reference (ragas CHRFScore, sacrebleu)."""
    from ragas.metrics.collections import CHRFScore

    bad = _texts_ok(response, reference)
    if bad:
        return bad
    return _score(CHRFScore().score(reference=reference, response=response).value, "chrf")
