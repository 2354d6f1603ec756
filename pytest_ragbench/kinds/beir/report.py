"""BEIR items put back together: one TREC run and dataset-level metrics per dataset (and system).

Record contract (``kind == "beir"``): ``fields["dataset"]``, ``evidence["ranking"]`` as
``[[doc_id, score], ...]``, ``evidence["qrels"]`` as ``{doc_id: grade}`` and optionally
``evidence["query_id"]`` (default: the case id after its ``dataset/`` prefix) and
``evidence["retriever"]`` (one line naming what retrieved the run). Metrics
over the whole run come from :func:`pytest_ragbench.metrics.evaluate_run` (pytrec_eval).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.metrics import Unscored, evaluate_run, write_run
from pytest_ragbench.render.files import write_json
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.results.sections import LeaderboardRow, ReportSection

MEASURES = ("nDCG@10", "R@10", "R@100", "P@10", "RR", "AP", "nDCG@100")


@dataclass
class BeirRun:
    """The run and qrels of one dataset answered by one system."""

    dataset: str
    system: str | None
    run: dict[str, dict[str, float]] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    retriever: str | None = None  # evidence["retriever"]: what retrieved the run

    @property
    def stem(self) -> str:
        """File name stem: ``<dataset>`` or ``<dataset>.<system>``."""
        parts = [self.dataset, self.system] if self.system else [self.dataset]
        return ".".join(re.sub(r"[^A-Za-z0-9._-]+", "_", p) for p in parts)


def query_id(record: ItemRecord) -> str:
    """The query id of a BEIR record."""
    explicit = record.evidence.get("query_id")
    if explicit is not None:
        return str(explicit)
    dataset = str(record.fields.get("dataset") or "")
    prefix = f"{dataset}/"
    return record.case_id[len(prefix):] if dataset and record.case_id.startswith(prefix) \
        else record.case_id


def collect(records: Iterable[ItemRecord]) -> list[BeirRun]:
    """Group BEIR records by (dataset, system) into runs and qrels."""
    runs: dict[tuple[str, str], BeirRun] = {}
    for record in records:
        if record.kind != "beir" or not isinstance(record.evidence.get("ranking"), list):
            continue
        dataset = str(record.fields.get("dataset") or "beir")
        key = (dataset, record.system or "")
        beir = runs.setdefault(key, BeirRun(dataset, record.system))
        qid = query_id(record)
        ranking: dict[str, float] = {}
        for entry in record.evidence["ranking"]:
            if isinstance(entry, list | tuple) and len(entry) == 2 and entry[1] is not None:
                ranking[str(entry[0])] = float(entry[1])
        beir.run[qid] = ranking
        qrels = record.evidence.get("qrels")
        if isinstance(qrels, dict):
            beir.qrels[qid] = {str(d): int(g) for d, g in qrels.items()}
        if beir.retriever is None and record.evidence.get("retriever"):
            beir.retriever = str(record.evidence["retriever"])
    return [runs[k] for k in sorted(runs)]


def evaluate(beir: BeirRun) -> dict[str, Any]:
    """Dataset-level metrics of the whole run (queries that returned nothing count as 0)."""
    qrels = {q: r for q, r in beir.qrels.items() if r}
    about = {"retriever": beir.retriever} if beir.retriever else {}
    if not qrels:
        return {"queries": len(beir.run), "judged_queries": 0, "metrics": {}, **about}
    values = evaluate_run(qrels, beir.run, list(MEASURES), complete=True)
    metrics = {k: (None if isinstance(v, Unscored) else float(v)) for k, v in values.items()}
    return {"queries": len(beir.run), "judged_queries": len(qrels), "metrics": metrics, **about}


def write(beir: BeirRun, folder: Path) -> Path:
    """Write ``<stem>.run.trec``: queries sorted, documents in trec_eval order, ranks 1..n."""
    path = folder / f"{beir.stem}.run.trec"
    ordered = {qid: beir.run[qid] for qid in sorted(beir.run)}
    write_run(path, ordered, tag=beir.system or "ragbench")
    return path


def section(runs: Iterable[BeirRun]) -> dict[str, dict[str, Any]]:
    """``{dataset: {system or "": evaluation}}`` for ``results.json``."""
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for beir in runs:
        out[beir.dataset][beir.system or ""] = evaluate(beir)
    return dict(out)


TITLE = "BEIR: dataset-level metrics (trec_eval over the whole run), per system"


def report_section(records: Sequence[ItemRecord], run_id: str | None) -> ReportSection:
    """``results.json["beir"]``, its table, the run's files and leaderboard rows.

    Files: ``<stem>.run.trec`` and ``<stem>.metrics.json`` per run; a leaderboard row per
    dataset-level metric. Empty without BEIR items.
    """
    runs = collect(records)
    results = section(runs)
    names = sorted({m for systems in results.values() for result in systems.values()
                    for m in result["metrics"]})
    table: list[list[Any]] = [["BEIR dataset", "system", "queries", *names]]
    text: list[str] = []
    board: list[LeaderboardRow] = []
    for dataset, systems in results.items():
        for system, result in systems.items():
            table.append([dataset, system or "(all)", result["judged_queries"],
                          *(result["metrics"].get(m) for m in names)])
            board += [LeaderboardRow(system, "beir", dataset, metric, result["judged_queries"],
                                     value) for metric, value in result["metrics"].items()]
        retrievers = sorted({r["retriever"] for r in systems.values() if r.get("retriever")})
        text += [f"{dataset} retrieved by {r}" for r in retrievers]
    files: dict[str, Any] = {}
    for beir in runs:
        result = results.get(beir.dataset, {}).get(beir.system or "") or {}
        files[f"{beir.stem}.run.trec"] = lambda path, beir=beir: write(beir, path.parent)
        files[f"{beir.stem}.metrics.json"] = lambda path, beir=beir, result=result: \
            write_json(path, {"dataset": beir.dataset, "system": beir.system, "run_id": run_id,
                              **result})
    return ReportSection(key="beir", title=TITLE, data=results,
                         table=table if len(table) > 1 else (), text=text, files=files,
                         leaderboard=board)
