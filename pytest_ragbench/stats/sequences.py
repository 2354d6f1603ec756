"""Anytime-valid confidence sequences for the mean of bounded values, one value at a time.

A confidence sequence (C_1, C_2, ...) covers the mean at every n at once: the chance that
it ever excludes the mean is at most alpha, so it may be looked at after each value and
a decision taken whenever it is wholly on one side of a bound, without the error growing
with the looks (a fixed-n interval looked at after every value misses far more often).

The construction is Waudby-Smith & Ramdas' hedged capital ("Estimating means of bounded
random variables by betting", JRSS-B 2024, theorem 3), the one behind the betting bound of
the ci-lower gate (:func:`pytest_ragbench.stats.intervals.betting_lower`), kept here in
its sequential form: for each candidate mean m on a grid of [0, 1], a bettor stakes on the
next value being above m and another on it being below, each with predictable
empirical-Bernstein bets ("predictable mixture") truncated at half of what keeps the
capital positive. m leaves the sequence when the larger of the halved capitals reaches
1/alpha (Ville's inequality); the sequence is the running intersection of the candidates
not yet rejected. The values are scaled to [0, 1] by the metric's range first; 0/1 values
are a special case (the binomial one), the bound stays valid for them.

The defaults are those of ``confseq.betting.betting_cs`` (the method's authors' package),
which ``tests/test_sequences.py`` uses as the oracle: the same grid of 1,001 candidates,
the same bets, the same truncation. Pure numpy.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

GRID = 1000
"""Candidates are 0, 1/GRID, ..., 1; the bounds are widened by one step (as confseq does)."""
PRIOR_MEAN = 0.5
PRIOR_VARIANCE = 0.25
TRUNCATION = 0.5
"""A bet on m stakes at most half of what keeps the capital positive."""


class BettingSequence:
    """The hedged-capital confidence sequence of the mean of values in [0, 1].

    ``add`` one value at a time; ``low`` and ``high`` are the running intersection of the
    sequence so far (the mean lies outside them at some n with chance at most ``alpha``).
    """

    def __init__(self, alpha: float) -> None:
        import numpy as np

        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
        self.alpha = alpha
        self.n = 0
        self.low = 0.0
        self.high = 1.0
        self._m = np.arange(GRID + 1) / GRID
        self._log_up = np.zeros(GRID + 1)  # capital of the bettor on values above m
        self._log_down = np.zeros(GRID + 1)  # ... below m
        self._sum = 0.0
        self._squares = 0.0  # sum of (x_i - mean after x_i)^2, the predictable variance's
        self._variance = PRIOR_VARIANCE  # the estimate from the values before the next one
        with np.errstate(divide="ignore"):
            self._cap_up = TRUNCATION / self._m  # inf at m = 0: no cap needed there
            self._cap_down = TRUNCATION / (1.0 - self._m)
        # each side is one of two hedged bettors: its bets are tuned to alpha / 2
        self._log_alpha_side = math.log(2.0 / alpha)
        self._threshold = math.log(1.0 / alpha) - math.log(0.5)

    def add(self, value: float) -> None:
        """Take the next value (clipped to [0, 1]) and update the bounds."""
        import numpy as np

        x = min(1.0, max(0.0, float(value)))
        t = self.n + 1
        bet = math.sqrt(2.0 * self._log_alpha_side / (t * math.log1p(t) * self._variance))
        up = np.minimum(bet, self._cap_up)
        down = np.minimum(bet, self._cap_down)
        self._log_up += np.log1p(up * (x - self._m))
        self._log_down += np.log1p(-down * (x - self._m))
        self.n = t
        self._sum += x
        mean_after = min((PRIOR_MEAN + self._sum) / (t + 1), 1.0)
        self._squares += (x - mean_after) ** 2
        self._variance = (PRIOR_VARIANCE + self._squares) / (t + 1)
        inside = np.flatnonzero(np.maximum(self._log_up, self._log_down) <= self._threshold)
        if inside.size:
            low = max(0.0, (inside[0] - 1) / GRID)
            high = min(1.0, (inside[-1] + 1) / GRID)
            self.low, self.high = max(self.low, low), min(self.high, high)

    def extend(self, values: np.ndarray | list[float]) -> None:
        """``add`` each value in turn."""
        for value in values:
            self.add(float(value))


def betting_sequence(values: np.ndarray | list[float], alpha: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The sequence's (low, high) after each of ``values``, as arrays (running intersection)."""
    import numpy as np

    sequence = BettingSequence(alpha)
    lows, highs = np.empty(len(values)), np.empty(len(values))
    for i, value in enumerate(values):
        sequence.add(float(value))
        lows[i], highs[i] = sequence.low, sequence.high
    return lows, highs
