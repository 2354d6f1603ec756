"""What a session's verdict covers: which checks could fail it, per kind.

A green verdict means only that nothing it checked failed. This module reads the results
document's items and gates and says, per kind, what was checked and by what truth:

- answers by *facts* (``fact_recall`` against the case's ``expected_facts``), by *a judge*
  (faithfulness, answer relevancy, a RAGCSV grade given by the judge), by *ground-truth
  data* (the system's SQL result or the data values its answer states) or by exact match
  with a reference answer (``exact_match``, ``numeric_match``);
- refusals (``declined`` / ``answered``), retrieval (the expected sources, IR metrics,
  memory recall) and the cases' own SQL ground truth.

A source *checks* an item when one of its metrics was scored there and can fail: an item
threshold that a value in the metric's range can miss (``"sql.correct" = 0`` cannot), or a
gate on the kind's metric. Scored with neither, it is only *recorded*. An answer that no
source scored is *not checked*: semantic similarity to a descriptive ground truth, token
overlap or ROUGE measure an answer but do not decide whether it is right (an answer with
similarity 0.03 passes every default threshold).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_ragbench.metrics.registry import REGISTRY

FACTS, JUDGE, DATA, EXACT = "facts", "judge", "data", "exact"
REFUSALS, RETRIEVAL, GROUND_TRUTH = "refusals", "retrieval", "ground truth"
ANSWER_SOURCES = (FACTS, JUDGE, DATA, EXACT)
_BY_METRIC = {"fact_recall": FACTS, "faithfulness": JUDGE, "answer_relevancy": JUDGE,
              "execution_match": DATA, "correct": DATA, "value_recall": DATA,
              "exact_match": EXACT, "numeric_match": EXACT,
              "declined": REFUSALS, "answered": REFUSALS,
              "match": GROUND_TRUTH, "data_match": GROUND_TRUTH,
              # judged, but of the contexts, not of the answer
              "context_precision": RETRIEVAL, "context_recall": RETRIEVAL,
              "judge_relevance": RETRIEVAL}
_RETRIEVAL_FAMILIES = ("ir", "set", "retrieval")
# Metrics a kind records about a system's answer: its items need an answer check.
_ANSWER_METRICS = frozenset({
    "semantic_similarity", "token_f1", "rouge", "exact_match", "numeric_match",
    "keyword_overlap",
    "lexical_faithfulness", "accuracy", "fact_recall", "value_recall", "execution_match",
    "correct", "faithfulness", "answer_relevancy"})
_SOURCE_TEXT = {FACTS: "answers by facts", JUDGE: "answers by a judge",
                DATA: "answers by ground-truth data",
                EXACT: "answers by exact match with the reference", REFUSALS: "refusals",
                RETRIEVAL: "retrieval", GROUND_TRUTH: "the cases' SQL ground truth"}
_ORDER = (FACTS, JUDGE, DATA, EXACT, REFUSALS, RETRIEVAL, GROUND_TRUTH)
HOW_ITEM, HOW_MEAN, HOW_RECORDED = "item", "mean", "recorded"
_STRENGTH = (HOW_ITEM, HOW_MEAN, HOW_RECORDED)  # the first a source reaches is how it checks
RECOMMENDATION = ("no judge configured: give cases expected_facts (strings a correct answer "
                  "states) or a judge (--ragbench-judge-url) to check their answers")


def judge_configured(document: dict[str, Any]) -> bool:
    """True when the session had a judge (a judge URL, or a judge named as a component)."""
    config = document.get("config") or {}
    if config.get("judge_url"):
        return True
    judge = str((document.get("components") or {}).get("judge") or "")
    return bool(judge) and not judge.lower().startswith("none")


def source_of(metric: str, item: dict[str, Any]) -> str | None:
    """Which truth a scored metric of this item checks (None: it decides nothing)."""
    if metric == "accuracy":  # a RAGCSV grade: the judge's, else semantic similarity x 100
        return JUDGE if "accuracy" in ((item.get("judge") or {}).get("metrics") or ()) else None
    if metric in _BY_METRIC:
        return _BY_METRIC[metric]
    spec = REGISTRY.lookup(metric)
    return RETRIEVAL if spec is not None and spec.family in _RETRIEVAL_FAMILIES else None


def can_fail(metric: str, threshold: Any) -> bool:
    """True when some value in the metric's range misses ``threshold``."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
            or not math.isfinite(threshold):
        return False
    spec = REGISTRY.lookup(metric)
    if spec is None:
        return True
    if spec.direction == "lower":
        return threshold < spec.high
    return threshold > spec.low


@dataclass
class KindCoverage:
    """One kind: items, and per source how many items it checked and how."""

    items: int = 0
    answer_items: int = 0  # items whose answer needs a check (not decline cases)
    by_item: dict[str, int] = field(default_factory=dict)  # a threshold could fail the item
    by_mean: dict[str, int] = field(default_factory=dict)  # only a gate on the mean
    recorded: dict[str, int] = field(default_factory=dict)  # scored, nothing could fail
    answers_unchecked: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``results.json["coverage"]["kinds"][kind]``)."""
        checked = {s: {"items": self.by_item.get(s, 0) + self.by_mean.get(s, 0),
                       "how": HOW_ITEM if self.by_item.get(s) else HOW_MEAN}
                   for s in _ORDER if self.by_item.get(s) or self.by_mean.get(s)}
        return {"items": self.items, "answer_items": self.answer_items, "checked": checked,
                "recorded": {s: self.recorded[s] for s in _ORDER if self.recorded.get(s)},
                "answers_not_checked": self.answers_unchecked}


def _gated(document: dict[str, Any]) -> set[tuple[str, str]]:
    """``(kind, metric)`` of every gate that was checked (``x@k`` as written)."""
    return {(str(g.get("kind")), str(g.get("metric"))) for g in document.get("gates") or []
            if isinstance(g, Mapping) and g.get("passed") is not None}


def _is_gated(kind: str, metric: str, gated: set[tuple[str, str]]) -> bool:
    if (kind, metric) in gated:
        return True
    stem, at, k = metric.rpartition("@")
    return bool(at) and k.isdigit() and (kind, f"{stem}@k") in gated


def _item_sources(item: dict[str, Any], gated: set[tuple[str, str]]) -> dict[str, str]:
    """Per source, how it checked this item: item threshold, gate on the mean, or recorded."""
    kind = str(item.get("kind"))
    limits = item.get("thresholds") or {}
    found: dict[str, str] = {}
    for metric, value in (item.get("metrics") or {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        source = source_of(metric, item)
        if source is None:
            continue
        if can_fail(metric, limits.get(metric)):
            how = HOW_ITEM
        elif _is_gated(kind, metric, gated):
            how = HOW_MEAN
        else:
            how = HOW_RECORDED
        if source not in found or _STRENGTH.index(how) < _STRENGTH.index(found[source]):
            found[source] = how
    return found


def _asks_no_system(kind: str) -> bool:
    """True for a built-in kind whose items test a component, not a system's answer."""
    # lazy: the kinds registry, only for a report with items
    from pytest_ragbench.kinds import NO_SYSTEM, builtin_registry

    found = builtin_registry().item_kinds.get(kind)
    return found is not None and found.answers == NO_SYSTEM


def section(document: dict[str, Any]) -> dict[str, Any]:
    """``results.json["coverage"]``: per kind what was checked, and whether a judge was there."""
    gated = _gated(document)
    kinds: dict[str, KindCoverage] = {}
    for item in document.get("items") or []:
        if not isinstance(item, dict):
            continue
        names = {*(item.get("metrics") or {}), *(item.get("unscored") or {})}
        if not names:
            continue  # an item that errored or was lost: the counts say so
        entry = kinds.setdefault(str(item.get("kind")), KindCoverage())
        entry.items += 1
        sources = _item_sources(item, gated)
        for source, how in sources.items():
            bucket = {HOW_ITEM: entry.by_item, HOW_MEAN: entry.by_mean,
                      HOW_RECORDED: entry.recorded}[how]
            bucket[source] = bucket.get(source, 0) + 1
        # a refusal has no facts; an item that asks no system has no answer (a memory
        # scenario's keyword_overlap is of the query's keywords in the memories retrieved)
        if names & _ANSWER_METRICS and "declined" not in names \
                and not _asks_no_system(str(item.get("kind"))):
            entry.answer_items += 1
            checked = [s for s in ANSWER_SOURCES if sources.get(s) in (HOW_ITEM, HOW_MEAN)]
            if not checked and not any(s in sources for s in ANSWER_SOURCES):
                entry.answers_unchecked += 1
    return {"judge_configured": judge_configured(document),
            "kinds": {kind: kinds[kind].as_dict() for kind in sorted(kinds)}}


# -- the line the terminal and report.html open with ---------------------------------------


def of(document: dict[str, Any]) -> dict[str, Any]:
    """The document's coverage (computed from its items for a document written without one)."""
    found = document.get("coverage")
    return found if isinstance(found, dict) else section(document)


def _kind_text(kind: str, items: int, total: int, how: str | None = None) -> str:
    shown = kind if items >= total else f"{kind} {items}/{total}"
    return f"{shown} on the mean" if how == HOW_MEAN else shown


def checked_text(cover: dict[str, Any]) -> str:
    """``answers by facts (vector 30/45); retrieval (vector, beir); ...`` ('' when nothing)."""
    kinds = cover.get("kinds") or {}
    parts = []
    for source in _ORDER:
        named = [_kind_text(k, e["checked"][source]["items"], _total(e, source),
                            e["checked"][source]["how"])
                 for k, e in kinds.items() if source in (e.get("checked") or {})]
        if named:
            parts.append(f"{_SOURCE_TEXT[source]} ({', '.join(named)})")
    return "; ".join(parts)


def _total(entry: dict[str, Any], source: str) -> int:
    """What a source's item count is out of: answerable items for answer checks."""
    if source in ANSWER_SOURCES and entry.get("answer_items"):
        return int(entry["answer_items"])
    return int(entry.get("items") or 0)


def not_checked_text(cover: dict[str, Any]) -> str | None:
    """``answer correctness not checked: no judge configured, no expected_facts (ragas, ...)``."""
    kinds = cover.get("kinds") or {}
    named = [_kind_text(k, e["answers_not_checked"], int(e.get("answer_items") or 0))
             for k, e in kinds.items() if e.get("answers_not_checked")]
    if not named:
        return None
    why = "no expected_facts" if cover.get("judge_configured") else \
        "no judge configured, no expected_facts"
    return (f"answer correctness not checked: {why} ({', '.join(named)}: similarity to the "
            "reference at most)")


def recorded_text(cover: dict[str, Any]) -> str | None:
    """``recorded, not gated: answers by a judge (vector)`` for sources nothing could fail on."""
    kinds = cover.get("kinds") or {}
    parts = []
    for source in ANSWER_SOURCES:
        named = [_kind_text(k, e["recorded"][source], _total(e, source))
                 for k, e in kinds.items()
                 if (e.get("recorded") or {}).get(source) and source not in e.get("checked", {})]
        if named:
            parts.append(f"{_SOURCE_TEXT[source]} ({', '.join(named)})")
    return "recorded, no threshold or gate: " + "; ".join(parts) if parts else None


def line(document: dict[str, Any]) -> str | None:
    """One line: what was checked, then what was not (None for a session with no items)."""
    cover = of(document)
    if not cover.get("kinds"):
        return None
    parts = [f"checked: {checked_text(cover) or 'nothing that can fail'}"]
    parts += [text for text in (recorded_text(cover), not_checked_text(cover)) if text]
    return " · ".join(parts)


def recommendation(document: dict[str, Any]) -> str | None:
    """The one-line advice when answers went unchecked for want of a judge."""
    cover = of(document)
    if cover.get("judge_configured"):
        return None
    if not any(e.get("answers_not_checked") for e in (cover.get("kinds") or {}).values()):
        return None
    return RECOMMENDATION
