"""Which component moved: per comparison and kind, did retrieval, answers or both change.

Each metric is a *retrieval* metric (what was retrieved: IR and set metrics, context
precision/recall, expected sources) or an *answer* metric (what was said: answer metrics,
faithfulness, SQL results, declines); timings and unknown metrics are neither. The
verdict of a stage comes from the paired comparisons already computed (Holm-adjusted),
e.g. ``vector: retrieval unchanged, answers worse (semantic_similarity −0.120, p = 0.003)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pytest_ragbench.metrics.registry import REGISTRY

Stage = Literal["retrieval", "answer"]
STAGES: tuple[Stage, ...] = ("retrieval", "answer")
LABELS = {"retrieval": "retrieval", "answer": "answers"}

# Metric families by stage (metrics/registry.py); the context family is split by what it reads.
_RETRIEVAL_FAMILIES = {"ir", "set", "retrieval"}
_ANSWER_FAMILIES = {"answer", "check", "grade", "context", "judge"}
_RETRIEVAL_CONTEXT = {"id_context_precision", "id_context_recall", "non_llm_context_precision",
                      "non_llm_context_recall", "lexical_context_recall", "context_precision",
                      "context_recall"}


def stage_of(metric: str) -> Stage | None:
    """``retrieval``, ``answer`` or None (timings, counts, robustness and unknown metrics)."""
    spec = REGISTRY.lookup(metric)
    if spec is None or spec.direction == "none":
        return None
    if spec.family in _RETRIEVAL_FAMILIES or spec.name in _RETRIEVAL_CONTEXT:
        return "retrieval"
    return "answer" if spec.family in _ANSWER_FAMILIES else None


@dataclass
class StageMove:
    """How one stage of one kind moved in one comparison."""

    stage: Stage
    compared: int = 0  # metrics of this stage that were compared
    worse: list[dict[str, Any]] = field(default_factory=list)
    better: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """``not compared``, ``unchanged``, ``worse``, ``better`` or ``mixed``."""
        if not self.compared:
            return "not compared"
        if self.worse and self.better:
            return "mixed"
        return "worse" if self.worse else "better" if self.better else "unchanged"


@dataclass
class KindMove:
    """Retrieval and answers of one kind in one comparison (``a_vs_b``)."""

    comparison: str
    kind: str
    stages: dict[Stage, StageMove]

    @property
    def moved(self) -> bool:
        """True when a stage changed significantly."""
        return any(s.worse or s.better for s in self.stages.values())

    def line(self) -> str:
        """One line: ``vector: retrieval unchanged, answers worse (...)``."""
        parts = []
        for stage in STAGES:
            move = self.stages[stage]
            if not move.compared:
                continue
            text = f"{LABELS[stage]} {move.verdict}"
            shown = [*move.worse, *move.better]
            if shown:
                text += " (" + "; ".join(_metric_delta(c) for c in shown) + ")"
            parts.append(text)
        return f"{self.kind}: {', '.join(parts) or 'no retrieval or answer metric compared'}"


def _metric_delta(c: dict[str, Any]) -> str:
    delta = c.get("delta")
    sign = "−" if isinstance(delta, int | float) and delta < 0 else "+"
    size = f"{abs(delta):.3g}" if isinstance(delta, int | float) else "?"
    p = c.get("p_holm")
    shown_p = f"{p:.2g}" if isinstance(p, int | float) else "?"
    return f"{c.get('metric')} {sign}{size}, p = {shown_p}"


def moves(comparisons: dict[str, Any]) -> list[KindMove]:
    """One :class:`KindMove` per comparison and kind of ``results.json``'s ``comparisons``."""
    out: list[KindMove] = []
    for name, kinds in (comparisons or {}).items():
        for kind, metrics in (kinds or {}).items():
            members = [{"metric": metric, **c} for metric, c in (metrics or {}).items()
                       if isinstance(c, dict)]
            out.append(_kind_move(name, kind, members))
    return out


def _kind_move(name: str, kind: str, comparisons: Iterable[dict[str, Any]]) -> KindMove:
    stages = {stage: StageMove(stage) for stage in STAGES}
    for c in comparisons:
        stage = stage_of(str(c["metric"]))
        if stage is None:
            continue
        move = stages[stage]
        move.compared += 1
        if c.get("worse"):
            move.worse.append(c)
        elif c.get("better"):
            move.better.append(c)
    return KindMove(name, kind, stages)


def lines(comparisons: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """``(comparison, [one line per kind])`` for the terminal and the page."""
    grouped: dict[str, list[str]] = {}
    for move in moves(comparisons):
        grouped.setdefault(move.comparison, []).append(move.line())
    return list(grouped.items())
