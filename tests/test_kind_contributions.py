"""What a kind contributes besides its items: derived items, a choice among the collected
items, and subcommands of the ``ragbench`` command (``ItemKind.derives``,
``ItemKind.on_collected``, ``ItemKind.commands``).

The built-in kinds use the same contracts (robust items, the traffic sample, ``ragbench
traffic sample``), so generic code names none of them; here a conftest.py's kinds use them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_ragbench import cli
from pytest_ragbench.kinds import ANY_CASE_KIND, ItemKind, KindRegistry, builtin_registry
from tests.project import RagbenchProject

CONFTEST = '''
import json
import os
from pathlib import Path

from pytest_ragbench.cases.build import text
from pytest_ragbench.errors import CaseError
from pytest_ragbench.kinds import ANY_CASE_KIND, AS_GIVEN, CaseKind, Field, ItemKind, Outcome
from pytest_ragbench.metrics import exact_match

CHOSEN = Path(__file__).with_name("chosen.jsonl")


def answer(case, item):
    return Outcome(metrics={"exact_match": exact_match(case.question, case.ground_truth)})


def shouted(case, item):
    return Outcome(metrics={"exact_match": exact_match(case.question.upper(),
                                                       case.ground_truth.upper())})


def shout_from(case, settings, shown):
    """A shout item for each note tagged "shout"; the tag "shout-badly" is a bad case."""
    if "shout-badly" in case.tags:
        raise CaseError("cannot shout this one", file=shown, line=case.line, field="tags")
    return (None,) if "shout" in case.tags else ()


def remember_selection(config, items):
    chosen = [item.nodeid for item in items if getattr(item, "kind_name", "") == "note"]
    with CHOSEN.open("a") as handle:
        entry = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "items": chosen}
        handle.write(json.dumps(entry) + "\\n")


NOTE_CASES = CaseKind("note", {"question": Field(True, text),
                               "ground_truth": Field(True, text)})
NOTE = ItemKind(name="note", case_kind="note", runner=answer, answers=AS_GIVEN,
                metrics=("exact_match",), thresholds={"exact_match": 1.0},
                on_collected=remember_selection)
SHOUT = ItemKind(name="shout", case_kind=ANY_CASE_KIND, runner=shouted, answers=AS_GIVEN,
                 metrics=("exact_match",), thresholds={"exact_match": 1.0},
                 derives=shout_from)


def pytest_ragbench_item_kinds(config):
    return [NOTE_CASES, NOTE, SHOUT]
'''

CASES = [
    {"id": "n01", "kind": "note", "question": "alpha", "ground_truth": "alpha",
     "tags": ["shout"]},
    {"id": "n02", "kind": "note", "question": "beta", "ground_truth": "beta",
     "tags": ["shout"]},
    {"id": "n03", "kind": "note", "question": "gamma", "ground_truth": "gamma"},
    {"id": "n04", "kind": "note", "question": "delta", "ground_truth": "delta",
     "tags": ["shout-badly"]},
]


def _project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).conftest(CONFTEST).ini()
    project.cases("notes.jsonl", CASES)
    return project


def test_a_kind_derives_its_items_from_another_kinds_cases(pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.run("--ragbench", "-p", "no:cacheprovider", subprocess=True)
    # 4 notes, shouts of n01 and n02, and one failing item for n04's bad tag
    result.assert_outcomes(passed=6, failed=1)
    statuses = {(r["kind"], r["case_id"]): r["status"] for r in project.items()}
    shouts = {case: status for (kind, case), status in statuses.items() if kind == "shout"}
    assert {case for case, status in shouts.items() if status == "passed"} == {"n01", "n02"}
    assert "n03" not in shouts  # not tagged: not derived
    assert "shout[note-n04]" in result.stdout.str()
    assert "cannot shout this one" in result.stdout.str()


def test_a_kind_sees_the_collected_items_in_every_process(pytester: pytest.Pytester) -> None:
    """Before -k selects: a sample drawn there is the same whatever is selected."""
    project = _project(pytester)
    result = project.run("--ragbench", "-p", "no:cacheprovider", "-k", "not n03",
                         "-n", "2", "--ragbench-limit", "3", subprocess=True)
    assert result.ret == 0  # n04, past the limit, is not run: its bad tag fails nothing
    lines = [json.loads(line) for line in
             (project.path / "chosen.jsonl").read_text().splitlines()]
    by_worker = {entry["worker"]: entry["items"] for entry in lines}
    assert set(by_worker) == {"gw0", "gw1"}  # each worker collects and chooses
    for chosen in by_worker.values():
        # after --ragbench-limit 3 (n04 is gone), before -k (n03 is still there)
        assert sorted(nodeid.rsplit("[", 1)[1] for nodeid in chosen) == [
            "n01]", "n02]", "n03]"]


def test_a_kind_adds_a_subcommand_to_the_ragbench_command(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def hello(args: Any) -> int:
        print(f"hello {args.name}")
        return 7

    def add_hello(commands: Any) -> None:
        command = commands.add_parser("hello", help="say hello")
        command.add_argument("name")
        command.set_defaults(func=hello)

    builtin = builtin_registry()
    greeter = ItemKind(name="greeter", case_kind=ANY_CASE_KIND, runner=hello,
                       commands=add_hello)
    registry = KindRegistry(dict(builtin.case_kinds),
                            {**builtin.item_kinds, "greeter": greeter})
    monkeypatch.setattr(cli, "builtin_registry", lambda: registry)
    assert cli.main(["hello", "world"]) == 7
    assert capsys.readouterr().out == "hello world\n"


def test_the_traffic_command_comes_from_its_kind() -> None:
    """``ragbench traffic sample`` is the traffic kind's contribution, not the CLI's own."""
    owners = [kind.name for kind in builtin_registry().item_kinds.values() if kind.commands]
    assert owners == ["traffic"]
    args = cli.build_parser().parse_args(["traffic", "sample", "x.jsonl", "--n", "3",
                                          "--out", "y.jsonl"])
    assert args.n == 3 and callable(args.func)
