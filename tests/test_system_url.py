"""A RAG service as a black box (``--ragbench-system-url``), against a real FastAPI app served
by uvicorn on 127.0.0.1 (tests/rag_service.py) over a keyword retriever.

The reply is read by the ini keys' JMESPath alike whether it comes whole, as server-sent
events or as JSON lines; the history arrives in the request body as plain messages; each
fault of the service (HTTP 500, a timeout, malformed JSON, a wrong path) fails its own item
with a clear message while the rest of the run goes on; header values come from the
environment and are written nowhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragbench.errors import ConfigError, ModelCallError
from tests.adapter_apps import DirectSystem, KeywordRetriever
from tests.helpers import four_documents
from tests.project import RagbenchProject
from tests.rag_service import serve

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("jmespath")

REQUEST = ('{"query": "{question}", "chat_history": "{history}", '
           '"prompt": "{history}\\nuser: {question}", "options": {"k": 5}}')
ANSWER = "reply"
CONTEXTS = "sources[*].{id: doc_id, text: chunk, score: relevance, source: file}"
HISTORY = [{"role": "user", "content": "Tell me about Paris landmarks."},
           {"role": "assistant", "content": "Paris has the Louvre and the Eiffel Tower."}]


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for doc in four_documents():
        (folder / doc.metadata["source"]).write_text(doc.text + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("service") / "corpus")


@pytest.fixture(scope="module")
def service(corpus: Path) -> Iterator[tuple[str, Path]]:
    log = corpus.parent / "requests.jsonl"
    with serve(corpus, "keyword", log) as url:
        yield url, log


def system(url: str, **kwargs: float) -> object:
    from pytest_ragbench.adapters.http_service import HttpServiceSystem, ServiceSpec

    spec = ServiceSpec.read(url, request=REQUEST, answer=ANSWER, contexts=CONTEXTS)
    return HttpServiceSystem(spec, **{"timeout_s": 10.0, "max_retries": 1,
                                      "backoff_base_s": 0.05, **kwargs})


def direct(corpus: Path) -> DirectSystem:
    from pytest_ragbench.systems.corpus import load_corpus

    return DirectSystem(KeywordRetriever(load_corpus([corpus])))


def test_settings_are_checked_with_the_key_they_came_from() -> None:
    from pytest_ragbench.adapters.http_service import ServiceSpec

    with pytest.raises(ConfigError, match="ini ragbench_system_request is not JSON"):
        ServiceSpec.read("http://x", request='{"query": {question}}')
    with pytest.raises(ConfigError, match=re.escape('ragbench_system_request has no "{question}"')):
        ServiceSpec.read("http://x", request='{"query": "q"}')
    with pytest.raises(ConfigError, match=re.escape("ini ragbench_system_contexts: "
                                                    "'sources[*].{' is not a JMESPath")):
        ServiceSpec.read("http://x", contexts="sources[*].{")
    with pytest.raises(ConfigError, match="expected 'Header-Name = ENV_VAR', got 'X-Key'"):
        ServiceSpec.read("http://x", headers=["X-Key"])
    spec = ServiceSpec.read("http://x", headers=["Authorization = Bearer ${RAGBENCH_TEST_NOPE}"])
    with pytest.raises(ConfigError, match="header Authorization needs the environment variable "
                                          "RAGBENCH_TEST_NOPE, which is not set"):
        spec.headers()
    # the default body: the question and the turns as messages
    assert ServiceSpec.read("http://x").body("Q?", HISTORY) == {"question": "Q?",
                                                                 "history": HISTORY}


@pytest.mark.parametrize("path", ["/rag", "/rag/stream", "/rag/ndjson"])
def test_a_whole_streamed_or_line_by_line_reply_reads_the_same(
        service: tuple[str, Path], corpus: Path, path: str) -> None:
    url, _ = service
    question = "When was the Eiffel Tower completed?"
    answer = system(url + path).answer(question)  # type: ignore[attr-defined]
    expected = direct(corpus).answer(question)
    assert answer.text == expected.text != ""
    assert [(c.id, c.text, c.score, c.metadata["source"]) for c in answer.contexts] == [
        (c.id, c.text, c.score, c.metadata["source"]) for c in expected.contexts]
    assert answer.latency_s > 0


def test_the_history_reaches_the_service_as_messages(service: tuple[str, Path]) -> None:
    url, log = service
    system(url + "/rag").answer("Who created Python?", HISTORY)  # type: ignore[attr-defined]
    body = [json.loads(line) for line in log.read_text().splitlines()][-1]
    assert body["query"] == "Who created Python?"
    assert body["chat_history"] == HISTORY
    assert body["prompt"] == ("user: Tell me about Paris landmarks.\nassistant: Paris has the "
                              "Louvre and the Eiffel Tower.\nuser: Who created Python?")
    assert body["options"] == {"k": 5}


def test_faults_are_retried_then_named(service: tuple[str, Path]) -> None:
    url, _ = service
    client = system(url + "/rag", timeout_s=1.0)
    with pytest.raises(ModelCallError, match=r"failed after 2 attempts: HTTP 500: "
                                             r"'\{\"detail\":\"the index is down\"\}'"):
        client.answer("FAIL500 where is the tower?")  # type: ignore[attr-defined]
    with pytest.raises(ModelCallError, match=r"no reply within 1 s \(--ragbench-timeout\)"):
        client.answer("SLOW where is the tower?")  # type: ignore[attr-defined]
    with pytest.raises(ModelCallError, match=r"malformed reply: not JSON \(Unterminated string"):
        client.answer("MALFORMED where is the tower?")  # type: ignore[attr-defined]
    with pytest.raises(ModelCallError, match=r"malformed reply: the reply has no answer at "
                                             r"'reply' \(ini ragbench_system_answer\)"):
        client.answer("NOANSWER where is the tower?")  # type: ignore[attr-defined]
    before = client.http_requests  # type: ignore[attr-defined]
    flaky = client.answer("FLAKY where is the Eiffel Tower?")  # type: ignore[attr-defined]
    assert flaky.contexts and client.http_requests - before == 2  # type: ignore[attr-defined]
    before = client.http_requests  # type: ignore[attr-defined]
    with pytest.raises(ModelCallError, match=r"refused the question: HTTP 404: .* \(is the "
                                             r"path of --ragbench-system-url right\?\)"):
        system(url + "/nope").answer("Where is the tower?")  # type: ignore[attr-defined]


CASES = """
kind: vector
cases:
  - id: tower
    question: "When was the Eiffel Tower completed?"
    ground_truth: "It was completed in 1889."
    expected_sources: [tower.md]
  - id: followup
    category: conversational
    question: "Who created Python?"
    history:
      - {role: user, content: "Tell me about programming languages."}
      - {role: assistant, content: "Python is a popular one."}
    ground_truth: "Guido van Rossum created Python."
    expected_sources: [python.md]
  - id: flaky
    question: "FLAKY: when did the Lakers win the title?"
    ground_truth: "The Lakers won the 2020 title."
    expected_sources: [lakers.md]
  - id: server_error
    question: "FAIL500 espresso?"
    ground_truth: "x"
  - id: slow
    question: "SLOW espresso?"
    ground_truth: "x"
  - id: malformed
    question: "MALFORMED espresso?"
    ground_truth: "x"
  - id: no_answer
    question: "NOANSWER espresso?"
    ground_truth: "x"
"""

# A cheap embedder for these runs (the comparison with the real MiniLM is in
# test_adapters_runs.py): the service's replies are what is tested here.
CONFTEST = '''
import zlib

import numpy as np
import pytest


class HashEmbedder:
    model_id = "hash-64"

    def embed(self, texts):
        rows = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in zip(rows, texts):
            for word in text.lower().split():
                row[zlib.crc32(word.encode()) % 64] += 1.0
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


@pytest.fixture(scope="session")
def ragbench_embedder():
    return HashEmbedder()
'''


def url_project(pytester: pytest.Pytester, url: str, headers: str = "") -> RagbenchProject:
    project = RagbenchProject(pytester).conftest(CONFTEST)
    project.cases("service.yaml", CASES)
    project.ini(f"ragbench_system_url = {url}\n"
                f"ragbench_system_request = {REQUEST}\n"
                f"ragbench_system_answer = {ANSWER}\n"
                f"ragbench_system_contexts = {CONTEXTS}\n" + headers)
    return project


def run(project: RagbenchProject, *args: str) -> pytest.RunResult:
    return project.run("--ragbench", "-p", "no:cacheprovider", "--ragbench-retries=1",
                       "--ragbench-timeout=2", *args, subprocess=True, timeout=600)


def test_each_fault_fails_its_own_item_and_the_run_goes_on(
        pytester: pytest.Pytester, service: tuple[str, Path]) -> None:
    url, log = service
    # the module's service logs every test's requests: read only this run's
    logged_before = len(log.read_text().splitlines()) if log.exists() else 0
    project = url_project(pytester, url + "/rag")
    result = run(project, "-n", "2")
    result.assert_outcomes(passed=3, failed=4)
    items = project.items_by_case()
    assert {c for c, i in items.items() if i["status"] == "passed"} == {"tower", "followup",
                                                                         "flaky"}
    assert [v for m, v in items["tower"]["metrics"].items() if m.startswith("source_hit@")] == [1]
    output = result.stdout.str()
    for text in ("failed after 2 attempts: HTTP 500: '{\"detail\":\"the index is down\"}'",
                 "no reply within 2 s (--ragbench-timeout)",
                 "malformed reply: not JSON (Unterminated string",
                 "malformed reply: the reply has no answer at 'reply' (ini "
                 "ragbench_system_answer)"):
        assert text in output
    results = project.results()
    assert results["run"]["status"] == "complete"
    assert results["components"]["system"] == f"HTTP service at {url}/rag"
    assert results["config"]["system_url"] == f"{url}/rag"
    bodies = [json.loads(line) for line in log.read_text().splitlines()[logged_before:]]
    followup = next(b for b in bodies if b["query"] == "Who created Python?")
    assert followup["chat_history"] == [
        {"role": "user", "content": "Tell me about programming languages."},
        {"role": "assistant", "content": "Python is a popular one."}]


def test_a_wrong_path_fails_every_item_with_the_hint(
        pytester: pytest.Pytester, service: tuple[str, Path]) -> None:
    url, _ = service
    project = url_project(pytester, url + "/v1/rag")
    result = run(project, "-k", "tower or followup")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([f"*the system at POST {url}/v1/rag refused the question: "
                                 "HTTP 404: '{\"detail\":\"Not Found\"}' (is the path of "
                                 "--ragbench-system-url right?)*"])
    assert project.results()["run"]["status"] == "complete"


def test_header_values_come_from_the_environment_and_are_written_nowhere(
        pytester: pytest.Pytester, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = "s3cr3t-token-4242"
    headers = "ragbench_system_headers =\n    Authorization = Bearer ${RAG_TEST_TOKEN}\n"
    with serve(corpus, "keyword", token=token) as url:
        project = url_project(pytester, url + "/rag", headers)
        monkeypatch.setenv("RAG_TEST_TOKEN", token)
        accepted = run(project, "-k", "tower or followup", "--junitxml=junit.xml")
        monkeypatch.setenv("RAG_TEST_TOKEN", "wrong")
        refused = run(project, "-k", "tower", f"--ragbench-report={project.path / 'refused'}")
        monkeypatch.delenv("RAG_TEST_TOKEN")
        unset = run(project, "-k", "tower", f"--ragbench-report={project.path / 'unset'}")
    accepted.assert_outcomes(passed=2)
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(["*refused the question: HTTP 401: "
                                  "'{\"detail\":\"missing or wrong bearer token\"}'*"])
    unset.assert_outcomes(errors=1)
    unset.stdout.fnmatch_lines(["*ini ragbench_system_headers: header Authorization needs the "
                                "environment variable RAG_TEST_TOKEN, which is not set*"])
    written = [accepted.stdout.str(), accepted.stderr.str(), refused.stdout.str()]
    written += [p.read_text(errors="replace") for p in project.path.rglob("*")
                if p.is_file() and p.suffix in (".json", ".jsonl", ".html", ".xml", ".csv")]
    assert not [text for text in written if token in text]
