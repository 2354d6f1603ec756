"""The seeded search: draw, shrink a failure to a minimal question, replay stored failures first."""

from __future__ import annotations

from pathlib import Path

from pytest_ragbench.robust.perturb import Perturbed, strategy_for
from pytest_ragbench.robust.search import ReplayStore, Verdict, draw, shrink
from pytest_ragbench.robust.tables import bundled_tables

QUESTION = "What does PIE mean in basketball statistics today?"
WORD = "statistics"
TABLES = bundled_tables()


class BrittleOnOneWord:
    """A property that breaks exactly when the word ``statistics`` is misspelt."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def known(self, question: str) -> bool:
        return question in self.asked

    def verdict(self, perturbed: Perturbed) -> Verdict:
        if perturbed.question not in self.asked:
            self.asked.append(perturbed.question)
        if WORD in perturbed.question:
            return Verdict({"rbo": 1.0})
        return Verdict({"rbo": 0.0}, broken=("rbo = 0, needs >= 0.5",))


def first_failure(examples: list[Perturbed], checks: BrittleOnOneWord
                  ) -> tuple[Perturbed, Verdict]:
    return next((p, v) for p in examples if not (v := checks.verdict(p)).holds)


def test_a_failure_shrinks_to_a_single_mildest_typo_in_the_word() -> None:
    strategy = strategy_for("typos", QUESTION, TABLES)
    examples = draw(strategy, examples=30, seed_value=1)
    checks = BrittleOnOneWord()
    failing = first_failure(examples, checks)
    result = shrink(strategy, checks, failing, examples=30, seed_value=1, shrink_calls=50)
    assert result.shrunk
    start = QUESTION.index(WORD)
    changed = [i for i, (a, b) in enumerate(zip(QUESTION, result.perturbed.question,
                                                strict=True)) if a != b]
    assert changed == [start]  # one typo, on the word's first letter
    assert result.perturbed.question[start] == TABLES.neighbours["s"][0]
    assert result.verdict.broken == ("rbo = 0, needs >= 0.5",)
    assert len(failing[0].question) == len(result.perturbed.question)


def test_shrinking_stops_at_its_budget_and_says_so() -> None:
    strategy = strategy_for("typos", QUESTION, TABLES)
    examples = draw(strategy, examples=30, seed_value=1)
    checks = BrittleOnOneWord()
    failing = first_failure(examples, checks)
    asked_before = len(checks.asked)
    result = shrink(strategy, checks, failing, examples=30, seed_value=1, shrink_calls=2)
    assert result.new_calls == 2 and result.capped
    assert len(checks.asked) == asked_before + 2
    assert WORD not in result.perturbed.question  # still a real failure


def test_the_shrink_pass_meets_the_same_first_failure_as_the_draw() -> None:
    """Both passes generate the same sequence, so the known failure costs no new call."""
    strategy = strategy_for("typos", QUESTION, TABLES)
    examples = draw(strategy, examples=30, seed_value=4)
    checks = BrittleOnOneWord()
    for example in examples:  # everything drawn was answered already
        checks.verdict(example)
    failing = first_failure(examples, checks)
    result = shrink(strategy, checks, failing, examples=30, seed_value=4, shrink_calls=0)
    assert result.shrunk and result.capped and result.new_calls == 0
    assert WORD not in result.perturbed.question


def test_replayed_examples_come_first_and_fail_without_shrinking() -> None:
    strategy = strategy_for("typos", QUESTION, TABLES)
    stored = Perturbed("typos", QUESTION.replace("statistics", "statistucs"), "typo 'i'->'u'")
    examples = draw(strategy, examples=3, seed_value=9, replay=[stored])
    assert examples[0] == stored and len(examples) == 4
    checks = BrittleOnOneWord()
    result = shrink(strategy, checks, (stored, checks.verdict(stored)), examples=3,
                    seed_value=9, replay=[stored])
    assert result.perturbed == stored and result.new_calls == 0


def test_the_replay_store_keeps_one_failure_per_key(tmp_path: Path) -> None:
    store = ReplayStore(tmp_path)
    key = store.key("vector-pie", "typos", QUESTION)
    first = Perturbed("typos", "What does PIE mean in basketball stztistics today?", "t")
    second = Perturbed("typos", "What does PIE mean in basketball dtatistics today?", "t")
    store.keep(key, first)
    store.keep(key, second)
    assert ReplayStore(tmp_path).fetch(key, "typos") == [second]  # survives a new session
    assert store.fetch(key, "case") == []
    assert (tmp_path / "hypothesis").is_dir()
    store.keep(key, None)  # the kind holds now: nothing left to replay
    assert store.fetch(key, "typos") == []


def test_the_key_changes_with_the_question(tmp_path: Path) -> None:
    store = ReplayStore(tmp_path)
    assert store.key("c", "typos", "a?") != store.key("c", "typos", "b?")
    assert store.key("c", "typos", "a?") != store.key("c", "drop", "a?")


def test_an_unreadable_entry_is_skipped(tmp_path: Path) -> None:
    store = ReplayStore(tmp_path)
    key = store.key("c", "typos", "q")
    assert store.database is not None
    store.database.save(key, b"not json")
    store.database.save(key, b'{"kind": "typos"}')
    good = Perturbed("typos", "w", "t")
    store.database.save(key, b'{"kind": "typos", "question": "w", "change": "t"}')
    assert store.fetch(key, "typos") == [good]


def test_without_a_cache_nothing_is_stored() -> None:
    store = ReplayStore(None)
    key = store.key("c", "typos", "q")
    store.keep(key, Perturbed("typos", "w", "t"))
    assert store.fetch(key, "typos") == []
