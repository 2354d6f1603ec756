"""Walking the case folders safely: each real folder and file once, unreadable folders skipped.

pytest follows symlinked folders when it walks a directory, and has no loop check: a
link to a parent folder collects every case again at each level until the OS refuses
(~40 times), and two links to one dataset collect it twice. Under the case folders, a
folder or case file is therefore collected the first time its resolved path is reached
only. A folder that cannot be listed or searched is skipped with one warning instead of
aborting collection, and a case file that is no regular file (a FIFO, a device, a link to
nothing), which pytest passes over in silence, is one warning too; it is never opened
(a FIFO would block). Outside the case folders pytest's own behaviour is untouched.
"""

from __future__ import annotations

import os
import stat
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest


class UnreadableFolderWarning(pytest.PytestWarning):
    """A folder among the case paths could not be listed; its cases are not collected."""


class SpecialFileWarning(pytest.PytestWarning):
    """A case file among the case paths is no regular file; it is not read."""


# Names that are case files when they hold cases (collect.py decides by content too, which
# would mean opening the file).
_CASE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".csv")
_CASE_MODULE = "_test_cases.py"
_SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _special(entry: os.DirEntry[str]) -> str | None:
    """What a directory entry is when it is neither a folder nor a regular file."""
    try:
        mode = os.stat(entry.path).st_mode  # follows a link: /dev/zero behind zero.jsonl
    except OSError as exc:
        if entry.is_symlink():
            return f"a link to nothing readable ({exc.strerror or exc})"
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    return next((what for test, what in _SPECIAL if test(mode)), "a special file")


@dataclass
class SeenPaths:
    """Resolved folders and case files already collected in this session."""

    # resolved path -> the path it was first reached by (asking again about that one is fine)
    folders: dict[Path, Path] = field(default_factory=dict)
    files: dict[Path, Path] = field(default_factory=dict)
    # Every xdist worker collects the whole tree: the first one alone warns, so a folder
    # is one warning whatever -n is.
    warn: bool = True

    def skip_folder(self, path: Path) -> bool:
        """True for a folder reached before (through a symlink) or one that cannot be read."""
        if _seen_elsewhere(path, self.folders):
            return True
        try:
            with os.scandir(path):
                pass
            os.stat(os.path.join(path, os.curdir))  # searchable too: pytest stats each entry
        except OSError as exc:
            if self.warn:
                warnings.warn(UnreadableFolderWarning(
                    f"ragbench: cannot list {path} ({exc.strerror or exc}): its cases are "
                    "not collected"), stacklevel=2)
            return True
        return False

    def warn_special_files(self, folder: Path) -> None:
        """One warning per case file in ``folder`` that is no regular file (module docstring)."""
        if not self.warn:
            return
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:  # a folder that cannot be listed: warned about by skip_folder
            return
        for entry in sorted(entries, key=lambda e: e.name):
            name = entry.name
            if not (name.endswith(_CASE_SUFFIXES) or name.endswith(_CASE_MODULE)):
                continue
            try:
                if entry.is_file() or entry.is_dir():  # from the listing: no extra call
                    continue
            except OSError:
                pass
            what = _special(entry)
            if what is not None:
                warnings.warn(SpecialFileWarning(
                    f"ragbench: {entry.path} is {what}, not a regular file: it is not read"),
                    stacklevel=2)

    def skip_file(self, path: Path) -> bool:
        """True for a case file collected before under another (symlinked) path."""
        return _seen_elsewhere(path, self.files)


def _seen_elsewhere(path: Path, seen: dict[Path, Path]) -> bool:
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):  # a dangling link, or a loop the OS gave up on
        return True
    first = seen.setdefault(real, path.absolute())
    return first != path.absolute()
