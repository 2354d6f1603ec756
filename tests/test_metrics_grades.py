"""Strict integer grades (RAGCSV accuracy 0-100, relevance 0-10) and judge_relevance.

The judge is the loopback OpenAI-compatible server on 127.0.0.1 with scripted replies: what
is under test is how a reply is asked for (the negotiated structured-output mode), which
replies are accepted, and that an unusable one is quoted, unscored and never cached.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.metrics.grades import GradeError, agrade, grade_schema, read_grade
from pytest_ragbench.metrics.registry import Unscored
from pytest_ragbench.metrics.relevance import ajudge_relevance, relevance_messages
from pytest_ragbench.metrics.repeated import JudgeSettings
from pytest_ragbench.systems.cache import Caches
from pytest_ragbench.systems.openai_client import OpenAICompatibleClient
from pytest_ragbench.systems.prompts import shorten
from pytest_ragbench.systems.protocols import Generation
from pytest_ragbench.testing import LoopbackServer

GRADE = [{"role": "user", "content": "Expected answer: Paris\n\nActual answer: Paris."}]


@pytest.mark.parametrize(("reply", "mode", "grade"), [
    ('{"score": 85}', "json_schema", 85),
    ('{ "score": 0 }', "json_object", 0),
    ('```json\n{"score": 100}\n```', "text", 100),
    ("85", "text", 85),
    (" 90\n", "text", 90),
])
def test_accepted_grades(reply: str, mode: str, grade: int) -> None:
    assert read_grade(reply, mode, high=100) == grade


@pytest.mark.parametrize(("reply", "mode"), [
    ("85", "json_object"),  # the integer alone only in plain-text mode
    ('{"score": 150}', "json_schema"),  # off the scale
    ('{"score": -5}', "json_object"),
    ('{"score": 72.5}', "json_schema"),  # not an integer
    ('{"score": "85"}', "json_schema"),
    ('{"score": true}', "json_schema"),
    ('{"score": 8, "reason": "close"}', "json_object"),  # not the object asked for
    ("The actual answer is 4, which ties with the expected answer.", "text"),
    ("The accuracy score is: 0.95 = 100%", "text"),
    ('The score is {"score": 95}', "text"),  # JSON in prose
    ("Score: 60", "text"), ("85/100", "text"), ("72.5", "text"), ("ninety", "text"), ("", "text"),
])
def test_refused_replies_are_quoted(reply: str, mode: str) -> None:
    with pytest.raises(GradeError, match="not a grade from 0 to 100") as info:
        read_grade(reply, mode, high=100)
    assert str(info.value).endswith(f": {shorten(reply)!r}")  # the reply, quoted


def test_a_long_reply_is_quoted_to_200_characters() -> None:
    with pytest.raises(GradeError) as info:
        read_grade("x" * 500, "text", high=10)
    assert str(info.value).endswith("): " + repr("x" * 200 + " … (300 more characters)"))


def test_the_scale_is_in_the_schema() -> None:
    schema = grade_schema(10)
    assert schema["properties"]["score"] == {"type": "integer", "minimum": 0, "maximum": 10,
                                             "enum": list(range(11))}
    assert schema["required"] == ["score"]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer('{"score": 7}') as srv:
        yield srv


def client_for(server: LoopbackServer, cache_dir: Path | None = None,
               **kw: Any) -> OpenAICompatibleClient:
    cache = Caches.open(cache_dir).responses if cache_dir is not None else None
    return OpenAICompatibleClient(server.url, "judge", role="judge", cache=cache,
                                  backoff_base_s=0.01, **kw)


@pytest.mark.parametrize(("formats", "mode"), [
    (("json_schema", "json_object"), "json_schema"),
    (("json_object",), "json_object"),
    ((), "text"),
])
def test_a_grade_is_asked_as_structured_output_in_the_negotiated_mode(
        server: LoopbackServer, formats: tuple[str, ...], mode: str) -> None:
    server.formats = formats
    client = client_for(server)
    try:
        grade = asyncio.run(agrade(client, GRADE, high=10, max_tokens=16, seed=2))
    finally:
        client.close()
    assert grade.score == 7 and grade.reply == '{"score": 7}'
    assert client.structured_output == mode
    last = server.requests[-1]
    assert last["max_tokens"] == 16 and last["seed"] == 2 and last["temperature"] == 0.0
    if mode == "json_schema":
        assert last["response_format"]["json_schema"]["schema"] == grade_schema(10)
    elif mode == "json_object":
        assert last["response_format"] == {"type": "json_object", "schema": grade_schema(10)}
    else:
        assert "response_format" not in last
        assert '"maximum": 10' in last["messages"][-1]["content"]


def test_in_text_mode_the_integer_alone_is_a_grade_and_prose_is_not(
        server: LoopbackServer, tmp_path: Path) -> None:
    server.formats = ()
    client = client_for(server, tmp_path / "cache")
    try:
        server.reply = "9"
        assert asyncio.run(agrade(client, GRADE, high=10, max_tokens=16)).score == 9
        server.reply = "I would say 9 out of 10."
        refused = asyncio.run(agrade(client, [{"role": "user", "content": "other"}], high=10,
                                     max_tokens=16))
    finally:
        client.close()
    assert refused.score == Unscored(
        "the judge's reply is not a grade from 0 to 10 ({\"score\": <integer>} or the integer "
        "alone): 'I would say 9 out of 10.'")
    assert refused.generation is not None  # the server answered: the call counts
    store = Caches.open(tmp_path / "cache").responses.store
    assert store is not None and store.count() == 1  # only the good grade is cached


def test_failures_and_refusals_never_raise(server: LoopbackServer) -> None:
    client = client_for(server, max_retries=0)
    try:
        server.fail("500")
        failed = asyncio.run(agrade(client, GRADE, high=100, max_tokens=16))
        server.reply = "I cannot grade this."
        refused = asyncio.run(agrade(client, GRADE, high=100, max_tokens=16))
    finally:
        client.close()
    assert isinstance(failed.score, Unscored) and "HTTP 500" in failed.score.reason
    assert failed.generation is None  # nothing answered
    assert isinstance(refused.score, Unscored)
    assert refused.score.reason.endswith("'I cannot grade this.'")


class OwnJudge:
    """A user's judge without ``parse_reply``: its reply is read after the call."""

    model_id = "own"

    def __init__(self, reply: str, data: Any = None, boom: bool = False) -> None:
        self.reply, self.data, self.boom = reply, data, boom
        self.calls: list[dict[str, Any]] = []

    def generate(self, messages: Any, *, schema: Any = None, **params: Any) -> Generation:
        self.calls.append({"schema": schema, **params})
        if self.boom:
            raise RuntimeError("quota exceeded")
        return Generation(text=self.reply, model=self.model_id, data=self.data)


@pytest.mark.parametrize(("judge", "score"), [
    (OwnJudge('{"score": 4}', data={"score": 4}), 4),
    (OwnJudge("4"), 4),  # plain text from a judge that did not parse: the integer alone
    (OwnJudge("4 of 10"), None),
    (OwnJudge('{"score": 40}', data={"score": 40}), None),
    (OwnJudge("", boom=True), None),
])
def test_a_users_own_judge(judge: OwnJudge, score: int | None) -> None:
    grade = asyncio.run(agrade(judge, GRADE, high=10, max_tokens=16))
    if score is None:
        assert isinstance(grade.score, Unscored)
    else:
        assert grade.score == score
    assert judge.calls[0]["schema"] == grade_schema(10) and "parse_reply" not in judge.calls[0]


def test_judge_relevance_is_the_mean_grade_over_ten_per_sample(server: LoopbackServer) -> None:
    grades = {"Paris is the capital of France.": 9, "Berlin is in Germany.": 2}

    def reply(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        text = prompt.split("Retrieved Context: ", 1)[1].split("\n", 1)[0]
        return json.dumps({"score": grades[text] + body["seed"]})  # samples differ by seed

    server.reply = reply
    client = client_for(server)
    try:
        result = asyncio.run(ajudge_relevance(
            client, "What is the capital of France?", list(grades),
            JudgeSettings(samples=2, temperature=0.7), noun="context"))
    finally:
        client.close()
    assert result.samples == [pytest.approx(11 / 20), pytest.approx(13 / 20)]
    assert result.score == pytest.approx(12 / 20)
    assert result.listing() == "[1] 9, 10 /10\n[2] 2, 3 /10"
    assert len(server.requests) == 4 and {r["temperature"] for r in server.requests} == {0.7}
    prompt = server.requests[0]["messages"][0]["content"]
    assert prompt.startswith("Query: What is the capital of France?\nRetrieved Context: ")
    assert "Is this context relevant to answering the query?" in prompt
    assert "- 0-3: Irrelevant\n- 4-6: Partially relevant\n- 7-10: Highly relevant" in prompt


def test_judge_relevance_is_unscored_when_a_context_has_no_grade(
        server: LoopbackServer) -> None:
    server.reply = lambda body: ('{"score": 12}' if "Berlin" in body["messages"][-1]["content"]
                                 else '{"score": 8}')
    client = client_for(server)
    try:
        result = asyncio.run(ajudge_relevance(client, "q", ["Paris.", "Berlin."],
                                              JudgeSettings()))
        nothing = asyncio.run(ajudge_relevance(client, "q", [], JudgeSettings()))
    finally:
        client.close()
    assert isinstance(result.score, Unscored) and "'{\"score\": 12}'" in result.score.reason
    assert "from 0 to 10" in result.score.reason
    assert nothing.score == Unscored("nothing was retrieved")
    assert asyncio.run(ajudge_relevance(None, "q", ["x"], JudgeSettings())).score == Unscored(
        "no judge configured")


def test_the_memory_prompt_is_seed_004s() -> None:
    content = relevance_messages("What did X say?", "X said Y.")[0]["content"]
    assert content.startswith("Query: What did X say?\nRetrieved Memory: X said Y.\n\n"
                              "Is this memory relevant to answering the query?\nRate 0-10 where:")
