"""Judged metrics through a real model server: llama-cpp-python's own, with the bundled SmolLM2.

``python -m llama_cpp.server`` answers HTTP 500 to ``response_format: json_schema`` and
accepts ``json_object`` with a schema (its grammar): the client must find that out once
and keep it. A handful of items (SmolLM2 is slow on a shared 2-core machine): two ragas
samples (one with its answer, one answered by the server as generator) and two RAGCSV
rows, answered and graded by the server. Every judged value must come back scored or
unscored for the metric's own reason — never lost to transport or format — the RAGCSV
grades scored, and the usage line must count exactly the calls the server answered.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.llama_server import LlamaServer, llama_server  # noqa: F401  (the fixture)
from tests.project import RagbenchProject

# Reasons that belong to a metric itself: ragas finds its score undefined (NaN) when the
# judge lists no statements. Anything else (a timeout, a refused format, a reply that is
# not the JSON asked for) would be a value lost to transport or format.
OWN_REASONS = ("the judge found no statements in the answer",
               "the judge classified no statements of the reference")
SAMPLES = ("ct_rookie_of_year_2024", "ct_in_season_tournament_prize")
ANSWER = "Victor Wembanyama won the 2024 Rookie of the Year award. The vote was unanimous."


def _project(pytester: pytest.Pytester) -> RagbenchProject:
    """Two ragas samples and two RAGCSV rows from the bundled cases."""
    project = RagbenchProject(pytester)
    bundled = {s["id"]: s for s in map(json.loads, (REPO_ROOT / "test_cases" /
                                                    "ragas_samples.jsonl").open())}
    given = {**bundled[SAMPLES[0]], "answer": ANSWER}
    asked = dict(bundled[SAMPLES[1]])  # contexts only: the server answers as generator
    for sample in (given, asked):
        sample["contexts"] = sample["contexts"][:1]
    project.cases("samples.jsonl", [given, asked])
    rows = (REPO_ROOT / "test_cases" / "nba_qa.ragcsv.csv").read_text().splitlines(True)[:2]
    project.cases("nba.ragcsv.csv", "".join(rows))
    return project


def test_judged_items_through_llama_cpp_servers_own_server(
        pytester: pytest.Pytester, llama_server: LlamaServer) -> None:  # noqa: F811
    project = _project(pytester)
    args = ("--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-cache=cache",
            "--ragbench-llm-url", llama_server.url, "--ragbench-judge-url", llama_server.url,
            "--ragbench-concurrency", "1",
            # one request at a time on a shared machine: give a slow reply time to arrive
            "--ragbench-timeout=900")
    before = llama_server.statuses()
    result = project.runpytest_subprocess(*args)
    after = llama_server.statuses()
    result.assert_outcomes(passed=4)  # no item thresholds: the scores are recorded
    output = result.stdout.str()
    items = project.items_by_case()
    results = project.results()

    # Every judged value is scored, or undefined by the metric itself.
    judged = 0
    for item in items.values():
        assert item["judge"]["structured_output"] == "json_object"  # negotiated, kept
        for metric in item["judge"]["metrics"]:
            judged += 1
            if metric not in item["metrics"]:
                reason = item["unscored"][metric]
                assert reason.startswith(OWN_REASONS), f"{item['case_id']}.{metric}: {reason}"
    assert judged == 2 * 4 + 2  # four ragas metrics per sample, one grade per row
    for row in ("nba:1", "nba:2"):  # the RAGCSV grades are scored
        assert 0 <= items[row]["metrics"]["accuracy"] <= 100
        assert re.fullmatch(r'\{ ?"score": ?\d+ ?\}', items[row]["evidence"]["judge_reply"])
    assert items[SAMPLES[1]]["usage"]["generator"]["calls"] == 1  # answered by the server

    # The usage line counts exactly the calls the server answered: the json_schema
    # request it refused (HTTP 500) once, every other request answered (200).
    usage = results["usage"]
    answered = usage["generator"]["calls"] + usage["judge"]["calls"]
    assert usage["generator"]["cache_hits"] == usage["judge"]["cache_hits"] == 0
    assert after - before == {200: answered, 500: 1}
    assert usage["generator"]["calls"] == 3  # two rows, one sample
    result.stdout.fnmatch_lines([f"judge  *{usage['judge']['calls']}  *"])
    assert usage["judge"]["calls"] >= judged  # at least one call per asked metric

    # The served model of every answered call is recorded per role: this server names the
    # model asked for, so no warning.
    for role in ("generator", "judge"):
        assert usage[role]["models"] == {"default": {"default": usage[role]["calls"]}}
    assert "WARNING served model" not in output

    # No silent pass: a judged metric with more than 20% unscored fails the session.
    over = [f"{k}.{m}" for k, ms in results["judge"]["metrics"].items()
            for m, e in ms.items() if e["unscored_share"] > 0.2]
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if over else pytest.ExitCode.OK)
    for name in over:
        assert f"FAILED judged metric {name}: " in output

    # A rerun asks the server nothing: every reply comes from the cache.
    again = project.runpytest_subprocess(*args)
    again.assert_outcomes(passed=4)
    assert llama_server.statuses() == after
    def scores(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
        return {case: ({m: v for m, v in item["metrics"].items() if m != "total_time_ms"},
                       item["unscored"]) for case, item in found.items()}

    assert scores(project.items_by_case()) == scores(items)  # (model time is 0 from the cache)


def test_logged_traffic_is_judged_through_llama_cpp_servers_own_server(
        pytester: pytest.Pytester, llama_server: LlamaServer) -> None:  # noqa: F811
    """Two logged interactions judged by the real server: every judged value comes back."""
    project = RagbenchProject(pytester).ini(ragbench_cases="test_cases")
    asked = (("Who won the 2024 Rookie of the Year award?", ANSWER),
             ("Was the 2024 Rookie of the Year vote unanimous?", "Yes, it was unanimous."))
    lines = [{"timestamp": f"2026-11-0{day}T10:00:00Z", "query": query,
              "retrieved": [{"content": "Victor Wembanyama won the 2024 NBA Rookie of the "
                                        "Year award by unanimous vote.", "score": 0.82}],
              "answer": answer, "user_feedback": True}
             for day, (query, answer) in zip((3, 4), asked, strict=True)]
    project.cases("app.traffic.jsonl", lines)
    before = llama_server.statuses()
    result = project.runpytest_subprocess(
        "--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-cache=cache",
        "--ragbench-judge-url", llama_server.url, "--ragbench-concurrency", "1",
        "--ragbench-timeout=900")
    after = llama_server.statuses()
    result.assert_outcomes(passed=2)
    items = project.items_by_name()
    for name, item in items.items():
        assert set(item["judge"]["metrics"]) == {"faithfulness", "answer_relevancy",
                                                 "judge_relevance"}
        for metric in item["judge"]["metrics"]:
            if metric not in item["metrics"]:
                reason = item["unscored"][metric]
                assert reason.startswith(OWN_REASONS), f"{name}.{metric}: {reason}"
        assert 0 <= item["metrics"]["judge_relevance"] <= 1
    results = project.results()
    usage = results["usage"]["judge"]
    assert usage["calls"] >= 2 * 3  # at least one call per judged metric and interaction
    # Every call the usage counts reached the server, but for replies from the cache.
    assert after[200] - before[200] == usage["calls"] - usage["cache_hits"]
    assert results["traffic"]["overall"]["judge_relevance"]["n"] == 2
    # No silent pass: a judged metric with more than 20% unscored fails the session.
    over = [f"{k}.{m}" for k, ms in results["judge"]["metrics"].items()
            for m, e in ms.items() if e["unscored_share"] > 0.2]
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if over else pytest.ExitCode.OK)
