"""IR metrics over ranked lists with graded qrels, computed by pytrec_eval (trec_eval's C code).

This module is glue only: metric names, input checks and trec_eval's averaging rules.
pytrec_eval already orders each query like trec_eval (score descending, ties broken by
document id in descending strcmp order, no rank column); the oracle tests prove it on
trec_eval's own test files. Averages follow trec_eval: ``num_*`` measures are summed,
the rest averaged over the queries that have results, or over every judged query with
``complete=True`` (``trec_eval -c``). pytrec_eval is imported on first use.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import CaseError
from pytest_ragbench.metrics.registry import REGISTRY, Measure, Score, Unscored

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]


class IREvaluator:
    """trec_eval measures for one set of qrels; build once, then score whole runs or one query.

    ``measures`` are names as users write them (``nDCG@10``, ``P_5``, ``map``); results use
    the same names as keys. ``relevance_level`` is trec_eval's ``-l``: the lowest grade
    that counts as relevant for binary measures (nDCG always uses the grade as gain).
    """

    def __init__(self, qrels: Qrels, measures: Iterable[str], relevance_level: int = 1) -> None:
        import pytrec_eval

        if isinstance(relevance_level, bool) or not isinstance(relevance_level, int) \
                or relevance_level < 1:
            raise ValueError(f"relevance_level must be an integer >= 1, got {relevance_level!r}")
        self.measures: dict[str, Measure] = {}
        for name in measures:
            measure = REGISTRY.parse(name)
            if measure.trec_request is None:
                raise ValueError(f"{name!r} is not an IR measure computed from qrels and a run")
            self.measures.setdefault(name, measure)
        if not self.measures:
            raise ValueError("no measures requested")
        self.relevance_level = relevance_level
        # trec_eval cannot hold a query without judgments, and pytrec_eval drops them too.
        self.qrels: dict[str, dict[str, int]] = {
            str(qid): _clean_grades(qid, rels) for qid, rels in qrels.items() if rels}
        for qid, rels in self.qrels.items():
            # pytrec_eval miscounts (num_ret = 0) and can hang or crash on a query whose
            # grades are all negative. Such a query has no relevant document, so every
            # measure is the same with its grades raised to 0.
            if max(rels.values()) < 0:
                self.qrels[qid] = dict.fromkeys(rels, 0)
        requests = {m.trec_request for m in self.measures.values() if m.trec_request}
        self._evaluator = pytrec_eval.RelevanceEvaluator(
            self.qrels, requests, relevance_level=relevance_level)

    def score_query(self, qid: str, ranking: Mapping[str, float]) -> dict[str, Score]:
        """Score one query's ranking ``{doc_id: score}`` (cheap: the qrels are ready)."""
        qid = str(qid)
        if qid not in self.qrels:
            reason = f"query {qid!r} has no relevance judgments"
            return dict.fromkeys(self.measures, Unscored(reason))
        raw = self._run_pytrec({qid: ranking}) if ranking else self._without_results([qid])
        return self._named(raw[qid])

    def evaluate(self, run: Run, per_query: bool = False, complete: bool = False
                 ) -> dict[str, Any]:
        """Evaluate a run ``{qid: {doc_id: score}}`` like trec_eval (``-q`` / ``-c``).

        Returns ``{measure: value}``, or with ``per_query=True`` ``{qid: {measure: value}}``.
        Queries without judgments are ignored; queries without results are left out of the
        mean unless ``complete`` (then they count with an empty ranking, scoring zero).
        """
        selected: dict[str, Mapping[str, float]] = {}
        for qid, ranking in run.items():
            key = qid if type(qid) is str else str(qid)
            if ranking and key in self.qrels:
                selected[key] = ranking
        raw = self._run_pytrec(selected) if selected else {}
        if complete:
            missing = [qid for qid in self.qrels if qid not in raw]
            if missing:
                raw.update(self._without_results(missing))
        if per_query:
            return {qid: self._named(values) for qid, values in raw.items()}
        return self._aggregate(raw)

    def _without_results(self, qids: list[str]) -> dict[str, dict[str, float]]:
        """Scores of queries that retrieved nothing.

        pytrec_eval can crash on an empty ranking, so each query gets one document that
        is not judged for it, which scores zero everywhere; ``num_ret`` is then set to 0.
        """
        run = {}
        for qid in qids:
            dummy = "ragbench:no-results"
            while dummy in self.qrels[qid]:
                dummy += "_"
            run[qid] = {dummy: 0.0}
        raw = self._evaluator.evaluate(run)
        for values in raw.values():
            if "num_ret" in values:
                values["num_ret"] = 0.0
        return raw

    def _run_pytrec(self, run: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
        for qid, ranking in run.items():
            _check_scores(qid, ranking)
        try:
            return self._evaluator.evaluate(run)
        except TypeError:
            # numpy scalars, non-str ids or non-dict mappings: convert, then retry once.
            converted = {str(q): {str(d): float(s) for d, s in r.items()} for q, r in run.items()}
            return self._evaluator.evaluate(converted)

    def _named(self, values: Mapping[str, float]) -> dict[str, Score]:
        return {name: m.check(values[m.trec_key or ""]) for name, m in self.measures.items()}

    def _aggregate(self, raw: Mapping[str, Mapping[str, float]]) -> dict[str, Score]:
        if not raw:
            reason = "no query of the run has relevance judgments and results"
            return dict.fromkeys(self.measures, Unscored(reason))
        result: dict[str, Score] = {}
        for name, m in self.measures.items():
            key = m.trec_key or ""
            values = [q[key] for q in raw.values()]
            total = math.fsum(values)
            result[name] = m.check(total if key.startswith("num_") else total / len(values))
        return result


def evaluate_run(qrels: Qrels, run: Run, measures: Iterable[str], per_query: bool = False,
                 complete: bool = False, relevance_level: int = 1) -> dict[str, Any]:
    """Evaluate a run against qrels with trec_eval semantics (see :class:`IREvaluator`).

    ``evaluate_run(qrels, run, ["nDCG@10", "P@5", "map"])`` → ``{"nDCG@10": 0.41, ...}``;
    ``per_query=True`` → ``{qid: {measure: value}}``; ``complete`` is ``trec_eval -c`` and
    ``relevance_level`` is ``trec_eval -l``.
    """
    evaluator = IREvaluator(qrels, measures, relevance_level=relevance_level)
    return evaluator.evaluate(run, per_query=per_query, complete=complete)


def graded_ndcg(grades: Mapping[str, int], ranked: Sequence[str], k: int) -> Score:
    """nDCG@k of a ranked list of ids against graded judgments (the grade is the gain).

    An id judged 0, or not judged, adds nothing; an id repeated in ``ranked`` counts at its
    first rank. Unscored when no id is graded above 0 (there is nothing to find).
    """
    if not any(grade > 0 for grade in grades.values()):
        return Unscored("no entry of the case's relevance is graded above 0")
    unique = list(dict.fromkeys(str(r) for r in ranked))[:k]
    run = {name: float(len(unique) - rank) for rank, name in enumerate(unique)}
    measure = f"nDCG@{k}"
    evaluator = IREvaluator({"q": {str(key): grade for key, grade in grades.items()}}, [measure])
    return evaluator.score_query("q", run)[measure]


def trec_order(ranking: Mapping[str, float]) -> list[tuple[str, float]]:
    """Documents in trec_eval's order: score descending, ties by document id descending."""
    return sorted(ranking.items(), key=lambda item: (item[1], item[0]), reverse=True)


def _check_scores(qid: str, ranking: Mapping[str, float]) -> None:
    """Raise ``ValueError`` naming the query and document of a NaN, infinite or non-number score."""
    try:
        total = sum(ranking.values())
        if math.isfinite(total):
            return
    except TypeError:
        pass
    for doc, score in ranking.items():
        bad = not isinstance(score, numbers.Real)
        if not bad:
            try:
                bad = not math.isfinite(score)
            except (TypeError, ValueError):
                bad = True
        if bad:
            raise ValueError(f"run: query {qid!r}, document {doc!r}: score {score!r} "
                             "is not a finite number")


def _clean_grades(qid: object, rels: Mapping[str, int]) -> dict[str, int]:
    grades: dict[str, int] = {}
    for doc, grade in rels.items():
        if isinstance(grade, bool) or not isinstance(grade, int | float) \
                or not float(grade).is_integer():
            raise ValueError(f"qrels: query {qid!r}, document {doc!r}: relevance {grade!r} "
                             "is not an integer")
        grades[str(doc)] = int(grade)
    return grades


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read a TREC qrels file (``qid iter docno rel``); a bad line raises CaseError."""
    qrels: dict[str, dict[str, int]] = {}
    for line_no, fields in _lines(path):
        if len(fields) != 4:
            raise CaseError(f"expected 4 columns 'qid iter docno rel', got {len(fields)}",
                            file=path, line=line_no)
        qid, _, doc, rel = fields
        try:
            grade = int(rel)
        except ValueError:
            raise CaseError(f"relevance {rel!r} is not an integer", file=path, line=line_no,
                            field="rel") from None
        if doc in qrels.setdefault(qid, {}):
            raise CaseError(f"document {doc!r} judged twice for query {qid!r}", file=path,
                            line=line_no, field="docno")
        qrels[qid][doc] = grade
    return qrels


def read_run(path: str | Path) -> dict[str, dict[str, float]]:
    """Read a TREC run (``qid Q0 docno rank score tag``); the rank column is ignored."""
    run: dict[str, dict[str, float]] = {}
    for line_no, fields in _lines(path):
        if len(fields) != 6:
            raise CaseError(f"expected 6 columns 'qid Q0 docno rank score tag', "
                            f"got {len(fields)}", file=path, line=line_no)
        qid, _, doc, _, text, _ = fields
        try:
            score = float(text)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise CaseError(f"score {text!r} is not a finite number", file=path, line=line_no,
                            field="score")
        if doc in run.setdefault(qid, {}):
            raise CaseError(f"document {doc!r} retrieved twice for query {qid!r}", file=path,
                            line=line_no, field="docno")
        run[qid][doc] = score
    return run


def write_run(path: str | Path, run: Run, tag: str = "ragbench") -> None:
    """Write a TREC run file with ranks in trec_eval's order."""
    with open(path, "w", encoding="utf-8") as out:
        for qid, ranking in run.items():
            for rank, (doc, score) in enumerate(trec_order(ranking), start=1):
                out.write(f"{qid} Q0 {doc} {rank} {float(score)!r} {tag}\n")


def _lines(path: str | Path) -> Iterable[tuple[int, list[str]]]:
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            fields = line.split()
            if fields:
                yield line_no, fields
