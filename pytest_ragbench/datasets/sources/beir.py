r"""A BEIR folder → ``clean_text`` samples, one per query with relevant judgments.

BEIR has relevance judgments but no answer text, so:

- ``contexts`` are the relevant documents (grade ≥ ``min_grade``), best grade first then
  by id, at most ``max_contexts``, each as ``title\ntext``;
- ``ground_truth`` is, with ``ground_truth = "top_passage"`` (default), the text of the
  best-graded document (ties: smallest id) — a reference passage, not a written answer;
  with ``"titles"``, the titles of all documents with the best grade (for entity search
  such as DBpedia-Entity, where the answer is a list of entities).
  ``metadata.ground_truth_source`` says which.

Queries without a relevant judgment are skipped and counted. Difficulty: ≥10 relevant
documents easy, ≤2 hard, else medium (fewer relevant documents are harder to find).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.sample import NormalizedSample, make_id
from pytest_ragbench.datasets.sources.base import AdaptResult, build_sample, by_count
from pytest_ragbench.datasets.sources.text import text_question_type
from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.beir import BeirDocument, BeirFolder, read_beir

NAME = "beir"
OPTIONS = {
    "split": "qrels split to read (default: test, or the only one)",
    "max_contexts": "most relevant documents kept as contexts (default 5)",
    "min_grade": "smallest grade that counts as relevant (default 1)",
    "ground_truth": "top_passage (default) or titles",
    "question_type": "question type of every query (default: keyword rules)",
    "doc_type": "doc_type of every sample (default clean_text)",
    "source_dataset": "name written to source_dataset (default beir-<folder name>)",
}


def adapt_source(path: Path, options: Mapping[str, Any]) -> AdaptResult:
    """Every judged query of the folder."""
    data = read_beir(path, options.get("split"))
    result = AdaptResult(errors=list(data.errors))
    for query_id in sorted(data.qrels):
        try:
            sample = adapt_query(data, query_id, options)
        except CaseError as exc:
            result.errors.append(exc)
            continue
        if isinstance(sample, str):
            result.skipped[sample] += 1
        else:
            result.samples.append(sample)
    return result


def adapt_query(data: BeirFolder, query_id: str, options: Mapping[str, Any]
                ) -> NormalizedSample | str:
    """The sample of one query, or the reason it was skipped."""
    question = data.queries.get(query_id)
    if question is None:
        return "judged query missing from queries.jsonl"
    min_grade = _int_option(options, "min_grade", 1)
    max_contexts = _int_option(options, "max_contexts", 5)
    judged = data.qrels.get(query_id, {})
    relevant = sorted(((grade, doc_id) for doc_id, grade in judged.items()
                       if grade >= min_grade and doc_id in data.corpus),
                      key=lambda item: (-item[0], item[1]))
    if not relevant:
        return "no relevant judged document in the corpus"
    documents = [data.corpus[doc_id] for _, doc_id in relevant]
    best = relevant[0][0]
    mode = options.get("ground_truth", "top_passage")
    if mode == "titles":
        titles = [d.title for (grade, _), d in zip(relevant, documents, strict=True)
                  if grade == best and d.title.strip()]
        ground_truth = "; ".join(titles)
    elif mode == "top_passage":
        ground_truth = _passage(documents[0])
    else:
        raise CaseError(f"unknown ground_truth option {mode!r} (top_passage or titles)",
                        file=data.path, field="ground_truth")
    if not ground_truth.strip():
        return "best document has no text"
    folder = data.path.name
    return build_sample(
        file=data.path / "queries.jsonl", line=None,
        id=make_id("beir", folder, query_id), question=question, ground_truth=ground_truth,
        contexts=tuple(_passage(d) for d in documents[:max_contexts]),
        doc_type=str(options.get("doc_type") or "clean_text"),
        question_type=text_question_type(question, options.get("question_type")),
        difficulty=by_count(len(relevant), easy_min=10, hard_max=2),
        source_dataset=str(options.get("source_dataset") or f"beir-{folder}"),
        metadata={"answerable": True, "query_id": query_id, "split": data.split,
                  "ground_truth_source": f"{mode} (BEIR has no answer text)",
                  "context_ids": [d.id for d in documents[:max_contexts]],
                  "relevant": {doc_id: grade for grade, doc_id in relevant},
                  "context_group": f"beir:{folder}:{query_id}",
                  "source_file": f"{folder}/queries.jsonl", "source_line": None})


def _passage(document: BeirDocument) -> str:
    title, text = document.title.strip(), document.text.strip()
    return f"{title}\n{text}" if title and text else (title or text)


def _int_option(options: Mapping[str, Any], name: str, default: int) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CaseError(f"expected a non-negative integer, got {value!r}", field=name)
    return value
