"""Which case items a session runs: ``--ragbench-limit``, and what waits for ``--ragbench``.

- ``--ragbench-limit N`` (env ``RAGCSV_LIMIT``) keeps the first N cases of each case
  file, of any kind (every item of a kept case: its ground-truth and evaluation items,
  one per system); the other items are deselected, as ``-k`` deselects.
- A plain ``pytest`` collects only the ground-truth items; cases that become items only
  with ``--ragbench`` (vector, memory, ragas cases, RAGCSV files, BEIR folders) are
  counted while collecting and named in one line at the end of the session, so a user
  who sees "no tests ran" knows why. Under xdist the workers' counts reach the
  controller in ``workeroutput``.

Cheap to import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

NOT_COLLECTED = pytest.StashKey[dict[str, int]]()
WORKEROUTPUT_KEY = "ragbench_not_collected"


def limit_per_file(items: Sequence[pytest.Item], limit: int
                   ) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """``(kept, dropped)``: the items of the first ``limit`` cases of each file.

    Items that are not ragbench items are always kept.
    """
    positions: dict[Any, dict[str, int]] = {}
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        if item.get_closest_marker("ragbench") is None:
            kept.append(item)
            continue
        case = getattr(item, "case", None)
        key = str(getattr(case, "id", None) or item.name)
        seen = positions.setdefault(item.path, {})
        position = seen.setdefault(key, len(seen))
        (kept if position < limit else dropped).append(item)
    return kept, dropped


def note_not_collected(config: pytest.Config, what: str, count: int = 1) -> None:
    """Count ``count`` of ``what`` (``"vector case"``, ``"RAGCSV file"``) needing ``--ragbench``."""
    counts = config.stash.setdefault(NOT_COLLECTED, {})
    counts[what] = counts.get(what, 0) + count
    workeroutput: Any = getattr(config, "workeroutput", None)
    if isinstance(workeroutput, dict):
        workeroutput[WORKEROUTPUT_KEY] = dict(counts)


def merge_worker_counts(config: pytest.Config, counts: dict[str, int]) -> None:
    """Keep a worker's counts on the controller (every worker collects the same files)."""
    mine = config.stash.setdefault(NOT_COLLECTED, {})
    for what, count in counts.items():
        mine[what] = max(mine.get(what, 0), int(count))


# Generated cases held back by their ``review`` state, not by a missing ``--ragbench``.
REVIEW_HELD = {"draft case": "run only with --ragbench-drafts",
               "rejected case": "never run"}


def not_collected_line(config: pytest.Config) -> str | None:
    """One line naming what becomes items only with ``--ragbench`` (and held drafts), or None."""
    stored: dict[str, int] | None = config.stash.get(NOT_COLLECTED, None)
    counts = dict(stored or {})
    held = []
    for what, why in REVIEW_HELD.items():
        count = counts.pop(what, 0)
        if count:
            held.append(f"{count} {what}{'' if count == 1 else 's'} {why}")
    line = _needing_ragbench(counts)
    if held:
        line = "; ".join(([line] if line else []) + [f"ragbench: {', '.join(held)}"])
    return line


def _needing_ragbench(counts: dict[str, int]) -> str | None:
    if not counts:
        return None
    parts = [f"{count} {what}{'' if count == 1 else 's'}"
             for what, count in sorted(counts.items())]
    listed = ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]
    return (f"ragbench: {listed} become evaluation items only with --ragbench "
            "(run pytest --ragbench to evaluate them)")
