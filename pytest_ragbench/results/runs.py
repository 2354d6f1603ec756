"""Saved runs (``runs/NNNN_NAME.json`` in the report dir) and finding a baseline to compare with.

As pytest-benchmark: ``--ragbench-save NAME`` takes the next free number; a baseline is
named by a path, by ``NAME`` (its newest save), by ``NNNN`` or by ``NNNN_NAME``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.run.locking import locked

RUNS_DIR = "runs"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_SAVED = re.compile(r"^(?P<number>\d{4,})_(?P<name>.+)\.json$")


def check_name(name: str) -> str:
    """Return ``name`` if it is usable in a file name, else raise ConfigError."""
    if not _NAME.match(name) or name.endswith(".json"):
        raise ConfigError(f"--ragbench-save {name!r}: use letters, digits, '.', '_' or '-' "
                          "(it becomes part of a file name)")
    return name


def saved_runs(report_dir: Path) -> list[tuple[int, str, Path]]:
    """``(number, name, path)`` of every saved run, oldest first."""
    folder = report_dir / RUNS_DIR
    found = []
    if folder.is_dir():
        for path in folder.iterdir():
            match = _SAVED.match(path.name)
            if match and path.is_file():
                found.append((int(match["number"]), match["name"], path))
    return sorted(found)


def save(document: dict[str, Any], report_dir: Path, name: str) -> Path:
    """Write ``runs/NNNN_NAME.json`` with the next number (safe against concurrent saves)."""
    folder = report_dir / RUNS_DIR
    with locked(folder / ".lock"):
        number = max((n for n, _, _ in saved_runs(report_dir)), default=0) + 1
        path = folder / f"{number:04d}_{check_name(name)}.json"
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    return path


def resolve(reference: str, report_dir: Path, invocation_dir: Path) -> Path:
    """The file a ``--ragbench-compare`` reference points to; ConfigError when none does."""
    candidate = Path(reference)
    if not candidate.is_absolute():
        candidate = invocation_dir / candidate
    if candidate.is_file():
        return candidate
    runs = saved_runs(report_dir)
    chosen = [path for number, name, path in runs
              if reference in (name, f"{number:04d}", f"{number:04d}_{name}", path.name)]
    if chosen:
        return chosen[-1]
    have = ", ".join(path.stem for _, _, path in runs) or "no saved runs"
    raise ConfigError(f"--ragbench-compare {reference!r}: no such file and no saved run of "
                      f"that name in {report_dir / RUNS_DIR} ({have})")


@dataclass(frozen=True)
class Baseline:
    """A previous run loaded for comparison."""

    label: str
    path: Path
    records: list[ItemRecord]
    run: dict[str, Any]


def load(path: Path) -> Baseline:
    """Read a saved run or a ``results.json``; ConfigError when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--ragbench-compare: cannot read {path}: {exc}") from None
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ConfigError(f"--ragbench-compare: {path} is not a ragbench run "
                          "(no 'items' list; expected a saved run or results.json)")
    try:
        records = [ItemRecord.from_dict(item) for item in items]
    except TypeError as exc:
        raise ConfigError(f"--ragbench-compare: {path}: unreadable item: {exc}") from None
    return Baseline(path.stem, path, records, dict(data.get("run") or {}))
