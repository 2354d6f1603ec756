"""``ragas[<id>]`` items: NormalizedSample records through real pytest sessions (pytester).

Subprocess runs (the real MiniLM embedder loads torch, which cannot load twice in one
process). The generator and the system are scripted in a conftest.py so that the tests
can see who was asked what; the judge, when there is one, is the loopback HTTP server
replying through :class:`tests.scripted_judge.ScriptedJudge` — a protocol test double,
not a judge: its verdicts are scripted so that the expected scores are known.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
import tomllib
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_ragbench.testing import LoopbackServer
from tests.conftest import REPO_ROOT
from tests.helpers import failure_section
from tests.project import RagbenchProject
from tests.scripted_judge import ScriptedJudge

GIVEN = {"id": "given", "kind": "ragas", "question": "Where is the Louvre?",
         "ground_truth": "The Louvre is in Paris.",
         "answer": "The Louvre is in Paris. It opened in 1793.",
         "contexts": ["The Louvre, in Paris, opened as a museum in 1793."],
         "doc_type": "clean_text", "question_type": "lookup", "difficulty": "easy"}
CONTEXTS_ONLY = {"id": "contexts_only", "question": "What does the config set the port to?",
                 "ground_truth": "The port is set to 8080.",
                 "contexts": ["port: 8080 # the API port", "log_level: info"],
                 "doc_type": "code_config", "question_type": "lookup", "difficulty": "easy"}
NO_CONTEXTS = {"id": "no_contexts", "question": "Which museum is in Paris?",
               "ground_truth": "The Louvre museum is in Paris.",
               "doc_type": "clean_text", "question_type": "lookup", "difficulty": "medium"}

# Scripted components; every call is logged to calls.log beside the conftest.
CONFTEST = """
import json
from pathlib import Path

import pytest
from pytest_ragbench.systems.protocols import Answer, Context, Generation

LOG = Path(__file__).with_name("calls.log")  # not .jsonl: that would be collected
ANSWER = {answer!r}


def log(**entry):
    with LOG.open("a") as f:
        f.write(json.dumps(entry) + "\\n")


class ScriptedGenerator:
    model_id = "scripted-generator"

    def generate(self, messages, **params):
        documents = [m["content"] for m in messages if m["content"].startswith("Document: ")]
        log(who="generator", question=messages[-1]["content"], documents=documents)
        if ANSWER is not None:
            return Generation(text=ANSWER, model=self.model_id)
        # copies the first document: an answer that is all context
        return Generation(text=documents[0].split("\\n", 1)[1], model=self.model_id)


class ScriptedSystem:
    def answer(self, question, history=None):
        log(who="system", question=question)
        return Answer("The Louvre museum is in Paris, France.",
                      (Context("louvre", "The Louvre museum is in Paris, France.", 0.9,
                               {{"source": "louvre.md"}}),), latency_s=0.01)


@pytest.fixture(scope="session")
def ragbench_llm():
    return ScriptedGenerator()


@pytest.fixture(scope="session")
def ragbench_system():
    return ScriptedSystem()
"""


def _project(pytester: pytest.Pytester, samples: list[dict[str, Any]] | None = None,
             answer: str | None = None) -> RagbenchProject:
    project = RagbenchProject(pytester).conftest(CONFTEST.format(answer=answer))
    project.cases_dir()
    if samples is not None:
        project.cases("samples.jsonl", samples)
    return project


def _calls(project: RagbenchProject) -> list[dict[str, Any]]:
    path = project.path / "calls.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def judge_server() -> Iterator[LoopbackServer]:
    script = ScriptedJudge(supported="Louvre", useful="Paris", attributed="Paris")
    with LoopbackServer(script, latency_s=0.3) as server:
        yield server


def test_missing_answers_and_contexts_are_supplied_and_unjudged_metrics_unscored(
        pytester: pytest.Pytester) -> None:
    broken = {k: v for k, v in CONTEXTS_ONLY.items() if k not in ("question", "id")}
    strict = {**GIVEN, "id": "strict", "thresholds": {"token_f1": 0.99}}
    project = _project(pytester, [GIVEN, broken, CONTEXTS_ONLY, NO_CONTEXTS, strict])
    result = project.runpytest_subprocess("--ragbench", "-q", "-rN", "-p", "no:cacheprovider")
    # the sample without a question is one failing item naming file, line and field;
    # the one with a case threshold fails with the evidence
    result.assert_outcomes(passed=3, failed=2)
    output = result.stdout.str()
    assert "samples.jsonl:2: field 'question'" in output
    assert "INTERNALERROR" not in output
    section = failure_section(output, "ragas: strict")
    assert "token_f1 = 0.6667, needs >= 0.99" in section
    assert "question: Where is the Louvre?" in section
    assert "ground_truth: The Louvre is in Paris." in section
    assert "answer: The Louvre is in Paris. It opened in 1793." in section
    assert "[1] The Louvre, in Paris, opened as a museum in 1793." in section
    assert "samples.jsonl:5" in section
    items = project.items_by_case()
    calls = _calls(project)
    # given: nobody asked; contexts only: the generator, reading the sample's contexts;
    # no contexts: the system under test
    assert [c["who"] for c in calls].count("generator") == 1
    generated = next(c for c in calls if c["who"] == "generator")
    assert generated["question"] == CONTEXTS_ONLY["question"]
    assert generated["documents"] == ["Document: context 1\nport: 8080 # the API port",
                                      "Document: context 2\nlog_level: info"]
    asked = [c["question"] for c in calls if c["who"] == "system"]
    assert NO_CONTEXTS["question"] in asked and GIVEN["question"] not in asked
    # (items.answer_request also prefetches a system answer for the contexts-only sample,
    # which this kind never uses: see the report to the lead.)
    assert items["given"]["evidence"]["answer from"] == "the sample"
    assert items["contexts_only"]["evidence"]["answer"] == "port: 8080 # the API port"
    assert "scripted-generator" in items["contexts_only"]["evidence"]["answer from"]
    assert items["no_contexts"]["evidence"]["contexts"].startswith(
        "[1] The Louvre museum is in Paris")
    for case_id in ("given", "contexts_only", "no_contexts"):
        item = items[case_id]
        assert item["status"] == "passed"
        assert {k: item["unscored"][k] for k in ("faithfulness", "answer_relevancy",
                                                 "context_precision", "context_recall")} == (
            dict.fromkeys(("faithfulness", "answer_relevancy", "context_precision",
                           "context_recall"), "no judge configured"))
        assert set(item["metrics"]) == {"semantic_similarity", "token_f1", "rouge",
                                        "lexical_faithfulness", "lexical_context_recall"}
    # the answer copied from the contexts is all context; the system's answer is the truth
    assert items["contexts_only"]["metrics"]["lexical_faithfulness"] == 1.0
    assert items["no_contexts"]["metrics"]["token_f1"] == pytest.approx(10 / 11)
    assert items["no_contexts"]["metrics"]["semantic_similarity"] > 0.9
    # the reference's words the, louvre, in, paris are in the context, "is" is not
    assert items["given"]["metrics"]["lexical_context_recall"] == pytest.approx(4 / 5)
    results = project.results()
    faithfulness = results["metrics"]["ragas"]["faithfulness"]
    # four items without a judge, and the malformed line's item: "item error"
    assert faithfulness["n"] == 0 and faithfulness["n_unscored"] == 5
    assert faithfulness["unscored_reasons"]["item error"] == 1
    assert results["metrics"]["ragas"]["semantic_similarity"]["n"] == 4
    assert "no judge configured" in result.stdout.str()
    assert set(results["breakdowns"]["ragas"]) >= {"doc_type", "question_type", "difficulty"}


def test_a_judged_run_through_the_loopback_judge_is_cached(
        pytester: pytest.Pytester, judge_server: LoopbackServer) -> None:
    project = _project(pytester, [GIVEN, CONTEXTS_ONLY, NO_CONTEXTS])
    args = ("--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-judge-url",
            judge_server.url, "--ragbench-judge-model", "scripted")
    first = project.runpytest_subprocess(*args)
    first.assert_outcomes(passed=3)
    items = project.items_by_case()
    given = items["given"]
    # "The Louvre is in Paris." is supported, "It opened in 1793." is not: ragas gives 1/2
    assert given["metrics"]["faithfulness"] == 0.5
    assert given["metrics"]["context_precision"] == 1.0  # the one context mentions Paris
    assert given["metrics"]["context_recall"] == 1.0  # the reference statement mentions Paris
    assert 0.0 < given["metrics"]["answer_relevancy"] <= 1.0
    assert given["unscored"] == {}
    # the copied config line mentions neither the Louvre nor Paris
    assert items["contexts_only"]["metrics"]["faithfulness"] == 0.0
    assert items["contexts_only"]["metrics"]["context_precision"] == 0.0
    assert items["no_contexts"]["metrics"]["faithfulness"] == 1.0
    assert given["usage"]["judge"]["calls"] >= 5
    requests = len(judge_server.requests)
    # The stage runs the items' judge calls together: more in flight than one item's 4.
    assert judge_server.max_in_flight > 4
    # Again under xdist (no stage: each item scores itself), on the same response cache.
    second = project.runpytest_subprocess(*args, "-n", "2")
    second.assert_outcomes(passed=3)
    assert len(judge_server.requests) == requests  # every reply came from the cache
    assert {k: v["metrics"] for k, v in project.items_by_case().items()} == {
        k: v["metrics"] for k, v in items.items()}
    results = project.results()
    assert results["metrics"]["ragas"]["faithfulness"]["n"] == 3
    assert results["usage"]["judge"]["cache_hits"] == results["usage"]["judge"]["calls"]
    judged = results["judge"]["metrics"]["ragas"]
    assert set(judged) == {"faithfulness", "answer_relevancy", "context_precision",
                           "context_recall"}
    assert all(e["n_items"] == 3 and e["n_unscored"] == 0 for e in judged.values())
    assert results["judge"]["failures"] == [] and results["failures"] == []
    assert items["given"]["judge"]["samples"]["faithfulness"] == [0.5]
    second.stdout.fnmatch_lines(["judged metrics (unscored limit 0.2):",
                                 "ragas.faithfulness * 3 * 3 * 0 * 0.0% * -"],
                                consecutive=False)
    # A second sample at the same temperature asks only for itself.
    third = project.runpytest_subprocess(*args, "--ragbench-judge-samples", "2",
                                         "--ragbench-judge-temperature", "0")
    third.assert_outcomes(passed=3)
    new = judge_server.requests[requests:]
    assert new and {r["seed"] for r in new} == {1}
    given = project.items_by_case()["given"]
    assert given["judge"]["samples"]["faithfulness"] == [0.5, 0.5]
    assert "faithfulness: 0.5, 0.5 (mean 0.5, sd 0)" in given["evidence"]["judge samples"]


def test_a_judge_whose_every_reply_is_unusable_fails_the_session(
        pytester: pytest.Pytester) -> None:
    project = _project(pytester, [GIVEN, CONTEXTS_ONLY])
    broken = dict.fromkeys(("StatementGeneratorOutput", "AnswerRelevanceOutput",
                            "ContextPrecisionOutput", "ContextRecallOutput"), "text")
    with LoopbackServer(ScriptedJudge(broken=broken)) as server:
        result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider",
                                              "--ragbench-judge-url", server.url,
                                              "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)  # the judge-free metrics still score every item
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["2 passed, 4 judged metrics unscored in *"])
    # CI sees what failed the session: one failed testcase per judged metric over the limit
    suite = project.junit()
    failed = sorted(case.get("name") for case in suite.iter("testcase")
                    if case.find("failure") is not None)
    assert failed == [f"judged[ragas.{m}]" for m in ("answer_relevancy", "context_precision",
                                                      "context_recall", "faithfulness")]
    assert suite.get("failures") == "4"
    for metric in ("answer_relevancy", "context_precision", "context_recall", "faithfulness"):
        result.stdout.fnmatch_lines([
            f"FAILED judged metric ragas.{metric}: 2/2 items unscored (100.0%), more than "
            "--ragbench-max-unscored 0.2; most common (2): judge call to model 'default': "
            "reply is not one JSON object: 'I am sorry, I cannot grade this.'"])
    given = project.items_by_case()["given"]
    assert given["metrics"]["token_f1"] > 0 and "faithfulness" in given["unscored"]
    assert given["usage"]["judge"]["calls"] >= 4  # answered, counted, though unusable


def test_an_exported_dataset_is_read_unchanged(pytester: pytest.Pytester) -> None:
    from pytest_ragbench.cli import main

    project = _project(pytester)
    config = project.path / "quota.toml"
    config.write_text(textwrap.dedent(f"""
        [build]
        seed = 3
        unanswerable_share = 0.25

        [[source]]
        adapter = "ragcsv"
        path = "{REPO_ROOT / 'test_cases' / 'nba_qa.ragcsv.csv'}"

        [[quota]]
        doc_type = "clean_text"
        count = 4
        """))
    exported = project.path / "test_cases" / "built.jsonl"
    assert main(["dataset", "build", "--config", str(config), "--output", str(exported),
                 "--manifest", str(project.path / "built.csv"), "--no-progress"]) == 0
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    items = project.items_by_case()
    assert set(items) == {line["id"] for line in lines}
    for line in lines:
        item = items[line["id"]]
        assert item["kind"] == "ragas"
        assert item["evidence"]["question"] == line["question"]
        assert item["evidence"]["ground_truth"] == line["ground_truth"]
        assert item["fields"]["doc_type"] == line["doc_type"] == "clean_text"
        assert item["fields"]["question_type"] == line["question_type"]
        assert item["fields"]["difficulty"] == line["difficulty"]
    generated = [c for c in _calls(project) if c["who"] == "generator"]
    assert len(generated) == 4  # each answered from its exported contexts
    first = next(line for line in lines if line["question"] == generated[0]["question"])
    assert [d.split("\n", 1)[1] for d in generated[0]["documents"]] == first["contexts"]


def _bundled(pytester: pytest.Pytester, answer: str | None) -> RagbenchProject:
    """The bundled 40 samples with the bundled ragas gates, and a scripted generator."""
    project = _project(pytester, answer=answer)
    shutil.copy(REPO_ROOT / "test_cases" / "ragas_samples.jsonl",
                project.path / "test_cases" / "ragas_samples.jsonl")
    gates = tomllib.loads((REPO_ROOT / "test_cases" / "ragbench.toml").read_text())["gates"]
    ragas_gates = {k: v for k, v in gates.items() if k.startswith("ragas.")}
    assert len(ragas_gates) >= 2
    project.gates("[gates]\n" + "".join(f'"{k}" = {v}\n' for k, v in ragas_gates.items()))
    return project


def test_the_bundled_gates_turn_a_broken_generator_red(pytester: pytest.Pytester) -> None:
    """A generator that always declines fails the session on the bundled gates."""
    project = _bundled(pytester, answer="I don't know.")
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=40)  # no item threshold: the means fail
    output = result.stdout.str()
    assert re.search(r"gate ragas\.semantic_similarity >= [\d.]+: MISSED", output)
    assert re.search(r"gate ragas\.token_f1 >= [\d.]+: MISSED", output)


def test_the_bundled_gates_pass_answers_drawn_from_the_contexts(
        pytester: pytest.Pytester) -> None:
    """The control: answers copied from each sample's first context pass every gate."""
    project = _bundled(pytester, answer=None)
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    output = result.stdout.str()
    assert re.search(r"gate ragas\.semantic_similarity >= [\d.]+: passed", output)
    assert "MISSED" not in output


def test_an_empty_answer_fails_the_item_and_is_not_scored() -> None:
    from pytest_ragbench.cases.model import RagasCase
    from pytest_ragbench.kinds.ragas.runner import Evaluation, Supplied, outcome
    from pytest_ragbench.metrics import Unscored
    from pytest_ragbench.metrics.judged import JUDGED_METRICS, NO_JUDGE, JudgedScores

    case = RagasCase(id="empty", kind="ragas", file="s.jsonl", line=1, question="Port?",
                     ground_truth="The port is 8080.", contexts=("port: 8080",))
    judged = JudgedScores(dict.fromkeys(JUDGED_METRICS, Unscored(NO_JUDGE)))
    result = outcome(case, Evaluation(Supplied(" ", case.contexts, "the generator g"), judged),
                     embedder=None)  # never embeds an empty answer
    assert result.errors == ["the answer is empty (from the generator g)"]
    assert result.metrics == {"lexical_context_recall": pytest.approx(2 / 4)}  # port, 8080
    assert result.unscored["semantic_similarity"] == "empty answer"
    assert result.unscored["faithfulness"] == NO_JUDGE
    assert result.evidence["answer"] == "(empty)"
