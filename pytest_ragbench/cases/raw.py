"""Raw records read from a case file, before they become typed cases."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import CaseError


@dataclass
class RawRecord:
    """One record of a case file with the lines it came from.

    ``field_lines`` maps a top-level field name to the line it starts on, so
    that an error in one field can point at that exact line.
    """

    data: dict[str, Any]
    line: int
    field_lines: dict[str, int] = field(default_factory=dict)
    kind_hint: str | None = None
    end_line: int = 0  # the record's last line (0: its first)

    def __post_init__(self) -> None:
        self.end_line = max(self.end_line, self.line)

    def line_of(self, name: str | None) -> int:
        """Return the line of a field, or the record's own line."""
        if name is None:
            return self.line
        return self.field_lines.get(name.split(".")[0].split("[")[0], self.line)


@dataclass
class FileRecords:
    """What a loader found in one file: records, per-record errors and file defaults.

    ``rejected`` holds records that were read but hold a problem found while reading (a
    key given twice, a line that is not UTF-8): they fail with it, named by kind and id.
    """

    path: Path
    records: list[RawRecord] = field(default_factory=list)
    errors: list[CaseError] = field(default_factory=list)
    defaults: dict[str, Any] = field(default_factory=dict)
    rejected: list[tuple[RawRecord, CaseError]] = field(default_factory=list)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while cases are read and built.

    A big case file makes millions of objects with no reference cycles; collecting the
    growing heap again and again cost as much as parsing it. Cycles made meanwhile are
    collected once the collector runs again.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
