"""Pytest habits (issue 20, point 6): a plain ``pytest`` says what waits for ``--ragbench``;
``-k`` subsets report only the kinds that ran."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.render.terminal import metrics_rows
from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject

VECTOR = """kind: vector
cases:
  - id: one
    question: Who won the title?
    ground_truth: The Lakers.
  - id: two
    question: Where is the tower?
    ground_truth: In Paris.
"""
SQL = """kind: sql
cases:
  - id: lakers
    question: How many points did the Lakers score?
    expected_sql: SELECT points FROM scores WHERE team = 'Lakers'
    ground_truth_data: {points: 9500}
"""
GATES = """[gates]
"vector.semantic_similarity" = 0.5
"ragcsv.accuracy" = 40
"sql_ground_truth.match" = 1
"""


def _project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("vector.yaml", VECTOR)
    project.cases("sql.yaml", SQL)
    project.cases("rows.ragcsv.csv", "Paris,\"[]\",,,Capital of France?\n")
    beir = project.cases_dir() / "mini"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": "Paris."}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "Paris?"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    project.gates(GATES)
    return project


@pytest.mark.parametrize("mode", XDIST_MODES, ids=["default", "xdist", "no-xdist"])
def test_a_plain_run_names_what_waits_for_ragbench(pytester: pytest.Pytester,
                                                   mode: tuple[str, ...]) -> None:
    project = _project(pytester)
    result = project.runpytest_subprocess("-p", "no:cacheprovider", *mode)
    result.assert_outcomes(passed=1)  # sql_ground_truth[lakers]
    line = ("ragbench: 1 BEIR folder, 1 RAGCSV file and 2 vector cases become evaluation "
            "items only with --ragbench (run pytest --ragbench to evaluate them)")
    assert result.stdout.lines.count(line) == 1


def test_no_line_when_nothing_waits(pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.runpytest("--ragbench", "-p", "no:cacheprovider", "--collect-only")
    assert "become evaluation items only with --ragbench" not in result.stdout.str()
    for name in ("vector.yaml", "rows.ragcsv.csv"):
        (project.path / "test_cases" / name).unlink()
    result = project.runpytest("-p", "no:cacheprovider", "--ignore=test_cases/mini")
    result.assert_outcomes(passed=1)
    assert "become evaluation items only with --ragbench" not in result.stdout.str()


def test_a_k_subset_reports_only_the_kinds_that_ran(pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.runpytest("--ragbench", "-p", "no:cacheprovider", "-k", "sql_ground_truth")
    result.assert_outcomes(passed=1, deselected=5)
    output = result.stdout.str()
    section = output.split("= ragbench =", 1)[1].split("report: ", 1)[0]
    # one item is below the gates' minimum n: the gate is listed, not checked
    assert "gate sql_ground_truth.match >= 1: not checked: n too small" in section
    assert "vector" not in section and "ragcsv" not in section and "beir" not in section
    results = project.results()
    assert set(results["metrics"]) == {"sql_ground_truth"}
    assert [g["gate"] for g in results["gates"]] == ["sql_ground_truth.match"]


def test_a_system_independent_kind_keeps_its_row_among_several_systems() -> None:
    cell = {"n": 8, "n_unscored": 0, "mean": 0.5, "ci_low": 0.3, "ci_high": 0.7, "std": 0.1,
            "threshold": None, "pass_rate": None, "direction": "higher"}
    document = {"systems": ["dense", "bm25"], "metrics": {
        "memory": {"recall": {**cell, "systems": {}}},
        "vector": {"answered": {**cell, "systems": {"dense": cell, "bm25": cell}}}}}
    rows = metrics_rows(document)
    assert [row[:3] for row in rows[1:]] == [["memory", "-", "recall"],
                                            ["vector", "dense", "answered"],
                                            ["vector", "bm25", "answered"]]


def _ids(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and not line.startswith(" ")]


def test_every_item_runs_by_the_node_id_pytest_prints(pytester: pytest.Pytester) -> None:
    """Alone and in one command line, in any order, as an IDE's runner passes them."""
    project = _project(pytester)
    flags = ("--ragbench", "-p", "no:cacheprovider")
    ids = _ids(project.runpytest(*flags, "--collect-only", "-q"))
    kinds = {nodeid.rpartition("::")[2].partition("[")[0] for nodeid in ids}
    assert kinds == {"vector", "sql", "sql_ground_truth", "ragcsv", "beir"}
    assert "test_cases/mini/qrels/test.tsv::beir[mini/q1]" in ids
    for nodeid in ids:
        assert _ids(project.runpytest(*flags, "--collect-only", "-q", nodeid)) == [nodeid]
    together = project.runpytest(*flags, "--collect-only", "-q", *reversed(ids))
    assert sorted(_ids(together)) == sorted(ids)
    # run for real: the items that ask no model
    chosen = [n for n in ids if "::sql_ground_truth[" in n or "::beir[" in n]
    ran = project.runpytest_subprocess(*flags, *chosen)
    ran.assert_outcomes(passed=2)
    assert sorted(record["nodeid"] for record in project.items()) == sorted(chosen)


def _vscode_messages(pipe: Path) -> list[dict[str, Any]]:
    """The JSON-RPC payloads vscode_pytest wrote to its result pipe (here a plain file)."""
    raw = pipe.read_bytes().decode("utf-8")  # its headers end in \r\n
    parts = re.split(r"content-length: \d+\r\ncontent-type: application/json\r\n\r\n", raw)
    return [json.loads(part)["params"] for part in parts if part.strip()]


def _vscode_run_ids(node: dict[str, Any], base: str) -> list[str]:
    """The ids VS Code's tree holds for the tests, as it passes them back to run them."""
    if node.get("type_") == "test":
        return [str(Path(base, node["runID"]))]
    return [nodeid for child in node.get("children", []) for nodeid in _vscode_run_ids(child, base)]


def test_vscode_runner_runs_the_ids_it_discovered(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """VS Code's own plugin (microsoft/vscode-python ``python_files/vscode_pytest``, kept
    under tests/vendor/): its discovery, then a run of the discovered ids through its run
    script, as the Test Explorer does, a BEIR id among them."""
    plugin = tmp_path_factory.mktemp("vscode") / "vscode_pytest"
    shutil.copytree(Path(__file__).parent / "vendor" / "vscode_pytest", plugin)
    project = _project(pytester)
    pipes = tmp_path_factory.mktemp("pipes")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(plugin.parent),
                                                       os.environ.get("PYTHONPATH", "")]))
    flags = ("-p", "no:cacheprovider", "--ragbench")
    monkeypatch.setenv("TEST_RUN_PIPE", str(pipes / "discovery"))
    project.runpytest_subprocess("-p", "vscode_pytest", *flags, "--collect-only")
    [discovery] = _vscode_messages(pipes / "discovery")
    assert discovery["status"] == "success" and not discovery["error"]
    discovered = _vscode_run_ids(discovery["tests"], discovery["pathBase"])
    beir = str(project.path / "test_cases/mini/qrels/test.tsv") + "::beir[mini/q1]"
    assert beir in discovered and len(discovered) == 6
    # the items that ask no model: the BEIR query first, as in the run it once aborted
    chosen = [beir, *(n for n in discovered if "::sql_ground_truth[" in n)]
    (pipes / "ids").write_text("\n".join(chosen) + "\n", encoding="utf-8")
    monkeypatch.setenv("TEST_RUN_PIPE", str(pipes / "run"))
    monkeypatch.setenv("RUN_TEST_IDS_PIPE", str(pipes / "ids"))
    ran = pytester.run(sys.executable, plugin / "run_pytest_script.py",
                       f"--rootdir={project.path}", *flags)
    outcomes = {nodeid: result["outcome"] for message in _vscode_messages(pipes / "run")
                for nodeid, result in (message.get("result") or {}).items()}
    # (the script ignores pytest's exit code: the outcomes it sent are the check)
    assert {n: outcomes.get(n) for n in chosen} == dict.fromkeys(chosen, "success"), \
        ran.stdout.str()
    # the session's checks reach it too, under the session-level node (README)
    assert outcomes[f"{project.path}::gate[sql_ground_truth.match]"] == "skipped"
