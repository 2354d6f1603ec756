"""The best configuration of a sweep, with statistical backing (``best`` in results.json).

Per objective metric (``--ragbench-objective kind.metric``; default the gated metrics) the
configurations are ranked by their mean over the cases every configuration scored, and
each is compared with the best one: multiple comparisons with the best, k − 1 paired
comparisons (the paired tests of :mod:`.comparisons`), Holm-corrected together. The
configurations not significantly worse than the best form the best set: it holds the
truly best configuration with probability at least 1 − alpha (tests/test_best.py shows
it by seeded simulation). Far fewer tests than all k(k − 1)/2 pairs, so more power.

The recommended configuration is, among those in the best set of every objective, the
one ranked highest on the first objective (else the first objective's best). Its
advantage over the default configuration (the sweep's base) is one more paired
comparison with its own 95% interval. The Pareto table sets each configuration's quality
on the first objective against its mean answer latency and model calls per item.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pytest_ragbench.results import cutoffs
from pytest_ragbench.results.aggregate import direction, scored_value
from pytest_ragbench.results.comparisons import ALPHA, Pairs, evaluate
from pytest_ragbench.results.records import ItemRecord

BEST_FILE = "best.toml"
METHOD = "multiple comparisons with the best: k - 1 paired tests, Holm-corrected"


def value(record: ItemRecord, metric: str) -> float | None:
    """A record's value of ``metric``; ``source_hit@k`` at the k its system was asked for."""
    if metric.endswith("@k"):
        stem = metric[:-2]
        k = cutoffs.own_k(record, stem)
        return None if k is None else scored_value(record, f"{stem}@{k}")
    found = cutoffs.split(metric)
    if found is not None:
        return cutoffs.value_at(record, *found)
    return scored_value(record, metric)


def default_objectives(gates: dict[str, float], records: Sequence[ItemRecord]) -> list[str]:
    """The gated metrics (``kind.metric``, no ``[field=value]`` filter) the systems scored."""
    kinds = {r.kind for r in records if r.system}
    return [name for name in gates if "[" not in name and name.partition(".")[0] in kinds]


def _paired(records: Iterable[ItemRecord], kind: str, metric: str, systems: Sequence[str]
            ) -> tuple[dict[str, list[float]], list[ItemRecord]]:
    """Each system's values on the cases every system scored (same order), and those cases."""
    by_case: dict[tuple[str, str], dict[str, tuple[ItemRecord, float]]] = defaultdict(dict)
    for record in records:
        if record.kind == kind and record.system is not None and record.system in systems:
            found = value(record, metric)
            if found is not None:
                by_case[(record.file, record.case_id)][record.system] = (record, found)
    complete = [members for _, members in sorted(by_case.items())
                if all(s in members for s in systems)]
    values = {s: [members[s][1] for members in complete] for s in systems}
    return values, [members[systems[0]][0] for members in complete]


def rank_objective(records: Sequence[ItemRecord], objective: str, systems: Sequence[str],
                   alpha: float = ALPHA) -> dict[str, Any]:
    """Ranking, best set and the k − 1 comparisons with the best of one ``kind.metric``."""
    kind, _, metric = objective.partition(".")
    values, cases = _paired(records, kind, metric, systems)
    sign = -1.0 if direction(metric) == "lower" else 1.0
    result: dict[str, Any] = {"objective": objective, "kind": kind, "metric": metric,
                              "direction": "lower" if sign < 0 else "higher", "n": len(cases),
                              "method": METHOD, "alpha": alpha, "family": 0, "best": None,
                              "best_set": [], "ranking": []}
    if not cases:
        result["note"] = "no case was scored by every configuration"
        return result
    means = {s: sum(v) / len(v) for s, v in values.items()}
    order = sorted(systems, key=lambda s: (-sign * means[s], list(systems).index(s)))
    best = order[0]
    family = []
    for other in order[1:]:
        pairs = Pairs(f"{other}_vs_best", kind, metric, None)
        for record, x, y in zip(cases, values[other], values[best], strict=True):
            pairs.add_values(record, x, y)
        family.append(pairs)
    compared = {c["name"].removesuffix("_vs_best"): c for c in evaluate(family)} \
        if family else {}
    ranking = []
    for rank, system in enumerate(order, 1):
        row: dict[str, Any] = {"system": system, "rank": rank, "mean": means[system],
                               "delta": 0.0, "ci_low": None, "ci_high": None,
                               "p_holm": None, "test": None, "worse": False}
        found = compared.get(system)
        if found is not None:
            worse = bool(found["p_holm"] < alpha and sign * found["delta"] < 0)
            row.update(delta=found["delta"], ci_low=found["ci_low"], ci_high=found["ci_high"],
                       p_holm=found["p_holm"], test=found["test"], worse=worse)
        row["in_best_set"] = not row["worse"]
        ranking.append(row)
    result.update(family=len(family), best=best, ranking=ranking,
                  best_set=[r["system"] for r in ranking if r["in_best_set"]])
    return result


def advantage(records: Sequence[ItemRecord], objective: str, chosen: str, default: str
              ) -> dict[str, Any]:
    """``chosen`` − ``default`` on ``objective``: one paired comparison, its own 95% CI."""
    kind, _, metric = objective.partition(".")
    values, cases = _paired(records, kind, metric, [chosen, default])
    if chosen == default or not cases:
        return {"objective": objective, "default": default, "n": len(cases), "delta": 0.0
                if cases else None, "ci_low": 0.0 if cases else None,
                "ci_high": 0.0 if cases else None, "p_value": None, "test": None,
                "note": "the recommended configuration is the default" if chosen == default
                else "no case was scored by both"}
    pairs = Pairs(f"{chosen}_vs_{default}", kind, metric, None)
    for record, x, y in zip(cases, values[chosen], values[default], strict=True):
        pairs.add_values(record, x, y)
    found = evaluate([pairs])[0]
    return {"objective": objective, "default": default, "n": found["n"],
            "delta": found["delta"], "ci_low": found["ci_low"], "ci_high": found["ci_high"],
            "p_value": found["p_value"], "test": found["test"], "note": None}


def costs(records: Iterable[ItemRecord], systems: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Mean seconds answering and model calls per item (every role but the system's own call).

    A retrieval's calls (query expansion, LLM re-ranking's grades) are counted.

    The seconds are the plugin's timing of the system's calls (usage ``system.service_s``),
    else the record's ``latency_s`` (or ``latency_ms``), else the item's duration.
    """
    latency: dict[str, list[float]] = defaultdict(list)
    calls: dict[str, list[float]] = defaultdict(list)
    for record in records:
        if record.system is None or record.system not in systems \
                or record.status not in ("passed", "failed", "warning"):
            continue
        usage = {role: counts for role, counts in (record.usage or {}).items()
                 if isinstance(counts, dict)}
        latency[record.system].append(_seconds(record, usage.get("system", {})))
        calls[record.system].append(float(sum(
            counts["calls"] for role, counts in usage.items() if role != "system"
            and isinstance(counts.get("calls"), int | float))))
    return {s: {"latency_s": _mean(latency[s]), "model_calls": _mean(calls[s])}
            for s in systems}


def _seconds(record: ItemRecord, system_usage: dict[str, Any]) -> float:
    timed = [float(x) for x in system_usage.get("service_s") or ()
             if isinstance(x, int | float) and not isinstance(x, bool)]
    if timed:
        return sum(timed)
    seconds = scored_value(record, "latency_s")
    if seconds is None and (ms := scored_value(record, "latency_ms")) is not None:
        seconds = ms / 1000
    return seconds if seconds is not None else float(record.duration)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def pareto(ranked: dict[str, Any], spent: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Quality (the objective's mean) against latency and model calls; the front marked."""
    sign = 1.0 if ranked["direction"] == "higher" else -1.0
    rows = [{"system": r["system"], "quality": r["mean"], **spent.get(r["system"], {})}
            for r in ranked["ranking"]]

    def costs_of(row: dict[str, Any]) -> list[float]:
        return [sign * row["quality"], -(row.get("latency_s") or 0.0),
                -(row.get("model_calls") or 0.0)]

    for row in rows:
        mine = costs_of(row)
        row["pareto"] = not any(
            all(o >= m for o, m in zip(costs_of(other), mine, strict=True))
            and any(o > m for o, m in zip(costs_of(other), mine, strict=True))
            for other in rows if other is not row)
    return rows


def section(records: Sequence[ItemRecord], configurations: Sequence[dict[str, Any]],
            objectives: Sequence[str], gates: dict[str, float]) -> dict[str, Any] | None:
    """``best`` of results.json; None without configurations to choose among."""
    systems = [c["name"] for c in configurations]
    if len(systems) < 2:
        return None
    wanted = list(objectives) or default_objectives(gates, records)
    ranked = [rank_objective(records, o, systems) for o in wanted]
    ranked_ok = [r for r in ranked if r["best"] is not None]
    default = next((c["name"] for c in configurations if c.get("default")), None)
    result: dict[str, Any] = {"method": METHOD, "objectives": ranked, "default": default,
                              "recommended": None, "pareto": [], "file": None}
    if not ranked_ok:
        result["note"] = ("no objective: give --ragbench-objective kind.metric or a gate"
                          if not wanted else "no objective was scored by every configuration")
        return result
    first = ranked_ok[0]
    everywhere = [s for s in first["best_set"] if all(s in r["best_set"] for r in ranked_ok)]
    chosen = everywhere[0] if everywhere else first["best"]
    params = next(c for c in configurations if c["name"] == chosen)
    result["recommended"] = {
        "system": chosen, "factory": params["system"], "params": params["params"],
        "objective": first["objective"], "mean": next(
            r["mean"] for r in first["ranking"] if r["system"] == chosen),
        "advantage": None if default is None
        else advantage(records, first["objective"], chosen, default)}
    result["pareto"] = pareto(first, costs(records, systems))
    result["file"] = BEST_FILE
    return result


def best_toml(best: dict[str, Any]) -> str:
    """best.toml: the recommended configuration, loadable with ``--ragbench-config-from``."""
    chosen = best["recommended"]
    gain = chosen.get("advantage") or {}
    lines = ["# The recommended configuration of a pytest-ragbench sweep. Run from it with",
             f"#   pytest --ragbench --ragbench-config-from={BEST_FILE}",
             f"# objective {chosen['objective']}: mean {chosen['mean']:.4g}"]
    if gain.get("delta") is not None and gain.get("ci_low") is not None:
        lines.append(f"# advantage over the default {gain['default']}: {gain['delta']:+.4g} "
                     f"(95% CI {gain['ci_low']:+.4g} to {gain['ci_high']:+.4g})")
    lines += ["", "[config]", f"system = {_toml(chosen['factory'])}",
              f"name = {_toml(chosen['system'])}", "", "[config.params]"]
    lines += [f"{name} = {_toml(v)}" for name, v in chosen["params"].items()]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    """A TOML scalar: JSON's string escapes are TOML's basic-string escapes."""
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)
