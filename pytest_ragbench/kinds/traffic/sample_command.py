"""``ragbench traffic sample PATH... --n 50 --out FILE``: logged traffic to labels or cases.

The sample is drawn as ``--ragbench-sample`` draws it: seeded, stratified by time window
(in proportion to each window's traffic, two at least per window). Two passes over the
files, one interaction at a time: memory stays bounded whatever the traffic.

``--as labels`` (default) writes the ``--ragbench-judge-labels`` layout, one line per
interaction and metric, ``"score": null`` for a person to fill in, with the query, the
retrieved passages and the answer beside it; filled in, the file is read as judge labels
for the same ``traffic[<stem>:<n>]`` items (the judge on traffic is then calibrated).
``--as vector`` writes vector cases (the logged answer as the ground truth to review,
the logged passage ids as the expected sources) to keep as regression tests. ini-like
``--redact`` patterns mask texts, and user ids are never written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.otlp import read_otlp
from pytest_ragbench.formats.traffic import read_traffic
from pytest_ragbench.kinds.traffic.case import Redactor
from pytest_ragbench.kinds.traffic.collect import OTLP_SUFFIX, traffic_stem

DEFAULT_METRICS = ("faithfulness", "answer_relevancy", "judge_relevance")


def register(commands: Any) -> None:
    """Add ``ragbench traffic sample`` to the ``ragbench`` command."""
    traffic = commands.add_parser("traffic", help="work with logged production traffic")
    actions = traffic.add_subparsers(dest="traffic_command", required=True)
    sample = actions.add_parser(
        "sample", help="a stratified sample of logged interactions to label or keep as cases",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    sample.add_argument("paths", nargs="+", metavar="PATH",
                        help="*.traffic.jsonl / *.otlp.jsonl files")
    sample.add_argument("--n", type=int, required=True, help="how many interactions")
    sample.add_argument("--out", required=True, metavar="FILE", help="where to write them")
    sample.add_argument("--as", dest="layout", choices=("labels", "vector"),
                        default="labels", help="judge labels to fill in (default) or vector "
                                               "cases")
    sample.add_argument("--metric", action="append", dest="metrics",
                        help=f"metric to label (repeatable; default {', '.join(DEFAULT_METRICS)})")
    sample.add_argument("--window", choices=("day", "week", "month"), default="week",
                        help="the strata (default week)")
    sample.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    sample.add_argument("--redact", action="append", default=[], metavar="REGEX",
                        help="mask matches in queries, passages and answers (repeatable)")
    sample.set_defaults(func=run)


def _interactions(paths: list[Path]) -> Iterator[tuple[str, Any]]:
    """(file stem, interaction) for each readable interaction; errors go to stderr."""
    for path in paths:
        read = read_otlp if path.name.endswith(OTLP_SUFFIX) else read_traffic
        for entry in read(path):
            if isinstance(entry, CaseError):
                print(f"skipped: {entry}", file=sys.stderr)
                continue
            yield traffic_stem(path), entry


def run(args: argparse.Namespace) -> int:
    """Draw the sample and write it; 2 when nothing could be read or an argument is bad."""
    from pytest_ragbench.stats.traffic import stratified_sample, window_of

    if args.n < 1:
        print("ragbench traffic sample: --n must be at least 1", file=sys.stderr)
        return 2
    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"ragbench traffic sample: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    windows = [window_of(i.timestamp, args.window) for _, i in _interactions(paths)]
    if not windows:
        print("ragbench traffic sample: no readable interaction", file=sys.stderr)
        return 2
    chosen = stratified_sample(windows, args.n, args.seed)
    redact = Redactor(args.redact)
    metrics = args.metrics or list(DEFAULT_METRICS)
    lines = []
    for position, (stem, interaction) in enumerate(_interactions(paths)):
        if position not in chosen:
            continue
        case_id = f"{stem}:{interaction.number}"
        if args.layout == "labels":
            context = {"query": redact(interaction.query),
                       "contexts": [redact(r.content) for r in interaction.retrieved],
                       "answer": None if interaction.answer is None
                       else redact(interaction.answer),
                       "window": windows[position]}
            lines += [{"id": case_id, "kind": "traffic", "metric": metric, "score": None,
                       **context} for metric in metrics]
        else:
            sources = [r.id for r in interaction.retrieved if r.id]
            record: dict[str, Any] = {
                "id": f"traffic-{case_id.replace(':', '-')}", "kind": "vector",
                "question": redact(interaction.query),
                "ground_truth": redact(interaction.answer or "(review: no answer logged)"),
                "tags": ["from-traffic", windows[position]]}
            if sources:
                record["expected_sources"] = sources
            lines.append(record)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    what = "label lines" if args.layout == "labels" else "vector cases"
    print(f"wrote {len(lines)} {what} for {len(chosen)} of {len(windows)} interactions "
          f"to {out}")
    return 0
