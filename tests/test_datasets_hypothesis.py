"""Random records to every adapter and random bytes to every reader: they adapt or raise
only ``CaseError`` (readers never raise for a bad line: they report it).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragbench.datasets.readers import read_records
from pytest_ragbench.datasets.sample import NormalizedSample
from pytest_ragbench.datasets.sources import beir, cases, code, qa, ragcsv, tables
from pytest_ragbench.datasets.sources.base import AdaptResult
from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.beir import BeirDocument, BeirFolder, read_beir
from pytest_ragbench.formats.ragcsv import parse_row, read_ragcsv

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                    st.text(max_size=30), st.sampled_from(["", " ", "$1,234.5", "(12)", "7%",
                                                           "```py\nx\n```", "a|b", "span"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=15)
rows = st.lists(st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=10)),
                         max_size=4), max_size=4)


texts = st.text(min_size=1, max_size=30).filter(str.strip)
answers = st.one_of(texts, st.integers(), st.floats(), st.lists(texts, min_size=1, max_size=3),
                    st.sampled_from(["$1,496.5", "(12.5)", "7%", "$2 million"]))


def records(keys: list[str], likely: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    """Any JSON value; or a dict of the keys an adapter reads, with random values; or one
    whose ``likely`` keys hold text, so that the adapting paths are reached too."""
    known = st.fixed_dictionaries({}, optional={k: values for k in keys})
    plausible = st.fixed_dictionaries({k: texts for k in likely},
                                      optional={k: values for k in keys if k not in likely})
    return st.one_of(values, known, plausible)


TABLE_KEYS = ["question", "questions", "table", "paragraphs", "qa", "program_answer",
              "original_answer", "context", "table_caption", "pre_text", "post_text", "id"]
tatqa_items = st.fixed_dictionaries({
    "table": st.fixed_dictionaries({"uid": st.text(max_size=5), "table": st.one_of(
        rows, st.lists(st.lists(st.text(max_size=10), min_size=1, max_size=4), min_size=1,
                       max_size=4))}),
    "paragraphs": st.lists(st.fixed_dictionaries({"order": st.integers(),
                                                  "text": st.text(max_size=20)}), max_size=3),
    "questions": st.lists(st.fixed_dictionaries({"question": st.one_of(texts, values),
                                                 "answer": st.one_of(answers, values)},
                                                optional={
        k: st.one_of(values, answers, st.sampled_from(["span", "arithmetic", "count",
                                                        "table", "text", "million"]))
        for k in ("uid", "answer_type", "answer_from", "scale", "derivation",
                  "req_comparison")}), max_size=3)})


def check(outcome: Any) -> None:
    samples = outcome.samples if isinstance(outcome, AdaptResult) else [outcome]
    for sample in samples:
        if isinstance(sample, NormalizedSample):
            assert NormalizedSample.from_dict(json.loads(json.dumps(sample.to_dict()))) == sample
    if isinstance(outcome, AdaptResult):
        assert all(isinstance(e, CaseError) for e in outcome.errors)


@SETTINGS
@given(st.one_of(records(TABLE_KEYS, ("question", "program_answer")).map(
    lambda r: {**r, "table": [["a", "b"], ["1", "2"]]} if isinstance(r, dict) else r),
    records(TABLE_KEYS), tatqa_items))
def test_tables_adapter(record: Any) -> None:
    with contextlib.suppress(CaseError):
        check(tables.adapt_record(record, file="t.json", line=1))


@SETTINGS
@given(st.one_of(*(records(["question", "answer", "code", "snippet", "file_path", "repo",
                            "language", "title", "body", "comments_details",
                            "repository_url", "number"], likely) for likely in (
    (), ("question", "answer"), ("question", "answer", "code"), ("title", "body")))))
def test_code_adapter(record: Any) -> None:
    with contextlib.suppress(CaseError):
        check(code.adapt_record(record, file="c.jsonl", line=1, repo="flask",
                                commits={"flask": ("pallets/flask", "abc")}))


@SETTINGS
@given(records(["question", "query", "answer", "answers", "scores", "ground_truth",
                "expected_answer", "context", "contexts", "id", "difficulty"],
               ("question", "answer")))
def test_qa_adapter(record: Any) -> None:
    with contextlib.suppress(CaseError):
        check(qa.adapt_record(record, file="q.jsonl", line=1, options={}))


@SETTINGS
@given(st.dictionaries(st.text(max_size=4), st.tuples(st.text(max_size=6), st.text(max_size=20)),
                       max_size=5),
       st.dictionaries(st.text(max_size=4), st.text(max_size=20), max_size=4),
       st.dictionaries(st.text(max_size=4), st.dictionaries(st.text(max_size=4),
                                                            st.integers(-2, 3), max_size=4),
                       max_size=4),
       st.fixed_dictionaries({}, optional={"ground_truth": st.sampled_from(
           ["titles", "top_passage", "other"]), "min_grade": values, "max_contexts": values}))
def test_beir_adapter(corpus: dict[str, tuple[str, str]], queries: dict[str, str],
                      qrels: dict[str, dict[str, int]], options: dict[str, Any]) -> None:
    data = BeirFolder(Path("folder"), "test",
                      {d: BeirDocument(d, t, x) for d, (t, x) in corpus.items()}, queries, qrels)
    for query_id in qrels:
        with contextlib.suppress(CaseError):
            check(beir.adapt_query(data, query_id, options))


@SETTINGS
@given(st.lists(st.one_of(st.text(max_size=20), st.sampled_from([
    "[]", "[{'page_content': 'x'}]", "[{'page_content': 'x', 'metadata': {'title': 't'}}]",
    "[{'page_content': b'x', 'metadata': {'title': 't', 'k': (1, {2}), 'c': 1j}}]",
    "__import__('os')", "[" * 200, "{'a': 1}"])), max_size=7))
def test_ragcsv_rows(cells: list[str]) -> None:
    try:
        row = parse_row(cells, 1, 1)
    except CaseError:
        return
    with contextlib.suppress(CaseError):
        check(ragcsv.adapt_row(row, Path("x.ragcsv.csv"), {}))


@SETTINGS
@given(st.lists(st.one_of(values, st.fixed_dictionaries({}, optional={
    k: values for k in ("kind", "id", "question", "ground_truth", "contexts", "doc_type",
                        "metadata", "expect", "ground_truth_answer", "expected_sql",
                        "ground_truth_data")})), max_size=4))
def test_cases_adapter(items: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "random.jsonl"
        path.write_text("\n".join(json.dumps(i) for i in items) + "\n", encoding="utf-8")
        check(cases.adapt_source(path, {}))


@SETTINGS
@given(st.binary(max_size=300), st.binary(max_size=300), st.binary(max_size=200))
def test_beir_reader_reports_never_raises_for_lines(corpus: bytes, queries: bytes,
                                                    qrels: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "qrels").mkdir()
        (root / "corpus.jsonl").write_bytes(corpus)
        (root / "queries.jsonl").write_bytes(queries)
        (root / "qrels" / "test.tsv").write_bytes(qrels)
        data = read_beir(root)
        assert all(isinstance(e, CaseError) and e.line for e in data.errors)


@SETTINGS
@given(st.one_of(st.text(max_size=300), st.lists(st.lists(st.text(max_size=15), max_size=6),
                                                  max_size=5).map(
    lambda rows: "\n".join(",".join(json.dumps(c) for c in r) for r in rows))))
def test_ragcsv_reader(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.csv"
        path.write_text(text, encoding="utf-8", newline="")
        data = read_ragcsv(path)
        assert all(isinstance(e, CaseError) and e.line for e in data.errors)
        assert all(r.line >= 1 for r in data.rows)


@SETTINGS
@given(st.text(max_size=200), st.sampled_from([".json", ".jsonl", ".csv"]))
def test_record_reader(text: str, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"x{suffix}"
        path.write_text(text, encoding="utf-8", newline="")
        try:
            result = read_records(path)
        except CaseError:
            return
        assert all(isinstance(e, CaseError) for e in result.errors)
