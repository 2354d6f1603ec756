"""Sweeps (``--ragbench-sweep``, ``[sweep]``), the best configuration and best.toml."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

from pytest_ragbench.config.sweep import Sweep, combine, parse_flag, read_table
from pytest_ragbench.errors import ConfigError
from tests.project import RagbenchProject
from tests.test_systems import DOCUMENTS, PROBE_CONFTEST, PROBE_RUNNER, QUESTIONS

# Counts every index built (each process), to show a top_k sweep builds its index once.
COUNT_INDEXING = '''

import json as _json
from pathlib import Path as _Path

from pytest_ragbench.systems import retrievers as _retrievers

INDEXED = []


def _counted(cls):
    original = cls.index

    def index(self, documents):
        INDEXED.append(cls.__name__)
        return original(self, documents)

    cls.index = index


_counted(_retrievers.DenseRetriever)
_counted(_retrievers.BM25Retriever)


def pytest_sessionfinish(session):
    _Path(str(session.config.rootpath), "indexed.json").write_text(_json.dumps(INDEXED))
'''


# -- what a sweep expands into --------------------------------------------------------------

def test_grid_adds_the_default_and_one_at_a_time_moves_one_parameter() -> None:
    sweep = Sweep(params={"top_k": (3, 10), "min_score": (0.0, 0.5)})
    names = [c.name for c in sweep.configurations({"top_k": 5, "min_score": 0.0})]
    assert names == ["embedded[top_k=5,min_score=0]", "embedded[top_k=3,min_score=0]",
                     "embedded[top_k=3,min_score=0.5]", "embedded[top_k=10,min_score=0]",
                     "embedded[top_k=10,min_score=0.5]"]
    found = sweep.configurations({"top_k": 5, "min_score": 0.0})
    assert [c.default for c in found] == [True, False, False, False, False]
    one = Sweep(mode="one-at-a-time", params={"top_k": (3, 5, 10), "min_score": (0.0, 0.5)},
                base={"top_k": 5, "min_score": 0.0})
    assert [c.params for c in one.configurations()] == [
        {"top_k": 5, "min_score": 0.0}, {"top_k": 3, "min_score": 0.0},
        {"top_k": 10, "min_score": 0.0}, {"top_k": 5, "min_score": 0.5}]
    # No base value and no factory default: the grid has no default configuration.
    assert not any(c.default for c in Sweep(params={"x": (1, 2)}).configurations())


def test_flag_values_are_read_as_toml_scalars() -> None:
    assert parse_flag("top_k=3,5,10") == ("top_k", (3, 5, 10))
    assert parse_flag("min_score=0.2, 0.5") == ("min_score", (0.2, 0.5))
    assert parse_flag("rerank=true,false") == ("rerank", (True, False))
    assert parse_flag("model=all-MiniLM-L6-v2,bge-small") == (
        "model", ("all-MiniLM-L6-v2", "bge-small"))


@pytest.mark.parametrize(("spec", "message"), [
    ("top_k", "--ragbench-sweep 'top_k': expected PARAMETER=V1,V2"),
    ("top_k=", "parameter 'top_k' has no values"),
    ("top_k=3,3", "parameter 'top_k' repeats 3"),
    ("3=1,2", "expected PARAMETER=V1,V2"),
])
def test_bad_flags_name_the_flag_and_parameter(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        combine([], [spec], None)


def test_bad_tables_name_the_file_and_key() -> None:
    with pytest.raises(ConfigError, match=r"f.toml: \[sweep\] mode must be 'grid' or "):
        read_table({"mode": "random", "top_k": [1]}, "f.toml: [sweep]")
    with pytest.raises(ConfigError, match=r"f.toml: \[sweep\] 'top_k' must be a list"):
        read_table({"top_k": [1, [2]]}, "f.toml: [sweep]")
    a = read_table({"top_k": [1, 2]}, "a/ragbench.toml: [sweep]")
    b = read_table({"top_k": [3]}, "b/ragbench.toml: [sweep]")
    with pytest.raises(ConfigError, match=r"'top_k' is \[1, 2\] in a/ragbench.toml.* but \[3\] "
                                          r"in b/ragbench.toml"):
        combine([a, b], [], None)
    # A flag replaces the file's values of one parameter and adds others.
    merged = combine([a], ["top_k=7,8", "min_score=0.1,0.2"], None)
    assert merged is not None
    assert merged.params == {"top_k": (7, 8), "min_score": (0.1, 0.2)}


@pytest.mark.parametrize(("setup", "args", "message"), [
    ("", ("--ragbench-sweep", "nope=1,2"),
     "*--ragbench-sweep: system 'embedded' takes no parameter 'nope'*it takes*top_k*"),
    ("", ("--ragbench-sweep", "top_k"), "*--ragbench-sweep 'top_k': expected PARAMETER=*"),
    ("[sweep]\nmode = 'sideways'\ntop_k = [1, 2]\n", (),
     "*ragbench.toml: [[]sweep[]] mode must be 'grid' or 'one-at-a-time', got 'sideways'*"),
    ("[sweep]\nsystem = 'qdrant'\ntop_k = [1, 2]\n", (),
     "*the built-in system 'qdrant' takes no parameters to sweep*"),
    ("[sweep]\nsystem = 'mine'\ntop_k = [1, 2]\n", (), "*sweep: unknown system 'mine'*"),
    ("[sweep]\nmode = 'one-at-a-time'\nx = [1, 2]\nsystem = 'app'\n", (),
     "*one-at-a-time moves each parameter from the base: give a base value of x*"),
])
def test_bad_sweeps_are_usage_errors(pytester: pytest.Pytester, setup: str,
                                     args: tuple[str, ...], message: str) -> None:
    project = RagbenchProject(pytester).ini()
    project.conftest("def pytest_ragbench_systems(config):\n"
                     "    return {'app': lambda request, x, y=2: None}\n")
    project.cases_dir()
    if setup:
        (project.path / "ragbench.toml").write_text(setup)
    result = project.runpytest("--ragbench", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_registered_factory_is_swept_with_its_keyword_parameters(
        pytester: pytest.Pytester) -> None:
    """Each configuration is a named system: its factory gets the configuration's parameters."""
    project = RagbenchProject(pytester).ini()
    project.conftest('''
from pytest_ragbench.systems.protocols import Answer

BUILT = []


class Echo:
    def __init__(self, words, shout):
        self.words, self.shout = words, shout

    def answer(self, question, history=None):
        text = " ".join(question.split()[:self.words])
        return Answer(text.upper() if self.shout else text, ())


def make(request, words=2, shout=False):
    BUILT.append((words, shout))
    return Echo(words, shout)


def pytest_ragbench_systems(config):
    return {"echo": make}
''')
    (project.path / "ragbench.toml").write_text(
        '[sweep]\nsystem = "echo"\nwords = [1, 3]\nshout = [false, true]\n')
    project.cases("facts.yaml", """
- id: capital
  kind: vector
  question: "Paris is the capital of France"
  ground_truth: Paris
  expected_facts: ["Paris is"]
""")
    project.runpytest("--ragbench", "-p", "no:cacheprovider", "--ragbench-objective",
                      "vector.answered")
    data = project.results()
    names = ["echo[words=2,shout=false]", "echo[words=1,shout=false]", "echo[words=1,shout=true]",
             "echo[words=3,shout=false]", "echo[words=3,shout=true]"]
    assert data["systems"] == names
    assert [c["default"] for c in data["config"]["configurations"]] == [True] + [False] * 4
    answers = {i["system"]: i["answers"][0]["text"] for i in project.items()
               if i["kind"] == "vector"}
    assert answers == {names[0]: "Paris is", names[1]: "Paris", names[2]: "PARIS",
                       names[3]: "Paris is the", names[4]: "PARIS IS THE"}
    best = data["best"]
    assert best["objectives"][0]["objective"] == "vector.answered"
    # Every echo answers without a model; its seconds are the plugin's timing of the call.
    assert all(row["model_calls"] == 0 and row["latency_s"] < 1 for row in best["pareto"])
    # report.html: the rankings, the Pareto table and its plot.
    page = project.html()
    section = page[page.index("<h2 id=best>"):]
    assert "recommended configuration: echo[words=2,shout=false]" in section
    assert "<h3>vector.answered</h3>" in section and "<h3>Quality against cost</h3>" in section
    assert section.index("Quality against cost") < section.index('src="data:image/png;base64,')
    assert '<a href="#best">Best</a>' in page


# -- a real sweep of the embedded system ---------------------------------------------------------

RECALL_CONFTEST = PROBE_CONFTEST.replace(
    'metrics=(HIT, "rr")', 'metrics=(HIT, RECALL, "rr")').replace(
    "\nPROBE = ItemKind(", """
RECALL = define_metric("found_share", "share of the expected sources among the contexts",
                       family="retrieval", needs=("ids",))
PROBE = ItemKind(""")
RECALL_RUNNER = PROBE_RUNNER.replace(
    '"rr": 1 / ranks[0] if ranks else 0.0}',
    '"rr": 1 / ranks[0] if ranks else 0.0,\n'
    '                            "found_share": len(ranks) / len(case.expected_sources)}')


def _probe_project(pytester: pytest.Pytester, conftest: str = "") -> RagbenchProject:
    """The probe kind with ``recall``: each question expects its document and the next two."""
    assert "RECALL" in RECALL_CONFTEST and "found_share" in RECALL_RUNNER
    project = RagbenchProject(pytester).conftest(RECALL_CONFTEST + conftest).ini()
    (project.path / "probe_runner.py").write_text(RECALL_RUNNER)
    project.corpus({name: text + "\n" for name, text in DOCUMENTS.items()})
    names = [source for _, _, source in QUESTIONS if source in DOCUMENTS]
    project.cases("probe.jsonl", [
        {"id": i, "kind": "probe", "question": q, "ground_truth": source,
         "expected_sources": [source, *(names[(names.index(source) + j) % len(names)]
                                        for j in (1, 2) if source in names)]}
        for i, q, source in QUESTIONS])
    return project


def _mean(data: dict[str, Any], metric: str, system: str | None) -> float:
    cell = data["metrics"]["probe"][metric]
    found: float = (cell["systems"][system] if system else cell)["mean"]
    return found


def test_a_top_k_sweep_indexes_once_names_the_best_and_reruns_from_best_toml(
        pytester: pytest.Pytester) -> None:
    """Real MiniLM, FAISS and bm25s; a loopback server generates."""
    from pytest_ragbench.systems.fixtures import embed_problem
    from pytest_ragbench.testing import LoopbackServer

    problem = embed_problem()
    if problem:
        pytest.skip(problem)
    project = _probe_project(pytester, COUNT_INDEXING)
    (project.path / "ragbench.toml").write_text(
        '[sweep]\ntop_k = [1, 2]\n[sweep.base]\ntop_k = 3\n')
    with LoopbackServer() as server:
        llm = ("--ragbench-llm-url", server.url, "--ragbench-llm-model", "loop",
               "-p", "no:cacheprovider")
        result = project.runpytest_subprocess("--ragbench", "--ragbench-sweep", "top_k=1,5",
                                              "--ragbench-objective", "probe.found_share",
                                              "--ragbench-objective", "probe.rr", *llm)
        data = project.results()
        items = project.items()
        # One hybrid index (one dense, one BM25) for every configuration.
        assert json.loads((project.path / "indexed.json").read_text()) == \
            ["DenseRetriever", "BM25Retriever"]
        # The flag replaced [sweep]'s top_k; the default (the base, top_k=3) joined them.
        configurations = ["embedded[top_k=3]", "embedded[top_k=1]", "embedded[top_k=5]"]
        assert data["systems"] == configurations
        for item in items:
            k = int(item["system"].split("=")[1].rstrip("]"))
            assert len(item["evidence"]["sources"]) == k, item["nodeid"]

        best = data["best"]
        recall, rr = best["objectives"]
        assert recall["objective"] == "probe.found_share" and recall["family"] == 2
        means = [row["mean"] for row in recall["ranking"]]
        assert means == sorted(means, reverse=True)
        for row in recall["ranking"]:
            assert row["mean"] == pytest.approx(_mean(data, "found_share", row["system"]))
        # More contexts find more of the expected sources: k=1 is significantly worse.
        assert [r["system"] for r in recall["ranking"]] == \
            ["embedded[top_k=5]", "embedded[top_k=3]", "embedded[top_k=1]"]
        assert recall["ranking"][2]["worse"] and recall["ranking"][2]["p_holm"] < 0.05
        assert "embedded[top_k=1]" not in recall["best_set"]
        assert recall["best"] == "embedded[top_k=5]" and recall["best"] in recall["best_set"]
        chosen = best["recommended"]
        assert chosen["system"] in recall["best_set"] and chosen["system"] in rr["best_set"]
        assert chosen["system"] == "embedded[top_k=5]" and chosen["params"] == {"top_k": 5}
        assert best["default"] == "embedded[top_k=3]"
        gain = chosen["advantage"]
        assert gain["default"] == "embedded[top_k=3]" and gain["n"] == len(QUESTIONS)
        assert gain["delta"] == pytest.approx(
            _mean(data, "found_share", chosen["system"])
            - _mean(data, "found_share", best["default"]))
        assert gain["delta"] > 0 and gain["ci_low"] <= gain["delta"] <= gain["ci_high"]
        assert {row["system"] for row in best["pareto"]} == set(configurations)
        assert any(row["pareto"] for row in best["pareto"])
        result.stdout.fnmatch_lines([
            "best configuration (multiple comparisons with the best*",
            f"probe.found_share (higher is better, n={len(QUESTIONS)}):",
            "rank*configuration*mean*vs best*95% CI*p Holm*best set",
            "1 * embedded[[]top_k=5[]] * best * yes",
            "3 * embedded[[]top_k=1[]] * no",
            "configuration*probe.found_share*latency s/item*model calls/item*Pareto",
            "recommended configuration: embedded[[]top_k=5[]] *written to best.toml*",
            "  advantage over the default embedded[[]top_k=3[]]: +* (95% CI [[]*, *[]], n=8*",
        ])

        written = tomllib.loads((project.report_dir() / "best.toml").read_text())
        assert written["config"] == {"system": "embedded", "name": chosen["system"],
                                     "params": chosen["params"]}

        # The next run from best.toml: the embedded system with those parameters, same numbers.
        (project.path / "ragbench.toml").unlink()
        project.runpytest_subprocess("--ragbench", "--ragbench-config-from=.ragbench/best.toml",
                                     *llm)
    again = project.results()
    assert again["systems"] == [] and again["best"] is None
    assert again["config"]["config_from"].endswith("best.toml")
    for metric in ("found_share", "rr", "hit"):
        assert _mean(again, metric, None) == pytest.approx(_mean(data, metric, chosen["system"]))
    assert f"top_k={chosen['params']['top_k']}" in again["components"]["system"]
