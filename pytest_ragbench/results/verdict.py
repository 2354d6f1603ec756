"""The session's verdict, read from the results document: passed or failed, and why.

Reasons that fail the session: missed gates, regressions (with ``--ragbench-fail-on
regression``), failed / errored / lost items, the other lines of ``failures`` (e.g. a
judged metric with too many unscored items), an interrupted run, a non-zero pytest exit
status. Notes that do not: regressions found but not gated, gates not checked, judged
metrics left partly unscored. The verdict line also names the answers nothing checked
(:mod:`.coverage`): a pass vouches only for what could have failed it. Every key is read
defensively (an older or partial document gives fewer reasons, never an error).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_ragbench import served
from pytest_ragbench.metrics.registry import REGISTRY, UnknownMetricError
from pytest_ragbench.results import coverage
from pytest_ragbench.results.coverage import judge_configured

FAILING_STATUSES = ("failed", "error", "lost")


@dataclass(frozen=True)
class Reason:
    """One line of the verdict; ``anchor`` is the report.html section that explains it."""

    text: str
    anchor: str = ""
    failing: bool = True


@dataclass
class Verdict:
    """``passed`` and the reasons (failing first, then notes)."""

    passed: bool
    reasons: list[Reason] = field(default_factory=list)
    interrupted: bool = False
    # What a pass does not vouch for (results/coverage.py): answers nothing checked.
    not_checked: str | None = None

    @property
    def word(self) -> str:
        """``PASSED``, ``FAILED`` or ``INTERRUPTED``."""
        if self.interrupted:
            return "INTERRUPTED"
        return "PASSED" if self.passed else "FAILED"

    def summary(self) -> str:
        """One line: the word, the failing reasons, and what was not checked."""
        failing = [r.text for r in self.reasons if r.failing]
        line = self.word + (": " + "; ".join(failing) if failing else "")
        return f"{line} — {self.not_checked}" if self.not_checked else line


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``1 gate`` / ``2 gates``."""
    return f"{count} {singular if count == 1 else many or singular + 's'}"


def item_totals(document: dict[str, Any]) -> dict[str, int]:
    """Items per status over every kind."""
    totals: dict[str, int] = {}
    for entry in (document.get("counts") or {}).values():
        for status, count in ((entry or {}).get("all") or {}).items():
            if isinstance(count, int):
                totals[status] = totals.get(status, 0) + count
    return totals


def judged_metrics(document: dict[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """``(kind, metric, cell)`` of every metric computed by the judge."""
    found = []
    for kind, metrics in (document.get("metrics") or {}).items():
        for metric, cell in (metrics or {}).items():
            try:
                family = REGISTRY.parse(metric).spec.family
            except (UnknownMetricError, ValueError):
                continue
            if family == "judge" and isinstance(cell, Mapping):
                found.append((kind, metric, cell))
    return found


def interrupted_text(run: dict[str, Any]) -> str:
    """What the banner of a partial run says."""
    not_run = next((run[k] for k in ("items_not_run", "not_run") if isinstance(run.get(k), int)),
                   None)
    why = [str(run["interrupted_by"])] if run.get("interrupted_by") else []
    why += [f"{plural(not_run, 'item')} not run"] if not_run else []
    left = f" ({'; '.join(why)})" if why else ""
    return f"the run was interrupted{left}: the numbers cover the finished items only"


RESUME_HINT = ("continue it with --ragbench-resume: the finished items are kept, not run "
               "again, and the report then covers the whole run")


def resumed_text(run: dict[str, Any]) -> str | None:
    """``resumed run ...: N finished items kept, M run now`` for a continued run."""
    resumed = run.get("resumed")
    if not isinstance(resumed, dict):
        return None
    kept, now = resumed.get("kept_items"), resumed.get("run_now")
    sessions = resumed.get("sessions")
    return (f"resumed run {run.get('id') or '-'} (session {sessions}): {plural(kept or 0, 'item')} "
            f"kept from the interrupted session(s), {now or 0} run in this one")


def shard_text(run: dict[str, Any]) -> str | None:
    """What a shard's report, or a merge of shards, says about its scope."""
    shard = run.get("shard")
    if isinstance(shard, dict):
        return (f"shard {shard.get('index')} of {shard.get('total')}: gates are decided at "
                "merge (ragbench merge)")
    merged = run.get("merged")
    if isinstance(merged, dict):
        return (f"merged from {plural(len(merged.get('shards') or []), 'shard')} of "
                f"{merged.get('total')}")
    return None


def partial_baseline_text(baseline: dict[str, Any]) -> str:
    """The warning for a comparison against a run that was interrupted."""
    not_run = baseline.get("items_not_run")
    left = f", {plural(not_run, 'item')} not run" if isinstance(not_run, int) and not_run else ""
    return (f"the baseline {baseline.get('label') or baseline.get('path') or ''} is a partial "
            f"run (interrupted{left}): comparisons cover only the items it finished")


def is_interrupted(run: dict[str, Any]) -> bool:
    """True for a partial run (``run.status``; an older document: pytest's exit status 2)."""
    status = run.get("status")
    return status == "interrupted" if status else run.get("exit_status") == 2


def served_warnings(document: dict[str, Any]) -> list[str]:
    """``judge: asked for model 'a', the server answered as 'b' (3 of 3 calls)``, per role."""
    usage = document.get("usage")
    return served.mismatches(usage) if isinstance(usage, dict) else []


def decide(document: dict[str, Any]) -> Verdict:
    """The verdict of the session whose results document this is."""
    reasons: list[Reason] = []
    run = document.get("run") or {}
    exit_status = run.get("exit_status")
    interrupted = is_interrupted(run)
    if interrupted:
        reasons.append(Reason(interrupted_text(run), "verdict"))
    failures = [str(line) for line in document.get("failures") or []]
    gates = [g for g in document.get("gates") or [] if isinstance(g, Mapping)]
    missed = [g for g in gates if g.get("passed") is False]
    thresholds = sum(g.get("source") == "threshold" for g in missed)  # --ragbench-gate ci-lower
    if len(missed) > thresholds:
        reasons.append(Reason(f"{plural(len(missed) - thresholds, 'gate')} missed", "gates"))
    if thresholds:
        reasons.append(Reason(f"{plural(thresholds, 'threshold')} missed by the 95% CI bound",
                              "gates"))
    failing_regressions = [f for f in failures if f.startswith("regression ")]
    if failing_regressions:
        reasons.append(Reason(f"{plural(len(failing_regressions), 'regression')} "
                              "against the baseline", "gates"))
    totals = item_totals(document)
    bad = {s: totals.get(s, 0) for s in FAILING_STATUSES if totals.get(s, 0)}
    if bad:
        detail = ", ".join(f"{n} {s}" for s, n in bad.items())
        reasons.append(Reason(f"{sum(bad.values())} of {plural(totals.get('items', 0), 'item')} "
                              f"did not pass ({detail})", "items"))
    gate_lines = {f for f in failures if f.startswith(("gate ", "threshold "))}
    for line in failures:
        if line not in gate_lines and line not in failing_regressions:
            reasons.append(Reason(line, "verdict"))
    if isinstance(exit_status, int) and exit_status not in (0, 1, 2) and not interrupted:
        reasons.append(Reason(f"pytest exit status {exit_status}", "verdict"))
    elif exit_status == 1 and not bad and not failures:
        reasons.append(Reason("other tests of the session failed", "verdict"))
    failing = any(r.failing for r in reasons)
    reasons += _notes(document, gates, len(failing_regressions))
    return Verdict(passed=not failing, reasons=reasons, interrupted=interrupted,
                   not_checked=coverage.not_checked_text(coverage.of(document)))


def _notes(document: dict[str, Any], gates: list[Mapping[str, Any]],
           failing_regressions: int) -> list[Reason]:
    notes = []
    shard_line = shard_text(document.get("run") or {})
    if shard_line:
        notes.append(Reason(shard_line, "gates", failing=False))
    baseline = document.get("baseline")
    if isinstance(baseline, dict) and baseline.get("status") == "interrupted":
        notes.append(Reason(partial_baseline_text(baseline), "comparisons", failing=False))
    found = [r for r in document.get("regressions") or [] if isinstance(r, Mapping)]
    if found and not failing_regressions:
        notes.append(Reason(f"{plural(len(found), 'regression')} against the baseline, not "
                            "gated (--ragbench-fail-on regression makes them fail)", "gates",
                            failing=False))
    unchecked = [g for g in gates if g.get("passed") is None]
    if unchecked:
        notes.append(Reason(f"{plural(len(unchecked), 'gate')} not checked (no scored values "
                            "or n too small)", "gates", failing=False))
    if judge_configured(document):
        for kind, metric, cell in judged_metrics(document):
            unscored = cell.get("n_unscored") or 0
            if unscored:
                total = unscored + (cell.get("n") or 0)
                notes.append(Reason(f"{kind}.{metric}: {unscored} of {total} items unscored "
                                    "by the judge", "judge", failing=False))
    return notes
