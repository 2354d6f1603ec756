"""Calibration of metrics against people: agreement, bias and prediction-powered intervals.

Human labels come from ``--ragbench-judge-labels`` (:mod:`pytest_ragbench.cases.labels`)
and from the cases' ``human: {metric: score}`` fields, which travel on the item records.
A label applies to every item of its case id (narrowed by its ``kind`` and ``system``)
that recorded its metric; several labels of one item and metric are averaged. Labels
that match no item are reported with the reason, never dropped silently.

For every kind × metric with labels, ``judge_calibration[kind][metric]`` compares the
metric's scores (a judge's, or an offline proxy's) with the people's on the labeled items
and gives the prediction-powered estimate of the human mean over all scored items
(PPI++, :func:`pytest_ragbench.stats.ppi_mean_ci`): the number to quote. With
``--ragbench-gate ci-lower`` a gate on the metric checks its bound valid at every label
count, ``ppi_gate_low``/``ppi_gate_high`` (results/gates.py).

Labels picked by ``ragbench label --next N`` carry their inclusion probability ``pi``: the
items were drawn with unequal probabilities (more where the judge is unsure), so the
estimate reweights each label by 1/pi (active inference, Zrnic & Candès 2024,
:func:`pytest_ragbench.stats.active.active_mean_ci`; ``ppi_method`` "active++").
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ragbench.cases.labels import Label, LabelFile
from pytest_ragbench.render.text import interval, num, signed, table
from pytest_ragbench.results.aggregate import CONFIDENCE, metric_range, scored_value
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.stats import core as stats
from pytest_ragbench.stats import intervals
from pytest_ragbench.stats.active import active_mean_ci

MAX_LEVELS = 11  # at most this many distinct grades (0-10, 1-5, 0/1) count as ordinal
EXAMPLES = 5  # unmatched labels shown by name
MAX_ERROR_LINES = 10  # bad label lines listed among the session's failures


@dataclass(frozen=True)
class Unmatched:
    """A label that labels no item of this run, and why."""

    where: str
    case_id: str
    metric: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """Return a JSON-safe dict."""
        return {"where": self.where, "id": self.case_id, "metric": self.metric,
                "reason": self.reason}


@dataclass
class Matching:
    """Labels matched to items: ``human[nodeid][metric]`` is the people's score."""

    human: dict[str, dict[str, float]] = field(default_factory=dict)
    # ``pi[nodeid][metric]``: the inclusion probability a label file line gave the item
    pi: dict[str, dict[str, float]] = field(default_factory=dict)
    unmatched: list[Unmatched] = field(default_factory=list)
    file_labels: int = 0  # label-file lines that labeled at least one item
    case_labels: int = 0  # (case, metric) labels from case files that did
    several: int = 0  # (item, metric) pairs with more than one label, averaged


def _metrics_of(record: ItemRecord) -> set[str]:
    return set(record.metrics) | set(record.unscored)


def match(records: Sequence[ItemRecord], labels: Iterable[Label]) -> Matching:
    """Attach the label file's and the cases' labels to the items they label."""
    by_id: dict[str, list[ItemRecord]] = defaultdict(list)
    for record in records:
        by_id[record.case_id].append(record)
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    result = Matching()
    for label in labels:
        found = [r for r in by_id.get(label.case_id, [])
                 if (label.kind is None or r.kind == label.kind)
                 and (label.system is None or r.system == label.system)]
        chosen = [r for r in found if label.metric in _metrics_of(r)]
        if not chosen:
            result.unmatched.append(Unmatched(label.where, label.case_id, label.metric,
                                              _reason(label, by_id.get(label.case_id, []),
                                                      found)))
            continue
        result.file_labels += 1
        for record in chosen:
            scores[record.nodeid][label.metric].append(label.score)
            if label.pi is not None:
                result.pi.setdefault(record.nodeid, {})[label.metric] = label.pi
    used: set[tuple[str, str, str]] = set()
    pending: dict[tuple[str, str, str], str] = {}
    for record in records:
        for metric, score in record.human.items():
            key = (record.file, record.case_id, metric)
            if metric in _metrics_of(record):
                scores[record.nodeid][metric].append(float(score))
                used.add(key)
            else:
                pending.setdefault(key, f"{record.file}:{record.line}")
    for key, where in pending.items():
        if key not in used:  # no item of the case (e.g. its robust or verification one) has it
            names = sorted(set().union(*(_metrics_of(r) for r in by_id[key[1]]
                                         if r.file == key[0])))
            result.unmatched.append(Unmatched(where, key[1], key[2],
                                              _no_metric(key[2], names)))
    result.case_labels = len(used)
    for nodeid, by_metric in scores.items():
        result.human[nodeid] = {m: sum(v) / len(v) for m, v in by_metric.items()}
        result.several += sum(len(v) > 1 for v in by_metric.values())
    return result


def _reason(label: Label, same_id: list[ItemRecord], found: list[ItemRecord]) -> str:
    if not same_id:
        return f"no item with id {label.case_id!r} in this run"
    if not found:
        if label.kind is not None and all(r.kind != label.kind for r in same_id):
            kinds = ", ".join(sorted({r.kind for r in same_id}))
            return f"no {label.kind} item with this id (its items: {kinds})"
        systems = ", ".join(sorted({r.system or "(default)" for r in same_id}))
        return f"no item of system {label.system!r} with this id (its systems: {systems})"
    if not any(_metrics_of(r) for r in found):  # the item failed before it scored anything
        statuses = ", ".join(sorted({r.status for r in found}))
        return f"its items recorded no metric (status: {statuses})"
    return _no_metric(label.metric, sorted(set().union(*(_metrics_of(r) for r in found))))


def _no_metric(metric: str, names: list[str]) -> str:
    close = difflib.get_close_matches(metric, names, n=1, cutoff=0.75)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"its items have no metric {metric!r}{hint}"


# ---------------------------------------------------------------- statistics of one cell


def scale_of(values: Iterable[float]) -> str:
    """``binary`` (0/1), ``ordinal`` (<= 11 grades, whole or tenths) or ``continuous``."""
    distinct = set(values)
    on_grid = all(abs(v * 10 - round(v * 10)) < 1e-9 for v in distinct)
    if len(distinct) <= MAX_LEVELS and on_grid:
        return "binary" if distinct <= {0.0, 1.0} else "ordinal"
    return "continuous"


def cohen_kappa(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cohen's (unweighted) kappa of two raters' grades; None when chance agreement is 1."""
    n = len(a)
    if n == 0:
        return None
    left = [round(x, 9) for x in a]
    right = [round(x, 9) for x in b]
    observed = sum(x == y for x, y in zip(left, right, strict=True)) / n
    count_a, count_b = Counter(left), Counter(right)
    expected = sum(count_a[c] * count_b[c] for c in count_a) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rho (None with fewer than 2 pairs or a constant side)."""
    import math

    from scipy import stats

    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    rho = float(stats.spearmanr(a, b).statistic)
    return rho if math.isfinite(rho) else None


def calibrate(records: Iterable[ItemRecord], metric: str,
              human: dict[str, dict[str, float]],
              pi: dict[str, dict[str, float]] | None = None) -> dict[str, Any] | None:
    """The calibration entry of ``metric`` over ``records`` (None when none is labeled).

    ``judge_mean`` is the metric's mean over every scored item, ``human_mean`` the
    people's mean over the labeled items that were scored, ``bias`` the mean of
    metric − human over those, and ``ppi_*`` the prediction-powered (PPI++) estimate of
    the human mean over all scored items with its 95% interval, stratified by category
    when every category has at least two labeled items (:func:`ppi_section`). A labeled
    item whose metric went unscored counts in ``n_labeled_unscored`` and nowhere else.

    When every labeled item has an inclusion probability in ``pi`` (``pi[nodeid][metric]``,
    from labels picked by ``ragbench label``) the ``ppi_*`` fields are the active-inference
    estimate instead (:func:`active_section`); when only some have one, the PPI++ estimate
    is given with a note that it assumes uniformly picked labels.
    """
    judged: list[tuple[float, str | None]] = []
    pairs: list[tuple[float, float, str | None]] = []
    weights: list[float | None] = []
    labeled_unscored = 0
    for record in records:
        value = scored_value(record, metric)
        person = human.get(record.nodeid, {}).get(metric)
        if value is not None:
            judged.append((value, record.category))
        if person is not None:
            if value is None:
                labeled_unscored += 1
            else:
                pairs.append((value, person, record.category))
                weights.append((pi or {}).get(record.nodeid, {}).get(metric))
    if not pairs and not labeled_unscored:
        return None
    entry: dict[str, Any] = dict.fromkeys((
        "judge_mean", "human_mean", "human_ci_low", "human_ci_high", "scale", "agreement",
        "agreement_method", "kappa", "bias", "bias_ci_low", "bias_ci_high", "ppi_mean",
        "ppi_ci_low", "ppi_ci_high", "ppi_se", "ppi_df", "ppi_method", "ppi_lambda",
        "ppi_strata", "ppi_gate_low", "ppi_gate_high", "ppi_gate_method"))
    entry.update(n_labeled=len(pairs), n_judged=len(judged),
                 n_labeled_unscored=labeled_unscored, confidence=CONFIDENCE, note=None)
    if judged:
        entry["judge_mean"] = sum(v for v, _ in judged) / len(judged)
    if not pairs:
        entry["note"] = "no labeled item was scored"
        return entry
    judge = [j for j, _, _ in pairs]
    people = [h for _, h, _ in pairs]
    scale = scale_of(judge + people)
    entry["scale"] = scale
    if scale == "continuous":
        entry.update(agreement=spearman(judge, people), agreement_method="spearman")
    else:
        same = sum(abs(j - h) < 1e-9 for j, h, _ in pairs) / len(pairs)
        entry.update(agreement=same, agreement_method="exact",
                     kappa=cohen_kappa(judge, people))
    entry["human_mean"] = sum(people) / len(people)
    entry["bias"] = sum(j - h for j, h, _ in pairs) / len(pairs)
    if len(pairs) < 2:
        entry["note"] = "intervals need at least 2 labeled items"
        return entry
    person_ci = stats.t_ci(people, CONFIDENCE)
    bias_ci = stats.t_ci([j - h for j, h, _ in pairs], CONFIDENCE)
    entry.update(human_ci_low=person_ci.low, human_ci_high=person_ci.high,
                 bias_ci_low=bias_ci.low, bias_ci_high=bias_ci.high)
    picked = [w for w in weights if w is not None]
    if picked and len(picked) == len(weights):
        entry.update(active_section(judged, pairs, picked))
        return entry
    entry.update(ppi_section(metric, judged, pairs))
    if picked:
        entry["note"] = (f"{len(picked)} of {len(pairs)} labels carry an inclusion "
                         "probability (pi) and the others do not: the PPI++ interval "
                         "assumes uniformly picked labels")
    return entry


def active_section(judged: Sequence[tuple[float, str | None]],
                   pairs: Sequence[tuple[float, float, str | None]],
                   pi: Sequence[float]) -> dict[str, Any]:
    """The ``ppi_*`` fields for labels picked with probabilities ``pi`` (active inference).

    The inverse-probability-weighted estimate of :func:`pytest_ragbench.stats.active.
    active_mean_ci` (power-tuned, ``ppi_method`` "active++"), unstratified. A ci-lower
    gate checks its interval's bound: the labels' exact bounds assume uniformly picked
    labels, so there is no finite-sample bound to add, and ``ppi_gate_method`` says the
    bound is a large-sample one.
    """
    result = active_mean_ci([v for v, _ in judged], [j for j, _, _ in pairs],
                            [h for _, h, _ in pairs], pi, CONFIDENCE)
    return {"ppi_mean": result.mean, "ppi_ci_low": result.low, "ppi_ci_high": result.high,
            "ppi_se": result.se, "ppi_df": result.df, "ppi_method": result.method,
            "ppi_lambda": result.lam, "ppi_strata": None, "ppi_gate_low": result.low,
            "ppi_gate_high": result.high,
            "ppi_gate_method": f"{result.method} (large-sample)"}


def ppi_section(metric: str, judged: Sequence[tuple[float, str | None]],
                pairs: Sequence[tuple[float, float, str | None]]) -> dict[str, Any]:
    """The ``ppi_*`` fields: the PPI++ interval, and the bounds a ci-lower gate checks.

    ``judged`` holds every scored item's (score, category), ``pairs`` the labeled ones'
    (score, label, category). Stratified by category (``ppi_strata`` names them) when
    there are several and each has at least two labeled items: each category then gets
    its own λ and the estimate weights them by their item counts.

    The gate bounds (``ppi_gate_low``/``ppi_gate_high``, one-sided 97.5%) are the more
    pessimistic of the PPI++ interval's and the labels' own gate bounds, those of a cell
    of the human scores (:mod:`pytest_ragbench.stats.intervals`: exact Clopper-Pearson for 0/1
    labels, the betting bound for other scores in the metric's range). The labels' bound
    holds at every label count for every distribution, so a calibrated metric whose human
    mean sits at the gate passes at most 2.5% of sessions; the PPI++ bound is a
    large-sample one (with a lenient 0/1 judge it passed 3-4% of such sessions at 20-100
    labels). A bound that uses the judge with finite-sample validity (PPI with betting
    bounds) was looser than the labels' exact bound at every label count simulated, up to
    300 (``benchmarks/bench_ppi.py``). It assumes the labels are a uniformly random subset
    of the items; for a metric without a known range the labels' bound is itself a
    large-sample one, and ``ppi_gate_method`` says so.
    """
    by_category: dict[str | None, tuple[list[float], list[float], list[float]]] = {}
    for value, category in judged:
        by_category.setdefault(category, ([], [], []))[0].append(value)
    for value, person, category in pairs:
        by_category[category][1].append(value)
        by_category[category][2].append(person)
    strata = None
    judge = [j for j, _, _ in pairs]
    people = [h for _, h, _ in pairs]
    if len(by_category) > 1 and all(len(s[1]) >= 2 for s in by_category.values()):
        strata = sorted(by_category, key=lambda c: (c is None, c or ""))
        ppi = stats.stratified_ppi_mean_ci([by_category[c] for c in strata], CONFIDENCE)
    else:
        ppi = stats.ppi_mean_ci([v for v, _ in judged], judge, people, CONFIDENCE)
    low, high = metric_range(metric)
    labels = intervals.cell_interval(people, None, low, high, CONFIDENCE)
    assert labels.gate_low is not None and labels.gate_high is not None  # n >= 2
    method = labels.gate_method or ""
    finite = method == "clopper-pearson" or method.endswith("+betting")
    gate_method = f"ppi++ and labels' {method}" + (
        "" if finite else " (large-sample)")
    return {"ppi_mean": ppi.mean, "ppi_ci_low": ppi.low, "ppi_ci_high": ppi.high,
            "ppi_se": ppi.se, "ppi_df": ppi.df, "ppi_method": ppi.method,
            "ppi_lambda": ppi.lam,
            "ppi_strata": [c or "-" for c in strata] if strata else None,
            "ppi_gate_low": min(ppi.low, labels.gate_low),
            "ppi_gate_high": max(ppi.high, labels.gate_high), "ppi_gate_method": gate_method}


# ---------------------------------------------------------------- the document's sections


def labeled_metrics(records: Iterable[ItemRecord], matching: Matching) -> dict[str, list[str]]:
    """``{kind: [metric, ...]}`` of the kinds and metrics some item carries a label of."""
    found: dict[str, set[str]] = defaultdict(set)
    for record in records:
        found[record.kind].update(matching.human.get(record.nodeid, {}))
    return {kind: sorted(found[kind]) for kind in sorted(found) if found[kind]}


def section(records: Sequence[ItemRecord], systems: Sequence[str], matching: Matching
            ) -> dict[str, dict[str, dict[str, Any]]]:
    """``judge_calibration[kind][metric]`` (with ``systems[name]`` when several ran)."""
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for kind, metrics in labeled_metrics(records, matching).items():
        of_kind = [r for r in records if r.kind == kind]
        for metric in metrics:
            entry = calibrate(of_kind, metric, matching.human, matching.pi)
            if entry is None:
                continue
            if len(systems) > 1:
                per_system = {s: calibrate([r for r in of_kind if r.system == s], metric,
                                           matching.human, matching.pi) for s in systems}
                entry["systems"] = {s: e for s, e in per_system.items() if e is not None}
            result.setdefault(kind, {})[metric] = entry
    return result


def labels_section(label_file: LabelFile | None, matching: Matching) -> dict[str, Any] | None:
    """Where the labels came from, how many labeled an item, and those that did not."""
    if label_file is None and not matching.human and not matching.unmatched:
        return None
    return {
        "file": label_file.summary() if label_file is not None else None,
        "file_labels_matched": matching.file_labels,
        "case_labels_matched": matching.case_labels,
        "items_labeled": len(matching.human),
        "several_labels": matching.several,
        "unmatched": {"count": len(matching.unmatched),
                      "examples": [u.to_dict() for u in matching.unmatched[:EXAMPLES]]},
    }


def failure_lines(label_file: LabelFile | None) -> list[str]:
    """Bad label lines fail the session: the first few by file, line and field, then a count."""
    if label_file is None or not label_file.errors:
        return []
    lines = [f"judge labels: {error}" for error in label_file.errors[:MAX_ERROR_LINES]]
    extra = len(label_file.errors) - MAX_ERROR_LINES
    if extra > 0:
        lines.append(f"judge labels: {label_file.shown or label_file.path}: {extra} more "
                     "bad line(s) (all of them in results.json judge_labels.file.errors)")
    return lines


# ---------------------------------------------------------------- the terminal


def lines(document: dict[str, Any]) -> list[str]:
    """The calibration table and the label summary for the terminal section."""
    out: list[str] = []
    block = document.get("judge_calibration") or {}
    if block:
        rows = [["kind", "metric", "labeled", "judged", "judge mean", "human mean",
                 "agreement", "kappa", "bias [95% CI]", "PPI mean [95% CI]"]]
        for kind, by_metric in block.items():
            for metric, entry in by_metric.items():
                rows.append(_row(kind, metric, entry))
                rows += [_row(kind, f"{metric}[{system}]", cell)
                         for system, cell in entry.get("systems", {}).items()]
        out += ["judge calibration against human labels (PPI: prediction-powered 95% "
                "interval of the human mean, PPI++ of Angelopoulos, Duchi & Zrnic 2023):",
                *table(rows)]
        out += [f"  {kind}.{metric}: {entry['note']}" for kind, by_metric in block.items()
                for metric, entry in by_metric.items() if entry.get("note")]
        out += [f"  {kind}.{metric}: PPI stratified by category ({', '.join(strata)})"
                for kind, by_metric in block.items() for metric, entry in by_metric.items()
                if (strata := entry.get("ppi_strata"))]
        out += [f"  {kind}.{metric}: labels picked by active sampling, each weighted by 1/pi "
                "(active inference, Zrnic & Candès 2024)"
                for kind, by_metric in block.items() for metric, entry in by_metric.items()
                if str(entry.get("ppi_method") or "").startswith("active")]
    summary = document.get("judge_labels")
    if summary:
        out.append(_summary_line(summary))
        out += [f"  {u['where']}: id {u['id']!r}, metric {u['metric']!r}: {u['reason']}"
                for u in summary["unmatched"]["examples"]]
    return out


def _row(kind: str, metric: str, cell: dict[str, Any]) -> list[str]:
    bias = "-" if cell["bias"] is None else \
        f"{signed(cell['bias'])} {interval(cell['bias_ci_low'], cell['bias_ci_high'])}"
    method = {"exact": " exact", "spearman": " rho"}.get(cell["agreement_method"] or "", "")
    return [kind, metric, str(cell["n_labeled"]), str(cell["n_judged"]),
            num(cell["judge_mean"]), num(cell["human_mean"]), num(cell["agreement"]) + method,
            num(cell["kappa"]), bias,
            f"{num(cell['ppi_mean'])} {interval(cell['ppi_ci_low'], cell['ppi_ci_high'])}"]


def _summary_line(summary: dict[str, Any]) -> str:
    parts = []
    source = summary.get("file")
    if source:
        bad = f", {len(source['errors'])} bad" if source["errors"] else ""
        parts.append(f"{source['shown']}: {source['lines']} lines{bad}, "
                     f"{summary['file_labels_matched']} labeled an item")
    if summary["case_labels_matched"]:
        parts.append(f"case files: {summary['case_labels_matched']} labels")
    parts.append(f"{summary['items_labeled']} items labeled")
    if summary["several_labels"]:
        parts.append(f"{summary['several_labels']} item metrics with several labels "
                     "(averaged)")
    unmatched = summary["unmatched"]["count"]
    if unmatched:
        shown = len(summary["unmatched"]["examples"])
        parts.append(f"{unmatched} labeled no item of this run"
                     + (f" (first {shown}):" if shown < unmatched else ":"))
    return "judge labels: " + "; ".join(parts)
