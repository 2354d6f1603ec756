"""Does ``-n 2`` pay? The bundled warm run, serially and with pytest-xdist (issue 20, point 5).

    python benchmarks/bench_xdist.py                       # the table below, 1 round
    python benchmarks/bench_xdist.py --rounds 3            # best of 3 per cell
    python benchmarks/bench_xdist.py --quick               # --ragbench-limit=3: a smoke run
    python benchmarks/bench_xdist.py --cache=PATH          # the warm cache to start from
    python benchmarks/bench_xdist.py --dist=loadfile       # -n 2 with each case file on one worker

Each cell runs ``pytest --ragbench`` on the bundled ``test_cases/`` from a fresh copy of a
warm cache (embeddings, indexes and SmolLM2's answers; default ``.ragbench_cache`` of the
repository), so every run starts equally warm and none warms the next:

- generator ``local``: the embedded SmolLM2 (llama.cpp); its answers come from the cache;
- generator ``remote``: ``--ragbench-llm-url`` pointing at the loopback OpenAI-compatible
  server (``pytest_ragbench/testing.py``, its own process) answering each call
  after 100 ms; its answers are never in the cache, so every generator call waits;
- load ``quiet``: nothing else running; ``+1 CPU-bound``: one ``while True: pass``
  process competes for the cores during the run (as on a shared CI runner).

Targets: local ``-n 2`` at most 1.1x the serial wall time, quiet and loaded; remote ``-n 2``
faster than serial. CPU is user + sys of pytest and its xdist workers. The machine
should be otherwise idle: wall times are the measure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_ragbench.testing import server_process  # noqa: E402

LATENCY_S = 0.1
TARGETS = {"local": 1.1, "remote": 1.0}  # -n 2 wall / serial wall, at most (remote: below)


@contextlib.contextmanager
def competing_process(enabled: bool) -> Iterator[None]:
    """One CPU-bound process for the duration (nothing when not ``enabled``)."""
    if not enabled:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # running before the session starts
        yield
    finally:
        proc.kill()
        proc.wait(10)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_session(cache: Path, work: Path, extra: list[str]) -> dict[str, Any]:
    """One ``pytest --ragbench`` run from a fresh copy of ``cache``; wall, CPU and outcome."""
    copy = work / "cache"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(cache, copy)
    report = work / "report"
    shutil.rmtree(report, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "RAGAS_DO_NOT_TRACK": "true"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "pytest", "--ragbench", f"--ragbench-cache={copy}",
               f"--ragbench-report={report}", "-p", "no:cacheprovider", "-q", *extra]
    cpu = children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - started
    cpu = children_cpu() - cpu
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    summary = next((line.strip("= ") for line in reversed(lines) if " in " in line), "?")
    if proc.returncode not in (0, 1) or not (report / "results.json").is_file():
        raise RuntimeError(f"pytest {' '.join(extra)} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    usage = json.loads((report / "results.json").read_text()).get("usage", {})
    return {"wall": wall, "cpu": cpu, "summary": summary, "usage": usage}


def hit_rates(usage: dict[str, Any]) -> str:
    """``generator 66 calls, 100% cached`` for each model role of the run."""
    parts = []
    for role, entry in usage.items():
        calls = entry.get("calls") or 0
        rate = entry.get("cache_hit_rate")
        shown = "-" if rate is None else f"{rate:.0%}"
        parts.append(f"{role} {calls} calls {shown} cached")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=ROOT / ".ragbench_cache",
                        help="a warm cache to copy for each run (default .ragbench_cache)")
    parser.add_argument("--rounds", type=int, default=1, help="best of N per cell")
    parser.add_argument("--workers", default="2", help="the -n value (default 2)")
    parser.add_argument("--quick", action="store_true",
                        help="only the first 3 cases of each file (--ragbench-limit=3)")
    parser.add_argument("--generators", default="local,remote")
    parser.add_argument("--loads", default="quiet,busy")
    parser.add_argument("--dist", default=None,
                        help="xdist's --dist for the -n runs (default: xdist's own, load)")
    args = parser.parse_args()
    if not (args.cache / "embeddings.sqlite3").is_file():
        sys.exit(f"no warm cache at {args.cache}: run `pytest --ragbench` once, or pass --cache")
    limit = ["--ragbench-limit=3"] if args.quick else []
    print(f"bundled run (pytest --ragbench{' --ragbench-limit=3' if args.quick else ''}), "
          f"serial against -n {args.workers}; {os.cpu_count()} CPUs; best of {args.rounds}")
    print(f"remote generator: loopback server, {LATENCY_S * 1000:.0f} ms per call; "
          f"xdist --dist={args.dist or 'load (default)'}\n")
    header = (f"{'generator':<10}{'load':<16}{'serial':>9}{f'-n {args.workers}':>9}"
              f"{'ratio':>8}{'target':>9}{'CPU serial':>12}{f'CPU -n {args.workers}':>11}")
    print(header)
    print("-" * len(header))
    notes = []
    with tempfile.TemporaryDirectory(prefix="bench_xdist_") as tmp:
        for generator in args.generators.split(","):
            with contextlib.ExitStack() as stack:
                extra = list(limit)
                if generator == "remote":
                    url = stack.enter_context(server_process(LATENCY_S))
                    extra += [f"--ragbench-llm-url={url}", "--ragbench-llm-model=loopback"]
                for load in args.loads.split(","):
                    best: dict[str, dict[str, Any]] = {}
                    for _ in range(args.rounds):
                        dist = [f"--dist={args.dist}"] if args.dist else []
                        for mode, more in (("serial", []),
                                           ("xdist", ["-n", args.workers, *dist])):
                            with competing_process(load == "busy"):
                                result = run_session(args.cache, Path(tmp), extra + more)
                            if mode not in best or result["wall"] < best[mode]["wall"]:
                                best[mode] = result
                    serial, xdist = best["serial"], best["xdist"]
                    ratio = xdist["wall"] / serial["wall"]
                    target = TARGETS[generator]
                    met = ratio <= target if generator == "local" else ratio < target
                    shown_load = "quiet" if load == "quiet" else "+1 CPU-bound"
                    print(f"{generator:<10}{shown_load:<16}{serial['wall']:>8.1f}s"
                          f"{xdist['wall']:>8.1f}s{ratio:>8.2f}"
                          f"{('<=' if generator == 'local' else '<') + str(target):>8}"
                          f"{'' if met else '!'}{serial['cpu']:>11.1f}s{xdist['cpu']:>10.1f}s")
                    for mode, result in best.items():
                        notes.append(f"{generator}/{load}/{mode}: {result['summary']}; "
                                     f"{hit_rates(result['usage'])}")
    print("\n! = target missed")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
