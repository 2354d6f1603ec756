"""Answer metrics: exact match, token F1, numeric match, keywords, entities, similarity.

Exact match and token F1 follow the SQuAD v1.1 evaluation script (lower case, no
punctuation, no articles, single spaces). Numbers are read with units and formatting
in mind: ``15.2`` = ``15.2%`` = ``15.2 percent``; ``$1.2 million`` = ``1,200,000``.
A written number also stands for the values that round to it (``51%`` for 0.512),
which ``rounding=False`` turns off. Embeddings come from an injected embedder;
numpy is imported only by :func:`semantic_similarity`.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pytest_ragbench.metrics.registry import Score, Unscored

if TYPE_CHECKING:
    import numpy as np


class SupportsEmbed(Protocol):
    """Anything with ``embed(texts) -> array`` (one L2-normalised row per text)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


# ---------------------------------------------------------------- SQuAD text metrics

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, drop punctuation and articles, single spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def _references(reference: str | Sequence[str]) -> list[str]:
    refs = [reference] if isinstance(reference, str) else list(reference)
    if not refs:
        raise ValueError("no reference answer given")
    return refs


def exact_match(prediction: str, reference: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals a normalised reference, else 0.0."""
    pred = normalize_answer(prediction)
    return max(float(pred == normalize_answer(ref)) for ref in _references(reference))


def token_f1(prediction: str, reference: str | Sequence[str]) -> float:
    """SQuAD token F1 against the best-matching reference."""
    return max(_f1(prediction, ref) for ref in _references(reference))


def _f1(prediction: str, reference: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


# ---------------------------------------------------------------- numbers

_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6,
           "billion": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12, "tn": 1e12}
_NUMBER = re.compile(
    r"""(?<![\w.])(?P<neg>[-−])?(?:[$€£¥]\s?)?
        (?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)
        (?:\s?(?P<pct>%|percent\b|per\s?cent\b|pct\b)
          |\s?(?P<word>thousand|million|billion|trillion)\b
          |(?P<abbr>k|mn|m|bn|b|tn)\b)?""",
    re.VERBOSE | re.IGNORECASE)


@dataclass(frozen=True)
class Number:
    """A number as written: its value and half a unit of its last written digit."""

    value: float
    half_unit: float = 0.0


def numbers_in(text: str) -> list[list[Number]]:
    """Every number in ``text``, each as its possible readings (a percent has two)."""
    found = []
    for match in _NUMBER.finditer(text):
        digits = match["num"].replace(",", "")
        decimals = len(digits.partition(".")[2])
        scale = _SCALES[(match["word"] or match["abbr"] or "").lower()] if (
            match["word"] or match["abbr"]) else 1.0
        sign = -1.0 if match["neg"] else 1.0
        value = sign * float(digits) * scale
        half = 0.5 * 10.0 ** -decimals * scale
        readings = [Number(value, half)]
        if match["pct"]:
            readings.append(Number(value / 100, half / 100))
        found.append(readings)
    return found


def _as_readings(value: Any) -> list[Number] | None:
    """Readings of a ground-truth value: exact for numbers, as written for numeric text."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return [Number(float(value))] if math.isfinite(value) else None
    if isinstance(value, str):
        parsed = numbers_in(value)
        # Only text that is nothing but one number (with its unit) counts as numeric.
        if len(parsed) == 1 and _NUMBER.sub("", value).strip(" $€£¥") == "":
            return parsed[0]
    return None


def _close(a: Number, b: Number, rel_tol: float, rounding: bool) -> bool:
    diff = abs(a.value - b.value)
    allowed = rel_tol * max(abs(a.value), abs(b.value))
    if rounding:
        allowed = max(allowed, max(a.half_unit, b.half_unit) * (1 + 1e-9))
    return diff <= allowed


def _mentioned(readings: list[Number], candidates: list[list[Number]], rel_tol: float,
               rounding: bool) -> bool:
    return any(_close(r, c, rel_tol, rounding)
               for found in candidates for c in found for r in readings)


def numeric_match(prediction: str, reference: str | float, rel_tol: float = 1e-6,
                  rounding: bool = True) -> Score:
    """1.0 if every number of the reference appears in the prediction, else 0.0.

    Numbers match within ``rel_tol`` (relative) or, with ``rounding``, within half a unit
    of the last digit written by the less precise side (``51%`` matches 0.512).
    """
    if rel_tol < 0:
        raise ValueError("rel_tol must be >= 0")
    if isinstance(reference, str):
        wanted = numbers_in(reference)
    else:
        single = _as_readings(reference)
        wanted = [single] if single else []
    if not wanted:
        return Unscored(f"reference {reference!r} has no number")
    candidates = numbers_in(prediction)
    ok = all(_mentioned(readings, candidates, rel_tol, rounding) for readings in wanted)
    return 1.0 if ok else 0.0


# ---------------------------------------------------------------- entity mention


@dataclass(frozen=True)
class EntityMention:
    """Which ground-truth values an answer mentions; ``score`` is the share found."""

    score: Score
    found: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def checked(self) -> int:
        """How many values were looked for."""
        return len(self.found) + len(self.missing)


def _plain_text(text: str) -> str:
    """Case-folded, accent-free words separated by single spaces."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    letters = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(re.sub(r"[^\w]+", " ", letters).split())


def _values(data: Any) -> Iterable[Any]:
    if isinstance(data, Mapping):
        for value in data.values():
            yield from _values(value)
    elif isinstance(data, list | tuple):
        for item in data:
            yield from _values(item)
    elif data is not None and not isinstance(data, bool):
        yield data


def entity_mention(answer: str, data: Any, rel_tol: float = 1e-6,
                   rounding: bool = True) -> EntityMention:
    """Check that every value of ground-truth data (a dict or a list of dicts) is in ``answer``.

    Numbers match with :func:`numeric_match`'s tolerance; text matches as whole words,
    ignoring case, accents and punctuation. ``None`` and booleans are not looked for.
    """
    candidates = numbers_in(answer)
    words = f" {_plain_text(answer)} "
    found: list[str] = []
    missing: list[str] = []
    for value in _values(data):
        readings = _as_readings(value)
        if readings is not None:
            hit = _mentioned(readings, candidates, rel_tol, rounding)
        else:
            needle = _plain_text(str(value))
            if not needle:
                continue
            hit = f" {needle} " in words
        (found if hit else missing).append(str(value))
    if not found and not missing:
        return EntityMention(Unscored("ground-truth data has no values to look for"), (), ())
    return EntityMention(len(found) / (len(found) + len(missing)), tuple(found), tuple(missing))


# ---------------------------------------------------------------- expected facts

# A number as written (thousands separators, a decimal part), a run of letters, or a
# percent sign; everything else separates tokens. Letters and digits are separate tokens
# ("3pt" = "3-pt" = "3 pt"), so both sides of a match are cut the same way.
_FACT_TOKEN = re.compile(
    r"(?P<num>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|(?<![\w.])\.\d+)"
    r"|(?P<word>[^\W\d_]+)|(?P<pct>%)")


def _canonical_number(written: str) -> str:
    """``1,234.50`` -> ``1234.5``, ``12.0`` -> ``12``, ``007`` -> ``7`` (digits as ASCII)."""
    digits = "".join(str(unicodedata.decimal(c)) if c.isdigit() else c
                     for c in written.replace(",", ""))
    whole, _, fraction = digits.partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    return f"{whole}.{fraction}" if fraction else whole


def normalize_fact(text: str) -> str:
    """Text as facts are matched: case, accents, punctuation, whitespace and number format gone.

    Lower case without accents; numbers canonical (``1,234`` = ``1234``, ``12.0`` = ``12``);
    ``%`` read as the word ``percent``; every other character that is not a letter or a
    digit separates words; words joined by single spaces.
    """
    # casefold after NFKD too: a compatibility form may decompose to an upper-case letter
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    tokens = []
    for match in _FACT_TOKEN.finditer(plain):
        if match["num"]:
            tokens.append(_canonical_number(match["num"]))
        elif match["word"]:
            tokens.append(match["word"])
        else:
            tokens.append("percent")
    return " ".join(tokens)


@dataclass(frozen=True)
class FactRecall:
    """Which expected facts an answer states; ``score`` is the share found."""

    score: Score
    found: tuple[str, ...]
    missing: tuple[str, ...]


def fact_recall(answer: str, facts: Sequence[str]) -> FactRecall:
    """The share of ``facts`` that ``answer`` contains.

    Each fact is looked for as a run of whole words after :func:`normalize_fact`:
    "Rudy Gobert" is in "rudy gobert's 4th", "12" is not in "12.5".
    """
    text = f" {normalize_fact(answer)} "
    found: list[str] = []
    missing: list[str] = []
    for fact in facts:
        needle = normalize_fact(fact)
        if not needle:
            continue  # nothing to look for (case files refuse such a fact)
        (found if f" {needle} " in text else missing).append(fact)
    if not found and not missing:
        return FactRecall(Unscored("no expected fact has a letter or digit"), (), ())
    return FactRecall(len(found) / (len(found) + len(missing)), tuple(found), tuple(missing))


# ---------------------------------------------------------------- keyword overlap

STOPWORDS = frozenset({
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just",
    "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
    "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she",
    "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves", "say", "said", "tell", "told",
})


def extract_keywords(text: str) -> set[str]:
    """Content words of ``text``: lower-case word tokens minus stop words and single letters."""
    return {w for w in _plain_text(text).split() if len(w) > 1 and w not in STOPWORDS}


def keyword_overlap(reference: str, candidate: str) -> Score:
    """Keyword baseline: |keywords(reference) ∩ keywords(candidate)| / |keywords(reference)|."""
    wanted = extract_keywords(reference)
    if not wanted:
        return Unscored("reference has no keywords")
    return len(wanted & extract_keywords(candidate)) / len(wanted)


# ---------------------------------------------------------------- semantic similarity


def semantic_similarities(pairs: Sequence[tuple[str, str]], embedder: SupportsEmbed
                          ) -> list[Score]:
    """Cosine similarity of each (text, reference) pair, embedding all texts in one call."""
    import numpy as np

    texts = sorted({t for pair in pairs for t in pair if t.strip()})
    rows: dict[str, Any] = {}
    if texts:
        vectors = np.asarray(embedder.embed(texts), dtype=np.float64)
        if vectors.shape[0] != len(texts):
            raise ValueError(f"embedder returned {vectors.shape[0]} rows for {len(texts)} texts")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            vectors = vectors / norms
        rows = dict(zip(texts, vectors, strict=True))
    scores: list[Score] = []
    for text, reference in pairs:
        if not text.strip() or not reference.strip():
            scores.append(Unscored("empty text"))
            continue
        cosine = float(np.dot(rows[text], rows[reference]))
        if math.isnan(cosine):
            scores.append(Unscored("embedding is zero or not finite"))
        else:
            scores.append(min(max(cosine, -1.0), 1.0))
    return scores


def semantic_similarity(text: str, reference: str, embedder: SupportsEmbed) -> Score:
    """Cosine similarity of the embeddings of ``text`` and ``reference``."""
    return semantic_similarities([(text, reference)], embedder)[0]
