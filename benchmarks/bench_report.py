"""Benchmark of the session report: the end of a session, and report.html in a browser.

    python benchmarks/bench_report.py                   # 100, 1000, 5000 items; page of 10,000
    python benchmarks/bench_report.py --quick           # 100 and 1000 items; page of 1,000
    python benchmarks/bench_report.py --page-items 10000 --no-session   # the browser part only

Records are synthetic (seeded) and shaped like real ones: M continuous metrics and one
pass/fail metric per item, four breakdown fields, about one item in ten failing with its
evidence, and what the system answered (a question, a 300-character answer, five
retrieved contexts of 300 characters), optionally S systems (then pairwise comparisons).

Part 1 times the phases of the session's end: the document (cells, batched BCa
bootstrap, comparisons), the terminal lines, report.html (matplotlib, item data) and all
files written. Part 2 opens report.html with the given number of items in headless
Chromium (Debian's, driven over the DevTools protocol) and prints: the time from
navigation to the load event, the time at which the page's script had rendered the first
rows (``performance.now()``) and the first frame after it, the time to filter to the
failed items, to open one item, and the first search (which reads every item's texts;
the 150 ms wait after a keystroke left out). The target: a 10,000-item page usable in
under 3 s.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.kinds.report_sections import builtin_sections
from pytest_ragbench.render import files, html, terminal
from pytest_ragbench.results import document
from pytest_ragbench.results.records import ItemRecord

METRICS = ("token_f1", "semantic_similarity", "keyword_overlap", "faithfulness",
           "answer_relevancy", "context_precision")
WORDS = ("points", "rebounds", "assists", "season", "playoffs", "defense", "shooting",
         "efficiency", "rookie", "contract", "trade", "coach", "arena", "title", "final")


def _sentence(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words).capitalize() + "."


def _answers(rng: random.Random, question: str) -> list[dict[str, Any]]:
    contexts = [{"rank": r, "id": f"doc{rng.randrange(5000)}#{r}",
                 "source": f"reddit_{rng.choice(WORDS)}.md", "score": round(1 / (60 + r), 5),
                 "text": _sentence(rng, 300)} for r in range(1, 6)]
    return [{"question": question, "text": _sentence(rng, 300), "sql": None,
             "contexts": contexts, "n_contexts": 5, "service_s": rng.uniform(0.2, 2.0),
             "latency_s": None, "cached": False}]


def make_records(n: int, systems: tuple[str, ...], seed: int = 0) -> list[ItemRecord]:
    """``n`` cases (for each system), shaped like vector items with their evidence."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        base = {m: rng.betavariate(4, 2) for m in METRICS}
        question = f"Question {i}: " + _sentence(rng, 80)
        for s_index, system in enumerate(systems or (None,)):
            metrics = {m: min(1.0, max(0.0, v - 0.03 * s_index + rng.gauss(0, 0.05)))
                       for m, v in base.items()}
            metrics["exact_match"] = float(rng.random() < 0.4)
            failed = metrics["token_f1"] < 0.35
            label = f"{system}-q{i}" if system else f"q{i}"
            records.append(ItemRecord(
                nodeid=f"cases.jsonl::ragas[{label}]", kind="ragas", case_kind="ragas",
                case_id=f"q{i}", file="cases.jsonl", line=i + 1,
                status="failed" if failed else "passed", system=system, metrics=metrics,
                thresholds={"token_f1": 0.35},
                failures=[f"token_f1 = {metrics['token_f1']:.3g}, needs >= 0.35"] if failed
                else [],
                summary="the answer misses the reference" if failed else None,
                fields={"category": f"c{i % 5}", "doc_type": ("pdf", "html", "md")[i % 3],
                        "question_type": ("factual", "multi_hop")[i % 2],
                        "difficulty": ("easy", "medium", "hard")[i % 3]},
                evidence={"question": question, "expected": _sentence(rng, 200),
                          "got": _sentence(rng, 300),
                          "retrieved": "\n".join(f"[{r}] reddit_{rng.choice(WORDS)}.md, score "
                                                 f"{1 / (60 + r):.4g}" for r in range(1, 6))},
                answers=_answers(rng, question),
                usage={"generator": {"calls": 1, "prompt_tokens": 300, "completion_tokens": 40,
                                     "cache_hits": i % 2, "latency_s": [rng.random()]}},
                duration=rng.random()))
    return records


def build(records: list[ItemRecord], folder: Path, systems: tuple[str, ...]
          ) -> tuple[dict[str, Any], RagbenchConfig]:
    settings = RagbenchConfig(rootpath=folder, report_dir=folder / "out", systems=systems)
    doc = document.build(records, settings, run=files.run_info(folder), components={},
                         report_sections=builtin_sections)
    return doc, settings


def measure(n: int, systems: tuple[str, ...]) -> dict[str, float]:
    """Seconds of each phase of the session's end for ``n`` cases."""
    records = make_records(n, systems)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        started = time.perf_counter()
        doc, settings = build(records, folder, systems)
        built = time.perf_counter()
        terminal.render(doc, [], None)
        printed = time.perf_counter()
        page = html.render(doc)
        rendered = time.perf_counter()
        files.write_all(doc, records, settings)
        written = time.perf_counter()
    return {"items": len(records), "document": built - started, "terminal": printed - built,
            "html": rendered - printed, "all files": written - rendered,
            "page MB": len(page.encode()) / 1e6}


FILTER = """(() => {
  const start = performance.now();
  const select = document.getElementById('ragbench-outcome');
  select.value = 'notpassed';
  select.dispatchEvent(new Event('change'));
  const rows = document.querySelectorAll('#ragbench-list details.item').length;
  document.body.offsetHeight;  // layout
  return [performance.now() - start, rows, Number(document.body.dataset.itemsShown)];
})()"""
OPEN = """(() => {
  const start = performance.now();
  const row = document.querySelector('#ragbench-list details.item');
  row.querySelector('summary').click();
  document.body.offsetHeight;
  return [performance.now() - start, row.querySelector('.evidence-failure') !== null];
})()"""
SEARCH = """(query => new Promise(resolve => {
  const box = document.getElementById('ragbench-search');
  const before = document.body.dataset.itemsShown;
  const start = performance.now();
  document.getElementById('ragbench-outcome').value = 'all';
  box.value = query;
  box.dispatchEvent(new Event('input'));
  (function wait() {
    if (document.body.dataset.itemsShown !== before) {
      resolve([performance.now() - start - 150, Number(document.body.dataset.itemsShown)]);
    } else { setTimeout(wait, 5); }
  })();
}))"""
PAINTED = "new Promise(r => requestAnimationFrame(() => setTimeout(() => r(performance.now()))))"


def browser_timing(n: int, runs: int) -> list[dict[str, float]]:
    """Open a report.html of ``n`` items in headless Chromium ``runs`` times."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.browser import browser, chromium_path

    chromium = chromium_path()
    if chromium is None:
        raise SystemExit("headless Chromium not found (Debian: apt-get install -y chromium)")
    records = make_records(n, ())
    out = []
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        doc, _ = build(records, folder, ())
        path = folder / "report.html"
        path.write_text(html.render(doc), encoding="utf-8")
        size = path.stat().st_size / 1e6
        with browser(chromium) as page:
            for _ in range(runs):
                page.open("about:blank")
                load = page.open(path.as_uri())
                ready = float(page.evaluate("document.body.dataset.ready"))
                painted = float(page.evaluate(PAINTED))
                filtered, rows, matched = page.evaluate(FILTER)
                opened, evidence = page.evaluate(OPEN)
                assert evidence and rows == min(100, matched)
                searched, found = page.evaluate(f"{SEARCH}('question {n - 1}: ')")
                out.append({"items": n, "page MB": size, "load event s": load,
                            "script ready s": ready / 1000, "first paint s": painted / 1000,
                            "filter ms": filtered, "failed items": matched,
                            "open item ms": opened, "search ms": searched, "found": found})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--page-items", type=int, default=None,
                        help="items in the page opened in Chromium (default 10000, quick 1000)")
    parser.add_argument("--runs", type=int, default=3, help="times the page is opened")
    parser.add_argument("--no-session", action="store_true", help="only the browser part")
    parser.add_argument("--no-browser", action="store_true", help="only the session part")
    args = parser.parse_args()
    if not args.no_session:
        sizes = (100, 1000) if args.quick else (100, 1000, 5000)
        measure(20, ())  # warm up imports (numpy, scipy, matplotlib)
        head = ("run", "items", "document s", "terminal s", "html s", "files s", "page MB")
        print(" | ".join(head))
        for n in sizes:
            for systems in ((), ("dense", "bm25", "hybrid")):
                r = measure(n, systems)
                print(" | ".join([f"{n} cases x {max(1, len(systems))} system(s)",
                                  str(r["items"]), f"{r['document']:.2f}",
                                  f"{r['terminal']:.3f}", f"{r['html']:.2f}",
                                  f"{r['all files']:.2f}", f"{r['page MB']:.1f}"]))
    if not args.no_browser:
        n = args.page_items or (1000 if args.quick else 10_000)
        rows = browser_timing(n, args.runs)
        print()
        head = ("report.html in headless Chromium", "items", "page MB", "load event s",
                "script ready s", "first paint s", "filter to failed ms", "open an item ms",
                "first search ms")
        print(" | ".join(head))
        for i, r in enumerate(rows, 1):
            print(" | ".join([f"run {i}", str(r["items"]), f"{r['page MB']:.1f}",
                              f"{r['load event s']:.2f}", f"{r['script ready s']:.2f}",
                              f"{r['first paint s']:.2f}",
                              f"{r['filter ms']:.0f} ({r['failed items']:.0f} items)",
                              f"{r['open item ms']:.0f}",
                              f"{r['search ms']:.0f} ({r['found']:.0f} found)"]))


if __name__ == "__main__":
    main()
