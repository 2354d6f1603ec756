"""``beir[<dataset>/<query-id>]``: one judged query of a BEIR folder, scored like trec_eval.

Per dataset and session (and system), once: the corpus is read (with
``--ragbench-max-docs N`` its first N documents, and only the judgments of those count),
a retriever is built and indexed on it (``ragbench_beir_retriever_factory``, whose default
persists its index in the cache; with --ragbench-systems the named system's
``retriever.for_corpus``), the queries of
every selected item of the dataset are retrieved in one batch (top 100), and one
pytrec_eval evaluator is built on their qrels. Each item then scores its own ranking:
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
    evaluator: Any  # IREvaluator over the qrels of the batch
    seconds_index: float
    seconds_retrieve: float
    corpus_errors: list[CaseError] = field(default_factory=list)
    warned: bool = False
    kept: frozenset[str] | None = None  # with --ragbench-max-docs: the ids indexed
    max_docs_note: str = ""


@dataclass
class BeirState:
    """Datasets already run in this session, keyed by (folder, split, system)."""

    runs: dict[tuple[str, str, str | None], DatasetRun | RagbenchError] = field(
        default_factory=dict)


STATE = pytest.StashKey[BeirState]()


def run(case: BeirCase, item: ItemRun) -> Outcome:
    """Score the query's ranking from the dataset's batch against its judgments."""
    dataset = dataset_run(case, item)
    qrels = restricted(case, dataset)
    ranking = dataset.rankings.get(case.query_id)
    if ranking is None:  # not part of the batch (asked for directly): retrieve it alone
        found = _retrieve(dataset.retriever, [case])
        ranking = found[case.query_id]
    metrics: dict[str, float] = {}
    unscored: dict[str, str] = {}
    if not qrels or max(qrels.values()) < 1:
        reason = "no relevant document is judged for this query (every grade is below 1)"
        if dataset.kept is not None and qrels != case.qrels:
            reason = f"no relevant document among the documents indexed ({dataset.max_docs_note})"
        unscored = dict.fromkeys(ITEM_MEASURES, reason)
    else:
        for name, value in dataset.evaluator.score_query(case.query_id, dict(ranking)).items():
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


def dataset_run(case: BeirCase, item: ItemRun) -> DatasetRun:
    """The dataset's run for this item's system: built by the first item that asks."""
    state = item.session_state(STATE, BeirState)
    key = (case.folder, case.split, item.system_name)
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
    batch = _batch(case, item)
    rankings = _retrieve(retriever, batch)
    done = time.perf_counter()
    qrels = {c.query_id: {d: g for d, g in c.qrels.items() if kept is None or d in kept}
             for c in batch}
    evaluator = IREvaluator({q: r for q, r in qrels.items() if r}, ITEM_MEASURES)
    describe = getattr(retriever, "describe", None)
    description = str(describe()) if callable(describe) else repr(retriever)
    if note:
        description += f" ({note})"
    return DatasetRun(retriever, description, len(documents), rankings, evaluator,
                      indexed - started, done - indexed, errors, kept=kept, max_docs_note=note)


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
    """The cases of every selected item of the same dataset and system (this one first)."""
    batch = {case.query_id: case}
    if item.request is not None:
        for queued in item.request.session.items:
            other = getattr(queued, "case", None)
            if (isinstance(other, BeirCase) and other.folder == case.folder
                    and other.split == case.split
                    and getattr(queued, "system_name", None) == item.system_name):
                batch.setdefault(other.query_id, other)
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
