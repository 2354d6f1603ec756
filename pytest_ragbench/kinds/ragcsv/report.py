"""The RAGCSV report section: accuracy and time quantiles per system, in the benchmark's format.

``results.json["ragcsv"]`` is ``{system or "": block}`` (key ``""`` for one system); a
block has ``n``, ``pass_threshold``, ``pass``, ``accuracy_method`` (how accuracy was
measured), ``accuracy`` (quantiles) and, per time metric measured, its quantiles
(``total_time_ms``, and with streamed answers ``ttft_ms`` and ``itl_ms``), over the rows
that have it. Quantiles are seed 003's: ``sorted[n * p / 100]``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from pytest_ragbench.kinds.ragcsv import rows
from pytest_ragbench.kinds.ragcsv.progress import KIND, RAGCSV_PASS
from pytest_ragbench.render.files import write_text
from pytest_ragbench.results.aggregate import scored_value
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.results.sections import ReportSection

RAGCSV_TIMINGS = ("total_time_ms", "ttft_ms", "itl_ms")
QUANTILES = (("min", 0), ("p25", 25), ("p50", 50), ("p75", 75), ("p90", 90), ("p99", 99),
             ("max", 100))
# (metric, title, decimals): gaps between chunks are a few milliseconds
RAGCSV_TIMES = (("total_time_ms", "Total Time", 0), ("ttft_ms", "TTFT", 0), ("itl_ms", "ITL", 1))
TITLE = "RAGCSV: accuracy and time quantiles, in the RAGCSV benchmark's format"


def ragcsv_quantiles(values: Sequence[float]) -> dict[str, float]:
    """min, p25 … p99, max and avg as the RAGCSV benchmark: ``sorted[n * p / 100]``."""
    ordered = sorted(values)
    n = len(ordered)
    out = {name: ordered[min(n * p // 100, n - 1)] for name, p in QUANTILES}
    out["avg"] = sum(ordered) / n
    return out


def data(records: Iterable[ItemRecord], systems: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The accuracy and time blocks, per system (key ``""`` for one system)."""
    groups: dict[str, list[ItemRecord]] = defaultdict(list)
    for record in records:
        if record.kind == KIND:
            groups[(record.system or "") if len(systems) > 1 else ""].append(record)
    section: dict[str, dict[str, Any]] = {}
    for key in sorted(groups):
        accuracy = [v for r in groups[key] if (v := scored_value(r, "accuracy")) is not None]
        timings = {name: [v for r in groups[key] if (v := scored_value(r, name)) is not None]
                   for name in RAGCSV_TIMINGS}
        limits = {float(r.thresholds["accuracy"]) for r in groups[key]
                  if isinstance(r.thresholds.get("accuracy"), int | float)}
        bar = limits.pop() if len(limits) == 1 else RAGCSV_PASS
        block: dict[str, Any] = {"n": len(accuracy), "pass_threshold": bar,
                                 "pass": sum(v >= bar for v in accuracy)}
        # How accuracy was measured (a judge's grade, or semantic similarity x 100).
        methods = sorted({str(m) for r in groups[key]
                          if (m := r.evidence.get("accuracy_method"))})
        if methods:
            block["accuracy_method"] = "; ".join(methods)
        if accuracy:
            block["accuracy"] = ragcsv_quantiles(accuracy)
        for name, times in timings.items():
            if times:
                block[name] = {"n": len(times), **ragcsv_quantiles(times)}
        if accuracy or any(timings.values()):
            section[key] = block
    return section


def lines(blocks: dict[str, Any]) -> list[str]:
    """The quantile blocks (accuracy and times), in the RAGCSV benchmark's format."""
    out: list[str] = []
    for system, block in blocks.items():
        tag = f" [{system}]" if system else ""
        accuracy = block.get("accuracy")
        if accuracy:
            out += ["", f"=== RAGCSV Eval Accuracy{tag} (n={block['n']}) ==="]
            if block.get("accuracy_method"):
                out.append(f"  accuracy: {block['accuracy_method']}")
            out += [f"  {k}:  {v:.1f}%" for k, v in accuracy.items()]
            out.append(f"  pass (>={block['pass_threshold']:g}%): {block['pass']}/{block['n']}")
        for name, title, decimals in RAGCSV_TIMES:
            times = block.get(name)
            if times:
                out += ["", f"=== RAGCSV Eval {title}{tag} (n={times['n']}) ==="]
                out += [f"  {k}:  {v:.{decimals}f}ms" for k, v in times.items() if k != "n"]
    return out[1:]


def report_section(records: Sequence[ItemRecord], systems: Sequence[str]) -> ReportSection:
    """``results.json["ragcsv"]``, its text and ``ragcsv_rows.csv`` (empty without rows)."""
    blocks = data(records, systems)
    export = rows.csv_text(records)
    files = {} if export is None else {
        rows.FILE_NAME: lambda path: write_text(path, export)}
    return ReportSection(key="ragcsv", title=TITLE, data=blocks, text=lines(blocks),
                         files=files)
