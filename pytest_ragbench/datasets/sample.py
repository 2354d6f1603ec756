"""``NormalizedSample``: one benchmark record, exported as a ``ragas`` case.

``to_dict`` gives exactly the JSON object written to a line of the exported JSONL; the
``ragas`` case kind reads that line unchanged (``"kind": "ragas"`` is included).
The JSON Schema of that object is ``normalized_sample.schema.json`` beside this module.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("normalized_sample.schema.json")

# The case loaders' id rule (pytest_ragbench.cases.build.ID_PATTERN); a test checks that
# exported files load there, which would catch a drift.
ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:/@+-]+$")
_ID_BAD_CHARS = re.compile(r"[^A-Za-z0-9_.:/@+-]+")
# doc_type, question_type, difficulty and source_dataset: one line, no surrounding blanks.
NAME_PATTERN = re.compile(r"^\S(?:[^\r\n]*\S)?$")

DOC_TYPES = ("clean_text", "log_ticket", "table", "code_config")
DIFFICULTIES = ("easy", "medium", "hard")
FIELDS = ("id", "question", "ground_truth", "contexts", "doc_type", "question_type",
          "difficulty", "source_dataset", "metadata")


@dataclass(frozen=True)
class NormalizedSample:
    """A question with its reference answer, reference contexts and strata."""

    id: str
    question: str
    ground_truth: str
    contexts: tuple[str, ...]
    doc_type: str
    question_type: str
    difficulty: str
    source_dataset: str
    metadata: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None

    def __post_init__(self) -> None:
        """Check the fields; a ``ValueError`` names the field."""
        if not isinstance(self.id, str) or not ID_PATTERN.fullmatch(self.id):
            raise ValueError(f"id: {self.id!r} must match {ID_PATTERN.pattern}")
        for name in ("question", "ground_truth"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name}: must be non-empty text")
        if not isinstance(self.contexts, tuple) or not all(
                isinstance(c, str) for c in self.contexts):
            raise ValueError("contexts: must be a tuple of strings")
        for name in ("doc_type", "question_type", "difficulty", "source_dataset"):
            value = getattr(self, name)
            if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
                raise ValueError(f"{name}: {value!r} must match {NAME_PATTERN.pattern}")
        if not isinstance(self.metadata, dict):
            raise ValueError("metadata: must be a mapping")
        try:
            json.dumps(self.metadata, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"metadata: not JSON-serialisable ({exc})") from None
        if self.answer is not None and not isinstance(self.answer, str):
            raise ValueError("answer: must be text")

    @property
    def answerable(self) -> bool:
        """False for the unanswerable variants the sampler builds."""
        return self.metadata.get("answerable", True) is not False

    def stratum(self) -> tuple[str, str, str]:
        """``(doc_type, question_type, difficulty)``."""
        return (self.doc_type, self.question_type, self.difficulty)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of one exported line (a ``ragas`` case)."""
        data: dict[str, Any] = {
            "id": self.id,
            "kind": "ragas",
            "question": self.question,
            "ground_truth": self.ground_truth,
            "contexts": list(self.contexts),
            "doc_type": self.doc_type,
            "question_type": self.question_type,
            "difficulty": self.difficulty,
            "source_dataset": self.source_dataset,
            "metadata": json.loads(json.dumps(self.metadata)),  # a deep, JSON-only copy
        }
        if self.answer is not None:
            data["answer"] = self.answer
        return data

    @classmethod
    def from_dict(cls, data: Any) -> NormalizedSample:
        """Read ``to_dict``'s output back; ``ValueError`` names the bad field."""
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {*FIELDS, "kind", "answer"})
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown field")
        if data.get("kind", "ragas") != "ragas":
            raise ValueError(f"kind: expected 'ragas', got {data.get('kind')!r}")
        missing = [name for name in FIELDS if name not in data and name != "metadata"]
        if missing:
            raise ValueError(f"{missing[0]}: required field is missing")
        contexts = data["contexts"]
        if contexts is None:
            contexts = []
        if not isinstance(contexts, list):
            raise ValueError("contexts: must be a list of strings")
        metadata = data.get("metadata") or {}
        return cls(id=data["id"], question=data["question"], ground_truth=data["ground_truth"],
                   contexts=tuple(contexts), doc_type=data["doc_type"],
                   question_type=data["question_type"], difficulty=data["difficulty"],
                   source_dataset=data["source_dataset"], metadata=metadata,
                   answer=data.get("answer"))


def make_id(prefix: str, *parts: object) -> str:
    """A case id from readable parts; characters the id rule refuses are replaced.

    When anything had to be replaced, a short hash of the original parts is appended so
    that two different originals cannot end up with the same id.
    """
    raw = "-".join(str(p) for p in (prefix, *parts))
    clean = _ID_BAD_CHARS.sub("_", raw).strip("_") or "sample"
    if clean != raw:
        clean = f"{clean}-{short_hash(raw)}"
    return clean


def short_hash(text: str, length: int = 10) -> str:
    """First hex digits of the SHA-1 of ``text`` (stable ids, not security)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:length]


def load_schema() -> dict[str, Any]:
    """The JSON Schema of an exported line."""
    result: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return result
