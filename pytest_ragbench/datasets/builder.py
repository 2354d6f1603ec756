"""``ragbench dataset build``: adapt every source, sample to the quotas, report the outcome."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_ragbench.datasets.quotas import BuildConfig, SourceSpec
from pytest_ragbench.datasets.sample import NormalizedSample
from pytest_ragbench.datasets.sampling import SamplingResult, stratified_sample
from pytest_ragbench.datasets.sources import AdaptResult, get_adapter
from pytest_ragbench.errors import CaseError


@dataclass
class SourceOutcome:
    """What one source gave: samples adapted, malformed records, records left out."""

    spec: SourceSpec
    adapted: int = 0
    errors: list[CaseError] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


@dataclass
class BuildResult:
    """Everything ``build`` found and chose."""

    config: BuildConfig
    seed: int
    sources: list[SourceOutcome]
    pool: int
    sampling: SamplingResult

    @property
    def samples(self) -> list[NormalizedSample]:
        """The selected samples, in output order."""
        return self.sampling.samples

    @property
    def errors(self) -> list[CaseError]:
        """Every malformed record of every source."""
        return [e for s in self.sources for e in s.errors]


def adapt_sources(config: BuildConfig, wrap: Callable[[Any], Any] = iter
                  ) -> tuple[list[NormalizedSample], list[SourceOutcome]]:
    """All samples of all sources (the first of two equal ids wins; the other is an error)."""
    pool: dict[str, NormalizedSample] = {}
    outcomes = []
    for spec in wrap(config.sources):
        outcome = SourceOutcome(spec)
        outcomes.append(outcome)
        if not spec.path.exists():
            outcome.errors.append(CaseError("source path not found", file=spec.path))
            continue
        try:
            result: AdaptResult = get_adapter(spec.adapter).adapt_source(spec.path, spec.options)
        except CaseError as exc:  # the whole source is unreadable
            outcome.errors.append(exc)
            continue
        outcome.errors.extend(sorted(result.errors, key=lambda e: (e.file or "", e.line or 0)))
        outcome.skipped.update(result.skipped)
        for sample in result.samples:
            if sample.id in pool:
                outcome.errors.append(CaseError(
                    f"duplicate sample id {sample.id} (kept the first one)",
                    file=sample.metadata.get("source_file") or spec.path,
                    line=sample.metadata.get("source_line"), field="id"))
                continue
            pool[sample.id] = sample
            outcome.adapted += 1
    return list(pool.values()), outcomes


def build(config: BuildConfig, seed: int | None = None,
          wrap: Callable[[Any], Any] = iter) -> BuildResult:
    """Adapt the sources and sample to the quotas (``seed`` overrides the config's)."""
    used_seed = config.seed if seed is None else seed
    pool, sources = adapt_sources(config, wrap)
    sampling = stratified_sample(pool, config.quotas, used_seed, config.unanswerable_ground_truth)
    return BuildResult(config, used_seed, sources, len(pool), sampling)


def format_report(result: BuildResult, max_errors: int = 10) -> str:
    """The build report: sources, then one line per quota with its status."""
    lines = [f"dataset {result.config.name} (seed {result.seed})", "", "sources:"]
    for source in result.sources:
        skipped = sum(source.skipped.values())
        lines.append(f"  {source.spec.name:<34} {source.adapted:>6} adapted "
                     f"{len(source.errors):>5} malformed {skipped:>5} left out")
        lines.extend(f"      left out: {n} {reason}" for reason, n in source.skipped.items())
    errors = result.errors
    if errors:
        lines.append(f"malformed records ({len(errors)}, skipped):")
        lines.extend(f"  {e}" for e in errors[:max_errors])
        if len(errors) > max_errors:
            lines.append(f"  ... and {len(errors) - max_errors} more")
    lines += ["", f"{'quota':<30} {'wanted':>6} {'avail':>6} {'answ':>9} {'unansw':>9} "
                  f"{'got':>5}  status"]
    for o in result.sampling.outcomes:
        lines.append(f"{o.quota.label:<30} {o.requested:>6} {o.available:>6} "
                     f"{o.answerable:>4}/{o.answerable_target:<4} "
                     f"{o.unanswerable:>4}/{o.unanswerable_target:<4} {o.selected:>5}  "
                     f"{o.status}" + (f" ({'; '.join(o.notes)})" if o.notes else ""))
    wanted = result.config.total
    got = len(result.samples)
    lines.append(f"{'total':<30} {wanted:>6} {result.pool:>6} {'':>9} {'':>9} {got:>5}")
    by_type: dict[str, list[int]] = {}
    for o in result.sampling.outcomes:
        entry = by_type.setdefault(o.quota.doc_type, [0, 0])
        entry[0] += o.requested
        entry[1] += o.selected
    lines.append("")
    lines.append("per doc_type: " + ", ".join(
        f"{name} {got_n}/{want}" + ("" if got_n >= want else " (unmet)" if got_n == 0
                                    else " (scaled down)")
        for name, (want, got_n) in by_type.items()))
    if result.sampling.unassigned:
        lines.append(f"{result.sampling.unassigned} adapted samples match no quota")
    return "\n".join(lines)


def report_dict(result: BuildResult) -> dict[str, Any]:
    """The build report as JSON-safe data (``--report``)."""
    return {
        "name": result.config.name, "seed": result.seed, "pool": result.pool,
        "selected": len(result.samples), "requested": result.config.total,
        "sources": [{"name": s.spec.name, "adapter": s.spec.adapter, "path": s.spec.given_path,
                     "adapted": s.adapted, "malformed": len(s.errors),
                     "left_out": dict(s.skipped), "errors": [str(e) for e in s.errors]}
                    for s in result.sources],
        "quotas": [{"quota": o.quota.label, "requested": o.requested, "available": o.available,
                    "answerable": o.answerable, "answerable_target": o.answerable_target,
                    "unanswerable": o.unanswerable,
                    "unanswerable_target": o.unanswerable_target, "selected": o.selected,
                    "shortfall": max(0, o.shortfall), "status": o.status, "notes": o.notes}
                   for o in result.sampling.outcomes],
        "unassigned": result.sampling.unassigned,
    }
