"""``ragbench review FILE``: one offline HTML page to accept, reject or edit generated cases.

The case file is read with the project's own loader and case builder, so a file the plugin
would not run is refused here too (every problem named by file, line and field). The page
holds the file's records as a JSON data block (never as HTML: the script shows case text
with ``textContent``), its script and style inline and allowed by hash in a
Content-Security-Policy that forbids every other load, so it works from ``file://`` with no
server and no network. "Save" hands the reviewed file to the browser as a download in the
input's own format (YAML as JSON flow style, which YAML loaders read; JSON lines; JSON).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import math
import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_ragbench.cases.raw import RawRecord
from pytest_ragbench.errors import CaseError, RagbenchError

FORMATS = {".yaml": "yaml", ".yml": "yaml", ".jsonl": "jsonl", ".json": "json"}
# Fields a person may edit, besides the question: the expected answer in each kind's terms.
QUESTION_FIELDS = ("question", "query")
ANSWER_FIELDS = ("ground_truth", "ground_truth_answer", "expected_sql", "ground_truth_data",
                 "expected_facts", "expected_sources")


class ReviewError(RagbenchError):
    """A case file that cannot be reviewed (its problems listed, one per line)."""


@dataclass
class ReviewFile:
    """What the page needs of a case file: its records as written, defaults and header."""

    path: Path
    format: str
    records: list[dict[str, Any]]
    defaults: dict[str, Any] = field(default_factory=dict)
    header: str = ""  # a YAML file's leading comment lines, kept in the saved file

    def document(self) -> dict[str, Any]:
        """The JSON the page embeds."""
        return {"file": self.path.name, "format": self.format, "header": self.header,
                "defaults": self.defaults, "cases": self.records,
                "question_fields": list(QUESTION_FIELDS),
                "answer_fields": list(ANSWER_FIELDS)}


def read_for_review(path: Path) -> ReviewFile:
    """The records of ``path``, after the plugin's loader and builder accepted every one."""
    # lazy: the case loader and the kinds are needed only once a file is reviewed
    from pytest_ragbench.cases.build import build_cases
    from pytest_ragbench.cases.loaders import read_case_file

    file_format = FORMATS.get(path.suffix.lower())
    if file_format is None:
        raise ReviewError(f"{path}: a case file to review ends in one of "
                          f"{', '.join(FORMATS)}")
    try:
        records = read_case_file(path)
    except CaseError as exc:
        raise ReviewError(str(exc)) from None
    problems = build_cases(records).errors
    if problems:
        listed = "\n".join(f"  {error}" for error in sorted(
            problems, key=lambda e: e.line or 0))
        raise ReviewError(f"{path}: {len(problems)} case(s) cannot be read; fix them "
                          f"first:\n{listed}")
    unsafe = [problem for record in records.records
              if (problem := _json_problem(path, record)) is not None]
    if (why := _unsafe(records.defaults)) is not None:
        unsafe.insert(0, CaseError(why, file=path, field="defaults"))
    if unsafe:
        raise ReviewError(f"{path}: the page carries cases as JSON, and these values would "
                          "change on the way:\n" + "\n".join(f"  {e}" for e in unsafe))
    header = ""
    if file_format == "yaml":
        text = path.read_text(encoding="utf-8-sig", errors="replace")
        lines = []
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            lines.append(line)
        header = "\n".join(lines)
    return ReviewFile(path, file_format, [r.data for r in records.records],
                      records.defaults, header)


# The page's script holds numbers as doubles: a bigger integer would come back changed.
LARGEST_EXACT_INT = 2 ** 53
# JavaScript objects list such keys first, in numeric order, whatever order they were given.
ARRAY_INDEX = re.compile(r"0|[1-9][0-9]{0,8}")


def _unsafe(value: Any) -> str | None:
    """Why ``value`` would not come back unchanged through JSON and JavaScript, or None."""
    if value is None or isinstance(value, str | bool):
        return None
    if isinstance(value, int):
        return None if abs(value) <= LARGEST_EXACT_INT else f"integer {value} beyond 2**53"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} (not a JSON number)"
    if isinstance(value, list):
        return next((why for item in value if (why := _unsafe(item)) is not None), None)
    if isinstance(value, dict):
        indices = [key for key in value if isinstance(key, str) and ARRAY_INDEX.fullmatch(key)]
        if list(value)[:len(indices)] != sorted(indices, key=int):
            return (f"keys {', '.join(indices)} would be moved first (a browser lists keys "
                    "that look like array indices first): rename them, e.g. y2023")
        for key, item in value.items():
            if not isinstance(key, str):
                return f"key {key!r} is not text"
            why = _unsafe(item)
            if why is not None:
                return why
        return None
    return f"a {type(value).__name__} value (write it as text)"


def _json_problem(path: Path, record: RawRecord) -> CaseError | None:
    """The first field of ``record`` that JSON would change (a date, NaN, a huge integer)."""
    for name, value in record.data.items():
        why = _unsafe(value)
        if why is not None:
            return CaseError(why, file=path, line=record.line_of(name), field=name)
    return None


def script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` can end it."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _asset(name: str) -> str:
    return resources.files("pytest_ragbench.render").joinpath("assets", name).read_text(
        encoding="utf-8")


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def review_page(review: ReviewFile) -> str:
    """The self-contained review page of ``review``."""
    script, style = _asset("review.js"), _asset("review.css")
    # Only this script and this style may run; nothing may be fetched, framed or posted.
    policy = (f"default-src 'none'; script-src {_digest(script)}; style-src {_digest(style)}; "
              "base-uri 'none'; form-action 'none'")
    title = f"Review {review.path.name}"
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title><style>{style}</style></head><body>"
            '<header id="bar"></header><main id="cases"></main>'
            '<script type="application/json" id="ragbench-review">'
            f"{script_json(review.document())}</script>"
            f"<script>{script}</script></body></html>\n")


def default_page_path(path: Path) -> Path:
    """``<FILE>.review.html`` beside the case file."""
    return path.with_name(path.name + ".review.html")


def run_review(args: argparse.Namespace) -> int:
    """``ragbench review``: write the page; 2 when the file cannot be read."""
    path = Path(args.file)
    out = Path(args.out) if args.out else default_page_path(path)
    try:
        review = read_for_review(path)
        out.write_text(review_page(review), encoding="utf-8")
    except (ReviewError, OSError) as exc:
        print(f"ragbench review: {exc}", file=sys.stderr)
        return 2
    drafts = sum(1 for r in review.records
                 if r.get("review", review.defaults.get("review")) == "draft")
    print(f"wrote {out} ({len(review.records)} cases, {drafts} drafts): open it in a "
          "browser, review, then Save and put the saved file in place of "
          f"{path.name}")
    return 0


def register(subparsers: Any) -> None:
    """Add ``review`` to an ``add_subparsers()`` object."""
    review = subparsers.add_parser(
        "review", help="write an offline HTML page to accept, reject or edit generated cases",
        description="Write one self-contained HTML page (no server, no network) that shows "
                    "every case of FILE with its provenance and review state; accept (a), "
                    "reject (r) or edit (e) each, move with j/k, and Save the reviewed file "
                    "in FILE's format (a browser download).")
    review.add_argument("file", metavar="FILE", help="the case file (.yaml, .yml, .jsonl, "
                                                     ".json)")
    review.add_argument("--out", metavar="PAGE.html",
                        help="the page to write (default: FILE.review.html beside FILE)")
    review.set_defaults(func=run_review)
