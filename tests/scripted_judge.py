"""A scripted reply function for the loopback server that answers ragas's judge prompts.

This is a protocol test double, not a judge: it grades nothing. It recognises which of
ragas's structured prompts it got (by the JSON schema's name in ``response_format``),
reads the prompt's ``input: {...}`` block and returns a reply of the requested shape
whose verdicts follow a fixed script, so tests can tell what ragas must compute from it.

Script (``ScriptedJudge`` attributes):
- statements: the answer split at sentence ends, or ``statements`` when set
  (StatementGeneratorOutput);
- ``supported``: "all", "none", or a word — a statement is supported (NLI verdict 1)
  when it contains that word (NLIStatementOutput); ``supported_by_seed`` overrides it for
  requests with that seed (repeated judging);
- ``question``: the question the answer relevancy step "generates" (None: echo the
  ``relevancy_echo`` text), ``noncommittal`` its flag (AnswerRelevanceOutput);
- ``useful``: a context is useful (verdict 1) when it contains this word
  (ContextPrecisionOutput);
- ``attributed``: a reference statement is attributed (1) when it contains this word
  (ContextRecallOutput);
- ``grade``: the reply to a grade (schema "grade": RAGCSV accuracy, judge_relevance), a
  fixed integer or a function of the prompt's text;
- ``broken``: schema names whose reply is broken: "text" (not JSON) or "shape" (JSON of
  the wrong shape).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """Split at sentence ends, dropping blanks."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def prompt_input(body: dict[str, Any]) -> dict[str, Any]:
    """The ``input: {...}`` block at the end of a ragas prompt."""
    prompt = str(body["messages"][-1]["content"])
    block = prompt.rsplit("\ninput: ", 1)[1].rsplit("\nOutput:", 1)[0]
    data: dict[str, Any] = json.loads(block)
    return data


def schema_name(body: dict[str, Any]) -> str:
    """The name of the JSON schema the client asked for (json_schema or json_object mode)."""
    fmt = body.get("response_format", {})
    if fmt.get("type") == "json_object":
        return str(fmt.get("schema", {}).get("title", ""))
    return str(fmt.get("json_schema", {}).get("name", ""))


@dataclass
class ScriptedJudge:
    """The reply function: ``LoopbackServer(ScriptedJudge(...))``."""

    supported: str = "all"
    supported_by_seed: dict[int, str] = field(default_factory=dict)
    statements: list[str] | None = None
    question: str | None = None
    noncommittal: int = 0
    useful: str = "useful"
    attributed: str = "Paris"
    broken: dict[str, str] = field(default_factory=dict)
    grade: int | Callable[[str], int] = 7
    seen: list[str] = field(default_factory=list)
    _seed: int | None = None

    def __call__(self, body: dict[str, Any]) -> str:
        name = schema_name(body)
        self.seen.append(name)
        if self.broken.get(name) == "text":
            return "I am sorry, I cannot grade this."
        if self.broken.get(name) == "shape":
            return json.dumps({"statements": "not a list", "classifications": 3,
                               "question": ["x"], "verdict": "maybe"})
        if name == "grade":
            prompt = str(body["messages"][-1]["content"])
            value = self.grade(prompt) if callable(self.grade) else self.grade
            return json.dumps({"score": value})
        data = prompt_input(body)
        reply = getattr(self, f"_{name}", None)
        if reply is None:
            raise AssertionError(f"unexpected schema {name!r}")
        self._seed = body.get("seed")
        return json.dumps(reply(data))

    def _StatementGeneratorOutput(self, data: dict[str, Any]) -> dict[str, Any]:
        if self.statements is not None:
            return {"statements": self.statements}
        return {"statements": sentences(data["answer"])}

    def _NLIStatementOutput(self, data: dict[str, Any]) -> dict[str, Any]:
        supported = self.supported_by_seed.get(self._seed, self.supported)  # type: ignore[arg-type]

        def verdict(statement: str) -> int:
            if supported in ("all", "none"):
                return int(supported == "all")
            return int(supported in statement)

        return {"statements": [{"statement": s, "reason": "scripted", "verdict": verdict(s)}
                               for s in data["statements"]]}

    def _AnswerRelevanceOutput(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"question": self.question if self.question is not None else data["response"],
                "noncommittal": self.noncommittal}

    def _ContextPrecisionOutput(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"reason": "scripted", "verdict": int(self.useful in data["context"])}

    def _ContextRecallOutput(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"classifications": [
            {"statement": s, "reason": "scripted", "attributed": int(self.attributed in s)}
            for s in sentences(data["answer"])]}
