"""What a system under test looks like: protocols and the plain records they exchange.

Any object with the right methods satisfies a protocol; nothing has to inherit from
these classes. Optional methods (``aanswer``, ``prepare``, ``agenerate``) are used when
present and emulated otherwise (see :mod:`pytest_ragbench.run.prefetch`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

Message = Mapping[str, str]
"""One chat message, ``{"role": "user", "content": "..."}``."""


@dataclass(frozen=True)
class Document:
    """A unit of text to index; ``metadata`` carries ``source``, ``title`` and any other field."""

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        """Return the document's title, or an empty string."""
        return str(self.metadata.get("title") or "")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return {"id": self.id, "text": self.text, "metadata": _json_safe(self.metadata)}


@dataclass(frozen=True)
class Context:
    """One retrieved passage with its score (higher is better)."""

    id: str
    text: str
    score: float
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return {"id": self.id, "text": self.text, "score": float(self.score),
                "metadata": _json_safe(self.metadata)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Context:
        """Rebuild a context from :meth:`to_dict` output."""
        return cls(id=str(data["id"]), text=str(data["text"]), score=float(data["score"]),
                   metadata=dict(data.get("metadata") or {}))


@dataclass(frozen=True)
class MemoryHit(Context):
    """A memory returned by :meth:`MemoryStore.search_memories`.

    ``score`` ranks the hits (similarity blended with recency); ``similarity`` is the
    plain cosine similarity between the query and the memory.
    """

    role: str = ""
    similarity: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return {**super().to_dict(), "role": self.role, "similarity": float(self.similarity)}


@dataclass(frozen=True)
class Usage:
    """Token counts of one or more model calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens,
                     self.total_tokens + other.total_tokens)

    def to_dict(self) -> dict[str, int]:
        """Return a JSON-safe dict."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage:
        """Read an OpenAI-style ``usage`` object; missing counts are 0."""
        data = data or {}
        prompt = int(data.get("prompt_tokens") or 0)
        completion = int(data.get("completion_tokens") or 0)
        total = int(data.get("total_tokens") or prompt + completion)
        return cls(prompt, completion, total)


@dataclass(frozen=True)
class Generation:
    """The reply of one generator or judge call.

    ``model`` is the model asked for, ``served_model`` the one the server said answered
    (the reply's ``model`` field; None where there is no server to say it).
    ``data`` holds the parsed JSON when a schema was requested; ``cached`` tells that
    no model was called; ``attempts`` counts HTTP attempts including retries.
    ``ttft_s`` and ``itl_s`` (time to the first text chunk, mean gap between chunks) are
    set for a streamed reply only (``--ragbench-stream``; :mod:`.streaming`).
    """

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    cached: bool = False
    data: Any = None
    attempts: int = 1
    served_model: str | None = None
    ttft_s: float | None = None
    itl_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return {"text": self.text, "model": self.model, "usage": self.usage.to_dict(),
                "latency_s": self.latency_s, "cached": self.cached,
                "data": _json_safe(self.data), "attempts": self.attempts,
                "served_model": self.served_model, "ttft_s": self.ttft_s,
                "itl_s": self.itl_s}


@dataclass(frozen=True)
class Answer:
    """What a system returns for one question."""

    text: str
    contexts: tuple[Context, ...] = ()
    sql: str | None = None
    latency_s: float = 0.0
    usage: Usage = field(default_factory=Usage)
    cached: bool = False  # the model's reply came from the response cache
    model: str | None = None  # the model asked to write the answer, if one did
    served_model: str | None = None  # the model its server said answered
    # A streamed answer's time to its first text chunk and mean gap between chunks.
    ttft_s: float | None = None
    itl_s: float | None = None
    # Model calls the system made while retrieving (query expansion, LLM re-ranking): the
    # report counts them as the role ``retrieval``, beside the answer's own call.
    retrieval_calls: tuple[Generation, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return {"text": self.text, "contexts": [c.to_dict() for c in self.contexts],
                "sql": self.sql, "latency_s": self.latency_s, "usage": self.usage.to_dict(),
                "cached": self.cached, "model": self.model, "served_model": self.served_model,
                "ttft_s": self.ttft_s, "itl_s": self.itl_s}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Answer:
        """Rebuild an answer from :meth:`to_dict` output."""
        return cls(text=str(data["text"]),
                   contexts=tuple(Context.from_dict(c) for c in data.get("contexts") or ()),
                   sql=data.get("sql"), latency_s=float(data.get("latency_s") or 0.0),
                   usage=Usage.from_dict(data.get("usage")),
                   cached=bool(data.get("cached", False)), model=data.get("model"),
                   served_model=data.get("served_model"),
                   ttft_s=_optional_float(data.get("ttft_s")),
                   itl_s=_optional_float(data.get("itl_s")))


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class AnswerRequest:
    """A question an item will ask the system, with prior turns if any (for prefetching).

    The turns are kept as the plain ``{"role", "content"}`` dicts a system is given.
    """

    question: str
    history: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "history", tuple(as_messages(self.history)))


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text."""

    model_id: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Retriever(Protocol):
    """Indexes a corpus and returns the best passages for a query, best first.

    ``index`` is optional for an overridden ``ragbench_retriever``: when present, it is
    called once with the documents of ini ``ragbench_corpus`` (when there are any).
    ``filters`` and ``min_score`` are never passed by the plugin itself.
    """

    def index(self, documents: Sequence[Document]) -> None: ...

    def retrieve(self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None,
                 min_score: float | None = None) -> list[Context]: ...

    def retrieve_many(self, queries: Sequence[str], top_k: int = 5,
                      filters: Mapping[str, Any] | None = None,
                      min_score: float | None = None) -> list[list[Context]]: ...


@runtime_checkable
class MemoryStore(Protocol):
    """Conversational memory, made afresh for every ``memory`` item.

    ``add_interaction`` returns the new memory's id; ``search_memories`` returns the best
    :class:`MemoryHit` objects (``id`` as returned by ``add_interaction``, ``score`` ranks,
    ``similarity`` is the plain cosine), at most ``top_k``, none below ``min_score``.
    """

    def add_interaction(self, role: str, content: str,
                        metadata: Mapping[str, Any] | None = None) -> str: ...

    def search_memories(self, query: str, top_k: int = 5,
                        filter_metadata: Mapping[str, Any] | None = None,
                        min_score: float | None = None,
                        recency_weight: float = 0.0) -> list[MemoryHit]: ...

    def clear(self) -> None: ...


@runtime_checkable
class Generator(Protocol):
    """A chat model: messages in, text and usage out. ``agenerate`` is optional."""

    model_id: str

    def generate(self, messages: Sequence[Message], **params: Any) -> Generation: ...


@runtime_checkable
class Judge(Protocol):
    """A chat model used to grade; ``schema`` asks for JSON output parsed into ``data``."""

    model_id: str

    def generate(self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None,
                 **params: Any) -> Generation: ...


@runtime_checkable
class System(Protocol):
    """The RAG application under test: retrieves and answers.

    Optional methods, used when present:

    - ``answer_from(question, contexts, history=None)``: answer from the given passages,
      without retrieving (:class:`PassageSystem`). RAGAS samples that carry contexts and
      RAGCSV rows are answered by it; without it the generator ``ragbench_llm`` answers them.
    - ``async aanswer(question, history)``, ``prepare(questions)`` (batch work such as
      embedding all queries at once): for speed.
    - ``describe() -> str``: one line for the report.
    """

    def answer(self, question: str, history: Sequence[Any] | None = None) -> Answer: ...


@runtime_checkable
class PassageSystem(System, Protocol):
    """A system that can also answer from passages it is given (no retrieval).

    ``contexts`` are :class:`Context` objects: a RAGAS sample's contexts (ids ``context 1``,
    ...) or a RAGCSV row's fragments (ids ``fragment 1``, ..., the fragment's metadata,
    ``title`` included). Return an :class:`Answer` (its ``contexts`` may stay empty) or a
    string.
    """

    def answer_from(self, question: str, contexts: Sequence[Context],
                    history: Sequence[Any] | None = None) -> Answer | str: ...


def as_messages(history: Sequence[Any] | None) -> list[dict[str, str]]:
    """Normalise prior turns (mappings or objects with ``role``/``content``) to messages.

    This is the ``history`` every system, retriever and generator of the user is given:
    ``[{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]``.
    """
    messages = []
    for turn in history or ():
        if isinstance(turn, Mapping):
            role, content = turn.get("role", "user"), turn.get("content", "")
        else:
            role, content = getattr(turn, "role", "user"), getattr(turn, "content", "")
        messages.append({"role": str(role), "content": str(content)})
    return messages


def _json_safe(value: Any) -> Any:
    """Convert mappings, sequences and numpy scalars into plain JSON types."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return _json_safe(value.item())
    if hasattr(value, "isoformat"):  # date / datetime from YAML front matter
        return value.isoformat()
    return str(value)
