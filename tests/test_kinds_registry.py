"""The public kind registry and the one metric vocabulary.

A kind added by a conftest.py through ``pytest_ragbench_item_kinds`` (the README's agent
tool-call kind, run as printed) collects and runs like a built-in one, with and without
xdist; the built-in kinds come through the same hook and every metric they record is
registered once; a misspelt kind or metric in thresholds, gates or judge labels stops
the session at start-up naming the closest known name.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ragbench import kinds
from pytest_ragbench.config.settings import PERTURBATION_KINDS
from pytest_ragbench.metrics.registry import PERTURBATIONS, REGISTRY
from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject

pytest_plugins = ["pytester"]
MODE_IDS = ["plain", "n2", "no-xdist"]
README = Path(__file__).resolve().parent.parent / "README.md"

# The agent under test in the README's example: right on the weather, wrong arguments (and
# one tool too many) on the currency.
MYAGENT = '''
def run_agent(task):
    if "weather" in task:
        weather = {"city": "Paris", "day": "tomorrow"}
        return "Sunny.", [{"name": "get_weather", "arguments": weather}]
    currency = {"amount": 20, "from": "EUR", "to": "GBP"}
    return "About 21.6 dollars.", [{"name": "search_web", "arguments": {"query": task}},
                                   {"name": "convert_currency", "arguments": currency}]
'''


def readme_blocks(language: str) -> list[str]:
    """The ``language`` code blocks of the README section "Adding a kind", as printed."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Adding a kind", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


def tools_project(pytester: pytest.Pytester) -> RagbenchProject:
    """The README's conftest.py and case file, and an agent to evaluate."""
    conftest, = readme_blocks("python")
    cases, = readme_blocks("yaml")
    project = RagbenchProject(pytester).conftest(conftest).ini(addopts="-p no:cacheprovider")
    project.makepyfile(myagent=MYAGENT)
    project.cases("agent.yaml", cases)
    return project


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_the_readme_kind_runs_as_printed(pytester: pytest.Pytester,
                                         mode: tuple[str, ...]) -> None:
    project = tools_project(pytester)
    result = project.runpytest_subprocess("--ragbench", "-m", "tools", "-rA", *mode)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*argument_match = 0, needs >= 1*",
                                 "PASSED test_cases/agent.yaml::tools[[]weather_paris[]]",
                                 "FAILED test_cases/agent.yaml::tools[[]eur_to_usd[]]*"])
    data = project.results()
    metrics = data["metrics"]["tools"]
    assert metrics["tool_recall"]["mean"] == 1.0
    assert metrics["argument_match"]["mean"] == 0.5
    assert metrics["tool_precision"]["mean"] == 0.75  # 1 of 1, then 1 of 2 called
    assert metrics["argument_match"]["threshold"] == 1.0
    assert metrics["tool_precision"]["direction"] == "higher"
    items = {i["case_id"]: i for i in data["items"]}
    assert items["eur_to_usd"]["evidence"]["called"][0]["name"] == "search_web"


def test_a_kind_from_conftest_is_a_marker_and_lists_its_metrics(
        pytester: pytest.Pytester) -> None:
    project = tools_project(pytester)
    markers = project.runpytest("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.tools: ragbench the agent calls the expected*"])
    listing = project.runpytest("--ragbench-metrics")
    assert listing.ret == 0
    listing.stdout.fnmatch_lines([
        "vector (evaluation, vector cases): retrieval and answer over documents",
        "  source_hit@k * [[]0, 1] * higher * >= 1 * 1 if a context among the first k *",
        "  total_time_ms * [[]0, inf] * lower * milliseconds*",
        "tools (evaluation, tools cases): the agent calls the expected tools",
        "  tool_precision * [[]0, 1] * higher * share of the called tools that were expected",
        "  tool_recall * [[]0, 1] * higher * >= 1 * share of the expected tools called",
    ])
    assert "no tests ran" not in listing.stdout.str()  # it lists and exits


def test_ragbench_metrics_command_lists_the_builtin_kinds() -> None:
    result = subprocess.run([sys.executable, "-m", "pytest_ragbench", "metrics"],
                            capture_output=True, text=True, check=False, cwd=README.parent)
    assert result.returncode == 0, result.stderr
    assert "sql_ground_truth (verification, sql cases)" in result.stdout
    assert re.search(r"\n  match +\[0, 1\] +higher +>= 1 +the case's expected SQL", result.stdout)


def test_a_case_of_a_kind_that_is_not_added_is_unknown(pytester: pytest.Pytester) -> None:
    """Kinds live in the session, not in a module: the next session without the hook lacks it."""
    project = tools_project(pytester)
    project.runpytest("--ragbench", "-m", "tools").assert_outcomes(passed=1, failed=1)
    (project.path / "conftest.py").unlink()
    result = project.runpytest("--ragbench")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*agent.yaml:*: field 'kind': unknown kind 'tools' (known "
                                 "kinds: hybrid, memory, ragas, sql, vector)*"])


# -- the built-in kinds and the metric registry ---------------------------------------------

def test_every_builtin_metric_is_registered_with_range_direction_and_definition() -> None:
    registry = kinds.builtin_registry()
    for kind in registry.item_kinds.values():
        for name in kind.metric_names():
            spec = REGISTRY.lookup(name.replace("@k", "@5"))
            assert spec is not None, f"{kind.name}: {name} is not registered"
            assert spec.low < spec.high and spec.direction in ("higher", "lower", "none")
            assert spec.description, name
        for name in kind.thresholds:
            assert kind.emits(name), f"{kind.name}: default threshold on {name}"
    assert PERTURBATIONS is PERTURBATION_KINDS  # one list: config.settings
    robust = registry.item_kinds["robust"]
    assert {f"{p}.holds" for p in PERTURBATION_KINDS} <= set(robust.metric_names())
    assert REGISTRY.direction("total_time_ms") == "lower"
    assert REGISTRY.direction("source_hit@4") == "higher"
    assert REGISTRY.lookup("typos.holds").family == "robustness"


def test_the_builtin_kinds_come_through_the_hook(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure()
    found = kinds.registry(config)
    assert found.item_kinds == kinds.builtin_registry().item_kinds
    assert [k.name for k in found.item_kinds_for("sql", evaluate=False)] == ["sql_ground_truth"]
    assert [k.name for k in found.item_kinds_for("sql", evaluate=True)] == [
        "sql_ground_truth", "sql"]


def test_a_plugin_kind_replaces_a_builtin_one_of_the_same_name(
        pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.conftest('''
from pytest_ragbench.kinds import VERIFICATION, ItemKind
from pytest_ragbench.kinds import Outcome


def always(case, item):
    return Outcome(metrics={"match": 1.0})


def pytest_ragbench_item_kinds(config):
    return [ItemKind(name="sql_ground_truth", case_kind="sql", runner=always,
                     description="always matches", family=VERIFICATION, metrics=("match",),
                     thresholds={"match": 1.0})]
''')
    project.cases("wrong.yaml", "- id: wrong\n  question: q\n  expected_sql: SELECT 1 AS n\n"
                                "  ground_truth_data: {n: 2}\n")
    project.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.parametrize(("hook", "message"), [
    ('[ItemKind(name="quiz", case_kind="quizz", runner="x:run", metrics=("token_f1",)), '
     'CaseKind("quiz", {})]',
     "item kind 'quiz' reads case kind 'quizz', which no CaseKind defines (did you mean "
     "'quiz'?)"),
    ('[ItemKind(name="quiz", case_kind="vector", runner="x:run", metrics=("token_f2",))]',
     "item kind 'quiz': metric 'token_f2' is not registered; give its MetricSpec instead of "
     "its name (did you mean 'token_f1'?)"),
    ('[ItemKind(name="quiz", case_kind="vector", runner="x:run", metrics=("token_f1",), '
     'thresholds={"tokn_f1": 1})]',
     "item kind 'quiz': default threshold on 'tokn_f1', which the kind does not record (did "
     "you mean 'token_f1'?)"),
    ('[ItemKind(name="quiz", case_kind="vector", runner="x:run", '
     'metrics=(define_metric("exact_match", "mine"),))]',
     "item kind 'quiz': metric 'exact_match': name(s) already registered: exact_match"),
    ('[CaseKind("quiz", {"question": Field(True), "tags": Field()})]',
     "case kind 'quiz': every case has the field(s) tags already"),
    ('[ItemKind(name="my-kind", case_kind="vector", runner="x:run")]',
     "kind name 'my-kind': use letters, digits*"),
])
def test_a_broken_kind_is_a_usage_error(pytester: pytest.Pytester, hook: str,
                                        message: str) -> None:
    pytester.makeconftest(
        "from pytest_ragbench.kinds import CaseKind, Field, ItemKind\n"
        "from pytest_ragbench.metrics import define_metric\n\n\n"
        f"def pytest_ragbench_item_kinds(config):\n    return {hook}\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: ragbench: {message}"])


def test_two_plugins_adding_one_kind_is_a_usage_error(pytester: pytest.Pytester) -> None:
    kind = ('from pytest_ragbench.kinds import ItemKind\n\n\n'
            'def pytest_ragbench_item_kinds(config):\n'
            '    return [ItemKind(name="quiz", case_kind="vector", runner="x:run")]\n')
    pytester.makepyfile(plugin_a=kind, plugin_b=kind)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "plugin_a", "-p", "plugin_b", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ragbench: ItemKind 'quiz' is added twice by "
                                 "pytest_ragbench_item_kinds"])


def test_a_metric_the_kind_does_not_declare_fails_the_item(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester).conftest('''
from pytest_ragbench.cases.build import text
from pytest_ragbench.kinds import CaseKind, Field, ItemKind
from pytest_ragbench.kinds import Outcome


def run(case, item):
    return Outcome(metrics={"token_f1": 1.0, "hit_rate": 1.0})


def pytest_ragbench_item_kinds(config):
    return [CaseKind("probe", {"question": Field(True, text)}),
            ItemKind(name="probe", case_kind="probe", runner=run, metrics=("token_f1",))]
''')
    project.cases("p.yaml", "- {id: one, kind: probe, question: q}\n")
    result = project.runpytest("--ragbench", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the probe kind recorded 'hit_rate', not among the metrics "
                                 "it declares (ItemKind.metrics: token_f1)*"])


# -- misspelt names stop the session at start-up --------------------------------------------

@pytest.mark.parametrize(("where", "table", "message"), [
    ("pyproject.toml", '[tool.ragbench.thresholds]\n"vectr.source_hit@5" = 0.9\n',
     "threshold 'vectr.source_hit@5' in */pyproject.toml: unknown kind 'vectr' (did you mean "
     "'vector'?)"),
    ("pyproject.toml", '[tool.ragbench.thresholds.vector]\nsource_hit5 = 0.9\n',
     "threshold 'vector.source_hit5' in */pyproject.toml: vector items do not record metric "
     "'source_hit5' (did you mean 'source_hit@k'?)"),
    ("test_cases/ragbench.toml", '[gates]\n"vector.semantic_similarty" = 0.5\n',
     "gate 'vector.semantic_similarty' in */test_cases/ragbench.toml: vector items do not "
     "record metric 'semantic_similarty' (did you mean 'semantic_similarity'?)"),
    ("test_cases/ragbench.toml", '[gates]\n"tools.tool_recal[category=x]" = 0.5\n',
     "gate 'tools.tool_recal[[]category=x]' in */test_cases/ragbench.toml: tools items do not "
     "record metric 'tool_recal' (did you mean 'tool_recall'?)"),
    ("pyproject.toml", '[tool.ragbench.thresholds]\n"beir.RR" = 0.5\n',
     "threshold 'beir.RR' in */pyproject.toml: beir items do not record metric 'RR' (did you "
     "mean 'MRR'?)"),
])
@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_a_misspelt_threshold_or_gate_stops_the_session(
        pytester: pytest.Pytester, where: str, table: str, message: str,
        mode: tuple[str, ...]) -> None:
    project = tools_project(pytester)
    (project.path / where).write_text(table)
    result = project.runpytest_subprocess("--ragbench", *mode)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: ragbench: {message}"])
    assert not (project.path / ".ragbench").exists()  # nothing ran



@pytest.mark.parametrize(("flag", "message"), [
    ("--ragbench-fail-on=regresion", "--ragbench-fail-on takes regression, drift, critical "
     "(comma-separated), got 'regresion' (did you mean 'regression'?)"),
    ("--ragbench-gate=ci_lower", "--ragbench-gate must be 'mean' or 'ci-lower', got "
     "'ci_lower' (did you mean 'ci-lower'?)"),
])
def test_a_misspelt_flag_value_stops_the_session(pytester: pytest.Pytester, flag: str,
                                                 message: str) -> None:
    project = tools_project(pytester)
    result = project.runpytest("--ragbench", flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: ragbench: {message}"])
    assert not (project.path / ".ragbench").exists()  # nothing ran

def test_correct_names_of_every_form_are_accepted(pytester: pytest.Pytester) -> None:
    project = tools_project(pytester)
    (project.path / "pyproject.toml").write_text(
        '[tool.ragbench.thresholds]\n"vector.source_hit@5" = 1\n"vector.source_hit@k" = 1\n'
        '"robust.typos.holds" = 1\n"robust.rbo" = 0.4\n"beir.nDCG@10" = 0.1\n'
        '"tools.tool_precision" = 0.5\n[tool.ragbench.thresholds.memory]\nrecall = 1\n'
        '[tool.ragbench.gates]\n"ragcsv.accuracy[category=x]" = 70\n"tools.tool_recall" = 1\n')
    project.runpytest("--ragbench", "-m", "tools").assert_outcomes(passed=1, failed=1)


def test_a_judge_label_naming_an_unknown_metric_stops_the_session(
        pytester: pytest.Pytester) -> None:
    project = tools_project(pytester)
    (project.path / "labels.jsonl").write_text(
        '{"id": "weather_paris", "metric": "tool_recall", "score": 1}\n'
        '{"id": "eur_to_usd", "metric": "tool_recal", "score": 0}\n')
    result = project.runpytest("--ragbench", "--ragbench-judge-labels=labels.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ragbench: --ragbench-judge-labels labels.jsonl:2: no "
                                 "item records metric 'tool_recal' (did you mean 'tool_recall'?)"])
    (project.path / "labels.jsonl").write_text(
        '{"id": "weather_paris", "metric": "tool_recall", "score": 1, "kind": "tool"}\n')
    result = project.runpytest("--ragbench", "--ragbench-judge-labels=labels.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ragbench: --ragbench-judge-labels labels.jsonl:1: "
                                 "unknown kind 'tool' (did you mean 'tools'?)"])


def test_item_kind_takes_keyword_arguments_and_the_old_run_name_imports() -> None:
    from pytest_ragbench.kinds import ItemKind, ItemRun, RunContext

    with pytest.raises(TypeError):
        ItemKind("quiz", "vector", "x:run")  # type: ignore[call-arg]
    assert ItemKind(name="quiz", case_kind="vector", runner="x:run").case_kind == "vector"
    assert RunContext is ItemRun


QUIZ_FORMAT = '''
import pytest
from pytest_ragbench.cases.model import CustomCase
from pytest_ragbench.collect.items import CaseItem
from pytest_ragbench.kinds import (AS_GIVEN, CaseKind, FormatReader, ItemKind, Outcome,
                                   registry)


class QuizFile(pytest.File):
    holds_only_ragbench_items = True

    def collect(self):
        kind = registry(self.config).item_kinds["quiz"]
        for number, line in enumerate(self.path.read_text().splitlines(), start=1):
            question, _, answer = line.partition("=")
            case = CustomCase(id=f"q{number}", kind="quiz", file=str(self.path), line=number,
                              fields={"question": question, "answer": answer})
            yield CaseItem.create(self, case, kind)


def run(case, item):
    return Outcome(metrics={"exact_match": float(case.answer.strip() == "4")})


def pytest_ragbench_item_kinds(config):
    return [CaseKind("quiz", None),
            ItemKind(name="quiz", case_kind="quiz", runner=run, metrics=("exact_match",),
                     thresholds={"exact_match": 1.0}, answers=AS_GIVEN,
                     reader=FormatReader(noun="quiz file", collector=QuizFile,
                                         suffix=".txt",
                                         detect=lambda path: path.name.endswith(".quiz.txt")))]
'''


def test_a_conftest_kind_brings_its_own_file_format(pytester: pytest.Pytester) -> None:
    """plugin.py asks the registered kinds for a collector: none is named in the package."""
    project = RagbenchProject(pytester).conftest(QUIZ_FORMAT)
    project.cases("sums.quiz.txt", "2+2=4\n2+3=6\n")
    project.cases("notes.txt", "2+2=5\n")  # not detected as the format: not collected
    result = project.runpytest("--ragbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*sums.quiz.txt::quiz[[]q2[]]*"])
    without = project.runpytest("-p", "no:cacheprovider")  # an evaluating kind: --ragbench only
    without.assert_outcomes()
