"""Benchmark of the session report: how long the end of a session takes for N items.

    python benchmarks/bench_report.py            # 100, 1000 and 5000 items
    python benchmarks/bench_report.py --quick    # 100 and 1000 items

Records are synthetic (seeded): M continuous metrics and one pass/fail metric per item,
four breakdown fields with a few values each, optionally S systems (then pairwise
comparisons too). Timed phases: the document (cells, batched BCa bootstrap, comparisons),
the terminal lines, report.html (matplotlib) and all files written.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from pytest_ragbench.config import RagbenchConfig
from pytest_ragbench.records import ItemRecord
from pytest_ragbench.report import document, files, html, terminal

METRICS = ("token_f1", "semantic_similarity", "keyword_overlap", "faithfulness",
           "answer_relevancy", "context_precision")


def make_records(n: int, systems: tuple[str, ...], seed: int = 0) -> list[ItemRecord]:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        base = {m: rng.betavariate(4, 2) for m in METRICS}
        for s_index, system in enumerate(systems or (None,)):
            metrics = {m: min(1.0, max(0.0, v - 0.03 * s_index + rng.gauss(0, 0.05)))
                       for m, v in base.items()}
            metrics["exact_match"] = float(rng.random() < 0.4)
            label = f"{system}-q{i}" if system else f"q{i}"
            records.append(ItemRecord(
                nodeid=f"cases.jsonl::ragas[{label}]", kind="ragas", case_kind="ragas",
                case_id=f"q{i}", file="cases.jsonl", line=i + 1, status="passed",
                system=system, metrics=metrics, thresholds={"token_f1": 0.5},
                fields={"category": f"c{i % 5}", "doc_type": ("pdf", "html", "md")[i % 3],
                        "question_type": ("factual", "multi_hop")[i % 2],
                        "difficulty": ("easy", "medium", "hard")[i % 3]},
                usage={"generator": {"calls": 1, "prompt_tokens": 300, "completion_tokens": 40,
                                     "cache_hits": i % 2, "latency_s": [rng.random()]}},
                duration=rng.random()))
    return records


def measure(n: int, systems: tuple[str, ...]) -> dict[str, float]:
    records = make_records(n, systems)
    with tempfile.TemporaryDirectory() as folder:
        settings = RagbenchConfig(rootpath=Path(folder), report_dir=Path(folder) / "out",
                                  systems=systems)
        started = time.perf_counter()
        doc = document.build(records, settings, run=files.run_info(Path(folder)),
                             components={})
        built = time.perf_counter()
        terminal.render(doc, [], None)
        printed = time.perf_counter()
        html.render(doc)
        rendered = time.perf_counter()
        files.write_all(doc, records, settings)
        written = time.perf_counter()
    return {"items": len(records), "document": built - started, "terminal": printed - built,
            "html": rendered - printed, "all files": written - rendered}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args()
    sizes = (100, 1000) if args.quick else (100, 1000, 5000)
    # Warm up imports (numpy, scipy, matplotlib) so that the table shows the work only.
    measure(20, ())
    rows = []
    for n in sizes:
        for systems in ((), ("dense", "bm25", "hybrid")):
            result = measure(n, systems)
            rows.append((f"{n} cases x {max(1, len(systems))} system(s)", result))
    head = ("run", "items", "document s", "terminal s", "html s", "files s")
    print(" | ".join(head))
    for label, r in rows:
        print(" | ".join([label, str(r["items"]), f"{r['document']:.2f}",
                          f"{r['terminal']:.3f}", f"{r['html']:.2f}", f"{r['all files']:.2f}"]))


if __name__ == "__main__":
    main()
