"""Sequential gates (``--ragbench-sequential``) against the fixed-n ci-lower gate, simulated.

Each run draws up to N item values per gate (0/1 metrics and bounded continuous ones,
true mean below, at and above the bound; one gate or three at once) and feeds them, in
order, to :class:`pytest_ragbench.run.sequential.SequentialGates` exactly as the
controller does: it stops at the item after which every gate is decided. A decision is
wrong when it differs from the one at the true mean (passed when the mean is at least the
bound, missed below it). The fixed-n gate checks the 97.5% one-sided bound of the
interval of all N values (Clopper-Pearson for 0/1 values, the betting bound for others),
as ``--ragbench-gate ci-lower`` does.

    python benchmarks/bench_sequential.py            # 300 runs per row
    python benchmarks/bench_sequential.py --runs 2000 --only "at the bound"

Printed per row: the sequential error (any wrong decision among the gates decided), the
share of runs where every gate was decided before N, the median and 90th percentile of
the items used, and how often the fixed-n gate at N (the undecided gates' fallback) passes
a gate whose mean is below its bound (its own promise: at most 2.5% at the bound).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import numpy as np

from pytest_ragbench.results.gates import Gate
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.run.sequential import SequentialGates
from pytest_ragbench.stats.intervals import cell_interval

N = 400  # items per gate at most


@dataclass(frozen=True)
class Metric:
    """One gated metric: its name (its range comes from the registry), bound and draw."""

    name: str  # a registered metric: exact_match is 0/1, token_f1 in [0, 1]
    bound: float
    mean: float  # the true mean

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.name == "exact_match":
            return (rng.random(n) < self.mean).astype(float)
        spread = 6.0  # Beta(a, b) with a + b = 6: values spread over the range
        return rng.beta(self.mean * spread, (1 - self.mean) * spread, n)


ROWS: list[tuple[str, list[Metric]]] = [
    ("0/1, mean 0.60 < bound 0.70", [Metric("exact_match", 0.70, 0.60)]),
    ("0/1, mean at the bound 0.70", [Metric("exact_match", 0.70, 0.70)]),
    ("0/1, mean 0.80 > bound 0.70", [Metric("exact_match", 0.70, 0.80)]),
    ("continuous, mean 0.45 < bound 0.50", [Metric("token_f1", 0.50, 0.45)]),
    ("continuous, mean at the bound 0.50", [Metric("token_f1", 0.50, 0.50)]),
    ("continuous, mean 0.58 > bound 0.50", [Metric("token_f1", 0.50, 0.58)]),
    ("3 gates: 0/1 at, continuous above, 0/1 below",
     [Metric("exact_match", 0.70, 0.70), Metric("token_f1", 0.50, 0.58),
      Metric("exact_match", 0.40, 0.30)]),
    ("3 gates: all clearly above",
     [Metric("exact_match", 0.70, 0.85), Metric("token_f1", 0.50, 0.62),
      Metric("exact_match", 0.40, 0.55)]),
]


def one_run(metrics: list[Metric], rng: np.random.Generator) -> tuple[bool, bool, int, bool]:
    """(any wrong sequential decision, all decided before N, items used, fixed-n false pass)."""
    kinds = [f"k{i}" for i in range(len(metrics))]
    gates = [Gate(f"{k}.{m.name}", k, m.name, (), m.bound)
             for k, m in zip(kinds, metrics, strict=True)]
    tracker = SequentialGates(gates, (), min_n=5)
    tracker.start(kinds)
    values = [m.draw(rng, N) for m in metrics]
    used = N * len(metrics)
    for i in range(N):
        for kind, metric, drawn in zip(kinds, metrics, values, strict=True):
            tracker.add(ItemRecord(nodeid=f"{kind}::{i}", kind=kind, case_kind=kind,
                                   case_id=str(i), file="f", line=0, status="passed",
                                   metrics={metric.name: float(drawn[i])}))
        if tracker.all_decided:
            used = tracker.items
            break
    wrong = False
    for track, metric in zip(tracker.tracks.values(), metrics, strict=True):
        if track.decided:
            wrong |= (track.status == "passed") != (metric.mean >= metric.bound)
    fixed_wrong = False
    for metric, drawn in zip(metrics, values, strict=True):
        gate_low = cell_interval(drawn.tolist(), None, 0.0, 1.0).gate_low
        fixed_wrong |= gate_low >= metric.bound > metric.mean  # the ci-lower promise
    return wrong, tracker.all_decided, used, fixed_wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--only", default="", help="rows whose name contains this text")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"{args.runs} runs per row, at most {N} items per gate, alpha 0.05 "
          "(a wrong decision: at most 0.025 for all gates together)\n")
    header = ("case", "sequential error", "all decided", "items median", "items p90",
              "items (all)", "fixed-n false pass")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for name, metrics in ROWS:
        if args.only not in name:
            continue
        results = [one_run(metrics, rng) for _ in range(args.runs)]
        errors = sum(r[0] for r in results) / args.runs
        decided = sum(r[1] for r in results) / args.runs
        used = sorted(r[2] for r in results)
        fixed = sum(r[3] for r in results) / args.runs
        print(f"{name} | {errors:.3f} | {decided:.2f} | {statistics.median(used):.0f} | "
              f"{used[int(0.9 * (len(used) - 1))]} | {N * len(metrics)} | {fixed:.3f}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
