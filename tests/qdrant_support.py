"""Shared by the Qdrant tests: one embedding cache for the whole test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder shared by every Qdrant test of the session (in and out of process).

    Embedding the 5,000 DBpedia documents takes minutes on a busy 2-core machine; every
    test that needs them reads them from here after the first. ``RAGBENCH_TEST_CACHE``
    names a folder to keep them across sessions instead (a developer's re-runs).
    """
    kept = os.environ.get("RAGBENCH_TEST_CACHE")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept)
    return tmp_path_factory.mktemp("qdrant-shared-cache")
