"""The plugin's own exceptions: bad input is reported with file, line and field."""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Any

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 2, 40, 40
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 4


def short_repr(value: Any, limit: int = 60) -> str:
    """A ``repr`` for error messages, bounded *while* it is made: a huge value costs nothing.

    (``repr(value)[:limit]`` would first format all of it: an alias-expanded YAML value
    holds billions of items.)
    """
    text = _SHORT.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class RagbenchError(Exception):
    """Base class of every error the plugin raises on purpose."""


class CaseError(RagbenchError):
    """A case file, a record in it, or one field of a record is invalid.

    ``str(error)`` names the place as ``file:line: field: message`` so that a
    user can jump straight to it.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        super().__init__(self.describe())

    def describe(self) -> str:
        """Return ``file:line: field 'x': message`` with the known parts."""
        where = self.file or ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        parts = [where] if where else []
        if self.field:
            parts.append(f"field '{self.field}'")
        parts.append(self.message)
        return ": ".join(parts)

    def located(
        self, *, file: str | Path | None = None, line: int | None = None
    ) -> CaseError:
        """Return a copy with the file and line filled in where they were unknown."""
        return CaseError(
            self.message,
            file=self.file or (str(file) if file is not None else None),
            line=self.line if self.line is not None else line,
            field=self.field,
        )


class ConfigError(RagbenchError):
    """An option, ini key or configuration file value is invalid."""


class ModelCallError(RagbenchError):
    """A model call (generator, judge, embedder) failed after its retries."""


class UnusableReply(ModelCallError):
    """The model answered, but not with what was asked for (never cached).

    ``reply`` is the reply's text; ``generation`` the answered call (usage and latency),
    so that callers can count a call the server did answer.
    """

    def __init__(self, message: str, *, reply: str, generation: object = None) -> None:
        super().__init__(message)
        self.reply = reply
        self.generation = generation
