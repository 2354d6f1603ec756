"""PPI++ against plain PPI and the labels alone, and the calibrated gate (prints tables).

A simulated population of items has a human score Y (1 for 60% of the items, else 0:
the human mean is 0.6) and a judge score f. Each repetition draws N items (``--items``,
default 200 and 1000), labels n of them at random, and computes 95% intervals of the human
mean:

- PPI++: ``pytest_ragbench.stats.ppi_mean_ci`` as the report calls it (power-tuned λ,
  small-sample interval: t quantile and Edgeworth shift);
- PPI++ (authors'): the same estimate with ``small_sample=False``, the normal interval of
  ``ppi_py.ppi_mean_ci`` (equal to it to 1e-12, tests/test_stats_ppi.py);
- PPI: ``method="ppi"`` (λ = 1, plain prediction-powered inference);
- labels only: the t interval of the n human labels (the classical interval);
- judge only: the t interval of the judge's scores of all N items.

Judges: ``lenient``, a 0/1 judge that says 1 for every correct item and half the incorrect
ones (mean 0.8); ``biased``, a 0/1 judge that says 1 for 70% of the correct items and 10% of
the incorrect ones (mean 0.46); ``noisy``, f = clip(0.3 + 0.4·Y + N(0, 0.15)) (mean 0.54);
``compressed``, f = 0.5 + 0.1·Y + N(0, 0.02) (every score near the middle); ``weak``,
f = clip(0.5 + 0.05·Y + N(0, 0.25)) (tells little about Y: where plain PPI is wider than
the labels alone).

Tables:

1. coverage of the true human mean by each interval (aim: PPI++ >= 0.93 at 20, 50 and 100
   labels), the mean widths of PPI++ and of the labels-only interval, and the share of
   sessions in which PPI++ (and plain PPI) is wider than the labels-only interval;
2. the ``--ragbench-gate ci-lower`` gate on a calibrated metric whose human mean sits
   exactly at the gate's bound: the share of sessions that pass (aim <= 2.5% + simulation
   error) and the price, how far below the true mean the bound lies on average. The
   report's gate bound (``results/calibration.py``, ``ppi_gate_low``) is the more
   pessimistic of the PPI++ bound and the labels' exact bound (Clopper-Pearson for 0/1
   labels). Beside it: the PPI++ bound alone (large-sample), and a finite-sample bound that
   uses the judge, "PPI betting" (:func:`ppi_betting_lower` below: the judge's mean
   bounded from the unlabeled items and the rectifier from the labeled ones, both with
   Waudby-Smith & Ramdas' betting bound, a union bound between them), which the report
   does not use because it came out looser than the labels' exact bound everywhere;
3. the same coverage on real human labels: WikiQA's 232 labelled question/answer pairs
   (../shared/oracles/wikiqa-labels; human mean exactly 0.5), each repetition a sample of
   232 pairs drawn with replacement with n of them labeled, and two real offline proxies
   as the judge: the MiniLM embedder's cosine of question and answer sentence (needs the
   ``embed`` extra) and the SQuAD token F1 of the answer against the question.

Run: ``python benchmarks/bench_ppi.py`` (2,000 repetitions per row, 500 for the PPI
betting bound, fixed seed; several minutes on a quiet machine); ``--reps 300`` for a
quick look.
The binomial standard error of a coverage of 0.95 over 2,000 repetitions is 0.005, of a
pass rate of 0.025 is 0.0035.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pytest_ragbench.results.calibration import ppi_section
from pytest_ragbench.stats import intervals, ppi_mean_ci, t_ci

HUMAN_MEAN = 0.6
WIKIQA = (Path(__file__).resolve().parents[2] / "shared" / "oracles" / "wikiqa-labels"
          / "ragas-wikiqa-first-half.csv")
Judge = Callable[[np.ndarray, np.random.Generator], np.ndarray]
JUDGES: dict[str, Judge] = {
    "lenient": lambda y, rng: np.where(y == 1, 1.0, (rng.random(y.size) < 0.5) * 1.0),
    "biased": lambda y, rng: np.where(y == 1, rng.random(y.size) < 0.7,
                                      rng.random(y.size) < 0.1).astype(float),
    "noisy": lambda y, rng: np.clip(0.3 + 0.4 * y + rng.normal(0, 0.15, y.size), 0, 1),
    "compressed": lambda y, rng: 0.5 + 0.1 * y + rng.normal(0, 0.02, y.size),
    "weak": lambda y, rng: np.clip(0.5 + 0.05 * y + rng.normal(0, 0.25, y.size), 0, 1),
}
GATE_JUDGES = ("lenient", "biased", "noisy")
GATE_METRIC = "faithfulness"  # a judged metric in [0, 1], as the report sees it


# ---------------------------------------------------------------- the PPI betting bound


def judge_share(n: int, unlabeled: int, alpha: float) -> float:
    """The part of alpha spent on the judge's mean, from n and N only (no data).

    It minimises z(a)/sqrt(N - n) + z(alpha - a)/sqrt(n), the widths of the two bounds for
    equally spread scores.
    """
    from scipy.special import ndtri

    grid = alpha * np.linspace(0.01, 0.99, 99)
    cost = ndtri(1 - grid) / math.sqrt(unlabeled) + ndtri(1 - (alpha - grid)) / math.sqrt(n)
    return float(grid[int(np.argmin(cost))])


def ppi_betting_lower(f_unlabeled: np.ndarray, f_labeled: np.ndarray, y_labeled: np.ndarray,
                      alpha: float, seed: int = 0) -> float:
    """A lower (1 - alpha) bound of the human mean that uses the judge, valid at every n.

    Scores in [0, 1]. The human mean is λ·μ_f + E[y - λ·f] for every λ:

    1. ``c``: a betting lower bound of the judge's mean μ_f at level a, from the unlabeled
       items only (independent of the labeled pairs);
    2. a betting bound at level alpha - a of the mean of z_i = y_i - λ_i·(f_i - c) over the
       labeled pairs, λ_i in [0, 1] estimated from the pairs before i (Cov(y, f)/Var(f),
       predictable).

    Given c, z_i has mean μ_y - λ_i·(μ_f - c) <= μ_y when c <= μ_f, so the betting capital
    against "μ_y <= m" is a supermartingale under that hypothesis (each stake capped by
    the lowest value z_i can take, -λ_i·(1 - c)): wrong with probability at most
    a + (alpha - a).
    """
    n = y_labeled.size
    judge_alpha = judge_share(n, f_unlabeled.size, alpha)
    label_alpha = alpha - judge_alpha
    c = intervals.betting_lower(f_unlabeled, judge_alpha, seed)
    rng = np.random.default_rng(seed)
    order = np.stack([rng.permutation(n) for _ in range(intervals.BETTING_ORDERS)])
    y, f = y_labeled[order], f_labeled[order]
    before = np.maximum(np.arange(n), 1)
    sum_y, sum_f = np.cumsum(y, axis=1) - y, np.cumsum(f, axis=1) - f
    cross = np.cumsum(y * f, axis=1) - y * f - sum_y * sum_f / before
    spread = np.cumsum(f * f, axis=1) - f * f - sum_f**2 / before
    lam = np.clip(cross / (spread + 0.25), 0.0, 1.0)  # a pseudo-item of variance 1/4
    plain = y - lam * f
    variance = intervals._predictable(plain, 0.5, 0.25)
    bets = np.sqrt(2 * math.log(1 / label_alpha) / (n * variance))
    return intervals._largest_rejected(plain + lam * c, bets, -lam * (1 - c), label_alpha, 1.0)


# ---------------------------------------------------------------- simulations


def draw(judge: Judge, items: int, labels: int, rng: np.random.Generator
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Human and judge scores of ``items`` items, and which ``labels`` of them are labeled."""
    y = (rng.random(items) < HUMAN_MEAN).astype(float)
    f = judge(y, rng)
    chosen = np.zeros(items, dtype=bool)
    chosen[rng.choice(items, labels, replace=False)] = True
    return y, f, chosen


def coverage(judge: Judge, items: int, labels: int, reps: int, seed: int) -> dict[str, float]:
    """Coverage of each interval, mean widths, and how often PPI++ / PPI are wider."""
    rng = np.random.default_rng(seed)
    names = ("ppi++", "authors", "ppi", "labels", "judge")
    hits = dict.fromkeys(names, 0)
    widths = dict.fromkeys(names, 0.0)
    wider = {"ppi++": 0, "ppi": 0}
    for _ in range(reps):
        y, f, chosen = draw(judge, items, labels, rng)
        found = {"ppi++": ppi_mean_ci(f, f[chosen], y[chosen]),
                 "authors": ppi_mean_ci(f, f[chosen], y[chosen], small_sample=False),
                 "ppi": ppi_mean_ci(f, f[chosen], y[chosen], method="ppi"),
                 "labels": t_ci(y[chosen]), "judge": t_ci(f)}
        for name, ci in found.items():
            hits[name] += ci.low <= HUMAN_MEAN <= ci.high
            widths[name] += ci.high - ci.low
        classical = found["labels"].high - found["labels"].low
        for name in wider:
            wider[name] += found[name].high - found[name].low > classical + 1e-12
    return {**{k: v / reps for k, v in hits.items()},
            **{f"width {k}": v / reps for k, v in widths.items()},
            **{f"wider {k}": v / reps for k, v in wider.items()}}


def gate(judge: Judge, items: int, labels: int, reps: int, betting_reps: int, seed: int
         ) -> dict[str, float]:
    """Pass rates at the bound (true mean = gate) and mean distances below the truth.

    The PPI betting bound (slow) is computed for the first ``betting_reps`` sessions only.
    """
    rng = np.random.default_rng(seed)
    found: dict[str, list[float]] = {"report": [], "ppi++": [], "betting": []}
    for rep in range(reps):
        y, f, chosen = draw(judge, items, labels, rng)
        section = ppi_section(GATE_METRIC, [(v, None) for v in f],
                              [(v, h, None) for v, h in zip(f[chosen], y[chosen],
                                                           strict=True)])
        found["report"].append(section["ppi_gate_low"])
        found["ppi++"].append(section["ppi_ci_low"])
        if rep < betting_reps:
            found["betting"].append(ppi_betting_lower(f[~chosen], f[chosen], y[chosen],
                                                      0.025, seed=rep))
    out = {}
    for name, bounds in found.items():
        values = np.array(bounds)
        out[f"pass {name}"] = float(np.mean(values >= HUMAN_MEAN))
        out[f"price {name}"] = float(np.mean(HUMAN_MEAN - values))
    return out


def wikiqa_proxies(path: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """People's 0/1 labels of the 232 pairs, and each proxy's score of them."""
    from pytest_ragbench.metrics import token_f1

    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    questions = [r["question"] for r in rows for _ in (0, 1)]
    answers = [r[c] for r in rows for c in ("correct_answer", "incorrect_answer")]
    human = np.array([1.0, 0.0] * len(rows))
    proxies = {"token F1 (answer vs question)":
               np.array([float(token_f1(a, q)) for a, q in zip(answers, questions, strict=True)])}
    try:
        from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
        cosine = (embedder.embed(questions) * embedder.embed(answers)).sum(axis=1)
        proxies["MiniLM cosine (answer vs question)"] = cosine.astype(float)
    except ImportError as exc:
        print(f"(no embedder proxy: {exc})")
    return human, proxies


def wikiqa_coverage(human: np.ndarray, proxy: np.ndarray, labels: int, reps: int, seed: int
                    ) -> dict[str, float]:
    """Coverage of 0.5 by PPI++, the labels alone and the judge alone; widths; PPI++ wider."""
    rng = np.random.default_rng(seed)
    target = float(human.mean())
    hits = {"ppi++": 0, "labels": 0, "judge": 0}
    widths = {"ppi++": 0.0, "labels": 0.0}
    wider = 0
    for _ in range(reps):
        sample = rng.integers(0, human.size, human.size)
        chosen = rng.choice(human.size, labels, replace=False)
        f, y = proxy[sample], human[sample]
        found = {"ppi++": ppi_mean_ci(f, f[chosen], y[chosen]), "labels": t_ci(y[chosen]),
                 "judge": t_ci(f)}
        for name, ci in found.items():
            hits[name] += ci.low <= target <= ci.high
        for name in widths:
            widths[name] += found[name].high - found[name].low
        wider += (found["ppi++"].high - found["ppi++"].low
                  > found["labels"].high - found["labels"].low + 1e-12)
    return {**{k: v / reps for k, v in hits.items()},
            **{f"width {k}": v / reps for k, v in widths.items()}, "wider": wider / reps}


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(title)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--items", default="200,1000")
    parser.add_argument("--labels", default="20,50,100")
    parser.add_argument("--betting-reps", type=int, default=500,
                        help="sessions of the gate table that also compute the PPI betting "
                        "bound (slow)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wikiqa", type=Path, default=WIKIQA,
                        help="the WikiQA label CSV (skipped when absent)")
    args = parser.parse_args()
    started = time.perf_counter()
    sizes = [int(n) for n in args.items.split(",")]
    counts = [int(n) for n in args.labels.split(",")]
    cover_error = 2 * math.sqrt(0.95 * 0.05 / args.reps)
    pass_error = 2 * math.sqrt(0.025 * 0.975 / args.reps)

    rows = []
    index = 0
    for name, judge in JUDGES.items():
        for items in sizes:
            for n in counts:
                index += 1
                r = coverage(judge, items, n, args.reps, args.seed + index)
                flag = "" if r["ppi++"] >= 0.93 else "!"
                rows.append([name, str(items), str(n), f"{r['ppi++']:.3f}{flag}",
                             f"{r['authors']:.3f}", f"{r['ppi']:.3f}", f"{r['labels']:.3f}",
                             f"{r['judge']:.3f}", f"{r['width ppi++']:.3f}",
                             f"{r['width labels']:.3f}", f"{100 * r['wider ppi++']:.1f}%",
                             f"{100 * r['wider ppi']:.1f}%"])
    print_table(f"coverage of 95% intervals of the human mean ({HUMAN_MEAN}), {args.reps} "
                f"sessions per row, seed {args.seed} (+-{cover_error:.3f} at 0.95; ! PPI++ "
                "below 0.93); widths; share of sessions wider than the labels-only interval",
                ["judge", "N", "labels", "PPI++", "PPI++ authors'", "PPI", "labels only",
                 "judge only", "width PPI++", "width labels", "PPI++ wider", "PPI wider"],
                rows)

    rows = []
    for name in GATE_JUDGES:
        for items in sizes:
            for n in counts:
                index += 1
                r = gate(JUDGES[name], items, n, args.reps, args.betting_reps,
                         args.seed + index)
                flag = "!" if r["pass report"] > 0.025 + pass_error else ""
                rows.append([name, str(items), str(n),
                             f"{100 * r['pass report']:.1f}%{flag}",
                             f"{100 * r['pass ppi++']:.1f}%", f"{100 * r['pass betting']:.1f}%",
                             f"{r['price report']:.3f}", f"{r['price ppi++']:.3f}",
                             f"{r['price betting']:.3f}"])
    print_table(f"ci-lower gate on a calibrated 0/1-labeled metric whose human mean sits at "
                f"the bound: sessions passed (aim <= 2.5% + {100 * pass_error:.1f}% "
                "simulation error; ! above) and the price (mean distance from the true "
                "mean down to the bound); report = min(PPI++ bound, labels' Clopper-Pearson); "
                f"PPI betting over the first {min(args.reps, args.betting_reps)} sessions",
                ["judge", "N", "labels", "pass: report", "PPI++ bound alone", "PPI betting",
                 "price: report", "PPI++ alone", "PPI betting"], rows)

    if not args.wikiqa.is_file():
        print(f"(WikiQA labels not found at {args.wikiqa}: real-label table skipped)")
    else:
        human, proxies = wikiqa_proxies(args.wikiqa)
        rows = []
        for name, proxy in proxies.items():
            for n in (10, 20, 30, 60, 100):
                r = wikiqa_coverage(human, proxy, n, args.reps, args.seed + n)
                rows.append([name, f"{proxy.mean():.3f}", str(n), f"{r['ppi++']:.3f}",
                             f"{r['labels']:.3f}", f"{r['judge']:.3f}",
                             f"{r['width ppi++']:.3f}", f"{r['width labels']:.3f}",
                             f"{100 * r['wider']:.1f}%"])
        print_table(f"WikiQA human labels (232 pairs, human mean {human.mean():.3f}): "
                    f"coverage of 95% intervals, {args.reps} draws of 232 pairs per row, "
                    f"seed {args.seed}",
                    ["judge (real proxy)", "proxy mean", "labels", "PPI++", "labels only",
                     "judge only", "width PPI++", "width labels", "PPI++ wider"], rows)
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
