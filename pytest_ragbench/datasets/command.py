"""``ragbench dataset build|combine|stats``: build stratified benchmark datasets.

``register(subparsers)`` adds the ``dataset`` command to the ``ragbench`` parser; each
sub-command sets ``func(args) -> exit code``. Also runnable alone as
``python -m pytest_ragbench.datasets.command``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.builder import build, format_report, report_dict
from pytest_ragbench.datasets.export import combine, read_jsonl, write_jsonl, write_manifest
from pytest_ragbench.datasets.quotas import load_config
from pytest_ragbench.datasets.sources import ADAPTERS
from pytest_ragbench.datasets.summary import dataset_stats, format_stats
from pytest_ragbench.errors import RagbenchError

BUILD_EPILOG = """\
The configuration is a TOML file with [build] (seed, unanswerable_share,
unanswerable_ground_truth), [[source]] tables (adapter, path relative to the file,
adapter options) and [[quota]] tables (doc_type, optional question_type and
difficulty, count, optional unanswerable_share). An example is installed with the
package: pytest_ragbench/datasets/examples/ (copy it and point its paths at your data).

adapters:
{adapters}

Malformed source records are reported with file, line and field, and skipped. Quotas
that the sources cannot fill are reported (full / scaled down / unmet), never padded.
Exit status: 0, or 1 with --strict when a quota is unmet or a record was malformed,
2 for a bad configuration or duplicate ids."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``dataset`` and its sub-commands to an ``add_subparsers()`` object."""
    dataset = subparsers.add_parser(
        "dataset", help="build, combine and describe stratified benchmark datasets",
        description="Build stratified RAG benchmark datasets (JSONL files of ragas cases) "
                    "from public QA sources, combine them and describe them.")
    commands = dataset.add_subparsers(dest="dataset_command", required=True,
                                      metavar="{build,combine,stats}")
    build = commands.add_parser(
        "build", help="adapt sources, sample to quotas, write JSONL + manifest",
        description="Adapt every [[source]] of the configuration, sample to its [[quota]]\n"
                    "tables with the seed, and write the dataset and its manifest.",
        epilog=BUILD_EPILOG.format(adapters="\n".join(
            f"  {name:<8} {text}" for name, text in ADAPTERS.items())),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    build.add_argument("--config", required=True, type=Path, help="quota configuration (TOML)")
    build.add_argument("--seed", type=int, default=None,
                       help="sampling seed (default: [build] seed of the configuration)")
    build.add_argument("--output", required=True, type=Path, help="dataset JSONL to write")
    build.add_argument("--manifest", required=True, type=Path, help="manifest CSV to write")
    build.add_argument("--report", type=Path, help="also write the build report as JSON")
    _common(build, "exit 1 when a quota is unmet or a source record is malformed")
    build.set_defaults(func=run_build)

    combine = commands.add_parser(
        "combine", help="concatenate datasets, refusing duplicate ids",
        description="Concatenate dataset JSONL files in the order given. Duplicate ids are "
                    "refused and named; nothing is written then.")
    combine.add_argument("inputs", nargs="+", type=Path, help="dataset JSONL files")
    combine.add_argument("--output", required=True, type=Path, help="combined JSONL to write")
    combine.add_argument("--manifest", required=True, type=Path, help="manifest CSV to write")
    _common(combine, "exit 1 when a malformed line was skipped")
    combine.set_defaults(func=run_combine)

    stats = commands.add_parser(
        "stats", help="counts per stratum and confidence-interval widths",
        description="Count samples per doc_type, doc_type/question_type, difficulty and "
                    "source; give the 95% CI half-width of a proportion at this n and the "
                    "n needed for a target half-width (normal approximation).")
    stats.add_argument("dataset", type=Path, help="dataset JSONL")
    stats.add_argument("--target-half-width", type=float, default=0.035,
                       help="target CI half-width as a proportion (default 0.035)")
    stats.add_argument("--confidence", type=float, default=0.95,
                       help="confidence level (default 0.95)")
    stats.add_argument("--p", type=float, default=0.5,
                       help="assumed proportion (default 0.5, the widest interval)")
    stats.add_argument("--json", action="store_true", help="print JSON instead of a table")
    stats.set_defaults(func=run_stats)
    return dataset


def _common(parser: argparse.ArgumentParser, strict: str) -> None:
    parser.add_argument("--strict", action="store_true", help=strict)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _progress(args: argparse.Namespace, desc: str, unit: str) -> Any:
    """A wrapper that shows a tqdm bar on a terminal (unless --no-progress)."""
    from tqdm import tqdm

    disable = True if getattr(args, "no_progress", False) else None  # None: only on a tty

    def wrap(items: Any) -> Any:
        return tqdm(items, desc=desc, unit=unit, disable=disable, file=sys.stderr, leave=False)

    return wrap


def run_build(args: argparse.Namespace) -> int:
    """``dataset build``."""
    try:
        config = load_config(args.config)
        result = build(config, args.seed, wrap=_progress(args, "adapting sources", "source"))
        write_jsonl(result.samples, args.output)
        write_manifest(result.samples, args.manifest)
    except RagbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_report(result))
    print(f"\nwrote {len(result.samples)} samples to {args.output} and the manifest to "
          f"{args.manifest}")
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report_dict(result), indent=2, ensure_ascii=False)
                               + "\n", encoding="utf-8")
    failed = bool(result.sampling.unmet or result.errors)
    return 1 if args.strict and failed else 0


def run_combine(args: argparse.Namespace) -> int:
    """``dataset combine``."""
    try:
        files = [read_jsonl(p) for p in _progress(args, "reading", "file")(args.inputs)]
        samples = combine(files)
        errors = [e for f in files for e in f.errors]
        for error in errors:
            print(f"malformed record skipped: {error}", file=sys.stderr)
        write_jsonl(samples, args.output)
        write_manifest(samples, args.manifest)
    except RagbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for f in files:
        print(f"{f.path}: {len(f.samples)} samples" + (
            f", {len(f.errors)} malformed lines skipped" if f.errors else ""))
    print(f"wrote {len(samples)} samples to {args.output} and the manifest to {args.manifest}")
    return 1 if args.strict and errors else 0


def run_stats(args: argparse.Namespace) -> int:
    """``dataset stats``."""
    try:
        data = read_jsonl(args.dataset)
        stats = dataset_stats([s for _, s in data.samples], args.target_half_width,
                              args.confidence, args.p)
    except (RagbenchError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for error in data.errors:
        print(f"malformed record skipped: {error}", file=sys.stderr)
    if args.json:
        print(json.dumps({**stats.to_dict(), "malformed": len(data.errors)}, indent=2))
    else:
        print(format_stats(stats))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dataset …`` without the rest of the ``ragbench`` command."""
    parser = argparse.ArgumentParser(prog="ragbench")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
