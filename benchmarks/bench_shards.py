"""Shards and their merge: N ``sql`` cases run as S shards, then ``ragbench merge``.

    python benchmarks/bench_shards.py                      # 100,000 items, 4 shards
    python benchmarks/bench_shards.py --items 10000        # a shorter run

The project is bench_overhead.py's: N one-row SQL cases on a small SQLite file, so each
item is cheap and the numbers are the plugin's own work. Printed: each shard's wall time
and items, the merge's wall and CPU time (collection of every item, the shards' records
read and checked, each item's record replayed as its test reports, the report built and
written), and, for comparison, one process running every item. The merge is checked to
give the one run's numbers (every metric's n and mean, every gate).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_overhead import make_projects

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
       "RAGAS_DO_NOT_TRACK": "true"}
GATES = '\n[tool.ragbench.gates]\n"sql_ground_truth.match" = 0.99\n'


def timed(command: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds of the child, and the last line of its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}:\n{proc.stdout[-3000:]}"
                         f"\n{proc.stderr[-3000:]}")
    return wall, cpu, lines[-1] if lines else ""


def summary(document: dict) -> dict:
    """Every metric's n and mean, every gate's verdict."""
    metrics = {(kind, metric): (cell.get("n"), cell.get("mean"))
               for kind, cells in document["metrics"].items() for metric, cell in cells.items()}
    gates = [(g["gate"], g["passed"], g.get("value")) for g in document["gates"]]
    return {"metrics": sorted(metrics.items()), "gates": gates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  "-p", "no:randomly"]
    with tempfile.TemporaryDirectory() as tmp:
        project, _ = make_projects(Path(tmp), args.items, "jsonl")
        with (project / "pyproject.toml").open("a") as toml:
            toml.write('testpaths = ["test_cases"]\n' + GATES)
        rows = []
        for index in range(1, args.shards + 1):
            wall, cpu, last = timed([*pytest_cmd, f"--ragbench-report=shard{index}",
                                     f"--ragbench-shard={index}/{args.shards}"], project)
            rows.append((f"shard {index}/{args.shards}", wall, cpu, last))
        shards = [f"shard{i}" for i in range(1, args.shards + 1)]
        wall, cpu, last = timed([sys.executable, "-m", "pytest_ragbench", "merge", "--out",
                                 "merged", *shards], project)
        rows.append(("merge", wall, cpu, last))
        wall, cpu, last = timed([*pytest_cmd, "--ragbench-report=whole"], project)
        rows.append(("one process, every item", wall, cpu, last))
        merged = json.loads((project / "merged" / "results.json").read_text())
        whole = json.loads((project / "whole" / "results.json").read_text())
        same = summary(merged) == summary(whole)
    print(f"{args.items:,} sql items in {args.shards} shards ({os.cpu_count()} CPUs)\n")
    print(f"{'run':<26} {'wall s':>8} {'CPU s':>8}  last line")
    for name, wall, cpu, last in rows:
        print(f"{name:<26} {wall:>8.1f} {cpu:>8.1f}  {last.strip('= ')}")
    print(f"\nmerge equals the one-process run (every metric's n and mean, every gate): {same}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
