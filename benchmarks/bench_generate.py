"""Generation from the bundled database and the loghub oracle: the accounting table.

    python benchmarks/bench_generate.py

Prints, per source, the cases kept and rejected per type with the reasons, the share of
exact cases verified, model calls and time (what ``ragbench generate`` prints).
"""

from __future__ import annotations

from pathlib import Path

from pytest_ragbench.datasets.generate.logs import generate_logs
from pytest_ragbench.datasets.generate.sql import generate_sql

ROOT = Path(__file__).resolve().parents[1]
LOGHUB = ROOT.parent / "shared" / "oracles" / "loghub"


def main() -> None:
    """Generate from each source and print its table."""
    database = ROOT / "test_cases" / "data" / "nba_stats.db"
    print(f"## sql: {database.relative_to(ROOT)}, --n 60 --seed 7")
    print(generate_sql(f"sqlite:///{database}", 60, seed=7).accounting.table())
    if LOGHUB.is_dir():
        print(f"\n## logs: {LOGHUB.name} (five systems), --n 200 --seed 0")
        generated = generate_logs(LOGHUB, 200, seed=0)
        print(generated.accounting.table())
        systems: dict[str, int] = {}
        for case in generated.cases:
            systems[case["metadata"]["system"]] = systems.get(case["metadata"]["system"], 0) + 1
        print("per system: " + ", ".join(f"{k} {v}" for k, v in sorted(systems.items())))
    else:
        print(f"\n## logs: skipped ({LOGHUB} not found)")


if __name__ == "__main__":
    main()
