"""BEIR, RAGCSV, plain QA and case-file adapters, on real and bundled data."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pytest_ragbench.datasets.sources import ADAPTERS, beir, cases, get_adapter, qa, ragcsv
from pytest_ragbench.formats.beir import read_beir
from tests.conftest import REPO_ROOT, oracle_file


def test_registry() -> None:
    for name in ADAPTERS:
        module = get_adapter(name)
        assert name == module.NAME and callable(module.adapt_source)
        assert isinstance(module.OPTIONS, dict)
    with pytest.raises(KeyError, match="unknown adapter 'nope'"):
        get_adapter("nope")


def test_beir_msmarco_queries_become_samples() -> None:
    folder = oracle_file("beir-subsets", "msmarco")
    data = read_beir(folder)
    result = beir.adapt_source(folder, {})
    assert result.errors == [] and not result.skipped
    assert len(result.samples) == 43  # 7 of the 50 queries have no judgments
    for s in result.samples:
        judged = data.qrels[s.metadata["query_id"]]
        best = max(judged.values())
        top = min(d for d, g in judged.items() if g == best)
        assert s.ground_truth == data.corpus[top].text.strip()
        assert s.contexts[0] == s.ground_truth and len(s.contexts) <= 5
        grades = [judged[d] for d in s.metadata["context_ids"]]
        assert grades == sorted(grades, reverse=True)
        assert s.question == data.queries[s.metadata["query_id"]]
        assert s.source_dataset == "beir-msmarco" and s.doc_type == "clean_text"


def test_beir_dbpedia_titles_and_min_grade() -> None:
    folder = oracle_file("beir-subsets", "dbpedia")
    data = read_beir(folder)
    result = beir.adapt_source(folder, {"ground_truth": "titles", "question_type": "entity",
                                        "min_grade": 2, "max_contexts": 3})
    with_grade_2 = [q for q, docs in data.qrels.items() if 2 in docs.values()]
    assert len(result.samples) == len(with_grade_2)
    assert result.skipped == {"no relevant judged document in the corpus":
                              len(data.qrels) - len(with_grade_2)}
    s = next(s for s in result.samples if s.id == "beir-dbpedia-INEX_LD-2010019")
    titles = sorted(data.corpus[d].title for d, g in data.qrels["INEX_LD-2010019"].items()
                    if g == 2)
    assert s.ground_truth.split("; ") == titles
    assert s.question_type == "entity" and len(s.contexts) <= 3
    assert set(s.metadata["relevant"].values()) == {2}


def test_ragcsv_adapter_on_the_bundled_file() -> None:
    path = REPO_ROOT / "test_cases" / "nba_qa.ragcsv.csv"
    result = ragcsv.adapt_source(path, {"question_type": "factual"})
    assert result.errors == [] and len(result.samples) == 26
    first = result.samples[0]
    assert first.id == "ragcsv-nba_qa-1" and first.source_dataset == "ragcsv-nba_qa"
    assert first.ground_truth.startswith("Nikola Jokic")
    assert first.contexts[0].startswith("Nikola Jokic won the 2023-24 Most Valuable Player")
    assert first.metadata["fragment_titles"][0].startswith("The 2023-24 MVP race")
    assert first.metadata["fragment_metadata"][0]["source"] == "season_mvp_race_2024.md"


def test_qa_adapter_on_the_ragas_fixtures() -> None:
    csv_path = oracle_file("ragas-fixtures", "hf_doc_qa_eval.csv")
    result = qa.adapt_source(csv_path, {"source_dataset": "hf-doc-qa"})
    # 66 rows; the real file has an empty answer (line 100) and a broken row (line 102)
    assert len(result.samples) == 64
    assert sorted((e.line, e.field) for e in result.errors) == [(100, "ground_truth"),
                                                                (102, None)]
    first = result.samples[0]
    assert first.question == "What architecture is the `tokenizers-linux-x64-musl` binary " \
                             "designed for?"
    assert first.ground_truth == "x86_64-unknown-linux-musl" and first.contexts == ()
    hotpot = qa.adapt_source(oracle_file("ragas-fixtures", "hotpotqa_factual.json"),
                             {"question_type": "multi_hop"})
    assert hotpot.errors == [] and len(hotpot.samples) == 10
    items = json.loads(oracle_file("ragas-fixtures", "hotpotqa_factual.json").read_text())
    for item, s in zip(items, hotpot.samples, strict=True):
        right = [a for a, score in zip(item["answers"], item["scores"], strict=True)
                 if score == 1]
        assert s.ground_truth == right[0] and s.contexts == (item["context"],)
        assert s.metadata["incorrect_answers"] == [a for a in item["answers"] if a != right[0]]


@pytest.mark.parametrize(("record", "field"), [
    ({"answer": "a"}, "question"),
    ({"question": "q"}, "ground_truth"),
    ({"question": "q", "answers": ["a", "b"], "scores": [0, 0]}, "scores"),
    ({"question": "q", "answers": ["a"], "scores": [1, 0]}, "scores"),
    ({"question": "q", "answer": "a", "contexts": [1]}, "contexts"),
])
def test_qa_adapter_errors_name_the_field(record: dict[str, object], field: str) -> None:
    from pytest_ragbench.errors import CaseError

    with pytest.raises(CaseError) as info:
        qa.adapt_record(record, file="q.jsonl", line=4)
    assert (info.value.line, info.value.field) == (4, field)


def test_cases_adapter_reads_the_bundled_case_files() -> None:
    result = cases.adapt_source(REPO_ROOT / "test_cases", {})
    assert result.errors == []
    kinds = Counter(s.metadata["case_kind"] for s in result.samples)
    assert set(kinds) == {"ragas", "vector", "hybrid", "sql"}
    assert result.skipped["memory case (no question/answer pair)"] > 0
    ragas_lines = (REPO_ROOT / "test_cases" / "ragas_samples.jsonl").read_text().splitlines()
    first = json.loads(ragas_lines[0])
    s = next(s for s in result.samples if s.metadata["case_id"] == first["id"])
    assert (s.question, s.ground_truth, list(s.contexts), s.doc_type, s.question_type,
            s.difficulty) == (first["question"], first["ground_truth"], first["contexts"],
                              first["doc_type"], first["question_type"], first["difficulty"])
    assert s.metadata["topic"] == first["metadata"]["topic"]
    assert not any("nba_mini" in str(s.metadata["source_file"]) for s in result.samples)


def test_cases_adapter_reports_bad_case_files(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text('{"kind": "ragas", "id": "a", "question": "q", "ground_truth": "g"}\n'
                    '{"kind": "ragas", "id": "b", "question": "q"}\n'
                    '{"kind": "vector", "id": "c", "question": "Off-topic?", '
                    '"ground_truth": "I cannot answer that.", "expect": "decline"}\n',
                    encoding="utf-8")
    result = cases.adapt_source(path, {"doc_type": "log_ticket"})
    assert [(s.id, s.doc_type, s.answerable) for s in result.samples] == [
        ("case-mine-a", "log_ticket", True), ("case-mine-c", "log_ticket", False)]
    assert [(e.line, e.field) for e in result.errors] == [(2, "ground_truth")]
    (tmp_path / "broken.yaml").write_text("- [unclosed\n", encoding="utf-8")
    result = cases.adapt_source(tmp_path, {})
    assert len(result.samples) == 2 and len(result.errors) == 2
