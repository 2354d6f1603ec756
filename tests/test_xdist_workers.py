"""Issue 20, point 5: under pytest-xdist each worker uses its share of the CPUs and fetches
the answers of its own items ahead of them.

Every session runs in a subprocess (``runpytest_subprocess``): thread limits are process
state, read by numpy and torch when they load. Timing targets live in
``benchmarks/bench_xdist.py``; these tests check the behaviour that makes them possible.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from pytest_ragbench.run.threads import THREAD_VARIABLES
from tests.helpers import XDIST_MODES, make_scores_db

pytest.importorskip("xdist")

# A test module of the project: what thread limits a process runs under.
THREADS_TEST = '''
import json, os, sys
from pathlib import Path

import threadpoolctl

from pytest_ragbench.systems.local_llm import default_threads


def test_threads():
    import numpy  # noqa: F401  (loaded already by the -p plugin, if given)

    pools = {p["internal_api"]: p["num_threads"] for p in threadpoolctl.threadpool_info()}
    found = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
             "env": {name: os.environ.get(name) for name in THREAD_VARIABLES},
             "pools": pools, "llama": default_threads()}
    if "torch" in sys.modules or os.environ.get("CHECK_TORCH"):
        import torch
        found["torch"] = torch.get_num_threads()
    with Path(__file__).with_name("threads.jsonl").open("a") as handle:
        handle.write(json.dumps(found) + "\\n")
'''.replace("THREAD_VARIABLES", repr(THREAD_VARIABLES))

# Loaded with -p before any conftest.py: numpy's BLAS starts with its default threads.
EARLY_NUMPY = "import numpy  # noqa: F401\n"


def _clean_thread_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _thread_reports(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "threads.jsonl").read_text().splitlines()]


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


@pytest.mark.parametrize("early_numpy", [False, True], ids=["numpy-later", "numpy-first"])
def test_each_worker_of_a_ragbench_run_uses_its_share_of_the_cpus(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, early_numpy: bool) -> None:
    _clean_thread_env(monkeypatch)
    pytester.makepyfile(test_threads=THREADS_TEST, early_numpy=EARLY_NUMPY)
    pytester.makepyfile(test_threads_too=THREADS_TEST)
    extra = ["-p", "early_numpy"] if early_numpy else []
    result = pytester.runpytest_subprocess("--ragbench", "-n", "2", "-p", "no:cacheprovider",
                                           *extra)
    result.assert_outcomes(passed=2)
    share = max(1, _cpus() // 2)
    reports = _thread_reports(pytester.path)
    assert {r["worker"] for r in reports} <= {"gw0", "gw1"}
    for report in reports:
        assert report["env"]["OMP_NUM_THREADS"] == str(share)
        assert report["env"]["OPENBLAS_NUM_THREADS"] == str(share)
        assert report["llama"] == share
        assert report["pools"], "numpy's BLAS should be listed by threadpoolctl"
        assert set(report["pools"].values()) == {share}, report["pools"]


def test_serial_runs_and_runs_without_ragbench_keep_their_threads(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_thread_env(monkeypatch)
    pytester.makepyfile(test_threads=THREADS_TEST)
    for args in (["--ragbench"], ["--ragbench", "-p", "no:xdist"], ["-n", "2"]):
        (pytester.path / "threads.jsonl").unlink(missing_ok=True)
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
        result.assert_outcomes(passed=1)
        (report,) = _thread_reports(pytester.path)
        assert report["env"]["OMP_NUM_THREADS"] is None, args  # nothing set for them
        assert report["llama"] == (_cpus() if report["worker"] == "main" else
                                   max(1, _cpus() // 2)), args


def test_a_users_own_thread_setting_is_kept(pytester: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_thread_env(monkeypatch)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    pytester.makepyfile(test_threads=THREADS_TEST)
    result = pytester.runpytest_subprocess("--ragbench", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (report,) = _thread_reports(pytester.path)
    assert report["env"]["OMP_NUM_THREADS"] == "3"
    assert report["env"]["MKL_NUM_THREADS"] == str(max(1, _cpus() // 2))


def test_torch_on_a_worker_uses_its_share(pytester: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("torch") is None:  # not imported here: pytester's inline
        pytest.skip("torch is not installed")     # runs elsewhere cannot load it twice
    _clean_thread_env(monkeypatch)
    monkeypatch.setenv("CHECK_TORCH", "1")  # the test imports torch after the limits
    pytester.makepyfile(test_threads=THREADS_TEST)
    result = pytester.runpytest_subprocess("--ragbench", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (report,) = _thread_reports(pytester.path)
    assert report["torch"] == max(1, _cpus() // 2)


# -- answers fetched ahead, per worker ---------------------------------------------------------

QUESTIONS = [f"How many points did team {i} score?" for i in range(12)]
SQL_CASES = "\n".join(
    json.dumps({"id": f"q{i}", "kind": "sql", "question": question,
                "expected_sql": "SELECT points FROM scores WHERE team = 'Lakers'",
                "ground_truth_data": {"points": 9500}})
    for i, question in enumerate(QUESTIONS)) + "\n"
APP_CONFTEST = '''
import json, os, threading, time
from pathlib import Path

import pytest
from pytest_ragbench.protocols import Answer

LOG = Path(__file__).with_name("log.jsonl")


def log(**entry):
    entry["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with LOG.open("a") as handle:
        handle.write(json.dumps(entry) + "\\n")


class SlowApp:
    """Answers after 0.3 s, like a remote model; logs where and when."""

    def answer(self, question, history=None):
        started = time.monotonic()
        time.sleep(0.3)
        log(event="answer", question=question, thread=threading.current_thread().name,
            start=started, end=time.monotonic())
        return Answer(text="9500 points", contexts=[])


@pytest.fixture(scope="session")
def ragbench_system():
    return SlowApp()


def pytest_runtest_call(item):
    case = getattr(item, "case", None)
    if case is not None:
        log(event="run", question=case.question)
'''


def _answers_project(pytester: pytest.Pytester) -> None:
    make_scores_db(pytester.path / "scores.db")
    pytester.makeini("[pytest]\nragbench_db_url = sqlite:///scores.db\n")
    pytester.mkdir("test_cases")
    (pytester.path / "test_cases" / "questions.jsonl").write_text(SQL_CASES)
    pytester.makeconftest(APP_CONFTEST)


def _most_in_flight(answers: list[dict]) -> int:
    """The most answers one process had started and not finished at the same moment."""
    most = 0
    for answer in answers:
        overlapping = [a for a in answers if a["worker"] == answer["worker"]
                       and a["start"] <= answer["start"] < a["end"]]
        most = max(most, len(overlapping))
    return most


@pytest.mark.parametrize("mode", XDIST_MODES, ids=["default", "n2", "no-xdist"])
def test_each_process_fetches_the_answers_of_its_own_items_ahead(
        pytester: pytest.Pytester, mode: tuple[str, ...]) -> None:
    _answers_project(pytester)
    result = pytester.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider",
                                           "-k", "sql and not ground_truth", *mode)
    result.assert_outcomes(passed=12)
    log = [json.loads(line) for line in (pytester.path / "log.jsonl").read_text().splitlines()]
    answers = [e for e in log if e["event"] == "answer"]
    ran_by = {e["question"]: e["worker"] for e in log if e["event"] == "run"}
    # each question asked once, by the process that ran its item: no worker fetched another's
    assert Counter(a["question"] for a in answers) == Counter(QUESTIONS)
    assert {a["question"]: a["worker"] for a in answers} == ran_by
    # ... ahead of the items: in the prefetcher's threads, several at once
    assert {a["thread"].split("_")[0] for a in answers} == {"ragbench-prefetch"}
    assert _most_in_flight(answers) >= 2
    if mode == ("-n", "2"):
        per_worker = Counter(ran_by.values())
        assert set(per_worker) == {"gw0", "gw1"}, per_worker


# -- models: lazily, once per worker ------------------------------------------------------------

EMBEDDING_APP_CONFTEST = '''
import json, os, sys
from pathlib import Path

import pytest
from pytest_ragbench.protocols import Answer

LOG = Path(__file__).with_name("models.jsonl")
HEAVY = ("torch", "sentence_transformers", "llama_cpp", "faiss")


def log(**entry):
    entry["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with LOG.open("a") as handle:
        handle.write(json.dumps(entry) + "\\n")


class EmbeddingApp:
    """Embeds each question with the session's embedder, as a dense retriever would."""

    def __init__(self, embedder):
        self.embedder = embedder

    def answer(self, question, history=None):
        self.embedder.embed([question])
        import torch
        log(event="answer", embedder=id(self.embedder), model=id(self.embedder._model),
            torch_threads=torch.get_num_threads())
        return Answer(text="9500 points", contexts=[])


@pytest.fixture(scope="session")
def ragbench_system(ragbench_embedder):
    return EmbeddingApp(ragbench_embedder)


def pytest_collection_finish(session):
    log(event="collected", loaded=[name for name in HEAVY if name in sys.modules])
'''


@pytest.mark.parametrize("mode", XDIST_MODES, ids=["default", "n2", "no-xdist"])
def test_models_load_lazily_and_once_per_worker_with_its_share_of_threads(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        mode: tuple[str, ...]) -> None:
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("sentence-transformers is not installed")
    _clean_thread_env(monkeypatch)
    _answers_project(pytester)
    pytester.makeconftest(EMBEDDING_APP_CONFTEST)
    result = pytester.runpytest_subprocess("--ragbench", "-p", "no:cacheprovider",
                                           "-k", "sql and not ground_truth", *mode)
    result.assert_outcomes(passed=12)
    log = [json.loads(line) for line in (pytester.path / "models.jsonl").read_text().splitlines()]
    # nothing heavy is imported to collect: the models load when an item first needs them
    collected = [e for e in log if e["event"] == "collected"]
    assert collected and all(e["loaded"] == [] for e in collected), collected
    answers = [e for e in log if e["event"] == "answer"]
    assert len(answers) == 12
    workers = {e["worker"] for e in answers}
    if mode == ("-n", "2"):
        assert workers == {"gw0", "gw1"}
    for worker in workers:
        mine = [e for e in answers if e["worker"] == worker]
        # one embedder and one loaded model per process, however many items and threads
        assert len({e["embedder"] for e in mine}) == 1, mine
        assert len({e["model"] for e in mine}) == 1, mine
        if worker != "main":  # a serial run keeps torch's own default
            assert {e["torch_threads"] for e in mine} == {max(1, _cpus() // 2)}, mine
