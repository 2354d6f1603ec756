"""Benchmark of the metrics and statistics layer (a script that prints tables, not a test).

(a) Batch IR evaluation, 10,000 queries x 1,000 ranked documents with graded qrels
    (seeded synthetic): ``evaluate_run`` vs pytrec_eval called directly vs ranx, in one
    process on the same data. Goal: ours <= 1.2 x pytrec_eval (conversion included),
    values identical to pytrec_eval (<= 1e-9).
(b) A report's statistics: 400 cells (20 metrics x 20 categories of 50..1,000 items),
    95% BCa intervals with 10,000 resamples: ``batch_bootstrap_ci`` vs
    ``scipy.stats.bootstrap`` cell by cell (timed on a sample of cells, extrapolated),
    and one interval vs a plain Python bootstrap loop (percentile). Goal: <= 2 s.

Run: ``python benchmarks/bench_metrics.py`` (about five minutes and 2 GB of memory;
``--queries 2000`` for a quicker look). Times are the best of ``--repeat`` runs because
the machine may be shared.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_ragbench.metrics import evaluate_run
from pytest_ragbench.stats import batch_bootstrap_ci, bootstrap_ci

MEASURES = ["nDCG@10", "P@5", "map", "recip_rank", "R@100"]
PYTREC = {"nDCG@10": "ndcg_cut_10", "P@5": "P_5", "map": "map", "recip_rank": "recip_rank",
          "R@100": "recall_100"}
RANX = {"nDCG@10": "ndcg@10", "P@5": "precision@5", "map": "map", "recip_rank": "mrr",
        "R@100": "recall@100"}


def best_of(repeat: int, func: Callable[[], Any]) -> tuple[float, Any]:
    """Smallest wall time of ``repeat`` calls, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    print(line)
    print("-" * len(line))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


# ---------------------------------------------------------------- (a) IR


def synthetic_collection(queries: int, depth: int, seed: int = 0) -> tuple[dict, dict]:
    """Graded qrels (30 judgments a query, grades 0-3) and a run with some score ties."""
    rng = np.random.default_rng(seed)
    pool = [f"doc{i}" for i in range(20_000)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        qid = f"q{q}"
        docs = rng.choice(len(pool), depth, replace=False)
        scores = np.round(rng.normal(0, 1, depth), 3)  # 3 decimals: ties happen
        run[qid] = {pool[d]: s for d, s in zip(docs.tolist(), scores.tolist(), strict=True)}
        judged = np.concatenate([docs[rng.choice(depth, 20, replace=False)],
                                 rng.choice(len(pool), 10, replace=False)])
        qrels[qid] = {pool[d]: int(g) for d, g in zip(judged.tolist(),
                                                      rng.integers(0, 4, judged.size).tolist(),
                                                      strict=True)}
    return qrels, run


def pytrec_direct(qrels: dict, run: dict) -> tuple[dict[str, float], dict]:
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "P.5", "map",
                                                       "recip_rank", "recall.100"})
    per_query = evaluator.evaluate(run)
    means = {name: pytrec_eval.compute_aggregated_measure(
        key, [values[key] for values in per_query.values()]) for name, key in PYTREC.items()}
    return means, per_query


def bench_ir(queries: int, depth: int, repeat: int) -> None:
    start = time.perf_counter()
    qrels, run = synthetic_collection(queries, depth)
    print(f"(a) built {queries:,} queries x {depth:,} documents in "
          f"{time.perf_counter() - start:.1f} s")

    t_ours = t_pytrec = float("inf")
    ours: dict[str, Any] = {}
    theirs: dict[str, float] = {}
    theirs_per: dict[str, dict[str, float]] = {}
    for _ in range(repeat):  # interleaved, so both see the same machine load
        t, (theirs, theirs_per) = best_of(1, lambda: pytrec_direct(qrels, run))
        t_pytrec = min(t_pytrec, t)
        t, ours = best_of(1, lambda: evaluate_run(qrels, run, MEASURES))
        t_ours = min(t_ours, t)
    ours_per: dict[str, Any] = evaluate_run(qrels, run, MEASURES, per_query=True)
    mean_diff = max(abs(ours[m] - theirs[m]) for m in MEASURES)
    query_diff = max(abs(ours_per[q][m] - theirs_per[q][PYTREC[m]])
                     for q in theirs_per for m in MEASURES)

    rows = [["pytrec_eval direct", f"{t_pytrec:.2f}", "1.00", "-", "-"],
            ["evaluate_run (ours)", f"{t_ours:.2f}", f"{t_ours / t_pytrec:.2f}",
             f"{mean_diff:.1e}", f"{query_diff:.1e}"]]
    try:
        from ranx import Qrels, Run, evaluate
    except ImportError:
        rows.append(["ranx", "not installed", "", "", ""])
    else:
        tiny = {"q": {"a": 1}}
        start = time.perf_counter()
        evaluate(Qrels(tiny), Run({"q": {"a": 1.0, "b": 0.5}}), list(RANX.values()))
        jit = time.perf_counter() - start

        def ranx_eval() -> tuple[dict, Any]:
            ranx_run = Run(run)
            return evaluate(Qrels(qrels), ranx_run, list(RANX.values())), ranx_run

        t_ranx, (ranx_means, ranx_run) = best_of(repeat, ranx_eval)
        ranx_mean_diff = max(abs(float(ranx_means[RANX[m]]) - theirs[m]) for m in MEASURES)
        ranx_query_diff = max(abs(float(ranx_run.scores[RANX[m]][q]) - theirs_per[q][PYTREC[m]])
                              for q in theirs_per for m in MEASURES)
        rows.append([f"ranx (warm; first call JIT {jit:.1f} s)", f"{t_ranx:.2f}",
                     f"{t_ranx / t_pytrec:.2f}", f"{ranx_mean_diff:.1e}",
                     f"{ranx_query_diff:.1e}"])
    table(f"(a) IR batch evaluation, {', '.join(MEASURES)} (best of {repeat}; "
          "differences vs pytrec_eval)",
          ["implementation", "time s", "x pytrec", "max |mean diff|", "max |per-query diff|"],
          rows)
    verdict = "met" if t_ours <= 1.2 * t_pytrec and query_diff <= 1e-9 else "NOT met"
    print(f"goal (ours <= 1.2 x pytrec_eval, values within 1e-9): {verdict}")


# ---------------------------------------------------------------- (b) statistics


def report_cells(seed: int = 1) -> list[np.ndarray]:
    """20 categories of 50..1,000 items x 20 metrics of assorted shapes."""
    rng = np.random.default_rng(seed)
    cells = []
    for size in rng.integers(50, 1001, 20):
        for metric in range(20):
            kind = metric % 4
            if kind == 0:
                cell = (rng.random(size) < rng.uniform(0.3, 0.95)).astype(float)  # pass/fail
            elif kind == 1:
                cell = rng.beta(rng.uniform(0.5, 5), rng.uniform(0.5, 5), size)
            elif kind == 2:
                cell = np.where(rng.random(size) < 0.3, 0.0, rng.random(size))  # many zeros
            else:
                cell = np.round(rng.random(size) * 100) / 100  # judge grades 0..1
            cells.append(cell)
    return cells


def python_loop_interval(scores: np.ndarray, confidence: float = 0.95) -> tuple[float, ...]:
    """A plain Python percentile bootstrap: 10,000 resamples with np.random.choice."""
    mean = np.mean(scores)
    bootstrap_means = []
    for _ in range(10000):
        sample = np.random.choice(scores, size=len(scores), replace=True)
        bootstrap_means.append(np.mean(sample))
    alpha = 1 - confidence
    lower = np.percentile(bootstrap_means, 100 * alpha / 2)
    upper = np.percentile(bootstrap_means, 100 * (1 - alpha / 2))
    return float(mean), float(lower), float(upper)


def bench_stats(sample_cells: int, repeat: int) -> None:
    from scipy import stats as sps

    cells = report_cells()
    sizes = sorted({len(c) for c in cells})
    print(f"\n(b) {len(cells)} cells, {len(sizes)} distinct lengths from {sizes[0]} to "
          f"{sizes[-1]} (sum of distinct lengths {sum(sizes):,})")
    t_batch, ours = best_of(repeat, lambda: batch_bootstrap_ci(cells, seed=0))

    picks = np.random.default_rng(7).choice(len(cells), sample_cells, replace=False)
    t_sample = 0.0
    ours_vs_scipy = scipy_vs_scipy = 0.0  # largest endpoint difference / interval width

    def scipy_ci(cell: np.ndarray, seed: int) -> Any:
        return sps.bootstrap((cell,), np.mean, n_resamples=10_000, method="BCa",
                             rng=np.random.default_rng(seed)).confidence_interval

    for k, index in enumerate(picks):
        cell = cells[index]
        start = time.perf_counter()
        ref = scipy_ci(cell, 1000 + k)
        t_sample += time.perf_counter() - start
        other = scipy_ci(cell, 5000 + k)  # scipy's own Monte-Carlo spread, for scale
        width = ref.high - ref.low
        ours_vs_scipy = max(ours_vs_scipy, abs(ours[index].low - ref.low) / width,
                            abs(ours[index].high - ref.high) / width)
        scipy_vs_scipy = max(scipy_vs_scipy, abs(other.low - ref.low) / width,
                             abs(other.high - ref.high) / width)
    per_cell = t_sample / sample_cells
    t_scipy = per_cell * len(cells)

    one = cells[int(np.argmax([len(c) for c in cells]))]
    t_loop, _ = best_of(1, lambda: python_loop_interval(one))
    t_single, _ = best_of(repeat, lambda: bootstrap_ci(one))
    t_batch_one, _ = best_of(repeat, lambda: batch_bootstrap_ci([one]))

    rows = [
        ["batch_bootstrap_ci, all cells (ours)", f"{t_batch:.2f}",
         f"{t_batch / len(cells) * 1e3:.1f}", "1.0"],
        [f"scipy.stats.bootstrap cell by cell (timed {sample_cells} cells, extrapolated)",
         f"{t_scipy:.1f}", f"{per_cell * 1e3:.1f}", f"{t_scipy / t_batch:.1f}"],
    ]
    table("(b) 95% BCa intervals, 10,000 resamples (best of "
          f"{repeat}); speed-up relative to ours",
          ["computation", "total s", "ms / cell", "x slower than ours"], rows)
    print(f"largest endpoint difference over the {sample_cells} sampled cells, as a share of "
          f"the interval width: ours vs scipy {100 * ours_vs_scipy:.1f}%, scipy vs scipy with "
          f"another seed {100 * scipy_vs_scipy:.1f}% (pass/fail cells move by whole steps)")
    verdict = "met" if t_batch <= 2.0 else "NOT met"
    print(f"goal (all {len(cells)} cells <= 2 s): {verdict}")

    rows = [["plain Python bootstrap loop (percentile)", f"{t_loop * 1e3:.0f}", "1.0"],
            ["bootstrap_ci (scipy.stats.bootstrap, BCa)", f"{t_single * 1e3:.0f}",
             f"{t_loop / t_single:.1f}"],
            ["batch_bootstrap_ci, this one cell (BCa)", f"{t_batch_one * 1e3:.0f}",
             f"{t_loop / t_batch_one:.1f}"],
            ["batch_bootstrap_ci, per cell within the 400 (BCa)",
             f"{t_batch / len(cells) * 1e3:.1f}", f"{t_loop / (t_batch / len(cells)):.0f}"]]
    table(f"one interval of n = {len(one)} scores, 10,000 resamples",
          ["computation", "ms", "x faster than the loop"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample-cells", type=int, default=40)
    parser.add_argument("--skip-ir", action="store_true")
    parser.add_argument("--skip-stats", action="store_true")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if not args.skip_ir:
        bench_ir(args.queries, args.depth, args.repeat)
    if not args.skip_stats:
        bench_stats(args.sample_cells, args.repeat)


if __name__ == "__main__":
    main()
