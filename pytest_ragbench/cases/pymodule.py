"""Read ``*_test_cases.py`` modules by parsing them, never by importing them.

A module exports lists assigned at top level to names ending in ``_CASES``
(``SQL_TEST_CASES = [...]``). Each element is a dict literal or a call such as
``SQLEvaluationTestCase(question=..., ...)`` whose keyword arguments are literals;
enum references like ``QueryType.HYBRID`` are read as the member name ``"HYBRID"``.
Anything else is reported as an error on its line: the module is data, not code.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from pytest_ragbench.cases.raw import FileRecords, RawRecord
from pytest_ragbench.errors import CaseError


def read_python_module(path: Path, text: str) -> FileRecords:
    """Return the records of every ``*_CASES`` list in the module source ``text``."""
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise CaseError(f"invalid Python: {exc.msg}", file=path, line=exc.lineno) from None
    except (RecursionError, MemoryError):
        raise CaseError("invalid Python: nested too deeply", file=path) from None
    result = FileRecords(path)
    found = False
    for statement in tree.body:
        target, value = _assignment(statement)
        if target is None or not target.upper().endswith("_CASES"):
            continue
        found = True
        hint = target  # the list's name hints at the kind: HYBRID_TEST_CASES -> hybrid
        if not isinstance(value, ast.List | ast.Tuple):
            result.errors.append(CaseError(
                f"{target} must be a list literal", file=path, line=statement.lineno))
            continue
        for element in value.elts:
            try:
                data, field_lines = _element(element)
            except RecursionError:
                result.errors.append(CaseError("nested too deeply", file=path,
                                               line=element.lineno))
                continue
            except CaseError as exc:
                result.errors.append(exc.located(file=path, line=element.lineno))
                continue
            record = RawRecord(data, element.lineno, field_lines, kind_hint=hint,
                               end_line=element.end_lineno or element.lineno)
            twice = _repeated_key(element)
            if twice is not None:
                result.rejected.append((record, twice.located(file=path)))
            else:
                result.records.append(record)
    if not found:
        raise CaseError("no top-level list named *_CASES (e.g. SQL_TEST_CASES = [...])", file=path)
    return result


def _assignment(statement: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        if isinstance(target, ast.Name):
            return target.id, statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id, statement.value
    return None, None


def _repeated_key(node: ast.expr) -> CaseError | None:
    """A key given twice in a case's dict literal (Python keeps the last one)."""
    if not isinstance(node, ast.Dict):
        return None  # a call repeating a keyword is a SyntaxError already
    first: dict[str, int] = {}
    for key_node in node.keys:
        if isinstance(key_node, ast.Constant) and isinstance(key_node.value, str):
            if key_node.value in first:
                return CaseError(f"given twice, on lines {first[key_node.value]} and "
                                 f"{key_node.lineno} (Python keeps only the last one): "
                                 "remove one", line=key_node.lineno, field=key_node.value)
            first[key_node.value] = key_node.lineno
    return None


def _element(node: ast.expr) -> tuple[dict[str, Any], dict[str, int]]:
    if isinstance(node, ast.Dict):
        data: dict[str, Any] = {}
        lines: dict[str, int] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            if not (isinstance(key_node, ast.Constant) and isinstance(key_node.value, str)):
                raise CaseError("dict keys must be string literals",
                                line=getattr(key_node, "lineno", node.lineno))
            data[key_node.value] = _literal(value_node, key_node.value)
            lines[key_node.value] = key_node.lineno
        return data, lines
    if isinstance(node, ast.Call):
        if node.args:
            raise CaseError("use keyword arguments only (positional arguments are ambiguous)",
                            line=node.lineno)
        data, lines = {}, {}
        for keyword in node.keywords:
            if keyword.arg is None:
                raise CaseError("'**' expansion is not allowed in case data", line=node.lineno)
            data[keyword.arg] = _literal(keyword.value, keyword.arg)
            lines[keyword.arg] = keyword.value.lineno
        return data, lines
    raise CaseError("each case must be a dict literal or a call with keyword arguments",
                    line=node.lineno)


def _literal(node: ast.expr, field: str) -> Any:
    """Evaluate a literal; ``Enum.MEMBER`` becomes ``"MEMBER"``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name | ast.Attribute):
        return node.attr
    if isinstance(node, ast.List | ast.Tuple):
        values = [_literal(child, field) for child in node.elts]
        return values if isinstance(node, ast.List) else tuple(values)
    if isinstance(node, ast.Dict):
        result: dict[Any, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            if key_node is None:
                raise CaseError("'**' expansion is not allowed in case data",
                                line=node.lineno, field=field)
            result[_literal(key_node, field)] = _literal(value_node, field)
        return result
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise CaseError(
            f"only literals are allowed (the module is parsed, not executed): "
            f"{ast.unparse(node)[:60]!r}",
            line=node.lineno, field=field) from None
