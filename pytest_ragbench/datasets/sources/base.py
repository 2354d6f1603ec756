"""What every adapter returns, and small helpers they share."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.sample import NormalizedSample
from pytest_ragbench.errors import CaseError


@dataclass
class AdaptResult:
    """Samples adapted from a source, the records that were bad, and those left out.

    ``errors`` are malformed records (file, line, field, reason); ``skipped`` counts
    well-formed records that cannot become a sample, by reason (e.g. a BEIR query
    without relevance judgments).
    """

    samples: list[NormalizedSample] = field(default_factory=list)
    errors: list[CaseError] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    def extend(self, other: AdaptResult) -> None:
        """Add another result's samples, errors and skip counts."""
        self.samples.extend(other.samples)
        self.errors.extend(other.errors)
        self.skipped.update(other.skipped)


def build_sample(*, file: str | Path | None, line: int | None, **fields: Any
                 ) -> NormalizedSample:
    """``NormalizedSample(**fields)``, turning a ``ValueError`` into a located ``CaseError``."""
    try:
        return NormalizedSample(**fields)
    except ValueError as exc:
        name, _, message = str(exc).partition(": ")
        raise CaseError(message or str(exc), file=file, line=line, field=name) from None


def classify(text: str, rules: Iterable[tuple[str, Iterable[str]]], default: str) -> str:
    """The first label whose keywords occur in ``text`` (lower-cased), else ``default``."""
    lowered = f" {text.lower()} "
    for label, words in rules:
        if any(word in lowered for word in words):
            return label
    return default


def require_text(record: Mapping[str, Any], name: str, *, file: str | Path | None,
                 line: int | None) -> str:
    """A non-empty string field, or ``CaseError`` naming it."""
    value = record.get(name)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if value is None else f"{type(value).__name__}"
        raise CaseError(f"expected non-empty text, got {got}", file=file, line=line, field=name)
    return value


def require_mapping(record: Any, *, file: str | Path | None, line: int | None) -> dict[str, Any]:
    """The record itself must be a JSON object."""
    if not isinstance(record, dict):
        raise CaseError(f"expected a JSON object, got {type(record).__name__}",
                        file=file, line=line)
    return record


def origin(file: str | Path | None, line: int | None) -> dict[str, Any]:
    """Where a sample came from, for ``metadata`` (file name only: the same on any machine)."""
    return {"source_file": Path(file).name if file is not None else None, "source_line": line}


def by_count(count: int, easy_min: int, hard_max: int) -> str:
    """Difficulty from a count where *more* means easier (e.g. relevant documents)."""
    if count >= easy_min:
        return "easy"
    return "hard" if count <= hard_max else "medium"


def jsonable(value: Any) -> Any:
    """Keep what JSON can hold (non-finite floats as text); anything else as its ``repr``."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return repr(value)
