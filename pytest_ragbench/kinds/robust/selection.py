"""Which cases get ``robust[<kind>-<id>]`` items (imported at collection: keep it light)."""

from __future__ import annotations

from typing import Any

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.errors import CaseError, short_repr

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


def robust_systems(case: Any, settings: RagbenchConfig, shown: str) -> tuple[str | None, ...]:
    """The robust kind's ``derives``: the systems to perturb the case on (none if not taken).

    A bad opt-out field raises :class:`CaseError` (one failing robust item).
    """
    if not enabled(settings) or case.kind not in ROBUST_CASE_KINDS or opted_out(case, shown):
        return ()
    return settings.systems or (None,)
