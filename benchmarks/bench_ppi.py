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

Then the same on real human labels: WikiQA's 232 labelled question/answer pairs
(../shared/oracles/wikiqa-labels; human mean exactly 0.5), each repetition a sample of
232 pairs drawn with replacement with ``n`` of them labeled, and two real offline
proxies as the judge: the MiniLM embedder's cosine of question and answer sentence
(needs the ``embed`` extra) and the SQuAD token F1 of the answer against the question.

Run: ``python benchmarks/bench_ppi.py`` (2,000 repetitions per row, fixed seed, about a
minute on a quiet machine, plus the embedder's load); ``--reps 300`` for a quick look.
The binomial standard error of a coverage of 0.95 over 2,000 repetitions is 0.005.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats as sps

from pytest_ragbench.stats import ppi_mean_ci, t_ci

HUMAN_MEAN = 0.6
WIKIQA = (Path(__file__).resolve().parents[2] / "shared" / "oracles" / "wikiqa-labels"
          / "ragas-wikiqa-first-half.csv")
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
        from pytest_ragbench.system.embedder import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
        cosine = (embedder.embed(questions) * embedder.embed(answers)).sum(axis=1)
        proxies["MiniLM cosine (answer vs question)"] = cosine.astype(float)
    except ImportError as exc:
        print(f"(no embedder proxy: {exc})")
    return human, proxies


def wikiqa_coverage(human: np.ndarray, proxy: np.ndarray, labels: int, reps: int, seed: int
                    ) -> dict[str, float]:
    """Coverage of 0.5 by the PPI and judge-only intervals, and mean PPI / human-only widths."""
    rng = np.random.default_rng(seed)
    target = float(human.mean())
    hits = {"ppi": 0, "judge": 0}
    widths = {"ppi": 0.0, "human": 0.0}
    for _ in range(reps):
        sample = rng.integers(0, human.size, human.size)
        chosen = rng.choice(human.size, labels, replace=False)
        f, y = proxy[sample], human[sample]
        ppi = ppi_mean_ci(f, f[chosen], y[chosen])
        judge = t_ci(f)
        people = t_ci(y[chosen])
        hits["ppi"] += ppi.low <= target <= ppi.high
        hits["judge"] += judge.low <= target <= judge.high
        widths["ppi"] += ppi.high - ppi.low
        widths["human"] += people.high - people.low
    return {**{k: v / reps for k, v in hits.items()},
            **{f"width_{k}": v / reps for k, v in widths.items()}}


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--labels", default="10,20,50,100,200")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wikiqa", type=Path, default=WIKIQA,
                        help="the WikiQA label CSV (skipped when absent)")
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
    print(f"Simulation: coverage of 95% intervals of the human mean ({HUMAN_MEAN}), "
          f"{args.reps} repetitions per row, seed {args.seed}")
    print_table(header, rows)
    if not args.wikiqa.is_file():
        print(f"\n(WikiQA labels not found at {args.wikiqa}: real-label table skipped)")
        return
    human, proxies = wikiqa_proxies(args.wikiqa)
    rows = []
    for name, proxy in proxies.items():
        for n in (10, 20, 30, 60, 100):
            result = wikiqa_coverage(human, proxy, n, args.reps, args.seed + n)
            rows.append([name, f"{proxy.mean():.3f}", str(n), f"{result['ppi']:.3f}",
                         f"{result['judge']:.3f}", f"{result['width_ppi']:.3f}",
                         f"{result['width_human']:.3f}"])
    print(f"\nWikiQA human labels (232 pairs, human mean {human.mean():.3f}): coverage "
          f"of 95% intervals, {args.reps} draws of 232 pairs per row, seed {args.seed}")
    print_table(["judge (real proxy)", "proxy mean", "labels", "PPI", "judge only",
                 "PPI width", "human-only width"], rows)


if __name__ == "__main__":
    main()
