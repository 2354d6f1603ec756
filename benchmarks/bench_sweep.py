"""What a sweep costs: 12 configurations of the embedded system against one, warm.

    python benchmarks/bench_sweep.py [--cache=DIR] [--runs=N]

Runs ``pytest --ragbench`` on the bundled vector and memory cases (test_cases/nba_vector.yaml,
test_cases/memory_scenarios.yaml) in this checkout, with a copy of a warm cache (``--cache``,
default ../main/.ragbench_cache when it exists; else a first run warms a fresh one): once with
the embedded system alone, then with a 12-configuration sweep
(``top_k=3,5,10`` × ``decline_below=0.22,0.25,0.3,0.35``). The configurations share the
embedder, the index, the generator and its cached answers (a top_k or decline_below change
asks the generator nothing new), so the sweep should take at most half of 12 × one run.
Prints the wall time of each (the best of ``--runs``), 12 × one run, and the ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ("test_cases/nba_vector.yaml", "test_cases/memory_scenarios.yaml")
SWEEP = ("--ragbench-sweep", "top_k=3,5,10", "--ragbench-sweep",
         "decline_below=0.22,0.25,0.3,0.35")
CONFIGURATIONS = 12


def run(cache: Path, report: Path, *extra: str) -> float:
    """Wall seconds of one ``pytest --ragbench`` session on the bundled cases."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "RAGAS_DO_NOT_TRACK": "true"}
    command = [sys.executable, "-m", "pytest", "--ragbench", *CASES, "-q", "-p",
               "no:cacheprovider", "-n", "0", f"--ragbench-cache={cache}",
               f"--ragbench-report={report}", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: items below their thresholds, as bundled
        raise SystemExit(f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}"
                         f"\n{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_cache = ROOT.parent / "main" / ".ragbench_cache"
    parser.add_argument("--cache", type=Path,
                        default=default_cache if default_cache.is_dir() else None)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as folder:
        work = Path(folder)
        cache = work / "cache"
        if args.cache is not None:  # a copy: the benchmark never writes into the source
            shutil.copytree(args.cache, cache)
        run(cache, work / "warm-up")  # warms the cache and the index files of this checkout
        run(cache, work / "warm-up-sweep", *SWEEP)  # and the sweep's answers, if any are new
        one = min(run(cache, work / f"one-{i}") for i in range(args.runs))
        sweep = min(run(cache, work / f"sweep-{i}", *SWEEP) for i in range(args.runs))
    ratio = sweep / (CONFIGURATIONS * one)
    rows = [("one configuration, warm", f"{one:.1f} s"),
            (f"{CONFIGURATIONS} x one configuration", f"{CONFIGURATIONS * one:.1f} s"),
            (f"{CONFIGURATIONS}-configuration sweep, warm", f"{sweep:.1f} s"),
            ("sweep / (12 x one)", f"{ratio:.2f} (target <= 0.50: "
                                   f"{'met' if ratio <= 0.5 else 'NOT met'})")]
    width = max(len(name) for name, _ in rows)
    print(f"bundled vector and memory cases ({', '.join(CASES)})")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")


if __name__ == "__main__":
    main()
