"""Query spelling correction (symspellpy) and its use by the embedded default system."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("symspellpy", reason="needs the extra 'embed'")
pytest.importorskip("bm25s", reason="needs the extra 'embed'")

from pytest_ragbench.systems.default import EmbeddedSystem
from pytest_ragbench.systems.protocols import Context, Generation, Usage
from pytest_ragbench.systems.retrievers import BM25Retriever
from pytest_ragbench.systems.spelling import VocabularySpeller, english_words, typing_distance
from tests.conftest import REPO_ROOT
from tests.helpers import four_documents

TEXTS = [
    "Rudy Gobert won Defensive Player of the Year. The Boston Celtics won the title.",
    "True shooting percentage weighs free throws. The West was deep; the West was strong.",
    "The field was wet. The Celtics won 64 games and Gobert led the West in blocks.",
    "The minimum salary rose. Dallas traded for Daniel Gafford at the deadline.",
]


@pytest.fixture(scope="module")
def speller() -> VocabularySpeller:
    return VocabularySpeller.from_texts(TEXTS)


@pytest.mark.parametrize(("misspelt", "corrected"), [
    ("Celtucs", "Celtics"),  # keyboard neighbour: i -> u
    ("percrntage", "percentage"),  # e -> r
    ("Gaffprd", "Gafford"),  # o -> p
    ("Gobrt", "Gobert"),  # dropped letter
    ("Deadlne", "Deadline"),
    ("Celticss", "Celtics"),  # doubled letter
    ("Plaayer", "Player"),
    ("Defemsuve", "Defensive"),  # two edits
    ("Gobret", "Gobert"),  # swapped letters: one Damerau-Levenshtein edit
    ("teh", "the"),  # three letters: one edit
])
def test_a_misspelt_word_becomes_the_vocabulary_word(speller: VocabularySpeller, misspelt: str,
                                                      corrected: str) -> None:
    assert speller.correct_word(misspelt) == corrected


@pytest.mark.parametrize(("typed", "slip", "other"), [
    ("teans", "teams", "means"),  # n is next to m; t is far from m
    ("nall", "ball", "all"),  # n is next to b; a stray letter is a whole edit
    ("fasy", "fast", "easy"),  # y is next to t; f is not next to e
    ("teh", "the", "ten"),  # swapped letters, as cheap as a neighbouring key: tie
])
def test_typing_slips_cost_less_than_other_edits(typed: str, slip: str, other: str) -> None:
    assert typing_distance(typed, slip) == 0.5
    assert typing_distance(typed, other) >= 0.5
    assert typing_distance("whst", "what") == 0.5 and typing_distance("bookk", "book") == 0.5
    assert typing_distance("gobrt", "gobert") == 0.5  # dropped letter
    assert typing_distance("xorld", "world") == 1.0  # x is not next to w


def test_the_closest_slip_wins_over_a_more_frequent_word() -> None:
    texts = ["means means means means teams", "all all all all ball", "easy easy fast"]
    speller = VocabularySpeller.from_texts(texts, english=False, extra=())
    assert speller.correct("Teans Nall fasy") == "Teams Ball fast"
    # equally close: the more frequent word
    assert VocabularySpeller.from_texts(["ten ten ten the"], english=False, extra=(),
                                        ).correct_word("teh") == "ten"


def test_three_edits_are_too_many(speller: VocabularySpeller) -> None:
    assert speller.correct_word("Defemsuce") == "Defemsuce"
    assert speller.correct_word("Defemsive") == "Defensive"


def test_the_case_pattern_of_the_original_is_kept(speller: VocabularySpeller) -> None:
    assert speller.correct("celtucs Celtucs CELTUCS") == "celtics Celtics CELTICS"
    assert speller.correct("the dallas deadlune") == "the dallas deadline"


def test_punctuation_whitespace_and_possessives_are_kept(speller: VocabularySpeller) -> None:
    text = "  (Gobrt's\tblocks) -- did the Celtucs win?!\n"
    assert speller.correct(text) == "  (Gobert's\tblocks) -- did the Celtics win?!\n"


def test_known_words_are_left_as_they_are(speller: VocabularySpeller) -> None:
    # corpus words, and English words the corpus lacks but has a close neighbour of
    text = "The West traded Gafford. Why did it fail, what went wrong, was the maximum failed?"
    assert speller.correct(text) == text
    assert "wrong" not in speller and "won" in speller and "wrong" in english_words()
    # without the English list those would be "corrected" into corpus words
    corpus_only = VocabularySpeller.from_texts(TEXTS, english=False)
    assert corpus_only.correct("wrong maximum failed") == "strong minimum field"


def test_question_words_win_over_frequent_corpus_words(speller: VocabularySpeller) -> None:
    assert "what" not in speller.correct(" ".join(TEXTS)).lower()
    assert speller.correct("Whst is the West?") == "What is the West?"  # not "West is"


def test_numbers_and_words_glued_to_digits_are_left_alone(speller: VocabularySpeller) -> None:
    text = "In 2023-24, 3PT and fg3a and 2w24 won 64 games"
    assert speller.correct(text) == text


@pytest.mark.parametrize("text", [
    "Qzxvbnm",  # no candidate within two edits
    "Zj",  # too short
    "API",  # an acronym
    "SQLite",  # mixed case
    "didn't",  # a contraction
    "Jokić",  # not ASCII
    "lol",  # a chat word
])
def test_words_without_a_safe_correction_are_unchanged(speller: VocabularySpeller,
                                                       text: str) -> None:
    assert speller.correct(text) == text


def test_correction_is_idempotent(speller: VocabularySpeller) -> None:
    once = speller.correct("Whst did teh Celtucs and Gobrt do at the deadlne?")
    assert once == "What did the Celtics and Gobert do at the deadline?"
    assert speller.correct(once) == once


def test_corrections_are_cached_and_a_warm_speller_is_never_built(tmp_path: Any) -> None:
    from pytest_ragbench.systems.cache import Caches
    from pytest_ragbench.systems.spelling import CachedSpeller

    docs = four_documents()
    question = "Whst did teh Celtucs do at the deadlne?"
    plain = VocabularySpeller.from_documents(docs).correct(question)
    assert plain != question

    first = CachedSpeller(docs, "corpus-1", Caches.open(tmp_path).corrections)
    assert first.correct(question) == plain
    assert first._speller is not None  # built: the cache was empty

    warm = Caches.open(tmp_path)  # another session (or xdist worker) on the same cache
    second = CachedSpeller(docs, "corpus-1", warm.corrections)
    assert second.correct(question) == plain
    assert second._speller is None  # answered from the cache, nothing built
    assert warm.corrections.stats().hits == 1

    other_corpus = CachedSpeller(docs, "corpus-2", warm.corrections)
    assert other_corpus.correct(question) == plain
    assert other_corpus._speller is not None  # another corpus: not taken from corpus-1's


# -- the embedded default system ---------------------------------------------------------


DOCS = four_documents()


class CountingBM25(BM25Retriever):
    """The real BM25 retriever, remembering the queries it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[list[str]] = []

    def retrieve_many(self, queries: Sequence[str], *args: Any, **kw: Any) -> list[list[Context]]:
        self.asked.append(list(queries))
        return super().retrieve_many(queries, *args, **kw)


class Recorder:
    """A generator that remembers the chats it is given."""

    model_id = "recorder"

    def __init__(self) -> None:
        self.chats: list[list[dict[str, str]]] = []

    def generate(self, messages: Sequence[Any], **_: Any) -> Generation:
        self.chats.append(list(messages))
        return Generation("ok", "recorder", Usage())

    async def agenerate(self, messages: Sequence[Any], **kw: Any) -> Generation:
        return self.generate(messages, **kw)


@pytest.fixture
def bm25() -> CountingBM25:
    retriever = CountingBM25()
    retriever.index(DOCS)
    return retriever


def test_the_system_retrieves_and_prompts_with_the_corrected_question(
        bm25: CountingBM25) -> None:
    generator = Recorder()
    system = EmbeddedSystem(bm25, generator, decline_below=None,
                            speller=VocabularySpeller.from_documents(bm25.documents))
    assert "corrects spelling against the corpus vocabulary" in system.describe()
    answer = system.answer("When was the Eiffel Towr complted?",
                           history=[{"role": "user", "content": "Tell me about Pariss"},
                                    {"role": "assistant", "content": "Pariss iz nice"}])
    assert answer.contexts[0].id == "d1"
    assert bm25.asked == [["Tell me about Paris When was the Eiffel Tower completed?"]]
    chat = generator.chats[0]
    assert chat[-1] == {"role": "user", "content": "When was the Eiffel Tower completed?"}
    assert chat[-3] == {"role": "user", "content": "Tell me about Paris"}
    assert chat[-2] == {"role": "assistant", "content": "Pariss iz nice"}  # not the user's


def test_prepare_retrieves_the_corrected_questions_once(bm25: CountingBM25) -> None:
    system = EmbeddedSystem(bm25, Recorder(), decline_below=None,
                            speller=VocabularySpeller.from_documents(bm25.documents))
    questions = ["Who creatd Pyhton?", "Who created Python?", "Whre is the Eifel Tower?"]
    system.prepare(questions)
    assert bm25.asked == [["Who created Python?", "Where is the Eiffel Tower?"]]

    async def answer_all() -> list[Any]:
        return await asyncio.gather(*(system.aanswer(q) for q in questions))

    answers = asyncio.run(answer_all())
    assert len(bm25.asked) == 1  # every answer found its contexts prepared
    assert [a.contexts[0].id for a in answers] == ["d2", "d2", "d1"]


def test_without_a_speller_the_question_is_used_as_it_is(bm25: CountingBM25) -> None:
    system = EmbeddedSystem(bm25, None, decline_below=None)
    assert "spelling" not in system.describe()
    answer = system.answer("When was the Eiffel Towr complted?")
    assert bm25.asked == [["When was the Eiffel Towr complted?"]]
    assert "completed in 1889" in answer.text  # the extractive path still works
    with_speller = EmbeddedSystem(bm25, None, decline_below=None,
                                  speller=VocabularySpeller.from_documents(bm25.documents))
    assert "completed in 1889" in with_speller.answer("Whn was the Eifel Tower complted?").text


# Misspelt versions of bundled vector questions: keyboard typos, dropped, doubled and
# swapped letters, at most two edits per word.
MISSPELT = {
    "What is true shooting percentage and how is it calculated?":
        "Whst is ttue shooting percentabe and how is it calculated?",
    "What does PIE mean in basketball statistics?":
        "What does PIE mean in basketbal statisyics?",
    "Who won Defensive Player of the Year in 2024?":
        "Who won Defensuve Plaeyr of the Year in 2024?",
    "Which team traded for Daniel Gafford at the deadline?":
        "Which team traded for Dabiel Gaffird at the deadline?",
    "What happened to Ja Morant this season?": "What happened to Ja Moraant this seasn?",
    "How does the play-in tournament work?": "How does the play-in tournamemt wirk?",
    "What is usage rate?": "What is usagr rste?",
}


def test_the_hybrid_default_retrieves_the_same_top_k_for_misspelt_questions() -> None:
    pytest.importorskip("faiss", reason="needs the extra 'embed'")
    from pytest_ragbench.systems.corpus import load_corpus
    from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder
    from pytest_ragbench.systems.retrievers import default_retriever

    retriever = default_retriever(SentenceTransformerEmbedder())
    retriever.index(load_corpus([REPO_ROOT / "test_cases" / "corpus"]))
    speller = VocabularySpeller.from_documents(retriever.documents)
    corrected, plain = EmbeddedSystem(retriever, None, speller=speller), \
        EmbeddedSystem(retriever, None)
    questions = [*MISSPELT, *MISSPELT.values()]
    corrected.prepare(questions)
    plain.prepare(questions)
    for original, misspelt in MISSPELT.items():
        assert speller.correct(misspelt) == original
        ids = [c.id for c in corrected.answer(original).contexts]
        assert len(ids) == 5 and [c.id for c in corrected.answer(misspelt).contexts] == ids
        # without correction the misspelling moves the ranking
        assert [c.id for c in plain.answer(misspelt).contexts] != ids
