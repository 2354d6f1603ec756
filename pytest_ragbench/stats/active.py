"""Active statistical inference for a human mean: label where the judge is unsure.

Zrnic & Candès, "Active statistical inference" (ICML 2024; PNAS 2024): each item i is
labelled with its own probability π_i (Poisson sampling, ξ_i ~ Bernoulli(π_i), independent),
and the human mean is estimated from the judge's score f_i of every item and the labels
h_i, reweighted by the inverse of their inclusion probabilities:

    θ̂ = (1/N) Σ_i [λ·f_i + (h_i − λ·f_i)·ξ_i/π_i]

unbiased for every π and every fixed λ (E[ξ_i/π_i] = 1). The terms are independent, so
the variance is estimated by their sample variance over N. The variance is smallest with
π_i ∝ sqrt(E[(h_i − λ·f_i)²]) (Cauchy-Schwarz), so the probabilities follow a plug-in for
that error: the judge's own uncertainty, the spread of its repeated samples when there
are several, else sqrt(f(1 − f)) of its score in [0, 1] (exact for a calibrated 0/1
judge, whose label is 1 with probability f). Half the budget is spread evenly, so that no
item's probability falls near 0: a judge sure of an item and wrong about it then costs a
bounded weight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pytest_ragbench.stats.core import Scores, _array, _check_confidence, _unlabeled

if TYPE_CHECKING:
    import numpy as np

ActiveMethod = Literal["active++", "active"]
# The share of the label budget spread evenly over the items: it bounds the weight 1/π of
# an item the judge was sure of, and wrong about. With a fifth, a judge sure (score 1) of a
# third of the items and wrong on a tenth of those left the interval covering 0.84, 0.90,
# 0.92 of sessions at 20, 50, 100 labels; with half, 0.92, 0.93, 0.95, and a calibrated
# judge's interval widened by 3-4% (benchmarks/bench_active_labels.py).
UNIFORM_SHARE = 0.5


def judge_uncertainty(scores: Scores, samples: Sequence[Sequence[float]] | None = None,
                      low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Each item's plug-in for sqrt(E[(human − judge)²]), on the [0, 1] scale.

    ``scores`` are the judge's scores on the metric's range ``[low, high]``; ``samples``
    (optional) each item's repeated judge samples. With two or more samples the spread
    (standard deviation) of the samples is used, else sqrt(f(1 − f)) of the rescaled score.
    """
    if not high > low:
        raise ValueError(f"the metric's range must have high > low, got [{low}, {high}]")
    import numpy as np

    f = np.clip((_array(scores) - low) / (high - low), 0.0, 1.0)
    spread = np.sqrt(f * (1.0 - f))
    if samples is not None:
        if len(samples) != f.size:
            raise ValueError(f"samples has {len(samples)} items, scores {f.size}")
        for index, values in enumerate(samples):
            if len(values) >= 2:
                scaled = (np.asarray(values, dtype=float) - low) / (high - low)
                spread[index] = float(scaled.std(ddof=1))
    return spread


def sampling_probabilities(uncertainty: Scores, budget: float,
                           uniform_share: float = UNIFORM_SHARE) -> np.ndarray:
    """Inclusion probabilities π_i ∝ uncertainty, summing to ``budget``, each in (0, 1].

    ``(1 − uniform_share)`` of the budget follows the uncertainty and ``uniform_share``
    is spread evenly (so π_i >= uniform_share·budget/N); a probability above 1 is capped
    at 1 and the excess shared out among the others in proportion to their weights. With
    no uncertainty anywhere the sampling is uniform.
    """
    import numpy as np

    u = _array(uncertainty, "uncertainty")
    n = u.size
    if (u < 0).any():
        raise ValueError("uncertainty must be >= 0")
    if not 0.0 < budget <= n:
        raise ValueError(f"the expected label count must be in (0, {n}], got {budget}")
    if not 0.0 <= uniform_share <= 1.0:
        raise ValueError(f"uniform_share must be in [0, 1], got {uniform_share}")
    share = 1.0 if u.sum() <= 0.0 else uniform_share
    weight = np.full(n, share / n) + (1.0 - share) * (u / u.sum() if u.sum() > 0 else 0.0)
    weight = np.maximum(weight, 1e-12)  # keeps every item's probability above 0
    pi = np.zeros(n)
    capped = np.zeros(n, dtype=bool)
    while True:  # at most n rounds: each caps at least one more item or stops
        free = ~capped
        pi[free] = (budget - capped.sum()) * weight[free] / weight[free].sum()
        over = free & (pi >= 1.0)
        if not over.any():
            break
        capped |= over
        pi[capped] = 1.0
        if capped.all():
            break
    return pi


def poisson_sample(pi: Scores, seed: int | None = None) -> np.ndarray:
    """Which items to label: each independently with its probability (a boolean mask)."""
    import numpy as np

    p = _array(pi, "pi")
    return np.random.default_rng(seed).random(p.size) < p


@dataclass(frozen=True)
class ActiveInterval:
    """The inverse-probability-weighted estimate of the human mean, with its interval.

    ``lam`` is the weight of the judge (1: the plain active estimator, tuned in [0, 1]
    with ``method="active++"``), ``shift`` the constant subtracted from every label's
    residual (0 for the plain estimator); ``se`` the standard error, ``df`` the degrees of freedom
    of the t quantile (labelled items − 1).
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
    lam: float
    shift: float
    method: str

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return dict(self.__dict__)


def active_mean_ci(judge_all: Scores, judge_labeled: Scores, human_labeled: Scores,
                   pi_labeled: Scores, confidence: float = 0.95,
                   method: ActiveMethod = "active++") -> ActiveInterval:
    """The active-inference CI of the mean human score (Zrnic & Candès 2024).

    ``judge_all`` is the judge's score of every item, the labelled ones included (as
    :func:`pytest_ragbench.stats.ppi_mean_ci` takes it); ``judge_labeled``,
    ``human_labeled`` and ``pi_labeled`` the judge's score, the person's score and the
    inclusion probability of each labelled item, the labelled items having been drawn by
    Poisson sampling with those probabilities (:func:`poisson_sample`).

    With Z_i = λ·f_i + c + (h_i − λ·f_i − c)·ξ_i/π_i the estimate is mean(Z) and its
    standard error sd(Z)/sqrt(N); the interval uses Student's t with n − 1 degrees of
    freedom (n labelled items), the number of independent label terms the variance rests
    on. Z is unbiased for every fixed λ and c, E[ξ_i/π_i] being 1. ``"active"`` is the
    plain estimator, λ = 1 and c = 0; ``"active++"`` (default) tunes both to minimise the
    estimated variance: λ in [0, 1], the power tuning of PPI++ (Angelopoulos, Duchi & Zrnic
    2023) as the active-inference paper uses it, and c, which removes the variance of the
    random number of labels when the judge is off by a constant (without it, labels picked
    uniformly by Poisson sampling gave intervals up to a quarter wider than PPI++'s with
    as many labels, on WikiQA with token F1 as the judge).
    """
    import numpy as np
    from scipy.special import stdtrit

    _check_confidence(confidence)
    if method not in ("active++", "active"):
        raise ValueError(f"method must be 'active++' or 'active', got {method!r}")
    f_all = _array(judge_all, "judge_all")
    f_lab = _array(judge_labeled, "judge_labeled")
    h_lab = _array(human_labeled, "human_labeled")
    p_lab = _array(pi_labeled, "pi_labeled")
    n = int(f_lab.size)
    if h_lab.size != n or p_lab.size != n:
        raise ValueError(f"judge_labeled, human_labeled and pi_labeled differ in length: "
                         f"{n}, {h_lab.size}, {p_lab.size}")
    if n < 2:
        raise ValueError(f"an active-inference interval needs at least 2 labelled items, "
                         f"got {n}")
    if ((p_lab <= 0.0) | (p_lab > 1.0)).any():
        raise ValueError("every inclusion probability must be in (0, 1]")
    f_unl = _unlabeled(f_lab, f_all)
    big_n = int(f_all.size)
    # The terms A + λ·B + c·C of every item: the unlabelled items' A is 0, B is f, C is 1.
    a = np.concatenate([np.zeros(f_unl.size), h_lab / p_lab])
    b = np.concatenate([f_unl, f_lab * (1.0 - 1.0 / p_lab)])
    c = np.concatenate([np.ones(f_unl.size), 1.0 - 1.0 / p_lab])
    lam, shift = (1.0, 0.0) if method == "active" else _tuned(a, b, c)
    z = a + lam * b + shift * c
    mean = float(z.mean())
    se = float(z.std(ddof=1)) / math.sqrt(big_n)
    quantile = float(stdtrit(n - 1, (1 + confidence) / 2))
    return ActiveInterval(mean, mean - quantile * se, mean + quantile * se, se, float(n - 1),
                          n, big_n, confidence, float(f_all.mean()), lam, shift, method)


def _tuned(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[float, float]:
    """The (λ, c) minimising the sample variance of A + λ·B + c·C, λ kept in [0, 1].

    Least squares of A on −B and −C (centred); when λ falls outside [0, 1] it is clipped
    and c fitted again for it.
    """
    import numpy as np

    def centred(x: np.ndarray) -> np.ndarray:
        return x - x.mean()

    ca, cb, cc = centred(a), centred(b), centred(c)
    design = np.column_stack([cb, cc])
    if np.linalg.matrix_rank(design) < 2:  # no spread in the judge, or all items labelled
        variance_b = float(cb @ cb)
        lam = 0.0 if variance_b <= 0 else min(1.0, max(0.0, -float(ca @ cb) / variance_b))
        variance_c = float(cc @ cc)
        rest = ca + lam * cb
        return lam, 0.0 if variance_c <= 0 else -float(rest @ cc) / variance_c
    coefficients = np.linalg.lstsq(design, -ca, rcond=None)[0]
    lam = float(coefficients[0])
    if 0.0 <= lam <= 1.0:
        return lam, float(coefficients[1])
    lam = min(1.0, max(0.0, lam))
    variance_c = float(cc @ cc)
    rest = ca + lam * cb
    return lam, 0.0 if variance_c <= 0 else -float(rest @ cc) / variance_c


def design_variance(judge: Scores, error_second_moment: Scores, error_mean: Scores,
                    pi: Scores) -> float:
    """The variance of the λ = 1 estimate for fixed judge scores, in closed form.

    With independent Poisson sampling, Var θ̂ = (1/N²)·Σ_i (E[e_i²]/π_i − E[e_i]²), e_i =
    h_i − f_i (the sum over items of each term's variance). Used to compare designs.
    """
    e2 = _array(error_second_moment)
    e1 = _array(error_mean)
    p = _array(pi, "pi")
    big_n = _array(judge).size
    return float((e2 / p - e1**2).sum()) / big_n**2
