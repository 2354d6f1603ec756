"""Strict integer grades from a judge: RAGCSV's 0-100 accuracy, the 0-10 relevance.

A grade is asked for as structured output, ``{"score": <integer>}`` (the judge client
negotiates the mode: JSON schema, JSON object with a llama.cpp grammar, or plain text),
and accepted only as an integer inside its scale; in plain-text mode a reply that is the
integer alone is accepted too. Anything else — a number in prose, a fraction, a value
outside the scale, a refusal — leaves the grade unscored with the reply quoted (at most
200 characters). Such replies are never cached: the clients cache only what
:func:`read_grade` accepted.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragbench.errors import ModelCallError, UnusableReply
from pytest_ragbench.metrics.registry import Score, Unscored
from pytest_ragbench.systems.prompts import json_object, shorten

QUOTE_CHARS = 200
_INTEGER = re.compile(r"[+-]?\d+")


def grade_schema(high: int) -> dict[str, Any]:
    """The JSON schema of a grade from 0 to ``high``.

    The scale is also an ``enum``: llama.cpp's grammar ignores ``minimum``/``maximum`` but
    honours an enum, so a grammar-constrained judge can only write a grade on the scale
    (SmolLM2 asked for 0-100 otherwise copied "256" out of an answer). The reply is still
    checked (:func:`read_grade`) for servers that do not constrain their output.
    """
    return {"title": "grade", "type": "object",
            "properties": {"score": {"type": "integer", "minimum": 0, "maximum": high,
                                     "enum": list(range(high + 1))}},
            "required": ["score"], "additionalProperties": False}


class GradeError(ValueError):
    """A reply that is not a grade on the scale; the message quotes it."""


def read_grade(text: str, mode: str, *, high: int) -> int:
    """The grade in a reply made in structured-output ``mode``, or GradeError.

    Accepted: a reply that is the JSON object ``{"score": <integer 0..high>}`` (nothing
    else in it); in ``text`` mode also a reply that is that integer alone.
    """
    data = json_object(text)
    value: Any = None
    if data is not None and set(data) == {"score"}:
        value = data["score"]
    elif data is None and mode == "text" and _INTEGER.fullmatch(text.strip()):
        value = int(text.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high:
        return value
    shape = '{"score": <integer>}' + (" or the integer alone" if mode == "text" else "")
    raise GradeError(f"the judge's reply is not a grade from 0 to {high} ({shape}): "
                     f"{shorten(text, QUOTE_CHARS)!r}")


@dataclass(frozen=True)
class Grade:
    """One grading call: the score (or why not), the reply, and the call (None if unanswered)."""

    score: Score
    reply: str | None = None
    generation: Any = None


async def agrade(judge: Any, messages: Sequence[dict[str, str]], *, high: int,
                 max_tokens: int, temperature: float = 0.0, seed: int = 0) -> Grade:
    """Ask ``judge`` for one grade; never raises for a failed call or a bad reply."""
    parse = functools.partial(_parse, high=high)
    params: dict[str, Any] = {"schema": grade_schema(high), "temperature": temperature,
                              "max_tokens": max_tokens, "seed": seed}
    takes_parser = accepts(judge, "parse_reply")
    if takes_parser:
        params["parse_reply"] = parse
    try:
        generation = await _call(judge, messages, params)
    except UnusableReply as exc:
        return Grade(Unscored(_reason(exc)), exc.reply, exc.generation)
    except ModelCallError as exc:
        return Grade(Unscored(str(exc)))
    except Exception as exc:  # a user's judge failing in its own way
        return Grade(Unscored(f"the judge failed: {type(exc).__name__}: {exc}"))
    text = str(getattr(generation, "text", ""))
    if takes_parser:
        return Grade(int(generation.data), text, generation)
    try:  # a judge of the user's own: read what it returned
        data = getattr(generation, "data", None)
        score = read_grade(text if data is None else _as_json(data),
                           "text" if data is None else "json_object", high=high)
    except GradeError as exc:
        return Grade(Unscored(str(exc)), text, generation)
    return Grade(score, text, generation)


def _parse(text: str, mode: str, *, high: int) -> int:
    return read_grade(text, mode, high=high)


def _reason(exc: UnusableReply) -> str:
    """The grade's own complaint about the reply (without the client's call prefix)."""
    message = str(exc)
    marker = "the judge's reply is not a grade"
    return message[message.index(marker):] if marker in message else message


def _as_json(data: Any) -> str:
    return json.dumps(data, default=str)


async def _call(judge: Any, messages: Sequence[dict[str, str]], params: dict[str, Any]) -> Any:
    agenerate = getattr(judge, "agenerate", None)
    if agenerate is not None and inspect.iscoroutinefunction(agenerate):
        return await agenerate(list(messages), **params)
    return await asyncio.to_thread(judge.generate, list(messages), **params)


def accepts(model: Any, name: str) -> bool:
    """Whether the model's ``generate`` or ``agenerate`` names the keyword ``name``.

    Our clients take ``parse_reply``; a judge of the user's own may not, and its replies
    are then read after the call.
    """
    for method in (getattr(model, "generate", None), getattr(model, "agenerate", None)):
        try:
            if method is not None and name in inspect.signature(method).parameters:
                return True
        except (TypeError, ValueError):
            continue
    return False
