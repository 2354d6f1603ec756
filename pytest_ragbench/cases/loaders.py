"""Read case files (YAML, JSON, JSONL, ``*_test_cases.py``) into raw records with line numbers.

Nothing here executes code from a case file: YAML goes through ``yaml.safe_load``'s
loader, Python modules are parsed with :mod:`ast` and only literals are accepted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_ragbench.cases.pymodule import read_python_module
from pytest_ragbench.cases.records import FileRecords, RawRecord
from pytest_ragbench.errors import CaseError

YAML_SUFFIXES = (".yaml", ".yml")
DATA_SUFFIXES = (*YAML_SUFFIXES, ".json", ".jsonl")
PYTHON_SUFFIX = "_test_cases.py"


def is_python_case_module(path: Path) -> bool:
    """Return True for ``*_test_cases.py`` modules."""
    return path.name.endswith(PYTHON_SUFFIX)


def read_case_file(path: Path) -> FileRecords:
    """Read one case file; a file-level problem raises :class:`CaseError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CaseError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=path) from None
    except OSError as exc:
        raise CaseError(f"cannot read file: {exc.strerror}", file=path) from None
    if path.suffix in YAML_SUFFIXES:
        return _read_yaml(path, text)
    if path.suffix == ".jsonl":
        return _read_jsonl(path, text)
    if path.suffix == ".json":
        return _read_json(path, text)
    if is_python_case_module(path):
        return read_python_module(path, text)
    raise CaseError(f"unsupported case file type {path.suffix!r}", file=path)


# -- YAML -------------------------------------------------------------------------------

def _read_yaml(path: Path, text: str) -> FileRecords:
    import yaml

    try:
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:  # unprintable characters are refused by the reader
        raise CaseError(f"invalid YAML: {exc}".splitlines()[0], file=path) from None
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise CaseError(f"invalid YAML: {problem}", file=path, line=line) from None
    except yaml.YAMLError as exc:
        raise CaseError(f"invalid YAML: {exc}", file=path) from None
    finally:
        loader.dispose()
    if data is None:
        return FileRecords(path)
    return _from_document(path, data, _YamlLines(node))


class _YamlLines:
    """Line numbers of the composed YAML node tree, walked alongside the data."""

    def __init__(self, node: Any) -> None:
        self.node = node

    def line(self) -> int:
        return int(self.node.start_mark.line) + 1

    def key(self, name: str) -> _YamlLines | None:
        import yaml

        if isinstance(self.node, yaml.MappingNode):
            for key_node, value_node in self.node.value:
                if getattr(key_node, "value", None) == name:
                    return _YamlLines(value_node)
        return None

    def items(self) -> list[_YamlLines]:
        import yaml

        if isinstance(self.node, yaml.SequenceNode):
            return [_YamlLines(child) for child in self.node.value]
        return []

    def field_lines(self) -> dict[str, int]:
        import yaml

        if not isinstance(self.node, yaml.MappingNode):
            return {}
        return {str(k.value): int(k.start_mark.line) + 1 for k, _ in self.node.value}


# -- JSON and JSONL -----------------------------------------------------------------------

def _read_jsonl(path: Path, text: str) -> FileRecords:
    result = FileRecords(path)
    # JSON Lines ends lines at "\n" only; str.splitlines would also break inside strings
    # holding raw U+2028 or U+0085.
    for number, raw_line in enumerate(text.split("\n"), start=1):
        if not raw_line.strip():
            continue
        try:
            data = json.loads(raw_line)
        except json.JSONDecodeError as exc:
            result.errors.append(
                CaseError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=path, line=number)
            )
            continue
        if not isinstance(data, dict):
            result.errors.append(CaseError(
                f"each line must be a JSON object, got {type(data).__name__}",
                file=path, line=number))
            continue
        result.records.append(RawRecord(data, number, {k: number for k in data}))
    return result


def _read_json(path: Path, text: str) -> FileRecords:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaseError(f"invalid JSON: {exc.msg} (column {exc.colno})",
                        file=path, line=exc.lineno) from None
    return _from_document(path, data, _JsonLines(text))


class _JsonLines:
    """Line numbers of a JSON document's elements, found by re-scanning the text."""

    def __init__(self, text: str, start: int = 0, end: int | None = None) -> None:
        self.text = text
        self.start = _skip_ws(text, start)
        self.end = len(text) if end is None else end

    def line(self) -> int:
        return self.text.count("\n", 0, self.start) + 1

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
                # The key itself sits just before its value; its line is what users look for.
                key_pos = self.text.rfind(json.dumps(key), self.start, start)
                lines[key] = self.text.count("\n", 0, key_pos if key_pos >= 0 else start) + 1
        return lines


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
    for index, item in enumerate(cases):
        where = item_lines[index] if index < len(item_lines) else None
        line = where.line() if where is not None else 1
        if not isinstance(item, dict):
            result.errors.append(CaseError(
                f"case #{index + 1} must be a mapping, got {type(item).__name__}",
                file=path, line=line))
            continue
        field_lines = where.field_lines() if where is not None else {}
        result.records.append(RawRecord(item, line, field_lines))
    return result
