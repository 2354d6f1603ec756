"""Statistics of production traffic: time windows, design-weighted estimates, drift.

Traffic is split into windows (``day``, ``week``, ``month``, in UTC). Each window's metric
is estimated with a t interval. A metric measured on every interaction is the mean of the
window; its interval is for the process that produced the traffic (the values are draws
from it), since the window's own mean is known exactly. A metric measured on a sample
(judged metrics with ``--ragbench-sample``) is drawn stratified by window, without
replacement: within a window the sample mean is unbiased for the window's traffic and its
variance carries the finite-population correction ``1 - n/N``; over several windows the
estimate is the stratified mean ``sum(N_h / N * mean_h)`` (each judged interaction weighs
``N_h / n_h``, its design weight) with variance ``sum((N_h / N)^2 (1 - f_h) s_h^2 / n_h)``
and Satterthwaite's degrees of freedom.

Drift: each window is compared with the one before, metric by metric, with Welch's
two-sample t test (the processes of the two windows; no finite-population correction),
and the p-values of one window pair are adjusted together with Holm's method. A change
is listed when the adjusted p is below alpha, with its delta and the delta's interval.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from pytest_ragbench.stats.core import adjust_pvalues

Window = Literal["day", "week", "month"]
WINDOWS: tuple[Window, ...] = ("day", "week", "month")
CONFIDENCE = 0.95
ALPHA = 0.05


def window_of(moment: dt.datetime, window: Window) -> str:
    """The label of the UTC window holding ``moment``: 2026-11-02, 2026-W45 or 2026-11."""
    moment = moment.astimezone(dt.UTC)
    if window == "day":
        return moment.date().isoformat()
    if window == "week":
        year, week, _ = moment.isocalendar()
        return f"{year}-W{week:02d}"
    if window == "month":
        return f"{moment.year}-{moment.month:02d}"
    raise ValueError(f"unknown window {window!r}: use one of {', '.join(WINDOWS)}")


@dataclass(frozen=True)
class Estimate:
    """A metric's estimate over some traffic: its mean and the interval around it."""

    n: int              # values it was computed from
    population: int     # interactions it stands for (n unless sampled)
    mean: float
    se: float
    low: float
    high: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {key: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for key, v in asdict(self).items()}


@dataclass
class Moments:
    """Running count, mean and sum of squares (Welford): bounded memory for any traffic."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, value: float) -> None:
        """Take one value into the moments."""
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (value - self.mean)

    @property
    def variance(self) -> float:
        """The sample variance (n - 1); NaN under two values."""
        return self.m2 / (self.n - 1) if self.n > 1 else math.nan

    @classmethod
    def of(cls, values: Iterable[float]) -> Moments:
        """The moments of ``values``."""
        array = np.fromiter(values, dtype=float)
        if not array.size:
            return cls()
        mean = float(array.mean())
        return cls(int(array.size), mean, float(((array - mean) ** 2).sum()))


def _t_bounds(mean: float, se: float, df: float, confidence: float) -> tuple[float, float]:
    if not (math.isfinite(se) and df > 0):
        return math.nan, math.nan
    if se == 0.0:
        return mean, mean
    from scipy import stats as scipy_stats  # lazy: slow to import, collection needs none

    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, df)) * se
    return mean - half, mean + half


def window_estimate(moments: Moments, population: int | None = None,
                    confidence: float = CONFIDENCE) -> Estimate:
    """One window's estimate: from every interaction, or from a sample of ``population``."""
    n = moments.n
    population = n if population is None else population
    if n == 0:
        return Estimate(0, population, math.nan, math.nan, math.nan, math.nan)
    # every interaction: the interval is for the process (see above); a sample: for the window
    fpc = 1.0 if n >= population else 1.0 - n / population
    se = math.sqrt(fpc * moments.variance / n) if n > 1 else math.nan
    low, high = _t_bounds(moments.mean, se, n - 1, confidence)
    return Estimate(n, population, moments.mean, se, low, high)


def stratified_estimate(strata: Sequence[tuple[Moments, int]],
                        confidence: float = CONFIDENCE) -> Estimate:
    """The whole traffic's estimate from per-window (moments, window size) pairs.

    Each window is weighted by its share of the traffic; a window whose sample is
    smaller than its size adds its finite-population-corrected variance, a window
    measured whole adds the process variance (as :func:`window_estimate`).
    """
    used = [(m, size) for m, size in strata if m.n > 0 and size > 0]
    total = sum(size for _, size in used)
    n = sum(m.n for m, _ in used)
    if not used:
        return Estimate(0, 0, math.nan, math.nan, math.nan, math.nan)
    mean = sum(size / total * m.mean for m, size in used)
    parts = []
    for m, size in used:
        fpc = 1.0 if m.n >= size else 1.0 - m.n / size
        variance = m.variance if m.n > 1 else 0.0
        parts.append(((size / total) ** 2 * fpc * variance / m.n, m.n - 1))
    var = sum(p for p, _ in parts)
    se = math.sqrt(var)
    # Satterthwaite: the degrees of freedom of a sum of scaled variances
    denominator = sum(p * p / df for p, df in parts if df > 0 and p > 0)
    df = var * var / denominator if denominator > 0 else max(n - 1, 1)
    low, high = _t_bounds(mean, se, df, confidence)
    return Estimate(n, total, mean, se, low, high)


@dataclass(frozen=True)
class Change:
    """One metric's change from a window to the next, tested."""

    metric: str
    before: str
    after: str
    delta: float
    low: float
    high: float
    p: float
    p_holm: float
    significant: bool
    worse: bool            # significant, and in the metric's bad direction

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {key: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for key, v in asdict(self).items()}


def welch(a: Moments, b: Moments, confidence: float = CONFIDENCE
          ) -> tuple[float, float, float, float]:
    """(delta b - a, its interval's low and high, two-sided p) by Welch's t test."""
    delta = b.mean - a.mean
    va, vb = a.variance / a.n, b.variance / b.n
    se = math.sqrt(va + vb)
    if se == 0.0:
        return delta, delta, delta, (1.0 if delta == 0 else 0.0)
    df = (va + vb) ** 2 / ((va * va / (a.n - 1) if va else 0.0)
                           + (vb * vb / (b.n - 1) if vb else 0.0))
    from scipy import stats as scipy_stats  # lazy: slow to import, collection needs none

    p = float(2 * scipy_stats.t.sf(abs(delta) / se, df))
    low, high = _t_bounds(delta, se, df, confidence)
    return delta, low, high, p


def drift(windows: Sequence[str], moments: Mapping[str, Mapping[str, Moments]],
          direction: Mapping[str, int], alpha: float = ALPHA,
          confidence: float = CONFIDENCE) -> list[Change]:
    """Every metric's change between consecutive windows, Holm-adjusted within each pair.

    ``moments[window][metric]``; ``direction[metric]`` is +1 when higher is better, -1
    when lower is better, 0 when neither (a change is listed but never "worse").
    """
    changes: list[Change] = []
    for before, after in itertools.pairwise(windows):
        tested = []
        for metric in sorted(set(moments.get(before, {})) & set(moments.get(after, {}))):
            a, b = moments[before][metric], moments[after][metric]
            if a.n < 2 or b.n < 2:
                continue
            tested.append((metric, *welch(a, b, confidence)))
        if not tested:
            continue
        adjusted = adjust_pvalues(np.array([t[4] for t in tested]), method="holm")
        for (metric, delta, low, high, p), p_holm in zip(tested, adjusted, strict=True):
            significant = bool(p_holm < alpha)
            sign = direction.get(metric, 0)
            changes.append(Change(metric, before, after, delta, low, high, p,
                                  float(p_holm), significant,
                                  significant and sign * delta < 0))
    return changes


def allocate(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """``n`` sample places shared among windows in proportion to their sizes.

    Largest remainders; every window with two or more interactions gets at least two
    places when ``n`` allows, so that each window's variance can be estimated.
    """
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    floor = {w: min(size, 2) for w, size in sizes.items()} if n >= 2 * len(sizes) else {
        w: 0 for w in sizes}
    left = n - sum(floor.values())
    spare = {w: size - floor[w] for w, size in sizes.items()}
    spare_total = sum(spare.values())
    quotas = {w: left * s / spare_total if spare_total else 0.0 for w, s in spare.items()}
    places = {w: floor[w] + int(q) for w, q in quotas.items()}
    remaining = n - sum(places.values())
    for w in sorted(quotas, key=lambda w: (-(quotas[w] - int(quotas[w])), w))[:remaining]:
        places[w] += 1
    return {w: min(p, sizes[w]) for w, p in places.items()}


def stratified_sample(windows: Sequence[str], n: int, seed: int) -> set[int]:
    """Positions (0-based) of a sample of ``n`` drawn without replacement within windows.

    ``windows[i]`` is interaction i's window; the same seed draws the same sample.
    """
    members: dict[str, list[int]] = {}
    for position, window in enumerate(windows):
        members.setdefault(window, []).append(position)
    places = allocate({w: len(m) for w, m in members.items()}, n)
    rng = np.random.default_rng(seed)
    chosen: set[int] = set()
    for window in sorted(members):
        picked = rng.choice(len(members[window]), size=places[window], replace=False)
        chosen.update(members[window][int(i)] for i in picked)
    return chosen
