"""A RAGCSV file → samples, one per readable row.

Column 4 is the question, column 0 the ground truth, the fragments' ``page_content`` the
contexts (titles and other fragment metadata go to ``metadata``). Difficulty by the
number of fragments: 1 easy, 2-3 medium, ≥4 hard.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.sample import NormalizedSample, make_id
from pytest_ragbench.datasets.sources.base import AdaptResult, build_sample, jsonable, origin
from pytest_ragbench.datasets.sources.text import text_question_type
from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.ragcsv import RagcsvRow, read_ragcsv

NAME = "ragcsv"
OPTIONS = {
    "doc_type": "doc_type of every sample (default clean_text)",
    "question_type": "question type of every row (default: keyword rules)",
    "source_dataset": "name written to source_dataset (default ragcsv-<file stem>)",
}


def adapt_source(path: Path, options: Mapping[str, Any]) -> AdaptResult:
    """Every readable row of the file."""
    data = read_ragcsv(path)
    result = AdaptResult(errors=list(data.errors))
    for row in data.rows:
        try:
            result.samples.append(adapt_row(row, path, options))
        except CaseError as exc:
            result.errors.append(exc)
    return result


def adapt_row(row: RagcsvRow, path: Path, options: Mapping[str, Any]) -> NormalizedSample:
    """One row as a sample."""
    stem = path.name.removesuffix(".csv").removesuffix(".ragcsv")
    count = len(row.fragments)
    return build_sample(
        file=path, line=row.line, id=make_id("ragcsv", stem, row.row), question=row.question,
        ground_truth=row.expected,
        contexts=tuple(f.page_content for f in row.fragments if f.page_content.strip()),
        doc_type=str(options.get("doc_type") or "clean_text"),
        question_type=text_question_type(row.question, options.get("question_type")),
        difficulty="easy" if count <= 1 else ("medium" if count <= 3 else "hard"),
        source_dataset=str(options.get("source_dataset") or f"ragcsv-{stem}"),
        metadata={"answerable": True, "row": row.row,
                  "fragment_titles": [f.title for f in row.fragments],
                  "fragment_metadata": [jsonable(f.metadata) for f in row.fragments],
                  "hallucination_note": row.hallucination, "timestamp": row.timestamp,
                  "context_group": f"ragcsv:{stem}:{row.row}", **origin(path, row.line)})
