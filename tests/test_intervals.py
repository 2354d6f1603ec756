"""The interval of a report cell: chosen from the data, never zero-width, calibrated (issue 15).

Coverage and gate claims are shown by simulation with fixed seeds; the full tables are in
``benchmarks/bench_intervals.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from pytest_ragbench.stats import core as stats
from pytest_ragbench.stats import intervals
from pytest_ragbench.stats.intervals import CellData, cell_interval, cell_intervals

SESSIONS = 20_000


def _bernoulli_table(n: int) -> list[intervals.CellInterval]:
    """The report's interval for every count of successes x = 0 ... n (values in node order)."""
    return cell_intervals([CellData([1.0] * x + [0.0] * (n - x), None, 0.0, 1.0)
                           for x in range(n + 1)])


@pytest.mark.parametrize("n", [10, 38])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9, 0.97])
def test_bernoulli_cells_cover_and_their_gate_is_calibrated(n: int, p: float) -> None:
    """Simulated sessions of a 0/1 metric: coverage in [0.92, 0.99], gate <= 2.5% at the bound.

    The gate passes when its bound (Clopper-Pearson's lower bound) reaches the true rate p,
    so with p at the bound it should pass at most 2.5% of sessions (+ 2 simulation SE).
    """
    table = _bernoulli_table(n)
    assert {c.method for c in table} == {"wilson"}
    successes = np.random.default_rng(20240611 + n).binomial(n, p, SESSIONS)
    low = np.array([table[x].low for x in successes])
    high = np.array([table[x].high for x in successes])
    gate = np.array([table[x].gate_low for x in successes])
    coverage = float(np.mean((low <= p) & (p <= high)))
    passed = float(np.mean(gate >= p))
    assert 0.92 <= coverage <= 0.99, coverage
    assert passed <= 0.025 + 2 * math.sqrt(0.025 * 0.975 / SESSIONS), passed


def test_wilson_lower_bound_would_not_be_a_calibrated_gate() -> None:
    """Why the gate checks Clopper-Pearson: Wilson's bound passes 8% of sessions at p = 0.23."""
    table = _bernoulli_table(5)
    p = table[3].low - 1e-9  # just below Wilson's lower bound for 3 successes in 5
    successes = np.random.default_rng(3).binomial(5, p, SESSIONS)
    wilson_passes = np.mean([table[x].low >= p for x in successes])
    gate_passes = np.mean([table[x].gate_low >= p for x in successes])
    assert wilson_passes > 0.06
    assert gate_passes <= 0.025 + 2 * math.sqrt(0.025 * 0.975 / SESSIONS)


def test_the_poisson_bound_is_used_whatever_the_float_noise_of_the_mean() -> None:
    """2 failures in 14 give (1 - p) * n = 2.000000000000001: still x* = 2 failures."""
    n = 14
    p = float(np.mean([1.0] * 12 + [0.0] * 2))
    assert (1 - p) * n > 2.0
    poisson = 1 - float(sps.chi2.ppf(0.05, 4)) / (2 * n)
    assert intervals.modified_wilson(p, n)[1] == pytest.approx(max(poisson,
                                                                   intervals.wilson(p, n)[1]))
    assert intervals.modified_wilson(p, n)[1] > intervals.wilson(p, n)[1]


# p = 0.0058: just below Wilson's lower bound for 1 success in 30 (0.0059), its deepest dip
@pytest.mark.parametrize(("n", "p"), [(5, 0.97), (5, 0.1), (5, 0.9), (30, 0.0058)])
def test_few_successes_or_failures_get_the_poisson_bound(n: int, p: float) -> None:
    """Brown, Cai & DasGupta's modified Wilson: exact coverage at least 0.95 where Wilson dips.

    At n = 5 and p = 0.97 Wilson's interval for 4 of 5 ends at 0.964 and misses p, so it
    covers 0.859 of sessions; the Poisson upper bound for one failure (0.990) holds it.
    The coverage is computed exactly from the binomial distribution.
    """
    table = _bernoulli_table(n)
    if n == 30:
        assert p < intervals.wilson(1 / 30, 30)[0]
    weights = sps.binom.pmf(np.arange(n + 1), n, p)
    covered = np.array([c.low <= p <= c.high for c in table])
    plain = np.array([w[0] <= p <= w[1] for w in (intervals.wilson(x / n, n)
                                                  for x in range(n + 1))])
    assert float(weights[covered].sum()) >= 0.95
    assert float(weights[plain].sum()) < 0.93  # the dip the modification removes


@pytest.mark.parametrize(("values", "low", "high", "method", "expected"), [
    ([1.0] * 38, 0.0, 1.0, "wilson", (0.9082, 1.0)),  # vector.answered: 38 of 38
    ([0.0] * 48, 0.0, 1.0, "wilson", (0.0, 0.0741)),  # sql.correct: 0 of 48
    ([1.0] * 40, 0.0, 1.0, "wilson", (0.9124, 1.0)),  # a [0, 1] score always 1
    ([0.4] * 5, 0.0, 1.0, "wilson", (0.0711, 0.7693)),  # no spread: Bernoulli worst case
    ([100.0] * 26, 0.0, 100.0, "wilson", (87.1271, 100.0)),  # rescaled back to [0, 100]
])
def test_no_cell_without_spread_gets_a_zero_width_interval(
        values: list[float], low: float, high: float, method: str,
        expected: tuple[float, float]) -> None:
    found = cell_interval(values, low=low, high=high)
    assert found.method == method
    assert (found.low, found.high) == (pytest.approx(expected[0], abs=1e-4),
                                       pytest.approx(expected[1], abs=1e-4))
    assert found.high > found.low
    assert found.gate_low is not None and found.gate_low <= found.low + 1e-9


def test_constant_0_1_values_are_wilson_of_the_proportion() -> None:
    """38 of 38: Wilson's [0.908, 1], whatever the metric's declared range says."""
    ref = sps.binomtest(38, 38).proportion_ci(method="wilson")
    found = cell_interval([1.0] * 38)
    assert (found.low, found.high) == (pytest.approx(ref.low), pytest.approx(ref.high))
    assert found.gate_method == "clopper-pearson"
    exact = sps.binomtest(38, 38).proportion_ci(method="exact")
    assert found.gate_low == pytest.approx(exact.low)


def test_small_and_unbounded_cells() -> None:
    one = cell_interval([0.4], low=0.0, high=1.0)
    assert one.low is one.high is one.method is None and one.note == "n too small"
    unbounded = cell_interval([2.5, 2.5, 2.5])  # no spread, no known range: nothing to assume
    assert unbounded.low == unbounded.high == 2.5 and unbounded.note == intervals.NO_RANGE


def test_small_n_uses_t_clipped_to_the_range() -> None:
    symmetric = [0.2, 0.4, 0.5, 0.6, 0.8]  # no skewness: plain Student's t
    found = cell_interval(symmetric, low=0.0, high=1.0)
    ref = sps.t.interval(0.95, 4, loc=np.mean(symmetric), scale=sps.sem(symmetric))
    assert found.method == "t"
    assert (found.low, found.high) == (pytest.approx(ref[0]), pytest.approx(ref[1]))
    piled = [1.0, 1.0, 0.98, 0.9, 1.0]  # skewed towards 0: the interval reaches lower
    found = cell_interval(piled, low=0.0, high=1.0)
    ref = sps.t.interval(0.95, 4, loc=np.mean(piled), scale=sps.sem(piled))
    assert found.method == "t"
    assert found.low < ref[0] and found.high == 1.0 < ref[1]
    # The gate's bound is the more pessimistic of t and the betting bound.
    assert found.gate_low <= found.low and found.gate_method == "t+betting"


@pytest.mark.parametrize("n", [5, 10])
def test_small_n_t_interval_covers_scores_piled_near_one(n: int) -> None:
    """Beta(8, 1) scores: Hall's skewness correction brings coverage into [0.92, 0.99].

    Plain t clipped to [0, 1] covers the same sessions about 0.90 (n = 5) and 0.92 (n = 10).
    """
    sessions, mean = 4000, 8 / 9
    rows = np.random.default_rng(20261125 + n).beta(8, 1, (sessions, n))
    found = cell_intervals([CellData(row, None, 0.0, 1.0) for row in rows])
    coverage = np.mean([c.low <= mean <= c.high for c in found])
    plain = sps.t.interval(0.95, n - 1, loc=rows.mean(axis=1), scale=sps.sem(rows, axis=1))
    plain_coverage = np.mean((plain[0] <= mean) & (mean <= plain[1]))
    assert {c.method for c in found} == {"t"}
    assert 0.92 <= coverage <= 0.99, coverage
    assert plain_coverage < coverage


@pytest.mark.parametrize("n", [5, 10, 30])
def test_the_gate_on_scores_piled_near_one_is_calibrated(n: int) -> None:
    """Beta(8, 1) scores (mean 8/9): the gate passes at most 2.5% of sessions at the bound.

    The displayed interval's lower bound (t below 30, BCa from 30) alone would pass 5-10%
    of them: on scores piled near 1, sessions that miss the long tail have a high mean and
    a small spread at once.
    """
    sessions, mean = 2000, 8 / 9
    rng = np.random.default_rng(20261124 + n)
    found = cell_intervals([CellData(row, None, 0.0, 1.0) for row in rng.beta(8, 1, (sessions, n))],
                           n_resamples=2000, seed=n)
    error = 2 * math.sqrt(0.025 * 0.975 / sessions)
    assert np.mean([c.gate_low >= mean for c in found]) <= 0.025 + error
    assert np.mean([c.low >= mean for c in found]) > 0.025 + error  # why the gate needs it


def test_the_betting_bound_ignores_order_and_tightens_with_n() -> None:
    rng = np.random.default_rng(3)
    values = rng.beta(5, 2, 200)
    bound = intervals.betting_lower(values, 0.025)
    assert intervals.betting_lower(values[::-1].copy(), 0.025) == pytest.approx(bound, abs=0.01)
    assert 0.0 < intervals.betting_lower(values[:20], 0.025) < bound < values.mean()
    assert intervals.betting_lower(np.zeros(10), 0.025) == 0.0


def test_from_30_values_the_bootstrap_is_the_batched_bca() -> None:
    rng = np.random.default_rng(8)
    cells = [rng.beta(2, 5, 30), rng.beta(5, 2, 45), rng.random(45)]
    found = cell_intervals([CellData(c, None, 0.0, 1.0) for c in cells], seed=4)
    # each block of cells (by size) draws from its own generator, seeded (seed, size, 0)
    reference = [stats.batch_bootstrap_ci([c], seed=(4, c.size, 0))[0]  # type: ignore[arg-type]
                 for c in cells]
    for ours, ref in zip(found, reference, strict=True):
        assert ours.method == "bca"
        assert (ours.low, ours.high) == (pytest.approx(ref.low), pytest.approx(ref.high))
    assert cell_interval(cells[0][:29], low=0.0, high=1.0).method == "t"


def test_cluster_bootstrap_covers_where_the_item_bootstrap_does_not() -> None:
    """40 clusters of 5 strongly correlated scores: resampling items covers far too little."""
    rng = np.random.default_rng(12)
    sessions, groups, size = 300, 40, 5
    keys = [g for g in range(groups) for _ in range(size)]
    clustered, plain = [], []
    for _ in range(sessions):
        centre = rng.beta(2, 2, groups)  # true mean 0.5
        values = np.clip(np.repeat(centre, size) + rng.normal(0, 0.05, groups * size), 0, 1)
        clustered.append(CellData(values, keys, 0.0, 1.0))
        plain.append(CellData(values, None, 0.0, 1.0))
    with_clusters = cell_intervals(clustered, n_resamples=2000, seed=1)
    without = cell_intervals(plain, n_resamples=2000, seed=1)
    cover = np.mean([c.low <= 0.5 <= c.high for c in with_clusters])
    naive = np.mean([c.low <= 0.5 <= c.high for c in without])
    assert all(c.method == "bca" and c.n_clusters == groups for c in with_clusters)
    assert 0.92 <= cover <= 0.98
    assert naive < 0.75


def test_clusters_shrink_the_effective_sample_of_a_proportion() -> None:
    values = [1.0] * 30 + [0.0] * 10
    keys = [i // 4 for i in range(40)]  # 10 clusters, each all 1 or all 0 but the mixed ones
    plain, clustered = cell_interval(values), cell_interval(values, keys)
    assert clustered.method == "wilson" and clustered.n_clusters == 10
    assert clustered.high - clustered.low > plain.high - plain.low
    # All ones in 10 clusters of 4: as sure as 10 independent ones, not 40.
    ten = cell_interval([1.0] * 40, keys)
    assert ten.low == pytest.approx(cell_interval([1.0] * 10).low)
    small = cell_interval([0.2, 0.4, 0.3], ["a", "a", "a"])  # one cluster: n too small
    assert small.note == "n too small" and small.n_clusters == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([0.0, 0.5, 1.0]),
                          st.floats(0.0, 1.0, allow_nan=False)), min_size=2, max_size=45),
       st.integers(1, 6))
def test_every_bounded_cell_has_a_method_and_width(values: list[float], size: int) -> None:
    """Any [0, 1] cell: a named method, a positive width inside the range, holding the mean."""
    keys = [i // size for i in range(len(values))] if size > 1 else None
    found = cell_interval(values, keys, 0.0, 1.0, n_resamples=2000)
    if keys is not None and len(set(keys)) < 2:
        assert found.method is None and found.note == "n too small"
        return
    mean = math.fsum(values) / len(values)
    assert found.method in {"wilson", "t", "bca"}
    assert 0.0 <= found.low < found.high <= 1.0
    assert found.low - 1e-9 <= mean <= found.high + 1e-9
    assert found.gate_low <= found.low + 1e-12 and found.gate_high >= found.high - 1e-12


def test_a_cells_interval_does_not_depend_on_the_cells_beside_it() -> None:
    """A ``-k`` subset (or one kind's plots drawn ahead) shows the same bootstrap interval."""
    rng = np.random.default_rng(4)
    cell = CellData(list(rng.beta(2, 5, 40)), None, 0.0, 1.0)
    others = [CellData(list(rng.beta(2, 2, n)), None, 0.0, 1.0) for n in (31, 35, 40, 52)]
    alone = cell_intervals([cell])[0]
    among = cell_intervals([*others, cell])[-1]
    assert alone.method == "bca"
    assert (alone.low, alone.high) == (among.low, among.high)  # the same bits, not just close
    # clustered cells too (their estimate and jackknife are per cell as well)
    keys = [i // 2 for i in range(80)]
    clustered = CellData(list(rng.beta(2, 5, 80)), keys, 0.0, 1.0)
    neighbour = CellData(list(rng.beta(2, 2, 80)), keys, 0.0, 1.0)
    first = cell_intervals([clustered])[0]
    assert first.method == "bca" and first.n_clusters == 40
    assert (first.low, first.high) == (lambda c: (c.low, c.high))(
        cell_intervals([neighbour, clustered])[1])


SKEWED = [0.99] * 69 + [0.0]  # a third of its resampled means equal the estimate


def test_bca_counts_resampled_means_at_the_estimate_as_ties_whatever_the_batch() -> None:
    """A resampled mean with exactly one 0 is the estimate, computed in another order; an
    exact comparison made z0 (and the interval) turn on how BLAS rounded the product:
    [0.8913, 0.9900] alone, [0.9476, 0.9900] beside any other cell of 70 values."""
    rng = np.random.default_rng(70)
    alone = stats.batch_bootstrap_ci([SKEWED])[0]
    assert alone.method == "bca"
    for others in ([list(rng.random(70))], [list(rng.beta(2, 5, 70)) for _ in range(7)]):
        among = stats.batch_bootstrap_ci([*others, SKEWED, *others])[len(others)]
        assert (among.low, among.high) == (alone.low, alone.high)
    # the same with a third value, where the report itself bootstraps
    three = [0.99] * 68 + [0.5, 0.0]
    report = cell_intervals([CellData(three, None, 0.0, 1.0)])[0]
    beside = cell_intervals([CellData(list(rng.random(70)), None, 0.0, 1.0),
                             CellData(three, None, 0.0, 1.0)])[1]
    assert report.method == "bca" and (beside.low, beside.high) == (report.low, report.high)


def test_ties_are_counted_half_in_the_bias_correction() -> None:
    """z0 from the resampled zero counts k (mean 0.99 (70 - k) / 70): below the estimate for
    k >= 2, a tie for k = 1; the interval is BCa's with that z0."""
    from scipy.special import ndtr, ndtri

    values = np.array(SKEWED)
    rng = np.random.default_rng(0)
    means = stats._resampled_means(values[:, None], 10_000, rng)
    zeros = np.random.default_rng(0).integers(0, 70, (10_000, 70)) == 69  # the same draws
    k = zeros.sum(axis=1)
    z0 = ndtri((2 * (k >= 2).sum() + (k == 1).sum()) / 20_000)
    u = values - values.mean()
    a = (u**3).sum() / (6 * (u**2).sum() ** 1.5)
    z = ndtri(0.025)
    levels = [ndtr(z0 + (z0 + s * z) / (1 - a * (z0 + s * z))) for s in (1, -1)]
    expected = np.quantile(means[0], levels)
    (found,) = stats._intervals(values[:, None], means, 0.95, "bca")
    assert (found.low, found.high) == (pytest.approx(expected[0]), pytest.approx(expected[1]))


def test_two_valued_scores_get_the_interval_of_their_share() -> None:
    found = cell_interval(SKEWED, low=0.0, high=1.0)
    share = intervals.modified_wilson(69 / 70, 70)
    assert (found.method, found.note) == ("wilson", intervals.TWO_VALUES)
    assert (found.low, found.high) == (pytest.approx(0.99 * share[0]),
                                       pytest.approx(0.99 * share[1]))
    assert found.gate_method == "wilson+betting" and found.gate_low <= found.low
    graded = cell_interval([50.0] * 21 + [100.0] * 9, low=0.0, high=100.0)
    low, high = intervals.modified_wilson(0.3, 30)
    assert (graded.low, graded.high) == (pytest.approx(50 + 50 * low),
                                         pytest.approx(50 + 50 * high))
    # below 30 values two distinct values may be a continuous metric's: t, not held in [a, b]
    for few in ([0.3, 0.8], [0.3] * 5 + [0.8] * 5):
        found = cell_interval(few, low=0.0, high=1.0)
        assert found.method == "t" and found.note is None
    assert cell_interval([0.3, 0.8], low=0.0, high=1.0).low < 0.3


@pytest.mark.parametrize("n", [40, 70, 120])
def test_a_score_of_099_or_0_is_covered_exactly_as_promised(n: int) -> None:
    """Exact coverage (a sum over the number of zeros, no simulation) of 0.99 or 0 with 5%
    zeros: BCa covered 0.84-0.91 of sessions at these n; the report's stays in [0.92, 0.99]."""
    q = 0.05
    table = cell_intervals([CellData([0.99] * (n - k) + [0.0] * k, None, 0.0, 1.0)
                            for k in range(n + 1)])
    mean = 0.99 * (1 - q)
    weights = sps.binom.pmf(np.arange(n + 1), n, q)
    covered = sum(w for w, c in zip(weights, table, strict=True) if c.low <= mean <= c.high)
    assert 0.92 <= covered <= 0.99, covered
