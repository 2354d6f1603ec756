"""The session's results document (``results.json``, and a saved run), built from records alone.

:class:`ResultsDocument` is the typed document; :meth:`ResultsDocument.to_dict` is
results.json, described by ``results.schema.json`` (shipped beside this package's
modules, written beside results.json). Keys: ``schema_version``, ``run``, ``config``,
``metrics``, ``breakdowns``, ``comparisons``, ``items`` (README "The report and CI"),
plus ``not_compared`` (metrics a comparison could not pair, with the reason), ``counts``,
``components``, ``power_analysis``, ``usage``, ``timing``, ``judge`` (judged metrics:
unscored counts, self-consistency, inconclusive items; :mod:`.judging`),
``judge_calibration`` and ``judge_labels`` (results/calibration.py), ``baseline``,
``gates``, ``regressions``, ``failures`` (the lines that fail the session), ``systems``,
``coverage`` (what was checked, per kind: results/coverage.py), ``best`` (the best
configuration of a sweep with its backing, or null: :mod:`.best`), ``sections`` (the report
sections of the hook ``pytest_ragbench_report_sections``: :mod:`.sections`) and one key
per section holding its data (the built-in ones: ``robustness``, ``ragcsv``, ``beir``).

Schema version 2 added ``sections``; version 1 documents (saved runs) have the same keys
otherwise and are read as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib import resources
from typing import Any

from pytest_ragbench.cases.labels import LabelFile
from pytest_ragbench.config import prices
from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.redact import scrub_data
from pytest_ragbench.results import (
    aggregate,
    calibration,
    coverage,
    gates,
    judging,
    sections,
)
from pytest_ragbench.results import (
    comparisons as compare,
)
from pytest_ragbench.results.entries import Comparison, GateVerdict, MetricStats
from pytest_ragbench.results.records import ItemRecord, json_safe
from pytest_ragbench.results.runs import Baseline

SCHEMA_VERSION = 2
SCHEMA_FILE = "results.schema.json"


def schema_text() -> str:
    """The JSON Schema of results.json, as shipped in the package."""
    return resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


@dataclass
class ResultsDocument:
    """Everything a session concluded; results.json is :meth:`to_dict`.

    ``records`` (the item records, in node-id order) are what the sections are computed
    from; results.json holds them as ``items``. The other fields are the top-level keys
    of results.json (module docstring), in its order.
    """

    run: dict[str, Any]
    config: dict[str, Any]
    components: dict[str, str]
    counts: dict[str, Any]
    metrics: dict[str, dict[str, MetricStats]]  # [kind][metric]
    # [kind][field][value][metric]
    breakdowns: dict[str, dict[str, dict[str, dict[str, MetricStats]]]]
    comparisons: dict[str, dict[str, dict[str, Comparison]]]  # [name][kind][metric]
    not_compared: list[dict[str, Any]]
    power_analysis: dict[str, Any]
    usage: dict[str, Any]
    timing: dict[str, Any]
    judge: dict[str, Any]
    judge_calibration: dict[str, Any]
    judge_labels: dict[str, Any] | None
    baseline: dict[str, Any] | None
    gates: list[GateVerdict]
    regressions: list[Comparison]
    failures: list[str]
    systems: list[str]
    records: list[ItemRecord] = field(repr=False, default_factory=list)
    best: dict[str, Any] | None = None  # results/best.py
    sections: list[sections.ReportSection] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # sections left out, and why
    schema_version: int = SCHEMA_VERSION

    def add_sections(self, found: Iterable[Any]) -> None:
        """Add the hook's sections; one that is not valid is named in ``problems``.

        The lines with which a section fails the session join ``failures``.
        """
        taken = {"schema_version", "items", "coverage", "sections",
                 *(f.name for f in fields(self) if f.name not in ("records", "problems")),
                 *(s.key for s in self.sections)}
        kept = sections.accepted(sections.flatten(found), taken, self.problems)
        self.sections += kept
        for section in kept:
            self.failures += [line for line in sections.failure_lines(section)
                              if line not in self.failures]

    def to_dict(self) -> dict[str, Any]:
        """results.json: JSON-safe, secrets masked, items, coverage and sections added."""
        top = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("records", "sections", "problems", "schema_version")}
        top = {"schema_version": self.schema_version, **top}
        top.update((s.key, s.data) for s in self.sections)
        top["sections"] = [s.to_json() for s in self.sections]
        # The items are JSON-safe and scrubbed already (ItemRecord.to_dict): not copied once
        # more; the rest (settings, components, baseline, failure lines) has its secrets masked.
        result = scrub_data(json_safe(top))
        result["items"] = [_item(r) for r in self.records]
        result["coverage"] = coverage.section(result)
        return result


SectionsHook = Callable[[ResultsDocument], Iterable[Any]]


def build(records: list[ItemRecord], settings: RagbenchConfig, *, run: dict[str, Any],
          components: dict[str, str], baseline: Baseline | None = None,
          gate_list: Sequence[gates.Gate] = (), labels: LabelFile | None = None,
          report_sections: SectionsHook | None = None) -> dict[str, Any]:
    """results.json: :func:`assemble`'s document as a dict."""
    return assemble(records, settings, run=run, components=components, baseline=baseline,
                    gate_list=gate_list, labels=labels,
                    report_sections=report_sections).to_dict()


def assemble(records: list[ItemRecord], settings: RagbenchConfig, *, run: dict[str, Any],
             components: dict[str, str], baseline: Baseline | None = None,
             gate_list: Sequence[gates.Gate] = (), labels: LabelFile | None = None,
             report_sections: SectionsHook | None = None,
             sequential: Mapping[tuple[str, str, str | None], dict[str, Any]] | None = None
             ) -> ResultsDocument:
    """Aggregate the records into the results document.

    Records are taken in node-id order, so the numbers do not depend on the order in
    which the items ran. ``labels`` are the human labels of ``--ragbench-judge-labels``.
    ``report_sections`` returns the sections to add (the session calls the hook
    ``pytest_ragbench_report_sections``); if it raises, the document has no sections and
    says why in ``problems``. ``sequential``: the gates ``--ragbench-sequential`` decided,
    by (gate name, metric, system); they keep that decision.
    """
    records = sorted(records, key=lambda r: r.nodeid)
    systems = aggregate.systems_in(records, settings.systems)
    cells = aggregate.plan_cells(records, systems, settings.breakdown)
    recorded = aggregate.metric_names(records)
    checks = [(concrete, cell) for gate in gate_list if gate.kind in {r.kind for r in records}
              for concrete in gates.at_recorded_k(gate, recorded.get(gate.kind, ()))
              for cell in gates.gate_cells(concrete, _systems_of(gate.kind, records, systems))]
    for _, cell in checks:
        cells.setdefault(cell, aggregate.select(records, cell))
    stats = aggregate.compute_cells(cells)
    if settings.gate == "ci-lower":
        wanted = systems if len(systems) > 1 else [None]
        metric_cells = [(c, e) for c, e in stats.items() if not c.where and c.system in wanted]
        checks += gates.threshold_checks(metric_cells)
    compared = compare.compare_systems(records, systems) if len(systems) > 1 \
        else compare.Compared()
    comparisons, not_compared = compared.comparisons, compared.not_compared
    baseline_part: dict[str, Any] | None = None
    found_regressions: list[Comparison] = []
    if baseline is not None:
        against, counts = compare.compare_baseline(records, baseline.records)
        comparisons += against.comparisons
        not_compared += against.not_compared
        found_regressions = gates.regressions(against.comparisons)
        baseline_part = {"label": baseline.label, "path": str(baseline.path),
                         "run_id": baseline.run.get("id"), "time": baseline.run.get("time"),
                         # a partial baseline is named (a warning and a note of the verdict)
                         "status": baseline.run.get("status") or "complete",
                         "items_not_run": baseline.run.get("items_not_run"), **counts}
    matching = calibration.match(records, labels.labels if labels else ())

    def calibrated(cell: aggregate.Cell) -> dict[str, Any] | None:
        return calibration.calibrate(cells[cell], cell.metric, matching.human, matching.pi) \
            if matching.human and settings.gate == "ci-lower" else None

    verdicts = [gates.with_sequential(
        gates.check(g, c, stats[c], settings.gate, settings.gate_min_n, calibrated(c)),
        (sequential or {}).get((g.name, g.metric, c.system)) if g.source == "gate" else None)
        for g, c in checks]
    failures = calibration.failure_lines(labels)
    failures += [gates.gate_line(v) for v in verdicts if v.passed is False]
    if settings.fail_on == "regression" and baseline is not None:
        failures += [gates.regression_line(c, baseline.label) for c in found_regressions]
    judge_part = judging.section(records, settings)
    failures += judge_part["failures"]  # too many unscored judged items fail like a gate
    document = ResultsDocument(
        run=run, config=settings.public_dict(), components=components,
        counts=aggregate.counts_section(records),
        metrics=aggregate.metrics_section(stats, systems),
        breakdowns=aggregate.breakdowns_section(stats, systems),
        comparisons=compare.nest(comparisons), not_compared=not_compared,
        power_analysis=compare.power_section(records, comparisons),
        usage=priced(aggregate.usage_section(records, systems), settings),
        timing=aggregate.timing_section(records), judge=judge_part,
        judge_calibration=calibration.section(records, systems, matching),
        judge_labels=calibration.labels_section(labels, matching), baseline=baseline_part,
        gates=verdicts, regressions=found_regressions, failures=failures, systems=systems,
        records=records, best=_best(records, settings, systems))
    if report_sections is not None:
        try:
            document.add_sections(report_sections(document))
        except Exception as exc:  # a plugin's section never takes the report down
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            document.problems.append(f"the report sections could not be made ({detail})")
    return document


def _best(records: list[ItemRecord], settings: RagbenchConfig, systems: list[str]
          ) -> dict[str, Any] | None:
    """The sweep's best configuration; with objectives and no sweep, the best of the systems."""
    configurations = [c.to_dict() for c in settings.configurations]
    if not configurations and settings.objectives and len(systems) > 1:
        configurations = [{"name": s, "system": s, "params": {}, "default": False}
                          for s in systems]
    if len(configurations) < 2:
        return None
    # lazy: the sweep's statistics are for sessions that sweep
    from pytest_ragbench.results import best

    return best.section(records, configurations, settings.objectives, settings.gates)


def priced(usage: dict[str, dict[str, Any]], settings: RagbenchConfig
           ) -> dict[str, dict[str, Any]]:
    """The usage rows, each with its ``cost`` when ini ragbench_prices prices its model."""
    prices.add_costs(usage, settings.prices,
                     {"generator": settings.llm_model, "judge": settings.judge_model})
    return usage


def plot_document(records: list[ItemRecord], settings: RagbenchConfig) -> dict[str, Any]:
    """The parts of :func:`build`'s document that report.html's plots are drawn from.

    ``metrics``, ``breakdowns``, ``systems`` and ``items``, computed as :func:`build` does
    (its gate and baseline cells do not change these). ``records`` may be one kind's: the
    systems are then those of ``--ragbench-systems``, as the whole run's would be.
    """
    records = sorted(records, key=lambda r: r.nodeid)
    systems = list(settings.systems) or aggregate.systems_in(records)
    stats = aggregate.compute_cells(aggregate.plan_cells(records, systems, settings.breakdown))
    document = {"metrics": aggregate.metrics_section(stats, systems),
                "breakdowns": aggregate.breakdowns_section(stats, systems), "systems": systems}
    return {**json_safe(document), "items": [_item(r) for r in records]}


def _systems_of(kind: str, records: Sequence[ItemRecord], systems: list[str]) -> list[str]:
    """The systems a gate on ``kind`` is checked for: none when its items are system-independent.

    A gate on a kind the session did not run (``-k``, ``-m``) is not checked at all.
    """
    return systems if any(r.system for r in records if r.kind == kind) else []


def _item(record: ItemRecord) -> dict[str, Any]:
    """A record for ``results.json``: BEIR rankings stay in the TREC file and items.jsonl."""
    data = record.to_dict()
    if "ranking" in data.get("evidence", {}):
        data["evidence"] = {k: v for k, v in data["evidence"].items() if k != "ranking"}
    return data
