"""The project's own case files → samples, through the case loaders (``pytest_ragbench.cases``).

``ragas`` cases map field for field; ``vector`` cases give question + ground truth
(``expect: decline`` cases become unanswerable samples); ``hybrid`` and ``sql`` cases
give question + ``ground_truth_answer`` (sql cases without one are skipped); ``memory``
scenarios have no question/answer pair and are skipped. A folder is searched
recursively for case files; BEIR folders inside it are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ragbench.cases import load_file
from pytest_ragbench.datasets.sample import NormalizedSample, make_id
from pytest_ragbench.datasets.sources.base import AdaptResult, build_sample, jsonable
from pytest_ragbench.datasets.sources.text import text_question_type
from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.beir import is_beir_folder

NAME = "cases"
OPTIONS = {
    "doc_type": "doc_type of cases that have none (default clean_text)",
    "difficulty": "difficulty of cases that have none (default medium)",
    "source_dataset": "source_dataset of cases that have none (default: the file stem)",
}
SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")


def adapt_source(path: Path, options: Mapping[str, Any]) -> AdaptResult:
    """Every case of a case file, or of every case file under a folder."""
    result = AdaptResult()
    for file in case_files(path):
        try:
            built = load_file(file)
        except CaseError as exc:
            result.errors.append(exc)
            continue
        result.errors.extend(built.errors)
        for case in built.cases:
            try:
                sample = adapt_case(case, options)
            except CaseError as exc:
                result.errors.append(exc)
                continue
            if isinstance(sample, str):
                result.skipped[sample] += 1
            else:
                result.samples.append(sample)
    return result


def case_files(path: Path) -> list[Path]:
    """``path`` itself, or the case files under it (sorted, BEIR folders left out)."""
    if not path.is_dir():
        return [path]
    found = []
    for file in sorted(path.rglob("*")):
        if not file.is_file() or any(is_beir_folder(p) for p in file.parents):
            continue
        if file.suffix in SUFFIXES or file.name.endswith("_test_cases.py"):
            found.append(file)
    return found


def adapt_case(case: Any, options: Mapping[str, Any]) -> NormalizedSample | str:
    """One case as a sample, or the reason it cannot be one."""
    kind = case.kind
    extra: dict[str, Any] = {}
    answerable = True
    if kind == "ragas":
        ground_truth, contexts = case.ground_truth, tuple(case.contexts or ())
        extra = dict(case.metadata)
        answerable = extra.get("answerable", True) is not False
    elif kind == "vector":
        ground_truth, contexts = case.ground_truth, ()
        extra = {"expected_sources": list(case.expected_sources)}
        answerable = case.expect != "decline"
    elif kind in ("hybrid", "sql"):
        if not case.ground_truth_answer:
            return f"{kind} case without ground_truth_answer"
        ground_truth, contexts = case.ground_truth_answer, ()
        if case.expected_sql:
            extra = {"expected_sql": case.expected_sql}
    else:
        return f"{kind} case (no question/answer pair)"
    stem = Path(case.file).name.split(".")[0]
    return build_sample(
        file=case.file, line=case.line, id=make_id("case", stem, case.id),
        question=case.question, ground_truth=ground_truth, contexts=contexts,
        doc_type=getattr(case, "doc_type", None) or str(options.get("doc_type") or "clean_text"),
        question_type=getattr(case, "question_type", None) or text_question_type(case.question),
        difficulty=getattr(case, "difficulty", None) or str(options.get("difficulty")
                                                             or "medium"),
        source_dataset=getattr(case, "source_dataset", None) or str(
            options.get("source_dataset") or stem),
        answer=getattr(case, "answer", None),
        metadata={**jsonable(extra), "answerable": answerable, "case_kind": kind,
                  "case_id": case.id, "category": case.category, "tags": list(case.tags),
                  "source_file": Path(case.file).name, "source_line": case.line,
                  "context_group": f"case:{stem}:{case.id}"})
