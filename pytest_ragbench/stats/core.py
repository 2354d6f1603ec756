"""Statistics of a session: summaries, confidence intervals, paired tests, corrections, power.

Built on scipy.stats; no pytest import. numpy and scipy are imported inside functions.
Every function takes plain floats: an unscored value or NaN raises ``ValueError``
instead of slipping into a mean. Degenerate input (one value, no variance, identical
samples) gives defined numbers, never NaN.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    import numpy as np

Scores: TypeAlias = "Sequence[float] | np.ndarray"
"""Plain numbers: a list of floats or a 1-D numpy array (never unscored values or NaN)."""

CIMethod = Literal["bca", "percentile"]
PairedTestName = Literal["randomization", "t", "wilcoxon", "mcnemar"]
EFFECT_SIZES = (0.2, 0.3, 0.5)
TIE_TOLERANCE = 1e-12
"""Relative distance within which a bootstrap mean counts as equal to the estimate (BCa)."""


def _array(scores: Any, what: str = "scores") -> np.ndarray:
    """Scores as a 1-D float array; Unscored objects, text or NaN raise a clear error."""
    import numpy as np

    try:
        values = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be plain numbers (drop unscored values first): "
                         f"{exc}") from None
    if values.ndim != 1:
        raise ValueError(f"{what} must be a flat sequence of numbers, got shape {values.shape}")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(f"{what} contain {bad.size} NaN or infinite value(s), first at "
                         f"position {int(bad[0])}; drop unscored values before statistics")
    return values


# ---------------------------------------------------------------- summaries and intervals


@dataclass(frozen=True)
class Summary:
    """Count, mean and sample standard deviation (ddof=1; 0.0 for one value)."""

    n: int
    mean: float
    std: float


def summarize(scores: Scores) -> Summary:
    """Return n, mean and sample standard deviation of ``scores``."""
    values = _array(scores)
    if values.size == 0:
        raise ValueError("no scores to summarise")
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return Summary(int(values.size), float(values.mean()), std)


@dataclass(frozen=True)
class Interval:
    """A confidence interval of a mean."""

    mean: float
    low: float
    high: float
    method: str
    confidence: float
    n: int

    @property
    def half_width(self) -> float:
        """Half the interval's width."""
        return (self.high - self.low) / 2

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return {"mean": self.mean, "low": self.low, "high": self.high, "method": self.method,
                "confidence": self.confidence, "n": self.n}


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")


def _point(values: np.ndarray, method: str, confidence: float) -> Interval | None:
    """The interval of data without spread (one value, or all equal), else None."""
    if values.size == 0:
        raise ValueError("no scores: a confidence interval needs at least one value")
    if values.size == 1 or float(values.max()) == float(values.min()):
        mean = float(values[0])
        return Interval(mean, mean, mean, method, confidence, int(values.size))
    return None


def bootstrap_ci(scores: Scores, confidence: float = 0.95, method: CIMethod = "bca",
                 n_resamples: int = 10_000, seed: int = 0) -> Interval:
    """Bootstrap CI of the mean with ``scipy.stats.bootstrap`` (BCa or percentile, seeded).

    If BCa is undefined for the data (scipy returns NaN), the percentile interval of the
    same resamples is returned and ``method`` says so.
    """
    import numpy as np
    from scipy import stats

    _check_confidence(confidence)
    if method not in ("bca", "percentile"):
        raise ValueError(f"method must be 'bca' or 'percentile', got {method!r}")
    values = _array(scores)
    point = _point(values, method, confidence)
    if point:
        return point
    # A degenerate BCa (NaN) is handled below rather than warned about.
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap((values,), np.mean, confidence_level=confidence,
                                 method=method, n_resamples=n_resamples, vectorized=True,
                                 rng=np.random.default_rng(seed))
    low, high = result.confidence_interval
    if not (math.isfinite(low) and math.isfinite(high)):
        dist = result.bootstrap_distribution
        alpha = (1 - confidence) / 2
        low, high = np.quantile(dist, [alpha, 1 - alpha])
        method = "percentile"
    return Interval(float(values.mean()), float(low), float(high), method, confidence,
                    int(values.size))


def t_ci(scores: Scores, confidence: float = 0.95) -> Interval:
    """Student-t CI of the mean: mean ± t(n-1) · s / √n."""
    from scipy import stats

    _check_confidence(confidence)
    values = _array(scores)
    point = _point(values, "t", confidence)
    if point:
        return point
    n = values.size
    mean = float(values.mean())
    margin = float(stats.t.ppf((1 + confidence) / 2, n - 1) * values.std(ddof=1) / math.sqrt(n))
    return Interval(mean, mean - margin, mean + margin, "t", confidence, int(n))


def batch_bootstrap_ci(cells: Sequence[Scores], confidence: float = 0.95,
                       method: CIMethod = "bca", n_resamples: int = 10_000, seed: int = 0
                       ) -> list[Interval]:
    """Bootstrap CIs of the means of many cells at once (the session report's tables).

    Same definition as :func:`bootstrap_ci` (scipy's BCa / percentile with linear
    quantiles), computed in bulk: cells of equal length share one resampling, drawn as
    index rows like scipy draws them and turned into a counts matrix, so every cell's
    resampled means are one matrix product. Each interval is a valid bootstrap interval
    of its own cell; intervals of cells sharing resamples have correlated Monte-Carlo
    error. Cost grows with ``n_resamples`` × (sum of the distinct cell lengths).
    """
    import numpy as np

    _check_confidence(confidence)
    if method not in ("bca", "percentile"):
        raise ValueError(f"method must be 'bca' or 'percentile', got {method!r}")
    arrays = [_array(cell, f"cell {i}") for i, cell in enumerate(cells)]
    results: list[Interval | None] = []
    by_length: dict[int, list[int]] = {}
    for i, values in enumerate(arrays):
        if values.size == 0:
            raise ValueError(f"cell {i} has no scores")
        point = _point(values, method, confidence)
        results.append(point)
        if point is None:
            by_length.setdefault(values.size, []).append(i)
    rng = np.random.default_rng(seed)
    with _single_threaded_blas():
        for _length, members in sorted(by_length.items()):
            matrix = np.column_stack([arrays[i] for i in members])  # n × cells
            means = _resampled_means(matrix, n_resamples, rng)  # cells × resamples
            for j, interval in enumerate(_intervals(matrix, means, confidence, method)):
                results[members[j]] = interval
    return [r for r in results if r is not None]


def _single_threaded_blas() -> AbstractContextManager[object]:
    """Limit BLAS to one thread: the many small products here slow down when threads contend."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: without it BLAS keeps its own thread count
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _resampled_means(matrix: np.ndarray, n_resamples: int, rng: np.random.Generator,
                     sizes: np.ndarray | None = None) -> np.ndarray:
    """Means of each column over ``n_resamples`` bootstrap resamples of the rows.

    Returns a cells × resamples array. With ``sizes`` (rows × cells), each row is a
    cluster: ``matrix`` holds its sums, ``sizes`` its counts, and a resampled mean is the
    resampled sum over the resampled count (the cluster bootstrap).
    """
    import numpy as np

    n = matrix.shape[0]
    chunk = max(1, 2**18 // n)  # keep each counts block cache-sized (about 2 MB)
    means = np.empty((matrix.shape[1], n_resamples))
    columns = np.ascontiguousarray(matrix.T)
    weights = None if sizes is None else np.ascontiguousarray(sizes.T)
    offsets = None
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        index = rng.integers(0, n, (rows, n))  # the draws scipy.stats.bootstrap makes
        if offsets is None or offsets.shape[0] != rows:
            offsets = (np.arange(rows) * n)[:, None]
        counts = np.bincount((index + offsets).ravel(), minlength=rows * n)
        counts = counts.reshape(rows, n).astype(np.float64)
        # One matrix-vector product per cell, not one matrix product for all: a matrix
        # product rounds differently with its width, so a cell's resampled means would
        # depend on how many cells share its length.
        for j, column in enumerate(columns):
            means[j, start:start + rows] = counts @ column
            if weights is not None:
                means[j, start:start + rows] /= counts @ weights[j]
    if sizes is None:
        means /= n
    return means


def _intervals(matrix: np.ndarray, means: np.ndarray, confidence: float, method: str,
               theta: np.ndarray | None = None, influence: np.ndarray | None = None
               ) -> list[Interval]:
    """Return scipy's BCa (or percentile) interval for every column of ``matrix``.

    ``means`` holds each column's resampled means as a cells × resamples array. For the
    cluster bootstrap, ``theta`` gives each cell's estimate and ``influence`` its
    jackknife values (mean of the leave-one-cluster-out estimates minus each of them),
    rows × cells; by default both are those of the plain mean of ``matrix``.
    """
    import numpy as np
    from scipy.special import ndtr, ndtri

    n, cells = matrix.shape
    resamples = means.shape[1]
    if theta is None:
        # column by column (here and below): a reduction over the rows of a wider matrix
        # adds in another order, and a cell's interval would depend on its neighbours
        theta = np.array([column.mean() for column in matrix.T])
    alpha = (1 - confidence) / 2
    levels = np.tile([alpha, 1 - alpha], (cells, 1))  # cells × 2
    used = [method] * cells
    if method == "bca":
        # z0 from the share of resampled means below the estimate, ties counting half. A
        # resampled mean within TIE_TOLERANCE (relative) of the estimate is a tie: it is
        # the estimate computed in another order ([0.99] * 69 + [0.0] has a third of its
        # resamples there), and counting it by exact comparison made z0 turn on rounding.
        col = theta[:, None]
        scale = np.maximum(np.abs(theta), np.abs(means).max(axis=1))[:, None]
        tied = np.abs(means - col) <= TIE_TOLERANCE * scale
        below = 2 * ((means < col) & ~tied).sum(axis=1) + tied.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            z0 = ndtri(below / (2 * resamples))
            # Jackknife acceleration; for the mean, U_i = x_i - mean.
            u = matrix - theta if influence is None else influence
            a = np.array([(c**3).sum() / (6 * (c**2).sum() ** 1.5)
                          for c in np.ascontiguousarray(u.T)])
            z = np.array([ndtri(alpha), -ndtri(alpha)])
            num = z0[:, None] + z[None, :]
            bca = ndtr(z0[:, None] + num / (1 - a[:, None] * num))
        ok = np.isfinite(bca).all(axis=1)
        levels[ok] = bca[ok]
        used = ["bca" if flag else "percentile" for flag in ok]
    position = levels * (resamples - 1)  # linear interpolation, as scipy.stats.quantile
    lower = np.floor(position).astype(int)
    upper = np.minimum(lower + 1, resamples - 1)
    frac = position - lower
    bounds = np.empty((cells, 2))
    for j in range(cells):  # four order statistics per cell: partition beats a full sort
        ranks = np.concatenate([lower[j], upper[j]])
        picked = np.partition(means[j], ranks)[ranks]
        bounds[j] = picked[:2] * (1 - frac[j]) + picked[2:] * frac[j]
    return [Interval(float(theta[j]), float(bounds[j, 0]), float(bounds[j, 1]), used[j],
                     confidence, int(n)) for j in range(cells)]


# ---------------------------------------------------------------- paired tests


@dataclass(frozen=True)
class PairedTest:
    """A paired comparison of A against B (differences are A − B).

    ``effect_size`` is paired Cohen's d (mean difference / SD of differences).
    ``diff_ci_*`` is the t interval for the t-test, else the BCa bootstrap interval.
    ``p_value`` is NaN where the test is undefined (the t-test of a constant non-zero
    difference); ``to_dict`` turns it into None.
    """

    test: str
    n: int
    statistic: float
    p_value: float
    effect_size: float
    diff_mean: float
    diff_ci_low: float
    diff_ci_high: float

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict (infinite effect sizes become strings)."""
        out: dict[str, Any] = dict(self.__dict__)
        for key, value in out.items():
            if isinstance(value, float) and math.isinf(value):
                out[key] = "inf" if value > 0 else "-inf"
            elif isinstance(value, float) and math.isnan(value):
                out[key] = None
        return out


def _no_spread(sd: float, mean: float) -> bool:
    """True when ``sd`` is zero or float noise (below 1e-12 × |mean|)."""
    return sd == 0.0 or sd < 1e-12 * abs(mean)


def cohens_d(diffs: Scores) -> float:
    """Paired Cohen's d: mean / sample SD of the differences (±inf when they never vary).

    A standard deviation below 1e-12 × |mean| is float noise on a constant difference
    and counts as zero (a d of 1e15 would be an artefact of rounding).
    """
    values = _array(diffs, "differences")
    if values.size == 0:
        raise ValueError("no differences")
    mean = float(values.mean())
    sd = float(values.std(ddof=1)) if values.size > 1 else 0.0
    if _no_spread(sd, mean):
        return 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    return mean / sd


def paired_test(a: Scores, b: Scores, test: PairedTestName = "randomization",
                confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0
                ) -> PairedTest:
    """Two-sided paired test of A vs B: randomization (default), t, wilcoxon or mcnemar.

    - randomization: Fisher's sign-flip permutation test of the mean difference
      (``scipy.stats.permutation_test``, exact when 2^n ≤ ``n_resamples``).
    - t: ``scipy.stats.ttest_rel``. wilcoxon: ``scipy.stats.wilcoxon`` (zero differences
      dropped). mcnemar: exact binomial test of discordant pass/fail pairs (values 0/1);
      the statistic is the smaller discordant count.
    """
    import numpy as np

    x, y = _array(a, "a"), _array(b, "b")
    if x.size != y.size:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    if test not in ("randomization", "t", "wilcoxon", "mcnemar"):
        raise ValueError(f"unknown paired test {test!r}")
    if test == "mcnemar" and not np.isin(np.concatenate([x, y]), (0.0, 1.0)).all():
        raise ValueError("mcnemar needs pass/fail values (0 or 1)")
    n = int(x.size)
    diffs = x - y
    if n == 0:
        return PairedTest(test, 0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0)
    diff_mean = float(diffs.mean())
    effect = cohens_d(diffs)
    if test == "t":
        ci = t_ci(diffs, confidence)
    else:
        ci = bootstrap_ci(diffs, confidence, n_resamples=n_resamples, seed=seed)
    statistic, p_value = _run_test(test, x, y, diffs, n_resamples, seed)
    return PairedTest(test, n, statistic, p_value, effect, diff_mean, ci.low, ci.high)


def _run_test(test: str, x: np.ndarray, y: np.ndarray, diffs: np.ndarray, n_resamples: int,
              seed: int) -> tuple[float, float]:
    """(statistic, two-sided p) with defined values for degenerate data."""
    import numpy as np
    from scipy import stats

    n = diffs.size
    if test == "mcnemar":
        a_only = int(((x == 1) & (y == 0)).sum())
        b_only = int(((x == 0) & (y == 1)).sum())
        if a_only + b_only == 0:
            return 0.0, 1.0
        p = stats.binomtest(min(a_only, b_only), a_only + b_only, 0.5).pvalue
        return float(min(a_only, b_only)), float(min(1.0, p))
    if not diffs.any():  # identical samples: no evidence of a difference
        return 0.0, 1.0
    if test == "wilcoxon":
        result = stats.wilcoxon(x, y, zero_method="wilcox")
        return float(result.statistic), float(result.pvalue)
    if test == "t":
        mean = float(diffs.mean())
        if n < 2 or _no_spread(float(diffs.std(ddof=1)), mean):
            # A constant non-zero difference has no variance to scale it by: the t
            # statistic and its p are undefined (NaN), not 0.
            return math.copysign(math.inf, mean), math.nan
        result = stats.ttest_rel(x, y)
        return float(result.statistic), float(result.pvalue)

    if n < 2:  # one pair: both signs are equally likely under the null
        return float(diffs.mean()), 1.0

    def mean_diff(u: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(u - v, axis=axis)

    result = stats.permutation_test((x, y), mean_diff, permutation_type="samples",
                                    n_resamples=n_resamples, vectorized=True,
                                    rng=np.random.default_rng(seed))
    return float(result.statistic), float(min(1.0, result.pvalue))


# ---------------------------------------------------------------- multiple comparisons


def adjust_pvalues(p_values: Scores, method: Literal["holm", "bonferroni"] = "holm"
                   ) -> list[float]:
    """Family-wise error correction: Holm's step-down (default) or Bonferroni."""
    values = _array(p_values, "p-values")
    if ((values < 0) | (values > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    m = values.size
    if method == "bonferroni":
        return [min(1.0, float(p) * m) for p in values]
    if method != "holm":
        raise ValueError(f"unknown correction {method!r}; use 'holm' or 'bonferroni'")
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: values[i])):
        running = max(running, min(1.0, (m - rank) * float(values[index])))
        adjusted[index] = running
    return adjusted


# ---------------------------------------------------------------- power and sample size


def paired_power(n: int, effect_size: float, alpha: float = 0.05,
                 method: Literal["t", "normal"] = "t") -> float:
    """Power of a two-sided paired t-test with n pairs to detect Cohen's d = ``effect_size``.

    ``method="t"`` uses the noncentral t distribution; ``"normal"`` the normal
    approximation Φ(d√n − z₁₋α/₂). Fewer than two pairs have no power (0.0).
    """
    # scipy.special's functions are what scipy.stats' t, nct and norm call, without the
    # import of scipy.stats (most of a second of CPU at the end of every session)
    from scipy.special import nctdtr, ndtr, ndtri, stdtrit

    if n < 2:
        return 0.0
    shift = abs(effect_size) * math.sqrt(n)
    if method == "normal":
        z = ndtri(1 - alpha / 2)
        return float(ndtr(shift - z) + ndtr(-shift - z))
    if method != "t":
        raise ValueError(f"unknown power method {method!r}")
    df = n - 1
    crit = stdtrit(df, 1 - alpha / 2)
    power = float(1 - nctdtr(df, shift, crit) + nctdtr(df, shift, -crit))
    if math.isnan(power):  # scipy's noncentral t fails far in the tail, where power is ~1
        return paired_power(n, effect_size, alpha, method="normal")
    return min(1.0, power)


def power_table(n: int, effect_sizes: Sequence[float] = EFFECT_SIZES, alpha: float = 0.05
                ) -> dict[str, float]:
    """Power at each effect size, keyed by effect size: ``{"d=0.2": 0.65, ...}``."""
    return {f"d={d}": paired_power(n, d, alpha) for d in effect_sizes}


def proportion_half_width(n: int, p: float = 0.5, confidence: float = 0.95) -> float:
    """Half-width of the normal-approximation CI of a proportion: z·√(p(1−p)/n)."""
    if n < 1:
        raise ValueError("n must be at least 1")
    return normal_quantile(confidence) * math.sqrt(p * (1 - p) / n)


def sample_size_for_half_width(half_width: float, p: float = 0.5, confidence: float = 0.95
                               ) -> int:
    """Smallest n whose proportion CI half-width is at most ``half_width``."""
    if not 0 < half_width < 1:
        raise ValueError("half_width must be between 0 and 1 (a proportion)")
    z = normal_quantile(confidence)
    return max(1, math.ceil(z * z * p * (1 - p) / (half_width * half_width) - 1e-9))


def normal_quantile(confidence: float) -> float:
    """The two-sided normal quantile (stdlib, so ``ragbench dataset stats`` needs no scipy)."""
    from statistics import NormalDist

    _check_confidence(confidence)
    return NormalDist().inv_cdf((1 + confidence) / 2)


# ---------------------------------------------------------------- prediction-powered inference

PPIMethod = Literal["ppi++", "ppi"]
Stratum: TypeAlias = "tuple[Scores, Scores, Scores]"
"""One stratum's (judge_all, judge_labeled, human_labeled), as :func:`ppi_mean_ci` takes them."""


@dataclass(frozen=True)
class PPIInterval:
    """A prediction-powered estimate of the human mean, with its confidence interval.

    ``mean = lam * mean(judge on the unlabeled items) + rectifier``, ``rectifier`` being
    the mean of human - lam * judge over the labeled items; with several strata ``mean`` is
    the strata's estimates weighted by their item counts, and ``lam`` and ``rectifier``
    are None. ``judge_mean`` is the judge's mean over all items, ``se`` the standard error
    the interval uses, ``df`` the degrees of freedom of its t quantile (None for the
    normal quantile) and ``skew`` the estimate's skewness behind its Edgeworth shift.
    """

    mean: float
    low: float
    high: float
    se: float
    df: float | None
    n_labeled: int
    n_all: int
    confidence: float
    judge_mean: float
    rectifier: float | None
    lam: float | None
    method: str
    strata: int = 1
    skew: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class _PPIParts:
    """One stratum's estimate and the pieces of its variance and third cumulant."""

    mean: float
    judge_term: float  # variance of lam * mean(judge on the unlabeled items)
    label_term: float  # variance of mean(human - lam * judge) over the labeled items
    unlabeled: int
    n_labeled: int
    third: float  # third cumulant of the estimate
    judge_mean: float
    rectifier: float
    lam: float


def ppi_mean_ci(judge_all: Scores, judge_labeled: Scores, human_labeled: Scores,
                confidence: float = 0.95, method: PPIMethod = "ppi++",
                small_sample: bool = True) -> PPIInterval:
    """Prediction-powered CI of the mean human score: PPI++ (Angelopoulos, Duchi & Zrnic 2023).

    Arguments: ``judge_all`` is the judge's (or any proxy's) score of *every* item — N
    items, **the labeled ones included**; ``judge_labeled`` and ``human_labeled`` are the
    judge's and a person's scores of the n labeled items, pair by pair (each labeled
    item's judge score is also in ``judge_all``, which is checked). The labeled items
    must be a random subset of all items; the target is the mean human score of the
    population the items were drawn from.

    Estimate: with U the N - n unlabeled items (``judge_all`` less the labeled ones),
    ``θ = λ·mean(judge_U) + mean(human_L - λ·judge_L)``, unbiased for every fixed λ.
    ``method="ppi"`` is plain PPI (Angelopoulos et al., Science 2023), λ = 1; ``"ppi++"``
    (default) tunes λ to the data as the authors' ``ppi_py.ppi_mean_ci`` does: the λ
    minimising the estimate's variance, Cov(human, judge) / ((1 + n/(N - n))·Var(judge)),
    clipped to [0, 1]. A judge that tells little about people gets λ near 0 and the
    interval of the labels alone; plain PPI would pay for the judge's noise (with a weakly
    informative judge it is wider than the labels alone in most sessions). The estimate
    and λ equal ``ppi_py``'s on the same data.

    Interval: ``θ`` ± a quantile × ``se``, ``se² = λ²·s²(judge_U)/(N - n) + s²(human_L -
    λ·judge_L)/n``. ``small_sample=False`` gives the authors' interval exactly (normal
    quantile, variances with ddof 0, as ``ppi_py.ppi_mean_ci``). By default the interval
    is corrected for small label counts: sample variances (ddof 1), Student's t quantile
    with the Welch-Satterthwaite degrees of freedom of the two variance terms, and the
    first-order Edgeworth (Cornish-Fisher) shift of the studentized estimate's quantiles
    by its skewness γ, ``γ(2q² + 1)/6`` standard errors (Hall 1992, The Bootstrap and
    Edgeworth Expansion, §2.6), capped so that the interval holds its estimate. Human -
    judge differences are skewed (a 0/1 judge that says 1 for every correct item and half
    the incorrect ones is wrong in one direction only), and the normal interval then
    covers 0.89 of sessions with 20 labels and 0.92 with 50, its lower bound lying above
    the truth in up to 10% of them; the correction moves the interval away from the long
    tail without widening it (``benchmarks/bench_ppi.py`` prints the coverage tables).

    With every item labeled (N = n) it is the interval of the human mean alone; fewer
    than two labeled items raise ``ValueError``. See :func:`stratified_ppi_mean_ci` for
    strata, and :func:`pytest_ragbench.results.calibration.ppi_section` for the bound a
    gate checks (valid at every label count).
    """
    return stratified_ppi_mean_ci([(judge_all, judge_labeled, human_labeled)], confidence,
                                  method, small_sample)


def stratified_ppi_mean_ci(strata: Sequence[Stratum], confidence: float = 0.95,
                           method: PPIMethod = "ppi++", small_sample: bool = True
                           ) -> PPIInterval:
    """Stratified PPI++: each stratum's estimate with its own λ, weighted by its item count.

    ``strata`` holds each stratum's ``(judge_all, judge_labeled, human_labeled)`` as
    :func:`ppi_mean_ci` takes them (for example the items of each category); every stratum
    needs at least two labeled items. The estimate is ``Σ (N_k/N)·θ_k`` and its variance
    ``Σ (N_k/N)²·se_k²``; the interval is built as in :func:`ppi_mean_ci` from the pooled
    variance terms and third cumulants. Labels may be spread over the strata in any
    proportion, as long as they are a random subset of each stratum's items.
    """
    _check_confidence(confidence)
    if method not in ("ppi++", "ppi"):
        raise ValueError(f"method must be 'ppi++' or 'ppi', got {method!r}")
    if not strata:
        raise ValueError("no strata: a prediction-powered interval needs labeled items")
    parts = []
    for index, (judge_all, judge_labeled, human_labeled) in enumerate(strata):
        where = f" (stratum {index})" if len(strata) > 1 else ""
        parts.append(_ppi_parts(judge_all, judge_labeled, human_labeled, method,
                                small_sample, where))
    return _combine(parts, confidence, method, small_sample)


def _ppi_parts(judge_all: Scores, judge_labeled: Scores, human_labeled: Scores,
               method: str, small_sample: bool, where: str) -> _PPIParts:
    """One stratum's PPI estimate, λ and variance terms (ValueError on bad input)."""
    f_all = _array(judge_all, "judge_all")
    f_lab = _array(judge_labeled, "judge_labeled")
    h_lab = _array(human_labeled, "human_labeled")
    n = int(f_lab.size)
    if h_lab.size != n:
        raise ValueError(f"judge_labeled and human_labeled differ in length{where}: {n} vs "
                         f"{h_lab.size}")
    if n < 2:
        raise ValueError(f"a prediction-powered interval needs at least 2 labeled items"
                         f"{where}, got {n}")
    unlabeled = _unlabeled(f_lab, f_all, where)
    m = int(unlabeled.size)
    lam = 0.0 if m == 0 else 1.0 if method == "ppi" else _tuned_lambda(f_lab, h_lab, unlabeled)
    ddof = 1 if small_sample else 0
    rectified = h_lab - lam * f_lab
    judge_term = lam**2 * float(unlabeled.var(ddof=ddof)) / m if m > ddof else 0.0
    label_term = float(rectified.var(ddof=ddof)) / n
    third = _third_moment(rectified) / n**2
    if m:
        third += lam**3 * _third_moment(unlabeled) / m**2
    rectifier = float(rectified.mean())
    mean = (lam * float(unlabeled.mean()) if m else 0.0) + rectifier
    return _PPIParts(mean, judge_term, label_term, m, n, third, float(f_all.mean()),
                     rectifier, lam)


def _tuned_lambda(f_lab: np.ndarray, h_lab: np.ndarray, unlabeled: np.ndarray) -> float:
    """PPI++'s λ for a mean, as ``ppi_py`` computes it (its ``_calc_lam_glm``, clipped).

    Cov(human, judge) over the labeled items (ddof 0) over (1 + n/(N - n)) times the
    variance of the judge over all items (ddof 1); 0 for a judge that never varies.
    """
    import numpy as np

    variance = float(np.concatenate([f_lab, unlabeled]).var(ddof=1))
    if variance <= 0.0:
        return 0.0
    covariance = float(((h_lab - h_lab.mean()) * (f_lab - f_lab.mean())).mean())
    ratio = f_lab.size / unlabeled.size
    return min(1.0, max(0.0, covariance / ((1 + ratio) * variance)))


def _third_moment(values: np.ndarray) -> float:
    """The mean cubed deviation from the mean (the third cumulant, plug-in estimate)."""
    return float(((values - values.mean()) ** 3).mean())


def _combine(parts: Sequence[_PPIParts], confidence: float, method: str, small_sample: bool
             ) -> PPIInterval:
    """The strata's estimates weighted by their item counts, and the interval around them."""
    from scipy.special import ndtri, stdtrit

    counts = [p.unlabeled + p.n_labeled for p in parts]
    total = sum(counts)
    weights = [c / total for c in counts]
    mean = sum(w * p.mean for w, p in zip(weights, parts, strict=True))
    judge_mean = sum(w * p.judge_mean for w, p in zip(weights, parts, strict=True))
    single = parts[0] if len(parts) == 1 else None
    variance = sum(w * w * (p.judge_term + p.label_term)
                   for w, p in zip(weights, parts, strict=True))

    def interval(low: float, high: float, se: float, df: float | None, skew: float = 0.0
                 ) -> PPIInterval:
        return PPIInterval(mean, low, high, se, df, sum(p.n_labeled for p in parts), total,
                           confidence, judge_mean, single.rectifier if single else None,
                           single.lam if single else None, method, len(parts), skew)

    if variance <= 0.0:  # the judge agreed with every label and never varied, or the like
        return interval(mean, mean, 0.0, None)
    se = math.sqrt(variance)
    if not small_sample:
        margin = float(ndtri((1 + confidence) / 2)) * se
        return interval(mean - margin, mean + margin, se, None)
    # Welch-Satterthwaite: each variance term has (its item count - 1) degrees of freedom
    pieces = [(w * w * term, count - 1) for w, p in zip(weights, parts, strict=True)
              for term, count in ((p.judge_term, p.unlabeled), (p.label_term, p.n_labeled))
              if term > 0.0 and count > 1]
    df = variance**2 / sum(term * term / dof for term, dof in pieces)
    skew = sum(w**3 * p.third for w, p in zip(weights, parts, strict=True)) / variance**1.5
    quantile = float(stdtrit(df, (1 + confidence) / 2))
    shift = min(quantile, max(-quantile, skew * (2 * quantile**2 + 1) / 6))
    return interval(mean - se * (quantile - shift), mean + se * (quantile + shift), se,
                    float(df), float(skew))


def _unlabeled(labeled: np.ndarray, every: np.ndarray, where: str = "") -> np.ndarray:
    """``every`` less one occurrence of each labeled value, sorted (ValueError: one missing)."""
    import numpy as np

    values, counts = np.unique(every, return_counts=True)
    wanted, needed = np.unique(labeled, return_counts=True)
    at = np.minimum(np.searchsorted(values, wanted), max(values.size - 1, 0))
    if values.size == 0 or (values[at] != wanted).any() or (counts[at] < needed).any():
        raise ValueError(f"judge_all must hold the judge's scores of all items, the labeled "
                         f"ones included{where} (some judge_labeled values are not in "
                         "judge_all)")
    left = counts.copy()
    left[at] -= needed
    return np.repeat(values, left)
