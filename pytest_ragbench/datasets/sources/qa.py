"""Plain question/answer records (CSV with a header, JSON, JSONL) → samples.

For small QA sets such as the HF documentation QA CSV or HotpotQA items:

- question: ``question`` (or ``query``);
- ground truth: the first of ``ground_truth``, ``expected_answer``, ``answer``; or
  ``answers`` — a list, of which, when ``scores`` is given beside it, the first answer
  scored 1 (the others are kept in ``metadata.incorrect_answers``);
- contexts: ``contexts`` (a list) or ``context`` (text); none when absent;
- id: ``id`` / ``_id``, else a hash of the question.

Question type from the ``question_type`` option or keyword rules; difficulty from a
``difficulty`` field or option, else ``medium`` (the source rates none:
``metadata.difficulty_source`` says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.readers import read_records
from pytest_ragbench.datasets.sample import NormalizedSample, make_id, short_hash
from pytest_ragbench.datasets.sources.base import AdaptResult, build_sample, origin, require_mapping
from pytest_ragbench.datasets.sources.text import text_question_type
from pytest_ragbench.errors import CaseError

NAME = "qa"
OPTIONS = {
    "doc_type": "doc_type of every sample (default clean_text)",
    "question_type": "question type of every record (default: keyword rules)",
    "difficulty": "difficulty of records without one (default medium)",
    "source_dataset": "name written to source_dataset (default: the file stem)",
}
ANSWER_FIELDS = ("ground_truth", "expected_answer", "answer")


def adapt_source(path: Path, options: Mapping[str, Any]) -> AdaptResult:
    """Every record of the file."""
    source = read_records(path)
    result = AdaptResult(errors=list(source.errors))
    for line, record in source.records:
        try:
            result.samples.append(adapt_record(record, file=path, line=line, options=options))
        except CaseError as exc:
            result.errors.append(exc)
    return result


def adapt_record(record: Any, *, file: str | Path | None = None, line: int | None = None,
                 options: Mapping[str, Any] | None = None) -> NormalizedSample:
    """One record as a sample."""
    options = options or {}
    record = require_mapping(record, file=file, line=line)
    name = "question" if "question" in record else "query"
    question = record.get(name)
    if not isinstance(question, str) or not question.strip():
        raise CaseError("expected non-empty text", file=file, line=line, field="question")
    question = question.strip()
    ground_truth, incorrect = _ground_truth(record, file, line)
    contexts = _contexts(record, file, line)
    given = record.get("difficulty")
    difficulty = given if isinstance(given, str) and given.strip() else None
    record_id = record.get("id", record.get("_id"))
    if isinstance(record_id, bool) or not isinstance(record_id, str | int) or record_id == "":
        record_id = short_hash(question)
    stem = Path(file).stem if file is not None else "qa"
    metadata: dict[str, Any] = {"answerable": True, **origin(file, line),
                                "context_group": f"qa:{stem}:{record_id}"}
    if incorrect:
        metadata["incorrect_answers"] = incorrect
    if difficulty is None:
        metadata["difficulty_source"] = "not rated by the source (default)"
    return build_sample(
        file=file, line=line, id=make_id("qa", stem, record_id), question=question,
        ground_truth=ground_truth, contexts=contexts,
        doc_type=str(options.get("doc_type") or "clean_text"),
        question_type=text_question_type(question, options.get("question_type")),
        difficulty=(difficulty or str(options.get("difficulty") or "medium")).strip(),
        source_dataset=str(options.get("source_dataset") or stem), metadata=metadata)


def _ground_truth(record: Mapping[str, Any], file: str | Path | None, line: int | None
                  ) -> tuple[str, list[str]]:
    for name in ANSWER_FIELDS:
        value = record.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip(), []
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value), []
    answers = record.get("answers")
    if isinstance(answers, list) and answers and all(isinstance(a, str) for a in answers):
        scores = record.get("scores")
        if scores is None:
            return answers[0].strip() or _missing(file, line), []
        if not isinstance(scores, list) or len(scores) != len(answers):
            raise CaseError("expected one score per answer", file=file, line=line,
                            field="scores")
        correct = [a for a, s in zip(answers, scores, strict=True) if s == 1 and a.strip()]
        if not correct:
            raise CaseError("no answer is scored 1", file=file, line=line, field="scores")
        return correct[0].strip(), [a for a, s in zip(answers, scores, strict=True) if s != 1]
    return _missing(file, line), []


def _missing(file: str | Path | None, line: int | None) -> str:
    raise CaseError(f"no answer: expected one of {', '.join(ANSWER_FIELDS)} or answers",
                    file=file, line=line, field="ground_truth")


def _contexts(record: Mapping[str, Any], file: str | Path | None, line: int | None
              ) -> tuple[str, ...]:
    value = record.get("contexts", record.get("context"))
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v.strip())
    raise CaseError("expected text or a list of text", file=file, line=line, field="contexts")
