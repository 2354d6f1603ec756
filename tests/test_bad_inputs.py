"""The catalogue of issue 17: each bad input or fault, and exactly what the session does with it.

One test per row: hangs (an endless recursive query, a database and a model server that
never answer), an alias bomb, keys given twice, byte-order marks, a byte that is not
UTF-8, broken BEIR folders, a symlink loop, an unreadable folder, a case module named
like a test module, a path flag written with a space, ``expected_sql`` given twice, a
threshold naming a metric its kind does not record. Rows whose behaviour crosses the xdist
boundary (items run, or files collected, in workers) run three ways: no flag, ``-n 2`` and
``-p no:xdist``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject

pytest_plugins = ["pytester"]
MODE_IDS = ["plain", "n2", "no-xdist"]

GOOD_CASE = """\
- id: good
  question: How many teams?
  expected_sql: SELECT COUNT(*) AS n FROM teams
  ground_truth_data: {n: 3}
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    """A repository with test_cases/ (one good case) and a SQLite database in its ini file."""
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db",
                                            ragbench_sql_timeout=1,
                                            addopts="-p no:cacheprovider")
    project.scores_db()
    project.cases("good.yaml", GOOD_CASE)
    return project


def _timed(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, float]:
    started = time.monotonic()
    result = pytester.runpytest_subprocess(*args, timeout=120)
    return result, time.monotonic() - started


# -- hangs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_endless_recursive_sql_fails_its_item_within_the_bound(
        project: RagbenchProject, mode: tuple[str, ...]) -> None:
    project.cases("endless.yaml", (
        "- id: endless\n  question: q\n"
        "  expected_sql: WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
        "SELECT COUNT(*) AS n FROM r\n  ground_truth_data: {n: 1}\n"))
    result, seconds = _timed(project, "-q", *mode)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*database error: the statement was stopped after 1.* s: "
                                 "ini ragbench_sql_timeout is 1 s*"])
    assert seconds < 60  # killed at 120 s before, with no report


FTS_CASES = """\
- id: tokenizer
  question: q
  expected_sql: SELECT fts3_tokenizer('simple', X'4141414141414141') AS t
  ground_truth_data: {t: x}
- id: search
  question: q
  expected_sql: SELECT body FROM docs WHERE docs MATCH 'hello'
  ground_truth_data: {body: hello world}
"""


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_a_function_that_crashes_sqlite_fails_its_item_and_the_rest_runs(
        project: RagbenchProject, mode: tuple[str, ...]) -> None:
    import sqlite3

    with sqlite3.connect(project.path / "scores.db") as connection:
        connection.execute("CREATE VIRTUAL TABLE docs USING fts3(body)")
        connection.execute("INSERT INTO docs VALUES ('hello world'), ('goodbye')")
    project.cases("fts.yaml", FTS_CASES)
    result, _ = _timed(project, "-q", "-p", "no:randomly", *mode)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # a segmentation fault (139) before
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*sql_ground_truth: tokenizer*",
                                 "database error: the SQL function fts3_tokenizer() is not "
                                 "allowed: it registers an FTS3 tokenizer from a raw pointer*"])
    assert project.items_by_case()["search"]["status"] == "passed"  # FTS itself still reads


def test_a_huge_blob_is_refused_at_once_within_the_memory_bound(
        project: RagbenchProject) -> None:
    project.ini(ragbench_db_url="sqlite:///scores.db", ragbench_sql_timeout=5,
                addopts="-p no:cacheprovider")
    project.cases("blob.yaml", (
        "- id: blob\n  question: q\n"
        "  expected_sql: SELECT length(hex(randomblob(400000000))) AS n\n"
        "  ground_truth_data: {n: 800000000}\n"))
    result, _ = _timed(project, "-q")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*database error: string or blob too big: one value may hold "
                                 "at most 64 MiB*"])
    assert project.items_by_case()["blob"]["duration"] < 1.0  # 23 s and 1.99 GB before


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts connections and never sends a byte."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections.append(connection)

    def close(self) -> None:
        """Stop accepting and drop every connection."""
        for connection in [*self.connections, self.socket]:
            connection.close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_database_that_never_answers_fails_within_the_connect_timeout(
        project: RagbenchProject, silent_server: SilentServer, mode: tuple[str, ...]) -> None:
    url = f"postgresql+pg8000://reader:s3cret@127.0.0.1:{silent_server.port}/nba"
    result, seconds = _timed(project, "-q", f"--ragbench-db-url={url}", *mode)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*database error: could not connect after 1.* s: "
                                 "ini ragbench_sql_timeout is 1 s*"])
    assert "s3cret" not in result.stdout.str() + result.stderr.str()
    assert seconds < 60  # killed at 300 s before


LLM_ONLY_SYSTEM = """
import pytest
from pytest_ragbench.systems.protocols import Answer


class LlmOnly:
    def __init__(self, llm):
        self.llm = llm

    def answer(self, question, history=None):
        reply = self.llm.generate([{"role": "user", "content": question}])
        return Answer(text=reply.text)


@pytest.fixture(scope="session")
def ragbench_system(ragbench_llm):
    return LlmOnly(ragbench_llm)
"""


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_model_server_that_hangs_costs_retries_times_timeout(
        project: RagbenchProject, mode: tuple[str, ...]) -> None:
    from pytest_ragbench.testing import LoopbackServer

    project.makeconftest(LLM_ONLY_SYSTEM)
    with LoopbackServer() as server:
        server.fail(*["hang"] * 10)
        result, seconds = _timed(
            project, "-q", "--ragbench", "-k", "sql[", "--ragbench-no-cache",
            f"--ragbench-llm-url={server.url}", "--ragbench-timeout=0.5",
            "--ragbench-retries=1", *mode)
        asked = len(server.requests)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*generator call to model 'default' at http://127.0.0.1:*"
                                 " failed after 2 attempts: no reply within 0.5 s*"])
    assert asked == 2  # one try and one retry, as the flags say
    assert seconds < 60  # 5 x 60 s per call before, with no flag to change it


def test_a_dead_judge_costs_one_calls_bound_not_one_per_row(project: RagbenchProject) -> None:
    """Six RAGCSV rows graded by a judge that accepts connections and never answers.

    At --ragbench-concurrency 8 the six judge calls hang together: their time is about
    one call's bound (2 attempts of 1 s and a backoff) after one probe. With the
    negotiation lock held through the retries they hung one after another (~31 minutes
    at the default timeout and retries).
    """
    from pytest_ragbench.testing import LoopbackServer

    rows = "".join(f'"{city}","[{{\'page_content\': \'{city} is a city.\'}}]",'
                   f'"",2024-01-01,"Which city is number {i}?"\n'
                   for i, city in enumerate(["Paris", "Rome", "Oslo", "Bern", "Riga", "Kyiv"]))
    project.cases("cities.ragcsv.csv", rows)
    timeout, retries = 1.0, 1
    with LoopbackServer() as generator, LoopbackServer() as judge:
        judge.fail(*["hang"] * 100)
        result, _ = _timed(project, "-q", "--ragbench", "-k", "ragcsv", "--ragbench-no-cache",
                           f"--ragbench-llm-url={generator.url}",
                           f"--ragbench-judge-url={judge.url}", "--ragbench-concurrency=8",
                           f"--ragbench-timeout={timeout:g}", f"--ragbench-retries={retries}",
                           "--ragbench-max-unscored=1")
        arrivals = list(judge.arrivals)
    result.assert_outcomes(passed=6)  # accuracy unscored, the rows kept
    assert len(arrivals) == 6 * (retries + 1)
    open_at_once = max(sum(a <= t < a + timeout for a in arrivals) for t in arrivals)
    assert open_at_once >= 6  # 1 or 2 before: one call at a time
    per_call = (retries + 1) * timeout + 0.5  # its attempts and the longest backoff
    assert arrivals[-1] + timeout - arrivals[0] < per_call + timeout + 1.5  # 6 x per_call before
    for item in project.items_by_case().values():
        assert "failed after 2 attempts: no reply within 1 s" in item["unscored"]["accuracy"]


@pytest.mark.parametrize("mode", [(), ("-n", "2")], ids=["plain", "n2"])
def test_a_read_only_cache_is_read_with_one_warning(project: RagbenchProject,
                                                    mode: tuple[str, ...]) -> None:
    """A warm cache in a folder the user cannot write: its answers are used, nothing stops.

    Run as an ordinary user would (root ignores file modes). Before, every item stopped
    with "attempt to write a readonly database (delete it ...)".
    """
    import sys

    from pytest_ragbench.testing import LoopbackServer
    from tests.helpers import as_user

    rows = "".join(f'"{city}","[{{\'page_content\': \'{city} is a city.\'}}]",'
                   f'"",2024-01-01,"Which city is number {i}?"\n'
                   for i, city in enumerate(["Paris", "Rome", "Oslo"]))
    project.cases("cities.ragcsv.csv", rows)
    with LoopbackServer() as generator, LoopbackServer('{"score": 80}') as judge:
        args = ["-q", "--ragbench", "-k", "ragcsv", "--ragbench-cache=cache",
                f"--ragbench-llm-url={generator.url}", f"--ragbench-judge-url={judge.url}",
                *mode]
        warm, _ = _timed(project, *args)
        warm.assert_outcomes(passed=3)
        asked = len(generator.requests) + len(judge.requests)
        cache = project.path / "cache"
        for path in [cache, *cache.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        try:
            result = project.pytester.run(*as_user([sys.executable, "-m", "pytest", *args]),
                                          timeout=120)
        finally:
            for path in [cache, *cache.rglob("*")]:
                path.chmod(path.stat().st_mode | 0o200)
        assert len(generator.requests) + len(judge.requests) == asked  # all from the cache
    result.assert_outcomes(passed=3)
    output = result.stdout.str()
    assert output.count("CacheWarning: the cache") == 1, output
    result.stdout.fnmatch_lines([f"*CacheWarning: the cache {cache} cannot be written (*): "
                                 "its entries are read, new ones are not stored"])
    assert all(item["metrics"]["accuracy"] == 80.0 for item in project.items_by_case().values())


def _longest_string(value: object) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict):
        value = list(value.values())
    return max((_longest_string(v) for v in value), default=0) if isinstance(value, list) else 0


def test_a_50_mb_model_reply_is_stored_cut(project: RagbenchProject) -> None:
    """The generator answers 50 MB: the cache, the records and the reports keep 1 MB of it."""
    from pytest_ragbench.testing import LoopbackServer

    project.cases("cities.ragcsv.csv",
                  '"Paris","[{\'page_content\': \'Paris is a city.\'}]","",2024-01-01,'
                  '"Which city?"\n')
    with LoopbackServer("x" * 50_000_000) as generator, \
            LoopbackServer('{"score": 10}') as judge:
        result, _ = _timed(project, "-q", "--ragbench", "-k", "ragcsv", "--ragbench-cache=cache",
                           f"--ragbench-llm-url={generator.url}",
                           f"--ragbench-judge-url={judge.url}", "--ragbench-timeout=100")
        graded = judge.requests
    result.assert_outcomes(passed=1)
    record = project.items_by_case()["cities:1"]
    got = record["evidence"]["got"]
    assert got.endswith("\n[... cut: the reply has 50,000,000 bytes, ragbench_max_reply_bytes "
                        "keeps 1,000,000]")
    assert _longest_string(record) < 1_000_100
    assert len(json.dumps(graded[0]).encode()) < 1_100_000  # the judge read the cut answer
    written = [*(project.path / "cache").iterdir(), *project.report_dir().iterdir()]
    sizes = {p.name: p.stat().st_size for p in written if p.is_file()}
    assert max(sizes.values()) < 3_000_000, sizes  # 50 MB each before


BIG_SYSTEM = """
import pytest
from pytest_ragbench.systems.protocols import Answer


class Talkative:
    def answer(self, question, history=None):
        return Answer(text="3 teams. " + "y" * 3_000_000)


@pytest.fixture(scope="session")
def ragbench_system():
    return Talkative()
"""


def test_a_systems_own_long_answer_is_recorded_cut(project: RagbenchProject) -> None:
    project.ini(ragbench_db_url="sqlite:///scores.db", ragbench_max_reply_bytes="100 kB",
                addopts="-p no:cacheprovider")
    project.makeconftest(BIG_SYSTEM)
    result, _ = _timed(project, "-q", "--ragbench", "-k", "sql[")
    result.assert_outcomes(passed=1)
    record = project.items_by_case()["good"]
    assert _longest_string(record) < 100_100
    texts = json.dumps(record)
    assert "cut: the reply has 3,000,009 bytes, ragbench_max_reply_bytes keeps 100,000" in texts


def test_help_prints_the_worst_case_per_call(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    text = " ".join(result.stdout.str().split())
    assert "Worst case per call: (retries + 1) x timeout plus the backoff" in text
    assert "with the defaults 5 x 60 s + 7.5 s = 307.5 s" in text
    assert "ragbench_sql_timeout" in text


# -- bounded loading -----------------------------------------------------------------------

def alias_bomb(levels: int = 9) -> str:
    """~0.5 KB of YAML whose value expands to 9**levels strings."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    lines += ["cases:", f"  - {{kind: vector, question: *a{levels - 1}, ground_truth: x}}"]
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_in_well_under_five_seconds(tmp_path: Path) -> None:
    from pytest_ragbench.cases.loaders import read_case_file
    from pytest_ragbench.errors import CaseError

    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    started = time.monotonic()
    with pytest.raises(CaseError) as caught:
        read_case_file(path)
    assert time.monotonic() - started < 5  # 137-180 s and 3.1 GB before
    assert caught.value.line == 7  # the anchor a6, whose aliases pass the limit
    assert "aliases expand this document past 1,000,000 values" in caught.value.message


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_alias_bomb_fails_as_one_item_and_the_rest_runs(
        project: RagbenchProject, mode: tuple[str, ...]) -> None:
    project.cases("bomb.yaml", alias_bomb(10))
    result, seconds = _timed(project, "-q", *mode)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*invalid case: test_cases/bomb.yaml:7: aliases expand this "
                                 "document past 1,000,000 values*"])
    assert seconds < 60  # at 10 levels the session died of MemoryError before


# -- bad input that must not pass ----------------------------------------------------------

def test_keys_given_twice_fail_their_case_naming_both_lines(project: RagbenchProject) -> None:
    project.cases("twice.yaml", (
        "- id: twice\n  question: q\n  expected_sql: SELECT 1 AS n\n"
        "  ground_truth_data: {n: 1}\n  question: q2\n"))
    project.cases("twice.json", (
        '[{"id": "once", "question": "q", "expected_sql": "SELECT 1 AS n",\n'
        '  "ground_truth_data": {"n": 1}},\n'
        ' {"id": "nested", "question": "q", "expected_sql": "SELECT 1 AS n",\n'
        '  "ground_truth_data": {"n": 1,\n                        "n": 2}}]\n'))
    result = project.runpytest("-q")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*test_cases/twice.json:5: field 'n': given twice, on lines 4 and 5 "
        "(a JSON loader keeps only the last one): remove one",
        "*test_cases/twice.yaml:5: field 'question': given twice, on lines 2 and 5 "
        "(a YAML loader keeps only the last one): remove one",
    ])


def test_expected_sql_given_twice_is_an_error_and_nothing_runs(
        project: RagbenchProject) -> None:
    before = hashlib.sha256((project.path / "scores.db").read_bytes()).hexdigest()
    project.cases("delete.yaml", (
        "- id: sneaky\n  question: q\n  expected_sql: DELETE FROM teams\n"
        "  ground_truth_data: {n: 3}\n  expected_sql: SELECT COUNT(*) AS n FROM teams\n"
        "- id: aliased\n  question: q\n  gold_sql: DELETE FROM teams\n"
        "  expected_sql: SELECT COUNT(*) AS n FROM teams\n  ground_truth_data: {n: 3}\n"))
    result = project.runpytest("-q")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "*delete.yaml:5: field 'expected_sql': given twice, on lines 3 and 5*",
        "*delete.yaml:9: field 'expected_sql': given twice, as 'expected_sql' and as its "
        "alias 'gold_sql' (lines 8 and 9): keep one",
    ])
    assert hashlib.sha256((project.path / "scores.db").read_bytes()).hexdigest() == before


def test_json_and_jsonl_accept_a_byte_order_mark(project: RagbenchProject) -> None:
    case = ('{"id": "%s", "question": "q", "expected_sql": "SELECT 1 AS n", '
            '"ground_truth_data": {"n": 1}}')
    (project.path / "test_cases" / "bom.json").write_bytes(
        b"\xef\xbb\xbf[" + (case % "json").encode() + b"]\n")
    (project.path / "test_cases" / "bom.jsonl").write_bytes(
        b"\xef\xbb\xbf" + (case % "jsonl").encode() + b"\n")
    result = project.runpytest("-q", "-k", "json")
    result.assert_outcomes(passed=2)


def test_a_byte_that_is_not_utf8_fails_only_its_line(project: RagbenchProject) -> None:
    line = ('{"id": "c%d", "question": "q%s", "expected_sql": "SELECT 1 AS n", '
            '"ground_truth_data": {"n": 1}}\n')
    (project.path / "test_cases" / "latin1.jsonl").write_bytes(
        (line % (1, "")).encode() + (line % (2, "\xe9")).encode("latin-1")
        + (line % (3, "")).encode())
    result = project.runpytest("-q", "-k", "latin1")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "invalid case: test_cases/latin1.jsonl:2: not UTF-8 text (invalid continuation byte "
        "at column 28)",
        "FAILED test_cases/latin1.jsonl::sql_ground_truth?c2? - invalid case*"])


def test_a_ragcsv_byte_that_is_not_utf8_fails_only_its_row(project: pytest.Pytester) -> None:
    row = ('"Paris","[{\'page_content\': \'Paris is the capital.\', \'metadata\': {}}]",'
           '"","","What is the capital%s?"\n')
    (project.path / "test_cases" / "bytes.ragcsv.csv").write_bytes(
        (row % "").encode() + (row % " \xe9").encode("latin-1") + (row % "").encode())
    collected = project.runpytest("--ragbench", "--collect-only", "-q")
    collected.stdout.fnmatch_lines(["*::ragcsv?bytes:1?", "*::ragcsv?bytes:2?",
                                    "*::ragcsv?bytes:3?"])  # the other rows are read
    result = project.runpytest("--ragbench", "-q", "-k", "bytes:2")
    result.assert_outcomes(failed=1, deselected=4)  # good.yaml's two items, rows 1 and 3
    result.stdout.fnmatch_lines([
        "invalid case: test_cases/bytes.ragcsv.csv:2: field 'column 4 (question)': "
        "not UTF-8 text (invalid byte 0xe9)"])


def _beir(folder: Path, corpus: list[str], queries: list[str], qrels: list[str]) -> None:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(f'{{"_id": "{d}", "text": "about {d}"}}\n'
                                                 for d in corpus))
    (folder / "queries.jsonl").write_text("".join(f'{{"_id": "{q}", "text": "what is {q}"}}\n'
                                                  for q in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                               + "".join(f"{row}\n" for row in qrels))


def test_beir_folders_are_validated(project: RagbenchProject) -> None:
    cases = project.path / "test_cases"
    _beir(cases / "holes", ["d1", "d2"], ["q1", "q2"],
          ["q1\td1\t1", "q1\td9\t1", "q2\td8\t1", "q2\td7\t2"])
    _beir(cases / "nodocs", [], ["q1"], ["q1\td1\t1"])
    _beir(cases / "noqueries", ["d1"], [], ["q1\td1\t1"])
    result = project.runpytest("-q", "--ragbench", "--collect-only")
    result.stdout.fnmatch_lines_random([
        "test_cases/holes/qrels/test.tsv::beir[holes/missing-documents]",
        "test_cases/holes/qrels/test.tsv::beir[holes/q1]",
        "test_cases/holes/qrels/test.tsv::beir[holes/q2]",
        "test_cases/nodocs/qrels/test.tsv::beir[nodocs]",
        "test_cases/noqueries/qrels/test.tsv::beir[noqueries]",
    ])
    result = project.runpytest("-q", "--ragbench", "-k", "missing-documents or nodocs or "
                               "noqueries")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines_random([
        "*test_cases/holes/qrels/test.tsv:3: field 'corpus-id': 3 judgment(s) of 2 query(ies) "
        "name documents missing from corpus.jsonl (line 3: q1 -> d9, line 4: q2 -> d8, "
        "line 5: q2 -> d7): those queries are scored as if the documents were never retrieved",
        "*test_cases/nodocs/corpus.jsonl: holds no usable entry*",
        "*test_cases/noqueries/queries.jsonl: holds no usable entry*",
    ])


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_a_symlink_loop_collects_each_case_once(
        project: RagbenchProject, mode: tuple[str, ...]) -> None:
    sub = project.path / "test_cases" / "sub"
    sub.mkdir()
    (sub / "other.yaml").write_text(GOOD_CASE.replace("id: good", "id: other"))
    (sub / "loop").symlink_to("..", target_is_directory=True)
    (project.path / "test_cases" / "again").symlink_to("sub", target_is_directory=True)
    result = project.runpytest_subprocess("-q", *mode)
    result.assert_outcomes(passed=2)  # 41 copies of each before


def test_an_unreadable_folder_is_one_warning(project: RagbenchProject,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    locked = project.path / "test_cases" / "locked"
    locked.mkdir()
    (locked / "hidden.yaml").write_text(GOOD_CASE.replace("id: good", "id: hidden"))
    if os.geteuid() == 0:  # root reads any folder: let the OS refuse it as it would a user
        listing = os.scandir

        def refuse(path: object = ".") -> object:
            if Path(str(path)) == locked:
                raise PermissionError(13, "Permission denied", str(path))
            return listing(path)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "scandir", refuse)
    else:
        locked.chmod(0)
    try:
        result = project.runpytest("-q", "-p", "no:xdist")
    finally:
        locked.chmod(0o755)
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*UnreadableFolderWarning: ragbench: cannot list "
                                 f"{locked} (Permission denied): its cases are not collected"])


def _without_file_capabilities(pytester: pytest.Pytester, probe: Path) -> tuple[str, ...]:
    """The command prefix that runs pytest as the OS treats a user, or a skip saying why not.

    Root reads every file whatever its mode; ``setpriv`` drops the two capabilities that let
    it (its uid stays, so the project's files are still its own to write).
    """
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv (util-linux) is missing: cannot drop "
                    "CAP_DAC_OVERRIDE to make a folder unreadable")
    prefix = (setpriv, "--bounding-set", "-dac_override,-dac_read_search")
    tried = pytester.run(*prefix, sys.executable, "-c",
                         f"import os; os.listdir({str(probe)!r})")
    if tried.ret == 0:
        pytest.skip("setpriv ran but the folder was still readable: capabilities cannot be "
                    f"dropped here ({' '.join(tried.errlines[-1:])})")
    return prefix


@pytest.mark.parametrize("mode", XDIST_MODES[:2], ids=MODE_IDS[:2])
def test_unreadable_folders_and_special_files_are_one_warning_each(
        project: RagbenchProject, mode: tuple[str, ...]) -> None:
    """As a user: a folder with no permissions, one that cannot be searched, a FIFO, /dev/zero.

    None of them stops the session; the good case runs, an unreadable case file fails as
    one item naming it.
    """
    cases = project.path / "test_cases"
    locked, unsearchable = cases / "locked", cases / "listed_only"
    for folder in (locked, unsearchable):
        folder.mkdir()
        (folder / "hidden.yaml").write_text(GOOD_CASE.replace("id: good", "id: hidden"))
    os.mkfifo(cases / "pipe.yaml")  # opening it would wait for a writer forever
    (cases / "zero.jsonl").symlink_to("/dev/zero")
    (cases / "gone.yaml").symlink_to(cases / "removed.yaml")
    secret = cases / "secret.yaml"
    secret.write_text(GOOD_CASE.replace("id: good", "id: secret"))
    locked.chmod(0)
    unsearchable.chmod(0o444)
    secret.chmod(0)
    try:
        prefix = _without_file_capabilities(project.pytester, locked)
        result = project.pytester.run(*prefix, sys.executable, "-m", "pytest", "-q", "-rN",
                                      *mode, timeout=300)
    finally:
        for path in (locked, unsearchable, secret):
            path.chmod(0o755)
    result.assert_outcomes(passed=1, failed=1, warnings=5)
    output = result.stdout.str()
    for folder in (locked, unsearchable):
        assert (f"UnreadableFolderWarning: ragbench: cannot list {folder} (Permission "
                "denied): its cases are not collected") in output
    assert f"SpecialFileWarning: ragbench: {cases / 'pipe.yaml'} is a FIFO" in output
    assert (f"SpecialFileWarning: ragbench: {cases / 'zero.jsonl'} is a character device, "
            "not a regular file: it is not read") in output
    assert f"SpecialFileWarning: ragbench: {cases / 'gone.yaml'} is a link to nothing" in output
    assert "test_cases/secret.yaml" in output and "Permission denied" in output
    assert {r["case_id"]: r["status"] for r in project.items()}["good"] == "passed"


def test_a_case_module_named_like_a_test_module_is_read_never_imported(
        project: RagbenchProject) -> None:
    marker = project.path / "IMPORTED"
    project.cases("test_nba_test_cases.py", (
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "SQL_TEST_CASES = [dict(id='module', question='q', expected_sql='SELECT 1 AS n', "
        "ground_truth_data={'n': 1})]\n\n\ndef test_inside():\n    assert False\n"))
    result = project.runpytest("-v")
    result.assert_outcomes(passed=2)  # good and module: test_inside is not collected
    result.stdout.fnmatch_lines(["*test_nba_test_cases.py::sql_ground_truth?module? PASSED*"])
    assert not marker.exists()


def test_a_path_flag_written_with_a_space_stops_the_session(
        project: RagbenchProject, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("report_outside")
    result = project.runpytest("--ragbench-report", str(outside), "--ragbench-cases",
                               str(outside))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: ragbench: write --ragbench-report={outside} "
                                 f"--ragbench-cases={outside} (with '=')*"])
    project.runpytest(f"--ragbench-report={outside}").assert_outcomes(passed=1)


# -- a threshold naming a metric the kind does not record ----------------------------------

@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_a_case_threshold_on_a_metric_not_recorded_fails_that_case(
        project: RagbenchProject, mode: tuple[str, ...]) -> None:
    project.cases("typo.yaml", (
        "- id: typo\n  question: How many teams?\n"
        "  expected_sql: SELECT COUNT(*) AS n FROM teams\n  ground_truth_data: {n: 3}\n"
        "  thresholds: {mach: 1}\n"))
    result = project.runpytest("-q", *mode)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_cases/typo.yaml:5: field 'thresholds.mach': no sql "
                                 "item records metric 'mach' (did you mean 'match'?)*"])


@pytest.mark.parametrize("mode", XDIST_MODES, ids=MODE_IDS)
def test_a_configured_threshold_on_a_metric_not_recorded_stops_the_session(
        project: RagbenchProject, mode: tuple[str, ...]) -> None:
    project.gates('[thresholds]\n"sql_ground_truth.mach" = 1\n')
    result = project.runpytest_subprocess("-q", *mode)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: ragbench: threshold 'sql_ground_truth.mach' in */test_cases/ragbench.toml: "
        "sql_ground_truth items do not record metric 'mach' (did you mean 'match'?)"])
