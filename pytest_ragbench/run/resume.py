"""``--ragbench-resume``: continue the newest unfinished run of the report dir.

The run is read from its journal (:mod:`.journal`). Items whose record there says they
finished (passed, failed, warning, skipped) are deselected, so their model calls are
not made again; the others (not run, lost with a crashed worker, errors in setup) run
now. The session keeps the run's id and appends to its journal, and the report at its
end covers the whole run: the kept records and the new ones. A run is only continued
with the configuration it was started with (the settings that change what an item
computes: systems, models, thresholds, ...). Only the standard library is used here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.run import journal as journal_mod

# Statuses of a finished item: its record is kept and the item is not run again.
KEPT_STATUSES = ("passed", "failed", "warning", "skipped")
# Settings that do not change an item's record: they may differ in the resumed session.
FREE_SETTINGS = frozenset({"concurrency", "cache_dir", "gate", "breakdown", "gates",
                           "gate_min_n", "cluster_by", "judge_labels", "timeout_s", "retries",
                           "sql_timeout_s", "max_unscored", "max_reply_bytes",
                           "sequential", "sequential_seed"})


@dataclass(frozen=True)
class ResumePoint:
    """The run to continue: its id, its journal (read up to ``size``) and the kept records."""

    run_id: str
    path: Path
    size: int
    kept: dict[str, dict[str, Any]]
    sessions: int  # sessions of the run so far

    def worker_input(self) -> dict[str, Any]:
        """What an xdist worker needs to deselect the same items (a byte count, not the ids)."""
        return {"path": str(self.path), "size": self.size}


def kept_records(journal: journal_mod.Journal) -> dict[str, dict[str, Any]]:
    """The journal's records of finished items, by node id."""
    return {nodeid: record for nodeid, record in journal.records.items()
            if record.get("status") in KEPT_STATUSES}


def find(report_dir: Path, config: dict[str, Any]) -> ResumePoint | None:
    """The newest journal not held by a running session; ConfigError if its settings differ."""
    for path in reversed(journal_mod.journals(report_dir)):
        if journal_mod.is_live(path):
            continue
        try:
            journal = journal_mod.read(path)
        except OSError:
            continue
        if not journal.headers:  # not a journal this plugin started
            continue
        changed = differences(journal.config or {}, config)
        if changed:
            raise ConfigError(
                f"--ragbench-resume: the interrupted run {journal.run_id} was started with "
                f"other settings ({'; '.join(changed)}); run with the same settings, or "
                f"without --ragbench-resume to start a new run")
        return ResumePoint(journal.run_id, path, journal.size, kept_records(journal),
                           len(journal.headers))
    return None


def differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``name: before -> now`` for each setting that changes what items compute."""
    names = sorted((set(before) | set(now)) - FREE_SETTINGS)
    return [f"{name}: {before.get(name)!r} -> {now.get(name)!r}" for name in names
            if before.get(name) != now.get(name)][:5]


def worker_kept_ids(worker_input: dict[str, Any]) -> frozenset[str]:
    """On an xdist worker: the node ids the controller deselects, read from the same bytes."""
    try:
        journal = journal_mod.read(Path(worker_input["path"]), int(worker_input["size"]))
    except (OSError, KeyError, TypeError, ValueError):
        return frozenset()
    return frozenset(kept_records(journal))
