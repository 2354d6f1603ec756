"""``--ragbench-plan``: what deciding each gate will take, before anything is asked.

It reads a finished run (the report dir's results.json, or the saved run named by
``--ragbench-compare``) as a pilot and asks no model. For each gate that run checked,
from the scores of the gate's items:

- **items**: the smallest number of items at which the gate is decided — the interval the
  gate checks (the 95% CI of the mean under ``--ragbench-gate mean``, the gate bound under
  ``ci-lower``: Clopper-Pearson or betting) lies wholly on one side of the bound — in at
  least 80% of runs. Up to :data:`SIMULATED_MAX` items the gate's own interval decides:
  for a 0/1 metric exactly (the binomial chance of a count of ones whose interval
  excludes the bound, at the pilot's share), for other scores on :data:`DRAWS` seeded
  samples of each size drawn from the pilot's scores; beyond, by the normal approximation
  ``n = ((z₀.₉₇₅ + z₀.₈)·s / |mean - bound|)²``. Either way it is an estimate from the
  pilot: its error is that of the pilot's mean and spread.
- **width**: with ini ``ragbench_target_width``, the items at which the median 95% CI
  half-width is at most the target.
- **labels**: for a gate checked on a metric calibrated against human labels (PPI), the
  labels at which the prediction-powered interval decides it, scaling the pilot's
  standard error as 1/√labels (the labels' term dominates when judged items far outnumber
  labels).
- **calls, tokens, cost**: the pilot's mean calls and tokens per item of the gate's kind,
  per role, times the items needed; priced by ini ``ragbench_prices``. A run of that size
  costs the sum over kinds of the largest need of each kind's gates.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from pytest_ragbench.config.prices import Price, dollars, price_for, role_model
from pytest_ragbench.stats.core import normal_quantile

POWER = 0.8  # the share of runs in which the planned size decides the gate
CONFIDENCE = 0.95
DRAWS = 400  # samples drawn per size (scores other than 0/1)
SIMULATED_MAX = 2000  # beyond this many items, the normal approximation
RESAMPLES = 1000  # bootstrap resamples of each drawn sample's BCa interval
SEED = 0


@dataclass(frozen=True)
class GatePlan:
    """What one gate needs: items (and labels), with the calls, tokens and cost they take."""

    gate: str
    kind: str
    system: str | None
    mode: str
    bound: float
    mean: float | None
    n: int
    expect: str  # "pass", "miss" or "undecidable"
    items: int | None  # None: cannot be decided (the pilot's mean is at the bound)
    method: str  # "binomial", "simulated" or "normal approximation"
    width_items: int | None = None
    labels: int | None = None
    n_labeled: int | None = None
    usage: dict[str, dict[str, float]] = field(default_factory=dict)  # role -> at ``items``

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return dict(self.__dict__)


def gate_values(document: Mapping[str, Any], gate: Mapping[str, Any]) -> list[float]:
    """The scores of the pilot's items that the gate checked."""
    where = {k: str(v) for k, v in (gate.get("where") or {}).items()}
    found = []
    for item in document.get("items") or ():
        if item.get("kind") != gate["kind"] or item.get("status") == "error":
            continue
        if gate.get("system") is not None and item.get("system") != gate["system"]:
            continue
        fields = {**(item.get("fields") or {}), "system": item.get("system")}
        if any(str(fields.get(k)) != v for k, v in where.items()):
            continue
        value = (item.get("metrics") or {}).get(gate["metric"])
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and math.isfinite(value):
            found.append(float(value))
    return found


def per_item_usage(document: Mapping[str, Any], kind: str, system: str | None
                   ) -> dict[str, dict[str, float]]:
    """The pilot's mean calls and tokens per item of a kind (and system), by role."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    count = 0
    for item in document.get("items") or ():
        if item.get("kind") != kind or (system is not None and item.get("system") != system):
            continue
        count += 1
        for role, row in (item.get("usage") or {}).items():
            if not isinstance(row, dict):
                continue
            for key in ("calls", "prompt_tokens", "completion_tokens"):
                value = row.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    totals[role][key] += float(value)
    return {role: {k: v / count for k, v in row.items()} for role, row in totals.items()} \
        if count else {}


def plan(document: Mapping[str, Any], mode: str | None = None,
         target_width: float | None = None) -> list[GatePlan]:
    """The plan of every gate of the pilot ``document`` (``mode``: the next run's gate mode)."""
    plans = []
    for gate in document.get("gates") or ():
        values = gate_values(document, gate)
        gate_mode = mode or gate.get("mode") or "mean"
        lower_better = gate.get("direction") == "lower"
        low, high = _range(gate["metric"])
        items, method, expect = items_to_decide(values, float(gate["bound"]), gate_mode,
                                                lower_better, low, high)
        width = None if target_width is None else items_for_width(values, target_width,
                                                                  low, high)
        labels, n_labeled = _labels(gate, lower_better)
        per_item = per_item_usage(document, gate["kind"], gate.get("system"))
        usage = {role: {k: v * items for k, v in row.items()}
                 for role, row in per_item.items()} if items else {}
        plans.append(GatePlan(
            gate=gate["gate"], kind=gate["kind"], system=gate.get("system"), mode=gate_mode,
            bound=float(gate["bound"]), mean=_mean(values), n=len(values), expect=expect,
            items=items, method=method, width_items=width, labels=labels,
            n_labeled=n_labeled, usage=usage))
    return plans


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _range(metric: str) -> tuple[float | None, float | None]:
    # lazy: the metric registry is only needed once a gate is planned
    from pytest_ragbench.results.aggregate import metric_range

    return metric_range(metric)


def items_to_decide(values: Sequence[float], bound: float, mode: str, lower_better: bool,
                    low: float | None = None, high: float | None = None
                    ) -> tuple[int | None, str, str]:
    """(items, method, expected verdict) for one gate; items None when none decide it."""
    if len(values) < 2:
        return None, "too few scored items in the pilot (2 needed)", "undecidable"
    mean = sum(values) / len(values)
    passes = mean <= bound if lower_better else mean >= bound
    if mean == bound:
        return None, "the pilot's mean is the bound", "undecidable"
    expect = "pass" if passes else "miss"
    normal = _normal_items(values, abs(mean - bound))
    if normal is not None and normal > SIMULATED_MAX:
        return normal, "normal approximation", expect
    found = _smallest(lambda n: _decided_share(values, n, bound, mode, low, high) >= POWER)
    if found is None:  # nothing up to SIMULATED_MAX: the normal approximation, if it has one
        return (normal, "normal approximation", expect) if normal else (
            None, f"not decided within {SIMULATED_MAX} items", expect)
    return found, ("binomial" if set(values) <= {0.0, 1.0} else "simulated"), expect


def items_for_width(values: Sequence[float], width: float, low: float | None = None,
                    high: float | None = None) -> int | None:
    """Items at which the median 95% CI half-width is at most ``width``."""
    if len(values) < 2:
        return None
    spread = _std(values)
    if spread > 0:
        normal = math.ceil((normal_quantile(CONFIDENCE) * spread / width) ** 2)
        if normal > SIMULATED_MAX:
            return normal
    return _smallest(lambda n: _median_half_width(values, n, low, high) <= width)


def _labels(gate: Mapping[str, Any], lower_better: bool) -> tuple[int | None, int | None]:
    """Labels at which the gate's prediction-powered interval decides it (None: no PPI)."""
    ppi = gate.get("ppi")
    if not ppi or ppi.get("ppi_ci_low") is None or not ppi.get("n_labeled"):
        return None, None
    n_labeled = int(ppi["n_labeled"])
    se = (ppi["ppi_ci_high"] - ppi["ppi_ci_low"]) / (2 * normal_quantile(CONFIDENCE))
    gap = abs(float(ppi["ppi_mean"]) - float(gate["bound"]))
    if gap == 0 or se <= 0:
        return None, n_labeled
    z = normal_quantile(CONFIDENCE) + NormalDist().inv_cdf(POWER)
    needed = n_labeled * (se * z / gap) ** 2
    return max(2, math.ceil(needed)), n_labeled


def _std(values: Sequence[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _normal_items(values: Sequence[float], gap: float) -> int | None:
    """((z + z_power)·s/gap)², None when the pilot's scores do not vary."""
    spread = _std(values)
    if spread == 0:
        return None
    z = normal_quantile(CONFIDENCE) + NormalDist().inv_cdf(POWER)
    return max(2, math.ceil((z * spread / gap) ** 2))


def _smallest(enough: Any) -> int | None:
    """The smallest n in [2, SIMULATED_MAX] for which ``enough(n)``: doubling, then halving."""
    low, high = 2, 2
    while not enough(high):
        if high >= SIMULATED_MAX:
            return None
        low, high = high + 1, min(SIMULATED_MAX, high * 2)
    while low < high:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle + 1
    return high


def _draws(values: Sequence[float], n: int) -> Any:
    """``DRAWS`` seeded samples of ``n`` scores drawn with replacement from the pilot's.

    Each sample of ``n`` is the first ``n`` of one fixed sequence of draws (common random
    numbers), so the share of decided samples grows smoothly with ``n`` and the search
    for the smallest size is not misled by the noise of independent draws per size.
    """
    import numpy as np

    pilot = np.asarray(values, dtype=float)
    picks = np.random.default_rng(SEED).integers(0, pilot.size, size=(DRAWS, SIMULATED_MAX))
    return pilot[picks[:, :n]]


def _intervals(values: Sequence[float], n: int, low: float | None, high: float | None
               ) -> list[Any]:
    from pytest_ragbench.stats import intervals

    cells = [intervals.CellData(list(sample), None, low, high)
             for sample in _draws(values, n)]
    return intervals.cell_intervals(cells, CONFIDENCE, n_resamples=RESAMPLES, seed=SEED)


def _decided_share(values: Sequence[float], n: int, bound: float, mode: str,
                   low: float | None, high: float | None) -> float:
    """The share of runs of ``n`` items whose gate interval excludes the bound.

    For a 0/1 metric exactly: the chance that the count of ones reaches a count whose
    interval excludes the bound, under the binomial law of the pilot's share. For other
    scores, the share of drawn samples.
    """
    if set(values) <= {0.0, 1.0}:
        return _binary_decided_chance(sum(values) / len(values), n, bound, mode, low, high)
    decided = 0
    for found in _intervals(values, n, low, high):
        bottom, top = ((found.gate_low, found.gate_high) if mode == "ci-lower"
                       else (found.low, found.high))
        if bottom is not None and top is not None and (bottom > bound or top < bound):
            decided += 1
    return decided / DRAWS


def _binary_decided_chance(share: float, n: int, bound: float, mode: str,
                           low: float | None, high: float | None) -> float:
    """P(the interval of Binomial(n, share) ones excludes ``bound``)."""
    from scipy.special import bdtr

    from pytest_ragbench.stats import intervals

    def interval(ones: int) -> tuple[float, float]:
        found = intervals.cell_interval([1.0] * ones + [0.0] * (n - ones), low=low, high=high)
        pair = (found.gate_low, found.gate_high) if mode == "ci-lower" else (found.low,
                                                                              found.high)
        return (-math.inf if pair[0] is None else pair[0],
                math.inf if pair[1] is None else pair[1])

    # Both ends of the interval grow with the count of ones: bisect for the first count
    # whose lower end is above the bound, and the last whose upper end is below it.
    above = _first(lambda ones: interval(ones)[0] > bound, n)
    below = _first(lambda ones: interval(ones)[1] >= bound, n) - 1
    chance = 0.0
    if above <= n:
        chance += 1.0 - (float(bdtr(above - 1, n, share)) if above > 0 else 0.0)
    if below >= 0:
        chance += float(bdtr(below, n, share))
    return chance


def _first(holds: Any, n: int) -> int:
    """The smallest count in [0, n] for which ``holds`` (monotone), or n + 1."""
    low, high = 0, n + 1
    while low < high:
        middle = (low + high) // 2
        if middle <= n and holds(middle):
            high = middle
        else:
            low = middle + 1
    return low


def _median_half_width(values: Sequence[float], n: int, low: float | None,
                       high: float | None) -> float:
    widths = sorted((f.high - f.low) / 2 for f in _intervals(values, n, low, high)
                    if f.low is not None and f.high is not None)
    return widths[len(widths) // 2] if widths else math.inf


# ------------------------------------------------------------------------------ output

def run_usage(plans: Sequence[GatePlan]) -> dict[str, dict[str, float]]:
    """Calls and tokens of a run that decides every gate: per kind, its largest need."""
    largest: dict[tuple[str, str | None], GatePlan] = {}
    for found in plans:
        key = (found.kind, found.system)
        if found.items and (key not in largest or found.items > (largest[key].items or 0)):
            largest[key] = found
    total: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for found in largest.values():
        for role, row in found.usage.items():
            for name, value in row.items():
                total[role][name] += value
    return {role: dict(row) for role, row in total.items()}


def cost(usage: Mapping[str, Mapping[str, float]], document: Mapping[str, Any],
         prices: Mapping[str, Price], configured: Mapping[str, str | None]
         ) -> dict[str, float | None]:
    """Dollars per role for ``usage`` (None for a role whose model has no price)."""
    rows = document.get("usage") or {}
    found: dict[str, float | None] = {}
    for role, row in usage.items():
        model = role_model(rows.get(role) or {}, configured.get(role))
        price = price_for(model, prices)
        found[role] = None if price is None else price.cost(row.get("prompt_tokens", 0),
                                                            row.get("completion_tokens", 0))
    return found


def lines(plans: Sequence[GatePlan], source: str, document: Mapping[str, Any],
          prices: Mapping[str, Price], configured: Mapping[str, str | None],
          target_width: float | None) -> list[str]:
    """The plan as the terminal prints it."""
    from pytest_ragbench.render.text import table as format_table

    out = [f"ragbench plan from {source} (no model asked): items that decide each gate in "
           f"{POWER:.0%} of runs"]
    if not plans:
        return [*out, "the run checked no gate: nothing to plan ([tool.ragbench.gates])"]
    header = ["gate", "mode", "bound", "pilot n", "pilot mean", "expect", "items needed",
              "how", *(["items for width"] if target_width else []), "labels"]
    rows = [header]
    for found in plans:
        rows.append([found.gate, found.mode, f"{found.bound:g}", str(found.n),
                     "-" if found.mean is None else f"{found.mean:.3f}", found.expect,
                     "-" if found.items is None else str(found.items), found.method,
                     *([_opt(found.width_items)] if target_width else []),
                     "-" if found.labels is None else f"{found.labels} (have "
                                                        f"{found.n_labeled})"])
    out += format_table(rows)
    usage = run_usage(plans)
    if usage:
        priced = cost(usage, document, prices, configured)
        table = [["a run deciding every gate", "calls", "prompt tokens", "completion tokens",
                  "cost"]]
        for role in sorted(usage):
            row = usage[role]
            table.append([role, f"{row.get('calls', 0):.0f}", f"{row.get('prompt_tokens', 0):.0f}",
                          f"{row.get('completion_tokens', 0):.0f}",
                          dollars(priced[role]) if priced[role] is not None else
                          ("-" if not prices else "no price for its model")])
        out += ["", *format_table(table)]
    if target_width:
        out.append(f"items for width: the median 95% CI half-width at most {target_width:g}")
    return out


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)


# ------------------------------------------------------------------------------ the flag

def planned_gates(document: Mapping[str, Any], configured: Mapping[str, float]
                  ) -> list[dict[str, Any]]:
    """The gates the next run checks (the configured ones, else the pilot's), on the pilot.

    Each as a gate entry of results.json: name, kind, metric, where, system, bound,
    direction, and the pilot's prediction-powered numbers where it calibrated the metric.
    """
    from pytest_ragbench.results import gates as gate_rules
    from pytest_ragbench.results.aggregate import direction

    pilot = {(g["gate"], g.get("system")): g for g in document.get("gates") or ()}
    if not configured:
        return list(pilot.values())
    recorded = {m for item in document.get("items") or () for m in item.get("metrics") or {}}
    systems = list(document.get("systems") or ()) or [None]
    found = []
    for rule in gate_rules.parse_gates(dict(configured)):
        for gate in gate_rules.at_recorded_k(rule, recorded):
            for system in systems:
                name = gate.name if system is None else f"{gate.name} [system={system}]"
                earlier = pilot.get((name, system)) or {}
                found.append({"gate": name, "kind": gate.kind, "metric": gate.metric,
                              "where": dict(gate.where), "system": system,
                              "bound": gate.bound, "direction": direction(gate.metric),
                              "mode": earlier.get("mode"), "ppi": earlier.get("ppi")})
    return found


def show_plan(config: Any) -> int:
    """``--ragbench-plan``: print the plan and return the exit status; no model is asked."""
    import json

    import pytest

    from pytest_ragbench.config.settings import build_config
    from pytest_ragbench.errors import ConfigError
    from pytest_ragbench.results import runs

    try:
        settings = build_config(config)
        if settings.compare:
            path = runs.resolve(settings.compare, settings.report_dir,
                                config.invocation_params.dir)
        else:
            path = settings.report_dir / "results.json"
            if not path.is_file():
                raise ConfigError(f"--ragbench-plan: no run to plan from: {path} does not "
                                  "exist (run once, or name a saved run with "
                                  "--ragbench-compare)")
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"--ragbench-plan: cannot read {path}: {exc}") from None
        if not isinstance(document, dict) or not isinstance(document.get("items"), list):
            raise ConfigError(f"--ragbench-plan: {path} is not a ragbench run (no 'items' "
                              "list; expected a saved run or results.json)")
        pilot = {**document, "gates": planned_gates(document, settings.gates)}
    except ConfigError as exc:
        print(f"ERROR: ragbench: {exc}")
        return int(pytest.ExitCode.USAGE_ERROR)
    configured = {"generator": settings.llm_model, "judge": settings.judge_model}
    plans = plan(pilot, settings.gate, settings.target_width)
    for line in lines(plans, str(path), document, settings.prices, configured,
                      settings.target_width):
        print(line)
    return int(pytest.ExitCode.OK)
