"""Shared fixtures for the project's own tests."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.backends.backend_agg
import matplotlib.figure  # noqa: F401
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401
import yaml  # noqa: F401

# In-process pytester runs forget the modules first imported inside them, and numpy's C
# extension cannot be loaded twice in one process: the session report's libraries
# (numpy, scipy, matplotlib) are loaded here once, before any pytester run. So is PyYAML:
# imported again, its libyaml parser still raises the first import's error classes, which
# the case loader's ``except yaml.YAMLError`` (the second import's) does not catch.
# torch and tokenizers cannot load twice either (torch's C extension fails with "bad call
# flags", a PyO3 module refuses): a pytester run that builds the embedded system would
# otherwise leave a later in-process embedder unable to import them.
try:
    import tokenizers  # noqa: F401
    import torch  # noqa: F401
except ImportError:  # without the embed extra
    pass

pytest_plugins = ["pytester"]

REPO_ROOT = Path(__file__).resolve().parent.parent
ORACLES = REPO_ROOT.parent / "shared" / "oracles"


@pytest.fixture(autouse=True)
def _runs_do_not_inherit_the_outer_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pytester run must not inherit the outer xdist worker or CI variables.

    xdist marks its workers with these variables; a subprocess that inherited them would
    take itself for a worker (thread shares, per-worker file names) in a serial run.
    """
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    # pytest prints untruncated summaries when CI is set: a run's output must not depend
    # on where the outer suite runs.
    for name in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(name, raising=False)


# A run of pytest inside a test keeps pytest's own terminal reporter, whose lines the tests
# read: pytest-sugar replaces it in any run on a terminal (a pseudo-terminal test's, or an
# in-process run once an outer run on a terminal switched sugar on). A test that exercises
# sugar passes ``-p sugar`` (a later ``-p`` unblocks it).
NO_SUGAR = "-p no:sugar"


@pytest.fixture(autouse=True)
def _runs_keep_pytests_own_reporter(request: pytest.FixtureRequest,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")  # it clears PYTEST_ADDOPTS when it is made
    monkeypatch.setenv("PYTEST_ADDOPTS", NO_SUGAR)


def oracle_file(*parts: str) -> Path:
    """Return a path under ../shared/oracles, skipping (or failing in CI) when absent.

    The oracle folder sits beside the repository and is never copied into it.
    With RAGBENCH_REQUIRE_ORACLES=1 a missing oracle fails the test instead of skipping.
    """
    path = ORACLES.joinpath(*parts)
    if not path.exists():
        message = f"oracle data not found: {path} (expected ../shared/oracles beside the repo)"
        if os.environ.get("RAGBENCH_REQUIRE_ORACLES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def oracles() -> type:
    """Access oracle files as ``oracles.file("trec_eval", "qrels.test")``."""

    class _Oracles:
        file = staticmethod(oracle_file)

    return _Oracles
