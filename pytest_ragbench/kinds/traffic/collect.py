"""``*.traffic.jsonl`` and ``*.otlp.jsonl`` files: one ``traffic[<stem>:<n>]`` per interaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragbench.collect.files import display_path, safe_label
from pytest_ragbench.collect.items import CaseItem, InvalidCaseItem
from pytest_ragbench.config.settings import get_config
from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.otlp import read_otlp
from pytest_ragbench.formats.traffic import read_traffic
from pytest_ragbench.kinds import registry
from pytest_ragbench.kinds.traffic.case import Redactor, traffic_case
from pytest_ragbench.stats.traffic import window_of

TRAFFIC_SUFFIX = ".traffic.jsonl"
OTLP_SUFFIX = ".otlp.jsonl"
KIND = "traffic"


def listed_files(config: pytest.Config) -> tuple[Path, ...]:
    """The files ini ``ragbench_traffic`` names as logged traffic, whatever their name."""
    return get_config(config).traffic_files


def traffic_stem(path: Path) -> str:
    """``app`` for ``app.traffic.jsonl`` and ``app.otlp.jsonl``."""
    name = path.name
    for suffix in (TRAFFIC_SUFFIX, OTLP_SUFFIX, ".jsonl"):
        if name.endswith(suffix):
            return safe_label(name[:-len(suffix)])
    return safe_label(path.stem)


class TrafficFile(pytest.File):
    """A file of logged interactions, read streaming; a bad interaction is one failing item."""

    holds_only_ragbench_items = True  # items.add_ragbench_marker

    def collect(self) -> Iterator[pytest.Item]:
        """Yield one item per interaction, in the file's order."""
        settings = get_config(self.config)
        stem = traffic_stem(self.path)
        shown = display_path(self.path, self.config)
        read = read_otlp if self.path.name.endswith(OTLP_SUFFIX) else read_traffic
        kind = registry(self.config).item_kinds[KIND]
        redact = Redactor(settings.redact)
        window = settings.window
        try:
            for entry in read(self.path, shown):
                if isinstance(entry, CaseError):
                    label = f"{stem}:line-{entry.line or 0}"
                    yield InvalidCaseItem.create(self, entry, KIND, label)
                    continue
                case = traffic_case(entry, stem, str(self.path),
                                    window_of(entry.timestamp, window), redact)  # type: ignore[arg-type]
                yield CaseItem.create(self, case, kind, None)
        except CaseError as exc:  # the file cannot be read at all
            yield InvalidCaseItem.create(self, exc, KIND, stem)
