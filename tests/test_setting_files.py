"""ragbench.toml in every folder on the way to a case file; thresholds and gates finite numbers.

A case file gets the thresholds of the ragbench.toml files from the rootdir down to its
folder (the nearest wins per key), whether its folder is an ini ``ragbench_cases`` one
or a path on the command line; gates apply to the whole session; NaN, infinity and
strings are usage errors naming the file and the key.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_ragbench.config.setting_files import (
    SettingsFile,
    SettingsTree,
    read,
    session_gates,
    walk,
)
from pytest_ragbench.errors import ConfigError
from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject
from tests.toy_project import make_toy_project

MODE_IDS = ["plain", "xdist", "no-xdist"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- reading and layering (no session) --------------------------------------------------------


def test_the_nearest_file_wins_per_key_down_to_the_case_files_folder(tmp_path: Path) -> None:
    _write(tmp_path / "ragbench.toml", '[thresholds]\n"vector.answered" = 0.1\n'
                                       '"sql.match" = 0.1\n')
    _write(tmp_path / "cases" / "ragbench.toml", '[thresholds.vector]\nanswered = 0.2\n')
    _write(tmp_path / "cases" / "deep" / "ragbench.toml", '[thresholds]\n"sql.match" = 0.3\n')
    base = SettingsFile(tmp_path / "pyproject.toml", tmp_path, {"vector.declined": 1.0})
    tree = SettingsTree(base, (tmp_path,))
    deep = tree.thresholds_for(tmp_path / "cases" / "deep" / "more" / "x.yaml")
    assert deep == {"vector.declined": 1.0, "vector.answered": 0.2, "sql.match": 0.3}
    assert tree.thresholds_for(tmp_path / "cases" / "y.yaml") == {
        "vector.declined": 1.0, "vector.answered": 0.2, "sql.match": 0.1}
    assert tree.thresholds_for(tmp_path / "other" / "z.yaml") == {
        "vector.declined": 1.0, "vector.answered": 0.1, "sql.match": 0.1}
    # a case folder outside the rootdir: its own files count, not its parents'
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    _write(outside / "ragbench.toml", '[thresholds]\n"sql.match" = 0.9\n')
    assert SettingsTree(base, (tmp_path, outside)).thresholds_for(outside / "a.yaml") == {
        "vector.declined": 1.0, "sql.match": 0.9}


@pytest.mark.parametrize(("text", "message"), [
    ('[thresholds]\n"sql_ground_truth.match" = nan\n',
     "[thresholds] 'sql_ground_truth.match' must be a finite number, got nan"),
    ('[gates]\n"vector.semantic_similarity" = inf\n',
     "[gates] 'vector.semantic_similarity' must be a finite number, got inf"),
    ('[thresholds.vector]\nanswered = -inf\n',
     "[thresholds] 'vector.answered' must be a finite number, got -inf"),
    ('[thresholds]\n"vector.answered" = "0.5"\n',
     "[thresholds] 'vector.answered' must be a number, got '0.5'"),
    ('[gates]\n"vector.answered" = true\n', "[gates] 'vector.answered' must be a number, "
                                           "got True"),
    ('thresholds = 3\n', "[thresholds] must be a table, got 3"),
])
def test_a_value_that_is_not_a_finite_number_names_the_file_and_key(
        tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path / "ragbench.toml", text)
    with pytest.raises(ConfigError) as raised:
        read(path)
    assert str(raised.value) == f"{path}: {message}"


def test_pyproject_values_are_checked_under_tool_ragbench(tmp_path: Path) -> None:
    path = _write(tmp_path / "pyproject.toml", '[tool.ragbench.gates]\n"sql.match" = nan\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml: \[tool.ragbench.gates\] "
                                          r"'sql.match' must be a finite number, got nan"):
        read(path, ("tool", "ragbench"))


def _file(folder: Path, gates: dict[str, float]) -> SettingsFile:
    return SettingsFile(folder / "ragbench.toml", folder, {}, gates)


def test_a_gate_set_on_one_path_takes_the_deepest_value(tmp_path: Path) -> None:
    base = _file(tmp_path, {"sql.match": 0.5, "vector.answered": 0.5})
    files = [_file(tmp_path / "cases", {"sql.match": 0.7}),
             _file(tmp_path / "cases" / "a", {"sql.match": 0.9}),
             _file(tmp_path / "cases" / "b", {"vector.answered": 0.8})]
    gates, origin = session_gates(base, files)
    assert gates == {"sql.match": 0.9, "vector.answered": 0.8}
    assert origin["sql.match"] == tmp_path / "cases" / "a" / "ragbench.toml"


def test_siblings_must_agree_on_a_gate(tmp_path: Path) -> None:
    base = _file(tmp_path, {})
    same = [_file(tmp_path / "a", {"sql.match": 0.9}), _file(tmp_path / "b", {"sql.match": 0.9})]
    assert session_gates(base, same)[0] == {"sql.match": 0.9}
    differ = [_file(tmp_path / "a", {"sql.match": 0.9}),
              _file(tmp_path / "b" / "c", {"sql.match": 0.6})]
    with pytest.raises(ConfigError) as raised:
        session_gates(base, differ)
    text = str(raised.value)
    assert text.startswith("gate 'sql.match' is 0.9 in ")
    assert str(tmp_path / "a" / "ragbench.toml") in text
    assert str(tmp_path / "b" / "c" / "ragbench.toml") in text


def test_the_walk_skips_what_pytest_does_not_collect(tmp_path: Path) -> None:
    for folder in ("cases/a", "cases/.hidden", "cases/venv", "cases/b/__pycache__"):
        _write(tmp_path / folder / "ragbench.toml", "")
    _write(tmp_path / "cases" / "env" / "pyvenv.cfg", "")
    _write(tmp_path / "cases" / "env" / "ragbench.toml", "")
    (tmp_path / "cases" / "link").symlink_to(tmp_path / "cases" / "a")  # followed, once

    from pytest_ragbench.config.setting_files import skipper

    found = set(walk(tmp_path / "cases", skipper([".*", "venv"], [])))
    assert found == {tmp_path / "cases" / "a"} or found == {tmp_path / "cases" / "link"}


def test_the_readme_example_file_and_case_overrides_are_valid(tmp_path: Path) -> None:
    from pytest_ragbench.cases.build import build_cases
    from pytest_ragbench.cases.loaders import read_case_file
    from pytest_ragbench.config.settings import RagbenchConfig
    from pytest_ragbench.config.vocabulary import check_settings
    from pytest_ragbench.kinds import builtin_registry

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Thresholds, gates and ragbench.toml", 1)[1].split("\n## ", 1)[0]
    toml = re.search(r"```toml\n(.*?)```", section, re.DOTALL)
    yaml = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert toml and yaml
    found = read(_write(tmp_path / "cases" / "ragbench.toml", toml.group(1)))
    assert found is not None
    assert found.thresholds["hybrid.value_recall"] == 0.8 and len(found.gates) == 4
    settings = RagbenchConfig(rootpath=tmp_path, toml_files=(found,), gates=found.gates)
    check_settings(settings, builtin_registry())  # every name is one a kind records
    built = build_cases(read_case_file(_write(tmp_path / "cases" / "vector.yaml",
                                              yaml.group(1))))
    assert not built.invalid
    assert [c.thresholds for c in built.cases] == [
        {"semantic_similarity": 0.3, "source_hit@k": 0.0}, {}]


# -- sessions ---------------------------------------------------------------------------------


def _toy_in(pytester: pytest.Pytester, folder: str) -> RagbenchProject:
    """The toy project with its cases moved from test_cases/ to ``folder``."""
    project = make_toy_project(pytester, 12)
    target = project.path / folder
    target.mkdir(parents=True)
    (project.path / "test_cases" / "toy.jsonl").rename(target / "toy.jsonl")
    return project


@pytest.mark.parametrize("mode", XDIST_MODES[:2], ids=MODE_IDS[:2])
def test_a_gate_beside_cases_given_on_the_command_line_is_enforced(
        pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    project = _toy_in(pytester, "cases")
    _write(project.path / "cases" / "ragbench.toml", '[gates]\n"toy.token_f1" = 0.999\n')
    result = project.runpytest("--ragbench", "cases", *mode)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED gate toy.token_f1 >= 0.999: MISSED (mean *"])
    result.stdout.no_fnmatch_line("verdict: PASSED*")
    # ... as with --ragbench-cases, and from a folder further down
    assert project.runpytest("--ragbench", "--ragbench-cases=cases",
                             *mode).ret == pytest.ExitCode.TESTS_FAILED
    (project.path / "cases" / "ragbench.toml").rename(project.path / "ragbench.toml")
    project.runpytest("--ragbench", "cases", *mode).stdout.fnmatch_lines(
        ["FAILED gate toy.token_f1 >= 0.999: MISSED*"])


def test_a_gate_in_a_subfolder_counts_and_one_of_a_folder_not_collected_does_not(
        pytester: pytest.Pytester) -> None:
    project = _toy_in(pytester, "cases/deep")
    _write(project.path / "cases" / "deep" / "ragbench.toml", '[gates]\n"toy.token_f1" = 0.999\n')
    _write(project.path / "elsewhere" / "ragbench.toml", '[gates]\n"toy.exact_match" = 0.999\n')
    result = project.runpytest("--ragbench", "cases")
    result.stdout.fnmatch_lines(["FAILED gate toy.token_f1 >= 0.999: MISSED*"])
    result.stdout.no_fnmatch_line("*toy.exact_match >=*")
    gates = project.results()["config"]["gates"]
    assert gates == {"toy.token_f1": 0.999}


def test_sibling_files_setting_one_gate_differently_stop_the_session(
        pytester: pytest.Pytester) -> None:
    project = _toy_in(pytester, "cases/a")
    _write(project.path / "cases" / "a" / "ragbench.toml", '[gates]\n"toy.token_f1" = 0.5\n')
    _write(project.path / "cases" / "b" / "ragbench.toml", '[gates]\n"toy.token_f1" = 0.6\n')
    result = project.runpytest("--ragbench", "cases")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ragbench: gate 'toy.token_f1' is 0.5 in */cases/a/"
                                 "ragbench.toml but 0.6 in */cases/b/ragbench.toml: *"])
    assert not (project.path / ".ragbench").exists()  # nothing ran
    # only one of them collected: no conflict
    assert project.runpytest("--ragbench", "cases/a").ret == pytest.ExitCode.OK


# sql_ground_truth items need no --ragbench and no model: two folders, one wrong case each
WRONG_CASE = """
kind: sql
cases:
  - id: {name}
    question: How many teams are there
    expected_sql: SELECT COUNT(*) AS n FROM teams
    ground_truth_data: {{n: 4}}
"""


def _sql_project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    for name in ("a", "b"):
        _write(project.path / "cases" / name / "teams.yaml", WRONG_CASE.format(name=name))
    return project


@pytest.mark.parametrize("mode", XDIST_MODES[:2], ids=MODE_IDS[:2])
def test_thresholds_of_a_folder_apply_to_the_cases_below_it(
        pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    project = _sql_project(pytester)
    _write(project.path / "cases" / "a" / "ragbench.toml",
           '[thresholds]\n"sql_ground_truth.match" = 0\n')
    result = project.runpytest("cases", "-rA", *mode)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["PASSED cases/a/teams.yaml::sql_ground_truth[[]a[]]*",
                                 "FAILED cases/b/teams.yaml::sql_ground_truth[[]b[]]*"])
    # the file nearest to b wins over the rootdir's
    _write(project.path / "ragbench.toml", '[thresholds]\n"sql_ground_truth.match" = 0\n')
    _write(project.path / "cases" / "b" / "ragbench.toml",
           '[thresholds]\n"sql_ground_truth.match" = 1\n')
    project.runpytest("cases", *mode).assert_outcomes(passed=1, failed=1)
    (project.path / "cases" / "b" / "ragbench.toml").unlink()
    project.runpytest("cases", *mode).assert_outcomes(passed=2)
    items = {r["case_id"]: r for r in project.items()}
    assert items["b"]["thresholds"] == {"match": 0.0}


@pytest.mark.parametrize(("where", "text", "message"), [
    ("cases/ragbench.toml", '[thresholds]\n"sql_ground_truth.match" = nan\n',
     "*/cases/ragbench.toml: [[]thresholds[]] 'sql_ground_truth.match' must be a finite "
     "number, got nan"),
    ("cases/b/ragbench.toml", '[gates]\n"sql_ground_truth.match" = inf\n',
     "*/cases/b/ragbench.toml: [[]gates[]] 'sql_ground_truth.match' must be a finite number, "
     "got inf"),
    ("cases/ragbench.toml", '[thresholds]\n"sql_ground_truth.match" = "high"\n',
     "*/cases/ragbench.toml: [[]thresholds[]] 'sql_ground_truth.match' must be a number, "
     "got 'high'"),
    ("pyproject.toml", '[tool.ragbench.thresholds]\n"sql_ground_truth.match" = nan\n',
     "*/pyproject.toml: [[]tool.ragbench.thresholds[]] 'sql_ground_truth.match' must be a "
     "finite number, got nan"),
])
def test_a_non_finite_or_wrong_typed_value_is_a_usage_error(
        pytester: pytest.Pytester, where: str, text: str, message: str) -> None:
    project = _sql_project(pytester)
    _write(project.path / where, text)
    result = project.runpytest("cases")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: ragbench: {message}"])
    result.stderr.no_fnmatch_line("*INTERNALERROR*")


def test_a_cases_own_non_finite_threshold_fails_that_case(pytester: pytest.Pytester) -> None:
    project = _sql_project(pytester)
    nan = WRONG_CASE.format(name="a") + "    thresholds: {match: .nan}\n"
    _write(project.path / "cases" / "a" / "teams.yaml", nan)
    result = project.runpytest("cases", "-rA")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*cases/a/teams.yaml:8: field 'thresholds.match': threshold "
                                 "for 'match' must be a finite number, got nan*"])
    report = project.path / ".ragbench" / "results.json"
    assert json.loads(report.read_text())["run"]["status"] == "complete"  # JSON-safe


def test_a_non_finite_flag_value_is_a_usage_error_and_settings_stay_json_safe(
        pytester: pytest.Pytester) -> None:
    project = _sql_project(pytester)
    result = project.runpytest("cases", "--ragbench-judge-temperature=inf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ragbench: --ragbench-judge-temperature must be a "
                                 "finite number, got 'inf'"])
    _write(project.path / "cases" / "ragbench.toml", '[gates]\n"sql_ground_truth.match" = 1\n')
    project.runpytest("cases", "--ragbench-judge-temperature=0.5")
    config = project.results()["config"]
    json.dumps(config, allow_nan=False)
    assert config["gates"] == {"sql_ground_truth.match": 1.0}
    assert config["judge_temperature"] == 0.5
