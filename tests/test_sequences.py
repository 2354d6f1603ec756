"""The betting confidence sequence (stats/sequences.py): equal to confseq's, and anytime-valid."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_ragbench.stats.sequences import GRID, BettingSequence, betting_sequence
from tests.confseq_oracle import load_betting


@pytest.fixture(scope="module")
def confseq_betting(tmp_path_factory: pytest.TempPathFactory):
    return load_betting(tmp_path_factory.mktemp("confseq"))


@pytest.mark.parametrize(("draw", "alpha"), [
    ("bernoulli 0.8", 0.05), ("beta 8 1", 0.05), ("uniform", 0.01), ("bernoulli 0.1", 0.005),
])
def test_equal_to_the_method_authors_confseq(confseq_betting, draw: str, alpha: float) -> None:
    rng = np.random.default_rng(abs(hash(draw)) % 2**32)
    n = 120
    name, *args = draw.split()
    if name == "bernoulli":
        x = (rng.random(n) < float(args[0])).astype(float)
    elif name == "beta":
        x = rng.beta(float(args[0]), float(args[1]), n)
    else:
        x = rng.random(n)
    low, high = betting_sequence(x, alpha)
    ref_low, ref_high = confseq_betting.betting_cs(x, alpha=alpha, breaks=GRID,
                                                   running_intersection=True)
    # the same grid: equal but for a candidate whose capital sits at 1/alpha to rounding
    assert np.abs(low - ref_low).max() <= 1 / GRID + 1e-12
    assert np.abs(high - ref_high).max() <= 1 / GRID + 1e-12
    assert np.mean(np.isclose(low, ref_low)) > 0.95
    assert np.mean(np.isclose(high, ref_high)) > 0.95


def test_it_shrinks_towards_the_mean_and_never_widens() -> None:
    rng = np.random.default_rng(3)
    x = rng.beta(2, 2, 400)
    low, high = betting_sequence(x, 0.05)
    assert np.all(np.diff(low) >= 0) and np.all(np.diff(high) <= 0)
    assert low[-1] < 0.5 < high[-1]
    assert high[-1] - low[-1] < 0.2
    assert high[9] - low[9] > high[-1] - low[-1]


@pytest.mark.parametrize("draw", ["bernoulli", "beta"])
def test_it_covers_the_mean_at_every_n_at_once(draw: str) -> None:
    """Looked at after every value, the sequence excludes the mean in at most alpha of runs."""
    rng = np.random.default_rng(11)
    alpha, runs, n = 0.1, 300, 200
    mean = 0.7
    missed = 0
    for _ in range(runs):
        x = (rng.random(n) < mean).astype(float) if draw == "bernoulli" \
            else rng.beta(7, 3, n)
        low, high = betting_sequence(x, alpha)
        missed += bool(np.any((low > mean) | (high < mean)))
    # a binomial upper bound: 300 runs at the worst admissible rate 0.1 exceed 0.14 rarely
    assert missed / runs <= 0.14, missed


def test_rejects_a_bad_alpha() -> None:
    with pytest.raises(ValueError, match="alpha"):
        BettingSequence(1.5)
