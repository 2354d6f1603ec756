"""Read case files (YAML, JSON, JSONL, ``*_test_cases.py``) into raw records with line numbers.

Nothing here executes code from a case file: YAML goes through PyYAML's safe loader
(``cases/bounded_yaml.py``: libyaml when present, bounded nesting and alias expansion),
Python modules are parsed with :mod:`ast` and only literals are accepted.

Problems that belong to one line fail only the case holding that line, and the file's
other cases go on: a key given twice (YAML, JSON, Python dicts) names both lines, and a
byte that is not UTF-8 names its line and column. A byte-order mark is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ragbench.cases.pymodule import read_python_module
from pytest_ragbench.cases.raw import FileRecords, RawRecord, gc_paused
from pytest_ragbench.errors import CaseError

YAML_SUFFIXES = (".yaml", ".yml")
DATA_SUFFIXES = (*YAML_SUFFIXES, ".json", ".jsonl")
PYTHON_SUFFIX = "_test_cases.py"


def is_python_case_module(path: Path) -> bool:
    """Return True for ``*_test_cases.py`` modules."""
    return path.name.endswith(PYTHON_SUFFIX)


@dataclass(frozen=True)
class LineProblem:
    """A problem on one line: it fails the case holding the line.

    Outside every case, a ``fatal`` problem (a key given twice in the file's defaults)
    fails the file, any other one fails as an item of its own.
    """

    error: CaseError
    fatal: bool = False


def read_case_file(path: Path) -> FileRecords:
    """Read one case file; a file-level problem raises :class:`CaseError`."""
    with gc_paused():
        return _read_case_file(path)


def _read_case_file(path: Path) -> FileRecords:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CaseError(f"cannot read file: {exc.strerror}", file=path) from None
    text, problems = decode_text(raw, path)
    if path.suffix in YAML_SUFFIXES:
        result, more = _read_yaml(path, text)
    elif path.suffix == ".jsonl":
        return _read_jsonl(path, text, {p.error.line: p for p in problems})
    elif path.suffix == ".json":
        result, more = _read_json(path, text)
    elif is_python_case_module(path):
        result, more = read_python_module(path, text), []
    else:
        raise CaseError(f"unsupported case file type {path.suffix!r}", file=path)
    return attach_line_problems(result, [*problems, *more])


def decode_text(raw: bytes, path: Path) -> tuple[str, list[LineProblem]]:
    """UTF-8 text without its byte-order mark; a line that is not UTF-8 is a problem.

    Such a line is decoded with U+FFFD in place of its bad bytes, so that the rest of the
    file can still be parsed, and the case holding it fails.
    """
    try:
        return raw.decode("utf-8-sig"), []
    except UnicodeDecodeError:
        pass
    lines, problems = [], []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(line.decode("utf-8-sig" if number == 1 else "utf-8"))
        except UnicodeDecodeError as exc:
            problems.append(LineProblem(CaseError(
                f"not UTF-8 text ({exc.reason} at column {exc.start + 1})",
                file=path, line=number)))
            lines.append(line.decode("utf-8", errors="replace").lstrip("\ufeff"))
    return "\n".join(lines), problems


def attach_line_problems(result: FileRecords, problems: list[LineProblem]) -> FileRecords:
    """Fail each record that holds a problem's line; the other records are untouched."""
    if not problems:
        return result
    kept: list[RawRecord] = []
    by_record: dict[int, list[CaseError]] = {}
    placed: set[int] = set()
    for record in result.records:
        found = [i for i, p in enumerate(problems)
                 if p.error.line is not None and record.line <= p.error.line <= record.end_line]
        if found:
            by_record[id(record)] = [problems[i].error for i in found]
            placed.update(found)
        else:
            kept.append(record)
    for index, problem in enumerate(problems):
        if index not in placed:
            if problem.fatal:
                raise problem.error
            result.errors.append(problem.error)
    for record in result.records:
        errors = by_record.get(id(record))
        if errors:
            first = errors[0]
            if len(errors) > 1:
                more = ", ".join(str(e.line) for e in errors[1:])
                first = CaseError(f"{first.message} (and {len(errors) - 1} more problem(s) on "
                                  f"line(s) {more})", file=first.file, line=first.line,
                                  field=first.field)
            result.rejected.append((record, first))
    result.records = kept
    return result


# -- YAML -------------------------------------------------------------------------------

def _read_yaml(path: Path, text: str) -> tuple[FileRecords, list[LineProblem]]:
    import yaml

    # lazy: loads yaml
    from pytest_ragbench.cases import bounded_yaml

    try:
        document = bounded_yaml.load(text)
    except bounded_yaml.YamlLimitError as exc:
        raise CaseError(exc.message, file=path, line=exc.line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise CaseError(f"invalid YAML: {problem}", file=path, line=line) from None
    except yaml.YAMLError as exc:  # unprintable characters are refused by the reader
        raise CaseError(f"invalid YAML: {exc}".splitlines()[0], file=path) from None
    problems = [_given_twice(path, d.key, d.first_line, d.second_line, "YAML")
                for d in document.duplicates]
    if document.data is None:
        return FileRecords(path), problems
    return _from_document(path, document.data, _YamlLines(document.root)), problems


def _given_twice(path: Path, key: str, first: int, second: int, loader: str) -> LineProblem:
    error = CaseError(f"given twice, on lines {first} and {second} (a {loader} loader keeps "
                      "only the last one): remove one", file=path, line=second, field=key)
    return LineProblem(error, fatal=True)


class _YamlLines:
    """Line numbers of the composed YAML node tree, walked alongside the data."""

    def __init__(self, node: Any) -> None:
        self.node = node

    def line(self) -> int:
        return int(self.node.start_mark.line) + 1

    def end_line(self) -> int:
        """The last line of the node (its end mark is where the next token starts)."""
        mark = self.node.end_mark
        return int(mark.line) + (1 if mark.column > 0 else 0)

    # Nodes are told apart by ``id``, not isinstance (see bounded_yaml._loader_class).
    def key(self, name: str) -> _YamlLines | None:
        if self.node.id == "mapping":
            for key_node, value_node in self.node.value:
                if getattr(key_node, "value", None) == name:
                    return _YamlLines(value_node)
        return None

    def items(self) -> list[_YamlLines]:
        if self.node.id == "sequence":
            return [_YamlLines(child) for child in self.node.value]
        return []

    def field_lines(self) -> dict[str, int]:
        if self.node.id != "mapping":
            return {}
        return {str(k.value): int(k.start_mark.line) + 1 for k, _ in self.node.value}


# -- JSON and JSONL -----------------------------------------------------------------------

class _Pairs:
    """``object_pairs_hook`` for :func:`json.loads` that notes keys given twice."""

    def __init__(self) -> None:
        self.duplicates: list[str] = []

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        data = dict(pairs)
        if len(data) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    self.duplicates.append(key)
                seen.add(key)
        return data


def _loads(text: str) -> tuple[Any, list[str]]:
    """``json.loads`` that also returns the keys given twice (in any object)."""
    hook = _Pairs()
    return json.loads(text, object_pairs_hook=hook), hook.duplicates


def _read_jsonl(path: Path, text: str, bad_lines: dict[int | None, LineProblem]) -> FileRecords:
    result = FileRecords(path)
    # JSON Lines ends lines at "\n" only; str.splitlines would also break inside strings
    # holding raw U+2028 or U+0085.
    for number, raw_line in enumerate(text.split("\n"), start=1):
        if not raw_line.strip():
            continue
        try:
            data, duplicates = _loads(raw_line)
            if number in bad_lines:  # fail it, by its kind and id when they can be read
                if not isinstance(data, dict):
                    raise json.JSONDecodeError("not an object", raw_line, 0)
                record = RawRecord(data, number, {k: number for k in data})
                result.rejected.append((record, bad_lines[number].error))
                continue
        except json.JSONDecodeError as exc:
            result.errors.append(bad_lines[number].error if number in bad_lines else
                                 CaseError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                                           file=path, line=number))
            continue
        except RecursionError:
            result.errors.append(CaseError("invalid JSON: nested too deeply", file=path,
                                           line=number))
            continue
        if not isinstance(data, dict):
            result.errors.append(CaseError(
                f"each line must be a JSON object, got {type(data).__name__}",
                file=path, line=number))
            continue
        if duplicates:
            result.rejected.append((RawRecord(data, number, {k: number for k in data}),
                                    CaseError("given twice on this line (a JSON reader keeps "
                                              "only the last one): remove one", file=path,
                                              line=number, field=duplicates[0])))
            continue
        result.records.append(RawRecord(data, number, {k: number for k in data}))
    return result


def _read_json(path: Path, text: str) -> tuple[FileRecords, list[LineProblem]]:
    try:
        data, duplicates = _loads(text)
    except json.JSONDecodeError as exc:
        raise CaseError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                        file=path, line=exc.lineno) from None
    except RecursionError:
        raise CaseError("invalid JSON: nested too deeply", file=path) from None
    lines = _JsonLines(text)
    problems = []
    if duplicates:
        problems = [_given_twice(path, key, first, second, "JSON")
                    for key, first, second in lines.duplicates()]
    return _from_document(path, data, lines), problems


class _JsonLines:
    """Line numbers of a JSON document's elements, found by re-scanning the text."""

    def __init__(self, text: str, start: int = 0, end: int | None = None) -> None:
        self.text = text
        self.start = _skip_ws(text, start)
        self.end = len(text) if end is None else end

    def line(self) -> int:
        return self.text.count("\n", 0, self.start) + 1

    def end_line(self) -> int:
        return self.text.count("\n", 0, self.end) + 1

    def _members(self) -> Iterator[tuple[Any, int, int]]:
        """Yield (key or None, value start, value end) of the object/array at ``start``."""
        decoder = json.JSONDecoder()
        opener = self.text[self.start:self.start + 1]
        if opener not in "[{" or not opener:
            return
        pos = _skip_ws(self.text, self.start + 1)
        while pos < self.end and self.text[pos] not in "]}":
            key = None
            if opener == "{":
                key, pos = decoder.raw_decode(self.text, pos)
                pos = _skip_ws(self.text, pos)
                pos = _skip_ws(self.text, pos + 1)  # the colon
            _, value_end = decoder.raw_decode(self.text, pos)
            yield key, pos, value_end
            pos = _skip_ws(self.text, value_end)
            if pos < self.end and self.text[pos] == ",":
                pos = _skip_ws(self.text, pos + 1)

    def key(self, name: str) -> _JsonLines | None:
        for key, start, end in self._members():
            if key == name:
                return _JsonLines(self.text, start, end)
        return None

    def items(self) -> list[_JsonLines]:
        return [_JsonLines(self.text, start, end) for _, start, end in self._members()]

    def field_lines(self) -> dict[str, int]:
        lines: dict[str, int] = {}
        for key, start, _ in self._members():
            if isinstance(key, str):
                lines[key] = self._key_line(key, start)
        return lines

    def _key_line(self, key: str, value_start: int) -> int:
        # The key itself sits just before its value; its line is what users look for.
        key_pos = self.text.rfind(json.dumps(key), self.start, value_start)
        return self.text.count("\n", 0, key_pos if key_pos >= 0 else value_start) + 1

    def duplicates(self) -> list[tuple[str, int, int]]:
        """Every key given twice in this value, nested ones too: (key, first, second line)."""
        found: list[tuple[str, int, int]] = []
        first: dict[str, int] = {}
        for key, start, end in self._members():
            if isinstance(key, str):
                line = self._key_line(key, start)
                if key in first:
                    found.append((key, first[key], line))
                else:
                    first[key] = line
            found += _JsonLines(self.text, start, end).duplicates()
        return found


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


# -- shared document shape ----------------------------------------------------------------

def _from_document(path: Path, data: Any, lines: Any) -> FileRecords:
    """Accept a list of cases, or a mapping with ``cases:`` and file-level defaults."""
    result = FileRecords(path)
    if isinstance(data, dict):
        if "cases" not in data:
            raise CaseError("expected a list of cases or a mapping with a 'cases' list",
                            file=path, line=lines.line())
        cases = data["cases"]
        result.defaults = {k: v for k, v in data.items() if k != "cases"}
        case_lines = lines.key("cases")
        if not isinstance(cases, list):
            raise CaseError("'cases' must be a list", file=path,
                            line=case_lines.line() if case_lines else None, field="cases")
        lines = case_lines
    elif isinstance(data, list):
        cases = data
    else:
        raise CaseError(f"expected a list of cases, got {type(data).__name__}",
                        file=path, line=lines.line())
    item_lines = lines.items() if lines is not None else []
    starts = [where.line() for where in item_lines]
    for index, item in enumerate(cases):
        where = item_lines[index] if index < len(item_lines) else None
        line = where.line() if where is not None else 1
        # a case runs up to the line before the next one (comments in between are its own)
        end = starts[index + 1] - 1 if index + 1 < len(starts) else (
            where.end_line() if where is not None else line)
        if not isinstance(item, dict):
            result.errors.append(CaseError(
                f"case #{index + 1} must be a mapping, got {type(item).__name__}",
                file=path, line=line))
            continue
        field_lines = where.field_lines() if where is not None else {}
        result.records.append(RawRecord(item, line, field_lines, end_line=max(line, end)))
    return result
