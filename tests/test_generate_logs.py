"""``ragbench generate`` from logs: log_ticket cases whose answers hold on the raw lines.

The checker below recomputes every answer from the raw ``.log`` lines of the loghub
oracle (``../shared/oracles/loghub``) with its own parsing (a header pattern per system,
its own template matching), independent of the generator, which computes from the
structured CSVs.
"""

from __future__ import annotations

import csv
import functools
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, oracle_file

SYSTEMS = ("Apache", "HDFS", "Linux", "OpenSSH", "Zookeeper")
HEADERS = {
    "HDFS": r"(?P<ts>\d{6} \d{6}) \d+ (?P<level>\w+) (?P<comp>[^:]+): (?P<msg>.*)",
    "OpenSSH": r"(?P<ts>\w{3}\s+\d+ [\d:]{8}) \S+ (?P<comp>[^\[:]+)\[\d+\]: (?P<msg>.*)",
    "Apache": r"\[(?P<ts>[^\]]+)\] \[(?P<level>\w+)\] (?P<msg>.*)",
    "Linux": r"(?P<ts>\w{3}\s+\d+ [\d:]{8}) \S+ (?P<comp>[^\[:]+?)(?:\[\d+\])?: (?P<msg>.*)",
    "Zookeeper": r"(?P<ts>\S+ \S+) - (?P<level>\w+)\s+\[(?P<comp>.*?)\] - (?P<msg>.*)",
}


def _parse(system: str, raw: str) -> dict[str, Any]:
    match = re.fullmatch(HEADERS[system], raw.rstrip())
    assert match is not None, f"{system}: unparsed line {raw!r}"
    return match.groupdict()


@functools.lru_cache(maxsize=8)
def _lines(system: str, path: Path) -> list[dict[str, Any]]:
    return [_parse(system, line) for line in path.read_text(encoding="utf-8").splitlines()]


def _is_event(template: str, message: str) -> bool:
    pattern = ".*?".join(re.escape(part.strip()) for part in template.split("<*>"))
    return re.fullmatch(r"\s*" + pattern + r"\s*", message) is not None


def _recompute(case: dict[str, Any], logs: Path) -> str:
    """The answer to ``case`` from the raw lines alone."""
    meta = case["metadata"]
    system, family = meta["system"], meta["question"]
    lines = _lines(system, logs / meta["log_file"])
    if family == "count_level":
        return str(sum(1 for x in lines if x.get("level") == meta["level"]))
    if family == "count_component":
        return str(sum(1 for x in lines if (x.get("comp") or "").strip() == meta["component"]
                       and meta.get("level") in (None, x.get("level"))))
    if family == "line_template":
        message = lines[meta["line"] - 1]["msg"]
        with (logs / f"{meta['log_file']}_templates.csv").open(newline="") as handle:
            templates = [row["EventTemplate"] for row in csv.DictReader(handle)]
        found = [t for t in templates if _is_event(t, message)]
        assert len(found) == 1, (case["id"], found)
        return found[0]
    if family == "compare_events":
        a, b = meta["templates"]
        counts = [sum(1 for x in lines if _is_event(t, x["msg"])) for t in (a, b)]
        assert counts[0] != counts[1]
        return a if counts[0] > counts[1] else b
    matching = [x for x in lines if _is_event(meta["template"], x["msg"])]
    if family == "count_event":
        return str(len(matching))
    if family in ("first_event", "last_event"):
        line = matching[0] if family == "first_event" else matching[-1]
        return " ".join(line["ts"].split())
    if family == "which_ip":
        return ", ".join(sorted({ip for x in matching for ip in re.findall(
            r"(?<![\d.])\d+\.\d+\.\d+\.\d+(?![\d.])", x["msg"])}))
    if family == "which_user":
        return ", ".join(sorted({u for x in matching for u in re.findall(
            r"\buser ([A-Za-z0-9_.-]+)", x["msg"]) if u != "unknown"}))
    raise AssertionError(f"no check for {family}")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], str]:
    logs = oracle_file("loghub")
    out = tmp_path_factory.mktemp("logs") / "log_cases.jsonl"
    made = subprocess.run([sys.executable, "-m", "pytest_ragbench", "generate",
                           f"--from={logs}", "--n", "200", "--seed", "0", f"--out={out}"],
                          cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert made.returncode in (0, 1), made.stderr
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    return cases, made.stdout


def test_at_least_150_log_cases_over_the_five_systems(
        generated: tuple[list[dict[str, Any]], str]) -> None:
    cases, table = generated
    assert len(cases) >= 150
    assert {c["metadata"]["system"] for c in cases} == set(SYSTEMS)
    assert all(c["kind"] == "ragas" and c["doc_type"] == "log_ticket"
               and c["review"] == "draft" and c["provenance"]["generator"] == "logs"
               for c in cases)
    assert Counter(c["question_type"] for c in cases).keys() >= {"numeric", "lookup",
                                                                "comparison"}
    assert f"exact cases verified: {len(cases)}/{len(cases)} (100.0%)" in table


def test_every_answer_is_recomputed_from_the_raw_lines(
        generated: tuple[list[dict[str, Any]], str]) -> None:
    logs = oracle_file("loghub")
    wrong = [(c["id"], c["ground_truth"], _recompute(c, logs)) for c in generated[0]
             if _recompute(c, logs) != c["ground_truth"]]
    assert wrong == []


def test_the_contexts_are_raw_lines_of_the_log(
        generated: tuple[list[dict[str, Any]], str]) -> None:
    logs = oracle_file("loghub")
    raw = {s: set((logs / f"{s}_2k.log").read_text().splitlines()) for s in SYSTEMS}
    for case in generated[0]:
        assert set(case["contexts"]) <= raw[case["metadata"]["system"]], case["id"]
