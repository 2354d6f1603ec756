"""Hybrid cases: an exact SQL question joined to what the documents say about its answer.

Each SQL case of :func:`~pytest_ragbench.datasets.generate.sql.generate_sql` in the
categories :data:`SQL_CATEGORIES` (executed on the database opened read-only) whose
one-row result names something (a text value) that one or more documents name too
becomes a ``hybrid`` case:

- ``question``: the SQL question, then "What do the documents say about <name>?" (about
  "them" when the question does not name it: the name is its answer);
- ``expected_sql`` and ``ground_truth_data``: the SQL case's, run a second time here and
  compared as ``ragbench verify hybrid`` compares them;
- ``expected_sources``: the documents that name it, most mentions first (at most
  :data:`MAX_SOURCES`);
- ``expected_facts``: the result's values, which a correct answer states;
- ``ground_truth_answer``: the SQL answer, then the first sentence of the first source
  that names it (taken from the document, not written by a model: review it).

No model is needed: what is exact stays exact, and the context is found, not invented.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pytest_ragbench.cases.build import generated_id
from pytest_ragbench.datasets.generate.common import Accounting, Generated, GenerateError, draft
from pytest_ragbench.systems.protocols import Document

MAX_SOURCES = 3
WHOLE_DOCUMENT = 10**9  # characters: read the documents unsplit (a cut splits sentences)
# The SQL categories whose answer is one row that names something (a lookup by name, the
# highest or lowest one); about half of them are named by a document of the bundled corpus.
SQL_CATEGORIES = ("join", "ranking")
SQL_PER_CASE = 3  # SQL cases asked for per hybrid case
# a sentence ends at . ! or ? before a capital, but not after an initial (P.J.) or a title
_SENTENCE = re.compile(r"(?<=[.!?])(?<![\s.][A-Z]\.)(?<!Jr\.)(?<!Sr\.)(?<!St\.)(?<!vs\.)"
                       r"\s+(?=[A-Z0-9\"'(])")
_PARAGRAPH = re.compile(r"\n\s*\n")
_MARKUP = re.compile(r"\*\*|__|`")
_HEADING = re.compile(r"\*\*[^*]+\*\*:?")
_BULLET = re.compile(r"([-*+]|\d+[.)])\s+")
MIN_SENTENCE = 40  # shorter: a heading or a caption, no context


def named_values(data: Any) -> list[str]:
    """The text values of a one-row result that name something (a letter, 4+ characters)."""
    if not isinstance(data, dict):
        return []
    return [str(v) for v in data.values()
            if isinstance(v, str) and len(v.strip()) >= 4 and re.search(r"[A-Za-z]", v)]


def documents_by_source(passages: Sequence[Document]) -> dict[str, str]:
    """Each document's passages joined again, by its ``source`` (its file name)."""
    texts: dict[str, list[str]] = {}
    for passage in passages:
        texts.setdefault(str(passage.metadata.get("source", passage.id)), []).append(
            passage.text)
    return {source: "\n".join(parts) for source, parts in texts.items()}


def sentences(text: str) -> list[str]:
    """The prose sentences of a document: paragraphs' lines joined, headings and markup out."""
    found: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        lines = [line.strip() for line in paragraph.splitlines() if line.strip()]
        if not lines or lines[0].startswith(("#", "|", "<")):
            continue
        chunks: list[list[str]] = []
        for line in lines:  # a list item is a sentence of its own; a bold line a heading
            if _HEADING.fullmatch(line):
                chunks.append([])
                continue
            bullet = _BULLET.match(line)
            if bullet or not chunks:
                chunks.append([])
            chunks[-1].append(line[bullet.end():] if bullet else line)
        for chunk in chunks:
            prose = _MARKUP.sub("", " ".join(chunk))
            found.extend(s for s in _SENTENCE.split(prose) if len(s) >= MIN_SENTENCE)
    return found


def naming(name: str, documents: dict[str, str]) -> list[tuple[str, str]]:
    """``[(source, first sentence naming it)]``, most mentions first, then by source."""
    pattern = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
    found = []
    for source, text in documents.items():
        said = [s for s in sentences(text) if pattern.search(s)]
        if said:
            found.append((-len(pattern.findall(text)), source, said[0]))
    return [(source, sentence) for _, source, sentence in sorted(found)][:MAX_SOURCES]


def _round_robin(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases one category at a time in turn, so the kept ones spread over categories."""
    by_category: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        by_category.setdefault(case["category"], []).append(case)
    queues = list(by_category.values())
    return [queue[i] for i in range(max(map(len, queues), default=0))
            for queue in queues if i < len(queue)]


def generate_hybrid(url: str, passages: Sequence[Document], n: int, seed: int) -> Generated:
    """``n`` hybrid cases from the database at ``url`` and the documents' ``passages``."""
    # lazy: each source's generator is loaded only when that source is asked for
    from pytest_ragbench.datasets.generate.sql import generate_sql, recheck
    from pytest_ragbench.sql.engine import open_read_only

    if not passages:
        raise GenerateError("no documents to join the SQL answers to")
    documents = documents_by_source(passages)
    sql = generate_sql(url, SQL_PER_CASE * n, seed, categories=SQL_CATEGORIES)
    accounting = Accounting()
    cases: list[dict[str, Any]] = []
    answered: set[str] = set()  # SQL answers kept: a paraphrase of a kept question adds none
    for case in _round_robin(sql.cases):
        kind = f"hybrid/{case['category']}"
        if len(cases) >= n:
            break
        if not isinstance(case["ground_truth_data"], dict):
            accounting.reject(kind, "more than one row")
            continue
        answer = json.dumps(case["ground_truth_data"], sort_keys=True, default=str)
        if answer in answered:
            accounting.reject(kind, "the same answer as a kept case")
            continue
        names = named_values(case["ground_truth_data"])
        if not names:
            accounting.reject(kind, "the result names nothing (no text value)")
            continue
        sources = next(((name, found) for name in names if (found := naming(name, documents))),
                       None)
        if sources is None:
            accounting.reject(kind, "no document names the result")
            continue
        name, found = sources
        # the question must not give its answer away: a name only when it asks with it
        about = name if name.lower() in case["question"].lower() else "them"
        values = [str(v) for v in case["ground_truth_data"].values() if v is not None]
        hybrid = {"kind": "hybrid", "category": case["category"],
                  "question": f"{case['question'].rstrip()} What do the documents say "
                              f"about {about}?",
                  "expected_sql": case["expected_sql"],
                  "ground_truth_data": case["ground_truth_data"],
                  "ground_truth_answer": f"{case['ground_truth_answer']}. {found[0][1]}",
                  "expected_sources": [source for source, _ in found],
                  "expected_facts": values}
        accounting.keep(kind)
        answered.add(answer)
        provenance = {**case["provenance"], "generator": "hybrid",
                      "documents": [source for source, _ in found], "named": name}
        cases.append(draft({"id": generated_id(hybrid["question"], hybrid), **hybrid},
                           provenance))
    engine = open_read_only(url)
    try:
        for case in cases:  # a second, independent run of each kept query
            accounting.exact += 1
            accounting.verified += recheck(engine, case)
    finally:
        engine.dispose()
    if len(cases) < n:
        accounting.reject("hybrid", f"quota unmet ({len(cases)}/{n})")
    return Generated(cases, accounting.finish())
