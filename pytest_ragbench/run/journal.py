"""The run journal: every finished record, appended the moment its item finishes.

``<report dir>/journal/<run id>.jsonl`` holds one header line per session of the run
(``{"journal": 1, "run_id", "started", "config", "resumed", "items"}``, ``items`` the node
ids the session selected) and one line per finished item (the record, with ``run_id``).
It is appended by the process that ran the item (an xdist worker, or pytest itself
without workers), one ``write`` per line on a file opened for appending, so even a
SIGKILL of the whole session keeps every record already written.
It is not fsync'ed: it survives any process kill, not a power cut.

The journal is the run's working copy; the report files are written from the records at
session end. It exists while its run is unfinished: the session that covers every
selected item removes it, an interrupted one keeps it for ``--ragbench-resume``. A later
session removes another run's journal only when it replaces that run: it is complete and
has a record of every item that run selected (a ``--lf`` or ``-k`` session after an
interruption covers part of it, so the journal stays). No finished record is deleted by
a session that did not run its item again. A session holds a shared lock on its own
journal, so that no other session takes a live run's journal for a stale one. Only the
standard library is used here (plugin start-up).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.redact import scrub_data
from pytest_ragbench.run.locking import hold_shared, is_held

JOURNAL_DIR = "journal"
FORMAT = 1


def new_run_id(now: float | None = None) -> str:
    """``YYYYmmddTHHMMSSZ-xxxxxxxx``: the UTC start time and 8 random hex digits."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def journal_path(report_dir: Path, run_id: str) -> Path:
    """Where the journal of ``run_id`` lives."""
    return report_dir / JOURNAL_DIR / f"{run_id}.jsonl"


class JournalWriter:
    """Appends lines to one journal; opened on the first line, by any process of the run."""

    def __init__(self, path: Path, run_id: str) -> None:
        self.path = path
        self.run_id = run_id
        self._fd: int | None = None
        self.failed: str | None = None  # why the journal could not be written, if it could not
        self.active = False  # records are journaled only in a session with ragbench items

    def header(self, config: dict[str, Any], *, resumed: bool,
               items: Iterable[str] = ()) -> None:
        """The line that opens a session of the run (``items``: the node ids it selected).

        Secrets are masked in the settings.
        """
        self._append({"journal": FORMAT, "run_id": self.run_id, "pid": os.getpid(),
                      "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "config": scrub_data(config), "resumed": resumed, "items": sorted(items)})

    def record(self, data: dict[str, Any]) -> None:
        """One finished item's record (``ItemRecord.to_dict()``, which masked its secrets)."""
        self._append({**data, "run_id": self.run_id})

    def _append(self, line: dict[str, Any]) -> None:
        if self.failed:
            return
        data = (json.dumps(line, allow_nan=False) + "\n").encode("utf-8")
        try:
            if self._fd is None:
                self._fd = self._open()
            written = 0
            while written < len(data):  # one write for a regular file; the loop is a guard
                written += os.write(self._fd, data[written:])
        except (OSError, ValueError) as exc:
            # The report at session end still has every record that reached it.
            self.failed = f"{type(exc).__name__}: {exc}"

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        end = os.lseek(fd, 0, os.SEEK_END)
        if end:
            os.lseek(fd, end - 1, os.SEEK_SET)
            if os.read(fd, 1) != b"\n":
                os.write(fd, b"\n")  # a line cut short by a kill stays a line of its own
        return fd

    def lock_shared(self) -> None:
        """Hold a shared lock while the session runs: the journal is live (POSIX only)."""
        if self._fd is not None:
            hold_shared(self._fd)

    def close(self) -> None:
        """Close the file (and so release the lock)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


@dataclass
class Journal:
    """A journal read back: its sessions' headers and the last record of each node id."""

    path: Path
    run_id: str
    headers: list[dict[str, Any]] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    size: int = 0  # bytes read: a reader of the same journal reads exactly these
    unreadable: int = 0  # lines that were not JSON (a line cut short by a kill)

    @property
    def config(self) -> dict[str, Any] | None:
        """The configuration of the run's first session."""
        return self.headers[0].get("config") if self.headers else None

    def items(self) -> set[str]:
        """Every item of the run: those its sessions selected, and those with a record.

        (A journal of an older version lists no selected items: its records only.)
        """
        found = set(self.records)
        for header in self.headers:
            listed = header.get("items")
            if isinstance(listed, list):
                found.update(str(nodeid) for nodeid in listed)
        return found


def read(path: Path, size: int | None = None, *, start: int = 0) -> Journal:
    """Read a journal from byte ``start`` (``size`` bytes in all when given).

    A line cut short by a kill is skipped; ``size`` of the result counts from the start
    of the file, so that another reader can read exactly the same lines.
    """
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read() if size is None else handle.read(max(0, size - start))
    run_id = path.stem
    journal = Journal(path=path, run_id=run_id, size=start + len(data))
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            journal.unreadable += 1
            continue
        if not isinstance(line, dict) or line.get("run_id") != run_id:
            journal.unreadable += 1
        elif "journal" in line:
            journal.headers.append(line)
        elif isinstance(line.get("nodeid"), str):
            journal.records[line["nodeid"]] = line
    return journal


def journals(report_dir: Path) -> list[Path]:
    """The journals in the report dir, most recently written last."""
    folder = report_dir / JOURNAL_DIR
    if not folder.is_dir():
        return []
    found = []
    for path in folder.glob("*.jsonl"):
        with contextlib.suppress(OSError):
            found.append((path.stat().st_mtime, path.name, path))
    return [path for _, _, path in sorted(found)]


def unfinished(report_dir: Path, *, besides: Path | None = None) -> list[Journal]:
    """The journals of the report dir's unfinished runs (not ``besides``, none held live)."""
    found = []
    for path in journals(report_dir):
        if path == besides or is_live(path):
            continue
        try:
            journal = read(path)
        except OSError:
            continue
        if journal.headers:  # else not a journal this plugin started
            found.append(journal)
    return found


def is_live(path: Path) -> bool:
    """True when a running session holds the journal (POSIX; elsewhere never)."""
    return is_held(path)


def remove(paths: Iterator[Path] | list[Path], problems: list[str]) -> None:
    """Remove journals (and the journal folder once empty)."""
    folders = set()
    for path in paths:
        folders.add(path.parent)
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            problems.append(f"could not remove the journal {path} ({exc})")
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty
