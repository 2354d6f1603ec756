"""Read human labels (``--ragbench-judge-labels``): a person's score per case and metric.

A line is ``{"id": <case id>, "metric": <metric name>, "score": <number>}``, optionally with
``"kind"`` (an item kind: ``ragas``, ``ragcsv``, ...) and ``"system"`` (one of
``--ragbench-systems``) to narrow which items it labels, and ``"pi"``, the probability
with which the item was picked for labelling (``ragbench label --next N`` writes it; the
calibration then reweights the label by 1/pi, results/calibration.py). The score is the
person's score on the metric's own scale. Other fields (an annotator, a note) are kept out
of the way; one that looks like a misspelt known field is an error. A bad line is reported
with the file, line and field, and the other lines are still read.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import CaseError, ConfigError

REQUIRED = ("id", "metric", "score")
OPTIONAL = ("kind", "system", "pi")


@dataclass(frozen=True)
class Label:
    """One person's score of one case on one metric."""

    case_id: str
    metric: str
    score: float
    kind: str | None = None
    system: str | None = None
    pi: float | None = None  # the item's inclusion probability, when picked by active sampling
    where: str = ""  # ``file:line``, for messages


@dataclass
class LabelFile:
    """The labels read from one file, and one error per line that could not be read."""

    path: Path
    labels: list[Label] = field(default_factory=list)
    errors: list[CaseError] = field(default_factory=list)
    lines: int = 0  # non-blank lines
    shown: str = ""  # how messages name the file (relative to where pytest was started)

    def summary(self) -> dict[str, Any]:
        """JSON-safe counts and error lines."""
        return {"path": str(self.path), "shown": self.shown or str(self.path),
                "lines": self.lines, "labels": len(self.labels),
                "errors": [str(e) for e in self.errors]}


def read_labels(path: Path, shown: str | None = None) -> LabelFile:
    """Read a label file; a missing or unreadable file raises :class:`ConfigError`.

    ``shown`` is how messages name the file (default: the path as given).
    """
    name = shown or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--ragbench-judge-labels {name}: not UTF-8 text "
                          f"({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"--ragbench-judge-labels {name}: cannot read the file: "
                          f"{exc.strerror or exc}") from None
    result = LabelFile(path, shown=name)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        result.lines += 1
        try:
            result.labels.append(parse_label(line, name, number))
        except CaseError as exc:
            result.errors.append(exc)
    return result


def parse_label(line: str, file: str, number: int) -> Label:
    """One JSONL line as a :class:`Label`; a problem raises :class:`CaseError`."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CaseError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=file,
                        line=number) from None
    if not isinstance(data, dict):
        raise CaseError('expected an object {"id": ..., "metric": ..., "score": ...}',
                        file=file, line=number)
    for name in REQUIRED:
        if name not in data or data[name] is None:
            raise CaseError("required field is missing", file=file, line=number, field=name)
    for name in data:
        if name in REQUIRED or name in OPTIONAL:
            continue
        close = difflib.get_close_matches(name, [*REQUIRED, *OPTIONAL], n=1, cutoff=0.75)
        if close:
            raise CaseError(f"unknown field (did you mean '{close[0]}'?)", file=file,
                            line=number, field=name)

    def text(name: str, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
            raise CaseError(f"expected non-empty text, got {_shown(value)}", file=file,
                            line=number, field=name)
        return str(value).strip()

    score = data["score"]
    if isinstance(score, bool) or not isinstance(score, int | float) \
            or not math.isfinite(score):
        raise CaseError(f"expected a finite number, got {_shown(score)}", file=file,
                        line=number, field="score")
    pi = data.get("pi")
    if pi is not None and (isinstance(pi, bool) or not isinstance(pi, int | float)
                           or not 0.0 < pi <= 1.0):
        raise CaseError(f"expected an inclusion probability in (0, 1], got {_shown(pi)}",
                        file=file, line=number, field="pi")
    kind = data.get("kind")
    system = data.get("system")
    return Label(case_id=text("id", data["id"]), metric=text("metric", data["metric"]),
                 score=float(score), kind=None if kind is None else text("kind", kind),
                 system=None if system is None else text("system", system),
                 pi=None if pi is None else float(pi), where=f"{file}:{number}")


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    return f"{type(value).__name__} {json.dumps(value)[:40]}"
