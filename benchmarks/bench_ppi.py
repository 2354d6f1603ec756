"""Coverage of the prediction-powered interval with a biased judge (a script that prints tables).

A simulated population of items has a human score Y (1 for 60% of the items, else 0:
the human mean is 0.6) and a judge score f that is biased. Each repetition draws
``--items`` items, labels ``n`` of them at random, and computes four 95% intervals of
the human mean:

- PPI: ``pytest_ragbench.stats.ppi_mean_ci(f of all items, f of the labeled, Y of the
  labeled)`` — what ``judge_calibration`` reports;
- PPI, overlap ignored: the paper's formula with every item in the "unlabeled" set and
  a normal quantile (what a PPI routine gives when the labeled items are also passed
  as unlabeled), to show why ``ppi_mean_ci`` accounts for the overlap;
- judge only: the t interval of the judge's mean over all items (the metrics table);
- human only: the t interval of the labeled items' human mean.

It prints each interval's coverage of the true human mean (goal: PPI >= 0.93 at 50
labels) and the mean widths of PPI and human-only intervals (what the judge buys).
Judges: ``noisy``, f = clip(0.3 + 0.4·Y + N(0, 0.15)) (mean 0.54, too low); ``lenient``,
a 0/1 judge that says 1 for every correct item and half the incorrect ones (mean 0.8);
``compressed``, f = 0.5 + 0.1·Y + N(0, 0.02) (every score near the middle).

Run: ``python benchmarks/bench_ppi.py`` (2,000 repetitions per row, fixed seed, about a
minute); ``--reps 300`` for a quick look. The binomial standard error of a coverage of
0.95 over 2,000 repetitions is 0.005.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from pytest_ragbench.stats import ppi_mean_ci, t_ci

HUMAN_MEAN = 0.6
Judge = Callable[[np.ndarray, np.random.Generator], np.ndarray]
JUDGES: dict[str, Judge] = {
    "noisy": lambda y, rng: np.clip(0.3 + 0.4 * y + rng.normal(0, 0.15, y.size), 0, 1),
    "lenient": lambda y, rng: np.where(y == 1, 1.0, (rng.random(y.size) < 0.5) * 1.0),
    "compressed": lambda y, rng: 0.5 + 0.1 * y + rng.normal(0, 0.02, y.size),
}


def naive_interval(f_all: np.ndarray, f_lab: np.ndarray, y_lab: np.ndarray
                   ) -> tuple[float, float]:
    """The paper's CLT interval with all items as the unlabeled set (overlap ignored)."""
    rectifier = y_lab - f_lab
    mean = f_all.mean() + rectifier.mean()
    se = np.sqrt(f_all.var(ddof=1) / f_all.size + rectifier.var(ddof=1) / rectifier.size)
    z = sps.norm.ppf(0.975)
    return mean - z * se, mean + z * se


def simulate(judge: Judge, items: int, labels: int, reps: int, seed: int) -> dict[str, float]:
    """Coverage of each interval, and mean widths, over ``reps`` repetitions."""
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(("ppi", "naive", "judge", "human"), 0)
    widths = {"ppi": 0.0, "human": 0.0}
    for _ in range(reps):
        y = (rng.random(items) < HUMAN_MEAN).astype(float)
        f = judge(y, rng)
        chosen = rng.choice(items, labels, replace=False)
        ppi = ppi_mean_ci(f, f[chosen], y[chosen])
        naive = naive_interval(f, f[chosen], y[chosen])
        judge_only = t_ci(f)
        human_only = t_ci(y[chosen])
        for name, (low, high) in (("ppi", (ppi.low, ppi.high)), ("naive", naive),
                                  ("judge", (judge_only.low, judge_only.high)),
                                  ("human", (human_only.low, human_only.high))):
            hits[name] += low <= HUMAN_MEAN <= high
        widths["ppi"] += ppi.high - ppi.low
        widths["human"] += human_only.high - human_only.low
    return {**{k: v / reps for k, v in hits.items()},
            **{f"width_{k}": v / reps for k, v in widths.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--labels", default="10,20,50,100,200")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    counts = [int(n) for n in args.labels.split(",")]
    header = ["judge", "labels", "items", "PPI", "PPI overlap ignored", "judge only",
              "human only", "PPI width", "human-only width"]
    rows = []
    cases = [(name, args.items, n) for name in JUDGES for n in counts if n <= args.items]
    cases += [(name, 100, 100) for name in JUDGES]  # every item labeled
    for index, (name, items, n) in enumerate(cases):
        result = simulate(JUDGES[name], items, n, args.reps, args.seed + index)
        rows.append([name, str(n), str(items), f"{result['ppi']:.3f}",
                     f"{result['naive']:.3f}", f"{result['judge']:.3f}",
                     f"{result['human']:.3f}", f"{result['width_ppi']:.3f}",
                     f"{result['width_human']:.3f}"])
    print(f"Coverage of 95% intervals of the human mean ({HUMAN_MEAN}), {args.reps} "
          f"repetitions per row, seed {args.seed}")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
