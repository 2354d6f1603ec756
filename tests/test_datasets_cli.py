"""``ragbench dataset build|combine|stats`` through the real command-line parser."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from pytest_ragbench.cli import main
from pytest_ragbench.datasets import command as dataset_cli
from pytest_ragbench.datasets.export import read_jsonl
from pytest_ragbench.datasets.sample import load_schema
from tests.conftest import REPO_ROOT, oracle_file

PHASE_CONFIG = REPO_ROOT / "pytest_ragbench" / "datasets" / "examples" / "phase1_phase2_800.toml"


@pytest.mark.parametrize(("argv", "expected"), [
    (["dataset", "--help"], ["build", "combine", "stats"]),
    (["dataset", "build", "--help"], ["--config", "--seed", "--output", "--manifest",
                                      "tables", "ragcsv", "unmet"]),
    (["dataset", "combine", "--help"], ["duplicate ids", "--manifest"]),
    (["dataset", "stats", "--help"], ["half-width", "--target-half-width"]),
])
def test_help_texts(argv: list[str], expected: list[str],
                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    out = " ".join(capsys.readouterr().out.lower().split())
    for word in expected:
        assert word.lower() in out


def test_python_dash_m_entry_point() -> None:
    out = subprocess.run([sys.executable, "-m", "pytest_ragbench", "dataset", "stats", "--help"],
                         capture_output=True, text=True, cwd=REPO_ROOT, check=True).stdout
    assert "usage: ragbench dataset stats" in out


def _small_config(tmp_path: Path) -> Path:
    config = tmp_path / "small.toml"
    test_cases = REPO_ROOT / "test_cases"
    config.write_text(textwrap.dedent(f"""
        [build]
        seed = 1
        unanswerable_share = 0.2

        [[source]]
        adapter = "ragcsv"
        path = "{test_cases / 'nba_qa.ragcsv.csv'}"

        [[source]]
        adapter = "beir"
        path = "{test_cases / 'beir' / 'nba_mini'}"
        doc_type = "nba_docs"

        [[source]]
        adapter = "qa"
        path = "bad.jsonl"

        [[quota]]
        doc_type = "clean_text"
        count = 10

        [[quota]]
        doc_type = "nba_docs"
        count = 5

        [[quota]]
        doc_type = "log_ticket"
        count = 3
        """), encoding="utf-8")
    (tmp_path / "bad.jsonl").write_text('{"question": "Q?", "answer": "A"}\n{"question": 1}\n',
                                        encoding="utf-8")
    return config


def test_build_run_reports_and_is_reproducible(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    config = _small_config(tmp_path)
    args = ["dataset", "build", "--config", str(config), "--output", str(tmp_path / "a.jsonl"),
            "--manifest", str(tmp_path / "a.csv"), "--report", str(tmp_path / "r.json"),
            "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "bad.jsonl:2: field 'question'" in out
    assert "log_ticket/*/*" in out and "unmet" in out
    report = json.loads((tmp_path / "r.json").read_text())
    statuses = {q["quota"]: (q["status"], q["selected"]) for q in report["quotas"]}
    assert statuses == {"clean_text/*/*": ("full", 10), "nba_docs/*/*": ("full", 5),
                        "log_ticket/*/*": ("unmet", 0)}
    data = read_jsonl(tmp_path / "a.jsonl")
    assert data.errors == [] and len(data.samples) == 15
    assert Counter(s.answerable for _, s in data.samples) == {True: 12, False: 3}
    again = [a.replace("a.jsonl", "b.jsonl").replace("a.csv", "b.csv") for a in args]
    assert main(again) == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert main([*args, "--strict"]) == 1  # an unmet quota and a malformed record
    assert main([*again, "--seed", "2"]) == 0
    assert (tmp_path / "a.jsonl").read_bytes() != (tmp_path / "b.jsonl").read_bytes()


def test_build_bytes_do_not_depend_on_the_process(tmp_path: Path) -> None:
    import os

    config = _small_config(tmp_path)
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"p{hash_seed}.jsonl"
        subprocess.run([sys.executable, "-m", "pytest_ragbench", "dataset", "build", "--config",
                        str(config), "--output", str(out), "--manifest",
                        str(tmp_path / f"p{hash_seed}.csv")], cwd=REPO_ROOT, check=True,
                       capture_output=True, env={**os.environ, "PYTHONHASHSEED": hash_seed})
        outputs.append(out.read_bytes() + (tmp_path / f"p{hash_seed}.csv").read_bytes())
    assert outputs[0] == outputs[1]


def test_bad_configuration_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[[quota]]\ndoc_type = 'x'\ncount = 'many'\n", encoding="utf-8")
    code = main(["dataset", "build", "--config", str(config), "--output",
                 str(tmp_path / "o.jsonl"), "--manifest", str(tmp_path / "o.csv")])
    assert code == 2
    assert "count: expected a non-negative integer" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_phase1_phase2_800_build_stats_and_combine(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    oracle_file("tatqa", "tatqa_dataset_dev.json")
    oracle_file("swe-qa-bench")
    out_path, manifest = tmp_path / "c800.jsonl", tmp_path / "c800.csv"
    assert dataset_cli.main(["dataset", "build", "--config", str(PHASE_CONFIG), "--seed", "42",
                             "--output", str(out_path), "--manifest", str(manifest),
                             "--report", str(tmp_path / "r.json"), "--no-progress"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    got = {q["quota"]: (q["requested"], q["selected"], q["status"]) for q in report["quotas"]}
    assert got["log_ticket/*/*"] == (150, 0, "unmet")
    assert got["clean_text/*/*"][2] == "scaled down"
    assert sum(v[1] for k, v in got.items() if k.startswith("table/")) == 100
    assert all(v[2] == "full" for k, v in got.items() if k.startswith("table/"))
    assert got["code_config/howto/*"] == (40, 40, "full")
    data = read_jsonl(out_path)
    assert data.errors == [] and len(data.samples) == report["selected"]
    validator = jsonschema.Draft202012Validator(load_schema())
    for line in out_path.read_text(encoding="utf-8").splitlines():
        validator.validate(json.loads(line))
    unanswerable = [s for _, s in data.samples if not s.answerable]
    assert {s.doc_type for s in unanswerable} <= {"clean_text", "table"}
    assert sum(1 for s in unanswerable if s.doc_type == "table") == 10
    capsys.readouterr()

    assert main(["dataset", "stats", str(out_path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["n"] == len(data.samples) and stats["by_doc_type"]["table"] == 100
    assert stats["n_for_target"] == 784

    code = main(["dataset", "combine", str(out_path), str(out_path), "--output",
                 str(tmp_path / "twice.jsonl"), "--manifest", str(tmp_path / "twice.csv")])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{len(data.samples)} duplicate id(s)" in err
    assert not (tmp_path / "twice.jsonl").exists()


def test_combine_and_stats_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _small_config(tmp_path)
    first = tmp_path / "a.jsonl"
    assert main(["dataset", "build", "--config", str(config), "--output", str(first),
                 "--manifest", str(tmp_path / "a.csv")]) == 0
    lines = first.read_text(encoding="utf-8").splitlines()
    (tmp_path / "p1.jsonl").write_text("\n".join(lines[:6]) + "\n", encoding="utf-8")
    (tmp_path / "p2.jsonl").write_text("\n".join(lines[6:]) + "\n{not json\n", encoding="utf-8")
    capsys.readouterr()
    code = main(["dataset", "combine", str(tmp_path / "p1.jsonl"), str(tmp_path / "p2.jsonl"),
                 "--output", str(tmp_path / "c.jsonl"), "--manifest", str(tmp_path / "c.csv")])
    captured = capsys.readouterr()
    assert code == 0
    assert f"{tmp_path / 'p2.jsonl'}:{len(lines) - 5}: invalid JSON" in captured.err
    assert (tmp_path / "c.jsonl").read_bytes() == first.read_bytes()
    assert (tmp_path / "c.csv").read_bytes() == (tmp_path / "a.csv").read_bytes()
    assert main(["dataset", "stats", str(tmp_path / "c.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "samples: 15" in out and "±25.3%" in out
    assert "nba_docs/" in out
