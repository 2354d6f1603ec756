"""How a ``robust[...]`` record names its results (written by the runner, read by the report).

- ``metrics["<kind>.holds"]``: 1.0 when no example of the perturbation kind broke a
  bound, 0.0 when one did; ``unscored["<kind>.holds"]`` says why a kind was not checked.
- ``evidence["seed"]``: the seed the examples were drawn with (``--hypothesis-seed``).
- ``evidence["<kind> minimal question"]``, ``["<kind> change"]``, ``["<kind> broke"]``:
  the minimal failing perturbed question of a kind that broke, what was changed, and
  which bounds it missed.

No heavy imports: the report reads records with this module at session end.
"""

from __future__ import annotations

from typing import Any

HOLDS_SUFFIX = ".holds"
SEED = "seed"
MINIMAL = "minimal question"
CHANGE = "change"
BROKE = "broke"


def holds_metric(kind: str) -> str:
    """The metric of a perturbation kind: ``typos.holds``."""
    return f"{kind}{HOLDS_SUFFIX}"


def perturbation_of(metric: str) -> str | None:
    """The perturbation kind of a ``<kind>.holds`` metric, else None."""
    return metric[:-len(HOLDS_SUFFIX)] if metric.endswith(HOLDS_SUFFIX) else None


def key(kind: str, what: str) -> str:
    """The evidence key of one fact about a perturbation kind: ``typos minimal question``."""
    return f"{kind} {what}"


def failure_of(evidence: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The minimal failing example of ``kind`` recorded in ``evidence``, or None."""
    question = evidence.get(key(kind, MINIMAL))
    if question is None:
        return None
    return {"perturbation": kind, "minimal_question": str(question),
            "change": str(evidence.get(key(kind, CHANGE), "")),
            "broke": str(evidence.get(key(kind, BROKE), ""))}
