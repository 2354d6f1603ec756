"""Which component moved: per comparison and kind, did retrieval, answers or both change.

Each metric is a *retrieval* metric (what was retrieved: IR and set metrics, context
precision/recall, expected sources) or an *answer* metric (what was said: answer metrics,
faithfulness, SQL results, declines); timings and unknown metrics are neither. The
verdict of a stage comes from the paired comparisons already computed (Holm-adjusted),
e.g. ``vector: retrieval unchanged, answers worse (semantic_similarity −0.120, p = 0.003)``.
A difference that is not significant is named as such (``retrieval worse, not
significantly (source_hit@k −0.0588, p = 1)``), and a stage is called unchanged only when
every one of its metrics was compared: the ones that could not be are listed with why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    # compared but not significantly different, with a difference other than zero
    moved: list[dict[str, Any]] = field(default_factory=list)
    # metrics of this stage that could not be compared (results.json ``not_compared``)
    missing: list[dict[str, Any]] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """``not compared``, ``unchanged``, ``partly compared``, ``worse``, ``better``, ``mixed``.

        ``unchanged`` only when every metric of the stage was compared.
        """
        if not self.compared:
            return "not compared"
        if self.worse and self.better:
            return "mixed"
        if self.worse or self.better:
            return "worse" if self.worse else "better"
        return "partly compared" if self.missing else "unchanged"

    def text(self) -> str:
        """``retrieval worse (source_hit@k −0.5, p = 0.002)`` and what was not compared."""
        label = LABELS[self.stage]
        shown = [*self.worse, *self.better]
        if shown:
            text = f"{label} {self.verdict} (" + "; ".join(map(_metric_delta, shown)) + ")"
            adverse = [c for c in self.moved if _adverse(c)]  # a loss is named even then
            if adverse:
                text += ("; worse, not significantly ("
                         + "; ".join(map(_metric_delta, adverse)) + ")")
        elif not self.compared:
            text = f"{label} not compared"
        elif self.moved:  # a difference, not a significant one: said so, with its direction
            ways = {"worse" if _adverse(c) else "better" for c in self.moved}
            way = ways.pop() if len(ways) == 1 else "changed"
            text = (f"{label} {way}, not significantly ("
                    + "; ".join(map(_metric_delta, self.moved)) + ")")
        elif self.missing:
            text = f"{label}: no difference in the {self.compared} metric(s) compared"
        else:
            text = f"{label} unchanged"
        if self.missing:
            text += "; not compared: " + ", ".join(
                f"{c.get('metric')} ({c.get('reason')})" for c in self.missing)
        return text


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
        parts = [self.stages[stage].text() for stage in STAGES
                 if self.stages[stage].compared or self.stages[stage].missing]
        return f"{self.kind}: {', '.join(parts) or 'no retrieval or answer metric compared'}"


def _adverse(c: dict[str, Any]) -> bool:
    sign = {"higher": 1.0, "lower": -1.0}.get(str(c.get("direction")), 0.0)
    delta = c.get("delta")
    return isinstance(delta, int | float) and sign * delta < 0


def _metric_delta(c: dict[str, Any]) -> str:
    delta = c.get("delta")
    sign = "−" if isinstance(delta, int | float) and delta < 0 else "+"
    size = f"{abs(delta):.3g}" if isinstance(delta, int | float) else "?"
    p = c.get("p_holm")
    shown_p = f"{p:.2g}" if isinstance(p, int | float) else "?"
    return f"{c.get('metric')} {sign}{size}, p = {shown_p}"


def moves(comparisons: dict[str, Any], not_compared: Iterable[dict[str, Any]] = ()
          ) -> list[KindMove]:
    """One :class:`KindMove` per comparison and kind of ``results.json``'s ``comparisons``.

    ``not_compared``: results.json's list of the metrics that could not be compared.
    """
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for name, kinds in (comparisons or {}).items():
        for kind, metrics in (kinds or {}).items():
            grouped[(name, kind)] = [{"metric": metric, **c}
                                     for metric, c in (metrics or {}).items()
                                     if isinstance(c, Mapping)]
    missing: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in not_compared or ():
        if isinstance(entry, dict):
            key = (str(entry.get("name")), str(entry.get("kind")))
            missing.setdefault(key, []).append(entry)
            grouped.setdefault(key, [])
    return [_kind_move(name, kind, members, missing.get((name, kind), []))
            for (name, kind), members in grouped.items()]


def _kind_move(name: str, kind: str, comparisons: Iterable[dict[str, Any]],
               missing: Iterable[dict[str, Any]] = ()) -> KindMove:
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
        elif isinstance(c.get("delta"), int | float) and abs(c["delta"]) > 1e-12:
            move.moved.append(c)
    for entry in missing:
        stage = stage_of(str(entry.get("metric")))
        if stage is not None:
            stages[stage].missing.append(entry)
    return KindMove(name, kind, stages)


def lines(comparisons: dict[str, Any], not_compared: Iterable[dict[str, Any]] = ()
          ) -> list[tuple[str, list[str]]]:
    """``(comparison, [one line per kind])`` for the terminal and the page."""
    grouped: dict[str, list[str]] = {}
    for move in moves(comparisons, not_compared):
        grouped.setdefault(move.comparison, []).append(move.line())
    return list(grouped.items())
