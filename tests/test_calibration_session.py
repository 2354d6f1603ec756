"""Judge calibration through real pytest sessions (pytester): labels in, ``judge_calibration`` out.

The end-to-end run scores WikiQA's 232 human-labelled question/answer pairs
(../shared/oracles/wikiqa-labels) as RAGAS samples given as they are: the answer is the
candidate sentence and ``ground_truth`` is set to the question, so ``semantic_similarity``
is the real MiniLM embedder's cosine of question and answer — an offline relevance proxy,
standing in for a judge. People's correct/incorrect labels of a held-out subset go in
a label file (and a few in the cases' ``human:`` field), and the session's PPI interval
is recomputed here from items.jsonl and the labels, independently of the plugin's code.

The other sessions use ``sql_ground_truth`` items (no model at all) and their ``match``
metric, labelled by a reviewer, to test label handling and the three xdist modes.
"""

from __future__ import annotations

import csv
import json
import math
import random
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from tests.conftest import oracle_file
from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject

GATE = 0.45  # on semantic_similarity; see test_wikiqa_labels_calibrate_the_proxy_end_to_end


def wikiqa_pairs() -> list[dict[str, Any]]:
    """The 232 labelled pairs: id, question, answer sentence and the people's 0/1 label."""
    path = oracle_file("wikiqa-labels", "ragas-wikiqa-first-half.csv")
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    pairs = []
    for index, row in enumerate(rows):
        for column, label in (("correct_answer", 1), ("incorrect_answer", 0)):
            pairs.append({"id": f"q{index:03d}-{column.split('_')[0]}", "label": label,
                          "question": row["question"], "answer": row[column]})
    return pairs


@pytest.fixture
def wikiqa_project(pytester: pytest.Pytester) -> tuple[RagbenchProject, dict[str, float]]:
    """232 RAGAS samples; labels of 60 in labels.jsonl, of 10 more in the cases themselves.

    Returns the project and the people's labels it carries, by case id.
    """
    pairs = wikiqa_pairs()
    held_out = random.Random(14).sample(pairs, 70)
    in_file, in_cases = held_out[:60], {p["id"] for p in held_out[60:]}
    project = RagbenchProject(pytester)
    samples = []
    for pair in pairs:
        sample = {"id": pair["id"], "kind": "ragas", "question": pair["question"],
                  "answer": pair["answer"], "contexts": [pair["answer"]],
                  "ground_truth": pair["question"]}
        if pair["id"] in in_cases:
            sample["human"] = {"semantic_similarity": pair["label"]}
        samples.append(sample)
    project.cases("wikiqa.jsonl", samples)
    project.gates(f'[gates]\n"ragas.semantic_similarity" = {GATE}\n')
    lines = [{"id": p["id"], "metric": "semantic_similarity", "score": p["label"]}
             for p in in_file]
    lines += [{"id": p["id"], "metric": "token_f1", "score": p["label"], "kind": "ragas",
               "annotator": "wikiqa"} for p in in_file]
    lines += [{"id": "q999-correct", "metric": "semantic_similarity", "score": 1},
              {"id": in_file[0]["id"], "metric": "semantic_similarity", "score": 1,
               "kind": "vector"}]
    (project.path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return project, {p["id"]: float(p["label"]) for p in held_out}


def ppi_by_hand(judge_all: list[float], judge_labeled: list[float],
                human_labeled: list[float]) -> tuple[float, float, float]:
    """The documented PPI++ estimate and 95% interval, written out with numpy and scipy."""
    f, fl, hl = np.array(judge_all), np.array(judge_labeled), np.array(human_labeled)
    rest = list(judge_all)
    for value in judge_labeled:  # the unlabeled items: all but one copy of each labeled score
        rest.remove(value)
    fu = np.array(rest)
    n, m = fl.size, fu.size
    lam = np.mean((hl - hl.mean()) * (fl - fl.mean())) / ((1 + n / m) * f.var(ddof=1))
    lam = min(1.0, max(0.0, lam))
    rect = hl - lam * fl
    mean = lam * fu.mean() + rect.mean()
    a, b = lam**2 * fu.var(ddof=1) / m, rect.var(ddof=1) / n
    df = (a + b) ** 2 / (a**2 / (m - 1) + b**2 / (n - 1))
    third = (lam**3 * np.mean((fu - fu.mean()) ** 3) / m**2
             + np.mean((rect - rect.mean()) ** 3) / n**2)
    q = sps.t.ppf(0.975, df)
    shift = third / (a + b) ** 1.5 * (2 * q * q + 1) / 6
    se = math.sqrt(a + b)
    return mean, mean - se * (q - shift), mean + se * (q + shift)


def test_wikiqa_labels_calibrate_the_proxy_end_to_end(
        wikiqa_project: tuple[RagbenchProject, dict[str, float]]) -> None:
    project, people = wikiqa_project
    result = project.runpytest_subprocess(
        "--ragbench", "-q", "-p", "no:cacheprovider", "--ragbench-gate=ci-lower",
        "--ragbench-judge-labels=labels.jsonl")
    document = project.results()
    items = project.items()
    assert len(items) == 232 and all(i["status"] == "passed" for i in items)

    # Independent computation: every item's proxy score from items.jsonl; the people's
    # labels from labels.jsonl and from the cases' human fields.
    scores = {m: {i["case_id"]: i["metrics"][m] for i in items}
              for m in ("semantic_similarity", "token_f1")}
    given: dict[str, dict[str, float]] = {"semantic_similarity": {}, "token_f1": {}}
    for line in (project.path / "labels.jsonl").read_text().splitlines():
        label = json.loads(line)
        if label["id"] in scores[label["metric"]] and label.get("kind", "ragas") == "ragas":
            given[label["metric"]][label["id"]] = float(label["score"])
    for line in (project.path / "test_cases" / "wikiqa.jsonl").read_text().splitlines():
        case = json.loads(line)
        for metric, score in case.get("human", {}).items():
            given[metric][case["id"]] = float(score)
    assert all(people[c] == v for by_id in given.values() for c, v in by_id.items())
    block = document["judge_calibration"]["ragas"]
    for metric, labeled in given.items():
        judge_all = list(scores[metric].values())
        judge_labeled = [scores[metric][c] for c in labeled]
        human = list(labeled.values())
        mean, low, high = ppi_by_hand(judge_all, judge_labeled, human)
        entry = block[metric]
        assert (entry["n_labeled"], entry["n_judged"]) == (len(labeled), 232)
        assert (entry["ppi_mean"], entry["ppi_ci_low"], entry["ppi_ci_high"]) == (
            pytest.approx(mean, abs=1e-9), pytest.approx(low, abs=1e-9),
            pytest.approx(high, abs=1e-9))
        assert entry["judge_mean"] == pytest.approx(np.mean(judge_all), abs=1e-9)
        assert entry["human_mean"] == pytest.approx(np.mean(human), abs=1e-12)
        assert entry["bias"] == pytest.approx(np.mean(judge_labeled) - np.mean(human),
                                              abs=1e-9)
        assert entry["agreement_method"] == "spearman" and entry["kappa"] is None
        assert entry["agreement"] == pytest.approx(
            sps.spearmanr(judge_labeled, human).statistic, abs=1e-9)
    assert block["semantic_similarity"]["n_labeled"] == 70  # 60 in the file, 10 in cases
    assert block["token_f1"]["n_labeled"] == 60

    # People marked exactly half the pairs correct; token F1 against the question is far
    # below that share, and the labels correct it.
    token = block["token_f1"]
    assert token["judge_mean"] < 0.2 and token["bias_ci_high"] < 0
    assert token["ppi_ci_low"] <= 0.5 <= token["ppi_ci_high"]

    labels = document["judge_labels"]
    assert (labels["file"]["lines"], labels["file"]["labels"], labels["file"]["errors"]) == (
        122, 122, [])
    assert (labels["file_labels_matched"], labels["case_labels_matched"]) == (120, 10)
    assert [u["reason"] for u in labels["unmatched"]["examples"]] == [
        "no item with id 'q999-correct' in this run",
        "no vector item with this id (its items: ragas)"]

    # --ragbench-gate ci-lower checks the calibrated metric on its gate bound (the more
    # pessimistic of the PPI lower bound and the labels' own). The proxy's own interval is
    # narrow and above the bound; the labels widen and lower it.
    metric = document["metrics"]["ragas"]["semantic_similarity"]
    similarity = block["semantic_similarity"]
    assert metric["ci_low"] >= GATE > similarity["ppi_ci_low"] >= similarity["ppi_gate_low"]
    (gate,) = document["gates"]
    assert gate["value"] == similarity["ppi_gate_low"] and gate["passed"] is False
    assert result.ret == 1
    assert any(line.startswith(f"FAILED gate ragas.semantic_similarity >= {GATE}: MISSED "
                               "(95% PPI lower bound ") and "from 70 human labels" in line
               for line in result.stdout.lines)
    result.stdout.fnmatch_lines([
        "judge calibration against human labels (PPI*",
        "kind*metric*labeled*judged*judge mean*human mean*agreement*kappa*PPI mean*",
        "ragas*semantic_similarity*70*232*rho*",
        "ragas*token_f1*60*232*rho*",
        "judge labels: labels.jsonl: 122 lines, 120 labeled an item; case files: 10 labels; "
        "70 items labeled; 2 labeled no item of this run:",
        "  labels.jsonl:121: id 'q999-correct', metric 'semantic_similarity': no item *",
    ])


# ---------------------------------------------------------------- label handling (no model)

SQL_CASES = """
kind: sql
cases:
  - id: lakers_points
    question: How many points did the Lakers score?
    expected_sql: SELECT points FROM scores WHERE team = 'Lakers'
    ground_truth_data: {points: 9500}
  - id: celtics_points
    question: How many points did the Celtics score?
    expected_sql: SELECT points FROM scores WHERE team = 'Celtics'
    ground_truth_data: {points: 9900}
    human: {match: 1}
  - id: heat_points
    question: How many points did the Heat score?
    expected_sql: SELECT points FROM scores WHERE team = 'Heat'
    ground_truth_data: {points: 1}
  - id: miami_city
    question: Which city do the Heat play in?
    expected_sql: SELECT city FROM teams WHERE name = 'Heat'
    ground_truth_data: {city: Miami}
  - id: boston_city
    question: Which city do the Celtics play in?
    expected_sql: SELECT city FROM teams WHERE name = 'Celtics'
    ground_truth_data: {city: Boston}
  - id: lakers_pct
    question: What was the Lakers' shooting percentage?
    expected_sql: SELECT pct FROM scores WHERE team = 'Lakers'
    ground_truth_data: {pct: 40.0}
"""
# A reviewer's verdicts on whether each case's ground truth is right: they agree with
# the check except on miami_city (the reviewer doubts it).
REVIEW = {"lakers_points": 1, "heat_points": 0, "miami_city": 0, "boston_city": 1,
          "lakers_pct": 0}


@pytest.fixture
def sql_project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("scores.yaml", SQL_CASES)
    (project.path / "review.jsonl").write_text("".join(
        json.dumps({"id": k, "metric": "match", "score": v}) + "\n" for k, v in REVIEW.items()))
    return project


@pytest.mark.parametrize("mode", XDIST_MODES, ids=["default", "n2", "no-xdist"])
def test_labels_reach_the_report_in_every_xdist_mode(sql_project: RagbenchProject,
                                                     mode: tuple[str, ...]) -> None:
    result = sql_project.runpytest_subprocess("-p", "no:cacheprovider", *mode,
                                              "--ragbench-judge-labels=review.jsonl")
    result.assert_outcomes(passed=4, failed=2)
    document = sql_project.results()
    entry = document["judge_calibration"]["sql_ground_truth"]["match"]
    # Check: 1 1 0 1 1 0 (alphabetical: boston, celtics, heat, lakers_pct, lakers_points,
    # miami); people: 1 1 0 0 1 0.
    judge = [1, 1, 0, 0, 1, 1]
    human = [1, 1, 0, 0, 1, 0]
    assert (entry["n_labeled"], entry["n_judged"], entry["scale"]) == (6, 6, "binary")
    assert entry["agreement"] == pytest.approx(5 / 6)
    assert entry["kappa"] == pytest.approx(2 / 3)  # p_o 5/6, p_e 1/2
    assert entry["bias"] == pytest.approx(1 / 6)
    # Every item labeled: the PPI interval is the t interval of the people's mean.
    t = sps.t.interval(0.95, 5, loc=np.mean(human), scale=sps.sem(human))
    assert (entry["ppi_ci_low"], entry["ppi_ci_high"]) == (pytest.approx(t[0]),
                                                           pytest.approx(t[1]))
    assert entry["judge_mean"] == pytest.approx(np.mean(judge))
    assert document["judge_labels"]["case_labels_matched"] == 1
    result.stdout.fnmatch_lines([
        "sql_ground_truth*match*6*6*0.667*0.500*0.833 exact*0.667*+0.167*",
        "judge labels: review.jsonl: 5 lines, 5 labeled an item; case files: 1 labels; "
        "6 items labeled"])


def test_bad_label_lines_fail_the_session_and_the_good_ones_count(
        sql_project: RagbenchProject) -> None:
    path = sql_project.path / "review.jsonl"
    path.write_text(path.read_text() + '{"id": "x", "metric": "match", "score": "yes"}\n'
                    "{oops\n")
    result = sql_project.runpytest_subprocess("-p", "no:cacheprovider",
                                              "--ragbench-judge-labels=review.jsonl")
    result.assert_outcomes(passed=4, failed=2)
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "FAILED judge labels: review.jsonl:6: field 'score': expected a finite number, "
        'got str "yes"',
        "FAILED judge labels: review.jsonl:7: invalid JSON: *",
    ])
    document = sql_project.results()
    assert document["judge_calibration"]["sql_ground_truth"]["match"]["n_labeled"] == 6
    assert len(document["judge_labels"]["file"]["errors"]) == 2


def test_a_missing_label_file_stops_the_session_before_it_runs(
        sql_project: RagbenchProject) -> None:
    result = sql_project.runpytest_subprocess("-p", "no:cacheprovider",
                                              "--ragbench-judge-labels=nowhere.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ragbench: --ragbench-judge-labels nowhere.jsonl: cannot "
                                 "read the file: *"])


def test_the_ini_key_names_a_label_file_beside_the_cases_which_is_not_collected(
        sql_project: RagbenchProject) -> None:
    (sql_project.path / "review.jsonl").rename(sql_project.path / "test_cases" / "labels.jsonl")
    sql_project.ini(ragbench_db_url="sqlite:///scores.db",
                    ragbench_judge_labels="test_cases/labels.jsonl")
    result = sql_project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=2)  # no invalid_case item from the label file
    document = sql_project.results()
    assert document["judge_calibration"]["sql_ground_truth"]["match"]["n_labeled"] == 6
    assert document["config"]["judge_labels"] == str(
        (sql_project.path / "test_cases" / "labels.jsonl").resolve())
