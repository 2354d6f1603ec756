"""Labels where they count: active against uniform picks at equal label counts (prints tables).

``ragbench label --next N`` picks each item with a probability π that grows with the
judge's uncertainty about it (pytest_ragbench/stats/active.py: sqrt(f(1 − f)) of its score,
or the spread of its repeated samples; half the budget spread evenly), and the calibration
reweights each label by 1/π (active inference, Zrnic & Candès 2024). Each session draws a
fresh population of N items, picks about n of them to label (Poisson sampling, expected
count n) and computes 95% intervals of the human mean:

- active: π from the judge's uncertainty, :func:`active_mean_ci` (power-tuned λ);
- uniform: π = n/N for every item, the same estimator (what the same labels cost when
  picked blindly);
- PPI++ uniform: exactly n labels picked uniformly, :func:`ppi_mean_ci` (the report's
  estimate for labels without π).

Simulated judges (the person's verdict h is 0/1 with P(h = 1) = p, p ~ Beta(0.4, 0.4), so
the human mean is 0.5): ``calibrated``, f = p (a judge that is sure of most items and
right to be); ``sampled``, f the mean of 5 judge samples each 1 with probability p (its
uncertainty is the samples' spread); ``biased``, f = min(1, p + 0.2) (sure, and wrong, on
many items: a third of the items get f = 1); ``noisy``, f = clip(0.3 + 0.4·h + N(0, 0.15))
(the uncertainty tells little). Then WikiQA's real human labels (232 pairs, human mean
0.5), each session a resample of the 232 pairs, with the token F1 of answer vs question
and the MiniLM cosine (``embed`` extra) as the judge, as in ``bench_ppi.py``.

Run: ``python benchmarks/bench_active_labels.py`` (1,000 sessions per row, fixed seed);
``--reps 300`` for a quick look. The binomial standard error of a coverage of 0.95 over
1,000 sessions is 0.007.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pytest_ragbench.stats import ppi_mean_ci
from pytest_ragbench.stats.active import (
    active_mean_ci,
    judge_uncertainty,
    poisson_sample,
    sampling_probabilities,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ppi import WIKIQA, print_table, wikiqa_proxies

# A population: (judge scores, judge samples or None, human 0/1 labels); truth 0.5.
Population = tuple[np.ndarray, list[list[float]] | None, np.ndarray]


def _calibrated(rng: np.random.Generator, n: int) -> Population:
    p = rng.beta(0.4, 0.4, n)
    return p, None, (rng.random(n) < p).astype(float)


def _sampled(rng: np.random.Generator, n: int) -> Population:
    p = rng.beta(0.4, 0.4, n)
    samples = (rng.random((n, 5)) < p[:, None]).astype(float)
    return samples.mean(1), samples.tolist(), (rng.random(n) < p).astype(float)


def _biased(rng: np.random.Generator, n: int) -> Population:
    p = rng.beta(0.4, 0.4, n)
    return np.minimum(1.0, p + 0.2), None, (rng.random(n) < p).astype(float)


def _noisy(rng: np.random.Generator, n: int) -> Population:
    p = rng.beta(0.4, 0.4, n)
    h = (rng.random(n) < p).astype(float)
    return np.clip(0.3 + 0.4 * h + rng.normal(0, 0.15, n), 0, 1), None, h


JUDGES: dict[str, Callable[[np.random.Generator, int], Population]] = {
    "calibrated": _calibrated, "sampled": _sampled, "biased": _biased, "noisy": _noisy}


def session(population: Population, labels: int, truth: float, rng: np.random.Generator
            ) -> dict[str, tuple[bool, float, int]]:
    """Each design's (covered, width, labels drawn) in one session."""
    f, samples, h = population
    n = f.size
    found = {}
    designs = {"active": sampling_probabilities(judge_uncertainty(f, samples), labels),
               "uniform": np.full(n, labels / n)}
    for name, pi in designs.items():
        xi = poisson_sample(pi, int(rng.integers(2**31)))
        if xi.sum() < 2:
            continue
        ci = active_mean_ci(f, f[xi], h[xi], pi[xi])
        found[name] = (ci.low <= truth <= ci.high, ci.high - ci.low, int(xi.sum()))
    chosen = rng.choice(n, labels, replace=False)
    ppi = ppi_mean_ci(f, f[chosen], h[chosen])
    found["ppi++"] = (ppi.low <= truth <= ppi.high, ppi.high - ppi.low, labels)
    return found


def run(make: Callable[[np.random.Generator], Population], labels: int, reps: int,
        truth: float, seed: int) -> dict[str, tuple[float, float, float]]:
    """Coverage, mean width and mean label count of each design over ``reps`` sessions."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list[tuple[bool, float, int]]] = {"active": [], "uniform": [], "ppi++": []}
    for _ in range(reps):
        for name, value in session(make(rng), labels, truth, rng).items():
            rows[name].append(value)
    return {name: (float(np.mean([r[0] for r in found])), float(np.mean([r[1] for r in found])),
                   float(np.mean([r[2] for r in found]))) for name, found in rows.items()}


def row(name: str, items: int, labels: int, r: dict[str, tuple[float, float, float]]
        ) -> list[str]:
    flag = "" if r["active"][0] >= 0.93 else "!"
    return [name, str(items), str(labels), f"{r['active'][0]:.3f}{flag}",
            f"{r['uniform'][0]:.3f}", f"{r['ppi++'][0]:.3f}", f"{r['active'][1]:.3f}",
            f"{r['uniform'][1]:.3f}", f"{r['ppi++'][1]:.3f}",
            f"{r['active'][1] / r['uniform'][1]:.2f}", f"{r['active'][2]:.1f}"]


HEADER = ["judge", "N", "labels", "cover active", "cover uniform", "cover PPI++",
          "width active", "width uniform", "width PPI++", "active/uniform", "labels drawn"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--labels", default="20,50,100")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wikiqa", type=Path, default=WIKIQA,
                        help="the WikiQA label CSV (skipped when absent)")
    args = parser.parse_args()
    started = time.perf_counter()
    counts = [int(n) for n in args.labels.split(",")]
    error = 2 * math.sqrt(0.95 * 0.05 / args.reps)
    rows = []
    for index, (name, judge) in enumerate(JUDGES.items()):
        for n in counts:
            result = run(lambda rng, j=judge: j(rng, args.items), n, args.reps, 0.5,
                         args.seed + 100 * index + n)
            rows.append(row(name, args.items, n, result))
    print_table(f"95% intervals of the human mean (0.5): {args.reps} sessions per row, seed "
                f"{args.seed} (+-{error:.3f} at 0.95; ! active below 0.93); labels = the "
                "expected count (exact for PPI++)", HEADER, rows)
    if not args.wikiqa.is_file():
        print(f"(WikiQA labels not found at {args.wikiqa}: real-label table skipped)")
    else:
        human, proxies = wikiqa_proxies(args.wikiqa)
        rows = []
        for index, (name, proxy) in enumerate(proxies.items()):
            score = np.clip(proxy, 0.0, 1.0)

            def resample(rng: np.random.Generator, f: np.ndarray = score) -> Population:
                drawn = rng.integers(0, human.size, human.size)
                return f[drawn], None, human[drawn]

            for n in counts:
                result = run(resample, n, args.reps, float(human.mean()),
                             args.seed + 1000 * (index + 1) + n)
                rows.append(row(name, human.size, n, result))
        print_table(f"WikiQA human labels (232 pairs, human mean {human.mean():.3f}): each "
                    "session a resample of the pairs; the proxy's score in [0, 1] as the "
                    f"judge; {args.reps} sessions per row", HEADER, rows)
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
