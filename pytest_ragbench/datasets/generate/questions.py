"""Questions written by a model from passages, each kept only if it passes the filters.

Question types (the case's ``category``):

- ``factual``: one passage, one fact;
- ``multi_hop``: two passages of different documents that name the same entity, a question
  that needs both;
- ``comparison``: two such passages, a question comparing what they say;
- ``conversational``: a first question and answer (the case's ``history``), then a
  follow-up that leans on them;
- ``noisy``: a kept factual question perturbed as users type (``robust/perturb.py``);
- ``unanswerable``: a question on a topic the corpus does not cover (``expect: decline``).

Filters, recorded under ``provenance.filters`` of every kept case (the first that fails
is the rejection reason):

- ``form``: the question is one (it ends with a question mark; a noisy variant is judged by
  its original) and its answer does not merely repeat it;
- ``overlap``: the share of the question's content words found in one sentence of its
  source must not exceed ``overlap_bound`` (a copied sentence is too easy), and the share
  found anywhere in its source passages must reach ``min_overlap`` (a question that shares
  no word with its passages is not about them, whatever a weak judge says); a
  conversational follow-up counts its first question's words too, and an unanswerable
  question has no source, so neither bound applies to it;
- ``judge``: the model, asked again, finds the answer in the source passage(s) (for an
  unanswerable question: not in the passages the default retriever returns);
- ``duplicate``: the question's MiniLM cosine to every kept question stays below
  ``duplicate_bound`` (a noisy variant's own original excepted);
- ``difficulty``: the rank of the source passage under the default retriever — 1 easy,
  2–5 medium, lower or not retrieved hard (the worst rank of two sources).

Generation and judge calls go through the project's model clients, so their response
cache applies to them as to every model call.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_ragbench.datasets.generate.common import Accounting, Generated, GenerateError, draft
from pytest_ragbench.errors import ModelCallError, UnusableReply
from pytest_ragbench.systems.protocols import Document

TYPES = ("factual", "multi_hop", "comparison", "conversational", "noisy", "unanswerable")
DIFFICULTIES = ("easy", "medium", "hard")
RANK_DEPTH = 10
# Each text has a length bound: a small model under a JSON grammar can write one string
# until its token budget runs out, and a reply cut there is not JSON. llama.cpp's grammar
# and servers' guided decoding enforce ``maxLength``; the budget leaves room for every field.
TEXT_CHARS = 200
REPLY_TOKENS = 400
_TEXT = {"type": "string", "maxLength": TEXT_CHARS}
QA_SCHEMA = {"type": "object", "properties": {"question": _TEXT, "answer": _TEXT},
             "required": ["question", "answer"]}
CONVERSATION_SCHEMA = {"type": "object", "properties": {
    "first_question": _TEXT, "first_answer": _TEXT, "follow_up": _TEXT, "answer": _TEXT},
    "required": ["first_question", "first_answer", "follow_up", "answer"]}
JUDGE_SCHEMA = {"type": "object", "properties": {"verdict": {"type": "string",
                                                             "enum": ["yes", "no"]}},
                "required": ["verdict"]}
SYSTEM = ("You write questions for a test set of a question-answering system. Reply with "
          "JSON only.")
PROMPTS = {
    "factual": "Passage:\n{a}\n\nWrite one question that this passage answers, in your own "
               "words (do not copy a sentence of the passage), and its short answer. Reply "
               'as JSON: {{"question": "...", "answer": "..."}}',
    "multi_hop": "Passage A:\n{a}\n\nPassage B:\n{b}\n\nBoth passages mention {entity}. Write "
                 "one question about {entity} whose answer needs a fact from passage A and a "
                 "fact from passage B, in your own words, and its short answer. Reply as "
                 'JSON: {{"question": "...", "answer": "..."}}',
    "comparison": "Passage A:\n{a}\n\nPassage B:\n{b}\n\nWrite one question that compares "
                  "what passage A and passage B say (both mention {entity}), in your own "
                  'words, and its short answer. Reply as JSON: {{"question": "...", '
                  '"answer": "..."}}',
    "conversational": "Passage:\n{a}\n\nWrite a short conversation about this passage: a "
                      "first question and its answer, then a follow-up question that only "
                      "makes sense after the first (it says 'it', 'he', 'they' or 'that' "
                      "instead of the name), and the follow-up's answer. Reply as JSON: "
                      '{{"first_question": "...", "first_answer": "...", "follow_up": '
                      '"...", "answer": "..."}}',
    "unanswerable": "A document collection has these titles:\n{titles}\n\nWrite one question "
                    "on a topic that none of these documents covers (a different field "
                    "altogether), and say why it cannot be answered from them. Reply as "
                    'JSON: {{"question": "...", "answer": "..."}}',
}
JUDGE_PROMPT = ("Passages:\n{passages}\n\nQuestion: {question}\nProposed answer: {answer}\n\n"
                "Do the passages above contain the information that answers the question? "
                'Reply as JSON: {{"verdict": "yes"}} or {{"verdict": "no"}}')
_WORD = re.compile(r"[a-z0-9]+(?:['.][a-z0-9]+)*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_ENTITY = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s[A-Z][a-z]+)*|[A-Z]{2,})\b")
_STOP = (
    "a an the of in on at to for from by with and or but is are was were be been being it its "
    "this that these those what which who whom whose when where why how do does did has have "
    "had as than then so if not no can could would should will shall may might must about "
    "into over under between after before during more most less least any each some all "
    "their there they them he she his her him i you your we our us one")
STOPWORDS = frozenset(_STOP.split())


@dataclass(frozen=True)
class Bounds:
    """The filters' bounds."""

    overlap: float = 0.7
    duplicate: float = 0.9
    min_overlap: float = 0.2


@dataclass
class Candidate:
    """One generated question before the filters."""

    type: str
    question: str
    answer: str
    sources: list[Document]  # passages that hold the answer (none when unanswerable)
    history: list[dict[str, str]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def content_words(text: str) -> list[str]:
    """Lower-case words of ``text`` that carry content (no stop words)."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def copy_overlap(question: str, passages: Sequence[str]) -> float:
    """The largest share of the question's content words found in one source sentence.

    A question without content words copies nothing (0); ``source_share`` rejects it.
    """
    words = set(content_words(question))
    if not words:
        return 0.0
    best = 0.0
    for passage in passages:
        for sentence in _SENTENCE.split(passage):
            best = max(best, len(words & set(content_words(sentence))) / len(words))
    return round(best, 3)


def source_share(question: str, passages: Sequence[str]) -> float:
    """The share of the question's content words found anywhere in the passages (0 if none)."""
    words = set(content_words(question))
    if not words:
        return 0.0
    found = set().union(*(content_words(p) for p in passages)) if passages else set()
    return round(len(words & found) / len(words), 3)


def _same_words(a: str, b: str) -> bool:
    """Whether two texts are the same words, case and punctuation aside."""
    return _WORD.findall(a.lower()) == _WORD.findall(b.lower())


def difficulty(rank: int | None) -> str:
    """Easy for rank 1, medium for 2–5, hard below or when not retrieved."""
    if rank == 1:
        return "easy"
    return "medium" if rank is not None and rank <= 5 else "hard"


def entities(text: str) -> set[str]:
    """Capitalised names inside sentences (not a sentence's first word)."""
    return {m.group(1) for m in _ENTITY.finditer(text)
            if m.group(1).lower() not in STOPWORDS and len(m.group(1)) > 2}


def entity_pairs(passages: Sequence[Document], rng: random.Random
                 ) -> list[tuple[Document, Document, str]]:
    """Pairs of passages of different documents that name a shared entity, shuffled."""
    names = [entities(p.text) for p in passages]
    pairs = []
    for i, a in enumerate(passages):
        for j in range(i + 1, len(passages)):
            b = passages[j]
            if a.metadata.get("source") == b.metadata.get("source"):
                continue
            shared = sorted(names[i] & names[j])
            if shared:
                pairs.append((a, b, rng.choice(shared)))
    rng.shuffle(pairs)
    return pairs


def perturb(question: str, seed: int) -> tuple[str, str] | None:
    """The question perturbed by one of the robustness kinds (typos first), and the change."""
    # lazy: the perturbations import hypothesis, needed only for noisy variants
    from pytest_ragbench.robust.perturb import strategy_for
    from pytest_ragbench.robust.tables import bundled_tables

    tables = bundled_tables()
    kinds = ["typos", "drop", "case", "synonyms", "filler"]
    random.Random(f"{seed}:{question}").shuffle(kinds)
    for kind in kinds:
        strategy = strategy_for(kind, question, tables)
        if strategy is None:
            continue
        changed = [p for p in _examples(strategy, seed) if p.question != question]
        if changed:
            return changed[-1].question, f"{kind}: {changed[-1].change}"
    return None


def _examples(strategy: Any, seed: int) -> list[Any]:
    """A few examples of a hypothesis strategy, the same for the same seed."""
    # lazy: hypothesis, needed only for noisy variants
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as fixed_seed

    drawn: list[Any] = []

    @fixed_seed(seed)
    @settings(max_examples=3, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(example: Any) -> None:
        drawn.append(example)

    draw()
    return drawn


class QuestionGenerator:
    """Writes candidates with a model, filters them, keeps cases by quota."""

    def __init__(self, passages: Sequence[Document], model: Any, *, embedder: Any,
                 retriever: Any, seed: int = 0, bounds: Bounds | None = None,
                 source_label: str = "documents") -> None:
        if not passages:
            raise GenerateError("no passages to generate questions from")
        self.passages = list(passages)
        self.model = model
        self.embedder = embedder
        self.retriever = retriever
        self.seed = seed
        self.bounds = bounds or Bounds()
        self.source_label = source_label
        self.accounting = Accounting()
        self.rejections: list[dict[str, Any]] = []
        self._kept_vectors: dict[str, Any] = {}  # kept question -> its MiniLM vector
        self._indexed = False

    # -- model calls ------------------------------------------------------------------

    def _ask(self, prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        self.accounting.model_calls += 1
        generation = self.model.generate(messages, schema=schema, max_tokens=REPLY_TOKENS)
        self.accounting.cached_calls += bool(getattr(generation, "cached", False))
        data = generation.data
        if not isinstance(data, dict):
            raise UnusableReply("the reply is not a JSON object", reply=generation.text)
        return data

    def write(self, question_type: str, rng: random.Random,
              pair: tuple[Document, Document, str] | None = None) -> Candidate | None:
        """One candidate of ``question_type`` (None when the model gave nothing usable)."""
        if question_type in ("multi_hop", "comparison"):
            assert pair is not None
            a, b, entity = pair
            data = self._ask(PROMPTS[question_type].format(a=a.text, b=b.text, entity=entity),
                             QA_SCHEMA)
            return Candidate(question_type, _text(data, "question"), _text(data, "answer"),
                             [a, b], extra={"entity": entity})
        if question_type == "unanswerable":
            titles = sorted({str(p.metadata.get("title") or p.metadata.get("source"))
                             for p in self.passages})
            shown = "\n".join(f"- {t}" for t in rng.sample(titles, min(25, len(titles))))
            data = self._ask(PROMPTS["unanswerable"].format(titles=shown), QA_SCHEMA)
            return Candidate("unanswerable", _text(data, "question"), _text(data, "answer"), [])
        passage = rng.choice(self.passages)
        if question_type == "conversational":
            data = self._ask(PROMPTS["conversational"].format(a=passage.text),
                             CONVERSATION_SCHEMA)
            history = [{"role": "user", "content": _text(data, "first_question")},
                       {"role": "assistant", "content": _text(data, "first_answer")}]
            return Candidate("conversational", _text(data, "follow_up"), _text(data, "answer"),
                             [passage], history=history)
        data = self._ask(PROMPTS["factual"].format(a=passage.text), QA_SCHEMA)
        return Candidate(question_type, _text(data, "question"), _text(data, "answer"),
                         [passage])

    def judge(self, question: str, answer: str, passages: Sequence[Document]) -> bool:
        """Whether the model finds the answer to ``question`` in ``passages``."""
        shown = "\n\n".join(f"[{i + 1}] {p.text}" for i, p in enumerate(passages))
        data = self._ask(JUDGE_PROMPT.format(passages=shown, question=question, answer=answer),
                         JUDGE_SCHEMA)
        return str(data.get("verdict", "")).strip().lower() == "yes"

    # -- filters ----------------------------------------------------------------------

    def ranks(self, question: str, sources: Sequence[Document]) -> tuple[list[Any], int | None]:
        """The retrieved passages and the worst rank of the sources (None: one not found)."""
        if not self._indexed:
            self.retriever.index(self.passages)
            self._indexed = True
        hits = self.retriever.retrieve(question, top_k=RANK_DEPTH)
        ids = [hit.id for hit in hits]
        positions = [ids.index(s.id) + 1 if s.id in ids else None for s in sources]
        worst = None if None in positions or not positions else max(
            p for p in positions if p is not None)
        return hits, worst

    def check(self, candidate: Candidate) -> tuple[dict[str, Any], str | None]:
        """The filters' record, and the reason of the first that fails (None: kept)."""
        import numpy as np

        record: dict[str, Any] = {}
        question, answer = candidate.question.strip(), candidate.answer.strip()
        if not question or not answer:
            return record, "empty question or answer"
        asked = str(candidate.extra.get("original_question") or question)
        record["form"] = {"question_mark": asked.rstrip(" \"'").endswith("?"),
                          "answer_repeats_question": _same_words(answer, question)}
        if not record["form"]["question_mark"]:
            return record, "not a question"
        if record["form"]["answer_repeats_question"]:
            return record, "the answer repeats the question"
        if candidate.sources:
            texts = [p.text for p in candidate.sources]
            overlap = copy_overlap(candidate.question, texts)
            # a follow-up says "it" for what its first question named
            asked = " ".join([*(t["content"] for t in candidate.history if t["role"] == "user"),
                              candidate.question])
            share = source_share(asked, texts)
            record["overlap"] = {"value": overlap, "bound": self.bounds.overlap,
                                 "in_sources": share, "min": self.bounds.min_overlap}
            if share < self.bounds.min_overlap:
                return record, "shares too few words with its source"
            if overlap > self.bounds.overlap:
                return record, "copies its source sentence"
        hits, rank = self.ranks(candidate.question, candidate.sources)
        if candidate.sources:
            found = self.judge(candidate.question, candidate.answer, candidate.sources)
            record["judge"] = {"answer_in_sources": found}
            if not found:
                return record, "judge: answer not in source"
        else:
            top = [Document(h.id, h.text, dict(h.metadata)) for h in hits[:3]]
            found = bool(top) and self.judge(candidate.question, candidate.answer, top)
            record["judge"] = {"answer_in_top_passages": found}
            if found:
                return record, "judge: the corpus answers it"
        vector = np.asarray(self.embedder.embed([candidate.question])[0], dtype=np.float32)
        # a noisy variant is compared with every kept question but the one it perturbs
        base = candidate.extra.get("original_question")
        nearest = max((float(vector @ kept) for question, kept in self._kept_vectors.items()
                       if question != base), default=0.0)
        record["duplicate"] = {"max_similarity": round(nearest, 3),
                               "bound": self.bounds.duplicate}
        if nearest >= self.bounds.duplicate:
            return record, "near-duplicate"
        record["difficulty"] = {"rank": rank, "level": difficulty(rank) if candidate.sources
                                else "hard", "retriever": "default hybrid",
                                "depth": RANK_DEPTH}
        self._kept_vectors[candidate.question] = vector
        return record, None

    # -- the run ----------------------------------------------------------------------

    def case(self, candidate: Candidate, record: dict[str, Any], number: int) -> dict[str, Any]:
        """The vector case of a kept candidate, a draft with its provenance."""
        level = record["difficulty"]["level"]
        sources = list(dict.fromkeys(str(p.metadata.get("source", p.id))
                                     for p in candidate.sources))
        case: dict[str, Any] = {"id": f"gen_{candidate.type}_{self.seed}_{number:04d}",
                                "category": candidate.type, "question": candidate.question,
                                "ground_truth": candidate.answer, "tags": [level]}
        if candidate.sources:
            case["expected_sources"] = sources
        else:
            case["expect"] = "decline"
        if candidate.history:
            case["history"] = candidate.history
        model = getattr(self.model, "model_id", None) or getattr(self.model, "model", None)
        return draft(case, {"generator": f"llm/{candidate.type}", "model": model,
                            "seed": self.seed, "source": self.source_label,
                            "documents": list(sources),  # a copy: no YAML alias
                            "passages": [p.id for p in candidate.sources],
                            **candidate.extra, "filters": record})

    def as_ragas(self, case: dict[str, Any]) -> dict[str, Any]:
        """A kept vector case as a ragas sample: its source passages as contexts."""
        provenance = case["provenance"]
        texts = {p.id: p.text for p in self.passages}
        sample: dict[str, Any] = {
            "id": case["id"], "category": case["category"], "question": case["question"],
            "ground_truth": case["ground_truth"],
            "contexts": [texts[i] for i in provenance["passages"] if i in texts],
            "doc_type": "clean_text", "question_type": case["category"],
            "difficulty": provenance["filters"]["difficulty"]["level"],
            "source_dataset": self.source_label}
        if "history" in case:
            sample["metadata"] = {"history": case["history"]}
        return {**sample, "review": case["review"], "provenance": provenance}

    def run(self, n: int, types: Sequence[str] = TYPES,
            attempts_per_case: int = 3,
            progress: Callable[[str], None] | None = None) -> Generated:
        """Up to ``n`` kept cases, spread over ``types`` and difficulties by quota."""
        unknown = sorted(set(types) - set(TYPES))
        if unknown:
            raise GenerateError(f"unknown question types {unknown} (known: {', '.join(TYPES)})")
        rng = random.Random(self.seed)
        pairs = entity_pairs(self.passages, rng)
        targets = {t: n // len(types) + (i < n % len(types)) for i, t in enumerate(types)}
        kept: list[tuple[dict[str, Any], str, str]] = []  # case, type, difficulty
        factual_kept: list[dict[str, Any]] = []
        for question_type in types:
            if question_type == "noisy":
                continue  # after factual: it perturbs kept factual questions
            for _ in range(targets[question_type] * attempts_per_case):
                if sum(1 for _c, t, _d in kept if t == question_type) >= \
                        targets[question_type] * 2:
                    break  # twice the quota: room for the difficulty strata to choose
                pair = None
                if question_type in ("multi_hop", "comparison"):
                    if not pairs:
                        self._reject(question_type, "no two documents share an entity", None)
                        break
                    pair = pairs.pop()
                try:
                    candidate = self.write(question_type, rng, pair)
                except ModelCallError as exc:
                    self._reject(question_type, _failure("model", exc), None, str(exc))
                    continue
                assert candidate is not None
                self._filter(candidate, kept, factual_kept)
            if progress is not None:
                progress(f"{question_type}: {sum(1 for _c, t, _d in kept if t == question_type)}"
                         " kept")
        if "noisy" in types:
            base_cases = list(factual_kept)
            rng.shuffle(base_cases)
            for base in base_cases[:targets["noisy"] * 2]:
                changed = perturb(base["question"], self.seed)
                if changed is None:
                    self._reject("noisy", "no perturbation applies", None)
                    continue
                sources = [p for p in self.passages
                           if p.id in base["provenance"]["passages"]]
                candidate = Candidate("noisy", changed[0], base["ground_truth"], sources,
                                      extra={"perturbation": changed[1],
                                             "original_question": base["question"]})
                self._filter(candidate, kept, factual_kept)
        cases = self._by_quota(kept, targets)
        for case in cases:
            self.accounting.keep(f"llm/{case['category']}")
            level = case["provenance"]["filters"]["difficulty"]["level"]
            self.accounting.difficulty[f"llm/{case['category']}/{level}"] += 1
        return Generated(cases, self.accounting.finish(), self.rejections)

    def _filter(self, candidate: Candidate, kept: list[tuple[dict[str, Any], str, str]],
                factual_kept: list[dict[str, Any]]) -> None:
        try:
            record, reason = self.check(candidate)
        except ModelCallError as exc:
            self._reject(candidate.type, _failure("judge", exc), candidate, str(exc))
            return
        if reason is not None:
            self._reject(candidate.type, reason, candidate, record=record)
            return
        case = self.case(candidate, record, len(kept))
        kept.append((case, candidate.type, record["difficulty"]["level"]))
        if candidate.type == "factual":
            factual_kept.append(case)

    def _reject(self, question_type: str, reason: str, candidate: Candidate | None,
                detail: str | None = None, record: dict[str, Any] | None = None) -> None:
        self.accounting.reject(f"llm/{question_type}", reason)
        entry: dict[str, Any] = {"type": question_type, "reason": reason}
        if candidate is not None:
            entry.update(question=candidate.question, answer=candidate.answer,
                         passages=[p.id for p in candidate.sources])
        if detail:
            entry["detail"] = detail
        if record:
            entry["filters"] = record
        self.rejections.append(entry)

    def _by_quota(self, kept: list[tuple[dict[str, Any], str, str]],
                  targets: dict[str, int]) -> list[dict[str, Any]]:
        """The kept cases chosen by seed 000's sampler over type × difficulty.

        A short stratum's room goes to the other difficulties of its type.
        """
        # lazy: the sampler's modules, needed only once candidates are kept
        from pytest_ragbench.datasets.quotas import Quota
        from pytest_ragbench.datasets.sample import NormalizedSample
        from pytest_ragbench.datasets.sampling import stratified_sample

        by_id = {case["id"]: case for case, _t, _d in kept}
        pool = [NormalizedSample(id=case["id"], question=case["question"],
                                 ground_truth=case["ground_truth"], contexts=(),
                                 doc_type="generated", question_type=kind, difficulty=level,
                                 source_dataset=self.source_label)
                for case, kind, level in kept]
        quotas = []
        for kind, target in targets.items():
            for i, level in enumerate(DIFFICULTIES):
                count = target // len(DIFFICULTIES) + (i < target % len(DIFFICULTIES))
                quotas.append(Quota("generated", kind, level, count, 0.0))
        chosen = {s.id for s in stratified_sample(pool, quotas, self.seed, "").samples}
        for kind, target in targets.items():
            have = [c for c, t, _d in kept if t == kind and c["id"] in chosen]
            spare = [c for c, t, _d in kept if t == kind and c["id"] not in chosen]
            random.Random(f"{self.seed}:{kind}").shuffle(spare)
            chosen.update(c["id"] for c in spare[:max(0, target - len(have))])
            short = target - sum(1 for c, t, _d in kept if t == kind and c["id"] in chosen)
            if short > 0:
                self.accounting.reject(f"llm/{kind}", f"quota unmet ({target - short}/{target})")
        for case, kind, _level in kept:
            if case["id"] not in chosen:
                self.accounting.reject(f"llm/{kind}", "over quota")
        return [by_id[i] for i in sorted(chosen)]


def _failure(role: str, exc: ModelCallError) -> str:
    """The rejection reason of a failed call: a reply not as asked, or no reply."""
    return f"{role} reply unusable" if isinstance(exc, UnusableReply) else f"{role} call failed"


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return " ".join(str(value).split()) if isinstance(value, str | int | float) else ""
