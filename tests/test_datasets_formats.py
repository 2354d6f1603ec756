"""Format readers shared with the test kinds: BEIR folders and RAGCSV files."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.beir import is_beir_folder, qrels_splits, read_beir
from pytest_ragbench.formats.ragcsv import parse_fragments, read_ragcsv
from tests.conftest import REPO_ROOT, oracle_file

# -- BEIR -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "header", "rows", "queries", "grades"), [
    ("dbpedia", True, 3709, 40, {0: 2829, 1: 614, 2: 266}),
    ("msmarco", False, 4102, 43, None),
])
def test_beir_subsets_read_every_judgment(name: str, header: bool, rows: int, queries: int,
                                          grades: dict[int, int] | None) -> None:
    folder = oracle_file("beir-subsets", name)
    data = read_beir(folder)
    assert data.errors == []
    assert data.qrels_header is header
    assert data.judgments == rows
    assert len(data.qrels) == queries
    assert len(data.corpus) == 5000 and len(data.queries) == 50
    assert all(doc in data.corpus for docs in data.qrels.values() for doc in docs)
    if grades is not None:
        counted: dict[int, int] = {}
        for docs in data.qrels.values():
            for grade in docs.values():
                counted[grade] = counted.get(grade, 0) + 1
        assert counted == grades


def test_msmarco_first_judgment_is_not_dropped() -> None:
    path = oracle_file("beir-subsets", "msmarco", "qrels", "test.tsv")
    first = path.read_text(encoding="utf-8").splitlines()[0].split("\t")
    assert first[-1].strip().isdigit()  # the file really has no header
    data = read_beir(path.parent.parent)
    assert data.qrels[first[0]][first[1]] == int(first[2])


def test_beir_matches_generic_data_loader_on_the_file_with_a_header() -> None:
    loader = pytest.importorskip("beir.datasets.data_loader")
    folder = oracle_file("beir-subsets", "dbpedia")
    corpus, queries, qrels = loader.GenericDataLoader(str(folder)).load(split="test")
    data = read_beir(folder)
    assert data.qrels == qrels
    assert {q: data.queries[q] for q in queries} == queries
    assert {d: {"title": doc.title, "text": doc.text} for d, doc in data.corpus.items()} == corpus


def test_generic_data_loader_drops_the_first_judgment_without_a_header() -> None:
    loader = pytest.importorskip("beir.datasets.data_loader")
    folder = oracle_file("beir-subsets", "msmarco")
    _, _, qrels = loader.GenericDataLoader(str(folder)).load(split="test")
    ours = read_beir(folder)
    assert sum(len(v) for v in qrels.values()) == ours.judgments - 1


def _beir_folder(tmp_path: Path, corpus: str, queries: str, qrels: str) -> Path:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(textwrap.dedent(corpus).lstrip(), encoding="utf-8")
    (tmp_path / "queries.jsonl").write_text(textwrap.dedent(queries).lstrip(), encoding="utf-8")
    (tmp_path / "qrels" / "test.tsv").write_text(textwrap.dedent(qrels).lstrip(),
                                                 encoding="utf-8")
    return tmp_path


def test_beir_malformed_lines_are_reported_counted_and_skipped(tmp_path: Path) -> None:
    folder = _beir_folder(tmp_path, """
        {"_id": "d1", "title": "One", "text": "first"}
        {"_id": "d2", "text": "second"
        {"title": "no id", "text": "x"}
        {"_id": "d3", "text": 7}
        {"_id": "d4", "text": "fourth"}
        """, """
        {"_id": "q1", "text": "what?"}
        [1, 2]
        {"_id": "q2", "text": ""}
        {"_id": "q3", "text": "why?"}
        """, """
        q1\td1\t2
        q1\td4
        q1\td5\thigh
        q3\td4\t1
        q3\t0\td1\t0
        q1\td1\t1
        """)
    data = read_beir(folder)
    where = {(Path(e.file or "").name, e.line, e.field) for e in data.errors}
    assert where == {
        ("corpus.jsonl", 2, None), ("corpus.jsonl", 3, "_id"), ("corpus.jsonl", 4, "text"),
        ("queries.jsonl", 2, None), ("queries.jsonl", 3, "text"),
        ("test.tsv", 2, "score"), ("test.tsv", 3, "score"), ("test.tsv", 6, "corpus-id"),
    }
    assert sorted(data.corpus) == ["d1", "d4"]
    assert sorted(data.queries) == ["q1", "q3"]
    # line 1 has no header; TREC's 4-column form is read too; the duplicate keeps the first
    assert data.qrels == {"q1": {"d1": 2}, "q3": {"d4": 1, "d1": 0}}
    assert not data.qrels_header
    message = str(next(e for e in data.errors if e.line == 3 and e.field == "score"))
    assert "test.tsv:3" in message and "'high'" in message
    missing = str(next(e for e in data.errors if e.line == 2 and e.field == "score"))
    assert "test.tsv:2: field 'score': missing column" in missing


def test_beir_header_is_detected_by_its_score_column(tmp_path: Path) -> None:
    folder = _beir_folder(tmp_path, '{"_id": "d", "text": "t"}\n', '{"_id": "q", "text": "?"}\n',
                          "query-id\tcorpus-id\tscore\nq\td\t3\n")
    data = read_beir(folder)
    assert data.qrels_header and data.qrels == {"q": {"d": 3}} and data.errors == []
    (folder / "qrels" / "test.tsv").write_text("q\td\tabc\nq\td2\t1\n", encoding="utf-8")
    data = read_beir(folder)
    assert not data.qrels_header and data.qrels == {"q": {"d2": 1}}
    assert [(e.line, e.field) for e in data.errors] == [(1, "score")]


def test_beir_folder_helpers_and_missing_files(tmp_path: Path) -> None:
    folder = _beir_folder(tmp_path, "", "", "")
    assert is_beir_folder(folder) and qrels_splits(folder) == ["test"]
    assert read_beir(folder, split=None).split == "test"
    (folder / "corpus.jsonl").unlink()
    assert not is_beir_folder(folder)
    with pytest.raises(CaseError, match=r"corpus\.jsonl: cannot read file"):
        read_beir(folder)


def test_beir_bundled_folder_reads_cleanly() -> None:
    data = read_beir(REPO_ROOT / "test_cases" / "beir" / "nba_mini", split=None)
    assert data.errors == [] and data.judgments > 0


# -- RAGCSV ---------------------------------------------------------------------------------

def _frag(content: str, title: str) -> str:
    return repr([{"page_content": content, "metadata": {"title": title}}])


def test_ragcsv_bundled_file_reads_every_row() -> None:
    data = read_ragcsv(REPO_ROOT / "test_cases" / "nba_qa.ragcsv.csv")
    assert data.errors == []
    assert len(data.rows) == 26
    first = data.rows[0]
    assert first.row == 1 and first.line == 1
    assert first.question.startswith("Who won the 2023-24 MVP award")
    assert first.expected.startswith("Nikola Jokic")
    assert (first.fragments[0].title or "").startswith("The 2023-24 MVP race")
    assert first.timestamp == "2024-07-01T09:00:00Z"


def test_ragcsv_lines_are_physical_and_bad_rows_are_skipped(tmp_path: Path) -> None:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["Paris", _frag("Paris is the capital of France.", "France"), "", "t",
                     "Capital\nof France?"])                                 # lines 1-2
    writer.writerow(["x", f"__import__('os').system('touch {tmp_path / 'PWNED'}')", "", "",
                     "Evil?"])                                                # line 3
    writer.writerow(["y", "[{'page_content': 1}]", "", "", "Shape?"])         # line 4
    writer.writerow(["z", "{'page_content': 'a'}", "", "", "Dict?"])           # line 5
    writer.writerow([])                                                       # line 6
    writer.writerow(["only", "two"])                                          # line 7
    writer.writerow(["Berlin", _frag("Berlin is the capital.", "Germany"), "h\nnote", "",
                     "Capital of\nGermany?"])                                # lines 8-10
    writer.writerow(["w", "[1, 2", "", "", "Unclosed?"])                       # line 11
    path = tmp_path / "eval.ragcsv.csv"
    path.write_text(buffer.getvalue(), encoding="utf-8")
    data = read_ragcsv(path)
    assert not (tmp_path / "PWNED").exists()
    assert [(r.row, r.line, r.expected) for r in data.rows] == [(1, 1, "Paris"),
                                                                 (6, 8, "Berlin")]
    assert data.rows[1].question == "Capital of\nGermany?"
    assert data.rows[1].hallucination == "h\nnote"
    errors = [(e.line, e.field) for e in data.errors]
    assert errors == [(3, "column 1 (fragments)"), (4, "column 1 (fragments)"),
                      (5, "column 1 (fragments)"), (7, "column 2 (hallucination)"),
                      (11, "column 1 (fragments)")]
    assert all(e.file == str(path) for e in data.errors)
    assert "not a Python literal" in str(data.errors[0])
    assert "syntax error" in str(data.errors[-1])
    assert "'page_content' must be a string" in str(data.errors[1])


def test_ragcsv_fragment_shapes() -> None:
    fragments = parse_fragments("[{'page_content': 'a', 'metadata': {'title': 'T', 'n': 1}},"
                                " {'page_content': 'b'}]")
    assert [(f.page_content, f.title) for f in fragments] == [("a", "T"), ("b", None)]
    assert fragments[0].metadata == {"title": "T", "n": 1}
    for bad in ("", "[{'page_content': 'a', 'metadata': []}]",
                "[{'page_content': 'a', 'metadata': {'title': 3}}]", "['text']", "42"):
        with pytest.raises(CaseError) as info:
            parse_fragments(bad, 9)
        assert info.value.line == 9 and info.value.field == "column 1 (fragments)"


def test_ragcsv_bytes_not_utf8_and_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b'"a","[]","","","q"\n\xff\xfe\n')
    read = read_ragcsv(path)  # a byte that is not UTF-8 fails only its row
    assert [row.line for row in read.rows] == [1]
    [error] = read.errors
    assert error.line == 2 and "not UTF-8 text (invalid byte 0xff)" in str(error)
    with pytest.raises(CaseError, match="cannot read file"):
        read_ragcsv(tmp_path / "missing.csv")


def test_format_modules_import_only_the_standard_library() -> None:
    import subprocess
    import sys

    code = ("import sys; before = set(sys.modules); "
            "import pytest_ragbench.formats.beir, pytest_ragbench.formats.ragcsv; "
            "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
            "print(sorted(new - set(sys.stdlib_module_names)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO_ROOT)
    assert json.loads(out.stdout.replace("'", '"')) == ["pytest_ragbench"]
