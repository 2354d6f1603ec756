"""No secret reaches disk or the terminal, however a server echoes it.

A real pytest session (a subprocess) evaluates RAGCSV rows against two scripted
OpenAI-compatible servers on 127.0.0.1 that echo what they were sent: the generator's URL
carries ``user:password@`` (httpx makes a Basic header of it), the judge's URL a ``?key=``
and its key comes from ``RAGBENCH_JUDGE_API_KEY``. The generator puts its Basic header,
the decoded ``user:password`` and an upstream ``Authorization: Bearer`` token into its
answers; the judge echoes its Bearer header in a 200 reply and all its request headers in
a 401 error body. Every file the session writes (report files, saved run, JUnit XML, the
journal, the response cache with its SQLite -wal/-shm files) and its stdout and stderr are
then searched for each planted value.
"""

from __future__ import annotations

import base64
import json
import secrets as random_secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.testing import LoopbackServer
from tests.helpers import XDIST_MODES
from tests.project import RagbenchProject
from tests.test_kind_ragcsv import ROWS, ragcsv_text


def _token(prefix: str) -> str:
    return f"{prefix}{random_secrets.token_hex(6)}"


class Planted:
    """The secrets of one test, each in the way it is given to the plugin or echoed to it."""

    def __init__(self) -> None:
        self.judge_key = _token("sk-judge-")  # env RAGBENCH_JUDGE_API_KEY
        self.password = _token("pw-")  # the generator URL's userinfo
        self.basic = base64.b64encode(f"alice:{self.password}".encode()).decode()
        self.query_key = _token("qk-")  # the judge URL's ?key=
        self.upstream = _token("sk-upstream-")  # an Authorization header nobody told us of
        self.proxy_password = _token("proxypw-")  # a URL with credentials in an answer
        self.proxy_key = _token("ak-")  # ... and a credential parameter

    def values(self) -> dict[str, str]:
        return {name: value for name, value in vars(self).items()}


@pytest.fixture
def planted() -> Planted:
    return Planted()


@pytest.fixture
def generator(planted: Planted) -> Iterator[LoopbackServer]:
    """Answers each question with what it was sent: its Basic header, decoded, and more."""
    answers = {row[3]: row[4] for row in ROWS}
    holder: list[LoopbackServer] = []

    def reply(body: dict[str, Any]) -> str:
        sent = holder[0].authorizations[-1] or ""
        decoded = base64.b64decode(sent.split()[-1]).decode() if sent else ""
        question = str(body["messages"][-1]["content"])
        return (f"{answers.get(question, 'no idea')} (request: Authorization: {sent}; "
                f"as {decoded}; upstream Authorization: Bearer {planted.upstream}; via "
                f"http://bob:{planted.proxy_password}@proxy.example/v1?api_key="
                f"{planted.proxy_key})")

    with LoopbackServer(reply) as server:
        holder.append(server)
        yield server


@pytest.fixture
def judge() -> Iterator[LoopbackServer]:
    """Grades 60, but Paris's and Madrid's answers get a 200 reply echoing the Bearer header.

    Its first request gets a 401 that echoes the headers; whichever row that is, one row
    of each sort is left.
    """
    holder: list[LoopbackServer] = []

    def grade(body: dict[str, Any]) -> str:
        prompt = str(body["messages"][-1]["content"])
        if "The capital is Paris." in prompt or "The capital is Madrid." in prompt:
            sent = holder[0].authorizations[-1]
            return json.dumps({"score": 90, "note": f"request had Authorization: {sent}"})
        return json.dumps({"score": 60})

    with LoopbackServer(grade) as server:
        holder.append(server)
        server.fail("echo")  # the first request: a 401 whose body echoes the headers
        yield server


def written_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def leaks(paths: list[Path], outputs: list[str], planted: Planted) -> list[str]:
    found = []
    for path in paths:
        data = path.read_bytes()
        found += [f"{name} in {path}" for name, value in planted.values().items()
                  if value.encode() in data]
    for index, text in enumerate(outputs):
        found += [f"{name} in output {index}" for name, value in planted.values().items()
                  if value in text]
    return found


@pytest.mark.parametrize("flags", XDIST_MODES[:2])
def test_no_planted_secret_is_written_or_printed(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, planted: Planted,
        generator: LoopbackServer, judge: LoopbackServer, flags: tuple[str, ...]) -> None:
    project = RagbenchProject(pytester)
    project.cases("capitals.ragcsv.csv", ragcsv_text(ROWS[:4]))
    project.gates('[thresholds]\n"ragcsv.accuracy" = 75\n')
    monkeypatch.setenv("RAGBENCH_JUDGE_API_KEY", planted.judge_key)
    monkeypatch.delenv("RAGBENCH_LLM_API_KEY", raising=False)
    monkeypatch.setenv("RAGCSV_DEBUG", "1")  # the first row's prompt and answer, printed
    llm_url = generator.url.replace("http://", f"http://alice:{planted.password}@")
    judge_url = f"{judge.url}?key={planted.query_key}"
    args = ["--ragbench", "-rA", "-p", "no:cacheprovider", f"--ragbench-llm-url={llm_url}",
            f"--ragbench-judge-url={judge_url}", "--junitxml=out/junit.xml",
            "--ragbench-cache=cache", "--ragbench-report=report", "--ragbench-save=leaks",
            "--ragbench-max-unscored=1", *flags]

    # An interrupted run keeps its journal: stop at the first failed row.
    first = project.runpytest_subprocess(*args, "--maxfail=1")
    # (xdist's -x ends the session as interrupted)
    assert first.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    journals = list((project.path / "report" / "journal").glob("*.jsonl"))
    assert journals, "the interrupted run kept no journal to search"
    cache = project.path / "cache" / "responses.sqlite3"
    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as conn:
        keys = [row[0] for row in conn.execute("SELECT key FROM entries")]
    assert keys and all(len(k) == 64 and int(k, 16) >= 0 for k in keys)  # hashes only
    found = leaks(written_files(project.path), [first.stdout.str(), first.stderr.str()],
                  planted)
    assert found == []

    # The whole run, from the cache and from the servers: the row refused before (not
    # cached) is asked again and refused again.
    judge.fail("echo")
    second = project.runpytest_subprocess(*args)
    assert second.ret == pytest.ExitCode.TESTS_FAILED
    paths = written_files(project.path)
    names = {p.name for p in paths}
    assert {"results.json", "items.jsonl", "leaderboard.csv", "report.html", "junit.xml",
            "0001_leaks.json", "responses.sqlite3"} <= names
    found = leaks(paths, [second.stdout.str(), second.stderr.str()], planted)
    assert found == []

    # The secrets did reach the servers, and came back masked, not dropped.
    assert f"Basic {planted.basic}" in generator.authorizations
    assert f"Bearer {planted.judge_key}" in judge.authorizations
    results = project.results("report")
    assert results["config"]["judge_url"] == f"{judge.url}?key=***"
    assert results["config"]["llm_url"] == generator.url.replace("http://", "http://alice:***@")
    assert results["components"]["judge"].endswith(f"{judge.url}?key=***")
    items = project.items_by_case("report")
    got = items["capitals:1"]["evidence"]["got"]
    assert "Authorization: Basic ***" in got and "as alice:***" in got
    assert "upstream Authorization: Bearer ***" in got
    assert "http://bob:***@proxy.example/v1?api_key=***" in got
    replies = [str(item["evidence"].get("judge_reply")) for item in items.values()]
    assert any("Authorization: Bearer ***" in reply for reply in replies)
    reasons = [str(item["unscored"].get("accuracy")) for item in items.values()]
    refused = [r for r in reasons if "HTTP 401" in r]
    assert refused and all(f"{judge.url}?key=***" in r and "Bearer ***" in r for r in refused)
    output = second.stdout.str()
    assert "RAGCSV_DEBUG" in output and "Authorization: Basic ***" in output
