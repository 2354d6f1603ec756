"""Paired comparisons: systems of one run against each other, and a run against a baseline.

Items are paired by case (kind, case id, and system for a baseline); each metric gets
the paired test that fits it — exact McNemar when every value is 0 or 1 and the cases are
independent, otherwise the randomization (sign-flip) test, which flips whole clusters when
cases share one — and the p-values of one family of comparisons are Holm-corrected
together. Differences are A − B (current − baseline).

The randomization test must be able to reach the p that Holm asks of its smallest p-value,
alpha / m: it draws :func:`resamples_for` (m) sign flips (at least 10,000, about 400 per
comparison, so that the floor 2 / (B + 1) sits ten times below alpha / m; fewer when that
would exceed :data:`FLIP_BUDGET`, as ``p_resolution`` then shows), enumerates every flip
when there are no more of them than that, and when no flip reaches the observed difference
reports Hoeffding's bound on the exact p where it is smaller than the floor.
p-values that can leave the range of a double (Hoeffding's bound, McNemar's binomial tail)
are computed as logarithms (``p_log10``); one below 1e-300 is written as 1e-300, a valid
bound, with ``p_method`` saying so: never 0.
The CI of each difference is a 95% interval of its own (not adjusted for the family; the
verdicts are), chosen like a cell's (:mod:`pytest_ragbench.stats.intervals`); when every pair is
equal the difference is exactly 0 and the interval [0, 0] (``ci_method`` "identical").
Cohen's d is None below 2 pairs or when the differences never vary
(``effect_size_note`` "n too small" or "no spread").

Source metrics recorded at different k (``source_hit@4`` against ``source_hit@2``) are
compared as ``source_hit@k`` and at the common k (:mod:`.cutoffs`). A metric scored on
one side only, or that no pair scored on both, is listed with the reason
(``Compared.not_compared``; ``not_compared`` in results.json), never silently dropped.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any

from pytest_ragbench.metrics.registry import REGISTRY
from pytest_ragbench.results import cutoffs
from pytest_ragbench.results.aggregate import (
    cluster_key,
    direction,
    metric_names,
    metric_range,
    scored_value,
)
from pytest_ragbench.results.entries import Comparison
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.stats import core as stats
from pytest_ragbench.stats import intervals
from pytest_ragbench.stats.intervals import CellData, prepare

if TYPE_CHECKING:
    import numpy as np

ALPHA = 0.05
SEED = 0
N_RESAMPLES = 10_000
MAX_RESAMPLES = 2_000_000
# Sign flips × clusters × comparisons of one block (a few seconds of matrix products):
# beyond it fewer flips are drawn, and p_resolution says how far p can go.
FLIP_BUDGET = 4e9
CI_LEVEL = 0.95
P_FLOOR = 1e-300
"""The smallest p-value written: a p below it is written as this bound (``p_method`` says)."""
BELOW_FLOOR = "below 1e-300"
HOEFFDING = "hoeffding bound"
IDENTICAL = "identical"
"""``ci_method`` of a comparison whose pairs are all equal: the interval is [0, 0]."""


def timing_metric(metric: str) -> bool:
    """True for a timing (registry family ``timing``).

    Timings depend on the machine and on the model cache: compared, never a regression.
    """
    spec = REGISTRY.lookup(metric)
    return spec is not None and spec.family == "timing"


def resamples_for(family: int) -> int:
    """Sign flips for a family of ``family`` comparisons: the p floor 10x below alpha / m."""
    wanted = math.ceil(20 * max(1, family) / ALPHA)
    return min(MAX_RESAMPLES, max(N_RESAMPLES, wanted))


def choose_test(a: Sequence[float], b: Sequence[float], clustered: bool = False) -> str:
    """``mcnemar`` for pass/fail (0/1) metrics of independent cases, else ``randomization``."""
    binary = all(v in (0.0, 1.0) for v in (*a, *b))
    return "mcnemar" if binary and not clustered else "randomization"


@dataclass
class Pairs:
    """The paired values of one comparison, with each pair's cluster key."""

    name: str
    kind: str
    metric: str
    system: str | None = None
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    clusters: list[Hashable | None] = field(default_factory=list)

    def add(self, first: ItemRecord, second: ItemRecord) -> None:
        """Pair two records' values of the metric when both are scored."""
        self.add_values(first, scored_value(first, self.metric),
                        scored_value(second, self.metric))

    def add_values(self, first: ItemRecord, x: float | None, y: float | None) -> None:
        """Pair two values (of the records of one case) when both are scored."""
        if x is not None and y is not None:
            self.a.append(x)
            self.b.append(y)
            self.clusters.append(cluster_key(first, False))

    @property
    def clustered(self) -> bool:
        keys = [k for k in self.clusters if k is not None]
        return len(set(keys)) < len(keys)


def evaluate(family: list[Pairs]) -> list[Comparison]:
    """Test, interval and effect size of every comparison, Holm-corrected as one family."""
    family = [p for p in family if p.a]
    resamples = resamples_for(len(family))
    out: list[dict[str, Any]] = []
    cells = []
    flips: list[tuple[int, list[float], list[Hashable | None]]] = []
    for index, pairs in enumerate(family):
        diffs = [x - y for x, y in zip(pairs.a, pairs.b, strict=True)]
        test = choose_test(pairs.a, pairs.b, pairs.clustered)
        low, high = metric_range(pairs.metric)
        span = (high - low) if low is not None and high is not None else None
        cells.append(intervals.CellData(diffs, pairs.clusters if pairs.clustered else None,
                                        -span if span is not None else None, span))
        n = len(diffs)
        comparison: dict[str, Any] = {
            "name": pairs.name, "kind": pairs.kind, "metric": pairs.metric,
            "system": pairs.system, "test": test, "n": n, "n_clusters": None,
            "mean_a": sum(pairs.a) / n, "mean_b": sum(pairs.b) / n,
            "delta": sum(diffs) / n, "ci_low": None, "ci_high": None, "ci_method": None,
            "ci_level": CI_LEVEL, "ci_adjusted": False,
            "p_value": None, "p_method": None, "p_resolution": None, "p_log10": None,
            "resamples": None, **effect_size(diffs), "direction": direction(pairs.metric),
        }
        if test == "mcnemar":
            comparison.update(_mcnemar(pairs.a, pairs.b))
        else:
            flips.append((index, diffs, pairs.clusters if pairs.clustered else [None] * n))
        out.append(comparison)
    for index, found in zip([i for i, _, _ in flips],
                            sign_flip_pvalues([(d, c) for _, d, c in flips], resamples),
                            strict=True):
        out[index].update(found)
    for comparison, interval, cell in zip(out, intervals.cell_intervals(cells, CI_LEVEL,
                                                                        seed=SEED),
                                          cells, strict=True):
        comparison.update(ci_low=interval.low, ci_high=interval.high,
                          ci_method=interval.method, n_clusters=interval.n_clusters)
        if not any(cell.values):
            # Every pair equal: the difference is exactly zero, not merely "no spread
            # seen" (which gets the Bernoulli worst case, [-0.64, +0.64] at n = 5).
            comparison.update(ci_low=0.0, ci_high=0.0, ci_method=IDENTICAL)
    return [Comparison(**c) for c in holm(out)]


def effect_size(diffs: Sequence[float]) -> dict[str, Any]:
    """Cohen's d of the differences, or None and why (``effect_size_note``).

    None below 2 pairs ("n too small"), and for differences that never vary ("no spread":
    d would be infinite).
    """
    if len(diffs) < 2:
        return {"effect_size": None, "effect_size_note": intervals.N_TOO_SMALL}
    d = stats.cohens_d(diffs)
    if not math.isfinite(d):
        return {"effect_size": None, "effect_size_note": "no spread"}
    return {"effect_size": d, "effect_size_note": None}


def p_fields(log_p: float, method: str) -> dict[str, Any]:
    """A p-value computed as its natural log: ``p_value`` (never 0), ``p_method``, ``p_log10``.

    Below :data:`P_FLOOR` (where a double would round it to 0) ``p_value`` is the floor
    itself, a valid upper bound of p, and ``p_method`` says so.
    """
    log_p = min(0.0, log_p)
    if log_p < math.log(P_FLOOR):
        return {"p_value": P_FLOOR, "p_method": f"{method}, {BELOW_FLOOR}",
                "p_log10": log_p / math.log(10)}
    return {"p_value": math.exp(log_p), "p_method": method, "p_log10": log_p / math.log(10)}


def _mcnemar(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Exact McNemar: a two-sided binomial test of the discordant pairs, in log space.

    p = min(1, 2 P(X <= k)), X ~ Binomial(discordant, 1/2) and k the smaller discordant
    count (``scipy.stats.binomtest``'s two-sided p for p = 1/2), summed from log
    probabilities: with 1,100 discordant pairs all one way it is 2^-1099, below a double.
    """
    import numpy as np
    from scipy import stats as sps
    from scipy.special import logsumexp

    a_only = sum(1 for x, y in zip(a, b, strict=True) if x == 1.0 and y == 0.0)
    b_only = sum(1 for x, y in zip(a, b, strict=True) if x == 0.0 and y == 1.0)
    discordant = a_only + b_only
    if not discordant:
        return {"p_value": 1.0, "p_method": "exact binomial", "p_log10": 0.0,
                "p_resolution": 1.0, "discordant": 0}
    tail = sps.binom.logpmf(np.arange(min(a_only, b_only) + 1), discordant, 0.5)
    found = p_fields(math.log(2) + float(logsumexp(tail)), "exact binomial")
    smallest = p_fields((1 - discordant) * math.log(2), "exact binomial")["p_value"]
    return {**found, "p_resolution": smallest, "discordant": discordant}


def _flip_blocks(groups: int, resamples: int, rng: np.random.Generator
                 ) -> Iterator[np.ndarray]:
    """Sign vectors: all 2^G of them when that is no more than ``resamples``, else random."""
    import numpy as np

    rows = max(1, 2**18 // groups)
    if 2**groups <= resamples:
        bits = np.arange(groups)
        for start in range(0, 2**groups, rows):
            codes = np.arange(start, min(2**groups, start + rows))
            yield ((codes[:, None] >> bits) & 1) * 2.0 - 1.0
        return
    for start in range(0, resamples, rows):
        yield rng.integers(0, 2, (min(rows, resamples - start), groups)) * 2.0 - 1.0


def sign_flip_pvalues(tests: Sequence[tuple[Sequence[float], Sequence[Hashable | None]]],
                      resamples: int, seed: int = SEED) -> list[dict[str, Any]]:
    """Two-sided randomization p-values of the mean difference, flipping whole clusters.

    Tests with the same number of clusters share their sign flips (one matrix product per
    block). The p-value is Monte-Carlo ``2 min(k+1)/(B+1)`` or exact over all flips;
    where no flip reached the observed sum, Hoeffding's bound ``2 exp(-T^2 / 2 sum S_g^2)``
    on the exact p replaces the floor when it is smaller (still a valid p-value: it is only
    used when the Monte-Carlo p sits at its floor, and it bounds the exact p from above).
    """
    import numpy as np

    results: list[dict[str, Any]] = [{} for _ in tests]
    blocks: dict[int, list[tuple[int, np.ndarray]]] = defaultdict(list)
    for i, (diffs, clusters) in enumerate(tests):
        sums = prepare(CellData(diffs, list(clusters))).sums
        blocks[int(sums.size)].append((i, sums))
    rng = np.random.default_rng(seed)
    for groups, members in sorted(blocks.items()):
        affordable = int(FLIP_BUDGET / (groups * len(members)))
        block_resamples = max(min(resamples, N_RESAMPLES), min(resamples, affordable))
        sums = np.column_stack([s for _, s in members])  # groups × tests
        observed = sums.sum(axis=0)
        tolerance = 1e-9 * np.maximum(1.0, np.abs(sums).sum(axis=0))
        at_least = np.zeros(len(members))
        at_most = np.zeros(len(members))
        drawn = 0
        for signs in _flip_blocks(groups, block_resamples, rng):
            flipped = signs @ sums
            at_least += (flipped >= observed - tolerance).sum(axis=0)
            at_most += (flipped <= observed + tolerance).sum(axis=0)
            drawn += signs.shape[0]
        exact = 2**groups <= block_resamples
        if exact:
            p = np.minimum(1.0, 2 * np.minimum(at_least, at_most) / drawn)
            floor = 2.0 / drawn
        else:
            p = np.minimum(1.0, 2 * (np.minimum(at_least, at_most) + 1) / (drawn + 1))
            floor = 2.0 / (drawn + 1)
        squares = (sums**2).sum(axis=0)
        for j, (i, _) in enumerate(members):
            value = float(p[j])
            found = {"p_value": value, "p_method": "exact" if exact else "monte-carlo",
                     "p_log10": math.log10(value)}
            if not exact and min(at_least[j], at_most[j]) == 0 and squares[j] > 0:
                # in log space: with n = 5000 and d near 1 the bound is far below a double
                log_bound = math.log(2) - float(observed[j] ** 2 / (2 * squares[j]))
                if log_bound < math.log(value):
                    found = p_fields(log_bound, HOEFFDING)
            results[i] = {**found, "resamples": drawn, "p_resolution": floor}
    return results


def holm(comparisons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add ``p_holm``, ``significant``, ``better`` and ``worse`` (Holm over the whole list)."""
    if not comparisons:
        return comparisons
    raw = [1.0 if c["p_value"] is None else c["p_value"] for c in comparisons]
    adjusted = stats.adjust_pvalues(raw, "holm")
    for comparison, p in zip(comparisons, adjusted, strict=True):
        significant = p < ALPHA
        sign = {"higher": 1.0, "lower": -1.0}.get(comparison["direction"], 0.0)
        comparison.update(p_holm=p, significant=significant, holm_family=len(comparisons),
                          better=significant and sign * comparison["delta"] > 0,
                          worse=significant and sign * comparison["delta"] < 0)
    return comparisons


@dataclass
class Compared:
    """Comparisons of one family, and every metric of the paired records left uncompared."""

    comparisons: list[Comparison] = field(default_factory=list)
    # {"name", "kind", "system", "metric", "reason"}: recorded, but no pair could be formed
    not_compared: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Family:
    """The pairs of a family being built, and the metrics found uncomparable."""

    pairs: list[Pairs] = field(default_factory=list)
    not_compared: list[dict[str, Any]] = field(default_factory=list)

    def add(self, pairs: Pairs, reason: str) -> None:
        """Keep ``pairs``; when it paired nothing, note the metric with ``reason``."""
        if pairs.a:
            self.pairs.append(pairs)
        else:
            self.skip(pairs, reason)

    def skip(self, pairs: Pairs, reason: str) -> None:
        """Note the metric of ``pairs`` as not compared."""
        self.not_compared.append({"name": pairs.name, "kind": pairs.kind,
                                  "system": pairs.system, "metric": pairs.metric,
                                  "reason": reason})


def _scored(records: Iterable[ItemRecord]) -> set[str]:
    return {m for r in records for m in r.metrics if scored_value(r, m) is not None}


def _pair_metrics(family: _Family, name: str, kind: str, system: str | None,
                  paired: Sequence[tuple[ItemRecord, ItemRecord]], sides: tuple[str, str]) -> None:
    """Every metric scored on either side of ``paired`` (records of one case: A, B).

    A metric whose k follows the system and differs within a pair is compared at the k each
    was asked for (``source_hit@k``) and at the common k (:mod:`.cutoffs`); a metric that
    cannot be paired is noted with the reason.
    """
    start, noted = len(family.pairs), len(family.not_compared)
    in_a, in_b = _scored(a for a, _ in paired), _scored(b for _, b in paired)
    by_name = sorted(m for m in in_a | in_b if cutoffs.split(m) is None)
    stems = sorted({found[0] for m in in_a | in_b if (found := cutoffs.split(m))})
    for stem in stems:
        ks = [(a, b, cutoffs.own_k(a, stem), cutoffs.own_k(b, stem)) for a, b in paired]
        both = [(a, b, ka, kb) for a, b, ka, kb in ks if ka is not None and kb is not None]
        if all(ka == kb for _, _, ka, kb in both):  # one k in each pair: compared by name
            by_name += sorted(m for m in in_a | in_b if (cutoffs.split(m) or ("",))[0] == stem)
            continue
        asked = Pairs(name, kind, f"{stem}@k", system)
        for a, b, ka, kb in both:
            asked.add_values(a, scored_value(a, f"{stem}@{ka}"), scored_value(b, f"{stem}@{kb}"))
        family.add(asked, "never scored for one case on both sides")
        common = min(k for _, _, ka, kb in both for k in (ka, kb))
        at = Pairs(name, kind, f"{stem}@{common}", system)
        lost = 0
        for a, b, _, _ in both:
            x, y = cutoffs.value_at(a, stem, common), cutoffs.value_at(b, stem, common)
            lost += x is None or y is None
            at.add_values(a, x, y)
        if lost:  # a comparison of a subset would not be the metric's
            family.skip(at, f"the records of {lost} of {len(both)} pairs keep no ranking to "
                            f"rescore it at the common k = {common}")
        else:
            family.add(at, "never scored for one case on both sides")
    for metric in sorted(set(by_name)):
        pairs = Pairs(name, kind, metric, system)
        for a, b in paired:
            pairs.add(a, b)
        reason = (f"only in {sides[0]}" if metric not in in_b else
                  f"only in {sides[1]}" if metric not in in_a else
                  "never scored for one case on both sides")
        family.add(pairs, reason)
    family.pairs[start:] = sorted(family.pairs[start:], key=lambda p: p.metric)
    family.not_compared[noted:] = sorted(family.not_compared[noted:], key=lambda c: c["metric"])


def compare_systems(records: Iterable[ItemRecord], systems: Sequence[str]) -> Compared:
    """Every pair of systems (``a_vs_b`` in ``--ragbench-systems`` order) on every metric."""
    # An answer that does not depend on the system (ragbench_llm's) is not compared.
    records = [r for r in records if r.system and not r.system_independent]
    by_case: dict[tuple[str, str, str], dict[str, ItemRecord]] = defaultdict(dict)
    for record in records:
        by_case[(record.kind, record.file, record.case_id)][record.system or ""] = record
    family = _Family()
    for first, second in combinations(systems, 2):
        for kind in metric_names(records):
            paired = [(members[first], members[second])
                      for (case_kind, _, _), members in sorted(by_case.items())
                      if case_kind == kind and first in members and second in members]
            if paired:
                _pair_metrics(family, f"{first}_vs_{second}", kind, None, paired,
                              (f"system {first}", f"system {second}"))
    return Compared(evaluate(family.pairs), family.not_compared)


def system_comparisons(records: Iterable[ItemRecord], systems: Sequence[str]
                       ) -> list[Comparison]:
    """The comparisons of :func:`compare_systems`."""
    return compare_systems(records, systems).comparisons


def _index(records: Iterable[ItemRecord]) -> dict[tuple[str, ...], ItemRecord]:
    """Records by (kind, system, case id); by file as well where a case id repeats."""
    groups: dict[tuple[str, ...], list[ItemRecord]] = defaultdict(list)
    for record in records:
        groups[(record.kind, record.system or "", record.case_id)].append(record)
    index: dict[tuple[str, ...], ItemRecord] = {}
    for key, members in groups.items():
        if len(members) == 1:
            index[key] = members[0]
        else:
            index.update({(*key, m.file): m for m in members})
    return index


def compare_baseline(records: Iterable[ItemRecord], baseline: Iterable[ItemRecord]
                     ) -> tuple[Compared, dict[str, int]]:
    """Compare the current run (A) with the baseline (B) per kind, system and metric.

    Returns the comparisons and the pairing counts (``paired``, ``only_current``,
    ``only_baseline`` items).
    """
    current, previous = _index(records), _index(baseline)
    shared = sorted(set(current) & set(previous))
    grouped: dict[tuple[str, str], list[tuple[ItemRecord, ItemRecord]]] = defaultdict(list)
    for key in shared:
        a, b = current[key], previous[key]
        grouped[(a.kind, a.system or "")].append((a, b))
    family = _Family()
    for (kind, system), paired in sorted(grouped.items()):
        name = f"{system}_vs_baseline" if system else "current_vs_baseline"
        _pair_metrics(family, name, kind, system or None, paired,
                      ("the current run", "the baseline"))
    counts = {"paired": len(shared), "only_current": len(set(current) - set(previous)),
              "only_baseline": len(set(previous) - set(current))}
    return Compared(evaluate(family.pairs), family.not_compared), counts


def baseline_comparisons(records: Iterable[ItemRecord], baseline: Iterable[ItemRecord]
                         ) -> tuple[list[Comparison], dict[str, int]]:
    """The comparisons and pairing counts of :func:`compare_baseline`."""
    compared, counts = compare_baseline(records, baseline)
    return compared.comparisons, counts


def nest(comparisons: Iterable[Comparison]) -> dict[str, dict[str, dict[str, Comparison]]]:
    """``{name: {kind: {metric: comparison}}}`` for ``results.json``."""
    nested: dict[str, dict[str, dict[str, Comparison]]] = {}
    for c in comparisons:
        nested.setdefault(c.name, {}).setdefault(c.kind, {})[c.metric] = c
    return nested


# ---------------------------------------------------------------- power


def mcnemar_power(n: int, effect_size: float, discordance: float, alpha: float) -> float:
    """Power of the exact two-sided McNemar test with n pairs at level ``alpha``.

    Differences are -1, 0 or 1; ``discordance`` is the share of pairs that differ and the
    effect size is Cohen's d of the differences, so the mean difference is
    d·sqrt(ψ / (1 + d²)) (at most ψ).
    """
    import numpy as np
    from scipy import stats as sps

    if n < 1 or discordance <= 0:
        return 0.0
    delta = min(discordance, abs(effect_size) * math.sqrt(discordance / (1 + effect_size**2)))
    share_a = (discordance + delta) / (2 * discordance)  # P(A only | discordant)
    power = 0.0
    for k in range(1, n + 1):
        j = np.arange(k + 1)
        p_values = np.minimum(1.0, 2 * sps.binom.cdf(np.minimum(j, k - j), k, 0.5))
        rejected = sps.binom.pmf(j, k, share_a)[p_values <= alpha].sum()
        power += float(sps.binom.pmf(k, n, discordance)) * float(rejected)
    return min(1.0, power)


def power_section(records: Iterable[ItemRecord], comparisons: Sequence[Comparison] = ()
                  ) -> dict[str, dict[str, Any]]:
    """Power at d = 0.2, 0.3, 0.5 of the tests the comparisons used, at Holm's alpha / m.

    Per kind: ``n`` is the fewest pairs (clusters, when clustered) any comparison of the
    kind scored, ``alpha`` is alpha / m, the level Holm holds the smallest p-value of the
    family of m comparisons to, ``by_test`` the power of each test used: the randomization
    test through its large-sample twin, the paired t-test; McNemar exactly, at the share
    of discordant pairs the kind's comparisons showed. Without comparisons: the power of a
    paired t-test at alpha = 0.05 for each kind's number of cases (for planning).
    """
    if not comparisons:
        cases: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for record in records:
            if record.metrics:
                cases[record.kind].add((record.file, record.case_id))
        return {kind: {"n": len(cases[kind]), "alpha": ALPHA, "family": None,
                       "test": "paired t (planning)", **stats.power_table(len(cases[kind]))}
                for kind in sorted(cases)}
    grouped: dict[str, dict[str, list[Comparison]]] = defaultdict(lambda: defaultdict(list))
    for c in comparisons:
        grouped[c.kind][c.test].append(c)
    section: dict[str, dict[str, Any]] = {}
    for kind in sorted(grouped):
        by_test: dict[str, dict[str, Any]] = {}
        for test, members in sorted(grouped[kind].items()):
            family = max(c.holm_family or 1 for c in members)
            alpha = ALPHA / family
            n = min(c.n_clusters or c.n for c in members)
            row: dict[str, Any] = {"n": n, "alpha": alpha, "family": family}
            if test == "mcnemar":
                discordance = sum(c.discordant or 0 for c in members) \
                    / sum(c.n for c in members)
                row["discordance"] = discordance
                row.update({f"d={d}": mcnemar_power(n, d, discordance, alpha)
                            for d in stats.EFFECT_SIZES})
            else:
                row.update(stats.power_table(n, alpha=alpha))
            by_test[test] = row
        main = "randomization" if "randomization" in by_test else next(iter(by_test))
        section[kind] = {**by_test[main], "test": main, "by_test": by_test}
    return section
