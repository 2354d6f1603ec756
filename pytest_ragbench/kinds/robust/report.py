"""The robustness section: per perturbation kind, the share of cases that hold, and the worst cases.

Built from ``robust[...]`` records alone (see :mod:`pytest_ragbench.robust.evidence` for
what they hold), in node-id order, so the numbers are the same with and without xdist.
A case *holds* for a perturbation kind when none of its perturbed questions broke a
bound. The share's 95% interval is the one every pass rate gets
(:func:`pytest_ragbench.stats.intervals.proportion_interval`: Wilson's score interval with
Brown, Cai & DasGupta's Poisson bounds near 0 and 1; none below 2 cases). Plain Wilson
covered a share of 0.97 over 5 cases 86% of the time (exactly), the modified one 99%.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_ragbench.config.settings import PERTURBATION_KINDS
from pytest_ragbench.render.text import percent, percent_interval
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.results.sections import ReportSection
from pytest_ragbench.robust import evidence as keys
from pytest_ragbench.stats.intervals import proportion_interval

KIND = "robust"
CONFIDENCE = 0.95
WORST_SHOWN = 10


def section(records: Sequence[ItemRecord], systems: Sequence[str]) -> dict[str, Any]:
    """``results.json["robustness"]``; empty when the run had no robustness items."""
    robust = sorted((r for r in records if r.kind == KIND), key=lambda r: r.nodeid)
    kinds = _kinds(robust)
    if not kinds:  # no robustness items, or none that ran (invalid cases)
        return {}
    perturbations: dict[str, Any] = {}
    for kind in kinds:
        entry = share(robust, kind)
        if len(systems) > 1:
            entry["systems"] = {s: share([r for r in robust if r.system == s], kind)
                                for s in systems}
        perturbations[kind] = entry
    failing = [case for r in robust if (case := _failing_case(r)) is not None]
    failing.sort(key=lambda c: (-len(c["failures"]), c["nodeid"]))
    return {"confidence": CONFIDENCE, "ci_method": "wilson", "items": len(robust),
            "perturbations": perturbations, "failing_cases": len(failing),
            "worst": failing[:WORST_SHOWN]}


def _kinds(records: Sequence[ItemRecord]) -> list[str]:
    """Perturbation kinds seen in the records, in the order of ``--ragbench-perturb``'s list."""
    found = {kind for r in records for name in (*r.metrics, *r.unscored)
             if (kind := keys.perturbation_of(name)) is not None}
    known = [k for k in PERTURBATION_KINDS if k in found]
    return known + sorted(found - set(known))


def share(records: Sequence[ItemRecord], kind: str) -> dict[str, Any]:
    """How many cases were checked for ``kind``, how many held, the share and its CI."""
    name = keys.holds_metric(kind)
    values = [float(r.metrics[name]) for r in records if isinstance(r.metrics.get(name),
                                                                     int | float)]
    reasons: dict[str, int] = {}
    for record in records:
        if name in record.unscored and name not in record.metrics:
            reason = str(record.unscored[name])
            reasons[reason] = reasons.get(reason, 0) + 1
    held = sum(v >= 1.0 for v in values)
    low, high = proportion_interval(held, len(values), CONFIDENCE)
    return {"cases": len(values), "held": held,
            "share": held / len(values) if values else None, "ci_low": low, "ci_high": high,
            "not_checked": sum(reasons.values()), "reasons": dict(sorted(reasons.items()))}


def _failing_case(record: ItemRecord) -> dict[str, Any] | None:
    """The case's minimal failing questions, one per perturbation kind that broke."""
    failures = [failure for name, value in sorted(record.metrics.items())
                if value == 0.0 and (kind := keys.perturbation_of(name)) is not None
                and (failure := keys.failure_of(record.evidence, kind)) is not None]
    if not failures:
        return None
    order = {k: i for i, k in enumerate(PERTURBATION_KINDS)}
    failures.sort(key=lambda f: order.get(f["perturbation"], len(order)))
    checked = sum(keys.perturbation_of(n) is not None for n in record.metrics)
    return {"nodeid": record.nodeid, "case": f"{record.case_kind}-{record.case_id}",
            "system": record.system, "question": record.evidence.get("question"),
            "seed": record.evidence.get(keys.SEED), "checked": checked, "failures": failures}


# -- rendering ---------------------------------------------------------------------------

TITLE = "robustness: share of cases whose perturbed questions keep every property"


def rows(part: dict[str, Any]) -> list[list[Any]]:
    """The table: perturbation kind (and system), cases checked, held, share, CI, not checked."""
    several = any("systems" in e for e in part.get("perturbations", {}).values())
    table: list[list[Any]] = [["perturbation", *(["system"] if several else []), "cases",
                               "held", "share", "95% CI (Wilson)", "not checked"]]
    for kind, entry in part.get("perturbations", {}).items():
        cells = entry.get("systems", {}) if several else {"": entry}
        for system, cell in cells.items():
            table.append([kind, *([system] if several else []), cell["cases"], cell["held"],
                          percent(cell["share"]), percent_interval(cell["ci_low"],
                                                                   cell["ci_high"]),
                          cell["not_checked"]])
    return table


def worst_lines(part: dict[str, Any]) -> list[str]:
    """The worst cases, each with its minimal failing question per broken perturbation kind."""
    shown = len(part["worst"])
    if not shown:
        return ["no case broke a property"]
    more = f", {shown} shown" if part["failing_cases"] > shown else ""
    out = [f"worst cases ({part['failing_cases']} failing{more}), with the minimal "
           "failing question (rerun one with --hypothesis-seed=<seed>):"]
    for case in part["worst"]:
        system = f" [{case['system']}]" if case.get("system") else ""
        out.append(f"  {case['case']}{system}: {len(case['failures'])} of {case['checked']} "
                   f"perturbation kinds broke (seed {case['seed']}): {case['nodeid']}")
        out += [f"    {f['perturbation']}: {f['minimal_question']!r} ({f['broke']}; "
                f"changed: {f['change']})" for f in case["failures"]]
    return out


def report_section(records: Sequence[ItemRecord], systems: Sequence[str]) -> ReportSection:
    """``results.json["robustness"]``, its table and its worst cases (empty without items)."""
    part = section(records, systems)
    if not part:
        return ReportSection(key="robustness", title=TITLE, data=part)
    return ReportSection(key="robustness", title=TITLE, data=part, table=rows(part),
                         text=worst_lines(part))
