"""Turn raw records into typed cases: kind, aliases, field types, ids.

Every problem becomes a :class:`CaseError` naming the file, the line and the field.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.cases.model import Case, CustomCase, Memory, Table, Turn
from pytest_ragbench.cases.raw import FileRecords, RawRecord
from pytest_ragbench.errors import CaseError, did_you_mean, short_repr
from pytest_ragbench.kinds import COMMON_FIELDS, CaseKind, Field, KindRegistry, builtin_registry
from pytest_ragbench.kinds.guess import guess_kind
from pytest_ragbench.metrics.answer import normalize_fact

ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:/@+-]+$")
ALIASES = {"gold_sql": "expected_sql"}
TABLE_ALIASES = ("expected_columns", "expected_rows")


@dataclass(frozen=True)
class InvalidRecord:
    """A record that could not be built, with its kind and id where they could be read."""

    error: CaseError
    kind: str | None = None
    case_id: str | None = None


@dataclass
class BuildResult:
    """Cases built from one file, plus one entry per record that could not be built."""

    path: Path
    cases: list[Case] = field(default_factory=list)
    invalid: list[InvalidRecord] = field(default_factory=list)

    @property
    def errors(self) -> list[CaseError]:
        """The errors of the invalid records."""
        return [entry.error for entry in self.invalid]


# -- field converters: each takes the raw value and returns the typed one or raises ValueError --
# The public ones (no underscore) are for a plugin's own case kinds too.

def _text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected text, got {_type(value)}")
    text = str(value)
    if not text.strip():
        raise ValueError("must not be empty")
    return text


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _int(minimum: int) -> Callable[[Any], int]:
    def convert(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {_type(value)}")
        if value < minimum:
            raise ValueError(f"must be at least {minimum}, got {value}")
        return value
    return convert


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {_type(value)}")
    if not math.isfinite(value):  # a NaN bound compares false with everything
        raise ValueError(f"expected a finite number, got {value}")
    return float(value)


def _optional_number(value: Any) -> float | None:
    return None if value is None else _number(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_type(value)}")
    return value


def _str_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of strings, got {_type(value)}")
    return tuple(value)


def _facts(value: Any) -> tuple[str, ...]:
    """``expected_facts``: strings (or numbers) a correct answer states; one alone is a list."""
    if value is None:
        return ()
    values = value if isinstance(value, list | tuple) else [value]
    facts = []
    for index, fact in enumerate(values, start=1):
        if isinstance(fact, bool) or not isinstance(fact, str | int | float):
            raise ValueError(f"entry {index}: expected text, got {_type(fact)}")
        if not normalize_fact(str(fact)):
            raise ValueError(f"entry {index} ({short_repr(fact)}) has no letter or digit "
                             "to look for in the answer")
        facts.append(str(fact))
    return tuple(facts)


def _mapping(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping, got {_type(value)}")
    return dict(value)


def _optional_mapping(value: Any) -> dict[str, Any] | None:
    return None if value is None else _mapping(value)


def _thresholds(value: Any) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of metric -> number, got {_type(value)}")
    out = {}
    for name, number in value.items():
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise FieldError(f"threshold for {short_repr(name)} must be a number, "
                             f"got {_type(number)}", f"thresholds.{name}")
        if not math.isfinite(number):  # a NaN bound would let every value pass
            raise FieldError(f"threshold for {short_repr(name)} must be a finite number, "
                             f"got {number}", f"thresholds.{name}")
        out[str(name)] = float(number)
    return out


def _human(value: Any) -> dict[str, float]:
    """``human``: a person's score per metric, ``{metric: number}`` (judge calibration)."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of metric -> a person's score, got {_type(value)}")
    out = {}
    for name, number in value.items():
        if isinstance(number, bool) or not isinstance(number, int | float) \
                or not math.isfinite(number):
            raise ValueError(f"the score for {name!r} must be a finite number, "
                             f"got {_type(number)}")
        out[str(name)] = float(number)
    return out


def _enum_name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ValueError(f"expected text, got {_type(value)}")
    return str(value)


REVIEW_STATES = ("draft", "accepted", "rejected")


def _review(value: Any) -> str | None:
    """``review``: a generated case's state (drafts run only with ``--ragbench-drafts``)."""
    if value is None:
        return None
    if value not in REVIEW_STATES:
        raise ValueError(f"expected one of {', '.join(REVIEW_STATES)}, got {short_repr(value)}")
    return str(value)


def _records(value: Any) -> Any:
    """``ground_truth_data``: one mapping, or a list of mappings with the same keys."""
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        keys = [set(v) for v in value]
        for index, row_keys in enumerate(keys[1:], start=2):
            if row_keys != keys[0]:
                raise ValueError(f"row {index} has keys {sorted(row_keys)}, "
                                 f"row 1 has {sorted(keys[0])}")
        return value
    raise ValueError(f"expected a mapping or a list of mappings, got {_type(value)}")


def _similarity_range(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    if (not isinstance(value, list | tuple) or len(value) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)):
        raise ValueError("expected [low, high]")
    low, high = float(value[0]), float(value[1])
    if high > 1.0:  # written as percentages ("75-85%")
        low, high = low / 100.0, high / 100.0
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"expected 0 <= low <= high <= 1 (or percentages), got {list(value)}")
    return low, high


def _expect(value: Any) -> str:
    if value not in ("answer", "decline"):
        raise ValueError(f"expected 'answer' or 'decline', got {short_repr(value)}")
    return str(value)


def _history(value: Any) -> tuple[Turn, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"expected a list of turns, got {_type(value)}")
    turns = []
    for index, turn in enumerate(value):
        if isinstance(turn, str):  # plain strings alternate user / assistant
            turns.append(Turn(role="user" if index % 2 == 0 else "assistant", content=turn))
        elif isinstance(turn, dict) and isinstance(turn.get("content"), str):
            turns.append(Turn(role=str(turn.get("role", "user")), content=turn["content"]))
        else:
            raise ValueError(f"turn {index + 1} must be text or {{role, content}}")
    return tuple(turns)


def _memories(value: Any) -> tuple[Memory, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError("expected a non-empty list of {role, content, metadata}")
    memories = []
    for index, item in enumerate(value):
        if isinstance(item, list | tuple) and len(item) in (2, 3):  # (role, content, metadata)
            item = dict(zip(("role", "content", "metadata"), item, strict=False))
        if not isinstance(item, dict) or not isinstance(item.get("content"), str):
            raise ValueError(f"memory {index} must be {{role, content, metadata}}")
        metadata = item.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise ValueError(f"memory {index}: metadata must be a mapping")
        memories.append(Memory(role=str(item.get("role", "user")), content=item["content"],
                               metadata=dict(metadata)))
    return tuple(memories)


def _indices(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list | tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"expected a list of integer indices into setup, got {_type(value)}")
    return tuple(value)


GRADES = (0, 1, 2)  # seed 004's manual annotation: 2 contains the answer, 1 related, 0 not


def _grades(value: Any, what: str) -> dict[Any, int]:
    """A ``relevance`` mapping's grades, each 0, 1 or 2; the keys are checked by the caller."""
    if not isinstance(value, dict) or not value:
        raise ValueError(f"expected a mapping of {what} to a grade (2 contains the answer, "
                         f"1 related, 0 irrelevant), got {_type(value)}")
    for key, grade in value.items():
        if isinstance(grade, bool) or grade not in GRADES:
            raise FieldError(f"{what} {key!r}: grade {short_repr(grade, 40)} is not 0, 1 or 2",
                             f"relevance.{key}")
    return dict(value)


def _source_grades(value: Any) -> dict[str, int] | None:
    """Vector cases' ``relevance``: ``{source: grade}``."""
    if value is None:
        return None
    grades = _grades(value, "source")
    for key in grades:
        if not isinstance(key, str) or not key.strip():
            raise FieldError(f"source {key!r} must be a non-empty name (a file name or "
                             "context id)", f"relevance.{key}")
    return grades


def _index_grades(value: Any) -> dict[int, int] | None:
    """Memory cases' ``relevance``: ``{setup index: grade}`` (an index may be written as text)."""
    if value is None:
        return None
    grades: dict[int, int] = {}
    for key, grade in _grades(value, "setup index").items():
        text = str(key).strip()
        if isinstance(key, bool) or not text.isdigit():
            raise FieldError(f"{key!r} is not an index into setup", f"relevance.{key}")
        grades[int(text)] = grade
    return grades


def _contexts(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of strings")
    return tuple(value)


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return f"{type(value).__name__} {short_repr(value, 40)}"


def text(value: Any) -> str:
    """Non-empty text (a number is read as its text)."""
    return _text(value)


def optional_text(value: Any) -> str | None:
    """Text, or None."""
    return _optional_text(value)


def number(value: Any) -> float:
    """A number."""
    return _number(value)


def text_list(value: Any) -> tuple[str, ...]:
    """A list of strings (one string is a list of one)."""
    return _str_list(value)


def mapping(value: Any) -> dict[str, Any]:
    """A mapping (None is an empty one)."""
    return _mapping(value)


def _required(convert: Callable[[Any], Any]) -> Field:
    return Field(required=True, convert=convert)


def _optional(convert: Callable[[Any], Any]) -> Field:
    return Field(required=False, convert=convert)


SQL_FIELDS: dict[str, Field] = {
    "question": _required(_text), "expected_sql": _required(_text),
    "ground_truth_data": _required(_records),
    "ground_truth_answer": _optional(_optional_text), "float_places": _optional(_int(0)),
    "order_matters": _optional(_bool), "db": _optional(_optional_text),
}
HYBRID_FIELDS: dict[str, Field] = {
    "question": _required(_text), "ground_truth_answer": _required(_text),
    "expected_sql": _optional(_optional_text),
    "ground_truth_data": _optional(lambda v: None if v is None else _records(v)),
    "expected_sources": _optional(_str_list), "expected_facts": _optional(_facts),
    "float_places": _optional(_int(0)), "order_matters": _optional(_bool),
    "db": _optional(_optional_text),
}
VECTOR_FIELDS: dict[str, Field] = {
    "question": _required(_text), "ground_truth": _required(_text),
    "expected_sources": _optional(_str_list),
    "expected_similarity": _optional(_similarity_range),
    "expect": _optional(_expect), "history": _optional(_history),
    "expected_facts": _optional(_facts), "relevance": _optional(_source_grades),
}
MEMORY_FIELDS: dict[str, Field] = {
    "setup": _required(_memories), "query": _required(_text),
    "expected": _required(_indices), "top_k": _optional(_int(1)),
    "filter_metadata": _optional(_optional_mapping), "min_score": _optional(_optional_number),
    "threshold": _optional(_optional_number), "recency_weight": _optional(_optional_number),
    "relevance": _optional(_index_grades),
}
RAGAS_FIELDS: dict[str, Field] = {
    "question": _required(_text), "ground_truth": _required(_text),
    "contexts": _optional(_contexts), "answer": _optional(_optional_text),
    "doc_type": _optional(_enum_name), "question_type": _optional(_enum_name),
    "difficulty": _optional(_enum_name), "source_dataset": _optional(_enum_name),
    "metadata": _optional(_mapping), "expected_facts": _optional(_facts),
}
COMMON: dict[str, Field] = {
    "category": _optional(_enum_name), "tags": _optional(_str_list),
    "thresholds": _optional(_thresholds), "cluster": _optional(_enum_name),
    "human": _optional(_human), "provenance": _optional(_mapping),
    "review": _optional(_review),
}


class FieldError(ValueError):
    """A rule across fields is broken; ``field`` names the field to point at."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def table_rule(values: dict[str, Any]) -> None:
    """Sql and hybrid cases: ``ground_truth_data`` as the table the SQL result is compared with."""
    if values.get("ground_truth_data") is not None:
        values["expected"] = Table.from_records(values["ground_truth_data"])


def vector_rule(values: dict[str, Any]) -> None:
    """Vector cases: a case that expects a decline has no facts for its answer to state."""
    if values.get("expect") == "decline" and values.get("expected_facts"):
        raise FieldError("a case with 'expect: decline' expects a refusal, which states no "
                         "facts: give expected_facts only to cases that expect an answer",
                         "expected_facts")


def memory_rule(values: dict[str, Any]) -> None:
    """Memory cases: every expected index points into ``setup``."""
    size = len(values["setup"])
    for index in values["expected"]:
        if not 0 <= index < size:
            raise FieldError(f"index {index} is out of range: setup has {size} memories "
                             f"(indices 0..{size - 1})", "expected")
    for index in values.get("relevance") or {}:
        if not 0 <= index < size:
            raise FieldError(f"setup index {index} is out of range: setup has {size} "
                             f"memories (indices 0..{size - 1})", f"relevance.{index}")


def build_cases(records: FileRecords, kinds: KindRegistry | None = None) -> BuildResult:
    """Build every record of a file; bad records become errors, the rest go on.

    ``kinds``: the session's kinds (:func:`pytest_ragbench.kinds.registry`); the built-in
    ones by default.
    """
    kinds = kinds or builtin_registry()
    result = BuildResult(records.path, invalid=[InvalidRecord(e) for e in records.errors])
    for record, error in records.rejected:
        result.invalid.append(InvalidRecord(
            error.located(file=records.path, line=record.line),
            _readable_kind(record, records.defaults, kinds), _readable_id(record.data)))
    for record in records.records:
        try:
            result.cases.append(build_case(record, records.path, records.defaults, kinds))
        except CaseError as exc:
            result.invalid.append(InvalidRecord(
                exc.located(file=records.path, line=record.line),
                _readable_kind(record, records.defaults, kinds), _readable_id(record.data)))
    return result


def _readable_kind(record: RawRecord, defaults: dict[str, Any],
                   kinds: KindRegistry) -> str | None:
    data = {**defaults, **record.data}
    data = {ALIASES.get(k, k): v for k, v in data.items()}
    try:
        return _kind_of(data, record, Path(), kinds)
    except CaseError:
        return None


def _readable_id(data: dict[str, Any]) -> str | None:
    raw = data.get("id")
    return str(raw) if isinstance(raw, str | int) and ID_PATTERN.fullmatch(str(raw)) else None


def build_case(record: RawRecord, path: Path, defaults: dict[str, Any] | None = None,
               kinds: KindRegistry | None = None) -> Case:
    """Build one typed case from a raw record (file-level defaults fill missing fields)."""
    kinds = kinds or builtin_registry()
    _check_aliases_given_once(record, path)
    data = {**(defaults or {}), **record.data}
    data = {ALIASES.get(k, k): v for k, v in data.items()}
    _apply_table_alias(data, record, path)
    kind = _kind_of(data, record, path, kinds)
    case_kind = kinds.case_kinds[kind]
    own = case_kind.schema()
    schema = {**own, **COMMON}
    values: dict[str, Any] = {}
    for name, spec in schema.items():
        if name not in data or (data[name] is None and spec.required):
            if spec.required:
                raise CaseError("required field is missing", file=path,
                                line=record.line, field=name)
            continue
        try:
            values[name] = data[name] if spec.convert is None else spec.convert(data[name])
        except ValueError as exc:
            where = exc.field if isinstance(exc, FieldError) and exc.field else name
            raise CaseError(str(exc), file=path, line=record.line_of(name), field=where) from None
    extra = _extra_fields(data, schema, record, path)
    _check_thresholds(kind, values.get("thresholds"), kinds, record, path)
    _check_rules(case_kind, values, record, path)
    if "__table__" in data:
        values["expected"] = data["__table__"]
    case_id, generated = _case_id(data, values, record, path)
    cls = case_kind.make_class()
    common: dict[str, Any] = {"id": case_id, "kind": kind, "file": str(path),
                              "line": record.line, "extra": extra, "id_generated": generated}
    if issubclass(cls, CustomCase):
        mine = {name: values.pop(name, None) for name in own}
        values.update(fields=mine, breakdown=case_kind.breakdown)
    case: Case = cls(**common, **values)
    return case


def _check_thresholds(kind: str, thresholds: dict[str, float] | None, kinds: KindRegistry,
                      record: RawRecord, path: Path) -> None:
    """A case's threshold on a metric none of its items records is a typo: an error."""
    for name in thresholds or {}:
        problem = kinds.unknown_case_threshold(kind, name)
        if problem is not None:
            raise CaseError(problem, file=path, line=record.line_of("thresholds"),
                            field=f"thresholds.{name}")


def _check_rules(case_kind: CaseKind, values: dict[str, Any], record: RawRecord,
                 path: Path) -> None:
    """The kind's rule across fields (tables, memory indices)."""
    rule = case_kind.rules()
    if rule is None:
        return
    try:
        rule(values)
    except ValueError as exc:
        name = getattr(exc, "field", None)
        raise CaseError(str(exc), file=path, line=record.line_of(name) if name else record.line,
                        field=name) from None


def _check_aliases_given_once(record: RawRecord, path: Path) -> None:
    """Refuse ``gold_sql`` and ``expected_sql`` in one case: one field given twice."""
    for alias, name in ALIASES.items():
        if alias in record.data and name in record.data:
            first, second = sorted((record.line_of(alias), record.line_of(name)))
            raise CaseError(f"given twice, as '{name}' and as its alias '{alias}' (lines "
                            f"{first} and {second}): keep one", file=path, line=second,
                            field=name)


def _apply_table_alias(data: dict[str, Any], record: RawRecord, path: Path) -> None:
    """``expected_columns`` + ``expected_rows`` = ``ground_truth_data`` (rows zipped)."""
    present = [k for k in TABLE_ALIASES if k in data]
    if not present:
        return
    if len(present) == 1:
        missing = next(k for k in TABLE_ALIASES if k not in data)
        raise CaseError(f"'{present[0]}' needs '{missing}' as well", file=path,
                        line=record.line_of(present[0]), field=missing)
    columns, rows = data.pop("expected_columns"), data.pop("expected_rows")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise CaseError("expected a list of column names", file=path,
                        line=record.line_of("expected_columns"), field="expected_columns")
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise CaseError("expected a list of rows (lists)", file=path,
                        line=record.line_of("expected_rows"), field="expected_rows")
    for index, row in enumerate(rows, start=1):
        if len(row) != len(columns):
            raise CaseError(f"row {index} has {len(row)} values for {len(columns)} columns",
                            file=path, line=record.line_of("expected_rows"), field="expected_rows")
    if "ground_truth_data" in data:
        raise CaseError("give either ground_truth_data or expected_columns + expected_rows",
                        file=path, line=record.line_of("ground_truth_data"),
                        field="ground_truth_data")
    data["ground_truth_data"] = [dict(zip(columns, row, strict=True)) for row in rows]
    # Keep the exact table too: duplicate column names would be lost in the mappings.
    data["__table__"] = Table(tuple(columns), tuple(tuple(r) for r in rows))


def _kind_of(data: dict[str, Any], record: RawRecord, path: Path, kinds: KindRegistry) -> str:
    known = kinds.file_kinds()
    given = data.get("kind")
    if given is not None:
        if not isinstance(given, str) or given not in known:
            hint = did_you_mean(given, known, "kinds") if isinstance(given, str) \
                else f" (known: {', '.join(known)})"
            raise CaseError(f"unknown kind {short_repr(given)}{hint}",
                            file=path, line=record.line_of("kind"), field="kind")
        return given
    for name in known:  # a kind that says which fields identify it
        needed = kinds.case_kinds[name].identify_by
        if needed and all(f in data for f in needed):
            return name
    guessed = guess_kind(data, known, record.kind_hint)
    if guessed is not None:
        return guessed
    raise CaseError(f"cannot tell the kind of this case; add 'kind:' ({', '.join(known)})",
                    file=path, line=record.line, field="kind")


def _extra_fields(data: dict[str, Any], schema: dict[str, Field], record: RawRecord,
                  path: Path) -> dict[str, Any]:
    """Unknown fields are kept as metadata, unless they look like a typo of a known one."""
    known = set(schema) | set(COMMON_FIELDS)
    extra = {}
    for name, value in data.items():
        if name in known or name == "__table__":
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
        if close:
            raise CaseError(f"unknown field (did you mean '{close[0]}'?)", file=path,
                            line=record.line_of(name), field=name)
        extra[name] = value
    return extra


def _case_id(data: dict[str, Any], values: dict[str, Any], record: RawRecord,
             path: Path) -> tuple[str, bool]:
    raw = data.get("id")
    if raw is not None:
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise CaseError(f"expected text, got {_type(raw)}", file=path,
                            line=record.line_of("id"), field="id")
        text = str(raw)
        if not ID_PATTERN.fullmatch(text):
            raise CaseError("may contain only letters, digits and _ . : / @ + -",
                            file=path, line=record.line_of("id"), field="id")
        return text, False
    return generated_id(values.get("question") or values.get("query") or "", data), True


def generated_id(label: str, data: dict[str, Any]) -> str:
    """A readable id stable for the same content: a slug of the question plus a short hash."""
    words = re.findall(r"[a-z0-9]+", label.lower())
    slug = "_".join(words)[:40].rstrip("_") or "case"
    content = json.dumps({k: v for k, v in data.items() if k != "__table__"},
                         sort_keys=True, default=str, ensure_ascii=True)
    return f"{slug}_{hashlib.sha1(content.encode()).hexdigest()[:6]}"


def duplicate_id(case: Case, seen: dict[str, Case], path: Path | str) -> CaseError | None:
    """Note ``case`` in ``seen``; an error naming both lines when its id was seen already."""
    first = seen.setdefault(case.id, case)
    if first is case:
        return None
    return CaseError(f"duplicate id {case.id!r}: first defined on line {first.line}, "
                     f"again on line {case.line}", file=path, line=case.line, field="id")


def duplicate_id_error(cases: list[Case], path: Path) -> CaseError | None:
    """Return an error naming both lines when two cases of one file share an id."""
    seen: dict[str, Case] = {}
    for case in cases:
        error = duplicate_id(case, seen, path)
        if error is not None:
            return error
    return None
