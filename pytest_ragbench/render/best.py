"""The best configuration of a sweep as tables: the ranking per objective, the Pareto table."""

from __future__ import annotations

from typing import Any

from pytest_ragbench.render.text import num, signed, table


def _interval(row: dict[str, Any]) -> str:
    if row.get("ci_low") is None:
        return "-"
    return f"[{signed(row['ci_low'])}, {signed(row['ci_high'])}]"


def ranking_rows(objective: dict[str, Any]) -> list[list[str]]:
    """One objective: rank, mean, difference from the best, its CI, Holm p, in the best set."""
    rows = [["rank", "configuration", "mean", "vs best", "95% CI", "p Holm", "best set"]]
    for row in objective.get("ranking") or ():
        p = row.get("p_holm")
        rows.append([str(row["rank"]), row["system"], num(row["mean"]), signed(row["delta"])
                     if row["rank"] > 1 else "best", _interval(row),
                     "-" if p is None else f"{p:.3g}", "yes" if row["in_best_set"] else "no"])
    return rows


def pareto_rows(best: dict[str, Any]) -> list[list[str]]:
    """Quality against mean latency and model calls per item; the Pareto front marked."""
    objective = (best.get("recommended") or {}).get("objective", "quality")
    rows = [["configuration", objective, "latency s/item", "model calls/item", "Pareto"]]
    for row in best.get("pareto") or ():
        rows.append([row["system"], num(row["quality"]), num(row.get("latency_s")),
                     num(row.get("model_calls")), "yes" if row["pareto"] else "-"])
    return rows


def recommended_lines(best: dict[str, Any]) -> list[str]:
    """The recommended configuration, its advantage over the default and the interval."""
    chosen = best.get("recommended")
    if not chosen:
        return [f"best configuration: none ({best.get('note') or 'nothing to rank'})"]
    lines = [f"recommended configuration: {chosen['system']} ({chosen['objective']} mean "
             f"{num(chosen['mean'])}; written to {best.get('file')})"]
    gain = chosen.get("advantage")
    if gain is None:
        lines.append("  no default configuration to compare with")
    elif gain.get("note"):
        lines.append(f"  vs the default {gain['default']}: {gain['note']}")
    else:
        lines.append(f"  advantage over the default {gain['default']}: {signed(gain['delta'])}"
                     f" (95% CI {_interval(gain)}, n={gain['n']}, {gain['test']} "
                     f"p={gain['p_value']:.3g})")
    return lines


def lines(document: dict[str, Any]) -> list[str]:
    """The terminal's part: each objective's ranking, the Pareto table, the recommendation."""
    best = document.get("best")
    if not best:
        return []
    out = ["best configuration (multiple comparisons with the best: k - 1 paired tests, "
           "Holm-corrected, alpha 0.05; 'best set': not significantly worse than the best)"]
    for objective in best.get("objectives") or ():
        note = f" ({objective['note']})" if objective.get("note") else ""
        out += ["", f"{objective['objective']} ({objective['direction']} is better, "
                    f"n={objective['n']}){note}:"]
        if objective.get("ranking"):
            out += table(ranking_rows(objective))
    if best.get("pareto"):
        out += ["", *table(pareto_rows(best))]
    return [*out, "", *recommended_lines(best)]
