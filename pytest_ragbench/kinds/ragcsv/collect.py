"""The collector of RAGCSV files: one ``ragcsv[<file-stem>:<row>]`` item per row."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragbench.cases.model import RagcsvCase, RagcsvFragment
from pytest_ragbench.collect.files import (
    RAGCSV_SUFFIX,
    display_path,
    kind_systems,
    relocate,
    safe_label,
)
from pytest_ragbench.collect.items import CaseItem, InvalidCaseItem
from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.ragcsv import read_ragcsv
from pytest_ragbench.kinds import registry

KIND = "ragcsv"


def named_ragcsv(path: Path) -> bool:
    """True for a file named ``*.ragcsv.csv`` (any other CSV is one only when configured)."""
    return path.name.endswith(RAGCSV_SUFFIX)


def ragcsv_stem(path: Path) -> str:
    """``nba_qa`` for ``nba_qa.ragcsv.csv`` (and for ``nba_qa.csv``)."""
    return safe_label(path.name.removesuffix(".csv").removesuffix(".ragcsv"))


class RagcsvFile(pytest.File):
    """A RAGCSV file: one ``ragcsv[<file-stem>:<row>]`` item per row."""

    holds_only_ragbench_items = True  # items.add_ragbench_marker

    def collect(self) -> Iterator[pytest.Item]:
        """Yield one item per readable row and one failing item per unreadable row."""
        stem = ragcsv_stem(self.path)
        shown = display_path(self.path, self.config)
        try:
            data = read_ragcsv(self.path)
        except CaseError as exc:
            yield InvalidCaseItem.create(self, relocate(exc, shown), KIND, stem)
            return
        kind = registry(self.config).item_kinds[KIND]
        entries: list[tuple[int, pytest.Item]] = []
        for row in data.rows:
            case = RagcsvCase(
                id=f"{stem}:{row.row}", kind=KIND, file=str(self.path), line=row.line,
                question=row.question, expected=row.expected, row=row.row,
                fragments=tuple(RagcsvFragment(page_content=f.page_content, title=f.title)
                                for f in row.fragments), expected_facts=row.expected_facts)
            entries += [(row.line, CaseItem.create(self, case, kind, system))
                        for system in kind_systems(self.config, kind)]
        for index, error in enumerate(data.errors):
            row_number = data.row_of(index)
            label = f"{stem}:{row_number}" if row_number else f"{stem}:line-{error.line or 0}"
            entries.append((error.line or 0, InvalidCaseItem.create(
                self, relocate(error, shown), KIND, label)))
        for _, item in sorted(entries, key=lambda entry: entry[0]):
            yield item
