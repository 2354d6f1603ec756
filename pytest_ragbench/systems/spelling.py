"""Query spelling correction against the vocabulary of the indexed corpus (symspellpy).

A RAG application usually corrects a question's spelling before it retrieves: a misspelt
word matches no BM25 term and moves the dense embedding. :class:`VocabularySpeller`
learns the words of the indexed documents (a word's frequency is its count there) plus
:data:`QUESTION_WORDS`, which questions use more often than documents do. A word of a
question that is neither in that vocabulary nor a common English word becomes its
closest candidate within Damerau-Levenshtein distance 2 (symspellpy), the most frequent
in the corpus among equally close ones; everything else is kept as it was.

The common English words are those of the frequency list that ships inside symspellpy
(Google Books counts) seen at least :data:`ENGLISH_MIN_COUNT` times: without them, valid
words the corpus lacks would be "corrected" into corpus words ("failed" -> "field"). What
the correction changed in the bundled questions is recorded in test_cases/ragbench.toml.

Imported only when the embedded default system is built (symspellpy comes with the
extra ``embed``).
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.systems.protocols import Document

# Alphabetic words not glued to digits or underscores ("fg3a", "2w24" are left alone),
# with a possessive or contraction ending ("Jokic's", "didn't").
WORD = re.compile(r"\b([^\W\d_]+)((?:['’][^\W\d_]+)?)\b", re.UNICODE)
_ASCII_WORD = re.compile(r"[A-Za-z]+")
_POSSESSIVE = ("", "'s", "’s")
MIN_LENGTH = 3  # shorter words have too many neighbours
MAX_EDITS = 2  # for words longer than SHORT letters; one edit up to SHORT letters
SHORT = 4
MAX_CANDIDATES = 50_000  # most frequent corpus words offered as corrections; all are known
ENGLISH_LIST = "frequency_dictionary_en_82_765.txt"
# Below a million the list holds fragments and misspellings ("blok", "hos").
ENGLISH_MIN_COUNT = 1_000_000
# Words questions are made of, in the vocabulary even when the corpus lacks them, counted
# like the corpus's most frequent word: "Whst" is "What", not the corpus's "West".
_QUESTION_WORDS_TEXT = """
a about according after again against all also am an and any are as ask at be because
been before being between both but by can cannot compare compared could describe did
difference different do does doing done during each either else ever every explain for
from give had has have having he her here hers him his how however i if in into is it
its just know like many mean means more most much my need no not now of often on once
only or other our out over own please same say says see should show since so some such
tell than thank thanks that the their them then there these they think this those
through to too under until up us very want was way we well were what when where whether
which while who whom whose why will with without would yes yet you your
"""
QUESTION_WORDS = frozenset(_QUESTION_WORDS_TEXT.split())
# Question words that open questions, counted twice as often ("Whre" is "Where", not "Were").
INTERROGATIVES = frozenset({"how", "what", "when", "where", "which", "who", "whom", "whose",
                            "why"})
# Chat words, left as they are but never offered as a correction ("lob" is not "lol").
CHAT_WORDS = frozenset({"btw", "idk", "imo", "lmao", "lol", "nah", "ok", "omg", "pls", "plz",
                        "tbh", "thx", "ty", "ya", "yo"})
# Typed questions: the usual slips (a neighbouring key, a letter dropped, typed twice or
# swapped with the next) cost half an edit, any other edit a whole one: "teans" is
# "teams" rather than "means" and "Nall" is "Ball" rather than "all". Neighbours come
# from the QWERTY geometry: rows shifted right by a quarter and three quarters of a key.
KEYBOARD_ROWS = (("qwertyuiop", 0.0), ("asdfghjkl", 0.25), ("zxcvbnm", 0.75))
SLIP_COST = 0.5


class VocabularySpeller:
    """Corrects the words of a text that it does not know.

    ``counts`` maps lower-case words to their frequency in the corpus; ``english`` maps
    common English words to their general frequency; ``known`` words are left as they
    are without being offered as corrections. A word of ``min_length`` or more ASCII
    letters (or its possessive) that is none of these, nor a plural of one, becomes the
    candidate within ``max_edits`` Damerau-Levenshtein edits whose
    :func:`typing_distance` is at most ``max_edits`` (1 for words of up to :data:`SHORT`
    letters), among the ``max_candidates`` most frequent corpus words and
    the English words, with the smallest typing distance, then the highest corpus count,
    then the highest English count, in the original's case pattern (``UPPER``,
    ``Title`` or lower). Kept as they are: a word with no candidate, a word with other
    letters, in mixed case ("SQLite") or in upper case up to :data:`SHORT` letters
    (an acronym: "API"), contractions, digits, punctuation and whitespace.
    """

    def __init__(self, counts: Mapping[str, int], *, english: Mapping[str, int] | None = None,
                 known: Iterable[str] = CHAT_WORDS, min_length: int = MIN_LENGTH,
                 max_edits: int = MAX_EDITS, max_candidates: int = MAX_CANDIDATES) -> None:
        self.min_length = min_length
        self.max_edits = max_edits
        self.max_candidates = max_candidates
        self._counts = {w.lower(): int(n) for w, n in counts.items() if n > 0}
        self._english = {w.lower(): int(n) for w, n in (english or {}).items()}
        self._known = frozenset(w.lower() for w in known)
        self._symspell: Any = None  # built when a word first needs a correction
        self._corrected: dict[str, str] = {}
        self._lock = threading.Lock()

    def _index(self) -> Any:
        """The SymSpell index of the candidates, built once, when first needed.

        Building it is slow (the deletes of some 20,000 English and the corpus
        words); a process whose questions hold only known words, or whose
        answers all come from the cache, never pays that.
        """
        with self._lock:
            if self._symspell is None:
                from symspellpy import SymSpell

                index = SymSpell(max_dictionary_edit_distance=self.max_edits,
                                 prefix_length=max(7, self.max_edits + 1))
                frequent = sorted(self._counts,
                                  key=lambda w: (-self._counts[w], w))[:self.max_candidates]
                for word in sorted({*frequent, *self._english}):
                    index.create_dictionary_entry(word, 1)
                self._symspell = index
            return self._symspell

    @classmethod
    def from_texts(cls, texts: Iterable[str], *, extra: Iterable[str] = QUESTION_WORDS,
                   english: bool = True, **options: Any) -> VocabularySpeller:
        """Build from raw texts: word counts, plus ``extra`` counted as the most frequent.

        :data:`INTERROGATIVES` among ``extra`` count twice that.

        ``english=False`` leaves out the common English words (corpus words only).
        """
        counts = Counter(m.group(1).lower() for text in texts for m in WORD.finditer(text))
        top = max(counts.values(), default=1)
        for word in extra:
            counts[word.lower()] += top * (2 if word.lower() in INTERROGATIVES else 1)
        return cls(counts, english=english_words() if english else None, **options)

    @classmethod
    def from_documents(cls, documents: Sequence[Any], **options: Any) -> VocabularySpeller:
        """Build from the documents a retriever indexed (their titles and texts)."""
        # lazy: loads numpy
        from pytest_ragbench.systems.retrievers import search_text

        return cls.from_texts((search_text(d) if isinstance(d, Document)
                               else str(getattr(d, "text", d)) for d in documents), **options)

    def __len__(self) -> int:
        return len(self._counts)

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and word.lower() in self._counts

    def __repr__(self) -> str:
        return (f"VocabularySpeller({len(self)} corpus words, {len(self._english)} English "
                f"words, max_edits={self.max_edits})")

    def knows(self, word: str) -> bool:
        """True for a corpus, English or known word, or its plural in -s ("timeouts")."""
        lower = word.lower()
        plural = lower.endswith("s") and not lower.endswith("ss") and len(lower) > SHORT
        forms = (lower, lower[:-1]) if plural else (lower,)
        return any(f in self._counts or f in self._english or f in self._known for f in forms)

    def correct(self, text: str) -> str:
        """Return ``text`` with every unknown word replaced by its correction, if any."""
        with self._lock:
            done = self._corrected.get(text)
        if done is None:
            done = WORD.sub(self._replace, text)
            with self._lock:
                self._corrected[text] = done
        return done

    def _replace(self, match: re.Match[str]) -> str:
        word, ending = match.group(1), match.group(2)
        if ending.lower() not in _POSSESSIVE:  # "didn't", "they're": left alone
            return match.group(0)
        return self.correct_word(word) + ending

    def correct_word(self, word: str) -> str:
        """The correction of one word (the word itself when it is known or has none)."""
        if len(word) < self.min_length or self.knows(word) or not _ASCII_WORD.fullmatch(word) \
                or _mixed_case(word) or (word.isupper() and len(word) <= SHORT):
            return word
        from symspellpy import Verbosity

        budget = 1 if len(word) <= SHORT else self.max_edits
        lower = word.lower()
        found = self._index().lookup(lower, Verbosity.ALL, max_edit_distance=self.max_edits)
        costs = {s.term: typing_distance(lower, s.term) for s in found}
        candidates = [t for t, cost in costs.items() if cost <= budget]
        if not candidates:
            return word
        best = min(candidates, key=lambda t: (costs[t], -self._counts.get(t, 0),
                                              -self._english.get(t, 0), t))
        return _same_case(word, best)


def _keyboard_neighbours() -> dict[str, frozenset[str]]:
    places = {key: (row, column + shift) for row, (keys, shift) in enumerate(KEYBOARD_ROWS)
              for column, key in enumerate(keys)}
    return {key: frozenset(other for other, (row2, x2) in places.items() if other != key and
                           ((row2 == row and abs(x2 - x) == 1) or
                            (abs(row2 - row) == 1 and abs(x2 - x) < 1)))
            for key, (row, x) in places.items()}


NEIGHBOURS = _keyboard_neighbours()


def typing_distance(typed: str, word: str) -> float:
    """Damerau-Levenshtein distance (optimal string alignment) with cheap typing slips.

    A neighbouring key for the right one, a dropped letter, a letter typed twice and two
    adjacent letters swapped each cost :data:`SLIP_COST`; any other insertion or
    substitution costs 1.
    """
    rows, columns = len(typed) + 1, len(word) + 1
    table = [[0.0] * columns for _ in range(rows)]
    for i in range(rows):
        table[i][0] = float(i)
    for j in range(columns):
        table[0][j] = j * SLIP_COST
    for i in range(1, rows):
        for j in range(1, columns):
            a, b = typed[i - 1], word[j - 1]
            change = 0.0 if a == b else (SLIP_COST if b in NEIGHBOURS.get(a, ()) else 1.0)
            extra = SLIP_COST if i > 1 and a == typed[i - 2] else 1.0  # typed twice
            table[i][j] = min(table[i - 1][j] + extra, table[i][j - 1] + SLIP_COST,
                              table[i - 1][j - 1] + change)
            if i > 1 and j > 1 and a == word[j - 2] and typed[i - 2] == b:
                table[i][j] = min(table[i][j], table[i - 2][j - 2] + SLIP_COST)
    return table[-1][-1]


# Part of every cached correction's key: change it when a correction could come out
# differently (the algorithm or its constants), so that no older correction is reused.
CORRECTION_VERSION = 1


class CachedSpeller:
    """A :class:`VocabularySpeller` of ``documents`` whose corrections are cached.

    Corrections are kept in ``cache`` (a :class:`~.cache.CorrectionCache`, persistent
    in the cache directory) under the corpus, the speller's settings, symspellpy's
    version and the text. The speller itself, its vocabulary and its SymSpell index
    (slow to build) are built only when a text is not in the cache, so a
    warm session, and each of its xdist workers, never builds them.
    """

    def __init__(self, documents: Sequence[Any], corpus_key: str, cache: Any) -> None:
        from importlib.metadata import version

        self.documents = documents
        self.cache = cache
        self.key = f"{corpus_key}:{CORRECTION_VERSION}:{ENGLISH_MIN_COUNT}:" \
                   f"{MAX_EDITS}:{MAX_CANDIDATES}:symspellpy {version('symspellpy')}"
        self._speller: VocabularySpeller | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CachedSpeller({len(self.documents)} documents)"

    @property
    def speller(self) -> VocabularySpeller:
        """The speller of the documents, built when first needed."""
        with self._lock:
            if self._speller is None:
                self._speller = VocabularySpeller.from_documents(self.documents)
            return self._speller

    def correct(self, text: str) -> str:
        """Return ``text`` with every unknown word replaced by its correction, if any."""
        cached = self.cache.get(self.key, text)
        if cached is not None:
            return str(cached)
        corrected = self.speller.correct(text)
        self.cache.put(self.key, text, corrected)
        return corrected


@functools.cache
def english_words(min_count: int = ENGLISH_MIN_COUNT) -> dict[str, int]:
    """The words of symspellpy's English frequency list counted at least ``min_count`` times."""
    import symspellpy

    path = Path(symspellpy.__file__).with_name(ENGLISH_LIST)
    words: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) >= min_count:
                words[parts[0]] = int(parts[1])
    return words


def _mixed_case(word: str) -> bool:
    """True for a word that is neither all upper, nor capitalised, nor lower case."""
    return not (word.isupper() or word.islower() or word[1:].islower())


def _same_case(original: str, word: str) -> str:
    """``word`` in the case pattern of ``original``: all upper, capitalised or lower."""
    if len(original) > 1 and original.isupper():
        return word.upper()
    if original[:1].isupper():
        return word[:1].upper() + word[1:]
    return word
