"""NormalizedSample: fields, JSON Schema, and the ``ragas`` case kind reading exports unchanged."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from pytest_ragbench.cases import RagasCase, load_file
from pytest_ragbench.datasets.export import dumps_line, write_jsonl
from pytest_ragbench.datasets.sample import NormalizedSample, load_schema, make_id


def sample(**changes: object) -> NormalizedSample:
    fields: dict[str, object] = dict(
        id="s-1", question="What is the total?", ground_truth="42",
        contexts=("| a |\n|---|\n| 42 |",), doc_type="table", question_type="numeric",
        difficulty="easy", source_dataset="tat-qa",
        metadata={"answerable": True, "table_rows": 2, "note": "line\u2028separator"})
    fields.update(changes)
    return NormalizedSample(**fields)  # type: ignore[arg-type]


def test_to_dict_is_a_ragas_case_and_reads_back() -> None:
    s = sample()
    data = s.to_dict()
    assert data["kind"] == "ragas"
    assert list(data) == ["id", "kind", "question", "ground_truth", "contexts", "doc_type",
                          "question_type", "difficulty", "source_dataset", "metadata"]
    assert NormalizedSample.from_dict(data) == s
    with_answer = sample(answer="42.")
    assert with_answer.to_dict()["answer"] == "42."
    assert NormalizedSample.from_dict(with_answer.to_dict()) == with_answer


def test_to_dict_copies_metadata() -> None:
    s = sample(metadata={"nested": {"a": [1]}})
    s.to_dict()["metadata"]["nested"]["a"].append(2)
    assert s.metadata == {"nested": {"a": [1]}}


@pytest.mark.parametrize(("changes", "field"), [
    ({"id": "has space"}, "id"), ({"question": "  "}, "question"),
    ({"ground_truth": ""}, "ground_truth"), ({"contexts": ["a list"]}, "contexts"),
    ({"contexts": ("ok", 3)}, "contexts"), ({"doc_type": ""}, "doc_type"),
    ({"difficulty": "two\nlines"}, "difficulty"), ({"metadata": []}, "metadata"),
    ({"metadata": {"x": object()}}, "metadata"), ({"metadata": {"x": float("nan")}}, "metadata"),
])
def test_invalid_fields_name_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}: "):
        sample(**changes)


@pytest.mark.parametrize(("data", "message"), [
    ([], "expected a JSON object"),
    ({"id": "a", "kind": "sql"}, "kind: expected 'ragas'"),
    ({"id": "a", "question": "q"}, "ground_truth: required"),
    ({**sample().to_dict(), "extra": 1}, "extra: unknown field"),
    ({**sample().to_dict(), "contexts": "text"}, "contexts: must be a list"),
])
def test_from_dict_refuses_bad_records(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NormalizedSample.from_dict(data)


def test_exported_records_validate_against_the_json_schema() -> None:
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for s in (sample(), sample(contexts=(), answer="x", metadata={})):
        validator.validate(s.to_dict())
    bad = {**sample().to_dict(), "kind": "vector"}
    assert not validator.is_valid(bad)
    assert not validator.is_valid({k: v for k, v in sample().to_dict().items() if k != "id"})
    assert not validator.is_valid({**sample().to_dict(), "id": "a b"})
    assert not validator.is_valid({**sample().to_dict(), "contexts": [1]})


def test_exported_jsonl_is_read_by_the_ragas_kind_unchanged(tmp_path: Path) -> None:
    samples = [sample(), sample(id="s-2", contexts=(), metadata={"answerable": False}),
               sample(id=make_id("beir", "dbpedia", "<dbpedia:Foo Bar>"))]
    path = tmp_path / "set.jsonl"
    write_jsonl(samples, path)
    assert path.read_text(encoding="utf-8") == "".join(dumps_line(s) for s in samples)
    result = load_file(path)
    assert result.errors == []
    assert [c.id for c in result.cases] == [s.id for s in samples]
    first = result.cases[0]
    assert isinstance(first, RagasCase)
    assert (first.question, first.ground_truth, first.contexts, first.doc_type,
            first.question_type, first.difficulty, first.source_dataset) == (
        "What is the total?", "42", ("| a |\n|---|\n| 42 |",), "table", "numeric", "easy",
        "tat-qa")
    assert first.metadata["note"] == "line\u2028separator"


def test_make_id_replaces_refused_characters_without_collisions() -> None:
    assert make_id("tatqa", "3ffd-9053") == "tatqa-3ffd-9053"
    one, two = make_id("beir", "<a b>"), make_id("beir", "<a_b>")
    assert one != two and " " not in one and "<" not in one
    assert one.startswith("beir-_a_b-") and len(one) == len("beir-_a_b-") + 10
