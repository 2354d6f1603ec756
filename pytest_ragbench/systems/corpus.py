"""Load documents for the default retriever: folders of .md/.txt, JSONL files, BEIR corpora.

Markdown and text files may start with YAML front matter (``---`` … ``---``), which
becomes the document's metadata; the file name becomes ``metadata["source"]`` and the
title comes from the front matter, else the first ``# heading``, else the file stem.
Those files are split into chunks of whole paragraphs up to a size cap; each chunk
keeps the metadata of its file. JSONL records (``corpus.jsonl`` of BEIR included)
are kept whole so that their ids match qrels.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import CaseError
from pytest_ragbench.systems.protocols import Document

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
DEFAULT_CHUNK_CHARS = 1000
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*\r?\n?", re.S | re.M)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class CorpusWarning(UserWarning):
    """A corpus file or record was skipped (the message names file, line and field)."""


def load_corpus(paths: Iterable[Path | str], *, chunk_chars: int = DEFAULT_CHUNK_CHARS,
                errors: list[CaseError] | None = None) -> list[Document]:
    """Load every document under ``paths`` (files or folders), in a stable order.

    Bad files and records are skipped; each problem is appended to ``errors`` when
    given, otherwise issued as a :class:`CorpusWarning`. Duplicate ids are an error
    for the later record.
    """
    problems: list[CaseError] = [] if errors is None else errors
    before = len(problems)
    documents: list[Document] = []
    seen: set[str] = set()
    for path in (Path(p) for p in paths):
        for doc in _load_path(path, chunk_chars, problems):
            if doc.id in seen:
                problems.append(CaseError(f"duplicate document id {doc.id!r}", file=path,
                                          field="id"))
                continue
            seen.add(doc.id)
            documents.append(doc)
    if errors is None:
        for problem in problems[before:]:
            warnings.warn(str(problem), CorpusWarning, stacklevel=2)
    return documents


def _load_path(path: Path, chunk_chars: int, problems: list[CaseError]) -> Iterator[Document]:
    if not path.exists():
        problems.append(CaseError("corpus path does not exist", file=path))
        return
    if path.is_file():
        yield from _load_file(path, path.parent, chunk_chars, problems)
        return
    if (path / "corpus.jsonl").is_file():  # a BEIR dataset folder
        yield from load_jsonl(path / "corpus.jsonl", problems)
        return
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        if any(part.startswith(".") for part in file.relative_to(path).parts):
            continue
        yield from _load_file(file, path, chunk_chars, problems)


def _load_file(file: Path, root: Path, chunk_chars: int,
               problems: list[CaseError]) -> Iterator[Document]:
    suffix = file.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        yield from load_text_file(file, root, chunk_chars, problems)
    elif suffix == ".jsonl":
        yield from load_jsonl(file, problems)


def load_text_file(file: Path, root: Path, chunk_chars: int = DEFAULT_CHUNK_CHARS,
                   problems: list[CaseError] | None = None) -> list[Document]:
    """Load one Markdown/text file as chunks; ids are ``<relative path>#<n>``."""
    import yaml

    problems = [] if problems is None else problems
    try:
        raw = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(CaseError(f"cannot read file: {exc}", file=file))
        return []
    metadata: dict[str, Any] = {}
    body, body_line = raw, 1
    match = _FRONT_MATTER.match(raw)
    if match:
        try:
            front = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 2 if mark is not None else 1
            problems.append(CaseError(f"invalid YAML front matter: {exc}", file=file, line=line,
                                      field="front matter"))
            return []
        if front is not None and not isinstance(front, dict):
            problems.append(CaseError("front matter must be a mapping", file=file, line=2,
                                      field="front matter"))
            return []
        metadata = {str(k): v for k, v in (front or {}).items()}
        body = raw[match.end():]
        body_line = raw[:match.end()].count("\n") + 1
    relative = file.relative_to(root).as_posix() if file.is_relative_to(root) else file.name
    heading = _HEADING.search(body)
    metadata.setdefault("title", heading.group(1) if heading else file.stem)
    metadata["source"] = file.name
    metadata.setdefault("path", relative)
    doc_id = str(metadata.pop("id", "") or relative)
    documents = []
    for n, (text, line) in enumerate(chunk_text(body, chunk_chars)):
        documents.append(Document(id=f"{doc_id}#{n}", text=text,
                                  metadata={**metadata, "chunk": n, "line": body_line + line}))
    return documents


def load_jsonl(file: Path, problems: list[CaseError] | None = None) -> list[Document]:
    """Load a JSONL corpus (BEIR ``{_id, title, text, metadata}`` or ``{id, text, ...}``)."""
    problems = [] if problems is None else problems
    documents = []
    try:
        # split on "\n" only: str.splitlines() would also break at U+2028 and friends,
        # which occur inside JSON strings of real corpora (MS MARCO)
        lines = file.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(CaseError(f"cannot read file: {exc}", file=file))
        return []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            documents.append(_record(json.loads(line), file))
        except json.JSONDecodeError as exc:
            problems.append(CaseError(f"invalid JSON: {exc.msg}", file=file, line=number))
        except CaseError as exc:
            problems.append(exc.located(file=file, line=number))
    return documents


def _record(record: Any, file: Path) -> Document:
    if not isinstance(record, dict):
        raise CaseError("a corpus record must be a JSON object")
    doc_id = record.get("_id", record.get("id"))
    if doc_id is None or str(doc_id) == "":
        raise CaseError("missing document id", field="_id")
    text = next((record[k] for k in ("text", "content", "page_content") if k in record), None)
    if not isinstance(text, str):
        raise CaseError("missing or non-string text", field="text")
    extra = record.get("metadata") or {}
    if not isinstance(extra, dict):
        raise CaseError("metadata must be an object", field="metadata")
    metadata = {k: v for k, v in record.items()
                if k not in ("_id", "id", "text", "content", "page_content", "metadata")}
    metadata.update(extra)
    metadata.setdefault("source", str(extra.get("source") or doc_id))
    metadata.setdefault("title", str(record.get("title") or ""))
    return Document(id=str(doc_id), text=text, metadata=metadata)


def chunk_text(text: str, max_chars: int = DEFAULT_CHUNK_CHARS) -> list[tuple[str, int]]:
    """Split text into chunks of whole paragraphs of at most ``max_chars`` characters.

    Returns ``(chunk, first line offset)`` pairs. A paragraph longer than the cap is
    split at sentence ends, then at word boundaries; a single word longer than the
    cap is cut.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    pieces: list[tuple[str, int]] = []
    for paragraph, line in _paragraphs(text):
        pieces.extend((part, line) for part in _split_long(paragraph, max_chars))
    chunks: list[tuple[str, int]] = []
    current, start = "", 0
    for piece, line in pieces:
        if current and len(current) + 2 + len(piece) > max_chars:
            chunks.append((current, start))
            current = ""
        if not current:
            current, start = piece, line
        else:
            current = f"{current}\n\n{piece}"
    if current:
        chunks.append((current, start))
    return chunks


def _paragraphs(text: str) -> Iterator[tuple[str, int]]:
    block: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines()):
        if line.strip():
            if not block:
                start = number
            block.append(line.rstrip())
        elif block:
            yield "\n".join(block).strip(), start
            block = []
    if block:
        yield "\n".join(block).strip(), start


def _split_long(paragraph: str, max_chars: int) -> Sequence[str]:
    if len(paragraph) <= max_chars:
        return [paragraph]
    parts: list[str] = []
    current = ""
    for unit in _units(paragraph, max_chars):
        joined = f"{current} {unit}" if current else unit
        if len(joined) <= max_chars:
            current = joined
        else:
            parts.append(current)
            current = unit
    if current:
        parts.append(current)
    return parts


def _units(paragraph: str, max_chars: int) -> Iterator[str]:
    """Sentences, or words of an over-long sentence, or slices of an over-long word."""
    for sentence in _SENTENCE_END.split(paragraph):
        if len(sentence) <= max_chars:
            yield sentence
            continue
        for word in sentence.split():
            for i in range(0, len(word), max_chars):
                yield word[i:i + max_chars]
