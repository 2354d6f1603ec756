"""One metric vocabulary: names in thresholds, gates and judge labels checked at start-up.

A threshold or gate on a kind that does not exist, or on a metric its items never record
(``"vectr.source_hit@5" = 0.9``, ``"vector.source_hit5" = 0.9``), would never apply and
never say so. Each is a usage error when the session starts, naming where it was written
and the closest known name. The names come from the session's kinds
(:func:`pytest_ragbench.kinds.registry`), so a plugin's kind is checked like a built-in
one; what each metric means comes from :mod:`pytest_ragbench.metrics.registry`, and
``pytest --ragbench-metrics`` lists both.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from typing import Any

import pytest

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.config.thresholds import flatten
from pytest_ragbench.errors import ConfigError, did_you_mean
from pytest_ragbench.kinds import ANY_CASE_KIND, KindRegistry, registry
from pytest_ragbench.metrics.registry import REGISTRY
from pytest_ragbench.results.gates import parse_gates


def metric_problem(kind: str, metric: str, kinds: KindRegistry) -> str | None:
    """Why ``kind.metric`` names nothing an item records (None when it does)."""
    if kind not in kinds.item_kinds:
        return f"unknown kind {kind!r}{did_you_mean(kind, kinds.item_kinds, 'kinds')}"
    item_kind = kinds.item_kinds[kind]
    if not metric:
        return "expected 'kind.metric'"
    if item_kind.emits(metric):
        return None
    names = item_kind.metric_names()
    return (f"{kind} items do not record metric {metric!r}"
            f"{did_you_mean(metric, names, f'{kind} metrics')}")


def check_settings(settings: RagbenchConfig, kinds: KindRegistry) -> None:
    """Raise :class:`ConfigError` for a threshold or gate that names nothing recorded.

    Every file in play is checked with its own name (pyproject.toml, each ragbench.toml).
    """
    sources = [(settings.setting_files.get(f"thresholds:{name}"), {name: value})
               for name, value in flatten(settings.thresholds).items()]
    sources += [(str(f.path), f.thresholds) for f in settings.toml_files]
    for path, table in sources:
        for name in table:
            kind, _, metric = name.partition(".")
            problem = metric_problem(kind, metric, kinds)
            if problem is not None:
                raise ConfigError(f"threshold {name!r}{_in(path)}: {problem}")
    gate_sources: list[tuple[str | None, dict[str, float]]] = [
        (str(f.path), f.gates) for f in settings.toml_files if f.gates]
    gate_sources += [(None, settings.gates)]
    for path, table in gate_sources:
        try:
            parsed = parse_gates(table)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}" if path else str(exc)) from None
        for gate in parsed:
            problem = metric_problem(gate.kind, gate.metric, kinds)
            if problem is not None:
                where = path or settings.setting_files.get(f"gates:{gate.name}")
                raise ConfigError(f"gate {gate.name!r}{_in(where)}: {problem}")


def check_labels(labels: Any, kinds: KindRegistry) -> None:
    """Raise :class:`ConfigError` for a judge label naming an unknown kind or metric."""
    recorded = {name for kind in kinds.item_kinds.values() for name in kind.metric_names()}
    for label in getattr(labels, "labels", ()):
        if label.kind is not None:
            problem = metric_problem(label.kind, label.metric, kinds)
        elif any(kind.emits(label.metric) for kind in kinds.item_kinds.values()):
            problem = None
        else:
            problem = (f"no item records metric {label.metric!r}"
                       f"{did_you_mean(label.metric, recorded, 'metrics')}")
        if problem is not None:
            raise ConfigError(f"--ragbench-judge-labels {label.where}: {problem}")


def _in(path: str | None) -> str:
    """`` in <file>`` when the file is known."""
    return f" in {path}" if path else ""


# -- the listing ------------------------------------------------------------------------------


def show_metrics(config: pytest.Config) -> int:
    """Print every kind's metrics with range, direction, definition and default threshold."""
    try:
        kinds = registry(config)
    except ConfigError as exc:
        print(f"ERROR: ragbench: {exc}", file=sys.stderr)
        return int(pytest.ExitCode.USAGE_ERROR)
    for line in metric_lines(kinds):
        print(line)
    return int(pytest.ExitCode.OK)


def metric_lines(kinds: KindRegistry) -> list[str]:
    """The listing: per item kind, one row per metric it records."""
    lines = ["Metrics each kind records: name, range, better, default threshold, definition "
             "(metrics/registry.py; thresholds in [tool.ragbench.thresholds])."]
    for kind in kinds.item_kinds.values():
        reads = "any case kind" if kind.case_kind == ANY_CASE_KIND else f"{kind.case_kind} cases"
        lines += ["", f"{kind.name} ({kind.family}, {reads}): {kind.description}"]
        rows = []
        for name in kind.metric_names():
            spec = REGISTRY.lookup(name.replace("@k", "@1"))
            limit = kind.thresholds.get(name)
            rows.append([name, _range(spec), spec.direction if spec else "?",
                         "" if limit is None else _bound(spec, limit),
                         spec.description if spec else "(not registered)"])
        lines += _table(rows)
    return lines


def _range(spec: Any) -> str:
    if spec is None:
        return "?"
    high = "inf" if math.isinf(spec.high) else f"{spec.high:g}"
    return f"[{spec.low:g}, {high}]"


def _bound(spec: Any, limit: float) -> str:
    return f"{'<=' if spec is not None and spec.direction == 'lower' else '>='} {limit:g}"


def _table(rows: Iterable[list[str]]) -> list[str]:
    rows = list(rows)
    if not rows:
        return ["  (no metrics declared)"]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  " + row[-1] for row in rows]
