"""One logged interaction as a case: what the app was asked, retrieved and answered."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_ragbench.cases.model import Case
from pytest_ragbench.formats.traffic import Interaction

KIND = "traffic"
REDACTED = "[redacted]"


@dataclass(frozen=True, kw_only=True)
class TrafficCase(Case):
    """An interaction; ``id`` is ``<file-stem>:<n>``, ``category`` its time window."""

    query: str
    contexts: tuple[str, ...]
    scores: tuple[float, ...]      # the logged scores (entries without one left out)
    answer: str | None
    user_feedback: float | None
    latency_ms: float | None
    timestamp: str                 # ISO 8601, UTC
    window: str
    user: str | None = None        # hashed
    session_id: str | None = None

    @property
    def question(self) -> str:
        """The query (what the judged metrics call the question)."""
        return self.query

    def breakdown_fields(self) -> dict[str, str | None]:
        """The window is the traffic's breakdown."""
        return {"category": self.category, "window": self.window}


class Redactor:
    """Masks ini ``ragbench_redact``'s patterns in a text."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.pattern = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None

    def __call__(self, text: str) -> str:
        """``text`` with every match replaced by ``[redacted]``."""
        return self.pattern.sub(REDACTED, text) if self.pattern else text


def traffic_case(interaction: Interaction, stem: str, file: str, window: str,
                 redact: Redactor) -> TrafficCase:
    """The case of one interaction, its texts redacted."""
    return TrafficCase(
        id=f"{stem}:{interaction.number}", kind=KIND, file=file, line=interaction.line,
        category=window, query=redact(interaction.query),
        contexts=tuple(redact(r.content) for r in interaction.retrieved),
        scores=tuple(interaction.scores),
        answer=None if interaction.answer is None else redact(interaction.answer),
        user_feedback=interaction.user_feedback, latency_ms=interaction.latency_ms,
        timestamp=interaction.timestamp.isoformat(), window=window, user=interaction.user,
        session_id=interaction.session_id)
