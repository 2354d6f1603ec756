"""Prompt shapes and reply parsing shared by the generators and the default system.

The RAG prompt: a system instruction, one user message per document
(``Document: {title}`` and the text on the next line), the prior turns if any, then the question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_ragbench.errors import ModelCallError
from pytest_ragbench.render.text import shorten
from pytest_ragbench.systems.protocols import Context, as_messages

SYSTEM_INSTRUCTION = ("You are a helpful assistant. Answer the question based only on the "
                      "provided documents.")
MAX_DOCUMENT_CHARS = 2000
# Answer length of the embedded system and of ragas answers: a small model under greedy
# decoding that runs to a longer limit mostly repeats itself, and a greedy answer at 128 is
# the first half of the one at 256 (measured in test_cases/ragbench.toml).
ANSWER_MAX_TOKENS = 128
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)\n?\s*```", re.DOTALL)


def rag_messages(question: str, contexts: Sequence[Context], history: Sequence[Any] | None = None,
                 *, instruction: str = SYSTEM_INSTRUCTION,
                 max_document_chars: int = MAX_DOCUMENT_CHARS) -> list[dict[str, str]]:
    """Build the chat for one question over its retrieved contexts."""
    messages = [{"role": "system", "content": instruction}]
    for context in contexts:
        title = str(context.metadata.get("title") or context.metadata.get("source") or context.id)
        messages.append({"role": "user",
                         "content": f"Document: {title}\n{context.text[:max_document_chars]}"})
    messages.extend(as_messages(history))
    messages.append({"role": "user", "content": question})
    return messages


def parse_json_reply(text: str, schema: Mapping[str, Any] | None = None) -> Any:
    """Parse a reply that is one JSON object, strictly.

    Whitespace and one enclosing Markdown code fence are allowed; prose around the
    object is not (a model that talks around its answer did not give the structure
    asked for). Raises ModelCallError naming the problem and quoting the reply.
    """
    data = json_object(text)
    if data is None:
        raise ModelCallError(f"reply is not one JSON object: {shorten(text)!r}")
    missing = [k for k in (schema or {}).get("required", ()) if k not in data]
    if missing:
        raise ModelCallError(f"JSON reply lacks required field(s) {', '.join(missing)}: "
                             f"{shorten(text)!r}")
    return data


def json_object(text: str) -> dict[str, Any] | None:
    """The JSON object that is the whole reply (optionally in a code fence), else None."""
    stripped = text.strip()
    fenced = _FENCE.fullmatch(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        data = json.loads(stripped)
    except (json.JSONDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
