"""Ragas samples scored as given, and a cache folder that holds their embeddings.

Shared by tests/test_heavy_imports.py and tests/test_reruns.py: a session of these
samples with the warm cache never loads the embedding model (torch), so what it times is
the ragas kind's own work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = [{"id": f"s{i}", "kind": "ragas", "question": f"Where is museum {i}?",
            "ground_truth": f"Museum {i} is in Paris.",
            "answer": f"Museum {i} is in Paris. It opened in 179{i}.",
            "contexts": [f"Museum {i}, in Paris, opened in 179{i}."]} for i in range(8)]
# Samples scored as given: nothing asks the system, which is here only to be a fixture.
CONFTEST = '''
import json
import sys
from pathlib import Path

import pytest
from pytest_ragbench.systems.protocols import Answer

TIMERS = Path(__file__).with_name("timers.log")  # not .jsonl: that would be collected


class NeverAsked:
    def answer(self, question, history=None):
        raise AssertionError("samples scored as given ask no system")


@pytest.fixture(scope="session")
def ragbench_system():
    return NeverAsked()


def pytest_timeout_set_timer(item, settings):
    """pytest-timeout starts an item's timer: is what the item needs imported already?"""
    with TIMERS.open("a") as out:
        out.write(json.dumps({"item": item.nodeid, "timeout": settings.timeout,
                              "method": settings.method,
                              "rouge": "rouge_score.rouge_scorer" in sys.modules,
                              "nltk": "nltk.stem.porter" in sys.modules,
                              "ragas": "ragas" in sys.modules}) + "\\n")
'''


def warm_embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``--ragbench-cache`` folder holding the samples' embeddings (made once a session)."""
    folder = tmp_path_factory.getbasetemp() / "ragas-samples-warm"
    cache = folder / "cache"
    if (folder / "warm").is_file():
        return cache
    (folder / "test_cases").mkdir(parents=True, exist_ok=True)
    (folder / "test_cases" / "samples.jsonl").write_text(
        "".join(json.dumps(s) + "\n" for s in SAMPLES))
    (folder / "conftest.py").write_text(CONFTEST)
    done = subprocess.run([sys.executable, "-m", "pytest", "--ragbench", "-p", "no:cacheprovider",
                           "-q", f"--ragbench-cache={cache}"], cwd=folder, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (folder / "warm").touch()
    return cache
