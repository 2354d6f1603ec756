"""Hypothesis strategies that perturb a question the way real users do.

One strategy per perturbation kind (``config.PERTURBATION_KINDS``): keyboard-neighbour
typos, dropped and doubled characters, case changes, extra whitespace, punctuation,
filler phrases, synonym swaps and appended injection instructions. Each draws a
:class:`Perturbed` (the new question and a note of what changed). Shrinking goes towards
fewer edits, earlier positions and the first entry of each table, so a minimal failing
example is the mildest change that still breaks a property.

Imported only when robustness items run (it imports hypothesis).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from hypothesis import strategies as st

from pytest_ragbench.robust.tables import Tables

WHITESPACE = ("  ", "\t", "\n", "   ")
END_MARKS = ("??", "?!", "...", "!", ".")
INSERTED_MARKS = (",", " ...", " -", ";")
STRIPPED = "?!.,;:"
SEPARATORS = (" ", "\n", "\n\n")
MAX_EDITS = 2  # character edits per typo/drop/double example
T = TypeVar("T")


@dataclass(frozen=True)
class Perturbed:
    """A perturbed question: its kind, text, what changed, and the injected payload if any."""

    kind: str
    question: str
    change: str
    payload: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Perturbed:
        """Rebuild from :meth:`to_dict` output (raises KeyError/TypeError when malformed)."""
        payload = data.get("payload")
        return cls(str(data["kind"]), str(data["question"]), str(data["change"]),
                   None if payload is None else str(payload))


Draw = Callable[[st.SearchStrategy[Any]], Any]
SMALL_RANGE = 100


def strategy_for(kind: str, question: str, tables: Tables) -> st.SearchStrategy[Perturbed] | None:
    """The strategy of ``kind`` for ``question``, or None when the kind cannot change it."""
    if not_applicable(kind, question, tables) is not None:
        return None
    return _STRATEGIES[kind](question, tables)


def not_applicable(kind: str, question: str, tables: Tables) -> str | None:
    """Why ``kind`` cannot perturb ``question`` (None when it can)."""
    if kind not in _STRATEGIES:
        raise ValueError(f"unknown perturbation kind {kind!r}")
    if kind == "typos" and not _positions(question, lambda c: c.lower() in tables.neighbours):
        return "no letter or digit with keyboard neighbours"
    if kind in ("drop", "double") and not _positions(question, str.isalnum):
        return "no letter or digit"
    if kind == "case" and not (_case_options(question) or _shoutable_words(question)):
        return "no letter whose case can change"
    if kind == "synonyms" and not synonym_spans(question, tables):
        return "no word of the question is in the synonym table"
    return None


def index(draw: Draw, size: int) -> int:
    """An index into ``size`` items, drawn only from integer ranges of at most 100 values.

    Hypothesis sometimes swaps an integer draw for a constant (100 or more) found in the
    local modules loaded at that moment, and which modules are loaded differs between
    runs (xdist workers, ``-k``), so a wider range would let one seed draw different
    examples. Shrinks towards 0 like ``st.integers``.
    """
    if size <= SMALL_RANGE:
        return int(draw(st.integers(0, size - 1)))
    block = index(draw, -(-size // SMALL_RANGE))
    start = block * SMALL_RANGE
    return start + int(draw(st.integers(0, min(SMALL_RANGE, size - start) - 1)))


def pick(draw: Draw, options: Sequence[T]) -> T:
    """One of ``options``; shrinks towards the first."""
    return options[index(draw, len(options))]


def pick_some(draw: Draw, size: int, most: int) -> list[int]:
    """1 to ``most`` distinct indices into ``size`` items, sorted; shrinks towards ``[0]``."""
    count = int(draw(st.integers(1, max(1, min(most, size)))))
    return sorted({index(draw, size) for _ in range(count)})


# -- character edits ---------------------------------------------------------------------


def _positions(question: str, keep: Callable[[str], bool]) -> list[int]:
    return [i for i, ch in enumerate(question) if keep(ch)]


def _edit_positions(draw: Draw, positions: list[int]) -> list[int]:
    """1..MAX_EDITS distinct positions, in text order."""
    return [positions[i] for i in pick_some(draw, len(positions), MAX_EDITS)]


def _typos(question: str, tables: Tables) -> st.SearchStrategy[Perturbed]:
    positions = _positions(question, lambda c: c.lower() in tables.neighbours)

    @st.composite
    def typos(draw: Draw) -> Perturbed:
        chars = list(question)
        notes = []
        for position in _edit_positions(draw, positions):
            old = question[position]
            new = pick(draw, tables.neighbours[old.lower()])
            new = new.upper() if old.isupper() else new
            chars[position] = new
            notes.append(f"{old!r}->{new!r} at {position}")
        return Perturbed("typos", "".join(chars), "typo " + ", ".join(notes))

    return typos()


def _drop(question: str, tables: Tables) -> st.SearchStrategy[Perturbed]:
    positions = _positions(question, str.isalnum)

    @st.composite
    def drop(draw: Draw) -> Perturbed:
        chosen = _edit_positions(draw, positions)
        text = "".join(ch for i, ch in enumerate(question) if i not in chosen)
        notes = ", ".join(f"{question[i]!r} at {i}" for i in chosen)
        return Perturbed("drop", text, f"dropped {notes}")

    return drop()


def _double(question: str, tables: Tables) -> st.SearchStrategy[Perturbed]:
    positions = _positions(question, str.isalnum)

    @st.composite
    def double(draw: Draw) -> Perturbed:
        chosen = _edit_positions(draw, positions)
        text = "".join(ch * 2 if i in chosen else ch for i, ch in enumerate(question))
        notes = ", ".join(f"{question[i]!r} at {i}" for i in chosen)
        return Perturbed("double", text, f"doubled {notes}")

    return double()


# -- case, whitespace, punctuation -------------------------------------------------------


_WORD = re.compile(r"[^\W\d_]+")


def _case_options(question: str) -> list[tuple[str, str]]:
    """Whole-question case changes that change something: (name, text)."""
    capitalized = _WORD.sub(lambda m: m.group(0)[:1].upper() + m.group(0)[1:], question)
    options = [("lower case", question.lower()), ("upper case", question.upper()),
               ("capitalized words", capitalized), ("swapped case", question.swapcase())]
    return [(name, text) for name, text in options if text != question]


def _shoutable_words(question: str) -> list[re.Match[str]]:
    """Words not already in upper case (one of them may be shouted)."""
    return [m for m in _WORD.finditer(question) if m.group(0).upper() != m.group(0)]


def _case(question: str, tables: Tables) -> st.SearchStrategy[Perturbed]:
    whole = _case_options(question)
    words = _shoutable_words(question)

    @st.composite
    def case(draw: Draw) -> Perturbed:
        choice = index(draw, len(whole) + (1 if words else 0))
        if choice < len(whole):
            name, text = whole[choice]
            return Perturbed("case", text, name)
        word = pick(draw, words)
        text = question[:word.start()] + word.group(0).upper() + question[word.end():]
        return Perturbed("case", text, f"{word.group(0)!r} in upper case")

    return case()


def _whitespace(question: str, tables: Tables) -> st.SearchStrategy[Perturbed]:
    # Gap 0 is before the question, gap len(spaces)+1 after it, the others are its spaces.
    spaces = [m.start() for m in re.finditer(" ", question)]
    gaps = len(spaces) + 2

    @st.composite
    def whitespace(draw: Draw) -> Perturbed:
        picked = pick_some(draw, gaps, 3)
        inserts = {gap: pick(draw, WHITESPACE) for gap in picked}
        text = inserts.get(0, "")
        start = 0
        for number, position in enumerate(spaces, start=1):
            text += question[start:position] + inserts.get(number, " ")
            start = position + 1
        text += question[start:] + inserts.get(gaps - 1, "")
        notes = ", ".join(f"{inserts[g]!r} at gap {g}" for g in picked)
        return Perturbed("whitespace", text, f"whitespace {notes}")

    return whitespace()


def _punctuation(question: str, tables: Tables) -> st.SearchStrategy[Perturbed]:
    body = question.rstrip(STRIPPED + " ")
    ending = question[len(body):]
    endings = [m for m in END_MARKS if m != ending.strip()]
    stripped = question.translate(str.maketrans("", "", STRIPPED))
    word_ends = [m.end() for m in re.finditer(r"\w+", question)][:-1]
    modes = ["end", *(["strip"] if stripped != question else []),
             *(["insert"] if word_ends else [])]

    @st.composite
    def punctuation(draw: Draw) -> Perturbed:
        mode = pick(draw, modes)
        if mode == "end":
            mark = pick(draw, endings)
            return Perturbed("punctuation", body + mark, f"ending {ending!r} -> {mark!r}")
        if mode == "strip":
            return Perturbed("punctuation", stripped, "punctuation removed")
        position = pick(draw, word_ends)
        mark = pick(draw, INSERTED_MARKS)
        return Perturbed("punctuation", question[:position] + mark + question[position:],
                         f"{mark.strip()!r} inserted at {position}")

    return punctuation()


# -- filler, synonyms, injection ---------------------------------------------------------


def _filler(question: str, tables: Tables) -> st.SearchStrategy[Perturbed]:
    prefixes, suffixes = tables.filler_prefixes, tables.filler_suffixes

    @st.composite
    def filler(draw: Draw) -> Perturbed:
        where = pick(draw, ("before", "after", "both"))
        text, notes = question, []
        if where in ("before", "both"):
            prefix = pick(draw, prefixes)
            text, notes = f"{prefix} {text}", [f"{prefix!r} before"]
        if where in ("after", "both"):
            suffix = pick(draw, suffixes)
            text, notes = f"{text} {suffix}", [*notes, f"{suffix!r} after"]
        return Perturbed("filler", text, "filler " + " and ".join(notes))

    return filler()


def synonym_spans(question: str, tables: Tables) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, table key) of words/phrases the table can replace."""
    spans: list[tuple[int, int, str]] = []
    for key in sorted(tables.synonyms, key=lambda k: (-len(k), k)):  # longest phrase first
        pattern = re.compile(rf"(?<!\w){re.escape(key)}(?!\w)", re.IGNORECASE)
        for match in pattern.finditer(question):
            if all(match.end() <= s or match.start() >= e for s, e, _ in spans):
                spans.append((match.start(), match.end(), key))
    return sorted(spans)


def _synonyms(question: str, tables: Tables) -> st.SearchStrategy[Perturbed]:
    spans = synonym_spans(question, tables)

    @st.composite
    def synonyms(draw: Draw) -> Perturbed:
        text, last, notes = "", 0, []
        for chosen in pick_some(draw, len(spans), 3):
            start, end, key = spans[chosen]
            new = pick(draw, tables.synonyms[key])
            old = question[start:end]
            if old[:1].isupper():
                new = new[:1].upper() + new[1:]
            text += question[last:start] + new
            last = end
            notes.append(f"{old!r}->{new!r}")
        return Perturbed("synonyms", text + question[last:], "synonym " + ", ".join(notes))

    return synonyms()


def _injection(question: str, tables: Tables) -> st.SearchStrategy[Perturbed]:
    templates, payloads = tables.injection_templates, tables.injection_payloads

    @st.composite
    def injection(draw: Draw) -> Perturbed:
        template = pick(draw, templates)
        payload = pick(draw, payloads)
        separator = pick(draw, SEPARATORS)
        instruction = template.replace("{payload}", payload)
        return Perturbed("injection", f"{question}{separator}{instruction}",
                         f"appended {instruction!r}", payload=payload)

    return injection()


_STRATEGIES: dict[str, Callable[[str, Tables], st.SearchStrategy[Perturbed]]] = {
    "typos": _typos, "drop": _drop, "double": _double, "case": _case,
    "whitespace": _whitespace, "punctuation": _punctuation, "filler": _filler,
    "synonyms": _synonyms, "injection": _injection,
}
