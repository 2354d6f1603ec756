"""Logged traffic at scale: reading, aggregating, pytest items, judge calls, drift calibration.

    python benchmarks/bench_traffic.py            # minutes on 2 cores
    python benchmarks/bench_traffic.py --quick    # smaller pytest runs and simulations

1. Reading and aggregating 100,000 logged interactions (formats/traffic.py streaming, the
   metrics of kinds/traffic/runner.py folded into per-week moments, stats/traffic.py):
   interactions/s and the peak of traced memory.
2. The traffic kind as pytest items: ``pytest --ragbench`` on N interactions, wall time and
   items/s (one item per interaction), from which the time for 100,000 is extrapolated.
3. Judge calls with and without ``--ragbench-sample``: a scripted judge on 127.0.0.1
   counts the requests of a run without a sample (every answered interaction judged) and
   of a run of more traffic with ``--ragbench-sample 50``.
4. Drift calibration: seeded simulations of three or six weeks with no planted change
   (how often the latest window is flagged, and any window) and with a planted drop
   (how often it is caught), Welch tests Holm-adjusted within each window pair.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_ragbench.formats.traffic import Interaction, read_traffic  # noqa: E402
from pytest_ragbench.stats.traffic import Moments, drift, window_of  # noqa: E402

START = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
DIRECTION = {"mean_similarity": 1, "no_results": -1, "latency_ms": -1, "user_feedback": 1,
             "retrieved_count": 0, "top_similarity": 1, "declined": -1}


def write_traffic(path: Path, n: int, seed: int = 0) -> None:
    """``n`` interactions over three weeks, as RetrievalLog writes them."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            when = START + dt.timedelta(seconds=i * 21 * 86400 / n)
            empty = rng.random() < 0.05
            hits = [] if empty else [
                {"content": f"passage {j} of the manual, section {rng.randint(1, 99)}",
                 "score": round(rng.betavariate(8, 3), 4), "id": f"kb-{rng.randint(1, 500)}"}
                for j in range(3)]
            handle.write(json.dumps({
                "schema": "ragbench.traffic/1", "timestamp": when.isoformat(),
                "query": f"how do I do task {i % 997}?", "retrieved": hits,
                "answer": "I don't know." if empty else "Open the settings page.",
                "user_feedback": rng.random() < 0.8, "latency_s": rng.lognormvariate(-1, 0.3),
            }) + "\n")


def fold(interaction: Interaction, moments: dict[str, dict[str, Moments]]) -> None:
    """The reference-free metrics of one interaction into its week's moments."""
    week = moments.setdefault(window_of(interaction.timestamp, "week"), {})
    scores = interaction.scores
    values = {"retrieved_count": float(len(interaction.retrieved)),
              "no_results": float(not interaction.retrieved)}
    if scores:
        values["top_similarity"] = max(scores)
        values["mean_similarity"] = sum(scores) / len(scores)
    if interaction.user_feedback is not None:
        values["user_feedback"] = interaction.user_feedback
    if interaction.latency_ms is not None:
        values["latency_ms"] = interaction.latency_ms
    for metric, value in values.items():
        week.setdefault(metric, Moments()).add(value)


def reading(folder: Path, n: int) -> None:
    path = folder / "big.traffic.jsonl"
    write_traffic(path, n)
    size = path.stat().st_size / 1e6
    began = time.perf_counter()
    count = sum(1 for e in read_traffic(path) if isinstance(e, Interaction))
    read_s = time.perf_counter() - began
    tracemalloc.start()  # a pass of its own: tracing slows reading several times
    sum(1 for _ in read_traffic(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    moments: dict[str, dict[str, Moments]] = {}
    began = time.perf_counter()
    for entry in read_traffic(path):
        if isinstance(entry, Interaction):
            fold(entry, moments)
    changes = drift(sorted(moments), moments, DIRECTION)
    total_s = time.perf_counter() - began
    print(f"## reading and aggregating {count:,} interactions ({size:.0f} MB)\n")
    print("| step | seconds | interactions/s |")
    print("|---|---|---|")
    print(f"| read (streaming) | {read_s:.1f} | {count / read_s:,.0f} |")
    print(f"| read + metrics + weekly moments + drift | {total_s:.1f} | "
          f"{count / total_s:,.0f} |")
    print(f"\npeak traced memory while reading: {peak / 1e3:.0f} kB; "
          f"{len(moments)} weeks, {len(changes)} drift tests\n")


def pytest_run(folder: Path, n: int, *extra: str) -> tuple[float, str]:
    project = folder / f"project-{n}-{len(extra)}"
    (project / "test_cases").mkdir(parents=True)
    write_traffic(project / "test_cases" / "app.traffic.jsonl", n)
    (project / "pytest.ini").write_text("[pytest]\nragbench_cases = test_cases\n")
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "--ragbench", "-q", "-p",
                           "no:cacheprovider", "-n", "0", *extra], cwd=project,
                          capture_output=True, text=True, check=False)
    return time.perf_counter() - began, done.stdout.strip().splitlines()[-1]


def items(folder: Path, sizes: list[int]) -> None:
    print("## the traffic kind as pytest items (one per interaction, -n 0)\n")
    print("| interactions | wall s | items/s | 100,000 extrapolated |")
    print("|---|---|---|---|")
    for n in sizes:
        wall, last = pytest_run(folder, n)
        print(f"| {n:,} | {wall:.1f} | {n / wall:,.0f} | {100_000 / (n / wall) / 60:.0f} min |"
              f"  <!-- {last} -->")
    print()


def judge_calls(folder: Path, small: int, large: int, sample: int) -> None:
    from pytest_ragbench.testing import LoopbackServer
    from tests.scripted_judge import ScriptedJudge

    print("## judge calls with and without --ragbench-sample\n")
    print("| interactions | --ragbench-sample | judged items | judge requests | "
          "requests per judged item | wall s |")
    print("|---|---|---|---|---|---|")
    for n, extra in ((small, ()), (large, ("--ragbench-sample", str(sample)))):
        with LoopbackServer(ScriptedJudge(supported="settings", grade=7)) as judge:
            wall, _ = pytest_run(folder, n, "--ragbench-judge-url", judge.url, *extra)
            requests = len(judge.requests)
        judged = n if not extra else sample
        print(f"| {n:,} | {extra[1] if extra else '-'} | {judged:,} | {requests:,} | "
              f"{requests / judged:.1f} | {wall:.0f} |")
    print(f"\nwithout a sample 100,000 answered interactions cost 100,000 judged items; "
          f"with --ragbench-sample {sample}, {sample}.\n")


def simulate(weeks: int, per_week: int, drop: float, rng: np.random.Generator
             ) -> tuple[bool, bool]:
    """(latest window flagged worse-or-not, any window flagged) for one simulated run."""
    moments = {}
    for week in range(weeks):
        shift = drop if week == weeks - 1 else 0.0
        n = int(rng.integers(per_week * 3 // 4, per_week * 5 // 4 + 1))
        moments[f"W{week:02d}"] = {
            "mean_similarity": Moments.of(rng.beta(7, 3, n) - shift),
            "top_similarity": Moments.of(rng.beta(9, 2, n) - shift),
            "no_results": Moments.of(rng.random(n) < 0.08 + shift),
            "declined": Moments.of(rng.random(n) < 0.08 + shift),
            "user_feedback": Moments.of(rng.random(n // 3) < 0.8 - shift),
            "latency_ms": Moments.of(rng.lognormal(6, 0.6, n)),
            "retrieved_count": Moments.of(rng.integers(0, 6, n)),
        }
    windows = sorted(moments)
    changes = drift(windows, moments, DIRECTION)
    latest = any(c.significant for c in changes if c.after == windows[-1])
    return latest, any(c.significant for c in changes)


def calibration(runs: int) -> None:
    print(f"## drift calibration ({runs} seeded runs per row, 7 metrics, alpha 0.05)\n")
    print("| weeks | interactions/week | planted drop | latest window flagged | "
          "any window flagged |")
    print("|---|---|---|---|---|")
    for weeks, per_week, drop in ((3, 50, 0.0), (3, 200, 0.0), (3, 1000, 0.0),
                                  (6, 200, 0.0), (3, 200, 0.05), (3, 200, 0.10)):
        rng = np.random.default_rng(weeks * 1000 + per_week + int(drop * 100))
        results = [simulate(weeks, per_week, drop, rng) for _ in range(runs)]
        latest = sum(r[0] for r in results) / runs
        anywhere = sum(r[1] for r in results) / runs
        print(f"| {weeks} | {per_week} | {drop:.2f} | {latest:.3f} | {anywhere:.3f} |")
    print("\nWith no planted change the latest window (what --ragbench-fail-on drift fails "
          "on) is flagged at most 5% of the time: Holm holds the family-wise error of one "
          "window pair; over several pairs ('any window') the rate adds up.\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        reading(folder, 100_000)
        items(folder, [500, 2_000] if args.quick else [2_000, 10_000])
        judge_calls(folder, 20 if args.quick else 60, 2_000, 50)
    calibration(300 if args.quick else 1000)


if __name__ == "__main__":
    main()
