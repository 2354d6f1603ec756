"""``beir[<dataset>/<query-id>]``: one judged query of a BEIR folder, scored like trec_eval.

Per dataset and session (and system), once: the corpus is read (with
``--ragbench-max-docs N`` its first N documents, and only the judgments of those count),
a retriever is built and indexed on it (``ragbench_beir_retriever_factory``, whose default
persists its index in the cache; with --ragbench-systems the named system's
``retriever.for_corpus``), the queries of every selected item of the dataset (on an xdist
worker, of the worker's own items; those sent later are retrieved in a batch of their
own: :func:`plan_ahead`, the kind's ``plan_ahead``) are retrieved in one batch (top 100),
and a pytrec_eval evaluator is built on their qrels. Each item then scores its own ranking:
nDCG@10, R@10, R@100 and MRR (reciprocal rank; its mean over the items is the MRR).

As beir's ``EvaluateRetrieval.evaluate`` does by default, a document whose id equals the
query id is dropped from the ranking. The record carries the whole ranking (trec_eval
order) and the query's judgments: the report writes ``<dataset>.run.trec`` and the
dataset-level metrics from them (``pytest_ragbench/kinds/beir/report.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.cases.model import BeirCase
from pytest_ragbench.errors import CaseError, RagbenchError
from pytest_ragbench.formats.beir import read_corpus
from pytest_ragbench.kinds import ItemRun, Outcome
from pytest_ragbench.metrics import IREvaluator, Unscored
from pytest_ragbench.metrics.ir import trec_order
from pytest_ragbench.systems.protocols import Document

TOP_K = 100  # documents retrieved per query: enough for R@100 and nDCG@100
ITEM_MEASURES = ("nDCG@10", "R@10", "R@100", "MRR")
SHOWN = 10  # retrieved documents shown in the evidence


@dataclass
class DatasetRun:
    """One dataset retrieved by one system in this session."""

    retriever: Any
    description: str
    documents: int
    rankings: dict[str, list[tuple[str, float]]]  # query id -> ranking in trec_eval order
    evaluators: dict[str, Any]  # query id -> the IREvaluator over the qrels of its batch
    seconds_index: float
    seconds_retrieve: float
    corpus_errors: list[CaseError] = field(default_factory=list)
    warned: bool = False
    kept: frozenset[str] | None = None  # with --ragbench-max-docs: the ids indexed
    max_docs_note: str = ""


DatasetKey = tuple[str, str, str | None]  # (folder, split, system)


@dataclass
class BeirState:
    """Datasets already run in this session, and the queries planned for each."""

    runs: dict[DatasetKey, DatasetRun | RagbenchError] = field(default_factory=dict)
    # query id -> case of the items to come, in the order they run (plan_ahead)
    planned: dict[DatasetKey, dict[str, BeirCase]] = field(default_factory=dict)


STATE = pytest.StashKey[BeirState]()


def run(case: BeirCase, item: ItemRun) -> Outcome:
    """Score the query's ranking from the dataset's batch against its judgments."""
    dataset = dataset_run(case, item)
    qrels = restricted(case, dataset)
    if case.query_id not in dataset.rankings:  # not planned (asked for directly): alone
        _extend(dataset, [case])
    ranking = dataset.rankings[case.query_id]
    metrics: dict[str, float] = {}
    unscored: dict[str, str] = {}
    if not qrels or max(qrels.values()) < 1:
        reason = "no relevant document is judged for this query (every grade is below 1)"
        if dataset.kept is not None and qrels != case.qrels:
            reason = f"no relevant document among the documents indexed ({dataset.max_docs_note})"
        unscored = dict.fromkeys(ITEM_MEASURES, reason)
    else:
        evaluator = dataset.evaluators[case.query_id]
        for name, value in evaluator.score_query(case.query_id, dict(ranking)).items():
            if isinstance(value, Unscored):
                unscored[name] = value.reason
            else:
                metrics[name] = float(value)
    warnings = []
    if (dataset.corpus_errors or dataset.max_docs_note) and not dataset.warned:
        dataset.warned = True  # once per dataset and session
        if dataset.corpus_errors:
            first = dataset.corpus_errors[0]
            warnings.append(f"{len(dataset.corpus_errors)} corpus line(s) skipped; "
                            f"first: {first}")
        if dataset.max_docs_note:
            warnings.append(dataset.max_docs_note)
    ordered = trec_order(dict(ranking))
    return Outcome(
        metrics=metrics, unscored=unscored, warnings=warnings,
        evidence={
            "query": case.query,
            "expected": _expected(qrels),
            "got": _got(ordered, qrels),
            "retriever": dataset.description,
            "query_id": case.query_id,
            "split": case.split,
            "ranking": [[doc, score] for doc, score in ordered],
            "qrels": dict(qrels),
        },
        summary=_summary(metrics),
    )


def plan_ahead(items: list[pytest.Item], item: ItemRun) -> None:
    """Batch the queries of the BEIR ``items`` to come, per dataset (``ItemKind.plan_ahead``).

    A dataset not run yet is run by its first item, with every query planned for it; the
    queries of a dataset already run (on an xdist worker, items sent later) are retrieved
    now, in one batch.
    """
    state = item.session_state(STATE, BeirState)
    fresh: dict[DatasetKey, list[BeirCase]] = {}
    for queued in items:
        case = getattr(queued, "case", None)
        if isinstance(case, BeirCase):
            key = _key(case, item)
            if case.query_id not in state.planned.setdefault(key, {}):
                state.planned[key][case.query_id] = case
                fresh.setdefault(key, []).append(case)
    for key, cases in fresh.items():
        found = state.runs.get(key)
        if isinstance(found, DatasetRun):
            _extend(found, [c for c in cases if c.query_id not in found.rankings])


def _key(case: BeirCase, item: ItemRun) -> DatasetKey:
    return (case.folder, case.split, item.system_name)


def dataset_run(case: BeirCase, item: ItemRun) -> DatasetRun:
    """The dataset's run for this item's system: built by the first item that asks."""
    state = item.session_state(STATE, BeirState)
    key = _key(case, item)
    found = state.runs.get(key)
    if found is None:
        try:
            found = _build(case, item)
        except RagbenchError as exc:
            found = exc  # every item of the dataset reports the same problem
        state.runs[key] = found
    if isinstance(found, RagbenchError):
        raise found
    return found


def dataset_retriever(case: BeirCase, item: ItemRun) -> Any:
    """The retriever indexed on the case's dataset (for other kinds, e.g. robustness)."""
    return dataset_run(case, item).retriever


def _build(case: BeirCase, item: ItemRun) -> DatasetRun:
    build_retriever = _retriever_builder(case, item)  # may skip: check before reading
    errors: list[CaseError] = []
    documents = read_documents(Path(case.folder) / "corpus.jsonl", errors)
    kept, note = None, ""
    max_docs = item.config.max_docs
    if max_docs and len(documents) > max_docs:  # --ragbench-max-docs
        kept = frozenset(d.id for d in documents[:max_docs])
        batch = _batch(case, item)
        judged = sum(len(c.qrels) for c in batch)
        dropped = sum(1 for c in batch for d in c.qrels if d not in kept)
        note = (f"--ragbench-max-docs {max_docs}: indexed the first {max_docs} of "
                f"{len(documents)} documents; {dropped} of {judged} judgments name other "
                "documents and were dropped")
        documents = documents[:max_docs]
    started = time.perf_counter()
    retriever = build_retriever(documents)
    indexed = time.perf_counter()
    describe = getattr(retriever, "describe", None)
    description = str(describe()) if callable(describe) else repr(retriever)
    if note:
        description += f" ({note})"
    dataset = DatasetRun(retriever, description, len(documents), {}, {}, 0.0, 0.0, errors,
                         kept=kept, max_docs_note=note)
    _extend(dataset, _batch(case, item))
    dataset.seconds_index = indexed - started
    return dataset


def _extend(dataset: DatasetRun, batch: list[BeirCase]) -> None:
    """Retrieve ``batch``'s queries in one go; score them on an evaluator of their qrels."""
    if not batch:
        return
    started = time.perf_counter()
    dataset.rankings.update(_retrieve(dataset.retriever, batch))
    dataset.seconds_retrieve += time.perf_counter() - started
    kept = dataset.kept
    qrels = {c.query_id: {d: g for d, g in c.qrels.items() if kept is None or d in kept}
             for c in batch}
    evaluator = IREvaluator({q: r for q, r in qrels.items() if r}, ITEM_MEASURES)
    dataset.evaluators.update(dict.fromkeys(qrels, evaluator))


def restricted(case: BeirCase, dataset: DatasetRun) -> dict[str, int]:
    """The query's judgments of the documents that were indexed (all without max-docs)."""
    if dataset.kept is None:
        return dict(case.qrels)
    return {d: g for d, g in case.qrels.items() if d in dataset.kept}


def read_documents(path: Path, errors: list[CaseError]) -> list[Any]:
    """The corpus as :class:`~pytest_ragbench.systems.protocols.Document` objects."""
    corpus = read_corpus(path, errors)  # an unreadable file raises CaseError
    return [Document(doc.id, doc.text, {**doc.metadata, "title": doc.title})
            for doc in corpus.values()]


def _retriever_builder(case: BeirCase, item: ItemRun) -> Callable[[list[Any]], Any]:
    """How this item's system gets a retriever indexed on the dataset's documents."""
    if item.system_name is None:
        factory = item.fixture("ragbench_beir_retriever_factory")
        return lambda documents: factory(case.dataset, documents)
    system = item.system()
    for_corpus = getattr(getattr(system, "retriever", None), "for_corpus", None)
    if not callable(for_corpus):
        pytest.skip(f"system {item.system_name!r} has no retriever that can index a BEIR "
                    "corpus (it needs .retriever.for_corpus(documents))")
    return for_corpus


def _batch(case: BeirCase, item: ItemRun) -> list[BeirCase]:
    """The cases planned for the dataset and system (:func:`plan_ahead`), this one first."""
    planned = item.session_state(STATE, BeirState).planned.get(_key(case, item), {})
    batch = {case.query_id: case}
    for query_id, other in planned.items():
        batch.setdefault(query_id, other)
    return list(batch.values())


def _retrieve(retriever: Any, cases: list[BeirCase]) -> dict[str, list[tuple[str, float]]]:
    """Rankings ``{query id: [(doc id, score), ...]}``, all queries in one batch if possible."""
    texts = [c.query for c in cases]
    many = getattr(retriever, "retrieve_many", None)
    if callable(many):
        results = many(texts, top_k=TOP_K)
    else:
        results = [retriever.retrieve(text, top_k=TOP_K) for text in texts]
    rankings: dict[str, list[tuple[str, float]]] = {}
    for case, contexts in zip(cases, results, strict=True):
        scores: dict[str, float] = {}
        for found in contexts:
            doc = str(found.id)
            if doc != case.query_id:  # beir's ignore_identical_ids
                scores[doc] = max(float(found.score), scores.get(doc, float("-inf")))
        rankings[case.query_id] = list(scores.items())
    return rankings


def _expected(qrels: dict[str, int]) -> str:
    relevant = sorted(((g, d) for d, g in qrels.items() if g > 0), key=lambda x: (-x[0], x[1]))
    if not relevant:
        return "(no relevant document judged)"
    shown = [f"{doc} (grade {grade})" for grade, doc in relevant[:SHOWN]]
    more = len(relevant) - SHOWN
    return "\n".join(shown + ([f"... and {more} more"] if more > 0 else []))


def _got(ranking: list[tuple[str, float]], qrels: dict[str, int]) -> str:
    if not ranking:
        return "(nothing retrieved)"
    lines = []
    for rank, (doc, score) in enumerate(ranking[:SHOWN], start=1):
        grade = qrels.get(doc)
        judged = "not judged" if grade is None else f"grade {grade}"
        lines.append(f"{rank}. {doc} (score {score:.4f}, {judged})")
    return "\n".join(lines)


def _summary(metrics: dict[str, float]) -> str | None:
    if metrics.get("R@100") == 0.0:
        return "no relevant document in the top 100"
    if metrics.get("nDCG@10") == 0.0:
        return "no relevant document in the top 10"
    return None
