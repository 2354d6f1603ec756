"""Report files: leaderboard appends under concurrency, saved runs, BEIR runs, no secrets."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.kinds.beir import report as beir
from pytest_ragbench.kinds.report_sections import builtin_sections
from pytest_ragbench.metrics import read_qrels, read_run
from pytest_ragbench.render import files
from pytest_ragbench.results import document, runs
from pytest_ragbench.results.records import ItemRecord
from tests.conftest import REPO_ROOT, oracle_file
from tests.toy_project import make_toy_project, report_files

APPENDER = """
import sys
from pathlib import Path
from pytest_ragbench.render.files import append_leaderboard
path, writer, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for seq in range(count):
    rows = [[writer, str(seq), str(part), "x" * 3000] for part in range(4)]
    append_leaderboard(path, rows)
"""

SAVER = """
import sys
from pathlib import Path
from pytest_ragbench.results.runs import save
for seq in range(int(sys.argv[3])):
    save({"items": [], "writer": sys.argv[2], "seq": seq}, Path(sys.argv[1]), "ci")
"""


def _run_concurrently(script: str, target: Path, writers: int, count: int) -> None:
    processes = [subprocess.Popen([sys.executable, "-c", script, str(target), f"w{w}",
                                   str(count)], cwd=REPO_ROOT) for w in range(writers)]
    assert [p.wait(timeout=300) for p in processes] == [0] * writers


def test_concurrent_leaderboard_appends_never_interleave_or_lose_rows(tmp_path: Path) -> None:
    path = tmp_path / "leaderboard.csv"
    writers, count = 6, 60
    _run_concurrently(APPENDER, path, writers, count)
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == list(files.LEADERBOARD_COLUMNS)
    body = rows[1:]
    assert len(body) == writers * count * 4
    assert all(len(row) == 4 and row[3] == "x" * 3000 for row in body)
    # Each append's four rows stay together, and every (writer, seq) arrives once.
    blocks = [body[i:i + 4] for i in range(0, len(body), 4)]
    assert all([r[2] for r in block] == ["0", "1", "2", "3"] and len({r[0] for r in block}) == 1
               and len({r[1] for r in block}) == 1 for block in blocks)
    assert len({(b[0][0], b[0][1]) for b in blocks}) == writers * count


def test_concurrent_sessions_share_one_report_dir(pytester: pytest.Pytester) -> None:
    """Four pytest sessions at once, one report dir: every row arrives, each run's together."""
    project = make_toy_project(pytester, 8)
    command = [sys.executable, "-m", "pytest", "--ragbench", "-p", "no:cacheprovider",
               "--ragbench-report", "shared", "--ragbench-save", "ci"]
    processes = [subprocess.Popen(command, cwd=project.path, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    assert [p.returncode for p in processes] == [0] * 4, outputs
    assert not any("could not write the report" in out for out in outputs)
    folder = project.report_dir("shared")
    rows = project.leaderboard_rows("shared")
    assert rows[0] == list(files.LEADERBOARD_COLUMNS)
    run_ids = [row[1] for row in rows[1:]]
    assert len(set(run_ids)) == 4
    per_run = len(run_ids) // 4
    assert per_run == 2 and len(run_ids) == 8  # toy.exact_match and toy.token_f1
    assert all(len(set(run_ids[i:i + per_run])) == 1 for i in range(0, 8, per_run))
    results = project.results("shared")
    assert results["run"]["id"] in run_ids and len(results["items"]) == 8
    assert [n for n, _, _ in runs.saved_runs(folder)] == [1, 2, 3, 4]
    assert not [p.name for p in folder.rglob("*") if p.name.endswith(".tmp")]


def test_concurrent_saves_take_distinct_numbers(tmp_path: Path) -> None:
    _run_concurrently(SAVER, tmp_path, 4, 5)
    saved = runs.saved_runs(tmp_path)
    assert [n for n, _, _ in saved] == list(range(1, 21))
    assert all(path.name == f"{n:04d}_ci.json" for n, _, path in saved)
    contents = {(json.loads(p.read_text())["writer"], json.loads(p.read_text())["seq"])
                for _, _, p in saved}
    assert len(contents) == 20


def test_resolve_a_baseline_by_name_number_or_path(tmp_path: Path) -> None:
    first = runs.save({"items": []}, tmp_path, "main")
    runs.save({"items": []}, tmp_path, "feature")
    third = runs.save({"items": []}, tmp_path, "main")
    assert runs.resolve("main", tmp_path, tmp_path) == third  # the newest of that name
    assert runs.resolve("0001", tmp_path, tmp_path) == first
    assert runs.resolve("0001_main", tmp_path, tmp_path) == first
    assert runs.resolve(str(first), tmp_path, Path("/")) == first
    with pytest.raises(ConfigError, match=r"no saved run .*0001_main, 0002_feature"):
        runs.resolve("nightly", tmp_path, tmp_path)
    with pytest.raises(ConfigError, match="use letters"):
        runs.check_name("../escape")
    bad = tmp_path / "bad.json"
    bad.write_text('{"metrics": {}}')
    with pytest.raises(ConfigError, match="not a ragbench run"):
        runs.load(bad)


def _trec_records() -> list[ItemRecord]:
    qrels = read_qrels(oracle_file("trec_eval", "qrels.test"))
    run = read_run(oracle_file("trec_eval", "results.test"))
    return [ItemRecord(nodeid=f"trec::beir[trec/{qid}]", kind="beir", case_kind="beir",
                       case_id=f"trec/{qid}", file="trec", line=0, status="passed",
                       fields={"dataset": "trec"},
                       evidence={"ranking": [[d, s] for d, s in ranking.items()],
                                 "qrels": qrels.get(qid, {})})
            for qid, ranking in run.items()]


def _trec_eval_output(name: str) -> dict[str, float]:
    values = {}
    for line in oracle_file("trec_eval", name).read_text().splitlines():
        measure, qid, value = line.split()
        if qid == "all":
            values[measure] = value
    return {k: float(v) for k, v in values.items() if k != "runid"}


def test_beir_run_file_and_metrics_match_trec_eval(tmp_path: Path) -> None:
    records = _trec_records()
    settings = RagbenchConfig(rootpath=tmp_path, report_dir=tmp_path / "report")
    typed = document.assemble(records, settings, run=files.run_info(tmp_path), components={},
                              report_sections=builtin_sections)
    written = files.write_all(typed.to_dict(), records, settings, sections=typed.sections)
    folder = tmp_path / "report"
    assert folder / "trec.run.trec" in written and folder / "trec.metrics.json" in written
    expected = _trec_eval_output("out.test.a")
    metrics = json.loads((folder / "trec.metrics.json").read_text())["metrics"]
    pairs = {"AP": "map", "RR": "recip_rank", "P@10": "P_10", "R@10": "recall_10",
             "R@100": "recall_100", "nDCG@10": "ndcg_cut_10", "nDCG@100": "ndcg_cut_100"}
    for ours, theirs in pairs.items():
        assert round(metrics[ours], 4) == pytest.approx(expected[theirs], abs=1e-9), ours
    # The run file: trec_eval's order (score desc, docno desc on ties), ranks 1..n.
    lines = [line.split() for line in (folder / "trec.run.trec").read_text().splitlines()]
    for qid in {fields[0] for fields in lines}:
        mine = [fields for fields in lines if fields[0] == qid]
        assert [int(f[3]) for f in mine] == list(range(1, len(mine) + 1))
        keys = [(float(f[4]), f[2]) for f in mine]
        assert keys == sorted(keys, reverse=True)
    assert read_run(folder / "trec.run.trec") == read_run(oracle_file("trec_eval",
                                                                      "results.test"))
    with (folder / "leaderboard.csv").open(newline="") as handle:
        board = [row for row in csv.DictReader(handle) if row["kind"] == "beir"]
    assert {row["metric"] for row in board} == set(beir.MEASURES)
    assert {row["dataset"] for row in board} == {"trec"}


SECRETS = ("sk-llm-secret-1234", "sk-judge-secret-5678", "db-secret-9012", "url-secret-3456")


def test_no_secret_reaches_any_report_file(pytester: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_toy_project(pytester, 6)
    project.makeini("[pytest]\nragbench_dbs =\n"
                    f"    warehouse=postgresql://bob:{SECRETS[2]}@db.example/sales\n")
    monkeypatch.setenv("RAGBENCH_LLM_API_KEY", SECRETS[0])
    monkeypatch.setenv("RAGBENCH_JUDGE_API_KEY", SECRETS[1])
    result = project.runpytest(
        "--ragbench", "--ragbench-save", "secret-check",
        "--ragbench-llm-url", f"http://alice:{SECRETS[3]}@127.0.0.1:9/v1",
        "--ragbench-db-url", f"postgresql://carol:{SECRETS[2]}@db.example/main",
        "--junitxml", "report/junit.xml")
    result.assert_outcomes(passed=6)
    written = [*report_files(project.report_dir()), project.path / "report/junit.xml"]
    names = {p.name for p in written}
    assert {"results.json", "items.jsonl", "leaderboard.csv", "report.html",
            "0001_secret-check.json", "junit.xml"} <= names
    for path in written:
        text = path.read_text(encoding="utf-8")
        for secret in SECRETS:
            assert secret not in text, f"{secret} in {path}"
    for secret in SECRETS:
        assert secret not in result.stdout.str() + result.stderr.str()
    config = project.results()["config"]
    assert config["llm_url"] == "http://alice:***@127.0.0.1:9/v1"
    assert config["dbs"]["warehouse"] == "postgresql://bob:***@db.example/sales"
