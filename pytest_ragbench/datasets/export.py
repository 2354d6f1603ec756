r"""JSONL and manifest CSV files (deterministic bytes), reading them back, and combining.

A JSONL line is ``json.dumps(sample.to_dict(), ensure_ascii=False)`` + ``\n``; the
manifest has one row per line with the line's SHA-256, so a manifest checks its JSONL.
Files are written to a temporary name and renamed, so a failed write leaves no half file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_ragbench.datasets.readers import read_text
from pytest_ragbench.datasets.sample import NormalizedSample
from pytest_ragbench.errors import CaseError, RagbenchError

MANIFEST_COLUMNS = ("line", "id", "doc_type", "question_type", "difficulty",
                    "source_dataset", "answerable", "n_contexts", "source_file",
                    "source_line", "sha256")


class DuplicateIdError(RagbenchError):
    """Two records share an id; the message names every such id and where it occurs."""

    def __init__(self, places: dict[str, list[str]]) -> None:
        self.places = places
        shown = [f"{sample_id} ({', '.join(where)})"
                 for sample_id, where in sorted(places.items())]
        more = f" and {len(shown) - 20} more" if len(shown) > 20 else ""
        super().__init__(f"{len(places)} duplicate id(s): " + "; ".join(shown[:20]) + more)


@dataclass
class JsonlSamples:
    """Samples read from a JSONL file with their line numbers, and the lines that failed."""

    path: Path
    samples: list[tuple[int, NormalizedSample]] = field(default_factory=list)
    errors: list[CaseError] = field(default_factory=list)


# json.dumps(ensure_ascii=False) leaves these raw, but str.splitlines() breaks lines on
# them; escaped (they only occur inside JSON strings) any JSONL reader reads one record.
_LINE_SEPARATORS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028",
                                  "\u2029": "\\u2029"})


def dumps_line(sample: NormalizedSample) -> str:
    """One JSONL line, newline included."""
    text = json.dumps(sample.to_dict(), ensure_ascii=False, allow_nan=False)
    return text.translate(_LINE_SEPARATORS) + "\n"


def write_jsonl(samples: Sequence[NormalizedSample], path: str | Path) -> None:
    """Write ``samples`` as JSONL; ``DuplicateIdError`` if two share an id."""
    check_unique((f"#{i}", s.id) for i, s in enumerate(samples, start=1))
    _write_atomic(Path(path), "".join(dumps_line(s) for s in samples))


def write_manifest(samples: Sequence[NormalizedSample], path: str | Path) -> None:
    """Write the manifest CSV of the JSONL that holds ``samples`` in this order."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(MANIFEST_COLUMNS)
    for number, sample in enumerate(samples, start=1):
        digest = hashlib.sha256(dumps_line(sample).encode("utf-8")).hexdigest()
        meta = sample.metadata
        writer.writerow([number, sample.id, sample.doc_type, sample.question_type,
                         sample.difficulty, sample.source_dataset,
                         "true" if sample.answerable else "false", len(sample.contexts),
                         meta.get("source_file") or "", _text(meta.get("source_line")),
                         digest])
    _write_atomic(Path(path), buffer.getvalue())


def read_jsonl(path: str | Path) -> JsonlSamples:
    """Read a dataset JSONL; a bad line is an error (file, line, field) and is skipped."""
    path = Path(path)
    result = JsonlSamples(path)
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            result.errors.append(CaseError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                                           file=path, line=number))
            continue
        except RecursionError:
            result.errors.append(CaseError("invalid JSON: nested too deeply",
                                           file=path, line=number))
            continue
        try:
            result.samples.append((number, NormalizedSample.from_dict(data)))
        except ValueError as exc:
            name, _, message = str(exc).partition(": ")
            result.errors.append(CaseError(message or str(exc), file=path, line=number,
                                           field=name if message else None))
    return result


def combine(files: Sequence[JsonlSamples]) -> list[NormalizedSample]:
    """The samples of all files in order; ``DuplicateIdError`` names ids found twice."""
    check_unique((f"{f.path}:{line}", s.id) for f in files for line, s in f.samples)
    return [s for f in files for _, s in f.samples]


def check_unique(entries: Iterable[tuple[str, str]]) -> None:
    """``entries`` are ``(where, id)``; raise ``DuplicateIdError`` if an id repeats."""
    places: dict[str, list[str]] = {}
    for where, sample_id in entries:
        places.setdefault(sample_id, []).append(where)
    duplicates = {k: v for k, v in places.items() if len(v) > 1}
    if duplicates:
        raise DuplicateIdError(duplicates)


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)  # mkstemp creates 0600
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
