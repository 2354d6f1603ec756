"""Aggregate gates and regression verdicts: what makes a session fail at its end.

- ``[tool.ragbench.gates]``: ``"vector.semantic_similarity" = 0.6`` or
  ``"ragcsv.accuracy[category=x]" = 70`` bounds a metric over a kind (or the items whose
  fields match), checked on the mean, or with ``--ragbench-gate ci-lower`` on the 95% CI
  bound on the pessimistic side (the lower bound; the upper one for timings, where less
  is better). With ``ci-lower`` every metric's item threshold is also checked that way.
  With several systems a gate applies to each system (``[system=name]`` picks one).
  The bound checked is the cell's gate bound (``ci_gate_low``/``ci_gate_high``, see
  :mod:`pytest_ragbench.stats.intervals`): Clopper-Pearson for 0/1 metrics, the betting bound
  for bounded scores, both valid for every distribution, so a metric whose true mean sits
  at the bound passes at most 2.5% of sessions. A metric calibrated against human labels
  is checked on its prediction-powered bound (``ppi_gate_low``/``ppi_gate_high`` of
  results/calibration.py), which holds that promise at every label count. With fewer
  scored items than ``ragbench_gate_min_n`` a gate is "not checked: n too small", which
  fails the session under ``ci-lower``; a gate over a metric with most of its items
  unscored says so.
- ``--ragbench-fail-on regression``: a metric significantly worse than the baseline
  (Holm-corrected) fails the session; timings are reported but never fail.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragbench.config.options import GATE_MIN_N
from pytest_ragbench.config.thresholds import flatten
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.render.text import comparator, effect, p_text, signed, significant
from pytest_ragbench.results.aggregate import Cell, direction
from pytest_ragbench.results.comparisons import timing_metric
from pytest_ragbench.results.entries import Comparison, GateVerdict

_GATE = re.compile(r"^(?P<kind>[^.\[\]\s]+)\.(?P<metric>[^\[\]]+?)(?:\[(?P<where>[^\]]*)\])?$")


@dataclass(frozen=True)
class Gate:
    """A bound on a metric of a kind, optionally restricted to some field values."""

    name: str
    kind: str
    metric: str
    where: tuple[tuple[str, str], ...]
    bound: float
    source: str = "gate"  # "gate" ([tool.ragbench.gates]) or "threshold" (ci-lower mode)


def parse_gates(table: dict[str, Any]) -> list[Gate]:
    """Read ``[tool.ragbench.gates]`` (dotted keys or nested tables); bad keys raise."""
    gates = []
    for name, bound in sorted(flatten(table).items()):
        match = _GATE.match(name.strip())
        if not match:
            raise ConfigError(f"[tool.ragbench.gates] {name!r}: expected 'kind.metric' or "
                              "'kind.metric[field=value,...]'")
        where = []
        for part in filter(None, (p.strip() for p in (match["where"] or "").split(","))):
            field, sep, value = part.partition("=")
            if not sep or not field.strip() or not value.strip():
                raise ConfigError(f"[tool.ragbench.gates] {name!r}: expected field=value "
                                  f"inside [...], got {part!r}")
            where.append((field.strip(), value.strip()))
        gates.append(Gate(name.strip(), match["kind"], match["metric"].strip(),
                          tuple(where), float(bound)))
    return gates


def at_recorded_k(gate: Gate, recorded: Iterable[str]) -> list[Gate]:
    """A gate on ``source_hit@k`` bounds the metric at each k its kind recorded (``@4``).

    Any other gate, or one on a cut-off nothing recorded, is returned as it is.
    """
    if not gate.metric.endswith("@k"):
        return [gate]
    stem = gate.metric[:-1]
    found = sorted({m for m in recorded if m.startswith(stem) and m[len(stem):].isdigit()},
                   key=lambda m: int(m[len(stem):]))
    return [dataclasses.replace(gate, metric=m) for m in found] or [gate]


def threshold_checks(metric_cells: Iterable[tuple[Cell, Mapping[str, Any]]]
                     ) -> list[tuple[Gate, Cell]]:
    """Item thresholds as aggregate gates on their metric cells (``--ragbench-gate ci-lower``)."""
    return [(Gate(f"{cell.kind}.{cell.metric}", cell.kind, cell.metric, (),
                  float(entry["threshold"]), "threshold"), cell)
            for cell, entry in metric_cells if entry.get("threshold") is not None]


def gate_cells(gate: Gate, systems: Sequence[str]) -> list[Cell]:
    """The cells a gate is checked on: one per system when several ran."""
    chosen = dict(gate.where).get("system")
    where = tuple(sorted((k, v) for k, v in gate.where if k != "system"))
    if chosen is not None:
        return [Cell(gate.kind, gate.metric, chosen, where)]
    if len(systems) > 1:
        return [Cell(gate.kind, gate.metric, s, where) for s in systems]
    return [Cell(gate.kind, gate.metric, None, where)]


def check(gate: Gate, cell: Cell, entry: Mapping[str, Any], mode: str,
          min_n: int = GATE_MIN_N, calibration: dict[str, Any] | None = None) -> GateVerdict:
    """The verdict of one gate on one cell.

    ``passed`` is None when nothing was scored, or when fewer than ``min_n`` items were
    and the gate is on the mean; on the CI bound too few items fail (``passed`` False):
    "n too small" is no evidence that the bound is met. With ``ci-lower`` and the cell's
    calibration against human labels (results/calibration.py), the bound of the
    prediction-powered interval is checked.
    """
    lower_better = direction(gate.metric) == "lower"
    n = int(entry.get("n") or 0)
    unscored = int(entry.get("n_unscored") or 0)
    method = None
    ppi = None
    if mode == "ci-lower":
        side = "high" if lower_better else "low"
        value = entry.get(f"ci_gate_{side}", entry.get(f"ci_{side}"))
        method = entry.get("ci_gate_method", entry.get("ci_method"))
        if calibration is not None and calibration.get("ppi_ci_low") is not None:
            ppi = {k: calibration.get(k) for k in ("n_labeled", "ppi_mean", "ppi_ci_low",
                                                   "ppi_ci_high", "ppi_method")}
            value = calibration.get(f"ppi_gate_{side}", calibration[f"ppi_ci_{side}"])
            method = calibration.get("ppi_gate_method") or "ppi"
    else:
        value = entry.get("mean")
    status = "checked"
    passed = None
    if n == 0:
        status, value = "no scored values", None
    elif n < min_n or (mode == "ci-lower" and value is None):  # no interval below n = 2
        status, value = "n too small", None
        passed = False if mode == "ci-lower" else None
    elif value is not None:
        passed = value <= gate.bound if lower_better else value >= gate.bound
    shown = gate.name
    if gate.name.partition("[")[0] != f"{gate.kind}.{gate.metric}":  # x@k at the k recorded
        shown += f" ({gate.metric})"
    if cell.system and "system" not in dict(gate.where):
        shown += f" [system={cell.system}]"
    return GateVerdict(
        gate=shown, source=gate.source, kind=gate.kind, metric=gate.metric,
        where=dict(gate.where), system=cell.system, bound=gate.bound, mode=mode,
        direction="lower" if lower_better else "higher", value=value, method=method,
        mean=entry.get("mean"), ci_low=entry.get("ci_low"), ci_high=entry.get("ci_high"),
        ci_method=entry.get("ci_method"), n=n, n_unscored=unscored, min_n=min_n,
        status=status, passed=passed, ppi=ppi)


def with_sequential(result: GateVerdict, decision: dict[str, Any] | None) -> GateVerdict:
    """A gate's verdict as its confidence sequence decided it (``--ragbench-sequential``).

    Undecided gates keep the verdict of the usual check on every item run.
    """
    if decision is None or decision.get("status") not in ("passed", "missed"):
        return result
    side = "cs_high" if result.direction == "lower" else "cs_low"
    return dataclasses.replace(
        result, passed=decision["status"] == "passed", status="checked",
        value=decision[side], method=decision["method"],
        sequential={k: decision.get(k) for k in (
            "decided_after", "n", "cs_low", "cs_high", "alpha", "mean")})


def _unscored_note(result: Mapping[str, Any]) -> str:
    """``; 12 of 20 items unscored`` when more than half of the items went unscored."""
    n, unscored = result.get("n", 0), result.get("n_unscored", 0)
    if unscored * 2 > n + unscored:
        return f"; {unscored} of {n + unscored} items unscored"
    return ""


def gate_line(result: Mapping[str, Any]) -> str:
    """One line naming the gate, the value checked and the interval."""
    op = comparator(result["direction"] == "lower")
    label = "threshold" if result["source"] == "threshold" else "gate"
    head = f"{label} {result['gate']} {op} {result['bound']:g}"
    status = result.get("status", "checked" if result["passed"] is not None else "")
    if status == "n too small":
        return (f"{head}: not checked: n too small ({result['n']} scored, "
                f"ragbench_gate_min_n = {result['min_n']}{_unscored_note(result)})")
    if result["passed"] is None:
        return f"{head}: not checked, no scored values{_unscored_note(result)}"
    if result["ci_low"] is None:
        shown = "no CI"
    else:
        shown = f"95% CI [{significant(result['ci_low'])}, {significant(result['ci_high'])}]"
        if result.get("ci_method"):
            shown += f" {result['ci_method']}"
    interval = f"mean {significant(result['mean'])}, {shown}, n={result['n']}"
    if result.get("sequential"):
        seq = result["sequential"]
        checked = (f"confidence sequence [{significant(seq['cs_low'])}, "
                   f"{significant(seq['cs_high'])}] after {seq['n']} values, "
                   f"alpha {seq['alpha']:.3g}, decided after {seq['decided_after']} items; ")
    elif result["mode"] == "ci-lower":
        side = "upper" if result["direction"] == "lower" else "lower"
        how = f" ({result['method']})" if result.get("method") else ""
        checked = f"95% CI {side} bound {significant(result['value'])}{how}; "
        if result.get("ppi"):  # calibrated against human labels
            ppi = result["ppi"]
            checked = (f"95% PPI {side} bound {significant(result['value'])}{how} from "
                       f"{ppi['n_labeled']} human labels, "
                       f"PPI mean {significant(ppi['ppi_mean'])} "
                       f"[{significant(ppi['ppi_ci_low'])}, "
                       f"{significant(ppi['ppi_ci_high'])}]; judge ")
    else:
        checked = ""
    verdict = "passed" if result["passed"] else "MISSED"
    return f"{head}: {verdict} ({checked}{interval}{_unscored_note(result)})"


def regressions(comparisons: Iterable[Comparison]) -> list[Comparison]:
    """Comparisons with the baseline that are significantly worse (timings excluded)."""
    return [c for c in comparisons if c.worse and not timing_metric(c.metric)]


def regression_line(c: Mapping[str, Any], baseline: str) -> str:
    """One line naming a metric that is significantly worse than the baseline."""
    where = f" [system={c['system']}]" if c.get("system") else ""

    ci = "no CI" if c["ci_low"] is None else \
        f"95% CI [{signed(c['ci_low'])}, {signed(c['ci_high'])}]"
    return (f"regression {c['kind']}.{c['metric']}{where}: worse than baseline {baseline}: "
            f"delta {signed(c['delta'])} ({ci}), "
            f"{significant(c['mean_b'])} -> {significant(c['mean_a'])}, "
            f"p={p_text(c, 'p_holm')} (Holm, {c['test']}), d={effect(c)}, "
            f"n={c['n']} pairs")
