"""Simulated coverage of the report's 95% intervals, and how often its ci-lower gate passes.

    python benchmarks/bench_intervals.py               # 4000 sessions per cell (minutes)
    python benchmarks/bench_intervals.py --sessions 400 --resamples 2000   # a quick look

Every number comes from the report's own code (``pytest_ragbench.stats.intervals.cell_intervals``,
what ``results.json`` holds for a metric cell), on sessions drawn with a fixed seed:

1. coverage: the share of sessions whose 95% interval holds the true mean, for 0/1 metrics
   (Bernoulli p = 0.1, 0.5, 0.9, 0.97) and scores in [0, 1] (Beta shapes), n = 2 ... 100.
   The aim is [0.92, 0.99] from n = 5. A Bernoulli cell can only take the values the
   binomial lattice allows: at n = 5 a non-randomised interval covers either 0.919 or
   0.991 of sessions at p = 0.1 or 0.9, and 0.859, 0.867 or 0.992 at p = 0.97, nothing
   between, so no interval hits the aim there; the report's takes the safe side (0.991).
2. gate: the share of sessions a ``--ragbench-gate ci-lower`` gate passes when the true mean
   sits exactly at its bound (it should be at most 2.5%, give or take the simulation error
   printed below the table), and the price: how far below the true mean the gate's bound
   lies on average (Clopper-Pearson for 0/1 metrics, the betting bound for scores, both
   valid for every distribution; the displayed t/BCa bound alone would pass up to 9% of
   sessions on scores piled near 1).
3. t against BCa: the coverage of plain t, the report's skew-corrected t (Hall 1992) and
   BCa for continuous scores by n, and how often each lower bound lies above the true
   mean: the reason the report corrects t for skewness and switches to BCa at n = 30
   (``intervals.BCA_MIN``).
4. a skewed two-valued score, 0.99 or 0 (0 for a share q of the items), at n = 40, 70 and
   120, exactly (a binomial sum over the number of zeros): the report's interval (the 0/1
   interval of the share of 0.99, ``intervals``' two-value rule) against BCa (ties with
   the estimate counted within a relative 1e-12, so its interval no longer depends on the
   cells batched beside it); the aim is [0.92, 0.99]. Where no 0 was drawn the cell does
   not vary and both get the no-spread interval (the Bernoulli worst case over [0, 1]).
5. Wilson against the report's 0/1 interval, exactly (binomial sums, no simulation) over a
   grid of p in [0.005, 0.995] for every n from 5 to 100: the lowest coverage and the share
   of (n, p) in [0.92, 0.99]. Brown, Cai & DasGupta's Poisson bounds at 1-2 successes or
   failures remove Wilson's dips near 0 and 1.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from pytest_ragbench.stats import core as stats
from pytest_ragbench.stats import intervals

SEED = 20260611
SIZES = (2, 3, 5, 10, 30, 38, 100)
GATE_SIZES = (5, 10, 30, 38, 100)
BERNOULLI = (0.1, 0.5, 0.9, 0.97)
# Beta(a, b): scores of every shape a [0, 1] metric shows: skewed low, skewed high, piled at
# both ends, bell-shaped, piled near 1 (the hardest for a lower bound).
BETAS = ((2.0, 5.0), (5.0, 2.0), (0.5, 0.5), (2.0, 2.0), (8.0, 1.0))

Draw = Callable[[np.random.Generator, int, int], np.ndarray]


def shapes() -> list[tuple[str, float, Draw]]:
    """(label, true mean, draw(rng, sessions, n)) of every simulated metric."""
    found: list[tuple[str, float, Draw]] = []
    for p in BERNOULLI:
        found.append((f"0/1 p={p:g}", p,
                      lambda rng, k, n, p=p: (rng.random((k, n)) < p).astype(float)))
    for a, b in BETAS:
        found.append((f"Beta({a:g},{b:g})", a / (a + b),
                      lambda rng, k, n, a=a, b=b: rng.beta(a, b, (k, n))))
    return found


def run_cells(samples: np.ndarray, resamples: int, seed: int) -> list[intervals.CellInterval]:
    """The report's interval of each row (a session's values of a metric in [0, 1])."""
    cells = [intervals.CellData(row, None, 0.0, 1.0) for row in samples]
    return intervals.cell_intervals(cells, n_resamples=resamples, seed=seed)


def simulate(sessions: int, resamples: int, sizes: tuple[int, ...]
             ) -> dict[tuple[str, int], tuple[float, float, float, str, float, float]]:
    """Per shape and n: coverage, gate pass rate, displayed-bound pass rate, methods, and
    how far below the true mean the gate's bound and the displayed lower bound lie."""
    rng = np.random.default_rng(SEED)
    out = {}
    for label, mean, draw in shapes():
        for n in sizes:
            found = run_cells(draw(rng, sessions, n), resamples, int(rng.integers(1 << 31)))
            usable = [c for c in found if c.low is not None]
            covered = sum(c.low <= mean <= c.high for c in usable)  # type: ignore[operator]
            gate = sum(c.gate_low >= mean for c in usable)  # type: ignore[operator]
            shown = sum(c.low >= mean for c in usable)  # type: ignore[operator]
            methods = sorted({c.method or "none" for c in found})
            total = max(1, len(usable))
            gate_gap = float(np.mean([mean - c.gate_low for c in usable])) if usable else math.nan
            shown_gap = float(np.mean([mean - c.low for c in usable])) if usable else math.nan
            out[(label, n)] = (covered / total, gate / sessions, shown / sessions,
                               "/".join(methods), gate_gap, shown_gap)
    return out


T_SIZES = (5, 10, 20, 30, 50)


def t_against_bca(sessions: int, resamples: int
                  ) -> dict[tuple[str, int], tuple[float, ...]]:
    """Coverage of plain t, corrected t and BCa; how often each lower bound is above the mean."""
    from scipy import stats as sps

    rng = np.random.default_rng(SEED + 1)
    out = {}
    for label, mean, draw in shapes()[len(BERNOULLI):]:
        for n in T_SIZES:
            samples = draw(rng, sessions, n)
            centre = samples.mean(axis=1)
            margin = sps.t.ppf(0.975, n - 1) * samples.std(axis=1, ddof=1) / math.sqrt(n)
            low, high = np.clip(centre - margin, 0, 1), np.clip(centre + margin, 0, 1)
            corrected = [intervals.t_interval(row, 0.0, 1.0) for row in samples]
            bca = stats.batch_bootstrap_ci(list(samples), n_resamples=resamples,
                                           seed=int(rng.integers(1 << 31)))
            out[(label, n)] = (
                float(np.mean((low <= mean) & (mean <= high))),
                float(np.mean([c.low <= mean <= c.high for c in corrected])),
                float(np.mean([c.low <= mean <= c.high for c in bca])),
                float(np.mean(low > mean)),
                float(np.mean([c.low > mean for c in corrected])),
                float(np.mean([c.low > mean for c in bca])))
    return out


SKEWED_SIZES = (40, 70, 120)
SKEWED_ZEROS = (0.01, 0.02, 0.03, 0.05, 0.1, 0.2)


def skewed_two_values(resamples: int) -> dict[tuple[float, int], tuple[float, float]]:
    """Exact coverage of the report's interval and of BCa for a score of 0.99 or 0.

    A session's cell is fixed by its number k of zeros, so the coverage is the binomial
    sum over k of whether the cell with k zeros holds the mean (no simulation; BCa's own
    resamples are seeded).
    """
    from scipy import stats as sps

    out = {}
    for n in SKEWED_SIZES:
        cells = [[0.99] * (n - k) + [0.0] * k for k in range(n + 1)]
        shown = intervals.cell_intervals([intervals.CellData(c, None, 0.0, 1.0)
                                          for c in cells], n_resamples=resamples, seed=SEED)
        # without the two-value rule: BCa where both values occur (0 < k < n), else the
        # same no-spread interval (Bernoulli worst case)
        bca = stats.batch_bootstrap_ci(cells[1:n], n_resamples=resamples, seed=SEED)
        before = [(shown[0].low, shown[0].high), *((c.low, c.high) for c in bca),
                  (shown[n].low, shown[n].high)]
        for zeros in SKEWED_ZEROS:
            mean = 0.99 * (1 - zeros)
            weights = sps.binom.pmf(np.arange(n + 1), n, zeros)
            out[(zeros, n)] = (
                float(sum(w for w, c in zip(weights, shown, strict=True)
                          if c.low <= mean <= c.high)),  # type: ignore[operator]
                float(sum(w for w, (low, high) in zip(weights, before, strict=True)
                          if low <= mean <= high)))
    return out


def exact_bernoulli_grid() -> list[list[str]]:
    """Exact coverage of Wilson and of the report's 0/1 interval over a grid of p, by n."""
    from scipy import stats as sps

    grid = np.linspace(0.005, 0.995, 199)
    rows = [["n", "Wilson: lowest", "in [0.92, 0.99]", "report: lowest", "in [0.92, 0.99]"]]
    for first, last in ((5, 10), (11, 30), (31, 100)):
        found: dict[str, list[float]] = {"wilson": [], "report": []}
        for n in range(first, last + 1):
            weights = sps.binom.pmf(np.arange(n + 1)[:, None], n, grid[None, :])
            plain = [intervals.wilson(x / n, n) for x in range(n + 1)]
            table = intervals.cell_intervals([intervals.CellData([1.0] * x + [0.0] * (n - x))
                                              for x in range(n + 1)])
            shown = [(c.low, c.high) for c in table]
            for name, bounds in (("wilson", plain), ("report", shown)):
                low = np.array([b[0] for b in bounds])[:, None]
                high = np.array([b[1] for b in bounds])[:, None]
                inside = (low <= grid[None, :]) & (grid[None, :] <= high)
                found[name].extend((weights * inside).sum(axis=0))
        cells = [f"{first}-{last}"]
        for name in ("wilson", "report"):
            values = np.array(found[name])
            cells += [f"{values.min():.3f}",
                      f"{np.mean((values >= 0.92) & (values <= 0.99)):.1%}"]
        rows.append(cells)
    return rows


def print_table(title: str, rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(title)
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4000, help="sessions per cell")
    parser.add_argument("--resamples", type=int, default=10_000,
                        help="bootstrap resamples (the report uses 10,000)")
    args = parser.parse_args()
    started = time.perf_counter()
    found = simulate(args.sessions, args.resamples, SIZES)
    labels = [label for label, _, _ in shapes()]
    error = 2 * math.sqrt(0.025 * 0.975 / args.sessions)
    cover_error = 2 * math.sqrt(0.95 * 0.05 / args.sessions)

    rows = [["metric", *(f"n={n}" for n in SIZES)]]
    for label in labels:
        cells = []
        for n in SIZES:
            coverage = found[(label, n)][0]
            flag = "" if n < 5 or 0.92 <= coverage <= 0.99 else "!"
            cells.append(f"{coverage:.3f}{flag}")
        rows.append([label, *cells])
    print_table(f"coverage of the report's 95% CI ({args.sessions} sessions per cell, "
                f"+-{cover_error:.3f} at 0.95; ! outside [0.92, 0.99] from n=5)", rows)

    rows = [["metric", *(f"n={n}" for n in SIZES)]]
    for label in labels:
        rows.append([label, *(found[(label, n)][3] for n in SIZES)])
    print_table("method the report chose (per cell; 'none' below n=2)", rows)

    rows = [["metric (bound = true mean)", *(f"n={n}" for n in GATE_SIZES)]]
    for label in labels:
        cells = []
        for n in GATE_SIZES:
            gate, shown = found[(label, n)][1:3]
            flag = "!" if gate > 0.025 + error else ""
            cells.append(f"{100 * gate:.1f}%{flag} ({100 * shown:.1f}%)")
        rows.append([label, *cells])
    print_table(f"ci-lower gate: sessions passed at the bound (aim <= 2.5% + {100 * error:.1f}% "
                "simulation error; ! above; in brackets: had it checked the displayed "
                "95% CI's lower bound)", rows)

    rows = [["metric", *(f"n={n}" for n in GATE_SIZES)]]
    for label in labels:
        rows.append([label, *(f"{found[(label, n)][4]:.3f} ({found[(label, n)][5]:.3f})"
                              for n in GATE_SIZES)])
    print_table("the price of that guarantee: mean distance from the true mean down to the "
                "gate's bound (in brackets: to the displayed 95% CI's lower bound); a gate "
                "passes when the true mean exceeds its bound by about this much", rows)

    compared = t_against_bca(args.sessions, args.resamples)
    rows = [["scores", *(f"n={n} t / Hall t / BCa" for n in T_SIZES)]]
    for label in labels[len(BERNOULLI):]:
        rows.append([label, *(" / ".join(f"{v:.3f}" for v in compared[(label, n)][:3])
                              for n in T_SIZES)])
        rows.append(["  lower bound above", *(
            " / ".join(f"{100 * v:.1f}%" for v in compared[(label, n)][3:])
            for n in T_SIZES)])
    print_table("coverage of plain t, skew-corrected t (Hall) and BCa for continuous scores, "
                "and how often the lower bound is above the true mean (aim 2.5%); the report "
                "uses Hall's t below n=30, BCa from there", rows)

    skewed = skewed_two_values(args.resamples)
    rows = [["share of zeros", *(f"n={n} report / BCa" for n in SKEWED_SIZES)]]
    for zeros in SKEWED_ZEROS:
        cells = []
        for n in SKEWED_SIZES:
            shown, bca = skewed[(zeros, n)]
            flag = "" if 0.92 <= shown <= 0.99 else "!"
            cells.append(f"{shown:.3f}{flag} / {bca:.3f}")
        rows.append([f"{zeros:g}", *cells])
    print_table("a score of 0.99 or 0, exact coverage (a binomial sum over the number of "
                "zeros) of the report's interval (two values: the 0/1 interval of the share "
                "of 0.99; ! outside [0.92, 0.99]) and of BCa with ties counted within 1e-12",
                rows)

    print_table("0/1 metrics, exact coverage over p = 0.005 ... 0.995 for every n in the "
                "range: Wilson against the report's (Wilson with Poisson bounds at 1-2 "
                "successes or failures)", exact_bernoulli_grid())
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
