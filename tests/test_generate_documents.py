"""``ragbench generate`` from documents and BEIR corpora: passages and the filters' parts.

The model-facing paths are in tests/test_generate_questions.py (a real server).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragbench.datasets.generate.command import source_type
from pytest_ragbench.datasets.generate.documents import (
    html_text,
    read_beir_corpus,
    read_documents,
)
from pytest_ragbench.datasets.generate.questions import (
    Bounds,
    Candidate,
    QuestionGenerator,
    copy_overlap,
    difficulty,
    entities,
    entity_pairs,
    perturb,
    source_share,
)
from pytest_ragbench.systems.protocols import Document
from tests.conftest import REPO_ROOT

HTML = """<!doctype html><html><head><title>Arena guide</title>
<style>body { color: red }</style><script>var hidden = "never shown";</script></head>
<body><h1>Arena guide</h1><p>The Garden seats 19,812 for basketball.</p>
<p>Doors open 90 minutes before tip-off.</p></body></html>"""


def minimal_pdf(lines: list[str]) -> bytes:
    """A one-page PDF whose text is ``lines`` (Helvetica), with a correct xref table."""
    text = "".join(f"({line}) Tj T* " for line in lines)
    stream = f"BT /F1 12 Tf 14 TL 72 720 Td {text}ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
               b"/Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


def test_a_folder_of_markdown_text_html_and_pdf_becomes_passages(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("---\ntitle: Team notes\n---\nThe Knicks play at "
                                       "the Garden.\n\nJalen Brunson leads the team.\n")
    (tmp_path / "plain.txt").write_text("A plain text file about the Celtics.\n")
    (tmp_path / "arena.html").write_text(HTML)
    (tmp_path / "report.pdf").write_bytes(minimal_pdf(["Season report", "Wins: 50"]))
    (tmp_path / "image.png").write_bytes(b"\x89PNG")  # not a document: ignored
    passages, problems = read_documents(tmp_path)
    assert problems == []
    by_source = {p.metadata["source"]: p for p in passages}
    assert set(by_source) == {"notes.md", "plain.txt", "arena.html", "report.pdf"}
    assert by_source["notes.md"].metadata["title"] == "Team notes"
    assert "Jalen Brunson" in by_source["notes.md"].text
    arena = by_source["arena.html"]
    assert arena.metadata["title"] == "Arena guide"
    assert "19,812" in arena.text and "never shown" not in arena.text
    assert "color" not in arena.text
    pdf = by_source["report.pdf"]
    assert "Season report" in pdf.text and "Wins: 50" in pdf.text
    assert pdf.metadata["page"] == 1 and pdf.id == "report.pdfp1#0"
    assert source_type(str(tmp_path)) == "documents"


def test_a_broken_pdf_is_reported_and_the_rest_is_read(tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("# Good\n\nA readable document.\n")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf")
    passages, problems = read_documents(tmp_path)
    assert [p.metadata["source"] for p in passages] == ["good.md"]
    assert len(problems) == 1 and "broken.pdf" in str(problems[0])


def test_html_paragraphs_stay_apart() -> None:
    text, title = html_text("<p>One.</p><p>Two.</p><ul><li>Three</li></ul>")
    assert title == ""
    assert [part.strip() for part in text.split("\n\n") if part.strip()] == \
        ["One.", "Two.", "Three"]


def test_a_beir_corpus_is_split_into_passages_named_by_document_id() -> None:
    folder = REPO_ROOT / "test_cases" / "beir" / "nba_mini"
    assert source_type(str(folder)) == "beir"
    passages, problems = read_beir_corpus(folder, chunk_chars=300)
    assert problems == []
    records = [line for line in (folder / "corpus.jsonl").read_text().splitlines() if line]
    assert len(passages) >= len(records)
    assert all(len(p.text) <= 300 or " " not in p.text for p in passages)
    assert all(p.id.startswith(str(p.metadata["source"]) + "#") for p in passages)


def test_the_bundled_corpus_folder_is_documents_not_tables() -> None:
    assert source_type(str(REPO_ROOT / "test_cases" / "corpus")) == "documents"


def test_copy_overlap_measures_a_copied_sentence() -> None:
    source = ["True shooting percentage adds free throws to field goals. It is a rate."]
    assert copy_overlap("True shooting percentage adds free throws to field goals?",
                        source) == 1.0
    reworded = copy_overlap("Which efficiency measure counts trips to the line?", source)
    assert reworded < 0.5


def _shooting_passage() -> Document:
    """The bundled glossary on shooting efficiency, up to its true shooting entry."""
    path = REPO_ROOT / "test_cases" / "corpus" / "glossary_shooting_efficiency.md"
    text = path.read_text(encoding="utf-8").split("**True shooting")[0]
    return Document("glossary_shooting_efficiency.md#0", text,
                    {"source": "glossary_shooting_efficiency.md"})


def test_source_share_counts_question_words_found_anywhere_in_the_passages() -> None:
    passage = _shooting_passage().text
    # what SmolLM2 wrote for a passage, which its own judge accepted
    assert source_share("What is the answer to the question?", [passage]) == 0.0
    on_topic = "How is a player who attempts no threes stored in the database?"
    assert source_share(on_topic, [passage]) >= 0.5
    assert source_share("Which stat is stored as NULL?", []) == 0.0


def test_a_question_that_shares_no_word_with_its_source_is_rejected_before_any_call(
) -> None:
    # no model, embedder or retriever: the overlap filter must decide before they are used
    passage = _shooting_passage()
    generator = QuestionGenerator([passage], None, embedder=None, retriever=None)
    candidate = Candidate("factual", "What is the answer to the question?", "yes", [passage])
    record, reason = generator.check(candidate)
    assert reason == "shares too few words with its source"
    assert record["overlap"]["in_sources"] == 0.0
    assert record["overlap"]["min"] == Bounds().min_overlap
    assert generator.accounting.model_calls == 0
    # a follow-up leans on its first question: their words together are counted
    follow_up = Candidate("conversational", "Why is that?", "it is undefined", [passage],
                          history=[{"role": "user",
                                    "content": "How are missing three-point percentages "
                                               "stored in the database?"},
                                   {"role": "assistant", "content": "As NULL."}])
    alone = Candidate("conversational", "Why is that?", "it is undefined", [passage])
    assert generator.check(alone)[1] == "shares too few words with its source"
    with pytest.raises(AttributeError):  # past the overlap filter: the retriever is next
        generator.check(follow_up)


def test_a_statement_or_an_answer_that_repeats_its_question_is_rejected_before_any_call(
) -> None:
    # SmolLM2 wrote both as "questions"; neither tests a retriever
    passage = _shooting_passage()
    generator = QuestionGenerator([passage], None, embedder=None, retriever=None)
    statement = "Three-point percentages are stored as NULL when no attempts were made."
    record, reason = generator.check(Candidate("factual", statement, "NULL", [passage]))
    assert (reason, record["form"]["question_mark"]) == ("not a question", False)
    question = "How are missing three-point percentages stored?"
    record, reason = generator.check(
        Candidate("factual", question, "how are missing Three-point percentages stored",
                  [passage]))
    assert (reason, record["form"]["answer_repeats_question"]) == (
        "the answer repeats the question", True)
    # a noisy variant is judged by its original: a perturbation may drop the mark
    noisy = Candidate("noisy", "How are missin three-point percentages stored", "As NULL.",
                      [passage], extra={"original_question": question})
    with pytest.raises(AttributeError):  # past the form and overlap filters: the retriever
        generator.check(noisy)
    assert generator.accounting.model_calls == 0


@pytest.mark.parametrize(("rank", "level"), [(1, "easy"), (2, "medium"), (5, "medium"),
                                             (6, "hard"), (None, "hard")])
def test_difficulty_follows_the_rank_of_the_source(rank: int | None, level: str) -> None:
    assert difficulty(rank) == level


def test_passages_of_two_documents_that_name_one_entity_are_paired() -> None:
    import random

    a = Document("a#0", "Last year Jalen Brunson signed a new deal.", {"source": "a.md"})
    b = Document("b#0", "The Knicks rely on Jalen Brunson in the fourth.", {"source": "b.md"})
    c = Document("a#1", "Then Jalen Brunson scored 40.", {"source": "a.md"})
    assert "Jalen Brunson" in entities(a.text)
    pairs = entity_pairs([a, b, c], random.Random(0))
    assert {(x.id, y.id) for x, y, _e in pairs} == {("a#0", "b#0"), ("b#0", "a#1")}
    assert all(entity == "Jalen Brunson" for _x, _y, entity in pairs)


def test_noisy_variants_come_from_the_robustness_perturbations() -> None:
    question = "What is true shooting percentage and how is it computed?"
    first = perturb(question, 3)
    assert first is not None
    changed, change = first
    assert changed != question
    assert change.split(":")[0] in ("typos", "drop", "case", "synonyms", "filler")
    assert perturb(question, 3) == first  # the seed fixes the variant
