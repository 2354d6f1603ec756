"""Walking the case folders safely: each real folder and file once, unreadable folders skipped.

pytest follows symlinked folders when it walks a directory, and has no loop check: a
link to a parent folder collects every case again at each level until the OS refuses
(~40 times), and two links to one dataset collect it twice. Under the case folders, a
folder or case file is therefore collected the first time its resolved path is reached
only. A folder that cannot be listed is skipped with one warning instead of aborting
collection. Outside the case folders pytest's own behaviour is untouched.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest


class UnreadableFolderWarning(pytest.PytestWarning):
    """A folder among the case paths could not be listed; its cases are not collected."""


@dataclass
class SeenPaths:
    """Resolved folders and case files already collected in this session."""

    # resolved path -> the path it was first reached by (asking again about that one is fine)
    folders: dict[Path, Path] = field(default_factory=dict)
    files: dict[Path, Path] = field(default_factory=dict)

    def skip_folder(self, path: Path) -> bool:
        """True for a folder reached before (through a symlink) or one that cannot be listed."""
        if _seen_elsewhere(path, self.folders):
            return True
        try:
            with os.scandir(path):
                pass
        except OSError as exc:
            warnings.warn(UnreadableFolderWarning(
                f"ragbench: cannot list {path} ({exc.strerror or exc}): its cases are not "
                "collected"), stacklevel=2)
            return True
        return False

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
