"""Resolved settings of one session (flags, ini keys and ragbench.toml), without secrets."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragbench.config import options
from pytest_ragbench.config.perturbations import PERTURBATION_KINDS
from pytest_ragbench.config.prices import Price, parse_prices
from pytest_ragbench.config.ragcsv_env import env_setting, ragcsv_env_files
from pytest_ragbench.errors import ConfigError, did_you_mean
from pytest_ragbench.redact import mask_url, scrub_data
from pytest_ragbench.replies import DEFAULT_MAX_REPLY_BYTES

if TYPE_CHECKING:
    from pytest_ragbench.config.setting_files import SettingsFile, SettingsTree
    from pytest_ragbench.config.sweep import Chosen, Configuration, Sweep

FAIL_ON = ("regression", "drift", "critical")
WINDOWS = ("day", "week", "month")  # stats/traffic.py


@dataclass(frozen=True)
class RagbenchConfig:
    """Everything the plugin needs to know about this session.

    API keys are deliberately absent: clients read them from the environment
    (``RAGBENCH_LLM_API_KEY`` / ``RAGBENCH_JUDGE_API_KEY``) when they connect.
    """

    rootpath: Path
    evaluate: bool = False
    case_paths: tuple[Path, ...] = ()
    db_url: str | None = None
    dbs: dict[str, str] = field(default_factory=dict)
    systems: tuple[str, ...] = ()
    llm_url: str | None = None
    llm_model: str | None = None
    judge_url: str | None = None
    judge_model: str | None = None
    concurrency: int = 8
    cache_dir: Path | None = None
    report_dir: Path = Path(".ragbench")
    save: str | None = None
    compare: str | None = None
    fail_on: str | None = None  # comma-separated: regression, drift, critical
    gate: str = "mean"
    breakdown: tuple[str, ...] = ("category", "doc_type", "question_type", "difficulty")
    robustness: bool = False
    perturb: tuple[str, ...] = PERTURBATION_KINDS
    robustness_examples: int = 10
    ragcsv_files: tuple[Path, ...] = ()
    corpus_paths: tuple[Path, ...] = ()
    # [tool.ragbench.thresholds] of pyproject.toml, flattened ("kind.metric"); a case file's
    # own layering of ragbench.toml files on top: thresholds_for().
    thresholds: dict[str, Any] = field(default_factory=dict)
    gates: dict[str, float] = field(default_factory=dict)  # the session's, every file merged
    triggers: dict[str, dict[str, Any]] = field(default_factory=dict)  # [triggers], merged
    # The k of source_hit@k and friends for a system that does not say its top_k (ini
    # ragbench_k); also the number of contexts the built-in systems retrieve.
    k: int | None = None
    # Intervals and gates (README "Intervals, gates and clusters").
    gate_min_n: int = options.GATE_MIN_N
    cluster_by: str | None = None
    judge_labels: Path | None = None
    # Qdrant: a server URL or a local-mode path (a folder or ":memory:")
    qdrant_url: str | None = None
    qdrant_path: str | None = None
    collection: str | None = None
    max_docs: int | None = None
    # RAGCSV knobs: None = every case / each kind's own answer cap
    limit: int | None = None
    max_tokens: int | None = None
    ragcsv_debug: bool = False
    # Production traffic (README "Production traffic")
    traffic_files: tuple[Path, ...] = ()
    window: str = "week"
    sample: int | None = None
    redact: tuple[str, ...] = ()
    # -- bounds on outside calls --
    timeout_s: float = 60.0      # one model / vector-database request
    retries: int = 4             # its retries
    sql_timeout_s: float = 30.0  # one SQL statement
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES  # one stored model reply
    # Judged metrics: unscored limit and repeated judging.
    max_unscored: float = 0.2
    judge_samples: int = 1
    judge_temperature: float | None = None  # None: 0 for one sample, 0.7 for more
    inconclusive: str = "pass"
    # One metric vocabulary: the file each threshold and gate came from ("thresholds:kind.metric").
    setting_files: dict[str, str] = field(default_factory=dict)
    # The ragbench.toml files in play, shallowest first, and the tree that layers them for a
    # case file (setting_files.py); None when built by hand (the base thresholds apply).
    toml_files: tuple[SettingsFile, ...] = ()
    settings_tree: SettingsTree | None = field(default=None, compare=False, repr=False)
    # -- interrupted runs --
    resume: bool = False  # --ragbench-resume
    # --ragbench-sequential: items in a seeded order, stopped when every gate is decided
    sequential: bool = False
    sequential_seed: int = 0
    system_url: str | None = None  # a RAG service evaluated over HTTP
    stream: bool = False  # --ragbench-stream: answers streamed and timed (TTFT, ITL)
    shard: str | None = None  # "I/N": this process runs one shard (run/shards.py)
    merge_from: tuple[Path, ...] = ()  # shard report folders merged instead of running items
    shard_durations: Path | None = None  # a run whose per-kind durations balance the shards
    # What a verdict costs (results/prices.py, results/plan.py)
    prices: dict[str, Price] = field(default_factory=dict)  # ini ragbench_prices, $ per 1M
    target_width: float | None = None  # ini ragbench_target_width: a half-width to plan for
    # Choosing the best configuration (config/sweep.py, results/best.py)
    sweep: Sweep | None = None
    configurations: tuple[Configuration, ...] = ()  # the sweep's, each a named system
    chosen: Chosen | None = None  # --ragbench-config-from
    objectives: tuple[str, ...] = ()  # --ragbench-objective, "kind.metric"

    def database_url(self, name: str | None = None) -> str | None:
        """Return the URL of a named database, or the default one."""
        if name:
            if name not in self.dbs:
                known = ", ".join(sorted(self.dbs)) or "none configured"
                raise ConfigError(f"unknown database {name!r} (ragbench_dbs has: {known})")
            return self.dbs[name]
        return self.db_url

    def urls(self) -> list[str]:
        """Every URL of the settings: the credentials they carry are secrets (redact.py)."""
        found = [self.db_url, *self.dbs.values(), self.llm_url, self.judge_url, self.qdrant_url,
                 self.system_url]
        return [url for url in found if url]

    def thresholds_for(self, path: Path | str | None) -> dict[str, float]:
        """The configured thresholds of the items of one case file.

        ``[tool.ragbench.thresholds]``, then the ragbench.toml of every folder from the
        rootdir down to the file's, the nearest winning per key.
        """
        if self.settings_tree is None or path is None:
            # lazy: only the flattening (no TOML read)
            from pytest_ragbench.config.setting_files import finite_numbers

            return finite_numbers(self.thresholds, "thresholds")
        # a Path is not parsed again: this runs for every item
        return self.settings_tree.thresholds_for(path if isinstance(path, Path) else Path(path))

    def fails_on(self, reason: str) -> bool:
        """True when ``--ragbench-fail-on`` names ``reason`` (regression, drift, critical)."""
        return reason in _csv(self.fail_on)

    def public_dict(self) -> dict[str, Any]:
        """Return a JSON-safe view for reports (URLs with credentials and secrets masked).

        Every number in it is finite: build_config refuses NaN and infinity.
        """
        return scrub_data({
            "evaluate": self.evaluate,
            "case_paths": [str(p) for p in self.case_paths],
            "db_url": mask_url(self.db_url),
            "dbs": {k: mask_url(v) for k, v in self.dbs.items()},
            "systems": list(self.systems),
            "llm_url": mask_url(self.llm_url),
            "llm_model": self.llm_model,
            "judge_url": mask_url(self.judge_url),
            "judge_model": self.judge_model,
            "concurrency": self.concurrency,
            "cache_dir": str(self.cache_dir) if self.cache_dir else None,
            "gate": self.gate,
            "breakdown": list(self.breakdown),
            "robustness": self.robustness,
            "perturb": list(self.perturb),
            "robustness_examples": self.robustness_examples,
            "thresholds": self.thresholds,
            **({"threshold_files": found} if (found := {
                str(f.path): f.thresholds for f in self.toml_files if f.thresholds}) else {}),
            "gates": self.gates,
            "k": self.k,
            "gate_min_n": self.gate_min_n,
            "cluster_by": self.cluster_by,
            "judge_labels": str(self.judge_labels) if self.judge_labels else None,
            "qdrant_url": mask_url(self.qdrant_url),
            "qdrant_path": self.qdrant_path,
            "collection": self.collection,
            "max_docs": self.max_docs,
            "limit": self.limit,
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout_s,
            "retries": self.retries,
            "sql_timeout_s": self.sql_timeout_s,
            "max_reply_bytes": self.max_reply_bytes,
            "max_unscored": self.max_unscored,
            "judge_samples": self.judge_samples,
            "judge_temperature": self.judge_temperature,
            "inconclusive": self.inconclusive,
            "system_url": mask_url(self.system_url),
            "stream": self.stream,
            "shard": self.shard,
            "sequential": self.sequential,
            "sequential_seed": self.sequential_seed,
            "sweep": None if self.sweep is None else {
                "system": self.sweep.system, "mode": self.sweep.mode,
                "params": {k: list(v) for k, v in self.sweep.params.items()},
                "base": self.sweep.base},
            "configurations": [c.to_dict() for c in self.configurations],
            "config_from": None if self.chosen is None else str(self.chosen.path),
            "objectives": list(self.objectives),
        })


CONFIG_KEY = pytest.StashKey[RagbenchConfig]()


def get_config(config: pytest.Config) -> RagbenchConfig:
    """The session's :class:`RagbenchConfig`."""
    return config.stash[CONFIG_KEY]


def _int(name: str, raw: Any, minimum: int = 1) -> int:
    try:
        number = int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if number < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {number}")
    return number


def _seconds(name: str, raw: Any) -> float:
    try:
        number = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not number > 0 or number == float("inf"):
        raise ConfigError(f"{name} must be a positive number of seconds, got {raw!r}")
    return number


_BYTE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "kib": 1024,
               "mib": 1024**2, "gib": 1024**3}


def _bytes(name: str, raw: Any) -> int:
    """A size in bytes: ``1000000``, ``1 MB``, ``512KiB``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(raw))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _BYTE_UNITS:
        raise ConfigError(f"{name} must be a size in bytes (1000000, 1 MB, 512 KiB), "
                          f"got {raw!r}")
    number = int(float(match.group(1)) * _BYTE_UNITS[unit])
    if number < 1024:
        raise ConfigError(f"{name} must be at least 1024 bytes, got {raw!r}")
    return number


def _csv(raw: Any) -> tuple[str, ...]:
    if not raw:
        return ()
    if isinstance(raw, list | tuple):
        raw = ",".join(str(x) for x in raw)
    return tuple(part.strip() for part in str(raw).split(",") if part.strip())


def resolve_sqlite_url(url: str | None, base: Path) -> str | None:
    """Make a relative SQLite path absolute against ``base`` (the rootdir)."""
    if not url:
        return url
    for prefix in ("sqlite:///", "sqlite+pysqlite:///"):
        if url.startswith(prefix):
            rest = url[len(prefix):]
            if rest and not rest.startswith("/") and not rest.startswith(":memory:") \
                    and not rest.startswith("file:"):
                path_part, sep, query = rest.partition("?")
                return f"{prefix}{(base / path_part).resolve()}{sep}{query}"
    return url


def _parse_dbs(lines: list[str], base: Path) -> dict[str, str]:
    dbs: dict[str, str] = {}
    for line in lines:
        if not line.strip() or line.strip().startswith("#"):
            continue
        name, sep, url = line.partition("=")
        if not sep or not name.strip() or not url.strip():
            raise ConfigError(f"ragbench_dbs: expected 'name=url', got {line!r}")
        dbs[name.strip()] = resolve_sqlite_url(url.strip(), base) or ""
    return dbs


def collected_paths(config: pytest.Config, case_paths: Sequence[Path],
                    ragcsv_files: Sequence[Path], evaluate: bool) -> tuple[list[Path], list[Path]]:
    """The paths pytest collects from, and those of them the plugin adds to ``config.args``.

    The case folders (ini ``ragbench_cases``) are collected even when testpaths points
    elsewhere, unless paths were given on the command line; ``--ragbench-cases`` always.
    """
    base = config.invocation_params.dir
    current = [(base / arg.split("::")[0]).resolve() for arg in config.args]
    explicit = config.args_source == pytest.Config.ArgsSource.ARGS
    extra = [Path(p).resolve() for p in (config.getoption("ragbench_cases") or [])]
    candidates = extra if explicit else [*case_paths, *extra]
    if evaluate:  # ini ragbench_ragcsv / ragbench_traffic files may sit outside them
        candidates += ragcsv_files
    added: list[Path] = []
    for path in candidates:
        covered = any(path == c or c in path.parents for c in current)
        if path.exists() and not covered:
            added.append(path)
            current.append(path)
    return current, added


def load_settings_files(config: pytest.Config, paths: Sequence[Path], discover: bool
                        ) -> dict[str, Any]:
    """``[tool.ragbench]`` and the ragbench.toml files in play (``setting_files.py``).

    ``discover``: look for them below ``paths`` too (the controller; a worker reads the
    files of each case file's folders when its items run).
    """
    # lazy: file walking and TOML reading are for sessions that configure ragbench
    from pytest_ragbench.config import setting_files as files

    rootpath = config.rootpath.resolve()
    base = files.read(rootpath / "pyproject.toml", ("tool", "ragbench")) \
        or files.SettingsFile(rootpath / "pyproject.toml", rootpath)
    outside = sorted({p if p.is_dir() else p.parent for p in paths
                      if p != rootpath and rootpath not in p.parents}, key=lambda p: len(p.parts))
    tree = files.SettingsTree(base, (rootpath, *outside))
    in_play: list[SettingsFile] = []
    if discover:
        report = _path_option(config, "ragbench_report")
        skip = files.skipper(list(config.getini("norecursedirs") or ()),
                             [*(config.getoption("ignore", None) or ()), report])
        in_play = tree.discover(paths, skip)
    gates, gate_origin = files.session_gates(base, in_play)
    origin = {f"gates:{name}": str(path) for name, path in gate_origin.items()}
    for one in [base, *in_play]:
        origin.update({f"thresholds:{name}": str(one.path) for name in one.thresholds})
    triggers = {name: rule for one in sorted([base, *in_play], key=lambda f: len(f.folder.parts))
                for name, rule in one.triggers.items()}  # the deepest file's rule wins
    return {"thresholds": dict(base.thresholds), "gates": gates, "files": origin,
            "triggers": triggers,
            "toml_files": tuple(in_play), "tree": tree}


def _path_option(config: pytest.Config, dest: str) -> Path:
    """A path flag is relative to the invocation directory, its ini key to the rootdir."""
    cli = config.getoption(dest)
    if cli:
        return (config.invocation_params.dir / str(cli)).resolve()
    return (config.rootpath / str(config.getini(dest))).resolve()


def _optional_path_option(config: pytest.Config, dest: str) -> Path | None:
    """Like :func:`_path_option`, or None when neither the flag nor the ini key is set."""
    if not config.getoption(dest) and not config.getini(dest):
        return None
    return _path_option(config, dest)


def build_config(config: pytest.Config) -> RagbenchConfig:
    """Resolve flags, ini keys and TOML files into a :class:`RagbenchConfig`."""
    rootpath = config.rootpath
    invocation = config.invocation_params.dir
    ini_paths = [Path(p) for p in config.getini("ragbench_cases")]
    if not ini_paths:
        ini_paths = [rootpath / "test_cases"]
    extra = [(invocation / p).resolve() for p in (config.getoption("ragbench_cases") or [])]
    case_paths = tuple(dict.fromkeys(p.resolve() for p in [*ini_paths, *extra]))

    cli_db = config.getoption("ragbench_db_url")
    db_url = (resolve_sqlite_url(cli_db, invocation) if cli_db
              else resolve_sqlite_url(config.getini("ragbench_db_url") or None, rootpath))
    no_cache = bool(options.value(config, "ragbench_no_cache"))
    gate = str(options.value(config, "ragbench_gate") or "mean")
    if gate not in ("mean", "ci-lower"):
        raise ConfigError(f"--ragbench-gate must be 'mean' or 'ci-lower', got {gate!r}"
                          f"{did_you_mean(gate, ('mean', 'ci-lower'))}")
    fail_on = options.value(config, "ragbench_fail_on") or None
    for reason in _csv(fail_on):
        if reason not in FAIL_ON:
            raise ConfigError(f"--ragbench-fail-on takes {', '.join(FAIL_ON)} (comma-separated),"
                              f" got {reason!r}{did_you_mean(reason, FAIL_ON)}")
    window = str(config.getini("ragbench_window") or "week").strip()
    if window not in WINDOWS:
        raise ConfigError(f"ini ragbench_window must be one of {', '.join(WINDOWS)}, got "
                          f"{window!r}{did_you_mean(window, WINDOWS)}")
    prices = parse_prices(config.getini("ragbench_prices"))
    target_width = _optional_float("ragbench_target_width",
                                   config.getini("ragbench_target_width"))
    if target_width is not None and target_width <= 0:
        raise ConfigError(f"ini ragbench_target_width must be > 0, got {target_width}")
    redact = tuple(config.getini("ragbench_redact"))
    for pattern in redact:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"ini ragbench_redact: {pattern!r} is not a regular expression:"
                              f" {exc}") from None
    perturb = tuple(dict.fromkeys(_csv(options.value(config, "ragbench_perturb")))) \
        or PERTURBATION_KINDS
    unknown = [p for p in perturb if p not in PERTURBATION_KINDS]
    if unknown:
        raise ConfigError(f"--ragbench-perturb: unknown kind(s) {', '.join(unknown)}; "
                          f"choose from {', '.join(PERTURBATION_KINDS)}")

    evaluate = bool(options.value(config, "ragbench"))
    ragcsv_files = tuple((rootpath / p).resolve() for p in config.getini("ragbench_ragcsv")) \
        or ragcsv_env_files(config)
    traffic_files = tuple((rootpath / p).resolve() for p in config.getini("ragbench_traffic"))
    paths, _ = collected_paths(config, case_paths, (*ragcsv_files, *traffic_files), evaluate)
    settings = load_settings_files(config, paths, discover=not hasattr(config, "workerinput"))
    tuning = _tuning(config, case_paths)
    corpus = [p if p.is_absolute() else (rootpath / p)
              for p in (Path(c) for c in config.getini("ragbench_corpus"))]
    if not corpus:
        corpus = [p / "corpus" for p in case_paths if (p / "corpus").is_dir()]
    return RagbenchConfig(
        rootpath=rootpath,
        evaluate=evaluate,
        case_paths=case_paths,
        db_url=db_url,
        dbs=_parse_dbs(config.getini("ragbench_dbs"), rootpath),
        systems=_csv(options.value(config, "ragbench_systems")),
        sweep=tuning["sweep"], chosen=tuning["chosen"], objectives=tuning["objectives"],
        llm_url=options.value(config, "ragbench_llm_url") or None,
        llm_model=env_setting(config, "ragbench_llm_model") or None,
        judge_url=options.value(config, "ragbench_judge_url") or None,
        judge_model=env_setting(config, "ragbench_judge_model") or None,
        concurrency=_int("--ragbench-concurrency",
                         env_setting(config, "ragbench_concurrency") or 8),
        cache_dir=None if no_cache else _path_option(config, "ragbench_cache"),
        report_dir=_path_option(config, "ragbench_report"),
        save=options.value(config, "ragbench_save") or None,
        compare=options.value(config, "ragbench_compare") or None,
        fail_on=fail_on,
        gate=gate,
        breakdown=_csv(options.value(config, "ragbench_breakdown")),
        robustness=bool(options.value(config, "ragbench_robustness")),
        perturb=perturb,
        robustness_examples=_int("--ragbench-robustness-examples",
                                 options.value(config, "ragbench_robustness_examples")),
        ragcsv_files=ragcsv_files,
        corpus_paths=tuple(p.resolve() for p in corpus),
        thresholds=settings["thresholds"],
        gates=settings["gates"],
        triggers=settings["triggers"],
        k=_optional_int("ragbench_k", config.getini("ragbench_k")),
        gate_min_n=_int("ragbench_gate_min_n", config.getini("ragbench_gate_min_n")
                        or options.GATE_MIN_N),
        cluster_by=str(config.getini("ragbench_cluster_by") or "").strip() or None,
        judge_labels=_optional_path_option(config, "ragbench_judge_labels"),
        **_qdrant_settings(config),
        limit=_optional_int("--ragbench-limit", env_setting(config, "ragbench_limit")),
        max_tokens=_optional_int("--ragbench-max-tokens",
                                 env_setting(config, "ragbench_max_tokens")),
        ragcsv_debug=bool(env_setting(config, "ragcsv_debug")),
        traffic_files=traffic_files,
        window=window,
        sample=_optional_int("--ragbench-sample", options.value(config, "ragbench_sample")),
        redact=redact,
        prices=prices,
        target_width=target_width,
        timeout_s=_seconds("--ragbench-timeout", options.value(config, "ragbench_timeout")),
        retries=_int("--ragbench-retries", options.value(config, "ragbench_retries"), minimum=0),
        sql_timeout_s=_seconds("ragbench_sql_timeout", config.getini("ragbench_sql_timeout")),
        max_reply_bytes=_bytes("ragbench_max_reply_bytes",
                               config.getini("ragbench_max_reply_bytes")),
        **_judging(config),
        setting_files=settings["files"],
        toml_files=settings["toml_files"],
        settings_tree=settings["tree"],
        resume=bool(options.value(config, "ragbench_resume")),
        sequential=bool(options.value(config, "ragbench_sequential")),
        sequential_seed=_int("ragbench_sequential_seed",
                             config.getini("ragbench_sequential_seed") or "0", minimum=0),
        system_url=options.value(config, "ragbench_system_url") or None,
        stream=bool(options.value(config, "ragbench_stream")),
        **_shard_settings(config, invocation),
    )


def _tuning(config: pytest.Config, case_paths: Sequence[Path]) -> dict[str, Any]:
    """The sweep, ``--ragbench-config-from`` and the objectives.

    Nothing is imported unless a sweep or a base file is given. The configurations (which
    need the system factories) are added by the plugin: :func:`with_configurations`.
    """
    objectives = tuple(dict.fromkeys(
        o.strip() for raw in (options.value(config, "ragbench_objective") or ())
        for o in str(raw).split(",") if o.strip()))
    for objective in objectives:
        if "." not in objective:
            raise ConfigError(f"--ragbench-objective {objective!r}: name a metric as "
                              "kind.metric (\"vector.source_hit@k\")")
    flags = config.getoption("ragbench_sweep") or []
    chosen_path = _optional_path_option(config, "ragbench_config_from")
    rootpath = config.rootpath.resolve()
    candidates = [(rootpath / "pyproject.toml", ("tool", "ragbench")),
                  *((folder / "ragbench.toml", ()) for folder in
                    dict.fromkeys([rootpath, *(p.resolve() for p in case_paths)]))]
    if not flags and chosen_path is None \
            and not any(_mentions_sweep(path) for path, _ in candidates):
            return {"sweep": None, "chosen": None, "objectives": objectives}
    # lazy: TOML reading is for sessions that sweep
    from pytest_ragbench.config import sweep as sweeps

    chosen = sweeps.read_config_from(chosen_path) if chosen_path is not None else None
    tables = [t for path, keys in candidates
              if (t := sweeps.read_file_table(path, keys)) is not None]
    sweep = sweeps.combine(tables, flags, chosen)
    return {"sweep": sweep, "chosen": chosen, "objectives": objectives}


def with_configurations(settings: RagbenchConfig,
                        configurations: Sequence[Configuration]) -> RagbenchConfig:
    """``settings`` with a sweep's configurations, run as named systems after ``systems``."""
    names = [c.name for c in configurations]
    return replace(settings, configurations=tuple(configurations),
                               systems=tuple(dict.fromkeys([*settings.systems, *names])))


def _mentions_sweep(path: Path) -> bool:
    """Whether a settings file may hold a sweep table (read only when it does)."""
    try:
        return path.is_file() and "sweep" in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def _shard_settings(config: pytest.Config, invocation: Path) -> dict[str, Any]:
    """``--ragbench-shard`` (or the scheduler's environment) and ``--ragbench-merge``."""
    merge_from = tuple((invocation / p).resolve() for p in config.getoption("ragbench_merge")
                       or [])
    durations = _optional_path_option(config, "ragbench_shard_durations")
    option = options.value(config, "ragbench_shard") or None
    # run/shards.py reads the schedulers' variables; not imported when none is set
    if merge_from or not (option or os.environ.get("JOB_COMPLETION_INDEX")
                          or os.environ.get("SLURM_ARRAY_TASK_ID")):
        return {"shard": None, "merge_from": merge_from, "shard_durations": durations}
    from pytest_ragbench.run.shards import resolve

    shard = resolve(option)
    return {"shard": str(shard) if shard else None, "merge_from": merge_from,
            "shard_durations": durations}


def _qdrant_settings(config: pytest.Config) -> dict[str, Any]:
    """``--ragbench-qdrant-url``/``-path``, ``--ragbench-collection``, ``--ragbench-max-docs``."""
    url = options.value(config, "ragbench_qdrant_url") or None
    path = options.value(config, "ragbench_qdrant_path") or None
    if url and path:
        raise ConfigError("give --ragbench-qdrant-url or --ragbench-qdrant-path, not both")
    if path and path != ":memory:":
        path = str(_path_option(config, "ragbench_qdrant_path"))
    max_docs = options.value(config, "ragbench_max_docs")
    return {"qdrant_url": url, "qdrant_path": path,
            "collection": options.value(config, "ragbench_collection") or None,
            "max_docs": _int("--ragbench-max-docs", max_docs) if max_docs else None}


def _optional_int(name: str, raw: Any) -> int | None:
    return None if raw in (None, "") else _int(name, raw)


def _optional_float(name: str, raw: Any) -> float | None:
    return None if raw in (None, "") else _float(name, raw)


def _judging(config: pytest.Config) -> dict[str, Any]:
    """The options of judged metrics, checked."""
    share = _float("--ragbench-max-unscored", options.value(config, "ragbench_max_unscored"))
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"--ragbench-max-unscored must be a share from 0 to 1, got {share:g}")
    raw_temperature = options.value(config, "ragbench_judge_temperature")
    temperature = None
    if raw_temperature not in (None, ""):
        temperature = _float("--ragbench-judge-temperature", raw_temperature)
        if temperature < 0:
            raise ConfigError(f"--ragbench-judge-temperature must be at least 0, "
                              f"got {temperature:g}")
    policy = str(options.value(config, "ragbench_inconclusive") or "pass")
    if policy not in ("pass", "fail"):
        raise ConfigError(f"--ragbench-inconclusive must be 'pass' or 'fail', got {policy!r}")
    return {"max_unscored": share,
            "judge_samples": _int("--ragbench-judge-samples",
                                  options.value(config, "ragbench_judge_samples")),
            "judge_temperature": temperature, "inconclusive": policy}


def _float(name: str, raw: Any) -> float:
    try:
        number = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(number):  # NaN compares false with everything; inf is no setting
        raise ConfigError(f"{name} must be a finite number, got {raw!r}")
    return number
