"""The ``ragbench`` console script (also ``python -m pytest_ragbench``).

``ragbench verify sql|hybrid [paths]`` runs the ground-truth items through pytest itself,
so the verdicts come from exactly the code (and conftest.py, ini keys, fixtures) that
``pytest -k sql_ground_truth`` uses.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_ragbench.datasets import command as dataset_cli
from pytest_ragbench.datasets import review as review_cli
from pytest_ragbench.datasets.generate import command as generate_cli
from pytest_ragbench.kinds import VERIFICATION, builtin_registry
from pytest_ragbench.labelling import command as label_cli
from pytest_ragbench.systems import cache_transfer


def verification_kinds() -> dict[str, str]:
    """``{case kind: its verification item kind}`` of the built-in kinds."""
    return {kind.case_kind: kind.name for kind in builtin_registry().item_kinds.values()
            if kind.family == VERIFICATION}


class VerifyReporter:
    """Keeps only one ground-truth kind, prints a line per case and the summary line.

    Without ``--report DIR`` the session writes no report files: a verification never
    replaces the results.json and report.html of an evaluation run (or adds to its
    leaderboard.csv).
    """

    def __init__(self, item_kind: str, write_report: bool = False) -> None:
        self.item_kind = item_kind
        self.write_report = write_report
        self.results: dict[str, bool] = {}
        self.warned: set[str] = set()

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        """Tell the report session whether to write files (after the plugin made it)."""
        session = config.pluginmanager.get_plugin("ragbench-session")
        if session is not None:
            session.write_files = self.write_report

    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """Deselect every item that is not of the verified kind."""
        keep = [i for i in items if getattr(getattr(i, "item_kind", None), "name", None)
                == self.item_kind or getattr(i, "kind_name", None) == self.item_kind]
        dropped = [i for i in items if i not in keep]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Remember the verdict of each item (a failed setup counts as a failure)."""
        if getattr(report, "ragbench_check", None):  # a gate, not a verified case
            return
        if report.when == "call" or report.outcome != "passed":
            previous = self.results.get(report.nodeid, True)
            self.results[report.nodeid] = previous and report.outcome == "passed"
        record = getattr(report, "ragbench", None)
        if isinstance(record, dict) and record.get("status") == "warning":
            self.warned.add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """``N/M passed, X% success rate``, as the original verification scripts print it."""
        terminalreporter.section(f"{self.item_kind} verification")
        for nodeid, ok in sorted(self.results.items()):
            verdict = "FAIL" if not ok else ("WARNING" if nodeid in self.warned else "PASS")
            terminalreporter.write_line(f"{verdict}  {nodeid}")
        terminalreporter.write_line(self.summary())
        if self.warned:
            terminalreporter.write_line(f"{len(self.warned)} passed with a warning "
                                        "(the answer does not mention every value)")

    def summary(self) -> str:
        """The summary line."""
        total = len(self.results)
        passed = sum(self.results.values())
        rate = 100.0 * passed / total if total else 0.0
        return f"{passed}/{total} passed, {rate:.1f}% success rate"


def _verify(args: argparse.Namespace) -> int:
    reporter = VerifyReporter(verification_kinds()[args.kind], write_report=bool(args.report))
    # Generated drafts are verified too: checking them is part of reviewing them.
    pytest_args = [*args.paths, "-p", "no:cacheprovider", "-q", "--ragbench-drafts"]
    if args.db_url:
        pytest_args += ["--ragbench-db-url", args.db_url]
    if args.report:
        pytest_args.append(f"--ragbench-report={args.report}")
    pytest_args += args.pytest_args
    code = int(pytest.main(pytest_args, plugins=[reporter]))
    if not reporter.results:
        print(f"no {args.kind} cases found", file=sys.stderr)
        return code or 5
    return 0 if code == 0 and all(reporter.results.values()) else (code or 1)


def _metrics(args: argparse.Namespace) -> int:
    """``pytest --ragbench-metrics``: the kinds of this project (its conftest.py too)."""
    return int(pytest.main(["--ragbench-metrics", "-p", "no:cacheprovider", *args.pytest_args]))


def _merge(args: argparse.Namespace) -> int:
    """``pytest --ragbench-merge=DIR ...``: the shards' records, one report.

    ``--ragbench`` is passed when the shards ran with it (their results.json says so).
    """
    import json
    from pathlib import Path

    evaluate = False
    for folder in args.shards:
        try:
            document = json.loads((Path(folder) / "results.json").read_text(encoding="utf-8"))
            evaluate = evaluate or bool(document["config"]["evaluate"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # the session names what is wrong with the folder
    pytest_args = [*(["--ragbench"] if evaluate else []), f"--ragbench-report={args.out}",
                   "-p", "no:cacheprovider", "-p", "no:xdist",
                   *[f"--ragbench-merge={d}" for d in args.shards], *args.pytest_args]
    return int(pytest.main(pytest_args))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ragbench`` command."""
    parser = argparse.ArgumentParser(prog="ragbench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser(
        "verify", help="verify SQL or hybrid ground truth against the database",
        description="Run the expected SQL of every case read-only and compare it with "
                    "ground_truth_data; prints 'N/M passed, X% success rate'.")
    verify.add_argument("kind", choices=tuple(verification_kinds()),
                        help="which ground truth to verify")
    verify.add_argument("paths", nargs="*",
                        help="case files or folders (default: ini ragbench_cases / testpaths)")
    verify.add_argument("--db-url", help="SQLAlchemy URL of the database (default: ini "
                                         "ragbench_db_url)")
    verify.add_argument("--report", metavar="DIR",
                        help="write the report files (results.json, items.jsonl, "
                             "report.html, ...) to DIR; without it none are written")
    verify.add_argument("--pytest-args", nargs=argparse.REMAINDER, default=[],
                        help="further arguments passed to pytest")
    verify.set_defaults(func=_verify)
    metrics = commands.add_parser(
        "metrics", help="list the metrics each kind records",
        description="Every kind's metrics with their range, direction, default threshold "
                    "and definition (as pytest --ragbench-metrics; plugins' kinds included).")
    metrics.add_argument("pytest_args", nargs=argparse.REMAINDER,
                         help="further arguments passed to pytest (e.g. -p myplugin)")
    metrics.set_defaults(func=_metrics)
    merge = commands.add_parser(
        "merge", help="combine the report folders of shards into one report",
        description="Build the report of one run from the report folders of its shards "
                    "(--ragbench-shard=I/N): results.json, items.jsonl, report.html, "
                    "leaderboard row, gates (with --junitxml: as testcases) and the exit "
                    "code, as one machine running every item would. Run it where the shards "
                    "ran (the same project, settings and code version).")
    merge.add_argument("--out", required=True, metavar="DIR", help="the merged report folder")
    merge.add_argument("shards", nargs="+", metavar="DIR", help="the shards' report folders")
    merge.add_argument("--pytest-args", nargs=argparse.REMAINDER, default=[],
                       help="the settings the shards ran with (e.g. --ragbench-systems "
                            "dense,bm25) and further pytest arguments (--junitxml=...)")
    merge.set_defaults(func=_merge)
    dataset_cli.register(commands)
    generate_cli.register(commands)
    review_cli.register(commands)
    added: list[Any] = []  # two item kinds of one case kind may name the same function
    for kind in builtin_registry().item_kinds.values():  # the kinds' own commands
        add_commands = kind.load_commands()
        if add_commands is not None and add_commands not in added:
            added.append(add_commands)
            add_commands(commands)
    label_cli.register(commands)
    cache_transfer.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ragbench`` command; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # `ragbench dataset stats x.jsonl | head`: the reader left
        # Point stdout at devnull so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
