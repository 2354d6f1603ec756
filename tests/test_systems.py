"""Several systems in one run (``--ragbench-systems``): registered through the hook, or the
built-in ``dense``, ``bm25`` and ``hybrid`` on a small corpus with the real embedder."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest

from tests.helpers import XDIST_MODES, failure_section
from tests.project import RagbenchProject
from tests.pseudo_terminal import run_in_terminal
from tests.toy_project import make_toy_project

MODE_IDS = ["plain", "n2", "no-xdist"]

# Added to the toy project's conftest.py: what each toy system was asked, and on which thread.
RECORD_ASKED = '''

def pytest_sessionfinish(session):
    name = getattr(session.config, "workerinput", {}).get("workerid", "main")
    asked = [{"system": s.name, "question": q, "thread": t} for s in BUILT for q, t in s.asked]
    Path(str(session.config.rootpath), f"asked-{name}.json").write_text(
        json.dumps({"asked": asked, "built": [s.name for s in BUILT]}))
'''


def _asked(project: RagbenchProject) -> tuple[list[dict[str, str]], dict[str, list[str]]]:
    """Every question asked (all processes), and the systems each process built."""
    asked, built = [], {}
    for path in sorted(project.path.glob("asked-*.json")):
        data = json.loads(path.read_text())
        asked += data["asked"]
        built[path.stem.removeprefix("asked-")] = data["built"]
    return asked, built


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_each_system_answers_its_own_items_once(pytester: pytest.Pytester,
                                                mode: tuple[str, ...]) -> None:
    project = make_toy_project(pytester, 12, conftest=RECORD_ASKED)
    result = project.runpytest("--ragbench", "--ragbench-systems", "terse,exact", *mode)
    result.assert_outcomes(passed=24)
    items = project.items()
    assert sorted((i["system"], i["case_id"]) for i in items) == sorted(
        (s, f"q{n:03d}") for s in ("exact", "terse") for n in range(12))
    assert all(i["nodeid"] == f"test_cases/toy.jsonl::toy[{i['system']}-{i['case_id']}]"
               for i in items)
    # Each item scored its own system's answer: terse drops every third word.
    answers = {(i["system"], i["case_id"]): i["evidence"]["answer"].split() for i in items}
    assert all(len(answers["terse", f"q{n:03d}"]) < len(answers["exact", f"q{n:03d}"])
               for n in range(12))
    asked, built = _asked(project)
    pairs = [(a["system"], a["question"]) for a in asked]
    assert len(pairs) == len(set(pairs)) == 24  # every system asked every question once
    threads = {a["thread"] for a in asked}
    if mode == ("-n", "2"):  # each worker builds the systems for the items it runs
        assert built.pop("main") == [] and set(built) == {"gw0", "gw1"}
    # prefetched: asked ahead, on the prefetcher's threads (a worker: its queued items)
    assert threads and all(t.startswith("ragbench-prefetch") for t in threads)
    # Only the named systems were built: the ragbench_system override never was.
    assert all(names == ["terse", "exact"] for names in built.values())
    data = project.results()
    assert data["systems"] == ["terse", "exact"]
    per_system = data["metrics"]["toy"]["token_f1"]["systems"]
    assert per_system["terse"]["mean"] < per_system["exact"]["mean"]
    assert per_system["terse"]["n"] == per_system["exact"]["n"] == 12
    assert data["components"]["system terse"] == "toy terse, drops every word 3"


def test_a_crashed_worker_loses_the_item_of_its_system(pytester: pytest.Pytester) -> None:
    crash = {"id": "boom", "kind": "toy", "question": "CRASH now", "ground_truth": "x y"}
    project = make_toy_project(pytester, 6, extra_cases=[crash])
    result = project.runpytest("--ragbench", "--ragbench-systems", "exact,terse", "-n", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    items = {(i["system"], i["case_id"]): i for i in project.items()}
    assert len(items) == 14
    assert {k for k, i in items.items() if i["status"] == "lost"} == {("exact", "boom"),
                                                                     ("terse", "boom")}
    assert all(i["status"] == "passed" for k, i in items.items() if k[1] != "boom")
    data = project.results()
    assert data["metrics"]["toy"]["token_f1"]["systems"]["terse"]["n"] == 6
    assert data["comparisons"]["exact_vs_terse"]["toy"]["token_f1"]["n"] == 6


def test_deselected_systems_are_not_built(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 6, conftest=RECORD_ASKED)
    result = project.runpytest("--ragbench", "--ragbench-systems", "exact,terse", "-k", "terse")
    result.assert_outcomes(passed=6, deselected=6)
    asked, built = _asked(project)
    assert built == {"main": ["terse"]}
    assert {a["system"] for a in asked} == {"terse"}
    assert project.results()["systems"] == ["terse"]
    assert project.results()["comparisons"] == {}  # one system ran: nothing to compare


def test_the_default_name_is_ragbench_system(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 10, conftest=RECORD_ASKED)
    result = project.runpytest("--ragbench", "--ragbench-systems", "default,halves")
    result.assert_outcomes(passed=20)
    data = project.results()
    assert list(data["comparisons"]) == ["default_vs_halves"]
    assert data["comparisons"]["default_vs_halves"]["toy"]["token_f1"]["better"]
    assert _asked(project)[1] == {"main": ["exact", "halves"]}  # default: the override, exact


KNOWN = ("dense, bm25, hybrid, graph, qdrant, qdrant_dense, qdrant_bm25, default (built in), "
         "exact, halves, terse (registered by pytest_ragbench_systems)")


@pytest.mark.parametrize(("extra", "systems", "message"), [
    ("", "exact,nope,bm25", f"--ragbench-systems: unknown system 'nope'; known systems: {KNOWN}"),
    ("", "exact,terse,exact", "--ragbench-systems names 'exact' twice"),
    ("\ndef pytest_ragbench_systems(config):\n    return {'my-app': lambda request: None}\n",
     "exact", "pytest_ragbench_systems: system name 'my-app': use letters, digits, '_' and '.' "
     "(it becomes part of node ids)"),
    ("\ndef pytest_ragbench_systems(config):\n    return {'exact': lambda request: None}\n",
     "exact", "pytest_ragbench_systems: system 'exact' is registered by two hooks"),
    ("\ndef pytest_ragbench_systems(config):\n    return {'app': 'not a factory'}\n",
     "app", "pytest_ragbench_systems: the factory of 'app' is not callable *"),
], ids=["unknown", "repeated", "bad-name", "registered-twice", "not-callable"])
@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_bad_system_names_are_usage_errors(pytester: pytest.Pytester, mode: tuple[str, ...],
                                           extra: str, systems: str, message: str) -> None:
    project = make_toy_project(pytester, 3)
    if extra:  # a second hook implementation, in a plugin module of the project
        (project.path / "more_systems.py").write_text(extra)
        project.syspathinsert()
        mode = (*mode, "-p", "more_systems")
    result = project.runpytest("--ragbench", "--ragbench-systems", systems, *mode)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: ragbench: {message}"])
    assert "Traceback" not in result.stderr.str()
    assert not (project.path / ".ragbench").exists()


def test_a_factory_that_returns_no_system_fails_its_items(pytester: pytest.Pytester) -> None:
    project = make_toy_project(pytester, 3)
    (project.path / "more_systems.py").write_text(
        "def pytest_ragbench_systems(config):\n    return {'nothing': lambda request: None}\n")
    project.syspathinsert()
    result = project.runpytest("--ragbench", "--ragbench-systems", "exact,nothing",
                               "-p", "more_systems")
    result.assert_outcomes(passed=3, failed=3)
    section = failure_section(result.stdout.str(), "toy[nothing]: q000")
    assert section.splitlines()[0] == (
        "system 'nothing' could not be built: ProtocolMismatch: its factory returned NoneType, "
        "which does not fit the protocol pytest_ragbench.protocols.System: NoneType has no "
        "method answer: expected answer(question, history=None)")


def test_without_registered_systems_the_error_says_how_to_add_one(
        pytester: pytest.Pytester) -> None:
    pytester.mkdir("test_cases")  # an empty project
    result = pytester.runpytest("--ragbench", "--ragbench-systems", "dense,mine")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: ragbench: --ragbench-systems: unknown system 'mine'; known systems: dense, "
        "bm25, hybrid, graph, qdrant, qdrant_dense, qdrant_bm25, default (built in); register "
        "your own with the "
        "pytest_ragbench_systems hook (conftest.py)"])


MEMORY_AND_SQL = {
    "memory.yaml": """
kind: memory
cases:
  - id: economics
    query: costs
    setup: [{role: user, content: "Solar costs have dropped."}]
    expected: [0]
""",
    "scores.yaml": """
kind: sql
cases:
  - id: lakers
    question: How many points did the Lakers score
    expected_sql: SELECT points FROM scores WHERE team = 'Lakers'
    ground_truth_data: {points: 9500}
""",
}


def test_memory_items_are_collected_once_and_sql_items_per_system(
        pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester)
    for name, text in MEMORY_AND_SQL.items():
        project.cases(name, text)
    result = project.runpytest("--ragbench", "--ragbench-systems", "dense,bm25",
                               "--collect-only", "-q")
    ids = sorted(line for line in result.stdout.lines if "::" in line)
    assert ids == ["test_cases/memory.yaml::memory[economics]",
                   "test_cases/scores.yaml::sql[bm25-lakers]",
                   "test_cases/scores.yaml::sql[dense-lakers]",
                   "test_cases/scores.yaml::sql_ground_truth[lakers]"]


# -- the sql kind, evaluated for systems a conftest.py registers ------------------------------

SQL_SYSTEMS = '''
import pytest
from pytest_ragbench.systems.components import set_component
from pytest_ragbench.systems.protocols import Answer

QUERIES = {QUERIES!r}
WRONG = {WRONG!r}


class SqlApp:
    """Answers with SQL; the ``bad`` one selects another column for some questions."""

    answers_sql = True

    def __init__(self, name, wrong):
        self.name, self.wrong = name, wrong

    def describe(self):
        return f"sql app {{self.name}}"

    def answer(self, question, history=None):
        sql = QUERIES[question]
        if self.wrong and question in WRONG:
            sql = sql.replace("SELECT points", "SELECT season AS points")
            sql = sql.replace("SELECT pct", "SELECT points AS pct")
            sql = sql.replace("SELECT city", "SELECT name AS city")
        return Answer(text="see the SQL", sql=sql)


def _offline(request):
    pytest.skip("the offline app's server is not running")


def _broken(request):
    raise RuntimeError("no credentials for the broken app")


def pytest_ragbench_systems(config):
    return {{"good": lambda request: SqlApp("good", False),
             "bad": lambda request: SqlApp("bad", True),
             "offline": _offline, "broken": _broken}}
'''
TEAMS = {"Lakers": (9500, 47.51, "Los Angeles"), "Celtics": (9900, 48.25, "Boston"),
         "Heat": (8900, 45.0, "Miami")}


def _sql_cases() -> tuple[str, dict[str, str], list[str]]:
    lines = ["kind: sql", "cases:"]
    queries, wrong = {}, []
    for team, (points, pct, city) in TEAMS.items():
        for column, value, table in (("points", points, "scores"), ("pct", pct, "scores"),
                                     ("city", city, "teams")):
            question = f"What is the {column} of the {team}"
            key = "name" if table == "teams" else "team"
            queries[question] = f"SELECT {column} FROM {table} WHERE {key} = '{team}'"
            lines += [f"  - id: {team.lower()}_{column}", f"    question: {question}",
                      f"    expected_sql: \"{queries[question]}\"",
                      f"    ground_truth_data: {{{column}: {json.dumps(value)}}}"]
            if not (team == "Heat" and column in ("pct", "city")):
                wrong.append(question)  # the bad app is right on 2 of the 9 questions
    return "\n".join(lines) + "\n", queries, wrong


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_registered_systems_on_the_sql_kind(pytester: pytest.Pytester,
                                            mode: tuple[str, ...]) -> None:
    cases, queries, wrong = _sql_cases()
    project = RagbenchProject(pytester).conftest(SQL_SYSTEMS.format(QUERIES=queries, WRONG=wrong))
    project.ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("scores.yaml", cases)
    result = project.runpytest("--ragbench", "--ragbench-systems", "good,bad,offline,broken",
                               "-rs", *mode)
    # sql_ground_truth (once): 9 passed; good: 9 passed; bad: 2 passed, 7 failed;
    # offline: 9 skipped; broken: 9 failed.
    result.assert_outcomes(passed=20, failed=16, skipped=9)
    result.stdout.fnmatch_lines(["SKIPPED [[]9[]] *: system 'offline': the offline app's "
                                 "server is not running"])
    output = result.stdout.str()
    broken = failure_section(output, "sql[broken]: lakers_points")
    assert "system 'broken' could not be built: RuntimeError: no credentials for the broken " \
           "app" in broken
    assert "Traceback" not in broken
    items = project.items_by_name()
    assert items["sql[bad-lakers_points]"]["status"] == "failed"
    assert items["sql[bad-heat_city]"]["status"] == "passed"
    assert items["sql[offline-heat_city]"]["status"] == "skipped"
    assert items["sql[broken-heat_city]"]["status"] == "error"
    data = project.results()
    assert data["systems"] == ["good", "bad", "offline", "broken"]
    # Only good and bad have scores, so they are the only pair compared.
    assert list(data["comparisons"]) == ["good_vs_bad"]
    compared = data["comparisons"]["good_vs_bad"]["sql"]
    assert set(compared) == {"correct", "execution_match"}
    for metric in compared.values():
        assert metric["test"] == "mcnemar" and metric["n"] == 9
        assert metric["delta"] == pytest.approx(7 / 9)
        # Exact McNemar on 7 discordant pairs, all one way: p = 2 * 0.5**7; Holm over two.
        assert metric["p_value"] == pytest.approx(2 * 0.5 ** 7)
        assert metric["p_holm"] == pytest.approx(2 * 2 * 0.5 ** 7)
        assert metric["better"] and not metric["worse"]
    power = data["power_analysis"]["sql"]
    assert power["n"] == 9 and 0 < power["d=0.2"] < power["d=0.3"] < power["d=0.5"] < 1
    assert data["components"]["system good"] == "sql app good"
    result.stdout.fnmatch_lines([
        "kind * system * metric * n * unscored * mean *",
        "sql * good * correct * 9 * 0 * 1.000 *",
        "sql * bad * correct * 9 * 0 * 0.222 *",
        "paired comparisons (A - B; p Holm-corrected over 2 comparisons, alpha 0.05; "
        "CIs 95% each, unadjusted):",
        # p Holm is 0.03125 up to rounding (the tail is summed in log space)
        "good_vs_bad * sql * correct * mcnemar * 9 * +0.778 * *0.0156 * 0.031[23] * * better",
        "power (test used, Holm alpha / m) * test * n * alpha * d=0.2 * d=0.3 * d=0.5",
        "sql * mcnemar (*% discordant) * 9 * 0.025 * *% * *% * *%",
    ])


# -- one prefetcher for several systems ---------------------------------------------------------

class _Recording:
    """A system that records what it prepared and the order in which answers started."""

    def __init__(self, name: str, started: list[str]) -> None:
        self.name, self.started = name, started
        self.prepared: list[list[str]] = []

    def prepare(self, questions: list[str]) -> None:
        self.prepared.append(list(questions))

    def answer(self, question: str, history: Any = None) -> Any:
        from pytest_ragbench.systems.protocols import Answer

        self.started.append(f"{self.name}:{question}")
        return Answer(f"{self.name} says {question}")


def test_one_prefetcher_answers_for_several_systems_in_item_order() -> None:
    from pytest_ragbench.run.prefetch import Prefetcher
    from pytest_ragbench.systems.protocols import AnswerRequest

    started: list[str] = []
    dense, bm25 = _Recording("dense", started), _Recording("bm25", started)
    jobs = [(f"{system.name}-{q}", system, AnswerRequest(q))
            for q in ("a", "b", "c") for system in (dense, bm25)]
    prefetcher = Prefetcher(concurrency=1)
    try:
        prefetcher.submit_many(jobs)
        answers = {key: prefetcher.answer(key, system, request).text
                   for key, system, request in jobs}
        assert started == ["dense:a", "bm25:a", "dense:b", "bm25:b", "dense:c", "bm25:c"]
        assert answers["bm25-b"] == "bm25 says b" and answers["dense-c"] == "dense says c"
        assert dense.prepared == [["a", "b", "c"]] and bm25.prepared == [["a", "b", "c"]]
        # Another question under a prefetched key is asked, not answered from the prefetch.
        other = prefetcher.answer("dense-a", dense, AnswerRequest("z"))
        assert other.text == "dense says z" and started[-1] == "dense:z"
    finally:
        prefetcher.close()


# -- the built-in dense, bm25 and hybrid systems, with the real embedder -----------------------

DOCUMENTS = {
    "tides.md": "# Tides\nOcean tides are caused by the gravitational pull of the moon and the "
                "sun on the oceans. Most coasts see two high tides a day.",
    "photosynthesis.md": "# Photosynthesis\nGreen plants capture light in chloroplasts and "
                         "turn carbon dioxide and water into sugar, releasing oxygen.",
    "volcanoes.md": "# Volcanoes\nA volcano erupts when molten magma rises through the crust "
                    "and gas pressure forces it out as lava and ash.",
    "bread.md": "# Bread\nYeast ferments the sugars in dough and the carbon dioxide it makes "
                "lets bread rise before baking.",
    "chess.md": "# Chess\nIn chess a pawn that reaches the last rank is promoted, usually to "
                "a queen.",
    "glaciers.md": "# Glaciers\nGlaciers form where more snow falls in winter than melts in "
                   "summer, and the compacted snow turns to ice.",
    "bees.md": "# Bees\nHoney bees tell their hive mates where flowers are with a waggle "
               "dance.",
    "jazz.md": "# Jazz\nJazz grew out of blues and ragtime in New Orleans in the early "
               "twentieth century.",
}
QUESTIONS = [
    ("tides", "What causes ocean tides?", "tides.md"),
    # No word in common with its document: BM25 finds nothing, dense retrieval may.
    ("plants", "Which process allows vegetation to feed on sunshine?", "photosynthesis.md"),
    ("lava", "Why does a volcano erupt?", "volcanoes.md"),
    ("yeast", "What makes bread rise?", "bread.md"),
    ("pawn", "What happens to a pawn on the last rank?", "chess.md"),
    ("frozen", "Where does compacted winter snowfall become ice?", "glaciers.md"),
    ("insects", "How do pollinating insects share directions to blossoms?", "bees.md"),
    ("nowhere", "Qwzx flurble snorkack?", "missing.md"),  # fails for every system
]
NO_SHARED_WORD = ("plants", "insects", "nowhere")
PROBE_CONFTEST = '''
import pytest

import pytest_ragbench.systems.fixtures as system_fixtures
from pytest_ragbench.cases.build import text, text_list
from pytest_ragbench.kinds import CaseKind, Field, ItemKind
from pytest_ragbench.metrics import define_metric

PROBE_CASES = CaseKind("probe", {"question": Field(True, text), "ground_truth": Field(True, text),
                                 "expected_sources": Field(convert=text_list)})
HIT = define_metric("hit", "1 if an expected source is among the contexts", family="retrieval",
                    needs=("ids",))
PROBE = ItemKind(name="probe", case_kind="probe", runner="probe_runner:run",
                 description="test-only retrieval probe",
                 fixtures=("ragbench_config", "ragbench_system"), metrics=(HIT, "rr"))


def pytest_ragbench_item_kinds(config):
    return [PROBE_CASES, PROBE]


def pytest_configure(config):
    system_fixtures.PROGRESS_DOCUMENTS = 1  # show the indexing bar for this small corpus
'''
PROBE_RUNNER = '''
"""Ask this item's system; score where the expected source ranks among its contexts."""
from pytest_ragbench.kinds import Outcome


def run(case, item):
    answer = item.answer(case.question)
    sources = [c.metadata.get("source", c.id) for c in answer.contexts]
    ranks = [rank for rank, source in enumerate(sources, 1) if source in case.expected_sources]
    usage = answer.usage.to_dict()
    usage.pop("total_tokens")
    return Outcome(metrics={"hit": 1.0 if ranks else 0.0, "rr": 1 / ranks[0] if ranks else 0.0},
                   evidence={"sources": sources, "answer": answer.text},
                   usage={"generator": {"calls": 1, **usage, "latency_s": answer.latency_s}})
'''


def _probe_project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).conftest(PROBE_CONFTEST).ini()
    (project.path / "probe_runner.py").write_text(PROBE_RUNNER)
    project.pyproject('[tool.ragbench.thresholds]\n"probe.hit" = 1\n')
    project.corpus({name: text + "\n" for name, text in DOCUMENTS.items()})
    project.cases("probe.jsonl", [{"id": i, "kind": "probe", "question": q,
                                   "ground_truth": source, "expected_sources": [source]}
                                  for i, q, source in QUESTIONS])
    return project


def test_builtin_dense_bm25_hybrid_in_one_run(pytester: pytest.Pytester) -> None:
    """Real MiniLM, FAISS and bm25s; one generator (a loopback OpenAI-compatible server)."""
    from pytest_ragbench.systems.fixtures import embed_problem
    from pytest_ragbench.testing import LoopbackServer

    problem = embed_problem()
    if problem:
        pytest.skip(problem)
    project = _probe_project(pytester)
    with LoopbackServer() as server:
        command = [sys.executable, "-m", "pytest", "--ragbench", "--ragbench-systems",
                   "dense,bm25,hybrid", "--ragbench-llm-url", server.url,
                   "--ragbench-llm-model", "loop"]
        code, output = run_in_terminal(command, project.path)
        assert code == pytest.ExitCode.TESTS_FAILED, output
        asked_first = len(server.requests)
        items = project.items()
        data = project.results()
        failed = sorted(i["nodeid"] for i in items if i["status"] == "failed")
        # --lf reruns only the failures, and the response cache answers every one of them.
        again, again_output = run_in_terminal([*command, "--lf"], project.path)
        assert again == pytest.ExitCode.TESTS_FAILED, again_output
        assert len(server.requests) == asked_first
    assert asked_first >= len(QUESTIONS)  # one generator answered for every system
    # On a terminal, indexing showed a progress bar.
    assert "ragbench: embedding 8 documents" in output and "8/8" in output

    by_system: dict[str, dict[str, dict[str, Any]]] = {}
    for item in items:
        by_system.setdefault(item["system"], {})[item["case_id"]] = item
    assert set(by_system) == {"dense", "bm25", "hybrid"}
    assert all(len(cases) == len(QUESTIONS) for cases in by_system.values())
    for system in ("dense", "bm25", "hybrid"):
        # A question that names its topic finds its document first, whatever the retriever.
        assert by_system[system]["tides"]["evidence"]["sources"][0] == "tides.md", system
        assert by_system[system]["nowhere"]["status"] == "failed"
    # BM25 returns only documents that share a word with the question; dense always top 5,
    # and hybrid fuses the two.
    for case_id in NO_SHARED_WORD:
        assert by_system["bm25"][case_id]["evidence"]["sources"] == [], case_id
        assert by_system["bm25"][case_id]["status"] == "failed"
        assert len(by_system["dense"][case_id]["evidence"]["sources"]) == 5
        assert by_system["hybrid"][case_id]["evidence"]["sources"] == \
            by_system["dense"][case_id]["evidence"]["sources"]
    assert failed == sorted(f"test_cases/probe.jsonl::probe[{s}-{i}]"
                            for s, cases in by_system.items()
                            for i, item in cases.items() if item["metrics"]["hit"] == 0)
    assert sorted(i["nodeid"] for i in project.items()) == failed  # the --lf run

    components = data["components"]
    assert "all-MiniLM-L6-v2" in components["embedder"]
    assert components["system dense"].startswith("embedded: DenseRetriever(")
    assert components["system bm25"].startswith("embedded: BM25Retriever(")
    assert components["system hybrid"].startswith("embedded: HybridRetriever(rrf k=60")
    described = [components[f"system {s}"] for s in ("dense", "bm25", "hybrid")]
    assert all(d.endswith(", corrects spelling against the corpus vocabulary") for d in described)
    generator = re.compile(r"generator (.+?) reading the top \d+(?:, declines|, corrects|$)")
    generators = {generator.search(d)[1] for d in described}
    assert generators == {components["generator"]} and "loop" in components["generator"]
    assert "system" not in components and "retriever" not in components  # no default system


def test_builtin_systems_summary_compares_them(pytester: pytest.Pytester) -> None:
    """The first run's summary: per-system metrics, pairwise comparisons and power."""
    from pytest_ragbench.systems.fixtures import embed_problem

    problem = embed_problem()
    if problem:
        pytest.skip(problem)
    from pytest_ragbench.testing import LoopbackServer

    project = _probe_project(pytester)
    with LoopbackServer() as server:
        result = project.runpytest_subprocess(
            "--ragbench", "--ragbench-systems", "dense,bm25,hybrid", "-p", "no:cacheprovider",
            "-n", "2", "--ragbench-llm-url", server.url, "--ragbench-llm-model", "loop")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    data = project.results()
    items = project.items()
    assert data["systems"] == ["dense", "bm25", "hybrid"]
    assert list(data["comparisons"]) == ["dense_vs_bm25", "dense_vs_hybrid", "bm25_vs_hybrid"]
    for name, kinds in data["comparisons"].items():
        first, _, second = name.partition("_vs_")
        per_system = data["metrics"]["probe"]["rr"]["systems"]
        assert kinds["probe"]["rr"]["n"] == len(QUESTIONS)
        assert kinds["probe"]["rr"]["delta"] == pytest.approx(
            per_system[first]["mean"] - per_system[second]["mean"])
        assert kinds["probe"]["hit"]["test"] == "mcnemar"
        rr = {i["metrics"]["rr"] for i in items if i["system"] in (first, second)}
        assert kinds["probe"]["rr"]["test"] == ("mcnemar" if rr <= {0.0, 1.0}
                                                else "randomization")
    assert data["power_analysis"]["probe"]["n"] == len(QUESTIONS)
    result.stdout.fnmatch_lines([
        "probe * dense * hit * 8 *",
        "probe * bm25 * hit * 8 *",
        "probe * hybrid * hit * 8 *",
        "model usage * calls *",
        "bm25/generator * 8 *",
        "paired comparisons (A - B; p Holm-corrected over * comparisons, alpha 0.05; "
        "CIs 95% each, unadjusted):",
        "dense_vs_bm25 * probe * hit * mcnemar * 8 *",
        "bm25_vs_hybrid * probe * rr * * 8 *",
        "power (test used, Holm alpha / m) * test * n * alpha * d=0.2 * d=0.3 * d=0.5",
        "probe * * 8 * * *% * *% * *%",
    ])
    assert "ragbench: embedding" not in result.stdout.str()  # not a terminal: no bar
