"""Shared by the Qdrant tests: one embedding cache for the whole test session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder shared by every Qdrant test of the session (in and out of process).

    Embedding the 5,000 DBpedia documents takes minutes on a busy 2-core machine; every
    test that needs them reads them from here after the first.
    """
    return tmp_path_factory.mktemp("qdrant-shared-cache")
