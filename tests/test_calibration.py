"""Judge calibration from records built directly: labels, matching, statistics, gates, terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import cohen_kappa_score

from pytest_ragbench.cases import load_file
from pytest_ragbench.cases.labels import Label, LabelFile, read_labels
from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.render import terminal
from pytest_ragbench.results import calibration, document, gates
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.stats import core as stats
from tests.project import schema_problems

KEYS = {"n_labeled", "n_judged", "judge_mean", "human_mean", "agreement", "kappa", "bias",
        "bias_ci_low", "bias_ci_high", "ppi_mean", "ppi_ci_low", "ppi_ci_high", "ppi_method",
        "ppi_lambda", "ppi_strata", "ppi_gate_low", "ppi_gate_high", "ppi_gate_method"}


def record(case_id: str, metrics: dict[str, float], *, kind: str = "ragas",
           system: str | None = None, **extra: Any) -> ItemRecord:
    label = f"{system}-{case_id}" if system else case_id
    return ItemRecord(nodeid=f"cases.yaml::{kind}[{label}]", kind=kind, case_kind=kind,
                      case_id=case_id, file="cases.yaml", line=1, status="passed",
                      system=system, metrics=metrics, **extra)


def build(records: list[ItemRecord], labels: list[Label] | None = None,
          errors: list[Any] | None = None, **settings: Any) -> dict[str, Any]:
    config = RagbenchConfig(rootpath=Path("."), **settings)
    gate_list = gates.parse_gates(config.gates) if config.gates else []
    label_file = None
    if labels is not None:
        label_file = LabelFile(Path("labels.jsonl"), list(labels), list(errors or []),
                               len(labels) + len(errors or []))
    result = document.build(records, config, run={"id": "r", "time": "t"}, components={},
                            gate_list=gate_list, labels=label_file)
    assert schema_problems(result) == []  # judge_calibration and judge_labels included
    return result


def biased_run(n: int = 120, labeled: int = 40, seed: int = 5
               ) -> tuple[list[ItemRecord], list[Label], np.ndarray, np.ndarray]:
    """A judge scoring too low, and people's 0/1 labels of the first ``labeled`` items.

    The items' threshold is 0.55.
    """
    rng = np.random.default_rng(seed)
    human = (rng.random(n) < 0.7).astype(float)
    judge = np.clip(0.25 + 0.45 * human + rng.normal(0, 0.1, n), 0, 1)
    records = [record(f"c{i:03d}", {"faithfulness": float(judge[i])},
                      thresholds={"faithfulness": 0.55}) for i in range(n)]
    labels = [Label(f"c{i:03d}", "faithfulness", float(human[i]), where=f"labels.jsonl:{i + 1}")
              for i in range(labeled)]
    return records, labels, judge, human


# ---------------------------------------------------------------- the label file


def test_label_lines_are_read_and_bad_ones_named_by_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    lines = [
        {"id": "a", "metric": "faithfulness", "score": 1},
        {"id": 7, "metric": "accuracy", "score": 85.5, "kind": "ragcsv", "system": "bm25",
         "annotator": "kim"},
        "not json",
        ["a", "faithfulness", 1],
        {"metric": "faithfulness", "score": 1},
        {"id": "b", "metric": "faithfulness", "score": "high"},
        {"id": "b", "metric": "faithfulness", "score": True},
        {"id": "b", "metric": "faithfulness", "scroe": 1, "score": 0},
        {"id": "b", "metric": "", "score": 0},
    ]
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    path.write_text(text + '\n\n{"id": "c", "metric": "m", "score": NaN}\n')
    result = read_labels(path, "labels.jsonl")
    assert result.labels == [
        Label("a", "faithfulness", 1.0, where="labels.jsonl:1"),
        Label("7", "accuracy", 85.5, kind="ragcsv", system="bm25", where="labels.jsonl:2")]
    assert result.lines == 10
    assert [str(e) for e in result.errors] == [
        "labels.jsonl:3: invalid JSON: Expecting value (column 1)",
        'labels.jsonl:4: expected an object {"id": ..., "metric": ..., "score": ...}',
        "labels.jsonl:5: field 'id': required field is missing",
        "labels.jsonl:6: field 'score': expected a finite number, got str \"high\"",
        "labels.jsonl:7: field 'score': expected a finite number, got bool true",
        "labels.jsonl:8: field 'scroe': unknown field (did you mean 'score'?)",
        "labels.jsonl:9: field 'metric': expected non-empty text, got str \"\"",
        "labels.jsonl:11: field 'score': expected a finite number, got float NaN",
    ]


def test_a_missing_label_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--ragbench-judge-labels .*nope\.jsonl: cannot read"):
        read_labels(tmp_path / "nope.jsonl")


def test_a_case_carries_human_labels_of_any_kind(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    base = {"question": "Who wrote it?", "ground_truth": "Stein."}
    path.write_text("".join(json.dumps({**base, **x}) + "\n" for x in [
        {"id": "a", "kind": "ragas", "human": {"faithfulness": 1}},
        {"id": "b", "human": {"semantic_similarity": 0.5}},
        {"id": "c", "human": {"semantic_similarity": "high"}},
        {"id": "d", "human": 3}]))
    result = load_file(path)
    assert [(c.id, c.kind, c.human) for c in result.cases] == [
        ("a", "ragas", {"faithfulness": 1.0}), ("b", "vector", {"semantic_similarity": 0.5})]
    messages = [str(e) for e in result.errors]
    assert messages[0].endswith(":3: field 'human': the score for 'semantic_similarity' must "
                                "be a finite number, got str 'high'")
    assert messages[1].endswith(":4: field 'human': expected a mapping of metric -> a "
                                "person's score, got int 3")


# ---------------------------------------------------------------- matching labels to items


def test_labels_match_by_id_kind_system_and_metric_and_the_rest_are_reported() -> None:
    records = [record("a", {"faithfulness": 0.8, "token_f1": 0.5}, system="x"),
               record("a", {"faithfulness": 0.6}, system="y"),
               record("a", {"accuracy": 70.0}, kind="ragcsv"),
               record("b", {}, unscored={"faithfulness": "no judge configured"}),
               record("c", {"faithfulness": 0.2}, human={"faithfulness": 0.0, "recall": 1.0}),
               ItemRecord(nodeid="cases.yaml::ragas[e]", kind="ragas", case_kind="ragas",
                          case_id="e", file="cases.yaml", line=9, status="error")]
    labels = [Label("a", "faithfulness", 1.0, where="l:1"),               # both systems
              Label("a", "faithfulness", 0.0, system="y", where="l:2"),   # y again: averaged
              Label("a", "accuracy", 90.0, kind="ragcsv", where="l:3"),
              Label("b", "faithfulness", 1.0, where="l:4"),               # unscored: matched
              Label("zz", "faithfulness", 1.0, where="l:5"),
              Label("a", "faithfulness", 1.0, kind="vector", where="l:6"),
              Label("a", "faithfulness", 1.0, system="z", where="l:7"),
              Label("a", "faithfulnes", 1.0, where="l:8"),
              Label("e", "faithfulness", 1.0, where="l:9")]
    matching = calibration.match(records, labels)
    assert matching.human == {
        "cases.yaml::ragas[x-a]": {"faithfulness": 1.0},
        "cases.yaml::ragas[y-a]": {"faithfulness": 0.5},
        "cases.yaml::ragcsv[a]": {"accuracy": 90.0},
        "cases.yaml::ragas[b]": {"faithfulness": 1.0},
        "cases.yaml::ragas[c]": {"faithfulness": 0.0}}
    assert (matching.file_labels, matching.case_labels, matching.several) == (4, 1, 1)
    assert [(u.where, u.reason) for u in matching.unmatched] == [
        ("l:5", "no item with id 'zz' in this run"),
        ("l:6", "no vector item with this id (its items: ragas, ragcsv)"),
        ("l:7", "no item of system 'z' with this id (its systems: (default), x, y)"),
        ("l:8", "its items have no metric 'faithfulnes' (did you mean 'faithfulness'?)"),
        ("l:9", "its items recorded no metric (status: error)"),
        ("cases.yaml:1", "its items have no metric 'recall'")]


# ---------------------------------------------------------------- the statistics of a cell


def test_a_continuous_metric_is_compared_by_rank_and_corrected_by_ppi() -> None:
    records, labels, judge, human = biased_run()
    doc = build(records, labels)
    entry = doc["judge_calibration"]["ragas"]["faithfulness"]
    assert set(entry) >= KEYS
    f_lab, h_lab = judge[:40], human[:40]
    assert (entry["n_labeled"], entry["n_judged"], entry["scale"]) == (40, 120, "continuous")
    assert entry["judge_mean"] == pytest.approx(judge.mean())
    assert entry["human_mean"] == pytest.approx(h_lab.mean())
    assert entry["agreement_method"] == "spearman" and entry["kappa"] is None
    assert entry["agreement"] == pytest.approx(sps.spearmanr(f_lab, h_lab).statistic)
    bias = stats.t_ci(f_lab - h_lab)
    assert (entry["bias"], entry["bias_ci_low"], entry["bias_ci_high"]) == (
        pytest.approx(bias.mean), pytest.approx(bias.low), pytest.approx(bias.high))
    assert entry["bias_ci_high"] < 0  # the judge is too low, and the labels show it
    ppi = stats.ppi_mean_ci(judge, f_lab, h_lab)
    assert (entry["ppi_mean"], entry["ppi_ci_low"], entry["ppi_ci_high"]) == (
        pytest.approx(ppi.mean), pytest.approx(ppi.low), pytest.approx(ppi.high))
    # The correction moves the estimate out of the judge's own interval.
    assert entry["ppi_mean"] > doc["metrics"]["ragas"]["faithfulness"]["ci_high"]
    assert doc["judge_labels"]["file_labels_matched"] == 40
    assert doc["judge_labels"]["unmatched"] == {"count": 0, "examples": []}


def test_binary_and_ordinal_grades_get_exact_agreement_and_cohens_kappa() -> None:
    rng = np.random.default_rng(8)
    human = rng.integers(1, 6, 50).astype(float)  # 1-5 grades
    judge = np.clip(human + rng.integers(-1, 2, 50), 1, 5)
    records = [record(f"c{i:02d}", {"grade": float(judge[i]), "pass": float(judge[i] >= 3)})
               for i in range(50)]
    labels = [Label(f"c{i:02d}", "grade", float(human[i])) for i in range(50)]
    labels += [Label(f"c{i:02d}", "pass", float(human[i] >= 3)) for i in range(50)]
    block = build(records, labels)["judge_calibration"]["ragas"]
    grade, passed = block["grade"], block["pass"]
    assert (grade["scale"], passed["scale"]) == ("ordinal", "binary")
    assert grade["agreement_method"] == passed["agreement_method"] == "exact"
    assert grade["agreement"] == pytest.approx(np.mean(judge == human))
    assert grade["kappa"] == pytest.approx(cohen_kappa_score(judge, human))
    assert passed["kappa"] == pytest.approx(cohen_kappa_score(judge >= 3, human >= 3))


@pytest.mark.parametrize(("values", "scale"), [
    ([0.0, 1.0, 1.0], "binary"), ([1.0, 2.0, 5.0], "ordinal"), ([0.1, 0.7, 1.0], "ordinal"),
    ([0.0, 25.0, 50.0, 75.0, 100.0], "ordinal"), ([0.33, 0.5], "continuous"),
    ([float(v) for v in range(12)], "continuous")])
def test_scale_of_grades(values: list[float], scale: str) -> None:
    assert calibration.scale_of(values) == scale


def test_kappa_is_undefined_when_both_raters_never_vary() -> None:
    assert calibration.cohen_kappa([1.0, 1.0], [1.0, 1.0]) is None
    assert calibration.cohen_kappa([1.0, 0.0], [1.0, 1.0]) == pytest.approx(0.0)


def test_a_labeled_item_left_unscored_is_counted_apart() -> None:
    records = [record("a", {"faithfulness": 0.9}), record("b", {"faithfulness": 0.2}),
               record("c", {}, unscored={"faithfulness": "judge timed out"})]
    labels = [Label("a", "faithfulness", 1.0), Label("c", "faithfulness", 1.0)]
    entry = build(records, labels)["judge_calibration"]["ragas"]["faithfulness"]
    assert (entry["n_labeled"], entry["n_judged"], entry["n_labeled_unscored"]) == (1, 2, 1)
    assert entry["bias"] == pytest.approx(-0.1)
    assert entry["ppi_mean"] is None and entry["bias_ci_low"] is None
    assert entry["note"] == "intervals need at least 2 labeled items"


def test_several_systems_get_one_entry_each() -> None:
    records, labels = [], []
    for i in range(30):
        for system, shift in (("a", 0.0), ("b", 0.2)):
            records.append(record(f"c{i:02d}", {"faithfulness": 0.3 + shift + 0.01 * i},
                                  system=system))
        labels.append(Label(f"c{i:02d}", "faithfulness", float(i % 2)))
    entry = build(records, labels, systems=("a", "b"))["judge_calibration"]["ragas"][
        "faithfulness"]
    assert entry["n_labeled"] == 60 and set(entry["systems"]) == {"a", "b"}
    assert entry["systems"]["b"]["bias"] == pytest.approx(entry["systems"]["a"]["bias"] + 0.2)
    assert entry["systems"]["a"]["human_mean"] == pytest.approx(0.5)


def test_without_labels_there_is_no_calibration() -> None:
    doc = build([record("a", {"faithfulness": 0.5})])
    assert doc["judge_calibration"] == {} and doc["judge_labels"] is None
    assert not calibration.lines(doc)


# ---------------------------------------------------------------- gates and the terminal


def test_ci_lower_gates_a_calibrated_metric_on_the_ppi_bound() -> None:
    records, labels, _, human = biased_run(labeled=80)
    gate = {"ragas.faithfulness": 0.55}
    plain = build(records, None, gate="ci-lower", gates=gate)
    calibrated = build(records, labels, gate="ci-lower", gates=gate)
    on_mean = build(records, labels, gate="mean", gates=gate)
    # The judge alone misses the bound; the people's labels show it scores too low.
    assert [v["passed"] for v in plain["gates"]] == [False, False]
    verdicts = {v["source"]: v for v in calibrated["gates"]}
    entry = calibrated["judge_calibration"]["ragas"]["faithfulness"]
    # The bound checked: the more pessimistic of the PPI++ bound and the labels' exact one.
    successes = int(human[:80].sum())
    exact = sps.binomtest(successes, 80).proportion_ci(0.95, method="exact").low
    assert entry["ppi_gate_low"] == pytest.approx(min(entry["ppi_ci_low"], exact), abs=1e-9)
    assert entry["ppi_gate_method"] == "ppi++ and labels' clopper-pearson"
    assert verdicts["gate"]["value"] == entry["ppi_gate_low"] and verdicts["gate"]["passed"]
    assert verdicts["threshold"]["value"] == entry["ppi_gate_low"]  # the item threshold
    assert calibrated["failures"] == []
    line = gates.gate_line(verdicts["gate"])
    assert line.startswith("gate ragas.faithfulness >= 0.55: passed (95% PPI lower bound ")
    assert "(ppi++ and labels' clopper-pearson) from 80 human labels, PPI mean " in line
    assert "; judge mean " in line
    assert on_mean["gates"][0]["ppi"] is None  # --ragbench-gate mean: the judge's mean
    assert on_mean["gates"][0]["value"] == on_mean["metrics"]["ragas"]["faithfulness"]["mean"]


def test_the_calibrated_gate_passes_few_sessions_whose_human_mean_sits_at_the_bound() -> None:
    """A lenient 0/1 judge (1 for every correct item and half the incorrect ones), 20
    labels among 200 items, human mean 0.6 = the gate: the PPI++ bound alone is a
    large-sample one (it passed 3-4% of such sessions in benchmarks/bench_ppi.py); the
    gate's bound passes at most 2.5%."""
    rng = np.random.default_rng(2025)
    reps, gated = 1000, 0
    for _ in range(reps):
        human = (rng.random(200) < 0.6).astype(float)
        judge = np.where(human == 1, 1.0, (rng.random(200) < 0.5) * 1.0)
        chosen = rng.choice(200, 20, replace=False)
        entry = calibration.ppi_section(
            "faithfulness", [(float(v), None) for v in judge],
            [(float(judge[i]), float(human[i]), None) for i in chosen])
        gated += entry["ppi_gate_low"] >= 0.6
    error = 3 * (0.025 * 0.975 / reps) ** 0.5
    assert gated / reps <= 0.025 + error


def test_labels_of_every_category_stratify_the_estimate() -> None:
    rng = np.random.default_rng(4)
    records, labels, strata = [], [], {}
    for category, size, p in (("easy", 90, 0.9), ("hard", 60, 0.3)):
        human = (rng.random(size) < p).astype(float)
        judge = np.clip(0.2 + 0.5 * human + rng.normal(0, 0.1, size), 0, 1)
        for i in range(size):
            records.append(record(f"{category}{i}", {"faithfulness": float(judge[i])},
                                  fields={"category": category}))
        labels += [Label(f"{category}{i}", "faithfulness", float(human[i]))
                   for i in range(12)]
        strata[category] = (judge, judge[:12], human[:12])
    entry = build(records, labels)["judge_calibration"]["ragas"]["faithfulness"]
    expected = stats.stratified_ppi_mean_ci([strata["easy"], strata["hard"]])
    assert entry["ppi_strata"] == ["easy", "hard"] and entry["ppi_lambda"] is None
    assert (entry["ppi_mean"], entry["ppi_ci_low"], entry["ppi_ci_high"]) == (
        pytest.approx(expected.mean), pytest.approx(expected.low), pytest.approx(expected.high))
    # one category with a single label: no strata, one pooled PPI++ with its lambda
    fewer = [x for x in labels if not (x.case_id.startswith("hard") and x.case_id != "hard0")]
    pooled = build(records, fewer)["judge_calibration"]["ragas"]["faithfulness"]
    assert pooled["ppi_strata"] is None and 0.0 <= pooled["ppi_lambda"] <= 1.0
    assert pooled["ppi_method"] == "ppi++"


def test_bad_label_lines_fail_the_session_by_name() -> None:
    from pytest_ragbench.errors import CaseError

    errors = [CaseError("expected a finite number, got str \"x\"", file="labels.jsonl",
                        line=3, field="score")]
    doc = build([record("a", {"faithfulness": 0.5})], [], errors)
    assert doc["failures"] == ["judge labels: labels.jsonl:3: field 'score': expected a finite "
                               "number, got str \"x\""]
    assert doc["judge_labels"]["file"]["errors"] == [doc["failures"][0][len("judge labels: "):]]


def test_the_terminal_shows_the_calibration_table_and_unmatched_labels() -> None:
    records, labels, _, _ = biased_run()
    labels.append(Label("nope", "faithfulness", 1.0, where="labels.jsonl:41"))
    doc = build(records, labels)
    lines = terminal.render(doc, [], None)
    start = lines.index(next(x for x in lines if x.startswith("judge calibration")))
    header, row = lines[start + 1].split(), lines[start + 2]
    assert header[:4] == ["kind", "metric", "labeled", "judged"]
    entry = doc["judge_calibration"]["ragas"]["faithfulness"]
    assert row.split()[:4] == ["ragas", "faithfulness", "40", "120"]
    assert f"{entry['ppi_mean']:.3f} [{entry['ppi_ci_low']:.3f}, {entry['ppi_ci_high']:.3f}]" \
        in row and " rho " in row
    assert lines[start + 3] == ("judge labels: labels.jsonl: 41 lines, 40 labeled an item; "
                                "40 items labeled; 1 labeled no item of this run:")
    assert lines[start + 4] == ("  labels.jsonl:41: id 'nope', metric 'faithfulness': "
                                "no item with id 'nope' in this run")
