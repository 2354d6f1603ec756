"""Shards: ``--ragbench-shard=I/N`` on several machines, ``ragbench merge`` into one report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.run.shards import Shard, assign, from_environment, parse_shard, shard_of
from tests.conftest import REPO_ROOT
from tests.project import RagbenchProject
from tests.toy_project import make_toy_project, without_timings

SYSTEMS = ("--ragbench-systems", "exact,terse")
GATES = '[tool.ragbench.gates]\n"toy.token_f1" = 0.5\n"toy.exact_match" = 0.99\n'


def test_shard_names_and_scheduler_variables() -> None:
    assert parse_shard("2/4") == Shard(2, 4)
    for wrong in ("0/4", "5/4", "2", "a/b", "1/0"):
        with pytest.raises(ConfigError, match="--ragbench-shard"):
            parse_shard(wrong)
    assert from_environment({}) is None
    # A Kubernetes Indexed Job counts from 0; the number of shards comes from the Job spec.
    assert from_environment({"JOB_COMPLETION_INDEX": "0", "RAGBENCH_SHARDS": "3"}) == Shard(1, 3)
    with pytest.raises(ConfigError, match="RAGBENCH_SHARDS"):
        from_environment({"JOB_COMPLETION_INDEX": "1"})
    # A SLURM array counts from its first task id (--array=1-4 or 0-3).
    assert from_environment({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1",
                             "SLURM_ARRAY_TASK_COUNT": "4"}) == Shard(4, 4)
    assert from_environment({"SLURM_ARRAY_TASK_ID": "0",
                             "SLURM_ARRAY_TASK_COUNT": "2"}) == Shard(1, 2)
    with pytest.raises(ConfigError, match="does not exist"):
        from_environment({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "4"})


def test_the_partition_is_a_stable_hash_spread_over_every_shard() -> None:
    keys = [f"test_cases/toy.jsonl::toy::q{n:04d}" for n in range(4000)]
    counts = [sum(shard_of(k, 4) == i for k in keys) for i in range(1, 5)]
    assert sum(counts) == 4000 and min(counts) > 900  # each about a quarter
    # the same on every machine: a hash of the text, not Python's salted hash()
    code = ("from pytest_ragbench.run.shards import shard_of;"
            "print([shard_of(f'test_cases/toy.jsonl::toy::q{n:04d}', 4) for n in range(50)])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": "123"}, check=True)
    assert json.loads(other.stdout) == [shard_of(k, 4) for k in keys[:50]]


class _Item:
    """Just what the partition reads of a collected ragbench item."""

    def __init__(self, kind: str, case_id: str) -> None:
        self.nodeid = f"test_cases/{kind}.jsonl::{kind}[{case_id}]"
        self.path = Path(f"/project/test_cases/{kind}.jsonl")
        self.case = type("Case", (), {"kind": kind, "id": case_id})()
        self.item_kind = type("Kind", (), {"name": kind})()

    def record_for_report(self) -> None:
        """Marks a ragbench item."""


def test_durations_of_an_earlier_run_balance_the_shards() -> None:
    # 8 slow judged cases and 200 fast ground-truth cases
    items = [_Item("ragas", f"r{n}") for n in range(8)] + \
        [_Item("sql_ground_truth", f"s{n}") for n in range(200)]
    durations = {"ragas": 10.0, "sql_ground_truth": 0.1}
    for chosen in (assign(items, 4, Path("/project"), durations),
                   assign(items, 4, Path("/project"))):
        assert set(chosen) == {i.nodeid for i in items}
        assert set(chosen.values()) == {1, 2, 3, 4}
    balanced = assign(items, 4, Path("/project"), durations)
    hashed = assign(items, 4, Path("/project"))

    def loads(chosen: dict[str, int]) -> list[float]:
        return [sum(durations[i.case.kind] for i in items if chosen[i.nodeid] == s)
                for s in (1, 2, 3, 4)]

    assert max(loads(balanced)) - min(loads(balanced)) <= 0.1 + 1e-9
    assert max(loads(balanced)) < max(loads(hashed))
    assert assign(list(reversed(items)), 4, Path("/project"), durations) == balanced


def _node_ids(result: pytest.RunResult) -> set[str]:
    return {line.strip() for line in result.outlines if "::toy[" in line}


def test_every_item_is_in_one_shard_with_the_other_items_of_its_case(
        pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 40)
    every = _node_ids(project.runpytest("--ragbench", *SYSTEMS, "--collect-only", "-q"))
    assert len(every) == 80
    shards = [_node_ids(project.runpytest("--ragbench", *SYSTEMS, "--collect-only", "-q",
                                          f"--ragbench-shard={i}/3")) for i in (1, 2, 3)]
    assert set().union(*shards) == every
    assert sum(len(s) for s in shards) == len(every)  # no item twice
    project.runpytest("--ragbench", "--ragbench-report=before")
    balanced = [_node_ids(project.runpytest(
        "--ragbench", *SYSTEMS, "--collect-only", "-q", f"--ragbench-shard={i}/3",
        "--ragbench-shard-durations=before/results.json")) for i in (1, 2, 3)]
    assert set().union(*balanced) == every and sum(len(s) for s in balanced) == len(every)
    for shard in shards:
        assert shard
        cases = {node.split("-", 1)[1] for node in shard}
        # both systems' items of a case are in the same shard
        assert shard == {f"test_cases/toy.jsonl::toy[{s}-{c}" for s in ("exact", "terse")
                         for c in cases}


def _junit_cases(path: Path) -> list[tuple[str, str, str]]:
    found = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in
                        ("failure", "error", "skipped")), "passed")
        found.append((case.get("classname") or "", case.get("name") or "", outcome))
    return sorted(found)


def _merge(project: RagbenchProject, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_ragbench", "merge", *args],
                          cwd=project.path, capture_output=True, text=True, timeout=600)


def test_shards_merged_are_the_run_of_one_machine(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 30, pyproject=GATES)
    whole = project.runpytest("--ragbench", *SYSTEMS, "--ragbench-report=whole",
                              "--junitxml=whole.xml")
    assert whole.ret == 1  # the exact_match gate is missed by the terse system
    for i in (1, 2, 3):
        shard = project.runpytest("--ragbench", *SYSTEMS, f"--ragbench-report=shard{i}",
                                  f"--ragbench-shard={i}/3")
        shard.stdout.fnmatch_lines([f"*shard {i} of 3: gates are decided at merge*"])
        assert shard.ret == 0  # no gate is judged on a part of the items
        assert project.results(f"shard{i}")["gates"] == []
    merged = _merge(project, "--out", "merged", "shard1", "shard2", "shard3",
                    "--pytest-args", *SYSTEMS, "--junitxml=merged.xml")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert "merged from 3 shards of 3" in merged.stdout
    one, combined = project.results("whole"), project.results("merged")
    assert without_timings(combined) == without_timings(one)
    assert combined["gates"] and any(g["passed"] is False for g in combined["gates"])
    assert _junit_cases(project.path / "merged.xml") == _junit_cases(project.path / "whole.xml")
    assert (project.path / "merged" / "report.html").is_file()


def test_merge_refuses_shards_that_do_not_belong_together(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 12)
    for i in (1, 2):
        project.runpytest("--ragbench", f"--ragbench-report=shard{i}", f"--ragbench-shard={i}/2")
    twice = _merge(project, "--out", "m", "shard1", "shard1")
    assert twice.returncode == 4 and "hold the same items" in twice.stdout + twice.stderr
    other = _merge(project, "--out", "m", "shard1", "shard2", "--pytest-args", *SYSTEMS)
    assert other.returncode == 4
    assert "ran with other settings" in other.stdout + other.stderr
    assert "systems" in other.stdout + other.stderr
    results = project.path / "shard2" / "results.json"
    document = json.loads(results.read_text())
    document["run"]["plugin_version"] = "0.0.0-elsewhere"
    results.write_text(json.dumps(document))
    version = _merge(project, "--out", "m", "shard1", "shard2")
    assert version.returncode == 4 and "another code version" in version.stdout + version.stderr
    missing = _merge(project, "--out", "m", "shard1")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "shard 2 of 2 not merged" in missing.stdout
    status = project.results("m")["run"]
    assert status["status"] == "interrupted" and status["merged"]["missing"] == [2]


@pytest.mark.parametrize("scheduler", ["kubernetes", "slurm", "github-matrix"])
def test_scheduler_recipes_run_as_parallel_processes_then_merge(
        pytester: pytest.Pytester, scheduler: str) -> None:
    # testpaths: the shards' report folders, written at the same time, are not collected
    project = make_toy_project(pytester, 24, pyproject=GATES.replace("0.99", "0.0"),
                               ini="[pytest]\ntestpaths = test_cases\n")
    total = 3
    procs = []
    for index in range(total):
        env = {k: v for k, v in os.environ.items()
               if k not in ("JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID")}
        args = [sys.executable, "-m", "pytest", "--ragbench", "-p", "no:cacheprovider", "-q",
                f"--ragbench-report=out{index}"]
        if scheduler == "kubernetes":  # an Indexed Job: completions = parallelism = 3
            env.update(JOB_COMPLETION_INDEX=str(index), RAGBENCH_SHARDS=str(total))
        elif scheduler == "slurm":  # sbatch --array=1-3
            env.update(SLURM_ARRAY_TASK_ID=str(index + 1), SLURM_ARRAY_TASK_MIN="1",
                       SLURM_ARRAY_TASK_COUNT=str(total))
        else:  # strategy.matrix.shard: [1, 2, 3]
            args.append(f"--ragbench-shard={index + 1}/{total}")
        procs.append(subprocess.Popen(args, cwd=project.path, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    for index, output in enumerate(outputs):
        assert f"shard {index + 1} of {total}: gates are decided at merge" in output, output
    merged = _merge(project, "--out", "merged", *[f"out{i}" for i in range(total)])
    assert merged.returncode == 0, merged.stdout + merged.stderr
    document = project.results("merged")
    assert document["counts"]["toy"]["all"]["items"] == 24
    assert len(document["gates"]) == 2 and all(g["passed"] for g in document["gates"])


def test_four_shards_of_the_bundled_benchmark_merge_into_its_one_run(tmp_path: Path) -> None:
    # the kinds that need no generator: ground truth against the database, BEIR retrieval
    selection = ["-k", "ground_truth or beir", f"--ragbench-cache={tmp_path / 'cache'}"]
    command = [sys.executable, "-m", "pytest", "--ragbench", "-q", "-p", "no:cacheprovider",
               *selection]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, *args], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=900)

    whole = run(f"--ragbench-report={tmp_path / 'whole'}", f"--junitxml={tmp_path / 'w.xml'}")
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr[-3000:]
    for index in (1, 2, 3, 4):
        shard = run(f"--ragbench-report={tmp_path / f'shard{index}'}",
                    f"--ragbench-shard={index}/4")
        assert shard.returncode == 0, shard.stdout[-3000:] + shard.stderr[-3000:]
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_ragbench", "merge", "--out", str(tmp_path / "merged"),
         *[str(tmp_path / f"shard{i}") for i in (1, 2, 3, 4)],
         "--pytest-args", *selection, f"--junitxml={tmp_path / 'm.xml'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert merged.returncode == 0, merged.stdout[-3000:] + merged.stderr[-3000:]
    one = json.loads((tmp_path / "whole" / "results.json").read_text())
    combined = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert one["counts"]["beir"]["all"]["items"] > 0 and one["gates"]
    assert without_timings(combined) == without_timings(one)
    assert _junit_cases(tmp_path / "m.xml") == _junit_cases(tmp_path / "w.xml")
    assert (tmp_path / "merged" / "nba_mini.run.trec").read_text() == \
        (tmp_path / "whole" / "nba_mini.run.trec").read_text()
