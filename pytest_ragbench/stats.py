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
    return _z(confidence) * math.sqrt(p * (1 - p) / n)


def sample_size_for_half_width(half_width: float, p: float = 0.5, confidence: float = 0.95
                               ) -> int:
    """Smallest n whose proportion CI half-width is at most ``half_width``."""
    if not 0 < half_width < 1:
        raise ValueError("half_width must be between 0 and 1 (a proportion)")
    z = _z(confidence)
    return max(1, math.ceil(z * z * p * (1 - p) / (half_width * half_width) - 1e-9))


def _z(confidence: float) -> float:
    """The two-sided normal quantile (stdlib, so ``ragbench dataset stats`` needs no scipy)."""
    from statistics import NormalDist

    _check_confidence(confidence)
    return NormalDist().inv_cdf((1 + confidence) / 2)


# ---------------------------------------------------------------- prediction-powered inference


@dataclass(frozen=True)
class PPIInterval:
    """A prediction-powered estimate of the human mean, with its confidence interval.

    ``judge_mean`` is the judge's mean over all items and ``rectifier`` the mean of
    human − judge over the labeled ones (``mean = judge_mean + rectifier``); ``df`` is the
    degrees of freedom of the t quantile used.
    """

    mean: float
    low: float
    high: float
    se: float
    df: float
    n_labeled: int
    n_all: int
    confidence: float
    judge_mean: float
    rectifier: float

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return dict(self.__dict__)


def ppi_mean_ci(judge_all: Scores, judge_labeled: Scores, human_labeled: Scores,
                confidence: float = 0.95) -> PPIInterval:
    """Prediction-powered CI of the mean human score (Angelopoulos et al., Science 2023).

    Arguments: ``judge_all`` is the judge's (or any proxy's) score of *every* item — N
    items, **the labeled ones included**; ``judge_labeled`` and ``human_labeled`` are the
    judge's and a person's scores of the n labeled items, pair by pair (each labeled
    item's judge score is also in ``judge_all``, which is checked). The labeled items
    must be a random subset of all items; the target is the mean human score of the
    population the items were drawn from.

    Estimate, the paper's classical PPI mean: the judge's mean over all items plus the
    mean of human − judge over the labeled ones,
    ``θ = mean(judge_all) + mean(human_labeled − judge_labeled)``.

    Interval, the paper's CLT interval for this estimate, ``θ ± q·se``. The paper's
    unlabeled set is disjoint from the labeled one; here the labeled items are among
    the N, so with w = (N − n)/N the estimate is ``mean(human_L) + w·(mean(judge_U) −
    mean(judge_L))`` (U: the N − n unlabeled items) and its variance is
    ``se² = w·s²(judge_all)/N + s²(human_L − w·judge_L)/n`` (sample variances, ddof=1).
    For N ≫ n (w → 1) this is the paper's σ²(judge)/N + σ²(human − judge)/n; with every
    item labeled (w = 0) it is the t interval of the human mean. Leaving out the
    overlap would understate se when the judge is compressed towards the middle.
    ``q`` is Student's t quantile with Welch–Satterthwaite degrees of freedom of the two
    variance terms: about n − 1 when the rectifier term dominates, and the paper's
    normal quantile as n grows.

    Small n, honestly: the interval rests on a central limit theorem for the mean of
    human − judge over only n labeled items. In simulation (``benchmarks/bench_ppi.py``,
    1,000 items) its coverage is 0.94–0.95 with 10 labels for a noisy or a compressed
    judge, but 0.89 when the differences are skewed (a 0/1 judge that says 1 for every
    correct item and for half the incorrect ones); 0.92–0.95 with 20 labels and 0.94–0.96
    from 50 on. A judge that agreed with every labeled item makes the label term almost
    vanish (it is then (1 − w)²·s²(human)/n), so the interval is nearly the judge's own:
    a handful of agreeing labels does not prove the judge right.
    Fewer than two labeled items raise ``ValueError``.
    """
    from scipy import stats

    _check_confidence(confidence)
    f_all = _array(judge_all, "judge_all")
    f_lab = _array(judge_labeled, "judge_labeled")
    h_lab = _array(human_labeled, "human_labeled")
    n, big_n = int(f_lab.size), int(f_all.size)
    if h_lab.size != n:
        raise ValueError(f"judge_labeled and human_labeled differ in length: {n} vs "
                         f"{h_lab.size}")
    if n < 2:
        raise ValueError(f"a prediction-powered interval needs at least 2 labeled items, "
                         f"got {n}")
    if big_n < n or not _is_sub_multiset(f_lab, f_all):
        raise ValueError("judge_all must hold the judge's scores of all items, the labeled "
                         "ones included (some judge_labeled values are not in judge_all)")
    w = (big_n - n) / big_n
    judge_mean = float(f_all.mean())
    rectifier = float((h_lab - f_lab).mean())
    mean = judge_mean + rectifier
    judge_term = w * float(f_all.var(ddof=1)) / big_n if big_n > 1 else 0.0
    label_term = float((h_lab - w * f_lab).var(ddof=1)) / n
    variance = judge_term + label_term
    if variance <= 0.0:
        return PPIInterval(mean, mean, mean, 0.0, float(n - 1), n, big_n, confidence,
                           judge_mean, rectifier)
    denominator = (judge_term**2 / (big_n - 1) if big_n > 1 else 0.0) + label_term**2 / (n - 1)
    df = variance**2 / denominator
    se = math.sqrt(variance)
    margin = float(stats.t.ppf((1 + confidence) / 2, df)) * se
    return PPIInterval(mean, mean - margin, mean + margin, se, float(df), n, big_n, confidence,
                       judge_mean, rectifier)


def _is_sub_multiset(part: np.ndarray, whole: np.ndarray) -> bool:
    """True when every value of ``part`` occurs in ``whole`` at least as often."""
    from collections import Counter

    have = Counter(whole.tolist())
    need = Counter(part.tolist())
    return all(have[value] >= count for value, count in need.items())
