"""Which items of a run to label next: active sampling from the judge's uncertainty.

For each kind and judged metric, every scored item gets an inclusion probability π
(:func:`pytest_ragbench.stats.active.sampling_probabilities`: ∝ the judge's uncertainty
about the item, half the budget spread evenly), and a seeded Poisson draw picks the
items. Each pick keeps its π, so that the calibration reweights its label by 1/π and the
estimate of the human mean stays unbiased (results/calibration.py).
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.metrics.repeated import scored
from pytest_ragbench.results.aggregate import metric_range, scored_value
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.stats.active import (
    judge_uncertainty,
    poisson_sample,
    sampling_probabilities,
)

ITEMS_FILE = "items.jsonl"


@dataclass(frozen=True)
class Pick:
    """One item of a kind × metric cell, its judge score, uncertainty and probability."""

    record: ItemRecord
    metric: str
    judge: float
    uncertainty: float
    pi: float
    low: float
    high: float

    def label_line(self) -> dict[str, Any]:
        """The ``--ragbench-judge-labels`` line to fill in (``score`` null until labelled)."""
        line: dict[str, Any] = {"id": self.record.case_id, "metric": self.metric,
                                "score": None, "kind": self.record.kind}
        if self.record.system is not None:
            line["system"] = self.record.system
        line.update(pi=self.pi, judge=self.judge)
        return line


@dataclass
class CellPlan:
    """The probabilities of one kind × metric cell and the items drawn."""

    kind: str
    metric: str
    items: list[Pick]
    chosen: list[Pick]
    budget: float

    def half_widths(self) -> tuple[float, float]:
        """Plug-in 95% half-widths of the λ = 1 estimate: these probabilities, and uniform.

        Var = Σ u²·(1/π − 1)/N² on the [0, 1] scale, u the judge's uncertainty standing in
        for sqrt(E[(human − judge)²]); rescaled to the metric's range.
        """
        n = len(self.items)
        uniform = self.budget / n
        active = sum(p.uncertainty**2 * (1 / p.pi - 1) for p in self.items)
        even = sum(p.uncertainty**2 * (1 / uniform - 1) for p in self.items)
        scale = 1.96 * (self.items[0].high - self.items[0].low) / n
        return scale * math.sqrt(active), scale * math.sqrt(even)


def read_items(report: Path) -> list[ItemRecord]:
    """The item records of the run in ``report`` (ConfigError when there are none)."""
    path = report / ITEMS_FILE
    if not report.is_dir():
        raise ConfigError(f"{report}: no such report folder (run pytest --ragbench first, "
                          "or name the folder with --report=DIR)")
    if not path.is_file():
        raise ConfigError(f"{path}: no items file in the report folder (run pytest "
                          "--ragbench first)")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(ItemRecord.from_dict(json.loads(line)))
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{path}:{number}: not an item record ({exc})") from None
    if not records:
        raise ConfigError(f"{path}: no items (the run recorded none)")
    return records


def judged_cells(records: Sequence[ItemRecord]) -> list[tuple[str, str]]:
    """The (kind, metric) pairs a judge scored on some item, sorted."""
    found = {(r.kind, m) for r in records for m in (r.judge or {}).get("metrics", [])
             if scored_value(r, m) is not None}
    return sorted(found)


def cells_for(records: Sequence[ItemRecord], metric: str | None, kind: str | None,
              where: str) -> list[tuple[str, str]]:
    """The cells to draw from: the judged ones, or those of ``--metric`` (and ``--kind``)."""
    if metric is None:
        cells = [c for c in judged_cells(records) if kind is None or c[0] == kind]
        if not cells:
            raise ConfigError(f"{where}: no judged metric in this run (run with a judge, "
                              "or name a scored metric with --metric=NAME)")
        return cells
    cells = sorted({(r.kind, metric) for r in records if scored_value(r, metric) is not None
                    and (kind is None or r.kind == kind)})
    if not cells:
        names = sorted({m for r in records for m in r.metrics})
        raise ConfigError(f"{where}: no item scored metric {metric!r}"
                          + (f" of kind {kind!r}" if kind else "")
                          + f" (scored metrics: {', '.join(names) or 'none'})")
    return cells


def plan_cell(records: Sequence[ItemRecord], kind: str, metric: str, budget: int,
              seed: int) -> CellPlan:
    """Probabilities for the scored items of one cell, and a seeded Poisson draw of them."""
    items = [(r, v) for r in records if r.kind == kind
             and (v := scored_value(r, metric)) is not None]
    scores = [v for _, v in items]
    low, high = metric_range(metric)
    if low is None or high is None or not high > low:  # a range seen in the run instead
        low, high = min(scores), max(scores)
        if not high > low:
            high = low + 1.0
    samples = [scored(((r.judge or {}).get("samples") or {}).get(metric, []))
               for r, _ in items]
    uncertainty = judge_uncertainty(scores, samples, low, high)
    expected = float(min(budget, len(items)))
    pi = sampling_probabilities(uncertainty, expected)
    # The seed and the cell together: cells draw independently, and reproducibly.
    chosen = poisson_sample(pi, _cell_seed(seed, kind, metric))
    picks = [Pick(r, metric, v, float(u), float(p), low, high)
             for (r, v), u, p in zip(items, uncertainty, pi, strict=True)]
    taken = sorted((p for p, c in zip(picks, chosen, strict=True) if c),
                   key=lambda p: (-p.pi, p.record.nodeid))
    return CellPlan(kind, metric, picks, taken, expected)


def _cell_seed(seed: int, kind: str, metric: str) -> int:
    return (seed * 1_000_003 + zlib.crc32(f"{kind}\0{metric}".encode())) % 2**32
