"""``stats.ppi_mean_ci``: its formula, edge cases, and coverage in simulation and on real labels.

The real labels are WikiQA's (../shared/oracles/wikiqa-labels): 116 questions, each with
one answer sentence people marked correct (1) and one marked incorrect (0), so the human
mean of the 232 pairs is exactly 0.5. The "judge" is a real offline proxy, the SQuAD
token F1 of the answer sentence against the question (pytest_ragbench.metrics.token_f1):
it has nothing to do with people's notion of a correct answer beyond word overlap, and
its mean is far below 0.5, so the judge-only interval never covers the human mean.
"""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from scipy import stats as sps

from pytest_ragbench import stats
from pytest_ragbench.metrics import token_f1
from tests.conftest import oracle_file

NOMINAL = 0.95


def band(reps: int) -> float:
    """Three binomial standard errors of a coverage of 0.95 over ``reps`` repetitions."""
    return 3 * math.sqrt(NOMINAL * (1 - NOMINAL) / reps)


def test_estimate_and_interval_follow_the_documented_formula() -> None:
    rng = np.random.default_rng(7)
    f = rng.beta(2, 3, 300)
    y = (rng.random(300) < f + 0.15).astype(float)
    labeled = rng.choice(300, 40, replace=False)
    ppi = stats.ppi_mean_ci(f, f[labeled], y[labeled], confidence=0.9)
    # Written out independently: mean(f_all) + mean(y_L - f_L), and the variance of that
    # estimate when the labeled items are among all items (w = (N - n) / N).
    big_n, n = 300, 40
    w = (big_n - n) / big_n
    a = w * f.var(ddof=1) / big_n
    b = (y[labeled] - w * f[labeled]).var(ddof=1) / n
    df = (a + b) ** 2 / (a**2 / (big_n - 1) + b**2 / (n - 1))
    mean = f.mean() + (y[labeled] - f[labeled]).mean()
    margin = sps.t.ppf(0.95, df) * math.sqrt(a + b)
    assert ppi.mean == pytest.approx(mean, abs=1e-12)
    assert (ppi.low, ppi.high) == (pytest.approx(mean - margin, abs=1e-12),
                                   pytest.approx(mean + margin, abs=1e-12))
    assert ppi.judge_mean == pytest.approx(f.mean(), abs=1e-12)
    assert ppi.rectifier == pytest.approx(mean - f.mean(), abs=1e-12)
    assert (ppi.n_labeled, ppi.n_all, ppi.confidence) == (40, 300, 0.9)
    assert ppi.df == pytest.approx(df) and ppi.se == pytest.approx(math.sqrt(a + b))


def test_with_every_item_labeled_it_is_the_t_interval_of_the_human_mean() -> None:
    rng = np.random.default_rng(2)
    f = rng.random(60)
    y = (rng.random(60) < 0.4).astype(float)
    ppi = stats.ppi_mean_ci(f, f, y)
    t = stats.t_ci(y)
    assert (ppi.mean, ppi.low, ppi.high) == (pytest.approx(t.mean, abs=1e-12),
                                             pytest.approx(t.low, abs=1e-12),
                                             pytest.approx(t.high, abs=1e-12))


def test_with_few_labels_among_many_items_it_is_the_papers_interval() -> None:
    """N >> n: se -> sqrt(var(f)/N + var(y - f)/n) and the quantile -> t(n - 1) -> normal."""
    rng = np.random.default_rng(3)
    f = rng.random(200_000)
    labeled = rng.choice(f.size, 80, replace=False)
    y = (rng.random(80) < f[labeled]).astype(float)
    ppi = stats.ppi_mean_ci(f, f[labeled], y)
    paper = math.sqrt(f.var(ddof=1) / f.size + (y - f[labeled]).var(ddof=1) / 80)
    assert ppi.se == pytest.approx(paper, rel=1e-3)
    assert ppi.df == pytest.approx(79, abs=1.0)


def test_order_of_the_items_does_not_matter() -> None:
    rng = np.random.default_rng(4)
    f = rng.random(50)
    y = (rng.random(10) < 0.5).astype(float)
    first = stats.ppi_mean_ci(f, f[:10], y)
    order = rng.permutation(50)
    again = stats.ppi_mean_ci(f[order], f[:10][::-1], y[::-1])
    assert (again.mean, again.low, again.high) == (pytest.approx(first.mean, abs=1e-12),
                                                   pytest.approx(first.low, abs=1e-12),
                                                   pytest.approx(first.high, abs=1e-12))


def test_bad_input_is_refused_with_a_reason() -> None:
    f = [0.1, 0.5, 0.9, 0.3]
    with pytest.raises(ValueError, match="at least 2 labeled items"):
        stats.ppi_mean_ci(f, [0.1], [1.0])
    with pytest.raises(ValueError, match="differ in length"):
        stats.ppi_mean_ci(f, [0.1, 0.5], [1.0])
    with pytest.raises(ValueError, match="labeled ones included"):
        stats.ppi_mean_ci([0.9, 0.3], [0.1, 0.5], [1.0, 0.0])  # the unlabeled items only
    with pytest.raises(ValueError, match="labeled ones included"):
        stats.ppi_mean_ci(f, [0.1, 0.1], [1.0, 0.0])  # 0.1 is there once
    with pytest.raises(ValueError, match="NaN"):
        stats.ppi_mean_ci(f, [0.1, math.nan], [1.0, 0.0])
    with pytest.raises(ValueError, match="confidence"):
        stats.ppi_mean_ci(f, [0.1, 0.5], [1.0, 0.0], confidence=95)


def test_degenerate_data_gives_numbers_not_nan() -> None:
    everything = stats.ppi_mean_ci([0.5] * 6, [0.5, 0.5], [0.5, 0.5])
    assert everything.low == everything.mean == everything.high == 0.5
    # The judge agreed with both labels: only the judge's own spread is left (documented).
    agreed = stats.ppi_mean_ci([0.0, 1.0, 0.0, 1.0, 1.0, 0.0] * 50, [0.0, 1.0], [0.0, 1.0])
    judge_only = stats.t_ci([0.0, 1.0, 0.0, 1.0, 1.0, 0.0] * 50)
    assert agreed.mean == pytest.approx(0.5)
    assert agreed.high - agreed.low == pytest.approx(judge_only.high - judge_only.low, rel=0.05)


def test_covers_the_human_mean_in_simulation_with_a_biased_judge() -> None:
    """1,000 runs of 1,000 items, 50 labels, a judge whose mean is 0.06 too low (seeded)."""
    rng = np.random.default_rng(20231110)
    reps, covered, judge_covered = 1000, 0, 0
    for _ in range(reps):
        y = (rng.random(1000) < 0.6).astype(float)
        f = np.clip(0.3 + 0.4 * y + rng.normal(0, 0.15, 1000), 0, 1)
        labeled = rng.choice(1000, 50, replace=False)
        ppi = stats.ppi_mean_ci(f, f[labeled], y[labeled])
        covered += ppi.low <= 0.6 <= ppi.high
        judge = stats.t_ci(f)
        judge_covered += judge.low <= 0.6 <= judge.high
    assert abs(covered / reps - NOMINAL) <= band(reps)
    assert judge_covered / reps < 0.01  # the judge alone is confidently wrong


# ---------------------------------------------------------------- real human labels


@pytest.fixture(scope="module")
def wikiqa() -> tuple[np.ndarray, np.ndarray]:
    """(proxy score, human label) of the 232 WikiQA question/answer pairs."""
    path = oracle_file("wikiqa-labels", "ragas-wikiqa-first-half.csv")
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 116
    proxy, human = [], []
    for row in rows:
        for column, label in (("correct_answer", 1.0), ("incorrect_answer", 0.0)):
            proxy.append(float(token_f1(row[column], row["question"])))
            human.append(label)
    return np.array(proxy), np.array(human)


def test_the_proxy_is_a_biased_judge_of_the_real_labels(
        wikiqa: tuple[np.ndarray, np.ndarray]) -> None:
    proxy, human = wikiqa
    assert human.mean() == 0.5
    assert proxy.mean() < 0.2  # word overlap with the question is no share of correct answers
    rho = sps.spearmanr(proxy, human).statistic
    assert 0.1 < rho < 0.9  # informative, far from perfect


@pytest.mark.parametrize("labels", [30, 60])
def test_covers_the_human_mean_of_real_labels_at_the_nominal_rate(
        wikiqa: tuple[np.ndarray, np.ndarray], labels: int) -> None:
    """Each run draws 232 pairs with replacement (a sample from the population of the 232
    labelled pairs, whose human mean is 0.5) and labels a random subset of them."""
    proxy, human = wikiqa
    rng = np.random.default_rng(116)
    reps, covered, judge_only = 1500, 0, 0
    ppi_width, human_width = 0.0, 0.0
    for _ in range(reps):
        sample = rng.integers(0, human.size, human.size)
        labeled = rng.choice(human.size, labels, replace=False)
        f, y = proxy[sample], human[sample]
        ppi = stats.ppi_mean_ci(f, f[labeled], y[labeled])
        covered += ppi.low <= 0.5 <= ppi.high
        judge = stats.t_ci(f)
        judge_only += judge.low <= 0.5 <= judge.high
        people = stats.t_ci(y[labeled])
        ppi_width += ppi.high - ppi.low
        human_width += people.high - people.low
    assert abs(covered / reps - NOMINAL) <= band(reps), covered / reps
    assert judge_only == 0
    assert ppi_width < human_width  # on average the proxy narrows the human-only interval


def test_holds_its_level_for_the_232_pairs_themselves(
        wikiqa: tuple[np.ndarray, np.ndarray]) -> None:
    """All 232 pairs judged, random 50 of them labeled: the target is their own mean 0.5.

    The interval is built for a sample from a larger population, so for this fixed set
    of items it can only be conservative; it must not fall below the nominal rate.
    """
    proxy, human = wikiqa
    rng = np.random.default_rng(232)
    reps, covered = 1500, 0
    for _ in range(reps):
        labeled = rng.choice(human.size, 50, replace=False)
        ppi = stats.ppi_mean_ci(proxy, proxy[labeled], human[labeled])
        covered += ppi.low <= 0.5 <= ppi.high
    assert covered / reps >= NOMINAL - band(reps), covered / reps
