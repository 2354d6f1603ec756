"""Aggregate gates and regression verdicts: what makes a session fail at its end.

- ``[tool.ragbench.gates]``: ``"vector.semantic_similarity" = 0.6`` or
  ``"ragcsv.accuracy[category=x]" = 70`` bounds a metric over a kind (or the items whose
  fields match), checked on the mean, or with ``--ragbench-gate ci-lower`` on the 95% CI
  bound on the pessimistic side (the lower bound; the upper one for timings, where less
  is better). With ``ci-lower`` every metric's item threshold is also checked that way.
  With several systems a gate applies to each system (``[system=name]`` picks one).
- ``--ragbench-fail-on regression``: a metric significantly worse than the baseline
  (Holm-corrected) fails the session; timings are reported but never fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.report.aggregate import Cell, direction
from pytest_ragbench.report.compare import TIMING_METRICS
from pytest_ragbench.thresholds import flatten

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


def threshold_checks(metric_cells: Iterable[tuple[Cell, dict[str, Any]]]
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


def check(gate: Gate, cell: Cell, entry: dict[str, Any], mode: str,
          calibration: dict[str, Any] | None = None) -> dict[str, Any]:
    """The verdict of one gate on one cell; ``passed`` is None when nothing was scored.

    With ``ci-lower`` and the cell's calibration against human labels
    (report/calibration.py), the bound of the prediction-powered interval is checked.
    """
    lower_better = direction(gate.metric) == "lower"
    ppi = None
    if mode == "ci-lower":
        value = entry.get("ci_high" if lower_better else "ci_low")
        if calibration is not None and calibration.get("ppi_ci_low") is not None:
            ppi = {k: calibration[k] for k in ("n_labeled", "ppi_mean", "ppi_ci_low",
                                               "ppi_ci_high")}
            value = ppi["ppi_ci_high" if lower_better else "ppi_ci_low"]
    else:
        value = entry.get("mean")
    passed = None
    if value is not None:
        passed = value <= gate.bound if lower_better else value >= gate.bound
    shown = gate.name
    if cell.system and "system" not in dict(gate.where):
        shown += f" [system={cell.system}]"
    return {"gate": shown, "source": gate.source, "kind": gate.kind, "metric": gate.metric,
            "where": dict(gate.where), "system": cell.system, "bound": gate.bound,
            "mode": mode, "direction": "lower" if lower_better else "higher",
            "value": value, "mean": entry.get("mean"), "ci_low": entry.get("ci_low"),
            "ci_high": entry.get("ci_high"), "n": entry.get("n", 0), "passed": passed,
            "ppi": ppi}


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}"


def gate_line(result: dict[str, Any]) -> str:
    """One line naming the gate, the value checked and the interval."""
    op = "<=" if result["direction"] == "lower" else ">="
    label = "threshold" if result["source"] == "threshold" else "gate"
    head = f"{label} {result['gate']} {op} {result['bound']:g}"
    if result["passed"] is None:
        return f"{head}: not checked, no scored values"
    interval = (f"mean {_num(result['mean'])}, 95% CI [{_num(result['ci_low'])}, "
                f"{_num(result['ci_high'])}], n={result['n']}")
    if result["mode"] == "ci-lower":
        side = "upper" if result["direction"] == "lower" else "lower"
        checked = f"95% CI {side} bound {_num(result['value'])}; "
        if result.get("ppi"):  # calibrated against human labels
            ppi = result["ppi"]
            checked = (f"95% PPI {side} bound {_num(result['value'])} from "
                       f"{ppi['n_labeled']} human labels, PPI mean {_num(ppi['ppi_mean'])} "
                       f"[{_num(ppi['ppi_ci_low'])}, {_num(ppi['ppi_ci_high'])}]; judge ")
    else:
        checked = ""
    verdict = "passed" if result["passed"] else "MISSED"
    return f"{head}: {verdict} ({checked}{interval})"


def regressions(comparisons: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Comparisons with the baseline that are significantly worse (timings excluded)."""
    return [c for c in comparisons if c.get("worse") and c["metric"] not in TIMING_METRICS]


def regression_line(c: dict[str, Any], baseline: str) -> str:
    """One line naming a metric that is significantly worse than the baseline."""
    where = f" [system={c['system']}]" if c.get("system") else ""
    from pytest_ragbench.report.terminal import effect, signed

    return (f"regression {c['kind']}.{c['metric']}{where}: worse than baseline {baseline}: "
            f"delta {signed(c['delta'])} (95% CI [{signed(c['ci_low'])}, "
            f"{signed(c['ci_high'])}]), {_num(c['mean_b'])} -> {_num(c['mean_a'])}, "
            f"p={c['p_holm']:.3g} (Holm, {c['test']}), d={effect(c['effect_size'])}, "
            f"n={c['n']} pairs")
