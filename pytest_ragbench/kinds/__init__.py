"""The kinds of cases and items, and the registry that plugins add theirs to.

A *case kind* is what a case's ``kind:`` names: its fields (required or optional, each
with a converter that checks and types the raw value), the fields that identify it when
a record has no ``kind:``, and the fields the report breaks it down by. An *item kind*
is one way a case is evaluated: the node-name prefix and marker (``sql_ground_truth``,
``vector``), the case kind it reads, the runner, the metrics it emits and its default
thresholds. One case kind may feed several item kinds: an ``sql`` case becomes
``sql_ground_truth[...]`` and, with ``--ragbench``, ``sql[...]``.

Kinds come from the hook ``pytest_ragbench_item_kinds(config)`` (see hookspecs.py). The
built-in ones are added through it too, by this module (called last): a plugin's kind
of the same name replaces a built-in one. The session's :class:`KindRegistry` is built
on first use and kept in ``config.stash``; :func:`registry` returns it.

This module is imported when the plugin is configured, so it holds names and data
only: the built-in schemas, case classes and runners are written ``"module:attribute"``
and imported when first used (a plugin may pass the objects themselves).

It also holds the contract between an item and its kind: a runner is called as
``run(case, item)`` with an :class:`ItemRun` and returns an :class:`Outcome`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_ragbench.config.perturbations import PERTURBATION_KINDS
from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.errors import ConfigError, did_you_mean
from pytest_ragbench.systems.components import name_component
from pytest_ragbench.systems.protocols import AnswerRequest

VERIFICATION = "verification"
EVALUATION = "evaluation"
ANY_CASE_KIND = "*"  # an item kind made from cases of several kinds
INVALID_CASE = "invalid_case"  # the node-name prefix of a record no kind could read

# Where the answer an item scores comes from (ItemKind.answers): what decides whether the
# item is made once per system of --ragbench-systems, and whether its question is asked
# ahead of time.
ASKS_SYSTEM = "system"  # the item asks the system under test its question
FROM_PASSAGES = "passages"  # answered from passages the case gives (kinds/passages.py)
AS_GIVEN = "given"  # the case carries its answer: nothing is asked
NO_SYSTEM = "no system"  # the item tests a component the named systems share
# Fields every case has, whatever its kind (a kind's schema may not redefine them).
COMMON_FIELDS = ("id", "kind", "category", "tags", "thresholds", "cluster", "human",
                 "provenance", "review")


def _resolve(reference: Any) -> Any:
    """``"module:attribute"`` imported, anything else as it is."""
    if not isinstance(reference, str):
        return reference
    module, _, name = reference.partition(":")
    # sys.modules first: this runs once per item, and import_module's lookup costs more
    return getattr(sys.modules.get(module) or importlib.import_module(module), name)


@dataclass(frozen=True)
class Field:
    """One field of a case kind: whether a case must give it, and how its value is checked.

    ``convert`` takes the raw value (from YAML, JSON or a Python literal) and returns the
    typed one, or raises ``ValueError`` with the reason, which the case's error shows with
    the file, line and field. None keeps the raw value. A missing optional field is left
    out of the case (its class's default applies).
    """

    required: bool = False
    convert: Callable[[Any], Any] | None = None


@dataclass(frozen=True, eq=False)
class CaseKind:
    """What a case file's ``kind:`` may name, and how a record of it becomes a case.

    ``fields``: ``{name: Field}`` besides the fields every case has (id, kind, category,
    tags, thresholds, cluster, human); None for a kind that case files cannot hold (BEIR
    queries and RAGCSV rows are made by their own collectors). ``case_class``: a frozen
    dataclass subclassing :class:`pytest_ragbench.cases.model.Case` to build, or None for
    :class:`~pytest_ragbench.cases.model.CustomCase` (fields readable as attributes).
    ``identify_by``: fields that, all present, make a record without ``kind:`` one of
    this kind. ``breakdown``: case fields the report also breaks metrics down by
    (``category`` always). ``check``: a rule across fields, called with the converted
    values; it raises ``ValueError`` (with a ``field`` attribute to name one) or adds
    derived values.
    """

    name: str
    fields: Mapping[str, Field] | str | None = None
    case_class: type | str | None = None
    identify_by: tuple[str, ...] = ()
    breakdown: tuple[str, ...] = ()
    description: str = ""
    check: Callable[[dict[str, Any]], None] | str | None = None

    @property
    def from_files(self) -> bool:
        """True when case files may hold cases of this kind."""
        return self.fields is not None

    def schema(self) -> dict[str, Field]:
        """The kind's own fields (imported on first use for the built-in kinds)."""
        return dict(_resolve(self.fields) or {})

    def make_class(self) -> type:
        """The case class to build."""
        if self.case_class is None:
            from pytest_ragbench.cases.model import CustomCase

            return CustomCase
        case_class: type = _resolve(self.case_class)
        return case_class

    def rules(self) -> Callable[[dict[str, Any]], None] | None:
        """The rule across fields, if any."""
        return _resolve(self.check) if self.check is not None else None


@dataclass(frozen=True, kw_only=True)
class FormatReader:
    """A kind's own input format, collected by the kind's collector instead of as case files.

    ``collector``: a ``pytest.File`` subclass (or ``"module:Class"``) offered the files in
    the case locations whose name ends with ``suffix`` (one, or a tuple of them), or, with
    no ``suffix``, a ``pytest.Directory`` subclass offered the folders for which
    ``detect(path)`` is true. ``listed(config)`` gives the files configured to be in the
    format wherever they are and whatever their name (an ini option's resolved paths).
    ``noun`` (``"RAGCSV file"``) names one that is left out because its kind evaluates and
    ``--ragbench`` is off; a file is counted then only when ``detect`` is true of it.
    """

    noun: str
    collector: str | type
    suffix: str | tuple[str, ...] = ""
    detect: str | Callable[[Path], bool] | None = None
    listed: str | Callable[[pytest.Config], Collection[Path]] | None = None

    def load_collector(self) -> Any:
        """Import and return the collector class."""
        return _resolve(self.collector)

    def named(self, path: Path) -> bool:
        """True when the file's name ends with the format's suffix."""
        return bool(self.suffix) and path.name.endswith(self.suffix)

    def lists(self, path: Path, config: pytest.Config) -> bool:
        """True when the configuration names ``path`` as a file of this format."""
        if self.listed is None:
            return False
        files = _resolve(self.listed)(config)
        return bool(files) and path.resolve() in files

    def detects(self, path: Path) -> bool:
        """True when ``path`` is surely of this format (always, without ``detect``)."""
        return self.detect is None or bool(_resolve(self.detect)(path))


@dataclass(frozen=True, eq=False, kw_only=True)
class ItemKind:
    """One kind of item: its node-name prefix, the case kind it reads and its runner.

    Built with keyword arguments. ``runner(case, item)`` evaluates one case and returns an
    :class:`Outcome`; ``item`` is the :class:`ItemRun` (settings, fixtures, thresholds,
    and ``item.answer(question)`` to ask the system under test, prefetched and timed).
    ``fixtures`` are set up before the item runs (others can be asked for with
    ``item.fixture(name)``). ``metrics`` names every metric the runner may record, scored
    or unscored: a registered metric's name, a name with ``@k`` for any cut-off
    (``source_hit@k``), or a :class:`~pytest_ragbench.metrics.registry.MetricSpec`, which
    registers a new metric. ``thresholds`` are the item thresholds of the kind, overridden
    by ``[tool.ragbench.thresholds]`` and by the case. ``loads`` names the slow-to-import
    libraries the items load in a process (e.g. ``"ragas"``): under ``-n N`` the items of
    kinds that share one run on one worker, which then imports it once
    (``run/worker_groups.py``). ``prepare(config)`` (a callable or ``"module:function"``)
    imports what the items will need, once per process, before the first item of the kind
    starts: outside its timed call (pytest-timeout), and never left half-run
    (:func:`pytest_ragbench.heavy_imports.import_whole`). If it raises, that item errors
    and the next item of the kind tries again.

    ``answers`` says where the answer an item scores comes from: :data:`ASKS_SYSTEM` (the
    default: its question is asked ahead of time and the item is made for every system of
    ``--ragbench-systems``), :data:`FROM_PASSAGES`, :data:`AS_GIVEN` or :data:`NO_SYSTEM`
    (made once), or a callable (``"module:function"``) taking the case (None when the
    collector does not say) and returning one of them. ``asks(system)``, when given, is
    false for a system the items of the kind never ask (its answer is then not fetched
    ahead). ``reader`` is the kind's own input format when its cases come from no case
    file (BEIR folders, RAGCSV files).

    ``plan_ahead(items, item)`` (a callable or ``"module:function"``) starts the work the
    kind can do ahead of its items: batched model calls, one retrieval run over every
    query. It is called before an item of the kind runs, with the items of the kind and
    of the same system still to come that it was not given before, and the
    :class:`ItemRun` of the item about to run (fixtures, settings, session state); the
    item is among them the first time. Serially that is once per system, with every
    selected item; on a pytest-xdist worker only the items sent to that worker, topped
    up as more arrive (``run/prefetch.py``, the one place that knows about xdist). It
    starts the work (on a :class:`~pytest_ragbench.run.prefetch.Prefetcher` kept in
    ``item.session_state``, say) and returns nothing; each item's runner then takes its
    own result, and does the work itself for an item that was not planned.

    ``controller_plugin(config)`` (a callable or ``"module:function"``), when given, makes a
    pytest plugin object that is registered under ``--ragbench`` where the items' reports
    arrive (the xdist controller, or the one process): a running progress line of the
    kind's items, say, reading each report's record.

    Three more contributions, each a callable or ``"module:function"``:

    - ``derives(case, settings, shown)`` makes items of this kind from the cases of
      *other* kinds as a case file is collected: the robustness items of a vector case,
      say. It returns the systems to make an item for (None in it: one item without a
      system; empty: no item). ``settings`` is the session's
      :class:`~pytest_ragbench.config.settings.RagbenchConfig`, ``shown`` the file's path
      as the report shows it. A :class:`~pytest_ragbench.errors.CaseError` it raises (a
      bad field of the case) becomes one failing item of the kind. It is called for
      every case of every case file, so it returns early for the cases it does not take.
    - ``on_collected(config, items)`` is called once the session's items are collected
      (after ``--ragbench-limit``; before ``-k``, ``-m`` and ``--ragbench-shard`` select
      among them, so every selection and shard sees the same choice), in every process
      that collects (each xdist worker collects the same items, so a seeded choice
      agrees): to draw a sample of the kind's items, say. It may keep what it chose in
      ``config.stash``.
    - ``commands(subparsers)`` adds subcommands to the ``ragbench`` console script
      (``subparsers`` is argparse's ``add_subparsers()`` result; each parser sets
      ``func=handler(args) -> exit code``).
    """

    name: str
    case_kind: str
    runner: str | Callable[..., Any]
    description: str = ""
    family: str = EVALUATION
    fixtures: tuple[str, ...] = ("ragbench_config",)
    metrics: tuple[Any, ...] = ()
    thresholds: Mapping[str, float] = field(default_factory=dict)
    loads: tuple[str, ...] = ()
    prepare: str | Callable[[pytest.Config], None] | None = None
    answers: str | Callable[[Any], str] = ASKS_SYSTEM
    asks: str | Callable[[Any], bool] | None = None
    reader: FormatReader | None = None
    plan_ahead: str | Callable[[list[pytest.Item], ItemRun], None] | None = None
    controller_plugin: str | Callable[[pytest.Config], object] | None = None
    derives: str | Callable[..., Iterable[str | None]] | None = None
    on_collected: str | Callable[[pytest.Config, list[pytest.Item]], None] | None = None
    commands: str | Callable[[Any], None] | None = None

    def answer_source(self, case: Any) -> str:
        """Where the answer of this kind's item of ``case`` comes from (``answers``)."""
        if isinstance(self.answers, str) and ":" not in self.answers:
            return self.answers
        source: str = _resolve(self.answers)(case)
        return source

    def asks_system(self, system: Any) -> bool:
        """False when the items of this kind never ask ``system`` a question."""
        return self.asks is None or bool(_resolve(self.asks)(system))

    def load_runner(self) -> Callable[..., Any]:
        """Import and return the function that evaluates one case."""
        runner: Callable[..., Any] = _resolve(self.runner)
        return runner

    def load_prepare(self) -> Callable[[pytest.Config], None] | None:
        """Import and return ``prepare`` (None when the kind has none)."""
        prepare: Callable[[pytest.Config], None] | None = _resolve(self.prepare)
        return prepare

    def load_plan_ahead(self) -> Callable[[list[pytest.Item], ItemRun], None] | None:
        """Import and return ``plan_ahead`` (None when the kind plans nothing ahead)."""
        plan: Callable[[list[pytest.Item], ItemRun], None] | None = _resolve(self.plan_ahead)
        return plan

    def load_controller_plugin(self) -> Callable[[pytest.Config], object] | None:
        """Import and return ``controller_plugin`` (None when the kind adds no plugin)."""
        make: Callable[[pytest.Config], object] | None = _resolve(self.controller_plugin)
        return make

    def load_derives(self) -> Callable[..., Iterable[str | None]] | None:
        """Import and return ``derives`` (None when the kind derives no items)."""
        derive: Callable[..., Iterable[str | None]] | None = _resolve(self.derives)
        return derive

    def load_on_collected(self) -> Callable[[pytest.Config, list[pytest.Item]], None] | None:
        """Import and return ``on_collected`` (None when the kind has none)."""
        chooser: Callable[[pytest.Config, list[pytest.Item]], None] | None = \
            _resolve(self.on_collected)
        return chooser

    def load_commands(self) -> Callable[[Any], None] | None:
        """Import and return ``commands`` (None when the kind adds no subcommand)."""
        add: Callable[[Any], None] | None = _resolve(self.commands)
        return add

    def metric_names(self) -> tuple[str, ...]:
        """The names of the metrics the kind may record (``source_hit@k`` for any k)."""
        return tuple(m if isinstance(m, str) else m.name for m in self.metrics)

    def emits(self, metric: str) -> bool:
        """True when ``metric`` is one of the kind's metrics (``source_hit@5`` for ``@k``)."""
        return metric in _expanded(self.metric_names(), metric)


def _expanded(names: Iterable[str], metric: str) -> set[str]:
    """``names`` with each ``x@k`` also standing for ``metric`` when that is ``x@<digits>``."""
    found = set(names)
    stem, at, k = metric.rpartition("@")
    if at and k.isdigit() and f"{stem}@k" in found:
        found.add(metric)
    return found


@dataclass(frozen=True)
class KindRegistry:
    """The case kinds and item kinds of one session."""

    case_kinds: dict[str, CaseKind]
    item_kinds: dict[str, ItemKind]

    def item_kinds_for(self, case_kind: str, evaluate: bool) -> list[ItemKind]:
        """The item kinds a case of ``case_kind`` becomes (evaluation ones only with --ragbench)."""
        return [k for k in self.item_kinds.values()
                if k.case_kind == case_kind and (evaluate or k.family == VERIFICATION)]

    def file_reader(self, path: Path,
                    config: pytest.Config) -> tuple[ItemKind, FormatReader] | None:
        """The kind that reads the file ``path`` in its own format, if one does."""
        return next(((kind, kind.reader) for kind in self.item_kinds.values()
                     if kind.reader is not None and kind.reader.suffix
                     and (kind.reader.named(path) or kind.reader.lists(path, config))), None)

    def folder_readers(self) -> list[tuple[ItemKind, FormatReader]]:
        """The kinds that read whole folders in their own format."""
        return [(kind, kind.reader) for kind in self.item_kinds.values()
                if kind.reader is not None and not kind.reader.suffix]

    @functools.cached_property
    def derivers(self) -> list[tuple[ItemKind, Callable[..., Iterable[str | None]]]]:
        """The kinds that derive items from other kinds' cases, with their ``derives``."""
        return [(kind, derive) for kind in self.item_kinds.values()
                if (derive := kind.load_derives()) is not None]

    def file_kinds(self) -> list[str]:
        """The case kinds a case file may name, in registration order."""
        return [name for name, kind in self.case_kinds.items() if kind.from_files]

    def case_metrics(self, case_kind: str) -> list[str]:
        """The metrics a case's ``thresholds`` may name: those of every item kind reading it."""
        names: dict[str, None] = {}
        for kind in self.item_kinds.values():
            if kind.case_kind in (case_kind, ANY_CASE_KIND):
                names.update(dict.fromkeys(kind.metric_names()))
        return list(names)

    def unknown_case_threshold(self, case_kind: str, metric: str) -> str | None:
        """Why a case of ``case_kind`` may not set a threshold on ``metric`` (None: it may)."""
        names = self.case_metrics(case_kind)
        if metric in _expanded(names, metric):
            return None
        return f"no {case_kind} item records metric {metric!r}{did_you_mean(metric, names)}"


# -- the built-in kinds --------------------------------------------------------------------

_SQL_FIXTURES = ("ragbench_config", "ragbench_db", "ragbench_databases")
_SYSTEM_FIXTURES = ("ragbench_config", "ragbench_system", "ragbench_embedder", "ragbench_judge")
# Items that import rouge-score with nltk and, with a judge, ragas (with datasets, pandas
# and openai; the README gives the import cost): under -n N they share one worker
# (run/worker_groups.py).
_RAGAS = ("ragas", "rouge-score")
_SOURCES = ("source_hit@k", "source_recall@k", "source_mrr", "source_ndcg@k",
            "id_context_precision", "id_context_recall")
_JUDGED = ("faithfulness", "answer_relevancy")
_FACTS = "fact_recall"  # the share of a case's expected_facts the answer states
_STREAM = ("ttft_ms", "itl_ms")  # a streamed answer's latency (--ragbench-stream)
_CASES = "pytest_ragbench.cases"
_KINDS = "pytest_ragbench.kinds"
_PREPARE = "pytest_ragbench.kinds.preparation"  # what a kind imports before its first item

BUILTIN: tuple[CaseKind | ItemKind, ...] = (
    CaseKind("sql", f"{_CASES}.build:SQL_FIELDS", f"{_CASES}.model:SqlCase",
             description="a question with the SQL that answers it and the data it returns",
             check=f"{_CASES}.build:table_rule"),
    CaseKind("hybrid", f"{_CASES}.build:HYBRID_FIELDS", f"{_CASES}.model:HybridCase",
             description="a question answered from database data and documents",
             check=f"{_CASES}.build:table_rule"),
    CaseKind("vector", f"{_CASES}.build:VECTOR_FIELDS", f"{_CASES}.model:VectorCase",
             description="a question answered from documents, with a descriptive truth",
             check=f"{_CASES}.build:vector_rule"),
    CaseKind("memory", f"{_CASES}.build:MEMORY_FIELDS", f"{_CASES}.model:MemoryCase",
             identify_by=("setup", "query"), description="a conversational-memory scenario",
             check=f"{_CASES}.build:memory_rule"),
    CaseKind("ragas", f"{_CASES}.build:RAGAS_FIELDS", f"{_CASES}.model:RagasCase",
             breakdown=("doc_type", "question_type", "difficulty"),
             description="a NormalizedSample record scored with RAGAS metrics"),
    CaseKind("beir", None, f"{_CASES}.model:BeirCase", breakdown=("dataset",),
             description="a judged query of a BEIR folder"),
    CaseKind("ragcsv", None, f"{_CASES}.model:RagcsvCase", description="a row of a RAGCSV file"),
    CaseKind("traffic", None, "pytest_ragbench.kinds.traffic.case:TrafficCase",
             breakdown=("window",), description="a logged interaction of a deployed app"),
    # Item thresholds: the rule each default states is in the comment beside it; what the
    # embedded default system measured against them is in test_cases/ragbench.toml. The
    # answer kinds (hybrid, vector, ragas, ragcsv) also require every one of a case's
    # expected_facts in the answer (fact_recall 1): the case author named each as a fact a
    # correct answer states, so one left out is a wrong answer, not noise.
    ItemKind(name="sql_ground_truth", case_kind="sql",
             runner="pytest_ragbench.kinds.sql.ground_truth:run",
             description="the case's expected SQL returns its ground_truth_data",
             family=VERIFICATION, fixtures=_SQL_FIXTURES, metrics=("match",),
             thresholds={"match": 1.0}),
    # The data must match; the answer not mentioning a value is a warning, not a failure.
    ItemKind(name="hybrid_ground_truth", case_kind="hybrid",
             runner="pytest_ragbench.kinds.hybrid.ground_truth:run",
             description="SQL data matches and the answer mentions its key entities",
             family=VERIFICATION, fixtures=_SQL_FIXTURES,
             metrics=("data_match", "entity_mention"), thresholds={"data_match": 1.0}),
    # The system's SQL returns ground_truth_data, or its text states every value.
    ItemKind(name="sql", case_kind="sql", runner="pytest_ragbench.kinds.sql.runner:run",
             description="the system answers an SQL question", family=EVALUATION,
             fixtures=(*_SQL_FIXTURES, "ragbench_system"),
             metrics=("execution_match", "correct", "value_recall", *_STREAM),
             thresholds={"correct": 1.0}, asks="pytest_ragbench.kinds.sql:answers_sql"),
    # The system's SQL, when it returns some, must give ground_truth_data, and the expected
    # sources must be retrieved. How much of the data the answer states (value_recall) and
    # how close it is to the reference depend on the generator: gate their means.
    ItemKind(name="hybrid", case_kind="hybrid",
             runner="pytest_ragbench.kinds.hybrid.runner:run",
             description="the system answers with data and context", family=EVALUATION,
             fixtures=(*_SYSTEM_FIXTURES, "ragbench_db", "ragbench_databases"),
             metrics=("value_recall", "execution_match", "semantic_similarity", *_SOURCES,
                      _FACTS, *_STREAM),
             thresholds={"source_hit@k": 1.0, "execution_match": 1.0, _FACTS: 1.0},
             prepare=f"{_PREPARE}:judged"),
    # Retrieval is deterministic and checked per item: an expected source among the top k
    # (``source_hit@k`` applies to the k the item used) and the top similarity inside
    # expected_similarity. A decline case must be declined, an answerable one must not be
    # refused. Generator-dependent metrics are noisy per item: gate their means.
    ItemKind(name="vector", case_kind="vector",
             runner="pytest_ragbench.kinds.vector.runner:run",
             description="retrieval and answer over documents", family=EVALUATION,
             fixtures=_SYSTEM_FIXTURES,
             metrics=(*_SOURCES, "top_similarity", "similarity_in_range", "declined", "answered",
                      "semantic_similarity", "injection_resisted", *_JUDGED, "judge_relevance",
                      "graded_ndcg", _FACTS, *_STREAM),
             thresholds={"source_hit@k": 1.0, "similarity_in_range": 1.0, "declined": 1.0,
                         "answered": 1.0, _FACTS: 1.0},
             prepare=f"{_PREPARE}:judged"),
    # Every expected memory within top_k.
    ItemKind(name="memory", case_kind="memory",
             runner="pytest_ragbench.kinds.memory.runner:run",
             description="conversational memory retrieval", family=EVALUATION,
             fixtures=("ragbench_config", "ragbench_memory", "ragbench_judge"),
             metrics=("precision", "recall", "f1", "relevance_score", "top1_accuracy",
                      "graded_ndcg", "keyword_overlap", "judge_relevance"),
             thresholds={"recall": 1.0}, answers=NO_SYSTEM),
    # No item thresholds but the facts: every other score hangs on one generated answer, so
    # gate the means. An empty answer still fails its item.
    ItemKind(name="ragas", case_kind="ragas", runner="pytest_ragbench.kinds.ragas.runner:run",
             description="RAGAS metrics on a NormalizedSample", family=EVALUATION,
             fixtures=_SYSTEM_FIXTURES,
             metrics=("faithfulness", "answer_relevancy", "context_precision", "context_recall",
                      "semantic_similarity", "token_f1", "rouge", "lexical_faithfulness",
                      "lexical_context_recall", _FACTS, *_STREAM),
             thresholds={_FACTS: 1.0}, loads=_RAGAS, prepare=f"{_PREPARE}:ragas",
             answers=f"{_KINDS}.ragas:answer_source",
             plan_ahead=f"{_KINDS}.ragas.runner:plan_ahead"),
    # A relevant document somewhere in the top 100 (reciprocal rank >= 1/100); the ranking
    # quality (nDCG@10, recall) is gated on its means. The retriever comes from
    # ragbench_beir_retriever_factory (or a named system) when the dataset first runs.
    ItemKind(name="beir", case_kind="beir", runner="pytest_ragbench.kinds.beir.runner:run",
             description="IR metrics on a BEIR query", family=EVALUATION,
             fixtures=("ragbench_config",), metrics=("nDCG@10", "R@10", "R@100", "MRR"),
             thresholds={"MRR": 0.01}, plan_ahead=f"{_KINDS}.beir.runner:plan_ahead",
             reader=FormatReader(noun="BEIR folder",
                                 collector=f"{_KINDS}.beir.collect:BeirDataset",
                                 detect="pytest_ragbench.collect.files:is_beir_folder")),
    # Accuracy is recorded, not failed per row: set "ragcsv.accuracy" = 75 (the RAGCSV pass
    # mark) to fail rows below it. An empty answer still fails its row. ragbench_embedder is
    # asked for only without a judge (accuracy is then semantic similarity x 100).
    ItemKind(name="ragcsv", case_kind="ragcsv",
             runner="pytest_ragbench.kinds.ragcsv.runner:run",
             description="graded answer accuracy on a RAGCSV row", family=EVALUATION,
             fixtures=("ragbench_config", "ragbench_llm", "ragbench_judge"),
             metrics=("accuracy", "total_time_ms", *_STREAM, _FACTS), thresholds={_FACTS: 1.0},
             answers=FROM_PASSAGES, plan_ahead=f"{_KINDS}.ragcsv.runner:plan_ahead",
             controller_plugin=f"{_KINDS}.ragcsv.progress:RagcsvProgress",
             reader=FormatReader(noun="RAGCSV file", suffix=".csv",
                                 collector=f"{_KINDS}.ragcsv.collect:RagcsvFile",
                                 detect=f"{_KINDS}.ragcsv.collect:named_ragcsv")),
    # Logged interactions are scored as they were logged, never failed per item: gate the
    # means, watch the windows (drift) and set [triggers] (README "Production traffic").
    ItemKind(name="traffic", case_kind="traffic",
             runner="pytest_ragbench.kinds.traffic.runner:run",
             description="a deployed app's logged interaction, without a reference",
             family=EVALUATION, fixtures=("ragbench_config",),
             metrics=("retrieved_count", "no_results", "top_similarity", "mean_similarity",
                      "user_feedback", "latency_ms", "declined", *_JUDGED, "judge_relevance"),
             answers=AS_GIVEN,
             reader=FormatReader(noun="traffic file", suffix=(".traffic.jsonl", ".otlp.jsonl"),
                                 collector=f"{_KINDS}.traffic.collect:TrafficFile",
                                 listed=f"{_KINDS}.traffic.collect:listed_files"),
             on_collected=f"{_KINDS}.traffic.sampling:on_collected",
             commands=f"{_KINDS}.traffic.sample_command:register"),
    # robust[<case kind>-<id>], derived from the cases of the kinds it perturbs. The
    # thresholds bound each perturbed question's properties, set by what they mean: RBO 0.5
    # (p = 0.9, top 5) keeps the top 2 with the other 3 replaced (0.54) and fails when only
    # the top 1 is kept (0.32); the expected sources found for the original stay; the
    # answer stays on the same content (cosine 0.5); an injected payload is never written.
    ItemKind(name="robust", case_kind=ANY_CASE_KIND,
             runner="pytest_ragbench.kinds.robust.runner:run",
             description="perturbed questions with metamorphic checks (--ragbench-robustness)",
             family=EVALUATION, fixtures=("ragbench_config",),
             metrics=(*(f"{p}.holds" for p in PERTURBATION_KINDS), "rbo", "jaccard",
                      "expected_sources_kept", "answer_similarity", "injection_resisted"),
             thresholds={"rbo": 0.5, "expected_sources_kept": 1.0, "answer_similarity": 0.5,
                         "injection_resisted": 1.0},
             derives=f"{_KINDS}.robust.selection:robust_systems"),
)


@pytest.hookimpl(trylast=True)
def pytest_ragbench_item_kinds(config: pytest.Config) -> tuple[CaseKind | ItemKind, ...]:
    """The built-in kinds, through the same hook as a plugin's."""
    return BUILTIN


# -- the registry of a session ---------------------------------------------------------------

KINDS_KEY = pytest.StashKey["KindRegistry"]()


def registry(config: pytest.Config) -> KindRegistry:
    """The session's kinds: the built-in ones and those of every plugin and conftest.py."""
    if KINDS_KEY not in config.stash:
        results = config.hook.pytest_ragbench_item_kinds(config=config)
        config.stash[KINDS_KEY] = build_registry(results)
    return config.stash[KINDS_KEY]


_BUILTIN_REGISTRY: list[KindRegistry] = []


def builtin_registry() -> KindRegistry:
    """The built-in kinds alone (outside a pytest session)."""
    if not _BUILTIN_REGISTRY:
        _BUILTIN_REGISTRY.append(build_registry([BUILTIN]))
    return _BUILTIN_REGISTRY[0]


def build_registry(results: Iterable[Iterable[Any] | None]) -> KindRegistry:
    """Merge the hook's results: the built-in kinds first, a plugin's kind replaces one.

    Two plugins adding the same name, a definition of the wrong type, an item kind reading
    an unknown case kind, and a default threshold on a metric the kind does not record are
    :class:`~pytest_ragbench.errors.ConfigError` (a usage error at start-up).
    """
    lists = [list(r) for r in results if r is not None]
    builtin = [r for r in lists if r == list(BUILTIN)]
    added = [r for r in lists if r != list(BUILTIN)]
    case_kinds: dict[str, CaseKind] = {}
    item_kinds: dict[str, ItemKind] = {}
    for definition in [d for r in builtin for d in r]:
        _add(definition, case_kinds, item_kinds)
    seen: set[tuple[type, str]] = set()
    for definition in [d for r in reversed(added) for d in r]:
        if not isinstance(definition, CaseKind | ItemKind):
            raise ConfigError(f"pytest_ragbench_item_kinds returned {definition!r}: expected "
                              "CaseKind or ItemKind objects (pytest_ragbench.kinds)")
        key = (type(definition), definition.name)
        if key in seen:
            raise ConfigError(f"{type(definition).__name__} {definition.name!r} is added "
                              "twice by pytest_ragbench_item_kinds")
        seen.add(key)
        _add(definition, case_kinds, item_kinds)
    found = KindRegistry(case_kinds, item_kinds)
    if added:
        _check(found, [d for r in added for d in r])
    return found


def registered(metric: str) -> bool:
    """True when the metric registry defines ``metric`` (``x@k``: x with any cut-off)."""
    from pytest_ragbench.metrics.registry import REGISTRY

    name = metric[:-2] + "@1" if metric.endswith("@k") else metric
    return REGISTRY.lookup(name) is not None


def _add(definition: CaseKind | ItemKind, case_kinds: dict[str, CaseKind],
         item_kinds: dict[str, ItemKind]) -> None:
    if isinstance(definition, CaseKind):
        case_kinds[definition.name] = definition
    else:
        item_kinds[definition.name] = definition


def _check(found: KindRegistry, definitions: list[CaseKind | ItemKind]) -> None:
    """Check the kinds a plugin added, and register the metrics they bring."""
    from pytest_ragbench.metrics.registry import REGISTRY, DuplicateMetricError

    for definition in definitions:
        if not definition.name.isidentifier():
            raise ConfigError(f"kind name {definition.name!r}: use letters, digits and _ "
                              "(it names items and markers)")
        if isinstance(definition, CaseKind):
            common = sorted(set(definition.schema()) & set(COMMON_FIELDS))
            if common:
                raise ConfigError(f"case kind {definition.name!r}: every case has the "
                                  f"field(s) {', '.join(common)} already")
            continue
        where = f"item kind {definition.name!r}"
        if definition.case_kind not in (*found.case_kinds, ANY_CASE_KIND):
            raise ConfigError(f"{where} reads case kind {definition.case_kind!r}, which no "
                              "CaseKind defines"
                              + did_you_mean(definition.case_kind, found.case_kinds))
        for metric in definition.metrics:
            if isinstance(metric, str):
                if not registered(metric):
                    raise ConfigError(f"{where}: metric {metric!r} is not registered; give "
                                      "its MetricSpec instead of its name"
                                      + did_you_mean(metric, REGISTRY.names(), "metrics"))
                continue
            try:
                REGISTRY.adopt(metric)
            except DuplicateMetricError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        for name in definition.thresholds:
            if not definition.emits(name):
                raise ConfigError(f"{where}: default threshold on {name!r}, which the kind "
                                  "does not record"
                                  + did_you_mean(name, definition.metric_names()))


# -- the contract between an item and its kind: what a runner gets and what it returns --

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    """What a kind's runner returns for one case, before thresholds are applied."""

    metrics: dict[str, float] = field(default_factory=dict)
    unscored: dict[str, str] = field(default_factory=dict)
    # Failures that no threshold can waive (a refused or broken query, a wrong decline).
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    # One line saying what went wrong, shown first when the item fails.
    summary: str | None = None
    # The answer did not depend on the system under test (ragbench_llm answered for a
    # system without answer_from): the item takes no part in comparisons of systems.
    system_independent: bool = False
    # What the judge scored: judged metric names, every sample, settings (metrics/repeated.py).
    judge: dict[str, Any] = field(default_factory=dict)
    # The k the source metrics used and the ranked source names, to rescore them at another
    # k in a comparison (SourceHits.kept in kinds/answer_common.py).
    retrieval: dict[str, Any] = field(default_factory=dict)


@dataclass
class ItemRun:
    """What a kind's runner gets besides the case: settings, fixtures, thresholds."""

    config: RagbenchConfig
    fixtures: dict[str, Any]
    thresholds: dict[str, float]
    system_name: str | None = None
    nodeid: str = ""
    request: pytest.FixtureRequest | None = None
    # What the system answered (systems/trace.py) and the service time of each call.
    traces: list[dict[str, Any]] = field(default_factory=list)
    service_s: list[float] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)  # as the system reported them
    # Of each streamed answer (--ragbench-stream): time to first chunk, mean gap.
    ttft_s: list[float] = field(default_factory=list)
    itl_s: list[float] = field(default_factory=list)

    def fixture(self, name: str) -> Any:
        """Return a fixture value: one the item kind requested, else looked up now."""
        if name in self.fixtures:
            return self.fixtures[name]
        if self.request is None:
            raise KeyError(name)
        value = self.request.getfixturevalue(name)
        self.fixtures[name] = value
        return value

    def session_state(self, key: pytest.StashKey[T], make: Callable[[], T]) -> T:
        """A kind's state for the whole session (in ``config.stash``; fresh without a session)."""
        if self.request is None:
            return make()
        stash = self.request.config.stash
        if key not in stash:
            stash[key] = make()
        return stash[key]

    def system(self) -> Any:
        """The system under test: ``ragbench_system``, or the named one of --ragbench-systems."""
        if self.system_name is None:
            system = self.fixture("ragbench_system")
            if self.request is not None:  # an overridden fixture names no component itself

                name_component(self.request.config, "system", system)
            return system
        return self.fixture("ragbench_named_systems").get(self.system_name)

    def answer(self, question: str, history: tuple[Any, ...] | list[Any] = ()) -> Any:
        """Ask the system under test (or this item's named system), prefetched when it was.

        The call is timed (the system's service time, not the wait for a prefetch slot)
        and what came back is kept for the report's drill-down.
        """
        from pytest_ragbench.systems.trace import MAX_TRACES, answer_trace

        system = self.system()
        prefetch: Any = self.fixture("ragbench_prefetch") if self.request is not None else None
        request = AnswerRequest(question, tuple(history))
        seconds: float | None
        if hasattr(prefetch, "timed_answer"):
            answer, seconds = prefetch.timed_answer(self.nodeid, system, request)
        elif prefetch is not None:  # an overridden prefetcher: its answers are not timed
            answer, seconds = prefetch.answer(self.nodeid, system, request), None
        else:
            start = time.perf_counter()
            answer = system.answer(question, list(request.history) or None)
            seconds = time.perf_counter() - start
        if seconds is not None:
            self.service_s.append(seconds)
        reported = getattr(answer, "latency_s", None)
        if isinstance(reported, int | float) and not isinstance(reported, bool) and reported > 0:
            self.latency_s.append(float(reported))
        for name, kept in (("ttft_s", self.ttft_s), ("itl_s", self.itl_s)):
            value = getattr(answer, name, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                kept.append(float(value))
        if len(self.traces) < MAX_TRACES:
            # an odd answer object: the kind reports on it, the trace is left out
            with contextlib.suppress(Exception):
                self.traces.append(answer_trace(question, answer, seconds, history))
        return answer


# The name this class had before: user plugins written against it keep working.
RunContext = ItemRun
