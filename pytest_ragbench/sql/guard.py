"""Refuse SQL that could write, before it reaches a database.

This is the first of three locks (the others: SQLite opened with ``mode=ro`` plus a
deny-writes authorizer, and a transaction that is always rolled back elsewhere).
"""

from __future__ import annotations

import re

from pytest_ragbench.errors import RagbenchError

ALLOWED_HEADS = ("SELECT", "WITH", "VALUES", "PRAGMA")
# Words that only appear in statements that change data, schema or connection state.
WRITE_WORDS = (
    "INSERT", "UPDATE", "DELETE", "DROP", "CREATE", "ALTER", "ATTACH", "DETACH", "VACUUM",
    "REINDEX", "TRUNCATE", "GRANT", "REVOKE", "MERGE", "COPY", "CALL", "LOCK", "INTO",
    "UPSERT",
)
READ_ONLY_PRAGMAS = (
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "database_list", "collation_list", "function_list", "pragma_list",
    "compile_options", "user_version", "schema_version", "page_count", "page_size",
    "encoding", "foreign_keys", "integrity_check", "quick_check",
)
# Read-only pragmas that take a table, index or schema name (or a count) as their argument.
PRAGMAS_WITH_ARGUMENT = (
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "integrity_check", "quick_check",
)
_TOKENS = re.compile(
    r"""
    (?P<comment>--[^\n]*|/\*.*?(?:\*/|$))
    |(?P<string>'(?:[^']|'')*(?:'|$))
    |(?P<ident>"(?:[^"]|"")*(?:"|$)|`[^`]*(?:`|$)|\[[^\]]*(?:\]|$))
    |(?P<word>[A-Za-z_][A-Za-z0-9_$]*)
    |(?P<semicolon>;)
    |(?P<other>\S)
    """,
    re.VERBOSE | re.DOTALL,
)


class UnsafeSqlError(RagbenchError):
    """The statement could change the database, or is not a single read-only statement."""


def statements(sql: str) -> list[list[str]]:
    """Split into statements of upper-cased words and symbols (comments and literals dropped)."""
    result: list[list[str]] = [[]]
    for match in _TOKENS.finditer(sql):
        group = match.lastgroup
        if group == "comment":
            continue
        if group == "semicolon":
            result.append([])
        elif group == "word":
            result[-1].append(match.group().upper())
        elif group in ("string", "ident"):
            result[-1].append("'")  # a literal or quoted name: never a keyword
        else:
            result[-1].append(match.group())
    return [tokens for tokens in result if tokens]


def check_read_only(sql: str) -> None:
    """Raise :class:`UnsafeSqlError` unless ``sql`` is one read-only statement."""
    parts = statements(sql)
    if not parts:
        raise UnsafeSqlError("the SQL is empty")
    if len(parts) > 1:
        raise UnsafeSqlError(f"{len(parts)} statements: only one read-only statement is allowed")
    tokens = parts[0]
    head = tokens[0]
    if head not in ALLOWED_HEADS:
        raise UnsafeSqlError(f"a {head} statement is not read-only "
                             f"(allowed: {', '.join(ALLOWED_HEADS)})")
    if head == "PRAGMA":
        _check_pragma(tokens)
        return
    for word in tokens:
        if word in WRITE_WORDS:
            raise UnsafeSqlError(f"'{word}' would write: only read-only statements are allowed")


def _check_pragma(tokens: list[str]) -> None:
    name = tokens[1] if len(tokens) > 1 else ""
    if len(tokens) > 3 and tokens[2] == ".":  # PRAGMA schema.name
        name = tokens[3]
    if "=" in tokens:
        raise UnsafeSqlError(f"PRAGMA {name.lower()} = ... would write")
    if name.lower() not in READ_ONLY_PRAGMAS:
        raise UnsafeSqlError(f"PRAGMA {name.lower()} is not on the read-only list")
    if name.lower() in ("user_version", "schema_version", "foreign_keys", "encoding",
                        "page_size") and "(" in tokens:
        raise UnsafeSqlError(f"PRAGMA {name.lower()}(...) would write")
