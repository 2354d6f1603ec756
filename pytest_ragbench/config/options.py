"""Command-line flags and ini keys of the ``ragbench`` group (README lists them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

GATE_MIN_N = 5  # scored items a gate needs (ini ragbench_gate_min_n)


@dataclass(frozen=True)
class Option:
    """One ``--ragbench-*`` flag with its ini key of the same name."""

    flag: str
    help: str
    type: str = "string"  # ini type: string, bool, linelist, args
    default: Any = None
    action: str | None = None
    ini: bool = True

    @property
    def dest(self) -> str:
        """Return the ``config.option`` attribute / ini key name (``ragbench_db_url``)."""
        return self.flag.lstrip("-").replace("-", "_")


OPTIONS: tuple[Option, ...] = (
    Option("--ragbench", "collect and run evaluation items (system under test answers cases)",
           type="bool", default=False, action="store_true"),
    Option("--ragbench-cases", "extra case paths (files or folders), besides ini ragbench_cases",
           type="args", default=[], action="extend"),
    Option("--ragbench-db-url", "SQLAlchemy URL of the database for sql/hybrid cases"),
    Option("--ragbench-systems", "evaluate with several named systems and compare them (A,B,...)"),
    Option("--ragbench-llm-url", "base URL of an OpenAI-compatible generator "
           "(API key from env RAGBENCH_LLM_API_KEY)"),
    Option("--ragbench-llm-model", "model name for the OpenAI-compatible generator"),
    Option("--ragbench-judge-url", "base URL of an OpenAI-compatible judge "
           "(API key from env RAGBENCH_JUDGE_API_KEY)"),
    Option("--ragbench-judge-model", "model name for the OpenAI-compatible judge"),
    Option("--ragbench-concurrency", "parallel model calls (default 8; env RAGCSV_CONCURRENCY)"),
    Option("--ragbench-cache", "embedding/LLM cache directory (default .ragbench_cache)",
           default=".ragbench_cache"),
    Option("--ragbench-no-cache", "do not read or write the embedding/LLM cache",
           type="bool", default=False, action="store_true"),
    Option("--ragbench-report", "directory for report files (default .ragbench)",
           default=".ragbench"),
    Option("--ragbench-save", "save this run as runs/NNNN_NAME.json in the report directory"),
    Option("--ragbench-compare", "compare with a saved run (NAME or path) using paired tests"),
    Option("--ragbench-fail-on", "fail the session on 'regression' against --ragbench-compare, "
           "on 'drift' (a significant worsening of the latest traffic window) or on "
           "'critical' (a critical [triggers] alarm); several comma-separated"),
    Option("--ragbench-gate", "apply thresholds and gates to the 'mean' (default) or 'ci-lower'",
           default="mean"),
    Option("--ragbench-breakdown", "fields to break metrics down by "
           "(default category,doc_type,question_type,difficulty)",
           default="category,doc_type,question_type,difficulty"),
    Option("--ragbench-robustness", "add perturbed variants of each case with metamorphic checks",
           type="bool", default=False, action="store_true"),
    Option("--ragbench-perturb", "perturbation kinds for robustness items "
           "(e.g. typos,case,injection; default all)"),
    Option("--ragbench-robustness-examples", "perturbed examples per case (default 10)",
           default="10"),
    # Judge calibration against human labels (README "Calibrating judges against people").
    Option("--ragbench-judge-labels", "human labels to calibrate metrics against: JSONL lines "
           '{"id", "metric", "score"} (optional "kind", "system"); prediction-powered '
           "intervals of the human mean"),
    # Qdrant retriever, collection reuse and BEIR's --max_docs
    Option("--ragbench-qdrant-url", "Qdrant server for the retriever, BEIR and memory stores "
           "(API key from env RAGBENCH_QDRANT_API_KEY)"),
    Option("--ragbench-qdrant-path", "Qdrant in process (qdrant-client local mode): a folder, "
           "or :memory:"),
    Option("--ragbench-collection", "Qdrant collection to build if missing and reuse "
           "(default: named after the corpus and the embedder)"),
    Option("--ragbench-max-docs", "index only the first N documents of each corpus "
           "(BEIR judgments of the others are dropped)"),
    # RAGCSV knobs; each also read from its RAGCSV_* environment variable
    Option("--ragbench-limit", "evaluate only the first N cases of each case file "
           "(env RAGCSV_LIMIT)"),
    Option("--ragbench-max-tokens", "the generator's answer cap in tokens (default 128; 512 "
           "for RAGCSV rows; env RAGCSV_MAX_TOKENS)"),
    # -- bounds on outside calls --
    Option("--ragbench-timeout", "seconds one model or vector-database request may take "
           "before it is retried (default 60)", default="60"),
    Option("--ragbench-retries", "retries of a failed or timed-out model or vector-database "
           "request (default 4). Worst case per call: (retries + 1) x timeout plus the "
           "backoff between tries (at most 20 s each): with the defaults 5 x 60 s + 7.5 s = "
           "307.5 s", default="4"),
    # Judged metrics you can trust: unscored limit, repeated judging.
    Option("--ragbench-max-unscored", "with a judge, fail the session when a judged metric "
           "has more than this share of its items unscored (default 0.2)", default="0.2"),
    Option("--ragbench-judge-samples", "ask the judge N times per item with distinct seeds; "
           "the item's score is the mean (default 1)", default="1"),
    Option("--ragbench-judge-temperature", "judge temperature (default 0 for one sample, "
           "0.7 for more)"),
    Option("--ragbench-inconclusive", "an item whose threshold lies inside its own judge "
           "interval (3+ samples): 'pass' with a warning (default) or 'fail'", default="pass"),
    # One metric vocabulary: what each kind records.
    Option("--ragbench-metrics", "list the metrics each kind records (range, direction, "
           "definition, default threshold) and exit", type="bool", default=False,
           action="store_true", ini=False),
    Option("--ragbench-plan", "print what deciding each gate takes (items, labels, model "
           "calls, tokens, cost), from the report directory's last run or the saved run of "
           "--ragbench-compare, and exit without asking any model", type="bool",
           default=False, action="store_true", ini=False),
    # A RAG service as a black box (README "Evaluating your own RAG system")
    Option("--ragbench-system-url", "evaluate the RAG service at this URL: one POST a question "
           "(ini ragbench_system_request, ragbench_system_answer, ragbench_system_contexts, "
           "ragbench_system_headers)"),
    Option("--ragbench-stream", "stream answers and record their time to first token "
           "(ttft_ms) and mean gap between chunks (itl_ms): the --ragbench-llm-url generator "
           "streams, a system with astream(question, history=None) is asked through it",
           type="bool", default=False, action="store_true"),
    Option("--ragbench-drafts", "also run generated cases still marked 'review: draft' "
           "(accepted and hand-written cases always run, rejected ones never)",
           type="bool", default=False, action="store_true"),
    Option("--ragbench-sequential", "run the evaluation items in a seeded random order "
           "(stratified by kind and category) and stop running them once every gate is "
           "decided by its anytime-valid confidence sequence (ini ragbench_sequential_seed)",
           type="bool", default=False, action="store_true"),
    # -- production traffic (README "Production traffic") --
    Option("--ragbench-sample", "judge a seeded sample of N logged interactions, stratified "
           "by time window; the judged metrics are estimated for the whole traffic"),
    # -- interrupted runs --
    Option("--ragbench-resume", "continue the newest interrupted run of the report directory: "
           "its finished items are kept and not run again, the report covers the whole run",
           type="bool", default=False, action="store_true"),
    # One run spread over machines (run/shards.py)
    Option("--ragbench-shard", "run shard I/N of the evaluation items (a stable partition by "
           "case; also JOB_COMPLETION_INDEX with RAGBENCH_SHARDS, SLURM_ARRAY_TASK_ID with "
           "SLURM_ARRAY_TASK_COUNT); gates are decided when the shards are merged"),
    Option("--ragbench-shard-durations", "balance the shards by the mean duration of each "
           "item kind in this saved run or results.json (the same file on every machine)"),
    # Choosing the best configuration (README "Sweeps: choosing the best configuration")
    Option("--ragbench-sweep", "sweep a keyword parameter of the embedded system (or the "
           "[sweep] system): 'top_k=3,5,10'; repeatable; each configuration runs as a named "
           "system", ini=False, action="append"),
    Option("--ragbench-objective", "a metric the best configuration is chosen by, as "
           "kind.metric; repeatable (default: the gated metrics)", type="linelist",
           default=[], action="append"),
    Option("--ragbench-config-from", "the base configuration (a report's best.toml): the "
           "default of a sweep, and without one the configuration the run evaluates"),
    Option("--ragbench-merge", "report on the records of these shard report folders instead "
           "of running the items (what `ragbench merge` runs)",
           type="args", default=[], action="extend", ini=False),
)

# Ini-only keys (no flag).
INI_ONLY: tuple[tuple[str, str, str, Any], ...] = (
    ("ragbench_cases", "paths holding case files (default test_cases)", "paths", []),
    ("ragbench_dbs", "named databases as 'name=url' lines", "linelist", []),
    ("ragbench_ragcsv", "extra .csv files to read as RAGCSV", "linelist", []),
    ("ragbench_traffic", "extra logged-traffic files (JSONL of ragbench.traffic/1, or "
     "OTLP/JSON when named *.otlp.jsonl)", "linelist", []),
    ("ragbench_window", "the time window of traffic trends: day, week (default) or month",
     "string", "week"),
    ("ragbench_redact", "regular expressions masked in logged queries, contexts and answers "
     "before anything is written", "linelist", []),
    ("ragbench_corpus", "document folders/files indexed by the default retriever", "linelist", []),
    # Intervals and gates: gates need this many scored items; clustered cases.
    ("ragbench_gate_min_n", "fewer scored items than this and a gate is not checked "
     f"(fails under --ragbench-gate ci-lower; default {GATE_MIN_N})", "string",
     str(GATE_MIN_N)),
    ("ragbench_cluster_by", "a case field whose values group items that are not "
     "independent (default: the case field 'cluster')", "string", ""),
    # -- bounds on outside calls --
    # k follows the system: the cut-off of source_hit@k and friends when a system does not
    # say its top_k, and the number of contexts the built-in systems retrieve (default 5).
    ("ragbench_k", "the k of source_hit@k, source_recall@k and source_ndcg@k for a system "
     "without a top_k attribute; the built-in systems retrieve this many contexts "
     "(default: the system's top_k, else the number of contexts it returned)", "string", ""),
    # -- seed 004's knobs of the embedded system (README "Tuning the embedded system") --
    ("ragbench_embedding_model", "the embedder: a sentence-transformers folder, or a model id "
     "in the local Hugging Face cache (default: the bundled all-MiniLM-L6-v2)", "string", ""),
    ("ragbench_device", "where the embedder and a cross-encoder run: auto (a GPU when torch "
     "sees one), cpu (default), cuda, cuda:N or mps", "string", ""),
    ("ragbench_min_score", "drop retrieved contexts whose cosine similarity to the query is "
     "below this", "string", ""),
    ("ragbench_recency_weight", "time decay: score x max(0, 1 - weight x age in years of the "
     "date field behind the newest candidate)", "string", ""),
    ("ragbench_date_field", "the document metadata field holding its date (default date)",
     "string", ""),
    ("ragbench_filter", "metadata filter of retrieval as 'field = value' lines (a value list "
     "'a, b' matches any)", "linelist", []),
    ("ragbench_fusion_weight", "hybrid retrieval: the dense share (0-1) of a weighted fusion "
     "of min-max normalised scores (default: reciprocal-rank fusion)", "string", ""),
    ("ragbench_query_expansion", "true: the generator adds search terms to each query "
     "(cached)", "string", ""),
    ("ragbench_rerank", "re-rank the broad candidates: llm (the generator grades each 0-10) "
     "or a cross-encoder model folder", "string", ""),
    ("ragbench_rerank_k", "candidates retrieved before re-ranking, the system keeping its "
     "top_k (default 10)", "string", ""),
    ("ragbench_sql_timeout", "seconds one SQL statement (and connecting) may take before it "
     "is stopped and its item fails (default 30)", "string", "30"),
    # -- the RAG service of --ragbench-system-url --
    ("ragbench_system_request", 'its JSON request body, with "{question}" and "{history}" '
     '(default {"question": "{question}", "history": "{history}"})', "string", ""),
    ("ragbench_system_answer", "JMESPath to the answer text in its reply (default answer)",
     "string", ""),
    ("ragbench_system_contexts", "JMESPath to its contexts (objects with id, text, score, "
     "source, metadata; default contexts)", "string", ""),
    ("ragbench_system_headers", "request headers as 'Name = ENV_VAR' lines (values from the "
     "environment, never written anywhere)", "linelist", []),
    ("ragbench_max_reply_bytes", "model replies (and other texts of a record) are stored cut "
     "to this many bytes, the cut noted (default 1000000; suffixes kB, MB, KiB, MiB)",
     "string", "1000000"),
    # What a verdict costs (README "Planning a run and its cost")
    ("ragbench_prices", "model prices in US dollars per 1M tokens, one TOML line per model: "
     "'gpt-4o-mini = {input = 0.15, output = 0.60}'; usage rows then give their cost",
     "linelist", []),
    ("ragbench_sequential_seed", "--ragbench-sequential: the seed of the items' random "
     "order (default 0)", "string", "0"),
    ("ragbench_target_width", "--ragbench-plan: also the items each gated metric needs for a "
     "95% CI half-width of at most this", "string", ""),
    ("ragbench_junit_properties", "write each item's metrics and each check's numbers as "
     "<properties> of its --junitxml <testcase> (outside the xunit2 schema, as pytest's "
     "record_property is; default false)", "bool", False),
)


def register(parser: pytest.Parser) -> None:
    """Add every ragbench flag to the ``ragbench`` group and its ini key."""
    group = parser.getgroup("ragbench", "RAG evaluation (pytest-ragbench)")
    for opt in OPTIONS:
        kwargs: dict[str, Any] = {"dest": opt.dest, "help": opt.help}
        if opt.action == "store_true":
            kwargs.update(action="store_true", default=None)
        elif opt.action == "append":
            kwargs.update(action="append", default=None, metavar=opt.dest.upper().split("_", 1)[1])
        elif opt.action == "extend":
            kwargs.update(action="extend", nargs="+", default=None, metavar="PATH")
        else:
            kwargs.update(action="store", default=None, metavar=opt.dest.upper().split("_", 1)[1])
        group.addoption(opt.flag, **kwargs)
        if opt.ini and opt.dest != "ragbench_cases":
            parser.addini(opt.dest, opt.help, type=opt.type, default=opt.default)  # type: ignore[arg-type]
    for name, help_text, ini_type, default in INI_ONLY:
        parser.addini(name, help_text, type=ini_type, default=default)  # type: ignore[arg-type]


def value(config: pytest.Config, dest: str) -> Any:
    """Return a flag's value, falling back to its ini key, then the default."""
    cli = config.getoption(dest, default=None)
    if cli not in (None, [], ""):
        return cli
    return config.getini(dest)
