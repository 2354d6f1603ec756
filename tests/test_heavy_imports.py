"""Heavy imports: whole or not at all, and outside any item's timed call (pytest-timeout).

The parts on their own first, on throwaway packages written to a temporary folder (a
signal during an import, a module that raises on its first import, a half-run package
left in ``sys.modules``). Then real sessions of ragas samples in a fresh interpreter
(rouge-score with nltk is what every ragas item needs): ``--timeout`` below the time the
import takes, measured here, fails no item, and at every timer start the libraries are
already imported; a half-run nltk and a first import that raises cost one item, and the
next item imports again.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragbench.heavy_imports import drop_half_initialised, import_whole
from tests.project import RagbenchProject
from tests.ragas_samples import CONFTEST, SAMPLES, warm_embedding_cache

# -- import_whole on throwaway packages -------------------------------------------------------


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for throwaway packages; their modules are forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("heavy_"):
            del sys.modules[name]


def write_package(root: Path, name: str, modules: dict[str, str]) -> None:
    """``name/`` with ``__init__.py`` and the other modules (dotted names below it)."""
    for module, source in modules.items():
        path = root / name / (module.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


class Alarm(Exception):
    """What the SIGALRM handler raises (as pytest-timeout's signal method does)."""


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs POSIX timers")
def test_a_signal_during_the_import_comes_after_it(packages: Path) -> None:
    # The package's body takes 0.4 s and sets ``finished`` last.
    slow = {"__init__": "import time\ntime.sleep(0.4)\nfinished = True\n"}
    write_package(packages, "heavy_slow_a", slow)
    write_package(packages, "heavy_slow_b", slow)

    def alarm(signum: int, frame: object) -> None:
        raise Alarm

    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        # Without import_whole the alarm lands inside the package: the failure this prevents.
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(Alarm):
            __import__("heavy_slow_a")
        assert "heavy_slow_a" not in sys.modules
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        started = time.monotonic()
        with pytest.raises(Alarm):
            import_whole("heavy_slow_b")
        assert time.monotonic() - started >= 0.35  # raised after the import, not at 0.1 s
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert sys.modules["heavy_slow_b"].finished is True
    assert import_whole("heavy_slow_b") is sys.modules["heavy_slow_b"]


def test_an_import_that_fails_leaves_nothing_half_run(packages: Path) -> None:
    write_package(packages, "heavy_flaky", {
        "__init__": "from heavy_flaky import done, breaks\n",
        "done": "value = 1\n",
        # raises while the package is half-run, on the first import only
        "breaks": f"""
            import os
            marker = {str(packages / "tried")!r}
            if not os.path.exists(marker):
                open(marker, "w").close()
                raise RuntimeError("simulated: fails on its first import")
            """,
    })
    with pytest.raises(RuntimeError, match="simulated"):
        import_whole("heavy_flaky")
    assert not [name for name in sys.modules if name.startswith("heavy_flaky")]
    module = import_whole("heavy_flaky")
    assert module.done.value == 1 and module.breaks is sys.modules["heavy_flaky.breaks"]


def test_a_half_run_package_left_in_sys_modules_is_imported_again(packages: Path) -> None:
    """What an import cut short by a signal leaves: the package, its body not run to the end."""
    import importlib.util

    write_package(packages, "heavy_half", {"__init__": "from heavy_half import part\n",
                                           "part": "value = 2\n"})
    spec = importlib.util.find_spec("heavy_half")
    assert spec is not None
    half = importlib.util.module_from_spec(spec)
    spec._initializing = True  # type: ignore[attr-defined]
    sys.modules["heavy_half"] = half
    with pytest.raises(AttributeError, match="partially initialized"):
        __import__("heavy_half").part  # noqa: B018 - the symptom of the issue
    assert import_whole("heavy_half.part").value == 2
    assert sys.modules["heavy_half"] is not half and sys.modules["heavy_half"].part.value == 2
    assert drop_half_initialised() == []  # nothing half-run is left


# -- ragas sessions under pytest-timeout ------------------------------------------------------

# The measured import, in a fresh interpreter with what a ragas item has imported before.
MEASURE = """
import time
import pytest_ragbench.kinds.ragas, pytest_ragbench.metrics.context as context
start = time.perf_counter()
context.rouge_scorers()
print(time.perf_counter() - start)
"""


def ragas_project(pytester: pytest.Pytester, conftest: str = CONFTEST) -> RagbenchProject:
    project = RagbenchProject(pytester).conftest(conftest)
    project.cases("samples.jsonl", SAMPLES)
    return project


@pytest.fixture(scope="module")
def embeddings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder holding the samples' embeddings: the timed runs never load the model."""
    return warm_embedding_cache(tmp_path_factory)


def import_seconds() -> float:
    """How long importing rouge-score with nltk takes in a fresh interpreter (the least of 2)."""
    times = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True,
                              timeout=300, check=True)
        times.append(float(done.stdout.split()[-1]))
    return min(times)


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "n2"])
def test_a_timeout_below_the_import_time_fails_no_item(pytester: pytest.Pytester,
                                                       embeddings: Path,
                                                       workers: tuple[str, ...]) -> None:
    pytest.importorskip("pytest_timeout")
    project = ragas_project(pytester)
    # Between an item's own time (milliseconds) and the import's (seconds): without the
    # imports ahead of the timer, the first item's timer would run out inside nltk.
    timeout = round(import_seconds() / 2, 2)
    result = project.runpytest_subprocess(
        "--ragbench", f"--ragbench-cache={embeddings}", f"--timeout={timeout}",
        "--timeout-method=signal", *workers, timeout=600)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-4000:]
    result.assert_outcomes(passed=len(SAMPLES))
    items = project.items_by_case()
    assert {i["status"] for i in items.values()} == {"passed"}
    assert all("rouge" in i["metrics"] for i in items.values())
    timers = [json.loads(line) for line in (project.path / "timers.log").read_text().splitlines()]
    assert sorted(t["item"].rpartition("[")[2][:-1] for t in timers) == sorted(items)
    assert {(t["timeout"], t["method"]) for t in timers} == {(timeout, "signal")}
    assert all(t["rouge"] and t["nltk"] for t in timers), "an import ran under an item's timer"
    assert not any(t["ragas"] for t in timers), "ragas is imported only with a judge"


FAILING_IMPORTS = CONFTEST + '''

import importlib.abc
import importlib.machinery
import importlib.util

TRIES = Path(__file__).with_name("tries.log")

# nltk as an import cut short by a signal leaves it: in sys.modules, its body not run.
_spec = importlib.util.find_spec("nltk")
_half = importlib.util.module_from_spec(_spec)
_spec._initializing = True
sys.modules["nltk"] = _half


class FailsOnce(importlib.abc.MetaPathFinder):
    """rouge_score.rouge_scorer raises at the end of its first import, as a flaky one would."""

    def find_spec(self, name, path, target=None):
        if name != "rouge_score.rouge_scorer":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        spec.loader = Once(spec.loader)
        return spec


class Once(importlib.abc.Loader):
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        first = not TRIES.exists()
        with TRIES.open("a") as out:
            out.write("try\\n")
        self.real.exec_module(module)
        if first:
            raise RuntimeError("simulated: rouge_scorer fails on its first import")


sys.meta_path.insert(0, FailsOnce())
'''


def test_a_failed_heavy_import_costs_one_item_and_the_next_tries_again(
        pytester: pytest.Pytester, embeddings: Path) -> None:
    project = ragas_project(pytester, FAILING_IMPORTS)
    result = project.runpytest_subprocess("--ragbench", f"--ragbench-cache={embeddings}",
                                          "-p", "no:xdist", timeout=600)
    output = result.stdout.str()
    assert "partially initialized" not in output, output[-4000:]
    result.assert_outcomes(passed=len(SAMPLES) - 1, errors=1)
    items = project.items_by_case()
    assert items["s0"]["status"] == "error"
    assert items["s0"]["error"].endswith(
        "could not prepare the ragas items (RuntimeError: simulated: rouge_scorer fails on "
        "its first import); the next ragas item tries again")
    assert all(items[f"s{i}"]["status"] == "passed" and "rouge" in items[f"s{i}"]["metrics"]
               for i in range(1, len(SAMPLES)))
    assert (project.path / "tries.log").read_text().splitlines() == ["try", "try"]
