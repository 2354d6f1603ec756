"""Per-item results, JSON-safe so that they travel on test reports to the xdist controller."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from pytest_ragbench.redact import scrub_record

# Outcomes an item can end with; "warning" passes but is counted, "lost" is an item
# whose worker died before it reported.
STATUSES = ("passed", "failed", "warning", "error", "skipped", "lost")
REPORT_ATTRIBUTE = "ragbench"


@dataclass(frozen=True)
class ItemRecord:
    """Everything the report needs about one item, and nothing that is not JSON."""

    nodeid: str
    kind: str
    case_kind: str
    case_id: str
    file: str
    line: int
    status: str
    system: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    unscored: dict[str, str] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    duration: float = 0.0
    error: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    # The case's human labels per metric (judge calibration, results/calibration.py).
    human: dict[str, float] = field(default_factory=dict)
    system_independent: bool = False  # see Outcome.system_independent
    # Judged metrics, their samples and inconclusive verdicts (metrics/repeated.py).
    judge: dict[str, Any] = field(default_factory=dict)
    # What the system answered, one trace per call (systems/trace.py), for the drill-down.
    answers: list[dict[str, Any]] = field(default_factory=list)
    # The kind's one line on what went wrong (Outcome.summary), shown first in the report.
    summary: str | None = None
    # The k of the source metrics and the ranked source names (Outcome.retrieval).
    retrieval: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when the item passed (a warning still passes)."""
        return self.status in ("passed", "warning")

    @property
    def category(self) -> str | None:
        """The case's category, if any."""
        value = self.fields.get("category")
        return None if value is None else str(value)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe mapping (non-finite floats become unscored, never NaN), secrets masked.

        Built field by field rather than with ``dataclasses.asdict`` (which deep-copies
        first): it runs twice for every item, once on the worker and once in the report.
        Every record leaves its process through here (report attribute, journal, report
        files), so this is where what a system or model said is scrubbed (redact.py).
        """
        made = self.__dict__.get(_MADE_FROM)
        if made is not None:
            return dict(made)
        data = scrub_record({name: json_safe(getattr(self, name)) for name in _RECORD_FIELDS})
        data["passed"] = self.passed
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemRecord:
        """Rebuild a record from :meth:`to_dict` output (unknown keys ignored).

        A complete :meth:`to_dict` mapping (what a report carries) is kept, and
        :meth:`to_dict` returns a copy of it: it is JSON-safe already, and its values are
        the record's own.
        """
        record = cls(**{k: v for k, v in data.items() if k in _RECORD_FIELD_SET})
        if data.keys() == _DICT_KEYS and data["passed"] == record.passed:
            object.__setattr__(record, _MADE_FROM, data)
        return record


class ItemIdentity(NamedTuple):
    """Who a ragbench item is, as the item was made (collect/items.py).

    What the xdist controller knows of an item before its record arrives (run/collected.py):
    its kind and system are never read back from its node id.
    """

    kind: str
    system: str | None
    case_kind: str
    case_id: str
    file: str
    line: int

    def lost(self, nodeid: str, message: str) -> ItemRecord:
        """The record of this item when its worker died before it reported."""
        return ItemRecord(nodeid=nodeid, kind=self.kind, case_kind=self.case_kind,
                          case_id=self.case_id, file=self.file, line=self.line, status="lost",
                          system=self.system, error=message[:500])


_RECORD_FIELDS = tuple(f.name for f in fields(ItemRecord))
_RECORD_FIELD_SET = frozenset(_RECORD_FIELDS)
_DICT_KEYS = {*_RECORD_FIELDS, "passed"}
_MADE_FROM = "_made_from"  # not a field: equality and repr ignore it


def json_safe(value: Any) -> Any:
    """Convert tuples, sets, paths and other objects to JSON types; NaN/inf become None.

    A value that is JSON-safe already is returned as it is, not copied.
    """
    if _is_safe(value):
        return value
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {k if type(k) is str else str(k): json_safe(v) for k, v in value.items()}
    if kind is list:
        return [json_safe(v) for v in value]
    return _json_safe_other(value)


def _is_safe(value: Any) -> bool:
    """True when ``value`` is made of JSON types only (str keys, finite floats)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    # loops, not all(<generator>): this runs for every value of every record
    if kind is dict:
        for key, item in value.items():  # noqa: SIM110
            if type(key) is not str or not _is_safe(item):
                return False
        return True
    if kind is list:
        for item in value:  # noqa: SIM110
            if not _is_safe(item):
                return False
        return True
    return False


def _json_safe_other(value: Any) -> Any:
    if isinstance(value, Mapping):  # a dict subclass, or an entry of results/entries.py
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return json_safe(value.item())
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return json_safe(value.to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe(dataclasses.asdict(value))
    return str(value)
