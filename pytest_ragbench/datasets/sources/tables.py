"""Table QA records (TAT-QA, FinQA, T2-RAGBench) → ``table`` samples.

The table becomes a markdown table (header row first, see ``markdown_table``), preceded
by its caption when the record has one; row/column counts, the caption and a
computation flag go into ``metadata``. Question types: ``numeric``, ``lookup``,
``comparison``, ``policy``.

Record shapes, told apart by their fields:

- TAT-QA: ``{table: {uid, table}, paragraphs: [...], questions: [...]}`` — one sample per
  question. TAT-QA labels each question, so the labels decide instead of keywords:
  ``req_comparison`` → comparison; ``answer_type`` arithmetic/count → numeric (and
  ``has_computation``); a non-numeric answer taken from the text only → policy (the
  narrative questions about what a company does or how it accounts); else lookup.
  Ground truth: the number with its ``scale`` (``13989 million``, ``2.96%``) for
  arithmetic and count answers and for spans that are all amounts (``$1,496.5`` with
  scale million → ``1496.5 million``); other spans joined with ``, ``. The raw answer is
  kept in ``metadata.original_answer``. Difficulty: table spans easy; text spans and
  one-step arithmetic medium; arithmetic with two or more operations hard.
- FinQA: ``{pre_text, post_text, table, qa: {question, answer, exe_ans, program}}`` — the
  executed answer ``exe_ans`` is preferred over the formatted ``answer``.
- T2-RAGBench: ``{question, program_answer, original_answer, context, table,
  table_caption?, file_name?, page_number?}`` — ``program_answer`` preferred over
  ``original_answer``; ``table`` may be a list of rows or a markdown table.
  FinQA and T2-RAGBench questions are typed with keyword rules (``QUESTION_RULES``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.markdown_table import (
    normalise_grid,
    parse_markdown_table,
    to_markdown,
)
from pytest_ragbench.datasets.readers import read_records
from pytest_ragbench.datasets.sample import NormalizedSample, make_id, short_hash
from pytest_ragbench.datasets.sources.base import (
    AdaptResult,
    build_sample,
    classify,
    jsonable,
    origin,
    require_mapping,
    require_text,
)
from pytest_ragbench.datasets.sources.numbers import format_number, parse_number, with_scale
from pytest_ragbench.errors import CaseError

NAME = "tables"
OPTIONS = {"source_dataset": "name written to source_dataset (default: by record shape)"}
DOC_TYPE = "table"

QUESTION_RULES = (
    ("numeric", ("percentage", "percent", " change", "growth", "increase", "decrease",
                 "ratio", "average", " total", " sum ")),
    ("comparison", ("compare", "comparison", "difference", " vs", "versus")),
    ("policy", ("policy", "policies", " method", "recogni", "approach", "accounting for")),
)
COMPUTATION_WORDS = (" percentage", " ratio", " average", " total", " sum ", " change",
                     " growth", " difference")
_OPERATOR = re.compile(r"[+*/×÷]|(?<=[\d)\s])-(?=\s*[\d(])")


def adapt_source(path: Path, options: Mapping[str, Any]) -> AdaptResult:
    """Every record of a JSON / JSONL file."""
    source = read_records(path)
    result = AdaptResult(errors=list(source.errors))
    for line, record in source.records:
        try:
            result.extend(adapt_record(record, file=path, line=line,
                                       source_dataset=options.get("source_dataset")))
        except CaseError as exc:
            result.errors.append(exc)
    return result


def adapt_record(record: Any, *, file: str | Path | None = None, line: int | None = None,
                 source_dataset: str | None = None) -> AdaptResult:
    """Samples of one record; a bad question of a TAT-QA item is an error, the rest go on."""
    record = require_mapping(record, file=file, line=line)
    if "questions" in record:
        return _tatqa(record, file, line, source_dataset or "tat-qa")
    if "qa" in record:
        return AdaptResult([_finqa(record, file, line, source_dataset or "finqa")])
    if "question" in record:
        return AdaptResult([_t2(record, file, line, source_dataset or "t2-ragbench")])
    raise CaseError("not a table QA record: expected TAT-QA 'questions', FinQA 'qa' "
                    "or T2-RAGBench 'question'", file=file, line=line, field="question")


# -- TAT-QA --------------------------------------------------------------------------------

def _tatqa(item: dict[str, Any], file: str | Path | None, line: int | None,
           source_dataset: str) -> AdaptResult:
    table = item.get("table")
    if not isinstance(table, dict):
        raise CaseError("expected {uid, table}", file=file, line=line, field="table")
    grid = _grid(table.get("table"), "table.table", file, line)
    table_uid = str(table.get("uid") or "")
    paragraphs = _paragraphs(item.get("paragraphs"), file, line)
    questions = item.get("questions")
    if not isinstance(questions, list):
        raise CaseError("expected a list", file=file, line=line, field="questions")
    contexts = (_table_block(grid, None), *paragraphs)
    result = AdaptResult()
    for index, question in enumerate(questions):
        where = f"questions[{index}]"
        try:
            result.samples.append(_tatqa_question(question, where, grid, table_uid, contexts,
                                                  file, line, source_dataset))
        except CaseError as exc:
            result.errors.append(exc)
    return result


def _tatqa_question(question: Any, where: str, grid: list[list[str]], table_uid: str,
                    contexts: tuple[str, ...], file: str | Path | None, line: int | None,
                    source_dataset: str) -> NormalizedSample:
    if not isinstance(question, dict):
        raise CaseError("expected an object", file=file, line=line, field=where)
    text = require_text(question, "question", file=file, line=line)
    answer_type = str(question.get("answer_type") or "")
    answer_from = str(question.get("answer_from") or "")
    scale = question.get("scale") or ""
    if not isinstance(scale, str):
        raise CaseError("expected text", file=file, line=line, field=f"{where}.scale")
    ground_truth, numeric = _tatqa_ground_truth(question.get("answer"), answer_type, scale,
                                                f"{where}.answer", file, line)
    derivation = str(question.get("derivation") or "")
    operations = len(_OPERATOR.findall(derivation))
    computation = answer_type in ("arithmetic", "count")
    if question.get("req_comparison") is True:
        question_type = "comparison"
    elif computation:
        question_type = "numeric"
    elif answer_from == "text" and not numeric:
        question_type = "policy"
    else:
        question_type = "lookup"
    if computation:
        difficulty = "hard" if operations >= 2 else "medium"
    else:
        difficulty = "easy" if answer_from == "table" else "medium"
    uid = question.get("uid")
    return build_sample(
        file=file, line=line,
        id=make_id("tatqa", uid if isinstance(uid, str) and uid else _fallback_uid(text, grid)),
        question=text, ground_truth=ground_truth, contexts=contexts, doc_type=DOC_TYPE,
        question_type=question_type, difficulty=difficulty, source_dataset=source_dataset,
        metadata={**_table_metadata(grid, None, computation, file, line),
                  "answer_type": answer_type, "answer_from": answer_from, "scale": scale,
                  "original_answer": jsonable(question.get("answer")),
                  "derivation": derivation, "req_comparison": question.get("req_comparison")
                  is True, "table_uid": table_uid, "context_group": table_uid or None})


def _tatqa_ground_truth(answer: Any, answer_type: str, scale: str, where: str,
                        file: str | Path | None, line: int | None) -> tuple[str, bool]:
    """``(ground truth, is_numeric)``; numbers are written plainly with their scale."""
    if isinstance(answer, bool) or answer is None:
        raise CaseError(f"expected a number, text or a list of spans, got {answer!r}",
                        file=file, line=line, field=where)
    if isinstance(answer, int | float):
        return _numeric(float(answer), scale, where, file, line), True
    spans = [answer] if isinstance(answer, str) else answer
    if not isinstance(spans, list) or not spans or not all(
            isinstance(s, str | int | float) and not isinstance(s, bool) for s in spans):
        raise CaseError("expected a number, text or a non-empty list of spans",
                        file=file, line=line, field=where)
    texts = [str(s).strip() for s in spans]
    parsed = [parse_number(t) for t in texts]
    if all(p is not None for p in parsed):
        numbers = [_numeric(value, own or scale, where, file, line)
                   for value, own in (p for p in parsed if p is not None)]
        return ", ".join(numbers), True
    joined = ", ".join(t for t in texts if t)
    if not joined:
        raise CaseError("empty answer", file=file, line=line, field=where)
    return joined, False


def _numeric(value: float, scale: str, where: str, file: str | Path | None,
             line: int | None) -> str:
    try:
        return with_scale(format_number(value), scale)
    except ValueError as exc:
        raise CaseError(str(exc), file=file, line=line, field=where) from None


def _paragraphs(value: Any, file: str | Path | None, line: int | None) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise CaseError("expected a list", file=file, line=line, field="paragraphs")
    ordered = []
    for index, paragraph in enumerate(value):
        if not isinstance(paragraph, dict) or not isinstance(paragraph.get("text"), str):
            raise CaseError("expected {order, text}", file=file, line=line,
                            field=f"paragraphs[{index}]")
        order = paragraph.get("order")
        key = order if isinstance(order, int) and not isinstance(order, bool) else index
        ordered.append((key, index, paragraph["text"]))
    return [text for _, _, text in sorted(ordered) if text.strip()]


# -- FinQA and T2-RAGBench ------------------------------------------------------------------

def _finqa(record: dict[str, Any], file: str | Path | None, line: int | None,
           source_dataset: str) -> NormalizedSample:
    qa = require_mapping(record.get("qa"), file=file, line=line)
    question = require_text(qa, "question", file=file, line=line)
    grid = _grid(record.get("table"), "table", file, line)
    ground_truth = _preferred_answer(qa, ("exe_ans", "answer"), file, line)
    program = str(qa.get("program") or "")
    steps = len(re.findall(r"\b(?:add|subtract|multiply|divide|exp|greater|table_\w+)\(",
                           program))
    computation = steps > 0 or _mentions_computation(question)
    texts = [_joined(record.get(k), k, file, line) for k in ("pre_text", "post_text")]
    return build_sample(
        file=file, line=line,
        id=make_id("finqa", record.get("id") or _fallback_uid(question, grid)),
        question=question, ground_truth=ground_truth,
        contexts=(_table_block(grid, None), *[t for t in texts if t]),
        doc_type=DOC_TYPE, question_type=classify(question, QUESTION_RULES, "lookup"),
        difficulty="hard" if steps >= 2 else ("medium" if computation else "easy"),
        source_dataset=source_dataset,
        metadata={**_table_metadata(grid, None, computation, file, line),
                  "program": program, "original_answer": jsonable(qa.get("answer")),
                  "context_group": str(record.get("id") or "") or None})


def _t2(record: dict[str, Any], file: str | Path | None, line: int | None,
        source_dataset: str) -> NormalizedSample:
    question = require_text(record, "question", file=file, line=line)
    grid = _grid(record.get("table"), "table", file, line)
    caption = record.get("table_caption") or None
    if caption is not None and not isinstance(caption, str):
        raise CaseError("expected text", file=file, line=line, field="table_caption")
    context = record.get("context") or ""
    if not isinstance(context, str):
        raise CaseError("expected text", file=file, line=line, field="context")
    ground_truth = _preferred_answer(record, ("program_answer", "original_answer"), file, line)
    computation = _mentions_computation(question)
    contexts = tuple(c for c in (context.strip(), _table_block(grid, caption)) if c)
    record_id = record.get("id") or _fallback_uid(question, grid)
    return build_sample(
        file=file, line=line, id=make_id("t2rag", record_id), question=question,
        ground_truth=ground_truth, contexts=contexts, doc_type=DOC_TYPE,
        question_type=classify(question, QUESTION_RULES, "lookup"),
        difficulty="medium" if computation else "easy", source_dataset=source_dataset,
        metadata={**_table_metadata(grid, caption, computation, file, line),
                  "original_answer": jsonable(record.get("original_answer")),
                  "file_name": jsonable(record.get("file_name")),
                  "page_number": jsonable(record.get("page_number")),
                  "context_group": str(record.get("context_id") or record_id)})


def _preferred_answer(record: Mapping[str, Any], names: tuple[str, ...],
                      file: str | Path | None, line: int | None) -> str:
    """The first usable answer field: a computed number is preferred to a formatted one."""
    for name in names:
        value = record.get(name)
        if isinstance(value, bool) or value is None or value == "":
            continue
        if isinstance(value, int | float):
            return _numeric(float(value), "", name, file, line)
        if isinstance(value, str) and value.strip():
            return value.strip()
    raise CaseError(f"no answer: none of {', '.join(names)} is a number or text",
                    file=file, line=line, field=names[0])


def _mentions_computation(question: str) -> bool:
    lowered = f" {question.lower()} "
    return any(word in lowered for word in COMPUTATION_WORDS)


# -- shared --------------------------------------------------------------------------------

def _grid(value: Any, where: str, file: str | Path | None, line: int | None
          ) -> list[list[str]]:
    """Rows of cells (text, numbers or null); a markdown table string is parsed."""
    if isinstance(value, str):
        value = parse_markdown_table(value)
    if not isinstance(value, list) or not all(isinstance(row, list) for row in value):
        raise CaseError("expected a list of rows (lists of cells)", file=file, line=line,
                        field=where)
    for row_index, row in enumerate(value):
        for column, cell in enumerate(row):
            if cell is not None and (isinstance(cell, bool)
                                     or not isinstance(cell, str | int | float)):
                raise CaseError(f"cell ({row_index}, {column}) is a {type(cell).__name__}",
                                file=file, line=line, field=where)
    grid = normalise_grid(value)
    if not grid:
        raise CaseError("the table has no cells", file=file, line=line, field=where)
    return grid


def _table_block(grid: list[list[str]], caption: str | None) -> str:
    markdown = to_markdown(grid)
    return f"Table: {caption.strip()}\n\n{markdown}" if caption and caption.strip() else markdown


def _table_metadata(grid: list[list[str]], caption: str | None, computation: bool,
                    file: str | Path | None, line: int | None) -> dict[str, Any]:
    return {"answerable": True, "table_rows": len(grid), "table_cols": len(grid[0]),
            "table_caption": caption, "has_computation": computation,
            **origin(file, line)}


def _joined(value: Any, name: str, file: str | Path | None, line: int | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return " ".join(v.strip() for v in value if v.strip())
    raise CaseError("expected text or a list of text", file=file, line=line, field=name)


def _fallback_uid(question: str, grid: list[list[str]]) -> str:
    return short_hash(question + "\x1f" + repr(grid))
