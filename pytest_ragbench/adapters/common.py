"""What the framework adapters share: contexts, token usage, history and structured replies.

Framework-free (each adapter module imports its own framework).
"""

from __future__ import annotations

import dataclasses
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_ragbench.errors import ModelCallError, UnusableReply
from pytest_ragbench.systems.openai_client import JSON_INSTRUCTION
from pytest_ragbench.systems.prompts import parse_json_reply
from pytest_ragbench.systems.protocols import Context, Generation, Usage

# Metadata keys a framework's document may carry its retrieval score under.
SCORE_KEYS = ("score", "relevance_score", "similarity_score", "similarity")
PARAMS = ("temperature", "max_tokens", "seed")  # what the plugin passes a generator


class AdapterWarning(UserWarning):
    """An adapter could not pass something on (prior turns to an app that takes none)."""


def make_context(rank: int, *, id: Any, text: Any, score: Any,
                 metadata: Mapping[str, Any] | None) -> Context:
    """A :class:`Context` from a framework's document at ``rank`` (1 = best).

    Without an id, the metadata's ``id``, else ``context <rank>``; without a score, the
    metadata's score, else ``1 / rank`` (higher is better and the order is kept).
    """
    meta = dict(metadata or {})
    if score is None:
        score = next((meta[k] for k in SCORE_KEYS if isinstance(meta.get(k), int | float)),
                     1.0 / rank)
    name = id if id not in (None, "") else meta.get("id")
    return Context(id=str(name) if name not in (None, "") else f"context {rank}",
                   text=str(text or ""), score=float(score), metadata=meta)


def read_usage(data: Any) -> Usage:
    """Token counts named the OpenAI way (``prompt_tokens``) or LangChain's (``input_tokens``).

    Nothing readable gives zero counts.
    """
    if not isinstance(data, Mapping):
        data = getattr(data, "__dict__", None) or {}
    prompt = _count(data, "prompt_tokens", "input_tokens")
    completion = _count(data, "completion_tokens", "output_tokens")
    total = _count(data, "total_tokens") or prompt + completion
    return Usage(prompt, completion, total)


def _count(data: Mapping[str, Any], *names: str) -> int:
    for name in names:
        value = data.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
    return 0


class HistoryDropped:
    """Warns once per adapted app that prior turns may not reach it (``message`` says why)."""

    def __init__(self, message: str) -> None:
        self.message = message
        self._warned = False
        self._lock = threading.Lock()

    def __call__(self, history: Sequence[Any] | None) -> None:
        """Warn (once) when ``history`` holds turns."""
        if not history:
            return
        with self._lock:
            if self._warned:
                return
            self._warned = True
        warnings.warn(self.message, AdapterWarning, stacklevel=3)


def schema_messages(messages: Sequence[Mapping[str, Any]],
                    schema: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The chat as dicts; with a schema, a last system message asks for that JSON object."""
    import json

    chat = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    if schema is not None:
        chat.append({"role": "system",
                     "content": JSON_INSTRUCTION + json.dumps(schema, sort_keys=True)})
    return chat


def finish_generation(generation: Generation, *, who: str, schema: Mapping[str, Any] | None,
                      parse_reply: Callable[[str, str], Any] | None) -> Generation:
    """Parse the reply when a structure was asked for; an unusable one raises UnusableReply.

    The structure is asked for in the prompt (plain text mode), as the plugin's own
    clients do for servers without a JSON mode.
    """
    if schema is None and parse_reply is None:
        return generation
    try:
        data = (parse_reply(generation.text, "text") if parse_reply is not None
                else parse_json_reply(generation.text, schema))
    except (ValueError, ModelCallError) as exc:
        raise UnusableReply(f"{who}: {exc}", reply=generation.text,
                            generation=generation) from None
    return dataclasses.replace(generation, data=data)


def model_params(params: Mapping[str, Any], forward: Sequence[str]) -> dict[str, Any]:
    """The per-call parameters named in ``forward`` that the plugin gave (not None)."""
    return {name: params[name] for name in forward if params.get(name) is not None}


def check_forward(forward: Sequence[str]) -> tuple[str, ...]:
    """``forward`` checked against the parameters the plugin passes."""
    unknown = [name for name in forward if name not in PARAMS]
    if unknown:
        raise ValueError(f"params: unknown name(s) {', '.join(map(repr, unknown))}; the plugin "
                         f"passes {', '.join(PARAMS)}")
    return tuple(forward)
