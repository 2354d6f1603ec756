"""``ragbench label --next N``: the items whose human labels shrink the interval most.

Reads the last run's items (``--report=DIR``, default ``.ragbench``) and, for every kind and
judged metric (or ``--metric``), picks about N items by active sampling: each item with a
probability that grows with the judge's uncertainty about it (the spread of its repeated
samples, else sqrt(f(1 - f)) of its score), half the budget spread evenly. Writes
the picks as ``--ragbench-judge-labels`` lines to fill in, each with its inclusion
probability ``pi`` (the calibration reweights the label by 1/pi, so the estimate of the
human mean stays unbiased), and an offline labelling page beside them that saves the
filled-in labels in the same format.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.labelling import page
from pytest_ragbench.labelling.pick import cells_for, plan_cell, read_items

DEFAULT_REPORT = ".ragbench"
DEFAULT_OUT = "labels-next.jsonl"


def register(commands: Any) -> None:
    """Add ``ragbench label`` to the ``ragbench`` command."""
    label = commands.add_parser(
        "label", help="pick the items to label next, and a page to label them",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    label.add_argument("--next", dest="n", type=int, required=True, metavar="N",
                       help="how many labels to ask for, per kind and metric (expected count)")
    label.add_argument("--report", default=DEFAULT_REPORT, metavar="DIR",
                       help=f"the run's report folder (default {DEFAULT_REPORT})")
    label.add_argument("--metric", help="the metric to label (default: every judged one)")
    label.add_argument("--kind", help="only items of this kind")
    label.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    label.add_argument("--out", metavar="FILE",
                       help=f"the label lines to fill in (default DIR/{DEFAULT_OUT}); the "
                            "page is written beside it, with the suffix .html")
    label.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Pick, write the label lines and the page; 2 on a bad argument or a missing run."""
    if args.n < 1:
        print("ragbench label: --next must be at least 1", file=sys.stderr)
        return 2
    report = Path(args.report)
    try:
        records = read_items(report)
        cells = cells_for(records, args.metric, args.kind, str(report / "items.jsonl"))
    except ConfigError as exc:
        print(f"ragbench label: {exc}", file=sys.stderr)
        return 2
    plans = [plan_cell(records, kind, metric, args.n, args.seed) for kind, metric in cells]
    picks = [p for plan in plans for p in plan.chosen]
    out = Path(args.out) if args.out else report / DEFAULT_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(p.label_line(), ensure_ascii=False) + "\n"
                           for p in picks), encoding="utf-8")
    html = out.with_suffix(".html")
    html.write_text(page.render(picks), encoding="utf-8")
    for plan in plans:
        active, uniform = plan.half_widths()
        print(f"{plan.kind}.{plan.metric}: {len(plan.chosen)} of {len(plan.items)} items "
              f"picked (expected {plan.budget:g}); predicted 95% half-width {active:.3g} "
              f"(uniform picks: {uniform:.3g})")
    print(f"wrote {len(picks)} label lines to {out} (fill in each score, keep pi) and the "
          f"labelling page {html}")
    return 0
