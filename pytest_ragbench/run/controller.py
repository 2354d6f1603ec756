"""The controller's side of each pytest-xdist worker: what it is given, what it leaves.

A worker starts with the run id, the journal it appends to, what a resumed run keeps,
and the folder where it writes its items' kind and system. When it goes down it leaves
the components it named, the signal that stopped it (if one did), and, having run all
its items, its process for drawing plots until the session ends (run/plots_ahead.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragbench.run import collected as collected_mod
from pytest_ragbench.systems import components as components_mod

if TYPE_CHECKING:
    from pytest_ragbench.run.session import RagbenchSession

WORKER_INPUT_KEY = "ragbench_run"  # config.workerinput: the run id, journal, resume point
SIGNAL_OUTPUT_KEY = "ragbench_signal"  # config.workeroutput: the signal a worker received
OK_EXITS = (int(pytest.ExitCode.OK), int(pytest.ExitCode.TESTS_FAILED))  # a worker's, finished


class XdistController:
    """Hands the run to each worker; takes its components and its interruption back."""

    def __init__(self, run: RagbenchSession) -> None:
        self.run = run

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Give each worker the run id, the journal, and what resuming deselects."""
        run = self.run
        node.workerinput[collected_mod.WORKER_INPUT_KEY] = run.collected.worker_input()
        if not run.write_files or run.journal is None:
            return
        node.workerinput[WORKER_INPUT_KEY] = {
            "id": run.run_id, "journal": str(run.journal.path),
            "resume": run.resume.worker_input() if run.resume is not None else None}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Take the worker's components and interruption; lend its process to the plots."""
        run = self.run
        output = getattr(node, "workeroutput", None) or {}
        run.worker_components.update(output.get(components_mod.WORKEROUTPUT_KEY) or {})
        gateway = getattr(node, "gateway", None)
        if error is None and output.get("exitstatus") in OK_EXITS and gateway is not None \
                and run.plots_ahead is not None:
            plots = run.plots_ahead
            run.guard("drawing plots ahead",
                      lambda: plots.add_worker(worker_id(node) or "worker", gateway))
        if error == "keyboard-interrupt" or output.get("exitstatus") == int(
                pytest.ExitCode.INTERRUPTED):
            worker = worker_id(node)
            if worker is not None:
                run.interrupted_workers[worker] = output.get(SIGNAL_OUTPUT_KEY) \
                    or run.interrupted_workers.get(worker)


def worker_id(node: Any) -> str | None:
    """The xdist id (``gw0``) of a worker node or of the node a report came from."""
    return getattr(getattr(node, "gateway", None), "id", None)
