"""Which files hold cases, and the ``pytest.File`` collectors that turn them into items."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.config import options
from pytest_ragbench.config.settings import get_config
from pytest_ragbench.errors import CaseError
from pytest_ragbench.kinds import registry

DATA_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
PYTHON_CASES = "_test_cases.py"
RAGCSV_SUFFIX = ".ragcsv.csv"
BEIR_MARKERS = ("corpus.jsonl", "queries.jsonl")
# Words a case file outside the case folders must contain to be read as one.
_SNIFF_WORDS = ("question", "query", "expected_sql", "gold_sql", "ground_truth", "setup")


@dataclass(frozen=True)
class CaseLocations:
    """Where case files are looked for in this session."""

    # All paths resolved (symlinks followed), and compared resolved.
    roots: tuple[Path, ...]           # ini ragbench_cases and --ragbench-cases
    explicit_files: tuple[Path, ...]  # files named on the command line
    cli_dirs: tuple[Path, ...]        # folders named on the command line
    ragcsv_files: tuple[Path, ...]    # ini ragbench_ragcsv

    def is_case_file(self, path: Path, own_format: bool = False) -> bool:
        """True when ``path`` should be read as a case file.

        ``own_format``: the file is surely in the format of a kind that reads its own
        (``FormatReader.detects``), so its suffix alone does not rule it out.
        """
        name = path.name
        is_data = path.suffix in DATA_SUFFIXES
        is_ragcsv = name.endswith(RAGCSV_SUFFIX) or (
            path.suffix == ".csv" and path.resolve() in self.ragcsv_files)
        if not (is_data or is_ragcsv or own_format or name.endswith(PYTHON_CASES)):
            return False
        if in_beir_folder(path):
            return False  # a BEIR folder is collected as a whole
        path = path.resolve()  # command-line paths may reach it through a symlink
        if path in self.explicit_files or path in self.ragcsv_files:
            return True
        if _under(path, self.roots):
            return True
        if _under(path, self.cli_dirs):
            return not is_data or _looks_like_cases(path)
        return False

    def is_case_folder(self, path: Path) -> bool:
        """True when the BEIR folder ``path`` is in the case paths or the command-line paths.

        Checked as reached and with symlinks followed: a large dataset is often a symlink.
        """
        return any(_under(p, self.roots) or _under(p, self.cli_dirs)
                   for p in (path.absolute(), path.resolve()))

    def holds_named_file(self, folder: Path) -> bool:
        """True when a file named on the command line lies inside ``folder``.

        A BEIR item's node id names its qrels file: the dataset folder is collected for it
        even outside the case paths.
        """
        resolved = folder.resolve()
        return any(resolved in f.parents for f in self.explicit_files)


def _under(path: Path, folders: tuple[Path, ...]) -> bool:
    return any(path == f or f in path.parents for f in folders)


def is_beir_folder(path: Path) -> bool:
    """A BEIR dataset folder: corpus.jsonl, queries.jsonl and a qrels/ folder."""
    try:
        return all((path / m).is_file() for m in BEIR_MARKERS) and (path / "qrels").is_dir()
    except OSError:  # a folder that cannot be searched holds no dataset we can read
        return False


def in_beir_folder(path: Path) -> bool:
    """True for files inside a BEIR dataset folder (including its qrels/)."""
    return is_beir_folder(path.parent) or is_beir_folder(path.parent.parent)


def _looks_like_cases(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(65536)
    except OSError:
        return False
    return any(word in head for word in _SNIFF_WORDS)


def locations(config: pytest.Config, roots: tuple[Path, ...],
              ragcsv_files: tuple[Path, ...]) -> CaseLocations:
    """Resolve the case folders and the command-line paths of this session."""
    base = config.invocation_params.dir
    files, dirs = [], []
    for arg in config.args:
        path = (base / arg.split("::")[0]).resolve()
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            dirs.append(path)
    return CaseLocations(tuple(p.resolve() for p in roots), tuple(files), tuple(dirs),
                         tuple(p.resolve() for p in ragcsv_files))


def display_path(path: str | Path, config: pytest.Config) -> str:
    """A path relative to where pytest was started, for messages."""
    try:
        return os.path.relpath(path, config.invocation_params.dir)
    except ValueError:
        return str(path)


class CaseFile(pytest.File):
    """A YAML/JSON/JSONL file or ``*_test_cases.py`` module of cases."""

    holds_only_ragbench_items = True  # items.add_ragbench_marker

    def collect(self) -> Iterator[pytest.Item]:
        """Yield one item per case and item kind, and one failing item per bad record."""
        from pytest_ragbench.cases.raw import gc_paused

        with gc_paused():  # see cases/raw.py: millions of objects, no cycles
            entries = self._entries()
        for _, item in sorted(entries, key=lambda entry: entry[0]):
            yield item

    def _entries(self) -> list[tuple[int, pytest.Item]]:
        """(line, item) for every item of the file."""
        from pytest_ragbench.cases.build import build_cases, duplicate_id
        from pytest_ragbench.cases.loaders import read_case_file
        from pytest_ragbench.cases.model import Case
        from pytest_ragbench.collect.items import (
            CaseItem,
            InvalidCaseItem,
            derived_items,
            systems_for,
        )

        shown = display_path(self.path, self.config)
        session_kinds = registry(self.config)
        item_kinds_for = session_kinds.item_kinds_for
        try:
            result = build_cases(read_case_file(self.path), session_kinds)
        except CaseError as exc:
            # The whole file is unreadable: one failing item, and the session goes on.
            return [(0, InvalidCaseItem.create(self, relocate(exc, shown), None,
                                               self.path.name))]
        settings = get_config(self.config)
        first_seen: dict[str, Case] = {}
        entries: list[tuple[int, pytest.Item]] = []
        drafts = bool(options.value(self.config, "ragbench_drafts"))
        for case in result.cases:
            if case.review == "rejected" or (case.review == "draft" and not drafts):
                # Generated cases a person has not accepted: see README "Generating cases".
                from pytest_ragbench.collect.selection import note_not_collected

                note_not_collected(self.config, f"{case.review} case")
                continue
            error = duplicate_id(case, first_seen, shown)
            if error is not None:
                kinds = item_kinds_for(case.kind, settings.evaluate)
                if kinds:
                    entries.append((case.line, InvalidCaseItem.create(
                        self, error, kinds[0].name, f"{case.id}@{case.line}")))
                continue
            if not settings.evaluate and not item_kinds_for(case.kind, False):
                from pytest_ragbench.collect.selection import note_not_collected

                note_not_collected(self.config, f"{case.kind} case")
            for item_kind in item_kinds_for(case.kind, settings.evaluate):
                for system in systems_for(item_kind, settings.systems, case, self.config):
                    entries.append((case.line, CaseItem.create(self, case, item_kind, system)))
            # items other kinds make from the case (ItemKind.derives): robust[<kind>-<id>]
            entries += [(case.line, item) for item in derived_items(self, case, shown)]
        for entry in result.invalid:
            kinds = item_kinds_for(entry.kind, settings.evaluate) if entry.kind else []
            if entry.kind and not kinds:
                continue  # an evaluation-only case, and evaluation is off
            error = entry.error
            entries.append((error.line or 0, InvalidCaseItem.create(
                self, relocate(error, shown), kinds[0].name if kinds else None,
                entry.case_id)))
        return entries


class NotImported(pytest.File):
    """A case module whose name matches ``python_files``: pytest must not import it.

    It is collected as cases by :class:`CaseFile`; this stands in for pytest's ``Module``.
    """

    def collect(self) -> Iterator[pytest.Item]:
        """Nothing: the module is data."""
        return iter(())


# -- helpers for the collectors of kinds that read their own formats ------------------------

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_.:/@+-]+")


def safe_label(text: str) -> str:
    """``text`` with the characters a case id may not hold replaced by ``_``."""
    return _UNSAFE_ID.sub("_", text) or "_"


def relocate(error: CaseError, shown: str) -> CaseError:
    """``error`` naming the file as ``shown``."""
    return CaseError(error.message, file=shown, line=error.line, field=error.field)


def shown_error(error: CaseError, config: pytest.Config) -> CaseError:
    """``error`` naming its file relative to where pytest was started."""
    file = display_path(error.file, config) if error.file else None
    return CaseError(error.message, file=file, line=error.line, field=error.field)


def kind_systems(config: pytest.Config, item_kind: Any) -> tuple[str | None, ...]:
    """The systems a kind's items are made for when the collector knows no case up front."""
    from pytest_ragbench.collect.items import systems_for

    return systems_for(item_kind, get_config(config).systems, config=config)
