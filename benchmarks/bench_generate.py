"""Generation from the bundled sources: the accounting table of each.

    python benchmarks/bench_generate.py                    # every source, cold caches
    python benchmarks/bench_generate.py --only=corpus,beir --cache=.bench_cache

Prints, per source, what ``ragbench generate`` prints: the cases kept and rejected per type
with the reasons, the share of exact cases verified, model calls (and those answered from
the cache) and time. Sources: the bundled database (SQL; hybrid with the bundled
corpus), the loghub oracle (logs, when present), and, with the local SmolLM2 writing and
judging the questions as ``ragbench generate`` does when no --llm-url is given, the bundled corpus
(``test_cases/corpus``) and the bundled BEIR folder (``test_cases/beir/nba_mini``), all six
question types. For these two it also prints how many candidates were written, how many
passed every filter, and the kept questions. The response and embedding cache is a fresh
temporary folder unless --cache names one, so the model calls and times are cold.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from pytest_ragbench.cli import build_parser
from pytest_ragbench.datasets.generate.command import generate
from pytest_ragbench.datasets.generate.common import Generated
from pytest_ragbench.datasets.generate.documents import read_documents
from pytest_ragbench.datasets.generate.hybrid import WHOLE_DOCUMENT, generate_hybrid
from pytest_ragbench.datasets.generate.logs import generate_logs
from pytest_ragbench.datasets.generate.sql import generate_sql

ROOT = Path(__file__).resolve().parents[1]
LOGHUB = ROOT.parent / "shared" / "oracles" / "loghub"
SOURCES = ("sql", "hybrid", "logs", "corpus", "beir")
# rejections that are no candidate: nothing was written for them
NOT_WRITTEN = ("no two documents share an entity", "no perturbation applies")


def bench_sql() -> None:
    database = ROOT / "test_cases" / "data" / "nba_stats.db"
    print(f"## sql: {database.relative_to(ROOT)}, --n 60 --seed 7")
    print(generate_sql(f"sqlite:///{database}", 60, seed=7).accounting.table())


def bench_hybrid() -> None:
    database = ROOT / "test_cases" / "data" / "nba_stats.db"
    print(f"## hybrid: {database.relative_to(ROOT)} with test_cases/corpus, --n 20 --seed 7")
    passages, _ = read_documents(ROOT / "test_cases" / "corpus", WHOLE_DOCUMENT)
    print(generate_hybrid(f"sqlite:///{database}", passages, 20, seed=7).accounting.table())


def bench_logs() -> None:
    if not LOGHUB.is_dir():
        print(f"## logs: skipped ({LOGHUB} not found)")
        return
    print(f"## logs: {LOGHUB.name} (five systems), --n 200 --seed 0")
    generated = generate_logs(LOGHUB, 200, seed=0)
    print(generated.accounting.table())
    systems: dict[str, int] = {}
    for case in generated.cases:
        systems[case["metadata"]["system"]] = systems.get(case["metadata"]["system"], 0) + 1
    print("per system: " + ", ".join(f"{k} {v}" for k, v in sorted(systems.items())))


def bench_questions(folder: str, extra: list[str], n: int, attempts: int, cache: Path,
                    cache_shown: str) -> None:
    """``ragbench generate --from=FOLDER`` with the local model: its table and its yield."""
    flags = [f"--from={folder}", *extra, "--n", str(n), "--seed", "0",
             "--attempts", str(attempts)]
    print(f"## ragbench generate {' '.join(flags)} --cache={cache_shown}  "
          "(local SmolLM2, all six types)")
    args = build_parser().parse_args(["generate", *flags, f"--cache={cache}",
                                      "--out=unused.yaml"])
    generated = generate(args)
    print(generated.accounting.table())
    print(yield_line(generated))
    for case in generated.cases:
        level = case["provenance"]["filters"]["difficulty"]["level"]
        print(f"  kept {case['category']:<14} {level:<6} {case['question']!r} -> "
              f"{case['ground_truth']!r}")


def yield_line(generated: Generated) -> str:
    """Candidates written, those that passed every filter, those kept by quota."""
    rejected = generated.accounting.rejected
    over_quota = sum(r.get("over quota", 0) for r in rejected.values())
    passed = len(generated.cases) + over_quota
    failed = sum(1 for r in generated.rejections if r["reason"] not in NOT_WRITTEN)
    return (f"candidates written: {passed + failed}; passed every filter: {passed}; "
            f"kept by quota: {len(generated.cases)}")


def main() -> None:
    """Generate from each source asked for and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SOURCES),
                        help=f"sources, comma-separated (default: {','.join(SOURCES)})")
    parser.add_argument("--cache", type=Path,
                        help="response and embedding cache folder (default: a fresh "
                             "temporary folder: cold numbers)")
    parser.add_argument("--n", type=int, default=6,
                        help="cases asked of the corpus and of BEIR (default 6: one a type)")
    parser.add_argument("--attempts", type=int, default=1,
                        help="candidates per case asked for, per type (default 1)")
    args = parser.parse_args()
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    given_cache = args.cache.resolve() if args.cache else None
    os.chdir(ROOT)  # the sources are named as a user in the repository names them
    with tempfile.TemporaryDirectory(prefix="bench_generate_") as temporary:
        cache = given_cache or Path(temporary)
        shown = str(given_cache) if given_cache else "<a fresh temporary folder>"
        print(f"cache: {shown}{'' if given_cache else ' (cold)'}\n")
        if "sql" in only:
            bench_sql()
            print()
        if "hybrid" in only:
            bench_hybrid()
            print()
        if "logs" in only:
            bench_logs()
            print()
        if "corpus" in only:
            bench_questions("test_cases/corpus", [], args.n, args.attempts, cache, shown)
            print()
        if "beir" in only:
            bench_questions("test_cases/beir/nba_mini", ["--source=beir"], args.n,
                            args.attempts, cache, shown)


if __name__ == "__main__":
    main()
