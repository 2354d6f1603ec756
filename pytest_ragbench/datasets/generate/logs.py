"""Log questions with computed answers: ``log_ticket`` ragas cases from structured or raw logs.

A loghub-style structured CSV (``LineId``, the system's own fields, ``Content``,
``EventId``, ``EventTemplate``) beside its raw ``.log`` gives these questions:

- numeric: how many lines of a level, of a component, of an event;
- lookup: when an event first or last occurred, which event template a given line
  belongs to, which IP addresses or user names appear in an event's lines;
- comparison: which of two events occurred more often.

Answers come from the structured rows; each kept case is then checked again against the
raw lines (the line's header holds its level and component, an event's template matches
the end of each of its lines and of no other line), and a question whose answer the raw
lines do not bear out is rejected. The contexts are the raw lines the answer rests on
(questions resting on more than :data:`MAX_SUPPORT` lines are not asked), so a reader of
the contexts alone can answer. A raw ``.log`` without a structured CSV gives level counts.
"""

from __future__ import annotations

import csv
import functools
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.generate.common import Accounting, Generated, GenerateError, draft
from pytest_ragbench.datasets.quotas import Quota
from pytest_ragbench.datasets.sample import NormalizedSample, make_id, short_hash
from pytest_ragbench.datasets.sampling import stratified_sample

MAX_SUPPORT = 40  # lines of context one question may rest on
LEVELS = {"trace", "debug", "info", "notice", "warn", "warning", "error", "err", "crit",
          "critical", "alert", "emerg", "fatal", "severe"}
TIME_FIELDS = ("Month", "Date", "Day", "Time")  # loghub's timestamp columns, in line order
IP = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
USER = re.compile(r"\buser (?!unknown\b)([A-Za-z0-9_.-]+)")
# Share of each question type in a system's cases (seed 000: lookup, numeric, comparison).
TYPE_SHARES = (("numeric", 0.4), ("lookup", 0.4), ("comparison", 0.2))
STRUCTURED_SUFFIX = "_structured.csv"


@dataclass
class Line:
    """One log line: its number, raw text and the structured fields (when known)."""

    number: int
    raw: str
    timestamp: str = ""
    level: str | None = None
    component: str | None = None
    content: str = ""
    event: str | None = None  # EventId
    template: str | None = None


@dataclass
class Log:
    """One system's log: its lines, event templates and what its columns mean."""

    name: str  # the raw file's name (HDFS_2k.log)
    system: str  # HDFS
    lines: list[Line]
    templates: dict[str, str] = field(default_factory=dict)  # EventId -> template
    has_levels: bool = False
    has_components: bool = False

    def by_event(self) -> dict[str, list[Line]]:
        """Lines per EventId, in line order."""
        groups: dict[str, list[Line]] = {}
        for line in self.lines:
            if line.event:
                groups.setdefault(line.event, []).append(line)
        return groups


@dataclass(frozen=True)
class Question:
    """A question, its computed answer and the lines it rests on."""

    family: str  # count_level, first_event, ...
    question_type: str  # numeric, lookup, comparison
    question: str
    answer: str
    support: tuple[Line, ...]
    facts: dict[str, Any]  # what the answer was computed from (the raw-line check reads it)


@functools.lru_cache(maxsize=4096)
def template_pattern(template: str) -> re.Pattern[str]:
    """A loghub template as a regex searched in a raw line: ``<*>`` stands for any text.

    It matches the end of the line (the message comes last); a leading ``<*>`` is left out
    since a search starts anywhere, and one wildcard per ``<*>`` keeps matching linear.
    """
    parts = [re.escape(part.strip()) for part in re.split(r"<\*>", template)]
    while parts and not parts[0]:
        parts.pop(0)
    return re.compile(".*?".join(parts) + r"\s*$")


def read_logs(path: Path) -> list[Log]:
    """Every log of a file or folder: structured CSVs with their raw lines, else raw lines."""
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    structured = [f for f in files if f.name.endswith(STRUCTURED_SUFFIX)]
    logs = [_read_structured(f) for f in structured]
    covered = {f.name[:-len(STRUCTURED_SUFFIX)] for f in structured}
    logs += [_read_raw(f) for f in files if f.suffix == ".log" and f.name not in covered]
    if not logs:
        raise GenerateError(f"{path}: no .log file or loghub-style *{STRUCTURED_SUFFIX} found")
    return logs


def _read_structured(path: Path) -> Log:
    name = path.name[:-len(STRUCTURED_SUFFIX)]
    raw_path = path.with_name(name)
    if not raw_path.is_file():
        raise GenerateError(f"{path}: its raw lines {raw_path.name} are not beside it")
    raw = raw_path.read_text(encoding="utf-8", errors="replace").splitlines()
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = {"LineId", "Content", "EventId", "EventTemplate"} - set(header)
        if missing:
            raise GenerateError(f"{path}: line 1: missing column(s) {', '.join(sorted(missing))}")
        rows = list(reader)
    time_fields = [f for f in header if f in TIME_FIELDS]
    lines = []
    for row_number, row in enumerate(rows, start=2):
        try:
            number = int(row["LineId"])
            text = raw[number - 1]
        except (ValueError, IndexError):
            raise GenerateError(f"{path}: line {row_number}: field 'LineId': "
                                f"{row['LineId']!r} is no line of {raw_path.name}") from None
        lines.append(Line(number, text, " ".join(row[f] for f in time_fields),
                          row.get("Level"), row.get("Component"), row["Content"],
                          row["EventId"], row["EventTemplate"]))
    levels = {line.level for line in lines}
    components = {line.component for line in lines}
    templates = {line.event: line.template for line in lines if line.event and line.template}
    templates_path = path.with_name(f"{name}_templates.csv")
    if templates_path.is_file():
        with templates_path.open(encoding="utf-8", newline="") as handle:
            templates.update({r["EventId"]: r["EventTemplate"] for r in csv.DictReader(handle)})
    return Log(name, name.split("_")[0].split(".")[0], lines, templates,
               has_levels=bool(levels) and all(v and v.lower() in LEVELS for v in levels),
               # a component with ':' or '/' is a split the log parser made, not a name
               has_components=2 <= len(components) <= 50 and all(
                   c and not re.search(r"[:/]", c) for c in components))


RAW_LEVEL = re.compile(r"(?<![\w-])\[?(" + "|".join(sorted(LEVELS, key=len, reverse=True))
                       + r")\]?(?![\w-])", re.IGNORECASE)


def _read_raw(path: Path) -> Log:
    lines = []
    for number, text in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                  .splitlines(), start=1):
        match = RAW_LEVEL.search(text[:80])
        level = match.group(1) if match else None
        timestamp = text[:match.start()].strip(" -[]") if match else ""
        lines.append(Line(number, text, timestamp, level, None,
                          text[match.end():].strip(" -:") if match else text))
    has_levels = sum(line.level is not None for line in lines) >= 0.9 * len(lines) > 0
    return Log(path.name, path.stem.split("_")[0], lines, has_levels=has_levels)


def _quoted(text: str) -> str:
    return f'"{text}"'


class Questions:
    """The candidate questions of one log, drawn with ``rng``."""

    def __init__(self, log: Log, rng: random.Random) -> None:
        self.log = log
        self.rng = rng
        self.events = {e: lines for e, lines in log.by_event().items()
                       if e in self.clean_events(log)}

    @staticmethod
    def clean_events(log: Log) -> set[str]:
        """Events whose template matches the raw lines of exactly that event.

        Only these are asked about: for the others the human labels and the template
        disagree on some line, so an answer could be argued either way.
        """
        patterns = {e: template_pattern(t) for e, t in log.templates.items()}
        matched: dict[str, set[int]] = {e: set() for e in patterns}
        for line in log.lines:
            for event, pattern in patterns.items():
                if pattern.search(line.raw):
                    matched[event].add(line.number)
        labelled: dict[str, set[int]] = {}
        for line in log.lines:
            if line.event:
                labelled.setdefault(line.event, set()).add(line.number)
        return {e for e, numbers in labelled.items() if matched.get(e) == numbers}

    def all(self) -> Iterator[Question]:
        """Every family's candidates."""
        families: list[Callable[[], Iterator[Question]]] = [
            self.count_level, self.count_component, self.count_event, self.first_last,
            self.line_template, self.addresses, self.compare_events]
        for family in families:
            yield from family()

    def _where(self) -> str:
        return f"In the {self.log.system} log ({self.log.name})"

    def count_level(self) -> Iterator[Question]:
        """How many lines of each level (only the rarer levels: the support is the lines)."""
        if not self.log.has_levels:
            return
        groups: dict[str, list[Line]] = {}
        for line in self.log.lines:
            if line.level:
                groups.setdefault(line.level, []).append(line)
        for level, lines in sorted(groups.items()):
            if len(lines) <= MAX_SUPPORT:
                question = self.rng.choice([
                    f"{self._where()}, how many lines have level {level}?",
                    f"How many {level} entries does the {self.log.system} log "
                    f"({self.log.name}) contain?"])
                yield Question("count_level", "numeric", question, str(len(lines)),
                               tuple(lines), {"level": level})

    def count_component(self) -> Iterator[Question]:
        """How many lines a component wrote (of one level, where levels are known)."""
        if not self.log.has_components:
            return
        groups: dict[tuple[str, str | None], list[Line]] = {}
        for line in self.log.lines:
            if line.component:
                groups.setdefault((line.component, None), []).append(line)
                if self.log.has_levels and line.level:
                    groups.setdefault((line.component, line.level), []).append(line)
        for (component, level), lines in sorted(groups.items(), key=lambda kv: str(kv[0])):
            if len(lines) > MAX_SUPPORT:
                continue
            what = f"{level} lines" if level else "lines"
            question = self.rng.choice([
                f"{self._where()}, how many {what} did {component} write?",
                f"How many {what} come from {component} in the {self.log.system} log "
                f"({self.log.name})?"])
            yield Question("count_component", "numeric", question, str(len(lines)),
                           tuple(lines), {"component": component, "level": level})

    def count_event(self) -> Iterator[Question]:
        """How many lines of an event template."""
        for event, lines in sorted(self.events.items()):
            if len(lines) <= MAX_SUPPORT:
                template = self.log.templates[event]
                question = self.rng.choice([
                    f"{self._where()}, how many lines match the event template "
                    f"{_quoted(template)}?",
                    f"How many times does the event {_quoted(template)} occur in the "
                    f"{self.log.system} log ({self.log.name})?"])
                yield Question("count_event", "numeric", question, str(len(lines)),
                               tuple(lines), {"event": event, "template": template})

    def first_last(self) -> Iterator[Question]:
        """When an event first or last occurred (its line's timestamp)."""
        for event, lines in sorted(self.events.items()):
            if len(lines) > MAX_SUPPORT or not lines[0].timestamp:
                continue
            template = self.log.templates[event]
            which = self.rng.choice(["first", "last"])
            line = lines[0] if which == "first" else lines[-1]
            same_time = [x for x in lines if x.timestamp == line.timestamp]
            if len(same_time) > 1 and line is not same_time[0 if which == "first" else -1]:
                continue
            question = self.rng.choice([
                f"{self._where()}, when did the event {_quoted(template)} {which} occur?",
                f"At what time is the {which} line of the event {_quoted(template)} in the "
                f"{self.log.system} log ({self.log.name})?"])
            yield Question(f"{which}_event", "lookup", question, line.timestamp,
                           tuple(lines), {"event": event, "template": template,
                                          "which": which, "line": line.number})

    def line_template(self) -> Iterator[Question]:
        """Which event template a given line belongs to (a few lines, drawn)."""
        candidates = [line for line in self.log.lines if line.event in self.events]
        for line in self.rng.sample(candidates, min(12, len(candidates))):
            template = self.log.templates[line.event or ""]
            question = self.rng.choice([
                f"Which event template does this {self.log.system} log line belong to: "
                f"{_quoted(line.raw.strip())}?",
                f"{self._where()}, line {line.number} reads {_quoted(line.raw.strip())}. "
                "What is its event template?"])
            yield Question("line_template", "lookup", question, template, (line,),
                           {"event": line.event, "template": template, "line": line.number})

    def addresses(self) -> Iterator[Question]:
        """Which IP addresses or user names appear in an event's lines."""
        for event, lines in sorted(self.events.items()):
            if len(lines) > MAX_SUPPORT:
                continue
            template = self.log.templates[event]
            for what, pattern, group in (("IP addresses", IP, 0), ("user names", USER, 1)):
                found = sorted({m.group(group) for line in lines
                                for m in pattern.finditer(line.content)})
                if not 1 <= len(found) <= 8:
                    continue
                question = self.rng.choice([
                    f"{self._where()}, which {what} appear in the lines of the event "
                    f"{_quoted(template)}?",
                    f"List the {what} found in {self.log.system} log lines matching "
                    f"{_quoted(template)} ({self.log.name})."])
                yield Question("which_" + what.split()[0].lower(), "lookup", question,
                               ", ".join(found), tuple(lines),
                               {"event": event, "template": template, "values": found})

    def compare_events(self) -> Iterator[Question]:
        """Which of two events occurred more often."""
        small = sorted(e for e, lines in self.events.items() if len(lines) <= MAX_SUPPORT // 2)
        pairs = [(a, b) for i, a in enumerate(small) for b in small[i + 1:]
                 if len(self.events[a]) != len(self.events[b])]
        for a, b in self.rng.sample(pairs, min(10, len(pairs))):
            more = a if len(self.events[a]) > len(self.events[b]) else b
            ta, tb = self.log.templates[a], self.log.templates[b]
            question = self.rng.choice([
                f"{self._where()}, which event occurs more often: {_quoted(ta)} or "
                f"{_quoted(tb)}?",
                f"Does {_quoted(ta)} or {_quoted(tb)} appear more times in the "
                f"{self.log.system} log ({self.log.name})?"])
            yield Question("compare_events", "comparison", question, self.log.templates[more],
                           tuple(sorted(self.events[a] + self.events[b],
                                        key=lambda line: line.number)),
                           {"events": [a, b], "templates": [ta, tb],
                            "counts": [len(self.events[a]), len(self.events[b])]})


def check_on_raw_lines(log: Log, question: Question) -> str | None:
    """Recompute the answer from the raw lines; the reason it differs, or None."""
    facts = question.facts
    if question.family == "count_level":
        found = [x for x in log.lines if x.level == facts["level"]
                 and re.search(rf"(?<![\w-])\[?{re.escape(facts['level'])}\]?(?![\w-])",
                               x.raw[:len(x.raw) - len(x.content)] or x.raw)]
        return None if str(len(found)) == question.answer else "level count differs"
    if question.family == "count_component":
        found = [x for x in log.lines if facts["component"] in x.raw[:len(x.raw) - len(
            x.content)] and (facts["level"] is None or x.level == facts["level"])]
        return None if str(len(found)) == question.answer else "component count differs"
    if "template" in facts or "templates" in facts:
        templates = facts.get("templates") or [facts["template"]]
        counts = [sum(1 for x in log.lines if template_pattern(t).search(x.raw))
                  for t in templates]
        if question.family == "count_event" and str(counts[0]) != question.answer:
            return "event count differs"
        if question.family == "compare_events" and counts != facts["counts"]:
            return "event counts differ"
        if question.family == "line_template":
            line = log.lines[facts["line"] - 1]
            matching = [t for t in log.templates.values() if template_pattern(t).search(
                line.raw)]
            if matching != [question.answer]:
                return "the line matches another template too" if len(matching) > 1 \
                    else "the line does not match its template"
        if question.family.endswith("_event") and "which" in facts:
            line = log.lines[facts["line"] - 1]
            if not line.raw.startswith(question.answer.split(" ")[0]) and \
                    question.answer not in line.raw:
                return "the timestamp is not in the line"
    return None


def _difficulty(support: int) -> str:
    """One line: easy; a handful: medium; many lines to read and count: hard."""
    return "easy" if support <= 1 else "medium" if support <= 10 else "hard"


def _sample(log: Log, question: Question, seed: int) -> NormalizedSample:
    facts = {k: v for k, v in question.facts.items() if v is not None}
    return NormalizedSample(
        id=make_id("log", log.system, question.family, short_hash(question.question, 8)),
        question=question.question, ground_truth=question.answer,
        contexts=tuple(line.raw for line in question.support), doc_type="log_ticket",
        question_type=question.question_type, difficulty=_difficulty(len(question.support)),
        source_dataset=log.name,
        metadata={"system": log.system, "log_file": log.name, "question": question.family,
                  "lines": [line.number for line in question.support], **facts})


def generate_logs(path: Path, n: int, seed: int) -> Generated:
    """``n`` log_ticket ragas cases, spread evenly over the logs found at ``path``."""
    accounting = Accounting()
    logs = read_logs(path)
    cases: list[dict[str, Any]] = []
    for index, log in enumerate(logs):
        wanted = n // len(logs) + (index < n % len(logs))
        pool: dict[str, NormalizedSample] = {}
        for question in Questions(log, random.Random(f"{seed}:{log.name}")).all():
            kind = f"log/{question.family}"
            problem = check_on_raw_lines(log, question)
            if problem is not None:
                accounting.reject(kind, problem)
                continue
            sample = _sample(log, question, seed)
            if sample.id in pool:
                accounting.reject(kind, "duplicate question")
                continue
            pool[sample.id] = sample
        quotas = _quotas(wanted, Counter(s.question_type for s in pool.values()))
        result = stratified_sample(list(pool.values()), quotas, seed, "")
        for sample in result.samples:
            family = sample.metadata["question"]
            accounting.keep(f"log/{family}")
            accounting.exact += 1
            accounting.verified += 1  # checked on the raw lines before it entered the pool
            cases.append(draft(sample.to_dict(), {
                "generator": "logs", "source": log.name, "lines": sample.metadata["lines"],
                "seed": seed, "model": None}))
        for outcome in result.unmet:
            accounting.reject(f"log/{log.system}", f"quota {outcome.quota.label} unmet "
                              f"({outcome.selected}/{outcome.requested})")
    return Generated(cases, accounting.finish())


def _quotas(wanted: int, available: Counter[str]) -> list[Quota]:
    """Counts per question type after :data:`TYPE_SHARES`; a short type's rest goes to others."""
    counts = {t: min(available[t], round(wanted * share)) for t, share in TYPE_SHARES}
    short = wanted - sum(counts.values())
    for kind, _ in TYPE_SHARES:  # fill what a type could not give from the others, in order
        extra = min(short, available[kind] - counts[kind])
        if extra > 0:
            counts[kind] += extra
            short -= extra
    if short > 0:  # not enough questions at all: ask for them anyway, the outcome says so
        counts[TYPE_SHARES[0][0]] += short
    return [Quota("log_ticket", kind, None, count, 0.0) for kind, count in counts.items()
            if count]
