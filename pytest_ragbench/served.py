"""Which model a server said answered: the ``models`` of usage records, and the warning.

An OpenAI-compatible reply names its model (``"model": "gpt-4o-2024-08-06"``). Each
usage record of a role (generator, judge, system) counts the calls per model asked
for and per model served: ``models = {asked: {served: calls}}``. The report warns when
a role was served another model than it asked for; a dated snapshot of the model asked
for (``gpt-4o`` served as ``gpt-4o-2024-08-06``) is the same model. Cheap to import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

Models = dict[str, dict[str, int]]
_SNAPSHOT = re.compile(r"-\d[\w.-]*")  # "-2024-08-06", "-0613", "-20241022"


def one_call(asked: Any, served: Any) -> Models:
    """The ``models`` of one call (empty when the server named no model)."""
    if not isinstance(served, str) or not served:
        return {}
    return {str(asked) if asked else "?": {served: 1}}


def add(total: Models, models: Any) -> Models:
    """Add a record's ``models`` into ``total`` (malformed entries are skipped)."""
    if not isinstance(models, Mapping):
        return total
    for asked, served in models.items():
        if not isinstance(served, Mapping):
            continue
        into = total.setdefault(str(asked), {})
        for name, calls in served.items():
            if isinstance(calls, int) and not isinstance(calls, bool):
                into[str(name)] = into.get(str(name), 0) + calls
    return total


def differs(asked: str, served: str) -> bool:
    """Whether ``served`` is another model than ``asked`` (not the same, nor a snapshot of it)."""
    if served == asked or asked == "?":
        return False
    rest = served[len(asked):] if served.startswith(asked) else None
    return rest is None or _SNAPSHOT.fullmatch(rest) is None


def mismatches(usage: Mapping[str, Any]) -> list[str]:
    """One warning line per role and model asked for that another model answered.

    ``usage`` is the results document's usage section (``{role: {"models": ...}}``).
    """
    lines = []
    for role, row in usage.items():
        models = row.get("models") if isinstance(row, Mapping) else None
        for asked, served in add({}, models).items():
            other = {name: n for name, n in served.items() if differs(asked, name)}
            if not other:
                continue
            total = sum(served.values())
            names = ", ".join(f"{name!r} ({n} of {total} calls)"
                              for name, n in sorted(other.items()))
            lines.append(f"{role}: asked for model {asked!r}, the server answered as {names}")
    return lines
