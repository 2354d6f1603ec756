"""The typed entries of the results document: a metric cell, a gate's verdict, a comparison.

Each is a frozen dataclass whose fields are the keys of its object in results.json, in
that order (``results.schema.json``: ``cell``, ``gate``, ``comparison``). A field listed in
``OPTIONAL`` is left out of :meth:`Entry.to_dict` while it is None (a gate decided by a
confidence sequence alone has ``sequential``; a McNemar comparison alone has
``discordant``).

An entry reads like the JSON object it becomes (``entry["mean"]``, ``entry.get("n")``):
the hook ``pytest_ragbench_report_sections`` and code written against results.json's
keys see one interface whether they hold the live document or a saved results.json.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

E = TypeVar("E", bound="Entry")


class Entry(Mapping[str, Any]):
    """Read access by results.json key, and the conversions to and from that object."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    def _present(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self)  # type: ignore[arg-type]
                if f.name not in self.OPTIONAL or getattr(self, f.name) is not None]

    def __getitem__(self, key: str) -> Any:
        if key not in self._present():  # a field's name only: never a method or a constant
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._present()

    def __iter__(self) -> Iterator[str]:
        return iter(self._present())

    def __len__(self) -> int:
        return len(self._present())

    def to_dict(self) -> dict[str, Any]:
        """The entry's object in results.json (nested entries converted too)."""
        return {name: _plain(getattr(self, name)) for name in self._present()}

    @classmethod
    def from_dict(cls: type[E], data: Mapping[str, Any]) -> E:
        """An entry read back from results.json; keys it does not know are ignored."""
        known = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in known})


def _plain(value: Any) -> Any:
    if isinstance(value, Entry):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class MetricStats(Entry):
    """One cell of the metrics table or of a breakdown: a metric over a set of items.

    ``ci_low``/``ci_high`` is the reported 95% interval (``ci_method``); ``ci_gate_low`` and
    ``ci_gate_high`` the bound a gate checks (:mod:`pytest_ragbench.stats.intervals`).
    ``systems`` holds the cell per system when several ran (metrics and breakdowns only).
    """

    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"systems"})

    n: int
    n_unscored: int
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_95: list[float] | None = None
    ci_method: str | None = None
    ci_note: str | None = None
    ci_gate_low: float | None = None
    ci_gate_high: float | None = None
    ci_gate_method: str | None = None
    n_clusters: int | None = None
    std: float | None = None
    threshold: float | None = None
    pass_rate: float | None = None
    pass_rate_ci_low: float | None = None
    pass_rate_ci_high: float | None = None
    direction: str = "higher"
    unscored_reasons: dict[str, int] = field(default_factory=dict)
    systems: dict[str, MetricStats] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricStats:
        entry = super().from_dict(data)
        if entry.systems is not None:
            entry = dataclasses.replace(entry, systems={
                s: cls.from_dict(v) for s, v in entry.systems.items()})
        return entry


@dataclass(frozen=True)
class GateVerdict(Entry):
    """One gate (or, with ``--ragbench-gate ci-lower``, one item threshold) on one cell.

    ``passed`` is None when the gate was not checked; ``value`` is what was compared with
    ``bound`` (the mean, the CI bound, the PPI bound or the confidence sequence's bound).
    """

    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"sequential"})

    gate: str
    source: str
    kind: str
    metric: str
    where: dict[str, str]
    system: str | None
    bound: float
    mode: str
    direction: str
    value: float | None
    method: str | None
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None
    n: int
    n_unscored: int
    min_n: int
    status: str
    passed: bool | None
    ppi: dict[str, Any] | None = None
    sequential: dict[str, Any] | None = None  # the confidence sequence that decided it


@dataclass(frozen=True)
class Comparison(Entry):
    """A paired comparison of one metric: A − B, its interval, test and Holm-adjusted p.

    ``name`` is ``a_vs_b`` (two systems) or ``<system>_vs_baseline``; ``better`` and
    ``worse`` are Holm-significant differences in the metric's ``direction``.
    """

    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"discordant"})

    name: str
    kind: str
    metric: str
    system: str | None
    test: str
    n: int
    n_clusters: int | None
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float | None
    ci_high: float | None
    ci_method: str | None
    ci_level: float
    ci_adjusted: bool
    p_value: float | None
    p_method: str | None
    p_resolution: float | None
    p_log10: float | None
    resamples: int | None
    effect_size: float | None
    effect_size_note: str | None
    direction: str
    discordant: int | None = None  # McNemar's discordant pairs
    p_holm: float | None = None
    significant: bool = False
    holm_family: int | None = None
    better: bool = False
    worse: bool = False
