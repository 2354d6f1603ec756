"""Typed, frozen case objects — one dataclass per built-in kind (README "Case formats")."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Table:
    """A result set: column names and rows, as compared by SQL verification."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    @classmethod
    def from_records(cls, data: dict[str, Any] | list[dict[str, Any]]) -> Table:
        """Build from one mapping (a single row) or a list of mappings with the same keys."""
        records = [data] if isinstance(data, dict) else list(data)
        columns = tuple(records[0]) if records else ()
        return cls(columns, tuple(tuple(r.get(c) for c in columns) for r in records))

    def as_records(self) -> list[dict[str, Any]]:
        """Return the rows as mappings (later duplicate column names win)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass(frozen=True, kw_only=True)
class Case:
    """Fields every case has, whatever its kind."""

    id: str
    kind: str
    file: str
    line: int
    category: str | None = None
    tags: tuple[str, ...] = ()
    # None: kind defaults apply; {}: record scores without failing the item.
    thresholds: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    id_generated: bool = False
    # Cases sharing a cluster (one conversation, one source document) are not independent:
    # the report's intervals and paired tests resample clusters instead of cases.
    cluster: str | None = None
    # A person's score of this case per metric (judge calibration, results/calibration.py).
    human: dict[str, float] = field(default_factory=dict)
    # Where a generated case came from (source documents or rows, generator, model, seed),
    # and its review state: None (hand-written), "draft", "accepted" or "rejected".
    provenance: dict[str, Any] = field(default_factory=dict)
    review: str | None = None

    @property
    def label(self) -> str:
        """A short human description (the question, query or id)."""
        return str(getattr(self, "question", None) or getattr(self, "query", None) or self.id)

    def breakdown_fields(self) -> dict[str, Any]:
        """Fields the report can group by (category, doc_type, ...)."""
        return {"category": self.category}

    def item_thresholds(self) -> dict[str, float] | None:
        """The case's own thresholds (None: defaults apply; {}: never fail on a metric)."""
        return self.thresholds

    def cluster_value(self, by: str | None = None) -> str | None:
        """The case's cluster: its ``cluster`` field, or the one ``ragbench_cluster_by`` names.

        The field may be a typed one (``source_dataset``), an extra one kept from the case
        file (``source``, ``conversation``) or a key of ragas ``metadata``.
        """
        name = by or "cluster"
        value = getattr(self, name, None) if name in self.__dataclass_fields__ else None
        if value is None:
            value = self.extra.get(name)
        metadata = getattr(self, "metadata", None)
        if value is None and isinstance(metadata, dict):
            value = metadata.get(name)
        if value is None or isinstance(value, dict | list | tuple) or str(value) == "":
            return None
        return str(value)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe mapping of every field."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class SqlCase(Case):
    """A text-to-SQL case whose expected SQL is verified against the database."""

    question: str
    expected_sql: str
    ground_truth_data: Any
    expected: Table
    ground_truth_answer: str | None = None
    float_places: int = 2
    order_matters: bool = False
    db: str | None = None


@dataclass(frozen=True, kw_only=True)
class HybridCase(Case):
    """SQL data plus text context; the answer must mention the data's key entities."""

    question: str
    ground_truth_answer: str
    expected_sql: str | None = None
    ground_truth_data: Any = None
    expected: Table | None = None
    expected_sources: tuple[str, ...] = ()
    expected_facts: tuple[str, ...] = ()
    float_places: int = 2
    order_matters: bool = False
    db: str | None = None


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One prior turn of a conversation."""

    role: str
    content: str


@dataclass(frozen=True, kw_only=True)
class VectorCase(Case):
    """Descriptive ground truth for retrieval over unstructured documents."""

    question: str
    ground_truth: str
    expected_sources: tuple[str, ...] = ()
    expected_similarity: tuple[float, float] | None = None
    expect: str = "answer"
    history: tuple[Turn, ...] = ()
    expected_facts: tuple[str, ...] = ()
    relevance: dict[str, int] | None = None  # graded: source -> 2 answer, 1 related, 0 not


@dataclass(frozen=True, kw_only=True)
class Memory:
    """A memory stored before the query of a memory scenario."""

    role: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MemoryCase(Case):
    """A memory-retrieval scenario."""

    setup: tuple[Memory, ...]
    query: str
    expected: tuple[int, ...]
    top_k: int = 5
    filter_metadata: dict[str, Any] | None = None
    min_score: float | None = None
    threshold: float | None = None
    recency_weight: float | None = None
    relevance: dict[int, int] | None = None  # graded: setup index -> 2 answer, 1 related, 0 not

    def item_thresholds(self) -> dict[str, float] | None:
        """The scenario's ``threshold`` is the bar for the relevance score."""
        if self.thresholds == {} or self.threshold is None:
            return self.thresholds
        return {"relevance_score": self.threshold, **(self.thresholds or {})}


@dataclass(frozen=True, kw_only=True)
class RagasCase(Case):
    """A NormalizedSample record (README "Case formats")."""

    question: str
    ground_truth: str
    contexts: tuple[str, ...] | None = None
    answer: str | None = None
    doc_type: str | None = None
    question_type: str | None = None
    difficulty: str | None = None
    source_dataset: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    expected_facts: tuple[str, ...] = ()

    def breakdown_fields(self) -> dict[str, Any]:
        """Group by category, doc_type, question_type and difficulty."""
        return {"category": self.category, "doc_type": self.doc_type,
                "question_type": self.question_type, "difficulty": self.difficulty}


@dataclass(frozen=True, kw_only=True)
class BeirCase(Case):
    """One judged query of a BEIR folder (``id`` is ``<dataset>/<query-id>``).

    Made by the BEIR folder collector, not from a case file: ``file`` is the qrels file and
    ``line`` the query's first judgment there. ``folder`` and ``split`` name the dataset
    whose corpus the retriever indexes.
    """

    dataset: str
    query_id: str
    query: str
    qrels: dict[str, int]
    folder: str
    split: str = "test"

    def breakdown_fields(self) -> dict[str, Any]:
        """Category (none) and the dataset, which the report groups BEIR runs by."""
        return {"category": self.category, "dataset": self.dataset}


@dataclass(frozen=True, kw_only=True)
class RagcsvFragment:
    """One document fragment of a RAGCSV row (column 1)."""

    page_content: str
    title: str | None = None


@dataclass(frozen=True, kw_only=True)
class RagcsvCase(Case):
    """One row of a RAGCSV file; ``id`` is ``<file-stem>:<row>``."""

    question: str
    expected: str
    fragments: tuple[RagcsvFragment, ...]
    row: int
    expected_facts: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CustomCase(Case):
    """A case of a kind a plugin added without its own class: its fields by name.

    ``case.task`` reads the field ``task`` (``case.fields["task"]`` too); an optional
    field the case leaves out reads as None.
    """

    fields: dict[str, Any] = field(default_factory=dict)
    breakdown: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        """A field of the case; only called for names that are not attributes."""
        fields = self.__dict__.get("fields")
        if fields is not None and name in fields:
            return fields[name]
        raise AttributeError(name)

    def breakdown_fields(self) -> dict[str, Any]:
        """Category and the kind's breakdown fields."""
        return {"category": self.category, **{n: self.fields.get(n) for n in self.breakdown}}

    def cluster_value(self, by: str | None = None) -> str | None:
        """The cluster a field of the kind names (``ragbench_cluster_by``), else as any case."""
        value = self.fields.get(by or "cluster")
        if value is None or isinstance(value, dict | list | tuple) or str(value) == "":
            return super().cluster_value(by)
        return str(value)
