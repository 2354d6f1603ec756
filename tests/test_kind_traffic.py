"""The traffic kind through real pytest sessions: items, windows, drift, triggers, sampling."""

from __future__ import annotations

import datetime as dt
import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_ragbench.formats.traffic import hash_user
from pytest_ragbench.monitor import RetrievalLog
from tests.project import RagbenchProject

START = dt.datetime(2026, 11, 2, 8, 0, tzinfo=dt.UTC)  # a Monday: ISO week 45
TRIGGERS = """
[triggers]
"traffic.mean_similarity" = {below = 0.70, level = "critical"}
"traffic.no_results" = {above = 0.50, level = "major"}
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    return RagbenchProject(pytester).ini(ragbench_cases="test_cases")


def _interaction(rng: random.Random, week: int, drop: bool) -> dict:
    """One simulated request: week 3 retrieves worse and pleases fewer users when ``drop``."""
    bad = drop and week == 2
    empty = rng.random() < (0.25 if bad else 0.05)
    hits = [] if empty else [(f"passage {j} about topic {rng.randint(1, 9)}",
                              round(rng.betavariate(4 if bad else 8, 3), 4))
                             for j in range(3)]
    return {"hits": hits, "answer": "I don't know." if empty else "It is in the manual.",
            "feedback": rng.random() < (0.5 if bad else 0.85),
            "when": START + dt.timedelta(days=7 * week, minutes=rng.randint(0, 6 * 24 * 60))}


def _log_weeks(path: Path, per_week: int, drop: bool, seed: int = 1) -> None:
    rng = random.Random(seed)
    log = RetrievalLog(path)
    for week in range(3):
        for i in range(per_week):
            one = _interaction(rng, week, drop)
            assert log.log_retrieval(f"question {week}-{i} from alice@example.com",
                                     one["hits"], answer=one["answer"],
                                     user_feedback=one["feedback"], latency_s=0.3,
                                     timestamp=one["when"])


def test_each_interaction_is_an_item_and_a_bad_line_fails_alone(
        project: RagbenchProject) -> None:
    path = project.cases_dir() / "app.traffic.jsonl"
    _log_weeks(path, 4, drop=False)
    with path.open("a") as handle:
        handle.write(json.dumps({"timestamp": "2026-11-03T10:00:00Z", "retrieved": []}) + "\n")
    plain = project.run("--collect-only", "-q", "-p", "no:cacheprovider")
    assert "traffic[" not in plain.stdout.str()  # evaluation items: with --ragbench only
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=12, failed=1)
    result.stdout.fnmatch_lines(["*app.traffic.jsonl:13: field 'query': required field is "
                                 "missing*"])
    items = project.items_by_name()
    assert "traffic[app:1]" in items and "traffic[app:12]" in items
    first = items["traffic[app:1]"]
    assert first["metrics"]["retrieved_count"] in (0.0, 3.0)
    assert first["metrics"]["user_feedback"] in (0.0, 1.0)
    assert first["metrics"]["latency_ms"] == pytest.approx(300.0)
    traffic = project.results()["traffic"]
    assert [w["window"] for w in traffic["windows"]] == ["2026-W45", "2026-W46", "2026-W47"]
    assert list(traffic["metrics"][:4]) == ["retrieved_count", "mean_similarity",
                                            "user_feedback", "no_results"]
    assert traffic["labels"]["no_results"] == "queries with no results"


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["plain", "n2"])
def test_a_planted_drop_in_week_3_is_drift_and_raises_the_critical_trigger(
        project: RagbenchProject, workers: tuple[str, ...]) -> None:
    """The issue's check, from an app instrumented with OpenInference and the OTel SDK.

    Under xdist the windows, drift and triggers come from every worker's records.
    """
    traffic_app = pytest.importorskip("tests.traffic_app")
    rng = random.Random(3)
    path = project.cases_dir() / "app.otlp.jsonl"
    with traffic_app.traced_app(path) as app:
        for week in range(3):
            for i in range(60):
                one = _interaction(rng, week, drop=True)
                app.ask(f"question {week}-{i}", one["hits"], one["answer"], one["when"],
                        user=f"user-{i % 7}", feedback=one["feedback"])
    project.path.joinpath("ragbench.toml").write_text(TRIGGERS)
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-q", *workers,
                         "--ragbench-fail-on=drift,critical", "--junitxml=junit.xml")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["CRITICAL: traffic.mean_similarity = * in 2026-W47 is "
                                 "below 0.7"])
    document = project.results()
    traffic = document["traffic"]
    assert traffic["interactions"] == 180
    # latency_ms is the app's real timing: on a loaded machine it may drift in any week
    worse = {c["metric"]: c for c in traffic["drift"]
             if c["worse"] and c["metric"] != "latency_ms"}
    assert {"mean_similarity", "user_feedback"} <= set(worse)
    assert all(c["before"] == "2026-W46" and c["after"] == "2026-W47" for c in worse.values())
    assert worse["mean_similarity"]["p_holm"] < 0.05 and worse["mean_similarity"]["high"] < 0
    raised = {t["metric"]: t for t in document["traffic"]["triggers"] if t["raised"]}
    assert set(raised) == {"traffic.mean_similarity"}  # no_results stays under 0.50
    assert raised["traffic.mean_similarity"]["high"] < 0.70
    assert any(line.startswith("drift traffic.mean_similarity") for line in
               document["failures"])
    assert any(line.startswith("critical: traffic.mean_similarity") for line in
               document["failures"])
    names = {case.get("name"): case for case in
             ET.parse(project.path / "junit.xml").getroot().iter("testcase")}
    assert names["trigger[traffic.mean_similarity]"].find("failure") is not None
    assert names["trigger[traffic.no_results]"].find("failure") is None
    assert names["drift[traffic.mean_similarity]"].find("failure") is not None
    every = json.dumps(document) + (project.report_dir() / "items.jsonl").read_text()
    assert "user-3" not in every and hash_user("user-3") in every  # ids hashed
    html = project.html()
    assert "id=\"section-traffic\"" in html and "CRITICAL: traffic.mean_similarity" in html


def test_without_a_planted_drop_nothing_fails(project: RagbenchProject) -> None:
    _log_weeks(project.cases_dir() / "app.traffic.jsonl", 50, drop=False, seed=4)
    project.path.joinpath("ragbench.toml").write_text(TRIGGERS)
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-q",
                         "--ragbench-fail-on=drift,critical")
    assert result.ret == 0
    traffic = project.results()["traffic"]
    assert not [c for c in traffic["drift"] if c["worse"]]
    assert not [t for t in traffic["triggers"] if t["raised"]]


def test_redaction_masks_texts_before_anything_is_written(project: RagbenchProject) -> None:
    _log_weeks(project.cases_dir() / "app.traffic.jsonl", 2, drop=False)
    project.ini(ragbench_cases="test_cases", ragbench_redact=r"[\w.]+@[\w.]+")
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=6)
    written = "".join(p.read_text(errors="replace") for p in project.report_dir().rglob("*")
                      if p.is_file())
    assert "alice@example.com" not in written
    assert "question 0-0 from [redacted]" in written


def test_a_bad_window_or_trigger_is_a_clear_error(project: RagbenchProject) -> None:
    _log_weeks(project.cases_dir() / "app.traffic.jsonl", 1, drop=False)
    project.ini(ragbench_cases="test_cases", ragbench_window="fortnight")
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-q")
    assert result.ret != 0
    assert "ragbench_window must be one of day, week, month" in result.stderr.str() + \
        result.stdout.str()
    project.ini(ragbench_cases="test_cases")
    project.path.joinpath("ragbench.toml").write_text(
        '[triggers]\n"traffic.no_results" = {under = 0.2}\n')
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-q")
    assert result.ret != 0
    assert "give exactly one of below/above" in result.stderr.str() + result.stdout.str()


def test_a_sample_is_judged_and_estimated_for_the_whole_traffic(
        project: RagbenchProject) -> None:
    """--ragbench-sample 9 over three weeks of 20: 3 judged per week, the rest not asked."""
    from pytest_ragbench.testing import LoopbackServer
    from tests.scripted_judge import ScriptedJudge

    _log_weeks(project.cases_dir() / "app.traffic.jsonl", 20, drop=False, seed=6)
    with LoopbackServer(ScriptedJudge(supported="manual", grade=7)) as judge:
        result = project.runpytest_subprocess(
            "--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-judge-url", judge.url,
            "--ragbench-sample", "9")
        asked = {q for r in judge.requests for m in r.get("messages", [])
                 for q in [m.get("content", "")] if "question " in q}
    assert result.ret == 0, result.stdout.str()[-3000:]
    items = project.items_by_name()
    judged = {name: item for name, item in items.items()
              if "judge_relevance" in item["metrics"] or "judge_relevance" in item["unscored"]}
    assert len(judged) == 9
    windows = [item["evidence"]["window"] for item in judged.values()]
    assert sorted(set(windows)) == ["2026-W45", "2026-W46", "2026-W47"]
    assert all(windows.count(w) == 3 for w in set(windows))
    not_judged = [item["evidence"]["query"] for name, item in items.items()
                  if name not in judged]
    assert not any(query in text for query in not_judged for text in asked)
    traffic = project.results()["traffic"]
    assert traffic["sample"]["judged"] == 9
    relevance = traffic["overall"]["judge_relevance"]
    answered = sum(1 for item in items.values() if "declined" in item["metrics"])
    assert relevance["n"] == 9 and relevance["population"] == answered == 60
    week = traffic["windows"][0]["metrics"]["judge_relevance"]
    assert week["n"] == 3 and week["population"] == 20


def test_a_file_listed_in_ini_ragbench_traffic_is_collected_outside_the_case_paths(
        project: RagbenchProject) -> None:
    project.cases_dir()
    logs = project.path / "logs"
    logs.mkdir()
    _log_weeks(logs / "prod.jsonl", 1, drop=False)  # any name when listed
    project.ini(ragbench_cases="test_cases", ragbench_traffic="logs/prod.jsonl")
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)
    assert "traffic[prod:3]" in project.items_by_name()
