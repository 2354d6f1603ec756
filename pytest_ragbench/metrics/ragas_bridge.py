"""Our judge and embedder behind ragas 0.4.3's LLM and embeddings interfaces.

Imported only when a judged metric is computed with a judge (imports ragas: seconds).
ragas's metric classes (``ragas.metrics.collections``) write the prompts, name the
pydantic model they expect and compute the scores; :class:`JudgeLLM` sends each prompt
to our :class:`~pytest_ragbench.systems.protocols.Judge` with that model's JSON schema and
validates the reply into the model, so every call goes through the judge's own response
cache, retries and concurrency limit. :class:`EmbedderEmbeddings` hands texts to our
embedder (the local MiniLM by default) in one batch.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

# Importing ragas must not phone home: the plugin runs offline (README "Quickstart"). A user
# who wants ragas's analytics sets the variable to "false" themselves.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

from pydantic import BaseModel, ValidationError
from ragas.embeddings.base import BaseRagasEmbedding
from ragas.llms.base import InstructorBaseRagasLLM

from pytest_ragbench import served
from pytest_ragbench.errors import ModelCallError, UnusableReply
from pytest_ragbench.metrics.grades import accepts
from pytest_ragbench.systems.prompts import parse_json_reply, shorten
from pytest_ragbench.systems.protocols import Embedder, Generation, Judge

ModelT = TypeVar("ModelT", bound=BaseModel)

# ragas's own default for structured output (InstructorModelArgs.max_tokens): NLI verdicts
# with a reason per statement need room; 512 (the client's default) truncates long answers.
JUDGE_MAX_TOKENS = 1024
# A reply that does not validate is asked again with seed + RETRY_SEED_STRIDE * attempt,
# far from the seeds of repeated samples (0, 1, 2, ...), whose calls it must not share.
RETRY_SEED_STRIDE = 1000


class JudgeReplyError(ModelCallError):
    """The judge replied, but not with the structure ragas asked for."""


@dataclass
class JudgeUsage:
    """Counts of the judge calls behind one item's metrics (the report's usage record)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: list[float] = field(default_factory=list)
    models: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, generation: Generation) -> None:
        """Count one reply; only calls that reached the model have a latency."""
        self.calls += 1
        self.prompt_tokens += generation.usage.prompt_tokens
        self.completion_tokens += generation.usage.completion_tokens
        if generation.cached:
            self.cache_hits += 1
        else:
            self.latency_s.append(float(generation.latency_s))
        served.add(self.models, served.one_call(generation.model,
                                                getattr(generation, "served_model", None)))

    def to_dict(self) -> dict[str, Any]:
        """``{"calls", "cache_hits", "prompt_tokens", "completion_tokens", "latency_s"}``.

        Also ``models`` (served.py) when the judge's server named its model.
        """
        record = {"calls": self.calls, "cache_hits": self.cache_hits,
                  "prompt_tokens": self.prompt_tokens,
                  "completion_tokens": self.completion_tokens, "latency_s": list(self.latency_s)}
        return {**record, "models": self.models} if self.models else record


class JudgeLLM(InstructorBaseRagasLLM):
    """ragas's structured-output LLM interface, answered by one of our judges.

    ``use_async``: await the judge's ``agenerate`` when it has one (call this from the
    loop the judge's client lives on, so that its concurrency limit holds); otherwise
    the judge's blocking ``generate`` runs in a worker thread.
    A reply that does not validate is asked again ``validation_retries`` times with
    another seed. Our clients validate the reply into the model before caching it
    (``parse_reply``), so a bad reply is never cached; it still counts as a call the
    server answered.
    """

    def __init__(self, judge: Judge, *, use_async: bool = True, temperature: float = 0.0,
                 max_tokens: int = JUDGE_MAX_TOKENS, seed: int = 0,
                 validation_retries: int = 1, usage: JudgeUsage | None = None) -> None:
        self.judge = judge
        self.use_async = use_async
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.validation_retries = validation_retries
        self.usage = usage if usage is not None else JudgeUsage()
        self._takes_parser = accepts(judge, "parse_reply")

    def __repr__(self) -> str:
        return f"JudgeLLM({getattr(self.judge, 'model_id', type(self.judge).__name__)!r})"

    def generate(self, prompt: str, response_model: type[ModelT]) -> ModelT:
        """Ask the judge and wait (ragas's synchronous entry point)."""
        schema = response_model.model_json_schema()
        problem = ""
        for attempt in range(self.validation_retries + 1):
            try:
                generation = _call_judge_sync(self.judge, self._messages(prompt), schema,
                                              self._params(attempt, response_model, schema))
            except UnusableReply as exc:
                problem = self._unusable(exc)
                continue
            self.usage.add(generation)
            model, problem = _validate(generation, response_model, schema)
            if model is not None:
                return model
        raise JudgeReplyError(problem)

    async def agenerate(self, prompt: str, response_model: type[ModelT]) -> ModelT:
        """Ask the judge for ``response_model`` as JSON and validate the reply into it."""
        schema = response_model.model_json_schema()
        problem = ""
        for attempt in range(self.validation_retries + 1):
            try:
                generation = await self._acall(self._messages(prompt), schema,
                                               self._params(attempt, response_model, schema))
            except UnusableReply as exc:
                problem = self._unusable(exc)
                continue
            self.usage.add(generation)
            model, problem = _validate(generation, response_model, schema)
            if model is not None:
                return model
        raise JudgeReplyError(problem)

    def _unusable(self, exc: UnusableReply) -> str:
        """Count the answered call behind an unusable reply; return what was wrong."""
        if isinstance(exc.generation, Generation):
            self.usage.add(exc.generation)
        return str(exc)

    async def _acall(self, messages: list[dict[str, str]], schema: dict[str, Any],
                     params: dict[str, Any]) -> Generation:
        agenerate = getattr(self.judge, "agenerate", None)
        try:
            if self.use_async and inspect.iscoroutinefunction(agenerate):
                generation: Generation = await agenerate(messages, schema=schema, **params)
                return generation
            return await asyncio.to_thread(_call_judge_sync, self.judge, messages, schema,
                                           params)
        except ModelCallError:
            raise
        except Exception as exc:  # a user's judge failing in its own way
            raise ModelCallError(f"the judge failed: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _messages(prompt: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": prompt}]

    def _params(self, attempt: int, model: type[BaseModel],
                schema: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens,
                                  "seed": self.seed + RETRY_SEED_STRIDE * attempt}
        if self._takes_parser:
            params["parse_reply"] = _reply_parser(model, schema)
        return params


def _call_judge_sync(judge: Judge, messages: list[dict[str, str]], schema: dict[str, Any],
                     params: dict[str, Any]) -> Generation:
    try:
        return judge.generate(messages, schema=schema, **params)
    except ModelCallError:
        raise
    except Exception as exc:  # a user's judge failing in its own way
        raise ModelCallError(f"the judge failed: {type(exc).__name__}: {exc}") from None


def _reply_parser(model: type[BaseModel], schema: dict[str, Any]) -> Any:
    """``parse_reply`` for our clients: strict JSON that validates into ``model``."""

    def parse(text: str, mode: str) -> Any:
        data = parse_json_reply(text, schema)
        try:
            model.model_validate(data)
        except ValidationError as exc:
            raise ValueError(_misfit(model, data, exc)) from None
        return data

    return parse


def _validate(generation: Generation, model: type[ModelT],
              schema: dict[str, Any]) -> tuple[ModelT | None, str]:
    """The reply as ``model``, or None and what is wrong with it."""
    data = generation.data
    if data is None:
        try:
            data = parse_json_reply(generation.text, schema)
        except ModelCallError as exc:
            return None, f"judge reply for {model.__name__}: {exc}"
    try:
        return model.model_validate(data), ""
    except ValidationError as exc:
        return None, _misfit(model, data, exc)


def _misfit(model: type[BaseModel], data: Any, exc: ValidationError) -> str:
    errors = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                       for e in exc.errors()[:3])
    shown = shorten(json.dumps(data, ensure_ascii=False, default=str))
    return f"judge reply does not fit {model.__name__} ({errors}): {shown!r}"


class EmbedderEmbeddings(BaseRagasEmbedding):
    """ragas's embeddings interface over one of our embedders (rows of ``embed(texts)``)."""

    def __init__(self, embedder: Embedder) -> None:
        super().__init__(cache=None)
        self.embedder = embedder

    def __repr__(self) -> str:
        return f"EmbedderEmbeddings({getattr(self.embedder, 'model_id', '?')!r})"

    def embed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        """Embed many texts in one call of the embedder."""
        rows = self.embedder.embed(list(texts))
        if len(rows) != len(texts):
            raise ValueError(f"embedder returned {len(rows)} rows for {len(texts)} texts")
        vectors = [[float(x) for x in row] for row in rows]
        if any(not math.isfinite(x) for row in vectors for x in row):
            raise ValueError("embedder returned a non-finite value")
        return vectors

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        """Embed one text."""
        return self.embed_texts([text])[0]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        """Embed one text in a worker thread (the model is CPU-bound)."""
        return (await self.aembed_texts([text]))[0]

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        """Embed many texts in one call, in a worker thread."""
        return await asyncio.to_thread(self.embed_texts, list(texts))


def metric(name: str, llm: JudgeLLM, embeddings: EmbedderEmbeddings | None) -> Any:
    """A ragas collections metric object by our registry name."""
    from ragas.metrics.collections import (
        AnswerRelevancy,
        ContextPrecision,
        ContextRecall,
        Faithfulness,
    )

    if name == "faithfulness":
        return Faithfulness(llm=llm)
    if name == "answer_relevancy":
        if embeddings is None:
            raise ValueError("answer_relevancy needs embeddings")
        # ragas asks the same prompt `strictness` times; at temperature 0 (and through the
        # response cache) that is one question repeated, so more would only cost calls.
        return AnswerRelevancy(llm=llm, embeddings=embeddings, strictness=1)
    if name == "context_precision":
        return ContextPrecision(llm=llm)  # with reference: usefulness for the ground truth
    if name == "context_recall":
        return ContextRecall(llm=llm)
    raise KeyError(name)


def score_inputs(name: str, *, question: str, answer: str, contexts: Sequence[str],
                 reference: str) -> dict[str, Any]:
    """The keyword arguments of one ragas metric's ``ascore``."""
    if name == "faithfulness":
        return {"user_input": question, "response": answer,
                "retrieved_contexts": list(contexts)}
    if name == "answer_relevancy":
        return {"user_input": question, "response": answer}
    if name in ("context_precision", "context_recall"):
        return {"user_input": question, "reference": reference,
                "retrieved_contexts": list(contexts)}
    raise KeyError(name)
