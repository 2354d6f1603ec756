"""``pytest --ragbench`` with Qdrant: BEIR, the built-in systems, collection reuse, max-docs.

Every run is a subprocess (torch is loaded once per process) and all share one embedding
cache (tests/qdrant_support.py), so the bundled corpus is embedded once per test session.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("qdrant_client", reason="needs the extra 'qdrant'")
pytest.importorskip("faiss", reason="needs the extra 'embed'")

from tests.conftest import REPO_ROOT
from tests.project import RagbenchProject
from tests.qdrant_support import shared_embedding_cache  # noqa: F401 (a fixture)

BUNDLED = REPO_ROOT / "test_cases" / "beir" / "nba_mini"


# A role filter (filter_metadata by role) and a filter on a list of values.
FILTERED_MEMORY = """
kind: memory
cases:
  - id: opponent_only
    query: "Arguments about carbon and fuel"
    setup:
      - {role: proponent, content: "Nuclear has the smallest carbon footprint."}
      - {role: opponent, content: "Renewable energy is carbon-free."}
      - {role: proponent, content: "Uranium mining has minimal environmental impact."}
      - {role: opponent, content: "Wind and solar have no fuel extraction needed."}
    filter_metadata: {role: opponent}
    expected: [1, 3]
  - id: answers_only
    query: "What did you explain about entanglement?"
    setup:
      - {role: user, content: "What is quantum entanglement?", metadata: {type: question}}
      - {role: assistant, content: "Entangled particles stay connected.",
         metadata: {type: answer}}
      - {role: user, content: "An example of entanglement?", metadata: {type: question}}
      - {role: assistant, content: "Imagine two entangled photons.", metadata: {type: answer}}
    filter_metadata: {type: [answer, summary], role: assistant}
    expected: [1, 3]
"""


def _project(pytester: pytest.Pytester, memory: bool = False) -> RagbenchProject:
    project = RagbenchProject(pytester)
    shutil.copytree(BUNDLED, project.cases_dir() / "beir" / "nba_mini")
    project.gates((REPO_ROOT / "test_cases" / "ragbench.toml").read_text(encoding="utf-8"))
    if memory:
        shutil.copy(REPO_ROOT / "test_cases" / "memory_scenarios.yaml", project.cases_dir())
        project.cases("filtered_memory.yaml", FILTERED_MEMORY)
    return project


def _run(project: RagbenchProject, cache: Path, report: str, *args: str) -> Any:
    return project.run("--ragbench", "-p", "no:cacheprovider", f"--ragbench-cache={cache}",
                       f"--ragbench-report={report}", *args, subprocess=True)


def _items(project: RagbenchProject, report: str) -> dict[tuple[str | None, str], dict]:
    return {(r["system"], r["case_id"]): r for r in project.items(report)}


def _beir(project: RagbenchProject, report: str) -> dict[str, Any]:
    beir: dict[str, Any] = project.results(report)["beir"]["nba_mini"]
    return beir


def _ndcg(items: dict[tuple[str | None, str], dict], system: str | None) -> dict[str, float]:
    """Scored items only (with --ragbench-max-docs some are unscored)."""
    return {case: r["metrics"]["nDCG@10"] for (name, case), r in items.items()
            if name == system and r["kind"] == "beir" and "nDCG@10" in r["metrics"]}


def test_bundled_beir_through_qdrant_equals_faiss_and_reuses_its_collection(
        pytester: pytest.Pytester, shared_embedding_cache: Path) -> None:  # noqa: F811
    project = _project(pytester)
    storage = project.path / "qdrant"
    # 1. FAISS and Qdrant side by side: built-in systems, one local-mode folder.
    _run(project, shared_embedding_cache, "r1", f"--ragbench-qdrant-path={storage}",
                 "--ragbench-systems=dense,qdrant_dense,hybrid,qdrant")
    items = _items(project, "r1")
    assert len(items) == 34 * 4
    dense, qdrant_dense = _ndcg(items, "dense"), _ndcg(items, "qdrant_dense")
    assert dense.keys() == qdrant_dense.keys() and len(dense) == 34
    for case in dense:
        assert qdrant_dense[case] == pytest.approx(dense[case], abs=1e-6), case
    hybrid, qdrant = _ndcg(items, "hybrid"), _ndcg(items, "qdrant")
    assert abs(sum(qdrant.values()) - sum(hybrid.values())) / 34 <= 0.01
    beir = _beir(project, "r1")
    assert beir["dense"]["metrics"]["nDCG@10"] == \
        pytest.approx(beir["qdrant_dense"]["metrics"]["nDCG@10"], abs=1e-6)
    described = beir["qdrant_dense"]["retriever"] + beir["qdrant"]["retriever"]
    assert "built: 337 documents uploaded in 2 batches" in described
    assert "reused (337 documents, no upload)" in described  # the other mode, same collection

    # 2. The plain run with the path: Qdrant's hybrid for BEIR, the collection reused.
    second = _run(project, shared_embedding_cache, "r2", f"--ragbench-qdrant-path={storage}")
    second.assert_outcomes(passed=34)
    assert second.ret == pytest.ExitCode.OK  # the bundled gates hold
    second.stdout.fnmatch_lines(["*retrieved by Qdrant hybrid: dense sentence-transformers/"
                                 "all-MiniLM-L6-v2 + BM25 sparse, RRF k=60 fused in the engine "
                                 f"at local mode {storage}, collection 'ragbench_*' reused "
                                 "(337 documents, no upload)"])
    # Tied scores (frequent in this templated corpus) come back in the engine's order; a
    # local folder is searched as reloaded from the start, so a reused one ranks alike.
    assert _ndcg(_items(project, "r2"), None) == pytest.approx(qdrant, abs=1e-9)

    # 3. Under pytest-xdist each worker builds its own folder, with the first run's numbers.
    third = _run(project, shared_embedding_cache, "r3", f"--ragbench-qdrant-path={storage}",
                 "-n", "2")
    third.assert_outcomes(passed=34)
    assert _ndcg(_items(project, "r3"), None) == pytest.approx(qdrant, abs=1e-9)
    assert sorted(p.name for p in storage.iterdir() if p.name.startswith("gw")) == \
        ["gw0", "gw1"]

    # 4. A damaged collection is refused, item by item, and left as it is.
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(storage))
    (name,) = [c.name for c in client.get_collections().collections]
    client.delete(name, points_selector=models.PointIdsList(points=[0]))
    client.close()
    fourth = _run(project, shared_embedding_cache, "r4", f"--ragbench-qdrant-path={storage}")
    fourth.assert_outcomes(failed=34)
    fourth.stdout.fnmatch_lines([
        f"collection '{name}' at local mode {storage} does not match this corpus: it holds "
        "336 points but its manifest says 337 documents (damaged or changed since). It is "
        "left untouched: delete it, or choose another name with --ragbench-collection"])
    client = QdrantClient(path=str(storage))
    assert client.count(name).count == 336
    client.close()


def test_max_docs_and_memory_scenarios_through_qdrant(
        pytester: pytest.Pytester, shared_embedding_cache: Path) -> None:  # noqa: F811
    project = _project(pytester, memory=True)
    corpus = (BUNDLED / "corpus.jsonl").read_text().splitlines()
    kept = {json.loads(line)["_id"] for line in corpus[:100]}
    # FAISS and Qdrant in memory (no flag), the embedded memory store.
    plain = _run(project, shared_embedding_cache, "a", "--ragbench-max-docs=100",
                 "--ragbench-systems=dense,qdrant_dense")
    a = _items(project, "a")
    dense, qdrant_dense = _ndcg(a, "dense"), _ndcg(a, "qdrant_dense")
    assert 0 < len(dense) < 34 and dense.keys() == qdrant_dense.keys()
    assert dense == pytest.approx(qdrant_dense, abs=1e-6)
    # --ragbench-qdrant-path: the BEIR retriever and the memory store are Qdrant's.
    pointed = _run(project, shared_embedding_cache, "b", "--ragbench-max-docs=100",
                   "--ragbench-qdrant-path=:memory:")
    b = _items(project, "b")
    for result in (plain, pointed):
        assert "Traceback" not in result.stdout.str()

    for records in (a, b):
        for record in records.values():
            if record["kind"] != "beir":
                continue
            assert set(record["evidence"]["qrels"]) <= kept
            assert {doc for doc, _ in record["evidence"]["ranking"]} <= kept
    unscored = [r for r in b.values() if r["kind"] == "beir" and r["unscored"]]
    assert unscored and all(
        "no relevant document among the documents indexed (--ragbench-max-docs 100: indexed "
        "the first 100 of 337 documents; " in r["unscored"]["nDCG@10"] for r in unscored)
    beir = _beir(project, "b")[""]
    assert "--ragbench-max-docs 100: indexed the first 100 of 337 documents; " in \
        beir["retriever"] and "judgments name other documents and were dropped" in \
        beir["retriever"] and beir["retriever"].startswith("Qdrant hybrid")
    warned = [r for r in b.values() if r["kind"] == "beir" and r["warnings"]]
    assert len(warned) == 1  # once per dataset

    memory_a = {k: r["metrics"] for k, r in a.items() if r["kind"] == "memory"}
    memory_b = {k: r["metrics"] for k, r in b.items() if r["kind"] == "memory"}
    assert len(memory_a) == 10 and memory_a.keys() == memory_b.keys()
    for key, metrics in memory_a.items():
        assert memory_b[key] == pytest.approx(metrics, abs=1e-5), key
    for case in ("opponent_only", "answers_only"):  # only memories passing the filter
        got = b[(None, case)]["evidence"]["got"].splitlines()
        assert [line[:3] for line in got] == ["[1]", "[3]"] or \
            [line[:3] for line in got] == ["[3]", "[1]"], got
        assert b[(None, case)]["status"] == "passed"
