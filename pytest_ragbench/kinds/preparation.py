"""What the built-in kinds import before their first item starts (``ItemKind.prepare``).

Each function runs once per process, before the first item of its kind starts, so that
pytest-timeout's timer (and the item's duration) does not include loading a library
every later item gets for free. Only what this session's items will use is imported: a
session without a judge never loads ragas. The embedding model (torch) is loaded where
a text is first missing from the embedding cache, so a warm session never loads it.
"""

from __future__ import annotations

import pytest

from pytest_ragbench.config.settings import get_config
from pytest_ragbench.heavy_imports import import_whole


def judged(config: pytest.Config) -> None:
    """The vector and hybrid kinds: ragas for the judged metrics, with a judge."""
    if get_config(config).judge_url:
        import_whole("pytest_ragbench.metrics.ragas_bridge")


def ragas(config: pytest.Config) -> None:
    """The ragas kind: rouge-score with nltk (always scored), and ragas with a judge."""
    # lazy: called through the kind's "module:attribute" reference, loads rouge-score
    from pytest_ragbench.metrics.context import rouge_scorers

    rouge_scorers()
    judged(config)
