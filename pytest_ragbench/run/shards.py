"""One evaluation spread over machines: ``--ragbench-shard=I/N`` and the merge of the shards.

Each machine runs the same command with its own index (a CI matrix, a Kubernetes Indexed
Job, a SLURM array). The evaluation items are partitioned by a stable hash of the case
they belong to (case file relative to the rootdir, case kind, case id), so every machine
computes the same partition, every item is in exactly one shard, and the items of one
case (its item kinds, its per-system and robustness items) stay together. A shard
judges no gate: the gates need every item. ``ragbench merge`` (``--ragbench-merge``)
reads the shards' records and builds the report one machine would have written: the
results document depends on the records alone, in node-id order, with each cell's
bootstrap seeded from the cell.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.results.records import REPORT_ATTRIBUTE
from pytest_ragbench.run.resume import FREE_SETTINGS as RESUME_FREE_SETTINGS
from pytest_ragbench.run.resume import differences

# Settings that may differ between shards and their merge: they change no item's record
# (the gates among them are decided at the merge).
FREE_SETTINGS = RESUME_FREE_SETTINGS | {"shard"}


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``total``."""

    index: int
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def parse_shard(text: str, source: str = "--ragbench-shard") -> Shard:
    """``"I/N"`` with 1 <= I <= N."""
    parts = str(text).strip().split("/")
    try:
        index, total = (int(p) for p in parts)
    except ValueError:
        raise ConfigError(f"{source} must be I/N (for example 2/4), got {text!r}") from None
    if total < 1 or not 1 <= index <= total:
        raise ConfigError(f"{source}: shard {index} of {total} does not exist "
                          f"(I runs from 1 to N)")
    return Shard(index, total)


def from_environment(env: Mapping[str, str]) -> Shard | None:
    """The shard a scheduler's environment names (Kubernetes Indexed Job, SLURM array).

    ``JOB_COMPLETION_INDEX`` (0-based) with ``RAGBENCH_SHARDS``; ``SLURM_ARRAY_TASK_ID``
    with ``SLURM_ARRAY_TASK_COUNT`` (counted from ``SLURM_ARRAY_TASK_MIN``, 0 if unset).
    """
    if env.get("JOB_COMPLETION_INDEX", "").strip():
        total = env.get("RAGBENCH_SHARDS", "").strip()
        if not total:
            raise ConfigError("JOB_COMPLETION_INDEX is set: set RAGBENCH_SHARDS to the Job's "
                              "completions (the number of shards)")
        index = _int(env["JOB_COMPLETION_INDEX"], "JOB_COMPLETION_INDEX") + 1
        return parse_shard(f"{index}/{_int(total, 'RAGBENCH_SHARDS')}",
                           "JOB_COMPLETION_INDEX/RAGBENCH_SHARDS")
    if env.get("SLURM_ARRAY_TASK_ID", "").strip() and env.get("SLURM_ARRAY_TASK_COUNT"):
        first = _int(env.get("SLURM_ARRAY_TASK_MIN") or "0", "SLURM_ARRAY_TASK_MIN")
        task = _int(env["SLURM_ARRAY_TASK_ID"], "SLURM_ARRAY_TASK_ID") - first + 1
        count = _int(env["SLURM_ARRAY_TASK_COUNT"], "SLURM_ARRAY_TASK_COUNT")
        return parse_shard(f"{task}/{count}", "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT")
    return None


def _int(text: str, name: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {text!r}") from None


def resolve(option: str | None) -> Shard | None:
    """The shard of this process: the flag or ini key, else the scheduler's environment."""
    if option:
        return parse_shard(option)
    return from_environment(os.environ)


def unit_key(item: Any, rootpath: Path) -> str:
    """The case an item belongs to: its items are always in one shard."""
    path = Path(str(getattr(item, "path", "") or ""))
    if path.is_relative_to(rootpath):
        path = path.relative_to(rootpath)
    case = getattr(item, "case", None)
    if case is not None:
        return f"{path.as_posix()}::{case.kind}::{case.id}"
    return f"{path.as_posix()}::{item.name}"  # a case that could not be read


def shard_of(key: str, total: int) -> int:
    """The shard (1-based) of a unit: a hash every machine computes alike."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % total + 1


def item_kind_name(item: Any) -> str:
    """The item kind of a ragbench item (``sql_ground_truth``, ``vector``, ...)."""
    return str(getattr(getattr(item, "item_kind", None), "name", None)
               or getattr(item, "kind_name", ""))


def kind_durations(path: Path) -> dict[str, float]:
    """Mean seconds per item of each item kind, from a saved run or a results.json."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--ragbench-shard-durations: cannot read {path}: {exc}") from None
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ConfigError(f"--ragbench-shard-durations: {path} is not a ragbench run (no "
                          "'items' list; expected a saved run or a results.json)")
    totals: dict[str, list[float]] = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("duration"), int | float):
            totals.setdefault(str(item.get("kind")), []).append(float(item["duration"]))
    return {kind: sum(values) / len(values) for kind, values in totals.items() if values}


def assign(items: Iterable[Any], total: int, rootpath: Path,
           durations: Mapping[str, float] | None = None) -> dict[str, int]:
    """The shard (1-based) of each ragbench item, by node id.

    Without durations: the hash of the item's case. With the mean duration of each item
    kind from an earlier run: the cases, heaviest first (ties in hash order), each to the
    shard with the least expected time so far, as pytest-split balances by durations;
    the same on every machine given the same items and durations.
    """
    units: dict[str, list[Any]] = {}
    for item in items:
        if hasattr(item, "record_for_report"):
            units.setdefault(unit_key(item, rootpath), []).append(item)
    if not durations:
        return {item.nodeid: shard_of(key, total) for key, unit in units.items()
                for item in unit}
    typical = sum(durations.values()) / len(durations)
    weights = {key: sum(durations.get(item_kind_name(i), typical) for i in unit)
               for key, unit in units.items()}
    order = sorted(units, key=lambda k: (-weights[k], hashlib.sha256(k.encode()).hexdigest()))
    load = [0.0] * total
    chosen: dict[str, int] = {}
    for key in order:
        index = min(range(total), key=lambda i: (load[i], i))
        load[index] += weights[key]
        for item in units[key]:
            chosen[item.nodeid] = index + 1
    return chosen


def split(items: list[Any], shard: Shard, rootpath: Path,
          durations: Mapping[str, float] | None = None) -> tuple[list[Any], list[Any]]:
    """``(kept, dropped)``: the ragbench items of other shards dropped, other tests kept."""
    shard_by_id = assign(items, shard.total, rootpath, durations)
    kept: list[Any] = []
    dropped: list[Any] = []
    for item in items:
        mine = shard_by_id.get(item.nodeid, shard.index) == shard.index
        (kept if mine else dropped).append(item)
    return kept, dropped


def comparable_settings(public: Mapping[str, Any], rootpath: Path) -> dict[str, Any]:
    """Settings that change what an item computes, with paths relative to the rootdir.

    Shards run on machines with different checkout folders; a case file is the same
    file there if its path below the rootdir is.
    """
    root = str(rootpath)

    def relative(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(root):
            return value[len(root):].lstrip("/\\") or "."
        if isinstance(value, list):
            return [relative(v) for v in value]
        if isinstance(value, dict):
            return {relative(k): relative(v) for k, v in value.items()}
        return value

    return {k: relative(v) for k, v in public.items() if k not in FREE_SETTINGS}


@dataclass
class ShardReport:
    """One shard's report folder, as read for the merge."""

    folder: Path
    shard: dict[str, Any]
    run: dict[str, Any]
    components: dict[str, str]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``shard I/N (folder)``."""
        return f"shard {self.shard.get('index')}/{self.shard.get('total')} ({self.folder})"


def read_shard(folder: Path) -> ShardReport:
    """A shard's results.json and items.jsonl; ConfigError naming what is wrong."""
    results = folder / "results.json"
    items = folder / "items.jsonl"
    for needed in (results, items):
        if not needed.is_file():
            raise ConfigError(f"{folder}: not a shard's report folder ({needed.name} missing)")
    try:
        document = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{results}: cannot be read ({exc})") from None
    run = document.get("run") if isinstance(document, dict) else None
    shard = run.get("shard") if isinstance(run, dict) else None
    if not isinstance(run, dict) or not isinstance(shard, dict):
        raise ConfigError(f"{results}: not written by a shard (run with --ragbench-shard=I/N)")
    report = ShardReport(folder, shard, run, dict(document.get("components") or {}))
    with items.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                nodeid = record["nodeid"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ConfigError(f"{items}:{number}: not an item record ({exc})") from None
            record.pop("run", None)
            report.records[str(nodeid)] = record
    return report


@dataclass
class Merged:
    """The shards' records, the shards present and the settings they ran with."""

    records: dict[str, dict[str, Any]]
    shards: list[ShardReport]
    total: int
    settings: dict[str, Any]

    def missing_shards(self) -> list[int]:
        """Indexes of the shards no folder holds."""
        present = {int(s.shard.get("index", 0)) for s in self.shards}
        return [i for i in range(1, self.total + 1) if i not in present]

    def components(self) -> dict[str, str]:
        """Every component a shard named (the same in each, as the settings are)."""
        found: dict[str, str] = {}
        for shard in self.shards:
            found.update(shard.components)
        return found


def merge(folders: Iterable[Path], settings: dict[str, Any], version: Mapping[str, Any]
          ) -> Merged:
    """Read and check the shard folders; ConfigError naming the shards that disagree.

    ``settings`` are this session's :func:`comparable_settings`; ``version`` its
    ``plugin_version`` and ``git_commit``. Shards must share both and the number of
    shards, and no item may be in two of them.
    """
    shards = [read_shard(Path(f)) for f in folders]
    if not shards:
        raise ConfigError("--ragbench-merge: no shard folders given")
    totals = {int(s.shard.get("total", 0)) for s in shards}
    if len(totals) != 1:
        raise ConfigError("--ragbench-merge: the shards split the items differently: "
                          + "; ".join(s.name for s in shards))
    for shard in shards:
        changed = differences(shard.shard.get("settings") or {}, settings)
        if changed:
            raise ConfigError(f"--ragbench-merge: {shard.name} ran with other settings than "
                              f"this merge ({'; '.join(changed)}); merge with the shards' "
                              "settings")
        for key in ("plugin_version", "git_commit"):
            if shard.run.get(key) != version.get(key):
                raise ConfigError(f"--ragbench-merge: {shard.name} ran another code version "
                                  f"({key} {shard.run.get(key)!r}, here {version.get(key)!r})")
    records: dict[str, dict[str, Any]] = {}
    owner: dict[str, ShardReport] = {}
    for shard in shards:
        both = sorted(set(shard.records) & set(records))
        if both:
            raise ConfigError(f"--ragbench-merge: {shard.name} and {owner[both[0]].name} hold "
                              f"the same items ({len(both)}, e.g. {both[0]})")
        records.update(shard.records)
        owner.update(dict.fromkeys(shard.records, shard))
    return Merged(records, shards, totals.pop(), settings)


class ShardSelection:
    """Which items run: a shard's own (``--ragbench-shard``), or none (``--ragbench-merge``).

    Runs after every other selection (``-k``, ``-m``, ``--ragbench-limit``), so that the
    partition and the merge see the items the command selects, in every process.
    """

    def __init__(self, settings: Any) -> None:
        self.settings = settings  # the session's RagbenchConfig

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """Deselect the other shards' items, or, merging, the items no shard ran."""
        settings = self.settings
        durations = kind_durations(settings.shard_durations) \
            if settings.shard_durations else None
        if settings.shard:
            kept, dropped = split(items, parse_shard(settings.shard), config.rootpath,
                                  durations)
        else:  # each item reports its shard's record (Replay); none runs
            session = config.pluginmanager.get_plugin("ragbench-session")
            merged = getattr(session, "merged", None)
            records = merged.records if merged is not None else {}
            ours = [item for item in items if hasattr(item, "record_for_report")]
            dropped = [item for item in ours if item.nodeid not in records]
            gone = {id(item) for item in dropped}
            kept = [item for item in items if id(item) not in gone]
            if session is not None and merged is not None:
                session.merge_collected = assign(ours, merged.total, config.rootpath,
                                                 durations)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept


class Replay:
    """Under ``--ragbench-merge``: each item reports its shard's record instead of running.

    The reports go through the phases of a test (``logstart``, setup, call, teardown,
    ``logfinish``), so the terminal, ``--junitxml`` and every reporter show the item as
    the shard ran it: its outcome, its message, its duration.
    """

    def __init__(self, records: Mapping[str, dict[str, Any]]) -> None:
        self.records = records

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> bool | None:
        """Report the record of ``item``; items without one run as usual (none here)."""
        record = self.records.get(item.nodeid)
        if record is None:
            return None
        hook = item.ihook
        hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for report in replayed_reports(item, record):
            hook.pytest_runtest_logreport(report=report)
        hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True


def replayed_reports(item: pytest.Item, record: dict[str, Any]) -> list[pytest.TestReport]:
    """The setup, call and teardown reports an item with this record made on its shard."""
    status = str(record.get("status"))
    message = "\n".join([*(record.get("failures") or []),
                         *([record["error"]] if record.get("error") else [])]) \
        or str(record.get("summary") or status)
    failed_in = "setup" if status == "error" else "call"
    reports = []
    for when in ("setup", "call", "teardown"):
        outcome: Literal["passed", "failed", "skipped"] = "passed"
        longrepr: Any = None
        if when == failed_in and status in ("failed", "error", "lost"):
            outcome, longrepr = "failed", message
        elif when == "setup" and status == "skipped":
            outcome = "skipped"
            longrepr = (str(item.location[0]), int(item.location[1] or 0) + 1,
                        f"Skipped: {record.get('error') or 'skipped on its shard'}")
        report = pytest.TestReport(
            item.nodeid, item.location, {k: 1 for k in item.keywords}, outcome, longrepr, when,
            duration=float(record.get("duration") or 0.0) if when == "call" else 0.0)
        if when == failed_in or (when == "setup" and status == "skipped"):
            setattr(report, REPORT_ATTRIBUTE, record)
        reports.append(report)
        if outcome != "passed":
            break  # a failed or skipped setup has no call phase; its teardown is not shown
    return reports
