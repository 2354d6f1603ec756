"""Streamed answers (``--ragbench-stream``): time to first token and inter-token latency.

A stream is timed from the moment it is asked for: ``ttft_s`` is the time to its first
non-empty text chunk, ``itl_s`` the mean gap between consecutive chunks (None with fewer
than two chunks). A chunk is what the source hands over at once: an SSE event's delta
for an OpenAI-compatible server, one item for a system's ``astream``.

A system that has ``async astream(question, history=None)`` (an async generator of text
chunks) is asked through it under ``--ragbench-stream``; it may yield an
:class:`~pytest_ragbench.systems.protocols.Answer` last, whose contexts, usage and model
are kept (its text too, when no text chunk came).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ragbench.systems.protocols import Answer, Usage, as_messages


@dataclass
class StreamClock:
    """When a stream was asked for and when each of its text chunks arrived."""

    started: float = field(default_factory=time.perf_counter)
    arrivals: list[float] = field(default_factory=list)

    def restart(self) -> None:
        """Start again (a retried request): earlier chunks no longer count."""
        self.started = time.perf_counter()
        self.arrivals.clear()

    def chunk(self, text: str) -> None:
        """A piece of text arrived now (an empty one is no token and is not counted)."""
        if text:
            self.arrivals.append(time.perf_counter())

    @property
    def chunks(self) -> int:
        """How many text chunks arrived."""
        return len(self.arrivals)

    @property
    def ttft_s(self) -> float | None:
        """Seconds from the request to the first text chunk."""
        return self.arrivals[0] - self.started if self.arrivals else None

    @property
    def itl_s(self) -> float | None:
        """Mean seconds between consecutive chunks (the first to the last over the gaps)."""
        if len(self.arrivals) < 2:
            return None
        return (self.arrivals[-1] - self.arrivals[0]) / (len(self.arrivals) - 1)


def can_stream(system: Any) -> bool:
    """True when ``system`` has a callable ``astream``."""
    return callable(getattr(system, "astream", None))


async def stream_answer(system: Any, question: str,
                        history: Sequence[Any] | None = None) -> Answer:
    """Ask ``system.astream`` and gather its chunks into a timed :class:`Answer`."""
    clock = StreamClock()
    pieces: list[str] = []
    final: Any = None
    turns = as_messages(history) or None
    stream = system.astream(question, turns)
    if not hasattr(stream, "__aiter__"):
        raise TypeError(f"{type(system).__name__}.astream returned {type(stream).__name__}: "
                        "expected an async generator of text chunks")
    async for chunk in stream:
        if isinstance(chunk, str):
            clock.chunk(chunk)
            pieces.append(chunk)
        elif isinstance(getattr(chunk, "text", None), str):
            final = chunk
        else:
            raise TypeError(f"{type(system).__name__}.astream yielded "
                            f"{type(chunk).__name__}: expected text chunks (str), and "
                            "optionally an Answer last")
    latency = time.perf_counter() - clock.started
    text = "".join(pieces) if pieces or final is None else str(final.text)
    usage = getattr(final, "usage", None)
    return Answer(text, tuple(getattr(final, "contexts", ()) or ()), latency_s=latency,
                  usage=usage if isinstance(usage, Usage) else Usage(),
                  model=getattr(final, "model", None), ttft_s=clock.ttft_s,
                  itl_s=clock.itl_s)
