"""Which cases get ``robust[<kind>-<id>]`` items (imported at collection: keep it light)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_ragbench.collect.items import CaseItem, InvalidCaseItem
from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.errors import CaseError, short_repr
from pytest_ragbench.kinds import registry

ROBUST_CASE_KINDS = ("vector", "hybrid", "ragas", "beir")
OPT_OUT_FIELD = "robustness"  # a case field: `robustness: false` opts the case out
OPT_OUT_TAG = "no-robustness"


def enabled(settings: RagbenchConfig) -> bool:
    """True when this session collects robustness items."""
    return settings.evaluate and settings.robustness


def opted_out(case: Any, shown: str) -> bool:
    """True when the case opts out (``robustness: false`` or the tag ``no-robustness``).

    A ``robustness`` value that is not true/false raises CaseError naming the field.
    """
    extra = getattr(case, "extra", None) or {}
    value = extra.get(OPT_OUT_FIELD, True)
    if not isinstance(value, bool):
        raise CaseError(f"must be true or false, got {short_repr(value)}", file=shown,
                        line=case.line, field=OPT_OUT_FIELD)
    return value is False or OPT_OUT_TAG in (getattr(case, "tags", ()) or ())


def robust_items(parent: pytest.Collector, case: Any, settings: RagbenchConfig,
                 shown: str) -> list[pytest.Item]:
    """The robustness items of one case (one per system), or a failing item for a bad opt-out."""
    if not enabled(settings) or case.kind not in ROBUST_CASE_KINDS:
        return []

    try:
        if opted_out(case, shown):
            return []
    except CaseError as exc:
        return [InvalidCaseItem.create(parent, exc, "robust", f"{case.kind}-{case.id}")]
    systems: tuple[str | None, ...] = settings.systems or (None,)
    kind = registry(parent.config).item_kinds["robust"]
    return [CaseItem.create(parent, case, kind, system) for system in systems]
