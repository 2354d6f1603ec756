"""Read a BEIR folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.

Qrels lines are ``query-id<TAB>corpus-id<TAB>score`` (or TREC's four columns
``qid iter docno rel``); scores are integer grades, kept as they are (graded, possibly 0).
The header line is optional and *detected*: the first non-blank line is a header only when
its score column is a column name (``score``, ``relevance``, ...). beir 2.2.0's
``GenericDataLoader`` always skips line 1, which drops the first judgment of a file without
a header (the msmarco subset in the oracles is one); this reader never drops a judgment.

A malformed line becomes a :class:`CaseError` naming file, line and field; it is counted
and skipped and the rest of the file is read. A missing file raises ``CaseError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import CaseError

GRADE = re.compile(r"[+-]?[0-9]+")
HEADER_SCORE_NAMES = frozenset(
    {"score", "relevance", "rel", "label", "grade", "judgment", "judgement"})


@dataclass(frozen=True)
class BeirDocument:
    """One corpus entry."""

    id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class BeirFolder:
    """What was read from a BEIR folder, plus one error per line that could not be read."""

    path: Path
    split: str
    corpus: dict[str, BeirDocument] = field(default_factory=dict)
    queries: dict[str, str] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    qrels_header: bool = False
    errors: list[CaseError] = field(default_factory=list)

    @property
    def judgments(self) -> int:
        """Number of (query, document) judgments read."""
        return sum(len(docs) for docs in self.qrels.values())


def is_beir_folder(path: str | Path) -> bool:
    """True for a folder holding ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/*.tsv``."""
    path = Path(path)
    return ((path / "corpus.jsonl").is_file() and (path / "queries.jsonl").is_file()
            and any((path / "qrels").glob("*.tsv")))


def qrels_splits(folder: str | Path) -> list[str]:
    """The splits that have a qrels file, sorted."""
    return sorted(p.stem for p in (Path(folder) / "qrels").glob("*.tsv"))


def read_beir(folder: str | Path, split: str | None = "test") -> BeirFolder:
    """Read corpus, queries and the qrels of ``split`` (None: ``test``, else the only one)."""
    folder = Path(folder)
    if split is None:
        splits = qrels_splits(folder)
        split = "test" if "test" in splits or len(splits) != 1 else splits[0]
    result = BeirFolder(folder, split)
    result.corpus = read_corpus(folder / "corpus.jsonl", result.errors)
    result.queries = read_queries(folder / "queries.jsonl", result.errors)
    result.qrels, result.qrels_header = read_qrels(folder / "qrels" / f"{split}.tsv",
                                                   result.errors)
    return result


def read_corpus(path: Path, errors: list[CaseError]) -> dict[str, BeirDocument]:
    """``{_id, title?, text, metadata?}`` per line; errors are appended to ``errors``."""
    corpus: dict[str, BeirDocument] = {}
    for number, data in _json_lines(path, errors):
        try:
            doc_id = _identifier(data, "_id")
            text = data.get("text")
            if not isinstance(text, str):
                raise _FieldError("text", "must be a string")
            title = data.get("title") or ""
            if not isinstance(title, str):
                raise _FieldError("title", "must be a string")
            metadata = data.get("metadata") or {}
            if not isinstance(metadata, dict):
                raise _FieldError("metadata", "must be an object")
            if doc_id in corpus:
                raise _FieldError("_id", f"duplicate document id {doc_id!r} (first one kept)")
        except _FieldError as exc:
            errors.append(CaseError(exc.message, file=path, line=number, field=exc.field))
            continue
        corpus[doc_id] = BeirDocument(doc_id, title, text, metadata)
    return corpus


_ID_FIELD = re.compile(rb'"_id"\s*:\s*(?:"((?:[^"\\]|\\.)*)"|(-?[0-9]+)\s*[,}])')


def corpus_ids(path: Path) -> set[str]:
    """The document ids of ``corpus.jsonl``, read fast (no text is decoded or kept).

    For checking qrels against the corpus at collection; a line whose id cannot be read
    here is skipped (reading the corpus for the run reports it).
    """
    ids: set[str] = set()
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise CaseError(f"cannot read file: {exc.strerror}", file=path) from None
    with handle:
        for raw in handle:
            match = _ID_FIELD.search(raw)
            if match is None:
                continue
            if match.group(1) is not None:
                text = match.group(1)
                try:
                    ids.add(json.loads(b'"' + text + b'"') if b"\\" in text
                            else text.decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    continue
            else:
                ids.add(match.group(2).decode("ascii"))
    return ids


def read_queries(path: Path, errors: list[CaseError]) -> dict[str, str]:
    """``{_id, text}`` per line; errors are appended to ``errors``."""
    queries: dict[str, str] = {}
    for number, data in _json_lines(path, errors):
        try:
            query_id = _identifier(data, "_id")
            text = data.get("text")
            if not isinstance(text, str) or not text.strip():
                raise _FieldError("text", "must be non-empty text")
            if query_id in queries:
                raise _FieldError("_id", f"duplicate query id {query_id!r} (first one kept)")
        except _FieldError as exc:
            errors.append(CaseError(exc.message, file=path, line=number, field=exc.field))
            continue
        queries[query_id] = text
    return queries


@dataclass
class QrelsLines:
    """Where each query's judgments are: its first line, and the errors on its lines."""

    first_line: dict[str, int] = field(default_factory=dict)
    errors: dict[str, list[CaseError]] = field(default_factory=dict)
    judgment_line: dict[tuple[str, str], int] = field(default_factory=dict)


def read_qrels(path: Path, errors: list[CaseError], lines: QrelsLines | None = None
               ) -> tuple[dict[str, dict[str, int]], bool]:
    """Read a qrels TSV; returns ``({qid: {doc_id: grade}}, has_header)``.

    ``lines``, when given, is filled with each query's first line and the errors of the
    lines whose query id could be read (so a caller can fail that query alone).
    """
    qrels: dict[str, dict[str, int]] = {}
    header = False
    first = True
    for number, line in _text_lines(path, errors):
        if not line.strip():
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        fields = [f.strip() for f in fields]
        if first:
            first = False
            if len(fields) >= 3 and fields[-1].lower() in HEADER_SCORE_NAMES:
                header = True
                continue
        if lines is not None and fields and fields[0]:
            lines.first_line.setdefault(fields[0], number)
        try:
            query_id, doc_id, grade = _judgment(fields)
            if doc_id in qrels.get(query_id, {}):
                raise _FieldError("corpus-id", f"duplicate judgment for query {query_id!r} "
                                               f"and document {doc_id!r} (first one kept)")
        except _FieldError as exc:
            error = CaseError(exc.message, file=path, line=number, field=exc.field)
            errors.append(error)
            if lines is not None and fields and fields[0]:
                lines.errors.setdefault(fields[0], []).append(error)
            continue
        qrels.setdefault(query_id, {})[doc_id] = grade
        if lines is not None:
            lines.judgment_line[(query_id, doc_id)] = number
    return qrels, header


QRELS_COLUMNS = ("query-id", "corpus-id", "score")


def _judgment(fields: list[str]) -> tuple[str, str, int]:
    if len(fields) == 3:
        query_id, doc_id, score = fields
    elif len(fields) == 4:  # TREC: qid iter docno rel
        query_id, _, doc_id, score = fields
    elif len(fields) < 3:  # name the first column that is missing
        missing = QRELS_COLUMNS[len(fields)]
        raise _FieldError(missing, f"missing column: expected 3 columns (query-id, corpus-id, "
                                   f"score), got {len(fields)}")
    else:
        raise _FieldError("columns", f"expected 3 columns (query-id, corpus-id, score), "
                                     f"got {len(fields)}")
    if not query_id:
        raise _FieldError("query-id", "empty")
    if not doc_id:
        raise _FieldError("corpus-id", "empty")
    if not GRADE.fullmatch(score):
        raise _FieldError("score", f"expected an integer grade, got {score[:40]!r}")
    return query_id, doc_id, int(score)


class _FieldError(Exception):
    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message


def _identifier(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
        raise _FieldError(name, "missing or not a string/integer id")
    return str(value)


def _text_lines(path: Path, errors: list[CaseError]) -> Iterator[tuple[int, str]]:
    """Decoded lines with their numbers; a line that is not UTF-8 becomes an error."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise CaseError(f"cannot read file: {exc.strerror}", file=path) from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                errors.append(CaseError(f"not UTF-8 ({exc.reason} at byte {exc.start})",
                                        file=path, line=number))
                continue
            yield number, text.rstrip("\r\n")


def _json_lines(path: Path, errors: list[CaseError]) -> Iterator[tuple[int, dict[str, Any]]]:
    """JSON objects of a JSONL file with their line numbers; bad lines become errors."""
    for number, text in _text_lines(path, errors):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            errors.append(CaseError(f"invalid JSON: {reason}", file=path, line=number))
            continue
        if not isinstance(data, dict):
            errors.append(CaseError(f"expected a JSON object, got {type(data).__name__}",
                                    file=path, line=number))
            continue
        yield number, data
