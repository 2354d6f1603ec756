"""The 95% interval of a report cell, chosen from its data, and the bound its gate checks.

The interval (``low``, ``high``, ``method``):

- fewer than 2 values (or clusters): none, ``"n too small"``;
- 0/1 values: Wilson's score interval of a proportion (the bootstrap covers a Bernoulli
  mean at p = 0.1 and n = 10 only 65% of the time; Wilson 93%), with Brown, Cai &
  DasGupta's Poisson bound for 1 or 2 (3 from n = 51) successes or failures, where the
  plain score interval dips (at p = 0.97 and n = 5 it covers 86% of sessions; modified 99%);
- a bounded metric whose values do not vary (with clusters: whose clusters' means do
  not): the Wilson interval of its mean rescaled to [0, 1], as if it were a proportion
  of as many trials as there are clusters. A Bernoulli variable is the most spread-out one with
  that mean, so this is the honest worst case; only a metric without a known range keeps a
  point (no spread seen, none to assume);
- from :data:`BCA_MIN` clusters, values that take exactly two distinct values a < b (a
  score of 0.99 or 0, a grade of 50 or 100): the 0/1 interval of the share of b, mapped
  onto [a, b] (see :func:`_two_values`);
- other values: Student's t with Hall's (1992) skewness correction, clipped to the metric's
  range, below :data:`BCA_MIN` clusters (plain t covers scores piled near 1, Beta(8, 1),
  90% of the time at n = 5; corrected 93%), and the BCa bootstrap from there
  (``benchmarks/bench_intervals.py`` shows why: below 30 BCa covers clearly less, 0.82-0.89
  at n = 5 and 0.89-0.95 at n = 10; from 30 it is within about 0.02 of t).

The gate bounds (``gate_low``, ``gate_high``): one-sided 97.5% bounds for
``--ragbench-gate ci-lower``, which must pass at most 2.5% of the sessions whose true
mean sits exactly at the bound:

- 0/1 values: Clopper-Pearson, the exact binomial bound (Wilson's lower bound passes
  up to 17% of such sessions, at p = 0.04 and n = 5);
- other values of a bounded metric: the more pessimistic of the interval's bound and the
  betting bound (:func:`betting_lower`), valid for every distribution of scores in the
  range at every n; t and BCa alone let a gate pass 4-10% of sessions on scores piled near
  one end of the range (Beta(8, 1), n = 5-30);
- otherwise the interval's own bound.

Clusters: values that share a cluster key (the cases of one conversation or source; the
systems' answers to one case in the pooled cell) are not independent. The t interval uses
the cluster-robust variance of the mean with G - 1 degrees of freedom, the bootstrap
resamples whole clusters, and Wilson uses the effective sample size p(1-p)/Var(mean),
at most n (the number of clusters when p is 0 or 1: the worst case, clusters that agree
within). Pure statistics: no pytest, numpy and scipy imported inside functions.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from pytest_ragbench.stats import core as stats

if TYPE_CHECKING:
    import numpy as np

CONFIDENCE = 0.95
BCA_MIN = 30
"""Clusters (items, when every item is its own) from which the BCa bootstrap is used."""

N_TOO_SMALL = "n too small"
NO_SPREAD = "no spread: Wilson interval of the rescaled mean (Bernoulli worst case)"
NO_RANGE = "no spread and no known range: a point"
TWO_VALUES = "two values: Wilson interval of the share of the higher one"


@dataclass(frozen=True)
class CellData:
    """The values of a cell, their cluster keys (None: each value its own) and range."""

    values: Sequence[float]
    clusters: Sequence[Hashable | None] | None = None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class CellInterval:
    """A cell's interval, the bounds its gate checks, and how they were made."""

    low: float | None = None
    high: float | None = None
    method: str | None = None
    gate_low: float | None = None
    gate_high: float | None = None
    gate_method: str | None = None
    note: str | None = None
    n_clusters: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return asdict(self)


@dataclass(frozen=True)
class _Cell:
    """A cell prepared for the interval: cluster sums and sizes, mean, its variance."""

    values: np.ndarray
    sums: np.ndarray
    sizes: np.ndarray
    clustered: bool
    mean: float
    variance: float  # of the mean: cluster-robust, s^2 / n without clusters
    low: float | None
    high: float | None

    @property
    def groups(self) -> int:
        return int(self.sums.size)

    @property
    def binary(self) -> bool:
        in_unit = (self.low in (None, 0.0)) and (self.high in (None, 1.0))
        return in_unit and bool(((self.values == 0.0) | (self.values == 1.0)).all())

    @property
    def spread(self) -> bool:
        """Whether the mean has a standard error beyond float noise.

        Without clusters: whether the values vary. With clusters: whether the clusters'
        means do (values that vary only within clusters leave nothing to estimate from).
        """
        return math.sqrt(self.variance) > 1e-12 * max(1.0, abs(self.mean))

    @property
    def bounded(self) -> bool:
        return self.low is not None and self.high is not None and self.high > self.low


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def prepare(cell: CellData) -> _Cell:
    """Group a cell's values by cluster and compute the mean and its variance."""
    import numpy as np

    values = stats._array(cell.values, "cell values")
    if values.size == 0:
        raise ValueError("a cell needs at least one value")
    keys = cell.clusters
    if keys is not None and len(keys) != values.size:
        raise ValueError(f"{len(keys)} cluster keys for {values.size} values")
    index: dict[Hashable, int] = {}
    labels = np.empty(values.size, dtype=np.int64)
    for i in range(values.size):
        key = keys[i] if keys is not None else None
        labels[i] = index.setdefault(("item", i) if key is None else ("key", key), len(index))
    groups = len(index)
    sums = np.bincount(labels, weights=values, minlength=groups)
    sizes = np.bincount(labels, minlength=groups).astype(np.float64)
    mean = float(values.mean())
    if groups > 1:
        residual = sums - mean * sizes
        variance = groups / (groups - 1) * float((residual**2).sum()) / values.size**2
    else:
        variance = 0.0
    return _Cell(values, sums, sizes, groups < values.size, mean, variance,
                 _finite(cell.low), _finite(cell.high))


# ---------------------------------------------------------------- closed forms


def wilson(p: float, n: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval of a proportion ``p`` seen in ``n`` (maybe effective) trials."""
    z = stats.normal_quantile(confidence)
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    high = 1.0 if p >= 1 else min(1.0, centre + half)
    return low, high


def _poisson_cutoff(n: float) -> float:
    """Brown, Cai & DasGupta's x*: up to how many successes the Poisson bound is used."""
    return 2.0 if n <= 50 else 3.0


def _snap(count: float) -> float:
    """A count within float noise of a whole number, as that number."""
    nearest = round(count)
    return float(nearest) if abs(count - nearest) < 1e-9 * max(1.0, abs(count)) else count


def modified_wilson(p: float, n: float, confidence: float = CONFIDENCE
                    ) -> tuple[float, float]:
    """Wilson's interval with the Poisson bounds near 0 and 1 (Brown, Cai & DasGupta 2001).

    With only 1 or 2 (3 from n = 51) successes the score interval's lower bound is too
    high, and its coverage dips to about 0.84 for p near 0; there the lower bound becomes
    the Poisson one, chi2_{2x}(1 - confidence) / (2n) (Stat. Sci. 16(2), section 4.1.1),
    and likewise the upper bound for 1 to x* failures. ``n`` may be an effective number.
    """
    from scipy.special import chdtri  # chi-square's inverse survival function

    low, high = wilson(p, n, confidence)
    cutoff = _poisson_cutoff(n)
    # p is a mean: p * n may be 2.0000000000000004 where 2 items passed
    successes, failures = (_snap(count) for count in (p * n, (1 - p) * n))
    if 0 < successes <= cutoff:
        low = min(low, float(chdtri(2 * successes, confidence)) / (2 * n))
    if 0 < failures <= cutoff:
        high = max(high, 1 - float(chdtri(2 * failures, confidence)) / (2 * n))
    return low, high


def clopper_pearson(p: float, n: float, confidence: float = CONFIDENCE
                    ) -> tuple[float, float]:
    """Clopper-Pearson's exact interval of ``p`` observed in ``n`` trials (n may be effective)."""
    from scipy.special import betaincinv

    alpha = (1 - confidence) / 2
    x = p * n
    low = 0.0 if x <= 0 else float(betaincinv(x, n - x + 1, alpha))
    high = 1.0 if x >= n else float(betaincinv(x + 1, n - x, 1 - alpha))
    return low, high


def _df_factor(groups: int, confidence: float) -> float:
    """Korn-Graubard's (z / t_{G-1})^2: the effective n shrinks with few clusters."""
    from scipy.special import stdtrit  # scipy.stats.t.ppf, without importing scipy.stats

    if groups < 2:
        return 1.0
    z = stats.normal_quantile(confidence)
    return (z / float(stdtrit(groups - 1, (1 + confidence) / 2))) ** 2


def _rescale(cell: _Cell, bounds: tuple[float, float]) -> tuple[float, float]:
    assert cell.low is not None and cell.high is not None
    width = cell.high - cell.low
    return cell.low + bounds[0] * width, cell.low + bounds[1] * width


def _clip(cell: _Cell, low: float, high: float) -> tuple[float, float]:
    if cell.low is not None:
        low, high = max(low, cell.low), max(high, cell.low)
    if cell.high is not None:
        low, high = min(low, cell.high), min(high, cell.high)
    return low, high


def _proportion(cell: _Cell, confidence: float) -> CellInterval:
    """0/1 values: Wilson, and Clopper-Pearson for the gate (effective n with clusters)."""
    p = cell.mean
    n = float(cell.values.size)
    gate_n = n
    if cell.clustered:
        if 0.0 < p < 1.0:
            effective = p * (1 - p) / cell.variance if cell.variance > 0 else n
        else:  # every cluster all 0 or all 1: as many independent values as clusters
            effective = float(cell.groups)
        n = min(n, max(1.0, effective))
        gate_n = n * _df_factor(cell.groups, confidence)
    low, high = modified_wilson(p, n, confidence)
    gate_low, gate_high = clopper_pearson(p, gate_n, confidence)
    return CellInterval(low, high, "wilson", gate_low, gate_high, "clopper-pearson",
                        n_clusters=cell.groups if cell.clustered else None)


def _constant(cell: _Cell, confidence: float) -> CellInterval:
    """Values without spread: the Bernoulli worst case when the range is known."""
    clusters = cell.groups if cell.clustered else None
    if not cell.bounded:
        return CellInterval(cell.mean, cell.mean, "t", cell.mean, cell.mean, "t",
                            NO_RANGE, clusters)
    assert cell.low is not None and cell.high is not None
    p = min(1.0, max(0.0, (cell.mean - cell.low) / (cell.high - cell.low)))
    low, high = _rescale(cell, modified_wilson(p, cell.groups, confidence))
    gate_low, gate_high = _rescale(cell, clopper_pearson(p, cell.groups, confidence))
    # never less pessimistic than the interval (a mean of 1e-308 rounds Wilson's bound to 0)
    gate_low, gate_high = min(gate_low, low), max(gate_high, high)
    return CellInterval(low, high, "wilson", gate_low, gate_high, "clopper-pearson",
                        NO_SPREAD, clusters)


BETTING_ORDERS = 16
"""Fixed orders of the values whose betting capitals are averaged (order-free bound)."""
BETTING_TRUNCATION = 0.75
"""The largest share of the capital a bet may risk: Waudby-Smith & Ramdas' c = 3/4."""


def betting_lower(values: np.ndarray, alpha: float, seed: int = 0) -> float:
    """A lower (1 - alpha) bound of the mean of independent values in [0, 1], any distribution.

    Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting",
    JRSS-B 2024: hedged capital with predictable plug-in bets.

    Against "the mean is at most m", a bettor stakes ``lam_i * (x_i - m)`` on each value,
    ``lam_i`` chosen from the values before it; under that hypothesis the capital has
    expectation at most 1, so a capital of 1/alpha rejects m with error at most alpha
    (Markov). The capital is averaged over fixed orders of the values (an average of such
    capitals keeps expectation 1) so the bound does not depend on the items' order; it
    falls as m grows, and bisection finds the largest m rejected.
    """
    import numpy as np

    n = values.size
    rng = np.random.default_rng(seed)
    x = values[np.stack([rng.permutation(n) for _ in range(BETTING_ORDERS)])]
    # predictable estimates of the variance from the values before each one
    bets = np.sqrt(2 * math.log(1 / alpha) / (n * _predictable(x, 0.5, 0.25)))
    return _largest_rejected(x, bets, 0.0, alpha, float(values.mean()))


def _largest_rejected(x: np.ndarray, bets: np.ndarray, floor: float | np.ndarray,
                      alpha: float, high: float) -> float:
    """The largest m in [0, high] whose averaged betting capital reaches 1/alpha (bisection).

    ``x`` holds each order's values (orders × n), ``bets`` the predictable bets on them and
    ``floor`` the lowest value each could take: a stake is at most 3/4 of what keeps the
    capital positive, ``BETTING_TRUNCATION / (m - floor)``.
    """
    import numpy as np

    threshold = math.log(1 / alpha) + math.log(x.shape[0])  # log(orders / alpha)
    low = 0.0
    for _ in range(30):
        m = (low + high) / 2
        if m <= 0.0:
            break
        stake = np.minimum(bets, BETTING_TRUNCATION / (m - floor))
        log_capital = np.log1p(stake * (x - m)).sum(axis=1)
        peak = float(log_capital.max())
        rejected = peak + math.log(float(np.exp(log_capital - peak).sum())) >= threshold
        low, high = (m, high) if rejected else (low, m)
    return low


def _predictable(x: np.ndarray, prior_mean: float, prior_variance: float) -> np.ndarray:
    """Each value's variance estimate from the values before it (one prior pseudo-value)."""
    import numpy as np

    steps = np.arange(1, x.shape[1] + 1)
    mean_after = (prior_mean + np.cumsum(x, axis=1)) / (steps + 1)
    mean_before = np.hstack([np.full((x.shape[0], 1), prior_mean), mean_after[:, :-1]])
    variance_after = (prior_variance + np.cumsum((x - mean_before) ** 2, axis=1)) / (steps + 1)
    return np.hstack([np.full((x.shape[0], 1), prior_variance), variance_after[:, :-1]])


def betting_bounds(cell: _Cell, confidence: float = CONFIDENCE, seed: int = 0
                   ) -> tuple[float, float] | None:
    """One-sided bounds at (1 + confidence) / 2 valid for any scores in the metric's range.

    With clusters the values are the clusters' means (independent of one another).
    None without a known range.
    """
    if not cell.bounded:
        return None
    assert cell.low is not None and cell.high is not None
    width = cell.high - cell.low
    values = cell.sums / cell.sizes if cell.clustered else cell.values
    unit = (values - cell.low) / width
    unit = unit.clip(0.0, 1.0)
    alpha = (1 - confidence) / 2
    low = betting_lower(unit, alpha, seed)
    high = 1.0 - betting_lower(1.0 - unit, alpha, seed)
    return cell.low + low * width, cell.low + high * width


def _two_values(cell: _Cell, confidence: float) -> CellInterval | None:
    """Values that take exactly two distinct values a < b: a proportion in disguise.

    The share of b gets the 0/1 interval (modified Wilson, effective n with clusters),
    mapped back onto [a, b]; the gate checks the more pessimistic of it and the betting
    bound, which unlike Clopper-Pearson does not assume that only a and b can occur. The
    bootstrap of such a cell is the bootstrap of a binomial count, whose BCa interval
    jumps with the lattice of counts: for a score of 0.99 or 0 it covered between 0.95
    and 0.995 of sessions depending on n and the share of zeros, above 0.985 in half the
    settings, where this interval stays near 0.95 (exact sums in
    ``benchmarks/bench_intervals.py``),
    and below 30 values Student's t misses near the ends as it does for 0/1 values.
    None for values that take more (or fewer) than two distinct values. The caller uses it
    from BCA_MIN clusters only: the interval never leaves [a, b], which is honest where 30
    or more values all fell on two points (a two-valued metric), not for two or three
    values of a continuous one that happen to differ (t, wide, covers those).
    """
    import numpy as np

    distinct = np.unique(cell.values)
    if distinct.size != 2:
        return None
    a, b = float(distinct[0]), float(distinct[1])
    width = b - a
    unit = replace(cell, values=(cell.values - a) / width,
                   sums=(cell.sums - a * cell.sizes) / width, mean=(cell.mean - a) / width,
                   variance=cell.variance / width**2, low=0.0, high=1.0)
    share = _proportion(unit, confidence)
    assert share.low is not None and share.high is not None
    found = _with_gate(cell, a + width * share.low, a + width * share.high, "wilson",
                       confidence)
    return replace(found, note=TWO_VALUES)


def _with_gate(cell: _Cell, low: float, high: float, method: str, confidence: float
               ) -> CellInterval:
    """The interval, and the gate's bounds: the more pessimistic of it and the betting bound.

    t and BCa are approximations: on scores piled near one end of the range (Beta(8, 1))
    their lower bound lies above the true mean in 4-10% of sessions at n = 5-30, where a
    gate may pass at most 2.5%; the betting bound holds for every distribution.
    """
    low, high = _clip(cell, low, high)
    gate_low, gate_high, gate_method = low, high, method
    bound = betting_bounds(cell, confidence)
    if bound is not None:
        gate_low, gate_high = min(low, bound[0]), max(high, bound[1])
        gate_method = f"{method}+betting"
    return CellInterval(low, high, method, gate_low, gate_high, gate_method,
                        n_clusters=cell.groups if cell.clustered else None)


def _hall_inverse(value: float, skew: float, groups: int) -> float:
    """The inverse of Hall's transformation g(T) = T + aT^2 + a^2 T^3 / 3 + b.

    g(T) = ((1 + aT)^3 - 1) / (3a) + b with a = skew / (3 sqrt(G)) and b = skew / (6 sqrt(G))
    is increasing in T, so its inverse maps the t quantiles to the studentized mean's.
    """
    a = skew / (3 * math.sqrt(groups))
    shifted = value - skew / (6 * math.sqrt(groups))
    if abs(a) < 1e-12:
        return shifted
    return (math.cbrt(1 + 3 * a * shifted) - 1) / a


def _t(cell: _Cell, confidence: float) -> CellInterval:
    """Student's t with G - 1 degrees of freedom, corrected for skewness (Hall 1992).

    The studentized mean of skewed scores is itself skewed, and plain t misses on the side
    of the short tail: on scores piled near 1 (Beta(8, 1)) its lower bound lies above the
    true mean in 9.5% of sessions at n = 5. Hall's transformation ("On the removal of
    skewness by transformation", JRSS-B 54, 1992) removes the first-order skewness term
    of the studentized mean with the sample skewness of the (cluster) residuals; with no
    skewness it is plain t.
    """
    from scipy.special import stdtrit  # scipy.stats.t.ppf, without importing scipy.stats

    quantile = float(stdtrit(cell.groups - 1, (1 + confidence) / 2))
    residuals = cell.sums - cell.mean * cell.sizes  # per cluster; per value without clusters
    second = float((residuals**2).mean())
    skew = float((residuals**3).mean()) / second**1.5 if second > 0 else 0.0
    error = math.sqrt(cell.variance)
    low = cell.mean - error * _hall_inverse(quantile, skew, cell.groups)
    high = cell.mean - error * _hall_inverse(-quantile, skew, cell.groups)
    return _with_gate(cell, low, high, "t", confidence)


def t_interval(values: Sequence[float], low: float | None = None, high: float | None = None,
               confidence: float = CONFIDENCE) -> CellInterval:
    """The skew-corrected t interval of values (with its gate bounds), whatever their n."""
    return _t(prepare(CellData(values, None, low, high)), confidence)


# ---------------------------------------------------------------- all cells at once


def cell_intervals(cells: Sequence[CellData], confidence: float = CONFIDENCE,
                   n_resamples: int = 10_000, seed: int = 0) -> list[CellInterval]:
    """The interval of every cell; the bootstrapped ones share resamples by cluster count.

    As :func:`pytest_ragbench.stats.batch_bootstrap_ci`: cells with the same number of
    clusters (and both plain or both clustered) are resampled together, one counts
    matrix per block, so hundreds of cells cost a few matrix products. Each block draws
    from a generator seeded by ``(seed, clusters, clustered)``: a cell's interval depends
    on its own values only, not on the other cells beside it (a ``-k`` subset of a run,
    or one kind's plots drawn ahead, gives the same interval).
    """
    import numpy as np

    stats._check_confidence(confidence)
    prepared = [prepare(c) for c in cells]
    results: list[CellInterval | None] = []
    blocks: dict[tuple[int, bool], list[int]] = {}
    for i, cell in enumerate(prepared):
        result: CellInterval | None
        if cell.groups < 2:
            result = CellInterval(note=N_TOO_SMALL,
                                  n_clusters=cell.groups if cell.clustered else None)
        elif cell.binary:
            result = _proportion(cell, confidence)
        elif not cell.spread:
            result = _constant(cell, confidence)
        elif cell.groups >= BCA_MIN and (two := _two_values(cell, confidence)) is not None:
            result = two
        elif cell.groups < BCA_MIN:
            result = _t(cell, confidence)
        else:
            result = None
            blocks.setdefault((cell.groups, cell.clustered), []).append(i)
        results.append(result)
    with stats._single_threaded_blas() if blocks else nullcontext():
        for (groups, clustered), members in sorted(blocks.items()):
            rng = np.random.default_rng((seed, groups, int(clustered)))
            sums = np.column_stack([prepared[i].sums for i in members])
            sizes = np.column_stack([prepared[i].sizes for i in members]) if clustered else None
            means = stats._resampled_means(sums, n_resamples, rng, sizes)
            theta = influence = None
            if clustered:
                assert sizes is not None
                # column by column, so that a cell's numbers do not depend on its block
                total = np.array([column.sum() for column in sums.T])
                count = np.array([column.sum() for column in sizes.T])
                theta = total / count
                left_out = (total - sums) / (count - sizes)
                influence = np.array([c.mean() for c in left_out.T]) - left_out
            found = stats._intervals(sums, means, confidence, "bca", theta, influence)
            for i, interval in zip(members, found, strict=True):
                results[i] = _with_gate(prepared[i], interval.low, interval.high,
                                        interval.method, confidence)
    return [r for r in results if r is not None]


def proportion_interval(successes: int, n: int, confidence: float = CONFIDENCE
                        ) -> tuple[float | None, float | None]:
    """The interval of a share of ``successes`` in ``n`` independent trials, as a pass rate's.

    The cell interval of ``successes`` ones and ``n - successes`` zeros: modified Wilson
    (:func:`modified_wilson`), ``(None, None)`` below 2 trials.
    """
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, n], got {successes} of {n}")
    found = cell_interval([1.0] * successes + [0.0] * (n - successes), low=0.0, high=1.0,
                          confidence=confidence) if n else CellInterval()
    return found.low, found.high


def cell_interval(values: Sequence[float], clusters: Sequence[Hashable | None] | None = None,
                  low: float | None = None, high: float | None = None,
                  confidence: float = CONFIDENCE, n_resamples: int = 10_000, seed: int = 0
                  ) -> CellInterval:
    """The interval of one cell (see :func:`cell_intervals`)."""
    return cell_intervals([CellData(values, clusters, low, high)], confidence,
                          n_resamples, seed)[0]
