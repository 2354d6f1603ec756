"""``ragbench traffic sample``: a stratified sample to label (round-trips as judge labels)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from pytest_ragbench.cases.labels import read_labels
from pytest_ragbench.cli import main
from pytest_ragbench.monitor import RetrievalLog

START = dt.datetime(2026, 11, 2, 8, 0, tzinfo=dt.UTC)


@pytest.fixture
def traffic(tmp_path: Path) -> Path:
    path = tmp_path / "app.traffic.jsonl"
    log = RetrievalLog(path)
    for week, count in enumerate((30, 60, 10)):
        for i in range(count):
            log.log_retrieval(f"week {week} question {i} from bob@example.com",
                              [{"content": "a passage", "score": 0.7, "id": f"kb-{i % 4}"}],
                              answer="An answer.",
                              timestamp=START + dt.timedelta(days=7 * week, hours=i))
    return path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_sample_is_stratified_and_round_trips_as_judge_labels(
        traffic: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "to_label.jsonl"
    assert main(["traffic", "sample", str(traffic), "--n", "20", f"--out={out}",
                 "--metric", "faithfulness", "--redact", r"\S+@\S+"]) == 0
    assert "wrote 20 label lines for 20 of 100 interactions" in capsys.readouterr().out
    lines = _lines(out)
    assert {line["metric"] for line in lines} == {"faithfulness"}
    assert all(line["score"] is None and line["kind"] == "traffic" for line in lines)
    by_week = [sum(1 for line in lines if line["window"] == w)
               for w in ("2026-W45", "2026-W46", "2026-W47")]
    assert by_week == [6, 11, 3]  # two per window, the rest in proportion to 30, 60, 10
    assert not any("bob@example.com" in json.dumps(line) for line in lines)
    assert all(line["query"].endswith("from [redacted]") for line in lines)
    again = tmp_path / "again.jsonl"
    assert main(["traffic", "sample", str(traffic), "--n", "20", f"--out={again}",
                 "--metric", "faithfulness", "--redact", r"\S+@\S+"]) == 0
    assert again.read_text() == out.read_text()  # seeded
    for line in lines:  # a person fills the scores in
        line["score"] = 1.0
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    labels = read_labels(out)
    assert labels.errors == []
    assert len(labels.labels) == 20
    assert all(label.kind == "traffic" and label.metric == "faithfulness"
               for label in labels.labels)
    numbers = {int(label.case_id.split(":")[1]) for label in labels.labels}
    assert {label.case_id.split(":")[0] for label in labels.labels} == {"app"}
    assert len(numbers) == 20 and all(1 <= n <= 100 for n in numbers)


def test_the_sample_as_vector_cases_reads_as_cases(traffic: Path, tmp_path: Path) -> None:
    from pytest_ragbench.cases.build import build_cases
    from pytest_ragbench.cases.loaders import read_case_file

    out = tmp_path / "regression.jsonl"
    assert main(["traffic", "sample", str(traffic), "--n", "5", f"--out={out}",
                 "--as", "vector"]) == 0
    built = build_cases(read_case_file(out))
    assert built.invalid == []
    assert len(built.cases) == 5
    assert all(case.kind == "vector" and case.expected_sources for case in built.cases)


def test_a_missing_file_or_bad_n_is_a_clear_error(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["traffic", "sample", str(tmp_path / "none.traffic.jsonl"), "--n", "3",
                 f"--out={tmp_path / 'o.jsonl'}"]) == 2
    assert "no such file" in capsys.readouterr().err
