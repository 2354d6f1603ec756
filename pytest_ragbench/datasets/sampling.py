"""Stratified sampling to quotas, with unanswerable variants and a report of what is missing.

For each quota, in order, the matching answerable samples are shuffled with a generator
seeded by ``(seed, quota label)`` — the same seed gives the same selection, and changing
one quota does not reshuffle the others. The first ``count - unanswerable`` become
answerable samples; the next ones become *unanswerable variants*: the question is paired
with the contexts of another sample of the same doc_type (a different ``context_group``,
no shared context, and the original ground truth does not occur in the borrowed
contexts), and the ground truth says that the contexts do not answer it. A question is
used at most once (answerable or not). Samples a source already marks unanswerable count
towards the unanswerable part first.

Nothing is filled silently: when a quota cannot be met, the outcome says how many were
wanted, available and selected.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_ragbench.datasets.quotas import Quota
from pytest_ragbench.datasets.sample import NormalizedSample


@dataclass
class QuotaOutcome:
    """What one quota asked for and what it got."""

    quota: Quota
    available: int
    answerable_target: int
    unanswerable_target: int
    answerable: int = 0
    unanswerable: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def requested(self) -> int:
        """The quota's count."""
        return self.quota.count

    @property
    def selected(self) -> int:
        """Samples selected for the quota."""
        return self.answerable + self.unanswerable

    @property
    def shortfall(self) -> int:
        """Samples missing."""
        return self.requested - self.selected

    @property
    def status(self) -> str:
        """``full``, ``scaled down`` (some but not all) or ``unmet`` (none)."""
        if self.shortfall <= 0:
            return "full"
        return "scaled down" if self.selected else "unmet"


@dataclass
class SamplingResult:
    """The selected samples, one outcome per quota, and how many matched no quota."""

    samples: list[NormalizedSample]
    outcomes: list[QuotaOutcome]
    unassigned: int = 0

    @property
    def unmet(self) -> list[QuotaOutcome]:
        """Quotas that are not full."""
        return [o for o in self.outcomes if o.shortfall > 0]


def unanswerable_targets(quotas: Sequence[Quota]) -> list[int]:
    """Unanswerable counts per quota: the rounded total, split by largest remainder."""
    exact = [q.count * q.unanswerable_share for q in quotas]
    targets = [math.floor(x) for x in exact]
    total = math.floor(sum(exact) + 0.5)
    order = sorted(range(len(quotas)), key=lambda i: (-(exact[i] - targets[i]), i))
    for i in order[:max(0, total - sum(targets))]:
        if exact[i] > targets[i]:
            targets[i] += 1
    return targets


def stratified_sample(pool: Sequence[NormalizedSample], quotas: Sequence[Quota], seed: int,
                      unanswerable_ground_truth: str) -> SamplingResult:
    """Select samples from ``pool`` (unique ids) to fill ``quotas``."""
    ordered = sorted(pool, key=lambda s: s.id)
    donors: dict[str, list[NormalizedSample]] = {}
    for sample in ordered:
        if sample.contexts and sample.answerable:
            donors.setdefault(sample.doc_type, []).append(sample)
    selected: list[NormalizedSample] = []
    outcomes = []
    assigned = 0
    for quota, unanswerable_target in zip(quotas, unanswerable_targets(quotas), strict=True):
        matching = [s for s in ordered if quota.matches(*s.stratum())]
        assigned += len(matching)
        outcome = QuotaOutcome(quota, len(matching), quota.count - unanswerable_target,
                               unanswerable_target)
        rng = random.Random(f"{seed}:{quota.label}")
        selected.extend(_fill(outcome, matching, donors, rng, unanswerable_ground_truth))
        outcomes.append(outcome)
    return SamplingResult(selected, outcomes, len(ordered) - assigned)


def _fill(outcome: QuotaOutcome, matching: list[NormalizedSample],
          donors: dict[str, list[NormalizedSample]], rng: random.Random,
          unanswerable_ground_truth: str) -> list[NormalizedSample]:
    """The samples of one quota; ``outcome`` records what was reached and why not."""
    count = outcome.requested
    answerable = [s for s in matching if s.answerable]
    already = [s for s in matching if not s.answerable]
    rng.shuffle(answerable)
    rng.shuffle(already)
    # Too few questions: scale the answerable and unanswerable parts down alike.
    capacity = len(matching)
    want_unanswerable = outcome.unanswerable_target
    if count and capacity == 0:
        outcome.notes.append("no adapted sample has this stratum")
    elif count and capacity < count:
        want_unanswerable = math.floor(want_unanswerable * capacity / count + 0.5)
        outcome.notes.append(f"only {capacity} questions match; scaled down keeping the "
                             "unanswerable share")
    bases_needed = max(0, want_unanswerable - len(already))
    chosen = answerable[:min(outcome.answerable_target, len(answerable) - bases_needed)]
    variants = already[:want_unanswerable]
    missing_donor = 0
    for base in answerable[len(chosen):]:
        if len(variants) >= want_unanswerable:
            break
        donor = _donor(base, donors.get(base.doc_type, []), rng)
        if donor is None:
            missing_donor += 1
        else:
            variants.append(make_unanswerable(base, donor, unanswerable_ground_truth))
    if missing_donor and len(variants) < want_unanswerable:
        outcome.notes.append(f"{missing_donor} questions found no other sample of the same "
                             "doc_type with contexts to borrow")
    outcome.answerable, outcome.unanswerable = len(chosen), len(variants)
    return chosen + variants


def _donor(base: NormalizedSample, candidates: list[NormalizedSample], rng: random.Random
           ) -> NormalizedSample | None:
    """A sample whose contexts cannot answer ``base``'s question (see module doc)."""
    group = base.metadata.get("context_group")
    truth = base.ground_truth.strip().casefold()
    own = set(base.contexts)
    eligible = [d for d in candidates
                if d.id != base.id
                and (group is None or d.metadata.get("context_group") != group)
                and not own.intersection(d.contexts)
                and not (len(truth) >= 3 and any(truth in c.casefold() for c in d.contexts))]
    return eligible[rng.randrange(len(eligible))] if eligible else None


def make_unanswerable(base: NormalizedSample, donor: NormalizedSample, ground_truth: str
                      ) -> NormalizedSample:
    """``base``'s question with ``donor``'s contexts; the ground truth says it has no answer."""
    return NormalizedSample(
        id=f"{base.id}-unanswerable", question=base.question, ground_truth=ground_truth,
        contexts=donor.contexts, doc_type=base.doc_type, question_type=base.question_type,
        difficulty=base.difficulty, source_dataset=base.source_dataset,
        metadata={**base.metadata, "answerable": False,
                  "unanswerable_method": "contexts of another sample",
                  "contexts_from": donor.id, "original_ground_truth": base.ground_truth})
