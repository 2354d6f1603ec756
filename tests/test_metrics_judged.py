"""Judge-based RAGAS metrics computed by ragas 0.4.3 through our judge and embedder.

The judge here is the loopback OpenAI-compatible server (a real HTTP server on 127.0.0.1)
replying through :class:`tests.scripted_judge.ScriptedJudge`. That is a protocol test
double, not a judge: it grades nothing, it answers ragas's structured prompts with
scripted verdicts so that the tests can tell what ragas must compute from them. What is
under test is the path prompt → our client (cache, retries) → reply validated into
ragas's model → ragas's own score. answer_relevancy uses the real MiniLM embedder.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.metrics import Unscored
from pytest_ragbench.metrics.judged import (
    JUDGED_METRICS,
    NO_JUDGE,
    ajudged_scores,
    judged_result,
    judged_scores,
)
from pytest_ragbench.metrics.registry import UnknownMetricError
from pytest_ragbench.systems.aio import LoopThread
from pytest_ragbench.systems.cache import Caches
from pytest_ragbench.systems.openai_client import OpenAICompatibleClient
from pytest_ragbench.testing import LoopbackServer
from tests.conftest import REPO_ROOT
from tests.scripted_judge import ScriptedJudge

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France. Paris has a famous tower. Lyon hosts the parliament."
CONTEXTS = ["Paris is the capital and most populous city of France (useful).",
            "Berlin is the capital of Germany."]
REFERENCE = "Paris is the capital of France. The Louvre is in Paris. Lyon is a city."


@pytest.fixture
def script() -> ScriptedJudge:
    return ScriptedJudge()


@pytest.fixture
def server(script: ScriptedJudge) -> Iterator[LoopbackServer]:
    with LoopbackServer(script) as srv:
        yield srv


@pytest.fixture(scope="module")
def embedder() -> Any:
    pytest.importorskip("sentence_transformers", reason="needs the extra 'embed'")
    from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


def judge_client(server: LoopbackServer, cache_dir: Path | None = None,
                 **kw: Any) -> OpenAICompatibleClient:
    cache = Caches.open(cache_dir).responses if cache_dir is not None else None
    return OpenAICompatibleClient(server.url, "judge-model", role="judge", cache=cache,
                                  backoff_base_s=0.01, **kw)


def score(server: LoopbackServer, embedder: Any, names: tuple[str, ...] = JUDGED_METRICS,
          cache_dir: Path | None = None, **inputs: Any) -> dict[str, Any]:
    client = judge_client(server, cache_dir)
    try:
        args = {"question": QUESTION, "answer": ANSWER, "contexts": CONTEXTS,
                "reference": REFERENCE, **inputs}
        return judged_scores(names, judge=client, embedder=embedder, **args)
    finally:
        client.close()


def test_faithfulness_is_ragas_share_of_supported_statements(
        server: LoopbackServer, script: ScriptedJudge) -> None:
    script.supported = "all"
    assert score(server, None, ("faithfulness",)) == {"faithfulness": 1.0}
    script.supported = "none"
    assert score(server, None, ("faithfulness",)) == {"faithfulness": 0.0}
    script.supported = "Paris"  # 2 of the answer's 3 statements mention Paris
    assert score(server, None, ("faithfulness",))["faithfulness"] == pytest.approx(2 / 3)
    # ragas's two steps: statements, then NLI verdicts on those statements
    assert script.seen[-2:] == ["StatementGeneratorOutput", "NLIStatementOutput"]
    nli = server.requests[-1]
    assert nli["response_format"]["json_schema"]["name"] == "NLIStatementOutput"
    assert nli["temperature"] == 0.0 and nli["max_tokens"] == 1024
    prompt = nli["messages"][-1]["content"]
    assert "judge the faithfulness of a series of statements" in prompt  # ragas's prompt
    assert "Lyon hosts the parliament." in prompt and "Berlin is the capital" in prompt


def test_context_precision_and_recall_follow_ragas_formulas(
        server: LoopbackServer, script: ScriptedJudge) -> None:
    names = ("context_precision", "context_recall")
    # verdicts [1, 0]: average precision 1.0; [0, 1]: 0.5 (ragas's ranking-aware AP)
    assert score(server, None, names)["context_precision"] == 1.0
    flipped = score(server, None, names, contexts=list(reversed(CONTEXTS)))
    assert flipped["context_precision"] == 0.5
    # 3 reference statements, 2 mention Paris: recall 2/3
    assert flipped["context_recall"] == pytest.approx(2 / 3)
    script.useful = "nothing matches this"
    assert score(server, None, ("context_precision",)) == {"context_precision": 0.0}
    precision_prompts = [r["messages"][-1]["content"] for r in server.requests
                         if r["response_format"]["json_schema"]["name"]
                         == "ContextPrecisionOutput"]
    assert all(REFERENCE in p for p in precision_prompts)  # judged against the reference


def test_answer_relevancy_embeds_with_the_real_minilm(
        server: LoopbackServer, script: ScriptedJudge, embedder: Any) -> None:
    script.question = QUESTION  # the judge "recovers" the exact question: cosine 1
    assert score(server, embedder, ("answer_relevancy",))["answer_relevancy"] == (
        pytest.approx(1.0, abs=1e-5))
    script.question = "Which capital city is the Louvre in?"
    close = score(server, embedder, ("answer_relevancy",))["answer_relevancy"]
    script.question = "How do I bake sourdough bread at home?"
    far = score(server, embedder, ("answer_relevancy",))["answer_relevancy"]
    assert 0.2 < close < 0.95 and far < close - 0.2
    vectors = embedder.embed([QUESTION, "How do I bake sourdough bread at home?"])
    assert far == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-5)
    script.noncommittal = 1  # ragas zeroes a noncommittal answer
    assert score(server, embedder, ("answer_relevancy",))["answer_relevancy"] == 0.0


def test_replies_are_cached_a_second_run_makes_no_call(
        server: LoopbackServer, script: ScriptedJudge, embedder: Any, tmp_path: Path) -> None:
    script.supported = "Paris"
    client = judge_client(server, tmp_path / "cache")
    first = judged_result(JUDGED_METRICS, question=QUESTION, answer=ANSWER, contexts=CONTEXTS,
                          reference=REFERENCE, judge=client, embedder=embedder)
    client.close()
    calls = len(server.requests)
    assert calls == 6  # statements, NLI, a question, 2 contexts, recall
    assert first.usage["judge"]["calls"] == 6 and first.usage["judge"]["cache_hits"] == 0
    again = judge_client(server, tmp_path / "cache")
    second = judged_result(JUDGED_METRICS, question=QUESTION, answer=ANSWER, contexts=CONTEXTS,
                           reference=REFERENCE, judge=again, embedder=embedder)
    again.close()
    assert len(server.requests) == calls  # zero HTTP calls
    assert second.scores == first.scores
    assert second.usage["judge"]["cache_hits"] == 6 and second.usage["judge"]["latency_s"] == []


@pytest.mark.parametrize(("broken", "reason"), [
    ("text", "not one JSON object"),
    ("shape", "does not fit NLIStatementOutput"),
])
def test_a_bad_reply_is_unscored_with_the_reason(server: LoopbackServer, script: ScriptedJudge,
                                                 broken: str, reason: str) -> None:
    script.broken = {"NLIStatementOutput": broken}
    scores = score(server, None, ("faithfulness", "context_recall"))
    assert isinstance(scores["faithfulness"], Unscored)
    assert reason in scores["faithfulness"].reason
    assert scores["context_recall"] == pytest.approx(2 / 3)  # the other metric still scores
    if broken == "shape":  # asked once more with another seed before giving up
        seeds = [r["seed"] for r in server.requests
                 if r["response_format"]["json_schema"]["name"] == "NLIStatementOutput"]
        assert seeds == [0, 1000]  # far from the seeds of repeated samples


def test_a_failing_judge_is_unscored_with_the_reason(server: LoopbackServer) -> None:
    server.fail(*["500"] * 3)
    client = judge_client(server, max_retries=2)
    try:
        scores = judged_scores(("context_recall",), question=QUESTION, answer=ANSWER,
                               contexts=CONTEXTS, reference=REFERENCE, judge=client,
                               embedder=None)
    finally:
        client.close()
    reason = scores["context_recall"]
    assert isinstance(reason, Unscored) and "failed after 3 attempts" in reason.reason


def test_no_statements_is_unscored_not_nan(server: LoopbackServer,
                                           script: ScriptedJudge) -> None:
    script.statements = []  # ragas returns NaN when the judge finds no statement
    scores = score(server, None, ("faithfulness",))
    assert scores == {"faithfulness": Unscored(
        "the judge found no statements in the answer (faithfulness undefined)")}


def test_missing_inputs_are_unscored_without_a_call(server: LoopbackServer) -> None:
    scores = score(server, None, JUDGED_METRICS, reference=None, answer=" ")
    assert scores == {"faithfulness": Unscored("no answer"),
                      "answer_relevancy": Unscored("no answer"),
                      "context_precision": Unscored("no reference answer"),
                      "context_recall": Unscored("no reference answer")}
    assert server.requests == []
    assert score(server, None, ("answer_relevancy",)) == {
        "answer_relevancy": Unscored("no embedder configured")}


def test_no_judge_gives_no_judge_configured_without_importing_ragas() -> None:
    code = ("import sys\n"
            "from pytest_ragbench.metrics.judged import judged_scores, NO_JUDGE\n"
            "s = judged_scores(['faithfulness', 'context_recall'], question='q', answer='a',\n"
            "                  contexts=['c'], reference='r', judge=None, embedder=None)\n"
            "print(sorted((k, v.reason) for k, v in s.items()))\n"
            "print('ragas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO_ROOT, check=True).stdout.splitlines()
    assert out == [str([("context_recall", NO_JUDGE), ("faithfulness", NO_JUDGE)]), "False"]


def test_unknown_metric_names_are_refused() -> None:
    with pytest.raises(UnknownMetricError, match="not a judged metric: rouge"):
        judged_scores(["rouge"], question="q", answer="a", contexts=[], reference=None,
                      judge=None, embedder=None)


def test_async_scores_of_many_items_share_the_judge_concurrency_limit(
        server: LoopbackServer) -> None:
    """Eight items at once on the judge's loop: calls overlap, never beyond the limit."""
    import pytest_ragbench.metrics.ragas_bridge  # noqa: F401  (ragas's import is not timed)

    server.latency_s = 0.25
    loop = LoopThread("test-judged")
    client = judge_client(server, concurrency=4, loop=loop)

    async def many() -> list[dict[str, Any]]:
        return await asyncio.gather(*(
            ajudged_scores(("context_recall",), question=f"{QUESTION} ({i})", answer=ANSWER,
                           contexts=CONTEXTS, reference=REFERENCE, judge=client, embedder=None)
            for i in range(8)))

    try:
        started = time.perf_counter()
        results = loop.run(many())
        elapsed = time.perf_counter() - started
    finally:
        client.close()
        loop.close()
    assert all(r["context_recall"] == pytest.approx(2 / 3) for r in results)
    assert server.max_in_flight == 4
    assert elapsed < 8 * 0.25 * 0.75  # serial would take 2 s; 4 at a time about 0.5 s


def test_the_blocking_variant_refuses_to_block_a_running_loop(server: LoopbackServer) -> None:
    client = judge_client(server)

    async def inside_a_loop() -> None:
        judged_scores(("context_recall",), question=QUESTION, answer=ANSWER, contexts=CONTEXTS,
                      reference=REFERENCE, judge=client, embedder=None)

    try:
        with pytest.raises(RuntimeError, match="await ajudged_scores"):
            asyncio.run(inside_a_loop())
    finally:
        client.close()
    assert server.requests == []


def test_bad_replies_are_never_cached_and_count_as_answered_calls(
        server: LoopbackServer, script: ScriptedJudge, tmp_path: Path) -> None:
    script.broken = {"NLIStatementOutput": "shape"}
    client = judge_client(server, tmp_path / "cache")
    try:
        result = judged_result(("faithfulness", "context_recall"), question=QUESTION,
                               answer=ANSWER, contexts=CONTEXTS, reference=REFERENCE,
                               judge=client, embedder=None)
    finally:
        client.close()
    assert isinstance(result.scores["faithfulness"], Unscored)
    # statements, NLI twice (the retry), recall: four replies, all answered and counted
    assert len(server.requests) == 4 and result.usage["judge"]["calls"] == 4
    store = Caches.open(tmp_path / "cache").responses.store
    assert store is not None and store.count() == 2  # the two NLI replies were not kept
    script.broken = {}
    again = judge_client(server, tmp_path / "cache")
    try:
        fixed = judged_scores(("faithfulness",), question=QUESTION, answer=ANSWER,
                              contexts=CONTEXTS, reference=REFERENCE, judge=again,
                              embedder=None)
    finally:
        again.close()
    assert fixed == {"faithfulness": 1.0}  # asked again, not served the bad reply
    assert len(server.requests) == 5  # only the NLI step: the statements came from the cache


def test_a_timeout_leaves_one_metric_unscored_and_the_others_scored(
        server: LoopbackServer) -> None:
    server.fail("hang")  # the first request never gets a reply
    client = judge_client(server, timeout_s=0.3, max_retries=0)
    try:
        scores = judged_scores(("context_precision", "context_recall"), question=QUESTION,
                               answer=ANSWER, contexts=CONTEXTS[:1], reference=REFERENCE,
                               judge=client, embedder=None)
    finally:
        client.close()
    unscored = {n: s.reason for n, s in scores.items() if isinstance(s, Unscored)}
    assert len(unscored) == 1 and "no reply within 0.3 s" in next(iter(unscored.values()))
    assert len(scores) == 2 and all(isinstance(s, float) for n, s in scores.items()
                                    if n not in unscored)


def test_repeated_judging_asks_each_sample_with_its_seed_and_takes_the_mean(
        server: LoopbackServer, script: ScriptedJudge, tmp_path: Path) -> None:
    from pytest_ragbench.metrics.repeated import JudgeSettings

    script.supported_by_seed = {0: "all", 1: "none", 2: "Paris"}
    client = judge_client(server, tmp_path / "cache")
    settings = JudgeSettings(samples=3, temperature=0.7)
    try:
        result = judged_result(("faithfulness",), question=QUESTION, answer=ANSWER,
                               contexts=CONTEXTS, reference=REFERENCE, judge=client,
                               embedder=None, settings=settings)
    finally:
        client.close()
    assert result.samples["faithfulness"] == [1.0, 0.0, pytest.approx(2 / 3)]
    assert result.scores["faithfulness"] == pytest.approx((1 + 0 + 2 / 3) / 3)
    assert sorted(r["seed"] for r in server.requests) == [0, 0, 1, 1, 2, 2]
    assert {r["temperature"] for r in server.requests} == {0.7}
    asked = len(server.requests)
    # A rerun asks nothing; a fourth sample asks only for itself.
    for samples, new_calls in ((3, 0), (4, 2)):
        again = judge_client(server, tmp_path / "cache")
        try:
            judged_result(("faithfulness",), question=QUESTION, answer=ANSWER,
                          contexts=CONTEXTS, reference=REFERENCE, judge=again, embedder=None,
                          settings=JudgeSettings(samples=samples, temperature=0.7))
        finally:
            again.close()
        assert len(server.requests) == asked + new_calls
        asked = len(server.requests)
    assert [r["seed"] for r in server.requests[-2:]] == [3, 3]


def test_repeated_samples_that_all_fail_give_the_most_common_reason(
        server: LoopbackServer, script: ScriptedJudge) -> None:
    from pytest_ragbench.metrics.repeated import JudgeSettings

    script.statements = []  # every sample: no statements, faithfulness undefined
    client = judge_client(server)
    try:
        result = judged_result(("faithfulness",), question=QUESTION, answer=ANSWER,
                               contexts=CONTEXTS, reference=REFERENCE, judge=client,
                               embedder=None, settings=JudgeSettings(samples=2))
    finally:
        client.close()
    assert result.scores["faithfulness"] == Unscored(
        "the judge found no statements in the answer (faithfulness undefined) (2 of 2 samples)")


def test_an_error_inside_ragas_leaves_only_that_metric_unscored(server: LoopbackServer) -> None:
    class BrokenEmbedder:
        model_id = "broken"

        def embed(self, texts: list[str]) -> Any:
            raise RuntimeError("out of memory")

    scores = score(server, BrokenEmbedder(), ("answer_relevancy", "context_recall"))
    assert scores["context_recall"] == pytest.approx(2 / 3)
    assert scores["answer_relevancy"] == Unscored(
        "ragas could not compute answer_relevancy: RuntimeError: out of memory")
