from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragbench.errors import CaseError
from pytest_ragbench.systems.corpus import CorpusWarning, chunk_text, load_corpus
from tests.conftest import oracle_file


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_markdown_front_matter_becomes_metadata(tmp_path: Path) -> None:
    write(tmp_path / "docs" / "rules.md",
          "---\ntitle: NBA rules\ntags: [sport, rules]\nyear: 2023\n---\n"
          "# Ignored heading\n\nA game has four quarters.\n\nEach lasts twelve minutes.\n")
    docs = load_corpus([tmp_path / "docs"])
    assert len(docs) == 1
    doc = docs[0]
    assert doc.id == "rules.md#0"
    assert doc.metadata["title"] == "NBA rules"
    assert doc.metadata["tags"] == ["sport", "rules"]
    assert doc.metadata["year"] == 2023
    assert doc.metadata["source"] == "rules.md"
    assert doc.metadata["line"] == 6  # the body starts after the front matter
    assert "four quarters" in doc.text and "twelve minutes" in doc.text


def test_title_from_heading_then_stem_and_subfolders(tmp_path: Path) -> None:
    write(tmp_path / "a" / "intro.md", "# Getting started\n\nHello there, reader.\n")
    write(tmp_path / "a" / "sub" / "notes.txt", "Plain text notes.\n")
    write(tmp_path / "a" / ".hidden" / "skip.md", "never loaded\n")
    write(tmp_path / "a" / "image.png", "not text")
    docs = {d.metadata["source"]: d for d in load_corpus([tmp_path / "a"])}
    assert set(docs) == {"intro.md", "notes.txt"}
    assert docs["intro.md"].title == "Getting started"
    assert docs["notes.txt"].title == "notes"
    assert docs["notes.txt"].id == "sub/notes.txt#0"


def test_chunks_keep_paragraphs_whole_and_the_source(tmp_path: Path) -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 30 for i in range(6)]
    write(tmp_path / "long.md", "\n\n".join(paragraphs))
    docs = load_corpus([tmp_path / "long.md"], chunk_chars=400)
    assert len(docs) > 1
    assert [d.id for d in docs] == [f"long.md#{i}" for i in range(len(docs))]
    for doc in docs:
        assert len(doc.text) <= 400
        assert doc.metadata["source"] == "long.md"
        for part in doc.text.split("\n\n"):
            assert part.strip() in [p.strip() for p in paragraphs]


def test_long_paragraph_is_split_at_sentences() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    chunks = chunk_text(text, 120)
    assert all(len(c) <= 120 for c, _ in chunks)
    assert all(c.endswith(".") for c, _ in chunks)
    assert " ".join(c for c, _ in chunks) == text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.text(alphabet="abcdefghij", min_size=1, max_size=20), min_size=1,
                         max_size=15), min_size=1, max_size=8),
       st.integers(min_value=20, max_value=300))
def test_chunking_never_exceeds_the_cap_and_keeps_every_word(paragraphs: list[list[str]],
                                                             cap: int) -> None:
    text = "\n\n".join(" ".join(words) for words in paragraphs)
    chunks = chunk_text(text, cap)
    assert all(len(c) <= cap for c, _ in chunks)
    assert " ".join(c for c, _ in chunks).split() == text.split()


def test_a_word_longer_than_the_cap_is_cut() -> None:
    assert [c for c, _ in chunk_text("short " + "x" * 25, 10)] == ["short", "x" * 10, "x" * 10,
                                                                    "x" * 5]


def test_jsonl_keeps_unicode_line_separators_inside_strings(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", json.dumps({"id": "u", "text": "a\u2028b\x85c"},
                                                  ensure_ascii=False) + "\n")
    errors: list[CaseError] = []
    docs = load_corpus([path], errors=errors)
    assert errors == []
    assert docs[0].text == "a\u2028b\x85c"


def test_jsonl_records_and_errors_with_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "docs.jsonl", "\n".join([
        json.dumps({"id": "a", "text": "alpha", "title": "A", "metadata": {"lang": "en"}}),
        "{not json",
        json.dumps({"_id": "b", "content": "beta", "year": 2020}),
        json.dumps({"text": "no id"}),
        json.dumps({"id": "c", "text": 5}),
        "",
        json.dumps({"id": "d", "page_content": "delta", "metadata": {"source": "d.pdf"}}),
    ]) + "\n")
    errors: list[CaseError] = []
    docs = load_corpus([path], errors=errors)
    assert [d.id for d in docs] == ["a", "b", "d"]
    assert docs[0].metadata == {"title": "A", "lang": "en", "source": "a"}
    assert docs[1].metadata["year"] == 2020
    assert docs[2].metadata["source"] == "d.pdf"
    described = [(e.file, e.line, e.field) for e in errors]
    assert described == [(str(path), 2, None), (str(path), 4, "_id"), (str(path), 5, "text")]
    assert all(str(path) in str(e) for e in errors)


def test_problems_become_warnings_and_the_rest_loads(tmp_path: Path) -> None:
    write(tmp_path / "good.md", "Fine text.\n")
    write(tmp_path / "bad.md", "---\ntitle: [unclosed\n---\nBody.\n")
    write(tmp_path / "evil.md", "---\n!!python/object/apply:os.system ['echo hacked']\n---\nx\n")
    with pytest.warns(CorpusWarning) as record:
        docs = load_corpus([tmp_path, tmp_path / "missing"])
    assert [d.metadata["source"] for d in docs] == ["good.md"]
    messages = [str(w.message) for w in record]
    assert any("bad.md" in m and "front matter" in m for m in messages)
    assert any("evil.md" in m for m in messages)
    assert any("does not exist" in m for m in messages)


def test_duplicate_ids_are_reported(tmp_path: Path) -> None:
    line = json.dumps({"id": "same", "text": "x"})
    write(tmp_path / "one.jsonl", line + "\n")
    write(tmp_path / "two.jsonl", line + "\n")
    errors: list[CaseError] = []
    docs = load_corpus([tmp_path / "one.jsonl", tmp_path / "two.jsonl"], errors=errors)
    assert len(docs) == 1
    assert len(errors) == 1 and "duplicate" in str(errors[0]) and errors[0].field == "id"


def test_beir_folder_loads_corpus_with_ids_matching_qrels() -> None:
    folder = oracle_file("beir-subsets", "msmarco")
    docs = load_corpus([folder], errors=[])
    assert len(docs) == 5000
    ids = {d.id for d in docs}
    qrels = (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    judged = {line.split("\t")[1] for line in qrels if line.strip()}
    assert judged <= ids
    assert all(d.text for d in docs)
