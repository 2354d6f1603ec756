"""Who answers a question from given passages: the system's ``answer_from``, else ``ragbench_llm``.

RAGAS samples that carry contexts (but no answer) and RAGCSV rows come with the passages
to answer from. The system under test answers them when it has
``answer_from(question, contexts, history=None)``; otherwise the generator
``ragbench_llm`` does, with the kind's prompt, and then the answer does not depend on the
system: under ``--ragbench-systems`` such an item is made once when no named system can
answer from passages, and otherwise (a registered system without ``answer_from``) its
record is marked ``system_independent`` and left out of the comparison of systems.
The session's report names who answered (component ``passage answers``), and each
item's evidence says it too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_ragbench.kinds import ItemRun
from pytest_ragbench.systems.checks import require
from pytest_ragbench.systems.components import set_component
from pytest_ragbench.systems.fixtures import describe
from pytest_ragbench.systems.protocols import Answer, Context, as_messages

ROLE = "passage answers"


def passage_system(item: ItemRun) -> Any | None:
    """The system under test when it has ``answer_from``, else None (``ragbench_llm`` answers).

    The item of no named system in a ``--ragbench-systems`` run is answered by
    ``ragbench_llm``: it stands for every system without ``answer_from``. The embedded
    default system has no ``answer_from`` and is not built just to find that out.
    """
    if item.system_name is None and (item.config.systems
                                        or _default_system_fixture(item.request)):
        return None
    try:
        system = item.system()
    except (pytest.skip.Exception, KeyError):  # no system here: the generator answers
        return None
    if item.system_name is None:
        require(item.request, "ragbench_system", system)
    return system if callable(getattr(system, "answer_from", None)) else None


def _default_system_fixture(request: pytest.FixtureRequest | None) -> bool:
    """True when ``ragbench_system`` is the plugin's own fixture (not overridden).

    Reads pytest's fixture definitions (no public API says which definition wins); when
    they cannot be read the system is built and asked instead.
    """
    if request is None:
        return False
    try:
        definitions = request._fixturemanager.getfixturedefs("ragbench_system", request.node)
    except Exception:
        return False
    if not definitions:
        return False
    function = getattr(definitions[-1], "func", None)
    return getattr(function, "__module__", "") == "pytest_ragbench.systems.fixtures"


def describe_answerer(system: Any | None, generator: Any | None, system_name: str | None
                      ) -> str:
    """Who answers from passages, for the evidence and the report."""
    if system is not None:
        name = f"system {system_name!r}" if system_name else "the system under test"
        return f"{name}: answer_from of {describe(system)}"
    if generator is None:
        return "nobody: no generator and the system has no answer_from"
    model = getattr(generator, "model_id", type(generator).__name__)
    return f"the generator {model} (ragbench_llm): the system has no answer_from"


def record_answerer(item: ItemRun, text: str) -> None:
    """Name who answers from passages in the session's components (the report)."""
    if item.request is None:
        return

    role = f"{ROLE} [{item.system_name}]" if item.system_name else ROLE
    set_component(item.request.config, role, text)


def call_answer_from(system: Any, question: str, contexts: Sequence[Context],
                     history: Sequence[Any] | None = None) -> Answer:
    """``system.answer_from``, timed; a plain string reply becomes an :class:`Answer`."""
    started = time.perf_counter()
    if history:
        reply = system.answer_from(question, list(contexts), as_messages(history))
    else:
        reply = system.answer_from(question, list(contexts))
    elapsed = time.perf_counter() - started
    if isinstance(reply, str):
        return Answer(reply, latency_s=elapsed)
    if isinstance(reply, Answer):
        return reply if reply.latency_s else dataclasses.replace(reply, latency_s=elapsed)
    if not isinstance(getattr(reply, "text", None), str):
        raise TypeError(f"{type(system).__name__}.answer_from returned "
                        f"{type(reply).__name__}: expected an Answer or a string")
    return Answer(reply.text, tuple(getattr(reply, "contexts", ()) or ()),
                  latency_s=float(getattr(reply, "latency_s", 0.0) or elapsed))


async def acall_answer_from(system: Any, question: str, contexts: Sequence[Context],
                            history: Sequence[Any] | None = None) -> Answer:
    """:func:`call_answer_from` in a worker thread (the system's method is synchronous)."""
    return await asyncio.to_thread(call_answer_from, system, question, contexts, history)
