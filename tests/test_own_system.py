"""Issue 20: the user's own system answers every item it can, through documented interfaces.

The components are the README's own examples ("Interfaces"), written into each test project
as ``components.py``; the user's application is a conftest.py class that logs every call
to ``calls.log`` (appended by every process, so the counts hold under xdist too). Sessions
that import ragas (ragas items, and vector items for ragas's ID-based context metrics) run
in a subprocess: pyarrow (under ragas) cannot be imported twice in one process.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.systems import checks
from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject

README = Path(__file__).resolve().parent.parent / "README.md"


def interfaces_code() -> str:
    """The first Python block of the README's "Interfaces" section."""
    section = README.read_text(encoding="utf-8").split("## Interfaces", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README's Interfaces section has no Python example"
    return match.group(1)


GIVEN = {"id": "given", "kind": "ragas", "question": "Where is the Louvre?",
         "ground_truth": "The Louvre is in Paris.", "answer": "The Louvre is in Paris.",
         "contexts": ["The Louvre, in Paris, opened as a museum in 1793."]}
PORT = {"id": "port", "kind": "ragas", "question": "What does the config set the port to?",
        "ground_truth": "The port is set to 8080.",
        "contexts": ["port: 8080 # the API port", "log_level: info"]}
LEVEL = {"id": "level", "kind": "ragas", "question": "Which log level is configured?",
         "ground_truth": "The log level is info.",
         "contexts": ["log_level: info", "port: 8080 # the API port"]}
RETRIEVE = {"id": "retrieve", "kind": "ragas", "question": "Which museum is in Paris?",
            "ground_truth": "The Louvre museum is in Paris."}
ROWS = [("Paris", "France", "Paris is the capital of France.", "What is the capital of France?"),
        ("Berlin", "Germany", "Berlin is the capital of Germany.",
         "What is the capital of Germany?"),
        ("Rome", "Italy", "Rome is the capital of Italy.", "What is the capital of Italy?")]


def ragcsv_text(header: bool = True) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(["answer", "fragments", "notes", "timestamp", "question"])
    for expected, title, text, question in ROWS:
        writer.writerow([expected, repr([{"page_content": text, "metadata": {"title": title}}]),
                         "", "2024-01-01", question])
    return buffer.getvalue()


CONFTEST = '''
import json
from pathlib import Path

import pytest
from components import HashEmbedder
from pytest_ragbench.protocols import Answer, Context, Generation

LOG = Path(__file__).with_name("calls.log")


def log(**entry):
    with LOG.open("a") as handle:
        handle.write(json.dumps(entry) + "\\n")


class MyApp:
    def answer(self, question, history=None):
        log(who="answer", question=question)
        text = "The Louvre museum is in Paris."
        return Answer(text, (Context("louvre", text, 0.9, {"source": "louvre.md"}),))

    def answer_from(self, question, contexts, history=None):
        log(who="answer_from", question=question, contexts=[c.text for c in contexts],
            titles=[c.metadata.get("title") for c in contexts])
        return Answer(contexts[0].text, tuple(contexts))


class LoggingGenerator:
    model_id = "logging-generator"

    def generate(self, messages, **params):
        log(who="generator", question=messages[-1]["content"], params=params)
        return Generation(text="The capital is " + messages[-1]["content"].split()[-1],
                          model=self.model_id)


@pytest.fixture(scope="session")
def ragbench_system():
    return MyApp()


@pytest.fixture(scope="session")
def ragbench_llm():
    return LoggingGenerator()


@pytest.fixture(scope="session")
def ragbench_embedder():
    return HashEmbedder()
'''


def write_project(pytester: pytest.Pytester, conftest: str = CONFTEST,
                  samples: tuple[dict[str, Any], ...] = (GIVEN, PORT, LEVEL, RETRIEVE)
                  ) -> RagbenchProject:
    project = RagbenchProject(pytester).conftest(conftest)
    project.cases("samples.jsonl", list(samples))
    project.cases("rows.ragcsv.csv", ragcsv_text())
    (project.path / "components.py").write_text(interfaces_code())
    return project


def calls(project: RagbenchProject) -> list[dict[str, Any]]:
    path = project.path / "calls.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("mode", XDIST_MODES, ids=["default", "xdist", "no-xdist"])
def test_answer_from_receives_every_passage_item(pytester: pytest.Pytester,
                                                 mode: tuple[str, ...]) -> None:
    project = write_project(pytester)
    result = project.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider", *mode)
    result.assert_outcomes(passed=7)  # 4 samples, 3 rows (the header row is no row)
    log = calls(project)
    asked_from = sorted(c["question"] for c in log if c["who"] == "answer_from")
    assert asked_from == sorted([PORT["question"], LEVEL["question"],
                                 *(row[3] for row in ROWS)])  # each exactly once
    assert [c["question"] for c in log if c["who"] == "answer"] == [RETRIEVE["question"]]
    assert not [c for c in log if c["who"] == "generator"]  # ragbench_llm answered nothing
    france = next(c for c in log if c["question"] == ROWS[0][3])
    assert france["contexts"] == [ROWS[0][2]] and france["titles"] == ["France"]

    found = project.items_by_name()
    assert set(found) == {"ragas[given]", "ragas[port]", "ragas[level]", "ragas[retrieve]",
                          "ragcsv[rows:1]", "ragcsv[rows:2]", "ragcsv[rows:3]"}
    assert found["ragas[port]"]["evidence"]["answer"] == "port: 8080 # the API port"
    assert "answer_from" in found["ragas[port]"]["evidence"]["answer from"]
    assert found["ragas[given]"]["evidence"]["answer from"] == "the sample"
    assert found["ragcsv[rows:2]"]["evidence"]["got"] == ROWS[1][2]
    assert "the system under test: answer_from of" in \
        found["ragcsv[rows:2]"]["evidence"]["answer from"]
    assert found["ragcsv[rows:2]"]["usage"]["system"]["calls"] == 1
    results = project.results()
    assert "answer_from" in results["components"]["passage answers"]
    assert results["usage"]["system"]["calls"] == 6 and "generator" not in results["usage"]
    result.stdout.fnmatch_lines(["*passage answers: the system under test: answer_from of*"])


def test_without_answer_from_the_generator_answers_and_says_so(
        pytester: pytest.Pytester) -> None:
    project = write_project(
        pytester, CONFTEST.replace("def answer_from(", "def _not_answer_from("), samples=(PORT,))
    result = project.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider",
                                          "--ragbench-max-tokens=77")
    result.assert_outcomes(passed=4)
    log = calls(project)
    generated = [c for c in log if c["who"] == "generator"]
    assert len(generated) == 4 and not [c for c in log if c["who"] == "answer_from"]
    assert {c["params"]["max_tokens"] for c in generated} == {77}
    found = project.items_by_name()
    assert "logging-generator (ragbench_llm): the system has no answer_from" in \
        found["ragcsv[rows:1]"]["evidence"]["answer from"]
    assert "(ragbench_llm; the system has no answer_from)" in \
        found["ragas[port]"]["evidence"]["answer from"]


REGISTERED = '''

class Plain:  # no answer_from
    def answer(self, question, history=None):
        return MyApp().answer(question, history)


def pytest_ragbench_systems(config):
    return {"one": lambda request: Plain(), "two": lambda request: Plain(),
            "mine": lambda request: MyApp()}
'''


def test_items_that_do_not_depend_on_the_system_are_made_once(
        pytester: pytest.Pytester) -> None:
    project = write_project(pytester, CONFTEST + REGISTERED)
    result = project.runpytest("--ragbench", "--ragbench-systems=dense,bm25", "--collect-only",
                               "-q", "-p", "no:cacheprovider")
    ids = {line.rpartition("::")[2] for line in result.stdout.lines if "::" in line}
    # the built-in systems have no answer_from: samples with contexts and rows once
    assert ids == {"ragas[given]", "ragas[port]", "ragas[level]", "ragas[dense-retrieve]",
                   "ragas[bm25-retrieve]", "ragcsv[rows:1]", "ragcsv[rows:2]",
                   "ragcsv[rows:3]"}
    result = project.runpytest("--ragbench", "--ragbench-systems=dense,mine", "--collect-only",
                               "-q", "-p", "no:cacheprovider")
    ids = {line.rpartition("::")[2] for line in result.stdout.lines if "::" in line}
    assert {"ragas[given]", "ragas[mine-port]", "ragcsv[mine-rows:1]", "ragas[dense-retrieve]",
            "ragas[mine-retrieve]"} <= ids
    assert not {"ragas[dense-port]", "ragcsv[dense-rows:1]", "ragcsv[rows:1]"} & ids


def test_registered_systems_without_answer_from_share_one_answer_and_are_not_compared(
        pytester: pytest.Pytester) -> None:
    project = write_project(pytester, CONFTEST + REGISTERED, samples=(PORT, RETRIEVE))
    result = project.runpytest_subprocess("--ragbench", "--ragbench-systems=one,two,mine",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(passed=15)  # (2 samples + 3 rows) x 3 systems
    log = calls(project)
    generated = sorted(c["question"] for c in log if c["who"] == "generator")
    # one and two have no answer_from: ragbench_llm answered each question once for both
    assert generated == sorted([PORT["question"], *(row[3] for row in ROWS)])
    assert len([c for c in log if c["who"] == "answer_from"]) == 4  # mine's own
    found = project.items_by_name()
    assert found["ragcsv[one-rows:1]"]["system_independent"] is True
    assert found["ragas[two-port]"]["system_independent"] is True
    assert found["ragcsv[mine-rows:1]"]["system_independent"] is False
    assert found["ragas[one-retrieve]"]["system_independent"] is False
    results = project.results()
    comparisons = results["comparisons"]
    # one vs two: only the sample that retrieves is compared; mine vs one: also nothing
    # answered by ragbench_llm
    assert set(comparisons["one_vs_two"]) == {"ragas"}
    assert set(comparisons["one_vs_mine"]) == {"ragas"}
    assert results["comparisons"]["one_vs_two"]["ragas"]["semantic_similarity"]["n"] == 1


BAD_RETRIEVER = '''
import pytest

class MyRetriever:
    def index(self, documents):
        pass
    def retrieve(self, query, k):
        return []

@pytest.fixture(scope="session")
def ragbench_retriever():
    return MyRetriever()
'''


def vector_cases(*cases: tuple[str, str, str, str]) -> str:
    """A vector case file: (id, question, ground truth, expected source) per case."""
    lines = ["kind: vector", "cases:"]
    for case_id, question, truth, source in cases:
        lines += [f"  - id: {case_id}", f"    question: {question}",
                  f"    ground_truth: {truth}", f"    expected_sources: [{source}]"]
    return "\n".join(lines) + "\n"


VECTOR_CASES = vector_cases(("one", "Who won the title?", "The Lakers.", "a.md"),
                            ("two", "Where is the tower?", "In Paris.", "b.md"),
                            ("three", "Who made Python?", "Guido.", "c.md"),
                            ("four", "What is espresso?", "Coffee.", "d.md"))


@pytest.mark.parametrize("mode", XDIST_MODES, ids=["default", "xdist", "no-xdist"])
def test_a_retriever_off_the_protocol_fails_once_at_setup(pytester: pytest.Pytester,
                                                          mode: tuple[str, ...]) -> None:
    project = RagbenchProject(pytester).conftest(BAD_RETRIEVER)
    project.cases("vector.yaml", VECTOR_CASES)
    result = project.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider", *mode)
    workers = 2 if mode == ("-n", "2") else 1
    # each worker stops after its first item; xdist reports the stop as an interruption
    assert result.ret == (pytest.ExitCode.INTERRUPTED if workers == 2
                          else pytest.ExitCode.TESTS_FAILED)
    outcomes = result.parseoutcomes()
    assert 1 <= outcomes.get("errors", outcomes.get("error", 0)) <= workers
    assert outcomes.get("passed", 0) == 0
    output = result.stdout.str()
    assert "Traceback" not in output and "top_k" in output
    result.stdout.fnmatch_lines([
        "*ragbench_retriever does not fit the protocol pytest_ragbench.protocols.Retriever*",
        "*MyRetriever.retrieve(query, k) does not accept the arguments the plugin passes "
        "(got an unexpected keyword argument 'top_k'): expected retrieve(query, top_k)*",
        "*MyRetriever has no method retrieve_many: expected retrieve_many(queries, top_k)*",
    ])
    assert output.count("MyRetriever has no method retrieve_many") <= workers


RETRIEVER_CONFTEST = """
import pytest
from pathlib import Path
from components import HashEmbedder, KeywordRetriever
from pytest_ragbench.protocols import Generation


class Indexed(KeywordRetriever):
    def index(self, documents):
        Path("indexed.log").open("a").write(f"{len(documents)}\\n")
        super().index(documents)


class Generator:
    model_id = "scripted"

    def generate(self, messages, **params):
        return Generation(text="It is in Paris.", model=self.model_id)


@pytest.fixture(scope="session")
def ragbench_retriever():
    return Indexed()


@pytest.fixture(scope="session")
def ragbench_llm():
    return Generator()


@pytest.fixture(scope="session")
def ragbench_embedder():
    return HashEmbedder()
"""


def test_an_overridden_retriever_with_index_is_indexed_with_the_corpus(
        pytester: pytest.Pytester) -> None:
    """The README's KeywordRetriever behind the embedded system: indexed once, then asked."""
    project = RagbenchProject(pytester).conftest(RETRIEVER_CONFTEST)
    (project.path / "components.py").write_text(interfaces_code())
    project.corpus({"paris.md": "# Paris\n\nThe Eiffel Tower is in Paris.\n",
                    "rome.md": "# Rome\n\nThe Colosseum is in Rome.\n"})
    project.cases("vector.yaml", vector_cases(
        ("tower", "Where is the Eiffel Tower?", "In Paris.", "paris.md"),
        ("colosseum", "Where is the Colosseum?", "In Rome.", "rome.md")))
    result = project.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert (project.path / "indexed.log").read_text().split() == ["2"]  # once, both documents
    found = project.items_by_name()
    for name, source in (("vector[tower]", "paris.md"), ("vector[colosseum]", "rome.md")):
        assert found[name]["metrics"]["source_hit@5"] == 1.0  # the embedded system's top_k
        assert found[name]["metrics"]["source_mrr"] == 1.0
        assert found[name]["evidence"]["retrieved"].startswith(f"[1] {source}")


def test_the_readme_examples_fit_their_protocols() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(interfaces_code(), "README.md", "exec"), namespace)  # our own README
    fixtures = {"ragbench_retriever": "KeywordRetriever", "ragbench_system": "EchoSystem",
                "ragbench_embedder": "HashEmbedder", "ragbench_llm": "FixedGenerator",
                "ragbench_judge": "FixedGenerator", "ragbench_memory": "ListMemory"}
    for fixture, name in fixtures.items():
        assert checks.problems(fixture, namespace[name]()) == [], fixture
    store = namespace["ListMemory"]()
    store.add_interaction("user", "I live in Paris", {"topic": "home"})
    assert [h.text for h in store.search_memories("where do I live Paris", top_k=1)] == \
        ["I live in Paris"]


def test_each_problem_names_the_method_the_signature_and_the_protocol() -> None:
    class Store:
        def add_interaction(self, role, content):  # no metadata
            return "1"

        def search_memories(self, query, top_k=5, **filters):
            return []

    found = checks.problems("ragbench_memory", Store())
    assert found == [
        "Store.add_interaction(role, content) does not accept the arguments the plugin passes "
        "(too many positional arguments): expected add_interaction(role, content, "
        "metadata=None)",
        "Store has no method clear: expected clear()"]
    assert checks.message("ragbench_memory", found).startswith(
        "ragbench_memory does not fit the protocol pytest_ragbench.protocols.MemoryStore")
    assert checks.problems("ragbench_judge", None) == []  # no judge configured
    assert checks.problems("ragbench_system", object()) == [
        "object has no method answer: expected answer(question, history=None)"]
    with pytest.raises(checks.ProtocolMismatch, match="retrieve_many"):
        checks.require(None, "ragbench_retriever", Store())
