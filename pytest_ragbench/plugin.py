"""The pytest entry point (``-p ragbench``): options, markers, collection hooks, records.

Kept thin on purpose: nothing heavy is imported here, and a session with no case
files and no ``--ragbench*`` flag is not affected at all.

The import policy, stated once here and enforced by tests/test_import_graph.py: the
*plugin tier* is this module, what pytest imports to load it (config/options.py,
config/__init__.py), the built-in hooks registered at load (kinds/, kinds/report_sections.py),
every module these hooks import (collection, fixtures, the session's lifecycle) and what
those import at module level. A module of the plugin tier imports the rest of the package,
and any heavy library, inside the function that needs it, so that a plain pytest run
loads neither; such imports carry no comment. Anywhere else a function-level import of a
package module says why in a ``# lazy:`` comment (or loads a heavy library).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.config import options
from pytest_ragbench.config.settings import (
    CONFIG_KEY,
    RagbenchConfig,
    build_config,
    collected_paths,
    get_config,
)
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.redact import register_environment, register_urls, scrub, scrub_data
from pytest_ragbench.render import REPORT_MARKER
from pytest_ragbench.results.records import REPORT_ATTRIBUTE
from pytest_ragbench.run import garbage

LOCATIONS_KEY = pytest.StashKey[Any]()
SEEN_KEY = pytest.StashKey[Any]()
# The run (run/journal.py, interruption.py, resume.py), in every process of the session:
JOURNAL_KEY = pytest.StashKey[Any]()  # the JournalWriter finished records are appended to
KEPT_KEY = pytest.StashKey[frozenset[str]]()  # node ids --ragbench-resume does not run again
SIGNALS_KEY = pytest.StashKey[Any]()  # the SignalWatch (SIGTERM as Ctrl-C)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the plugin's own hooks (``pytest_ragbench_*``) and the built-in kinds."""
    from pytest_ragbench import hookspecs, kinds
    from pytest_ragbench.kinds import report_sections

    pluginmanager.add_hookspecs(hookspecs)
    pluginmanager.register(kinds, "ragbench-kinds")  # through pytest_ragbench_item_kinds
    pluginmanager.register(report_sections, "ragbench-report-sections")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the ``ragbench`` option group and ini keys."""
    options.register(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> None:
    """An xdist worker of a ``--ragbench`` run: thread limits before conftest.py files load."""
    if _evaluating(early_config):
        from pytest_ragbench.run.threads import limit_worker_threads

        limit_worker_threads()


def _evaluating(config: pytest.Config) -> bool:
    """``--ragbench`` (or ini ``ragbench``), read before the command line is fully parsed."""
    flag = getattr(config.known_args_namespace, "ragbench", None)
    return bool(flag) or bool(config.getini("ragbench"))


def pytest_configure(config: pytest.Config) -> None:
    """Resolve settings, register markers and fixtures, and the controller's reporter."""
    from pytest_ragbench.kinds import registry

    if not hasattr(config, "workerinput"):  # `--flag VALUE` that misled pytest's rootdir
        from pytest_ragbench.config import spaced_flags

        spaced_flags.check(config)
    register_environment()  # the secrets: masked in everything written or printed
    try:
        settings = build_config(config)
        if settings.sweep is not None or settings.chosen is not None:
            from pytest_ragbench.config.settings import with_configurations
            from pytest_ragbench.systems.sweep import expand

            settings = with_configurations(settings, expand(config, settings.sweep,
                                                            settings.chosen))
        register_urls(settings.urls())
        kinds = registry(config)
        if not hasattr(config, "workerinput") and (settings.thresholds or settings.gates
                                                     or settings.toml_files):
            from pytest_ragbench.config.vocabulary import check_settings

            check_settings(settings, kinds)  # a misspelt metric or kind stops the session
    except ConfigError as exc:
        raise pytest.UsageError(scrub(f"ragbench: {exc}")) from None
    config.stash[CONFIG_KEY] = settings
    if settings.shard or settings.merge_from:
        from pytest_ragbench.run.shards import ShardSelection

        config.pluginmanager.register(ShardSelection(settings),
                                      "ragbench-shard-selection")
    sequential = None
    if settings.sequential and settings.evaluate:
        if settings.shard or settings.merge_from:
            raise pytest.UsageError("ragbench: --ragbench-sequential decides the gates as the "
                                    "items run; a shard decides none (they are decided at "
                                    "the merge): drop one of them")
        from pytest_ragbench.run.sequential import SequentialRun

        sequential = SequentialRun(config, settings)
        config.pluginmanager.register(sequential, "ragbench-sequential")
    if settings.evaluate and hasattr(config, "workerinput"):  # each worker: its share of CPUs
        from pytest_ragbench.run.threads import limit_worker_threads

        limit_worker_threads()
    config.addinivalue_line("markers", "ragbench: an item generated by pytest-ragbench")
    for kind in kinds.item_kinds.values():
        config.addinivalue_line("markers", f"{kind.name}: ragbench {kind.description}")
    from pytest_ragbench.sql import fixtures

    config.pluginmanager.register(fixtures, "ragbench-fixtures")
    config.pluginmanager.register(fixtures.settings_fixture(config), "ragbench-settings")
    _register_system_fixtures(config)
    _add_case_paths(config, settings)
    if not hasattr(config, "workerinput"):  # aggregation happens on the controller only
        from pytest_ragbench.run.session import RagbenchSession

        session = RagbenchSession(config, settings)
        session.sequential = sequential
        try:
            session.prepare_run()
        except ConfigError as exc:
            raise pytest.UsageError(scrub(f"ragbench: {exc}")) from None
        session.register(config.pluginmanager)
        if session.merged is not None:
            from pytest_ragbench.run.shards import Replay

            config.pluginmanager.register(Replay(session.merged.records), "ragbench-replay")
        if settings.evaluate and config.pluginmanager.hasplugin("xdist"):
            from pytest_ragbench.run.worker_groups import WorkerGroups

            config.pluginmanager.register(WorkerGroups(kinds.item_kinds.values()),
                                          "ragbench-worker-groups")
        config.stash[JOURNAL_KEY] = session.journal
        config.stash[KEPT_KEY] = session.kept_ids()
        config.stash[SIGNALS_KEY] = session.signals
        if settings.evaluate:
            _register_kind_plugins(config, kinds.item_kinds.values())
    else:
        _join_run(config)


def _join_run(config: pytest.Config) -> None:
    """On an xdist worker: the controller's run id and journal, and what resuming keeps.

    And the kind and system of the items it collects are written for the controller.
    """
    from pytest_ragbench.run.collected import join_collection
    from pytest_ragbench.run.controller import WORKER_INPUT_KEY
    from pytest_ragbench.run.interruption import SignalWatch

    config.stash[SIGNALS_KEY] = SignalWatch()
    join_collection(config)
    run = getattr(config, "workerinput", {}).get(WORKER_INPUT_KEY)
    if not isinstance(run, dict):
        return
    from pytest_ragbench.run.journal import JournalWriter

    writer = JournalWriter(Path(run["journal"]), run["id"])
    writer.active = True
    config.stash[JOURNAL_KEY] = writer
    if run.get("resume"):
        from pytest_ragbench.run.resume import worker_kept_ids

        config.stash[KEPT_KEY] = worker_kept_ids(run["resume"])


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give the signal handlers back, close the journal, thaw the session's objects."""
    garbage.thaw(config)
    watch = config.stash.get(SIGNALS_KEY, None)
    if watch is not None:
        watch.uninstall()
    writer = config.stash.get(JOURNAL_KEY, None)
    if writer is not None:
        writer.close()


def _register_kind_plugins(config: pytest.Config, item_kinds: Any) -> None:
    """The plugins kinds add where the reports arrive (``ItemKind.controller_plugin``)."""
    for kind in item_kinds:
        make = kind.load_controller_plugin()
        if make is not None:
            config.pluginmanager.register(make(config), f"ragbench-{kind.name}-plugin")


def _register_system_fixtures(config: pytest.Config) -> None:
    from pytest_ragbench.systems import fixtures as system_fixtures

    config.pluginmanager.register(system_fixtures, "ragbench-system-fixtures")


def _add_case_paths(config: pytest.Config, settings: RagbenchConfig) -> None:
    """Collect the case folders (ini ``ragbench_cases``) even when testpaths points elsewhere."""
    _, added = collected_paths(config, settings.case_paths,
                               (*settings.ragcsv_files, *settings.traffic_files),
                               settings.evaluate)
    config.args += [str(path) for path in added]


def _locations(config: pytest.Config) -> Any:
    if LOCATIONS_KEY not in config.stash:
        from pytest_ragbench.collect.files import locations

        settings = get_config(config)
        config.stash[LOCATIONS_KEY] = locations(config, settings.case_paths,
                                                settings.ragcsv_files)
    return config.stash[LOCATIONS_KEY]


# The suffixes of case files (besides ``*_test_cases.py``), as collect/files.DATA_SUFFIXES:
# written here so that most files are passed over without importing anything.
CASE_FILE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")


def _reader_on(config: pytest.Config, kind: Any) -> bool:
    """True when the items of a kind that reads its own format are collected now.

    An evaluating kind's items exist only under --ragbench; a verification kind's always.
    """
    from pytest_ragbench.kinds import VERIFICATION

    return get_config(config).evaluate or kind.family == VERIFICATION


def _left_out(config: pytest.Config, reader: Any, path: Path) -> None:
    """Count a file or folder of a kind's format that --ragbench would have collected."""
    if not get_config(config).evaluate and reader.detects(path):
        from pytest_ragbench.collect.selection import note_not_collected

        note_not_collected(config, reader.noun)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Never collect a report dir (its items.jsonl looks like cases), nor the label file."""
    try:
        if (collection_path / REPORT_MARKER).is_file():  # any report dir written before
            return True
    except OSError:  # a folder that cannot be searched: skipped below with one warning
        pass
    if CONFIG_KEY in config.stash:
        report_dir = config.stash[CONFIG_KEY].report_dir
        if collection_path == report_dir or report_dir in collection_path.parents:
            return True
        labels = config.stash[CONFIG_KEY].judge_labels  # human labels, not cases
        if labels and collection_path.name == labels.name and collection_path.resolve() == labels:
            return True
        if collection_path.is_dir() and _locations(config).is_case_folder(collection_path):
            return _seen(config).skip_folder(collection_path) or None  # symlink loops
    return None


def _seen(config: pytest.Config) -> Any:
    if SEEN_KEY not in config.stash:
        from pytest_ragbench.collect.guard import SeenPaths

        worker = getattr(config, "workerinput", {}).get("workerid")
        config.stash[SEEN_KEY] = SeenPaths(warn=worker in (None, "gw0"))
    return config.stash[SEEN_KEY]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> Any:
    """Keep a case module that matches ``python_files`` (``test_x_test_cases.py``) unimported.

    It is read as data by the plugin; pytest's Python collector would import (run) it.
    """
    if not module_path.name.endswith("_test_cases.py") \
            or not _locations(parent.config).is_case_file(module_path):
        return None
    from pytest_ragbench.collect.files import NotImported

    return NotImported.from_parent(parent, path=module_path)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Return a case-file collector for files that hold cases.

    A file in the format of a kind that reads its own (``ItemKind.reader``, found by its
    name, or listed in the configuration) goes to that kind's collector.
    """
    suffix = file_path.suffix
    found = None
    if suffix == ".py":
        if not file_path.name.endswith("_test_cases.py"):
            return None
    else:
        from pytest_ragbench.kinds import registry

        found = registry(parent.config).file_reader(file_path, parent.config)
        if found is None and suffix not in CASE_FILE_SUFFIXES:
            return None  # the common case: decided without reading any file
    listed = found is not None and found[1].lists(file_path, parent.config)
    own_format = found is not None and found[1].detect is not None \
        and found[1].detects(file_path)
    if not (listed or _locations(parent.config).is_case_file(file_path, own_format)):
        return None
    if found is not None and not _reader_on(parent.config, found[0]):
        _left_out(parent.config, found[1], file_path)
        return None
    if _seen(parent.config).skip_file(file_path):  # reached before through a symlink
        return None
    if found is not None:
        collector: Any = found[1].load_collector()
        return collector.from_parent(parent, path=file_path)
    from pytest_ragbench.collect.files import CaseFile

    return CaseFile.from_parent(parent, path=file_path)


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect a folder in the format of a kind that reads whole folders (a BEIR dataset).

    In a case folder, a case file that is no regular file (a FIFO, a device, a link to
    nothing), which pytest passes over in silence, is one warning.
    """
    where = _locations(parent.config)
    if where.is_case_folder(path):
        _seen(parent.config).warn_special_files(path)
    from pytest_ragbench.kinds import registry

    for kind, reader in registry(parent.config).folder_readers():
        if not _reader_on(parent.config, kind):
            if where.is_case_folder(path):
                _left_out(parent.config, reader, path)
            continue
        if reader.detects(path) and (where.is_case_folder(path) or where.holds_named_file(path)):
            collector: Any = reader.load_collector()
            return collector.from_parent(parent, path=path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--ragbench-metrics``: list the metrics of every kind; ``--ragbench-plan``: plan."""
    if config.getoption("ragbench_plan", None):
        from pytest_ragbench.results.plan import show_plan

        return show_plan(config)
    if not config.getoption("ragbench_metrics", None):
        return None
    from pytest_ragbench.config.vocabulary import show_metrics

    return show_metrics(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--ragbench-limit N``: deselect the items past the first N cases of each case file.

    Then each kind's ``on_collected`` sees the items (the judged traffic sample of
    ``--ragbench-sample``). ``--ragbench-resume``: deselect the items the continued run
    has finished. This runs before ``-k``, ``-m``, sharding and the sequential order
    (pytest calls later-registered hooks first), so every shard and every selection
    draws from the same items.
    """
    settings = get_config(config)
    if settings.limit:
        from pytest_ragbench.collect.selection import limit_per_file

        kept, dropped = limit_per_file(items, settings.limit)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    from pytest_ragbench.kinds import registry

    for kind in registry(config).item_kinds.values():  # the kinds' own choices
        on_collected = kind.load_on_collected()
        if on_collected is not None:
            on_collected(config, items)
    finished = config.stash.get(KEPT_KEY, frozenset())
    if finished:
        done = [item for item in items if item.nodeid in finished]
        if done:
            config.hook.pytest_deselected(items=done)
            items[:] = [item for item in items if item.nodeid not in finished]


def pytest_collection_finish(session: pytest.Session) -> None:
    """On an xdist worker with ragbench items: SIGTERM stops it as Ctrl-C would."""
    watch = session.config.stash.get(SIGNALS_KEY, None)
    if hasattr(session.config, "workerinput") and watch is not None \
            and any(hasattr(item, "record_for_report") for item in session.items):
        watch.install()
    if _runs_case_items(session):  # items, cases and settings live until the session ends
        garbage.freeze(session.config)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Tell the controller which signal stopped this worker; skip the exit's collection."""
    watch = session.config.stash.get(SIGNALS_KEY, None)
    output = getattr(session.config, "workeroutput", None)
    if watch is not None and output is not None:
        from pytest_ragbench.run.controller import SIGNAL_OUTPUT_KEY

        watch.reporting = True
        if watch.received:
            output[SIGNAL_OUTPUT_KEY] = watch.received
    _skip_exit_collection(session)


def _skip_exit_collection(session: pytest.Session) -> None:
    """A process that ran ragbench items: no garbage collection at its exit (run/garbage.py)."""
    if _runs_case_items(session):
        garbage.skip_exit_collection()


def _runs_case_items(session: pytest.Session) -> bool:
    """True when this process's session holds ragbench case items."""
    items_module = sys.modules.get("pytest_ragbench.collect.items")  # imported with the first case
    return items_module is not None and any(
        isinstance(item, items_module.CaseItem) for item in session.items)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """An xdist worker's count of cases that wait for ``--ragbench``."""
    from pytest_ragbench.collect.selection import WORKEROUTPUT_KEY, merge_worker_counts

    counts = (getattr(node, "workeroutput", None) or {}).get(WORKEROUTPUT_KEY)
    if counts:
        merge_worker_counts(node.config, counts)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One line when case files hold cases that become items only with ``--ragbench``."""
    from pytest_ragbench.collect.selection import not_collected_line

    line = not_collected_line(config)
    if line:
        terminalreporter.write_line(line, yellow=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """A kind's heavy imports happen before its first item's timers start (pytest-timeout's).

    The outermost wrapper (tryfirst), so pytest-timeout's own wrapper starts later.
    """
    prepare = getattr(item, "prepare_kind", None)
    if prepare is not None:
        prepare()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the item's JSON-safe record to its report, so xdist carries it home."""
    report = yield
    make_record = getattr(item, "record_for_report", None)
    if make_record is None:
        return report
    _scrub_report(report)
    if call.when == "call" or (call.when == "setup" and report.outcome != "passed"):
        status = {"passed": "passed", "failed": "failed", "skipped": "skipped"}[report.outcome]
        if call.when == "setup" and report.outcome == "failed":
            status = "error"
        message = None
        if call.excinfo is not None:
            message = call.excinfo.exconly().strip().splitlines()[-1][:500]
        data = make_record(status, message).to_dict()
        setattr(report, REPORT_ATTRIBUTE, data)
        _add_junit_properties(item, data)
        journal = item.config.stash.get(JOURNAL_KEY, None)
        if journal is not None and journal.active:  # kept even if the session is killed
            journal.record(data)
    return report


def _scrub_report(report: pytest.TestReport) -> None:
    """Secrets out of what pytest prints and --junitxml writes: the failure and captured output.

    A failure whose text holds one is kept as its scrubbed text (no longer a traceback
    object); the record (``ItemRecord.to_dict``) is scrubbed where it is made.
    """
    longrepr = report.longrepr
    if longrepr is not None:
        if isinstance(longrepr, str | tuple):
            report.longrepr = scrub_data(longrepr)
        else:
            text = str(longrepr)
            clean = scrub(text)
            if clean != text:
                report.longrepr = clean
    if report.sections:
        report.sections = scrub_data(report.sections)


def _add_junit_properties(item: pytest.Item, record: dict[str, Any]) -> None:
    """Each metric as a ``<property>`` in --junitxml (via ``user_properties``), when asked.

    Only with ini ``ragbench_junit_properties = true``: a ``<properties>`` element inside a
    ``<testcase>`` is outside pytest's default xunit2 schema (as ``record_property`` is).
    """
    if not item.config.getini("ragbench_junit_properties") \
            or any(name == "ragbench.status" for name, _ in item.user_properties):
        return
    item.user_properties.append(("ragbench.status", record["status"]))
    for name, value in sorted(record["metrics"].items()):
        item.user_properties.append((f"ragbench.metric.{name}", value))
    for name, reason in sorted(record["unscored"].items()):
        item.user_properties.append((f"ragbench.unscored.{name}", reason))
