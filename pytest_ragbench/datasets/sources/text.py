"""Question types for plain-text QA (doc_type ``clean_text``), shared by several adapters."""

from __future__ import annotations

from pytest_ragbench.datasets.sources.base import classify

TEXT_RULES = (
    ("howto", ("how to", "how do", "how can", "steps to")),
    ("definition", ("what is", "what are", "what does", "define", "definition", "meaning of",
                    "purpose of")),
)


def text_question_type(question: str, fixed: str | None = None) -> str:
    """``fixed`` when the source decides (e.g. ``entity`` for DBpedia-Entity), else rules.

    Rules: howto, definition, else ``factual``.
    """
    return fixed or classify(question, TEXT_RULES, "factual")
