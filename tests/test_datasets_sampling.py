"""Stratified sampling: quotas, unanswerable variants, determinism and the unmet-quota report."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from pytest_ragbench.datasets.export import write_jsonl, write_manifest
from pytest_ragbench.datasets.quotas import Quota, load_config
from pytest_ragbench.datasets.sample import NormalizedSample
from pytest_ragbench.datasets.sampling import (
    stratified_sample,
    unanswerable_targets,
)
from pytest_ragbench.errors import ConfigError

NO_ANSWER = "The question cannot be answered from the given contexts."


def make_pool() -> list[NormalizedSample]:
    pool = []
    for i in range(60):
        pool.append(NormalizedSample(
            id=f"t-{i:03d}", question=f"What was value {i}?", ground_truth=f"value {i}",
            contexts=(f"table {i // 3}: value {i}",), doc_type="table",
            question_type="numeric" if i % 3 else "lookup",
            difficulty="hard" if i % 5 == 0 else "easy", source_dataset="synthetic",
            metadata={"answerable": True, "context_group": f"table-{i // 3}"}))
    for i in range(8):
        pool.append(NormalizedSample(
            id=f"c-{i}", question=f"How to do {i}?", ground_truth=f"Do {i}.", contexts=(),
            doc_type="code_config", question_type="howto", difficulty="easy",
            source_dataset="synthetic", metadata={}))
    return pool


def quota(doc_type: str, count: int, question_type: str | None = None, share: float = 0.1,
          difficulty: str | None = None) -> Quota:
    return Quota(doc_type, question_type, difficulty, count, share)


QUOTAS = [quota("table", 20, "numeric"), quota("table", 10, "lookup"),
          quota("code_config", 5, share=0.0), quota("log_ticket", 7)]


def test_quotas_are_met_with_the_unanswerable_share() -> None:
    result = stratified_sample(make_pool(), QUOTAS, 42, NO_ANSWER)
    numeric, lookup, code, logs = result.outcomes
    assert (numeric.answerable, numeric.unanswerable, numeric.status) == (18, 2, "full")
    assert (lookup.answerable, lookup.unanswerable, lookup.status) == (9, 1, "full")
    assert (code.selected, code.status) == (5, "full")
    assert (logs.selected, logs.status, logs.notes) == (0, "unmet",
                                                        ["no adapted sample has this stratum"])
    assert result.unmet == [logs]
    assert result.unassigned == 60 + 8 - 40 - 20 - 8
    counts = Counter((s.doc_type, s.question_type, s.answerable) for s in result.samples)
    assert counts == {("table", "numeric", True): 18, ("table", "numeric", False): 2,
                      ("table", "lookup", True): 9, ("table", "lookup", False): 1,
                      ("code_config", "howto", True): 5}
    assert len({s.id for s in result.samples}) == len(result.samples)
    questions = [s.question for s in result.samples]
    assert len(set(questions)) == len(questions)  # a question is used once


def test_unanswerable_variants_borrow_other_contexts_honestly() -> None:
    pool = make_pool()
    by_id = {s.id: s for s in pool}
    result = stratified_sample(pool, QUOTAS, 7, NO_ANSWER)
    variants = [s for s in result.samples if not s.answerable]
    assert len(variants) == 3
    for v in variants:
        base = by_id[v.id.removesuffix("-unanswerable")]
        donor = by_id[v.metadata["contexts_from"]]
        assert v.ground_truth == NO_ANSWER and v.question == base.question
        assert v.contexts == donor.contexts and v.contexts != base.contexts
        assert donor.metadata["context_group"] != base.metadata["context_group"]
        assert base.ground_truth not in " ".join(v.contexts)
        assert v.metadata["original_ground_truth"] == base.ground_truth
        assert v.stratum() == base.stratum()


def test_same_seed_same_bytes_other_seed_other_selection(tmp_path: Path) -> None:
    def run(seed: int, name: str) -> tuple[bytes, bytes]:
        result = stratified_sample(list(reversed(make_pool())), QUOTAS, seed, NO_ANSWER)
        write_jsonl(result.samples, tmp_path / f"{name}.jsonl")
        write_manifest(result.samples, tmp_path / f"{name}.csv")
        return ((tmp_path / f"{name}.jsonl").read_bytes(),
                (tmp_path / f"{name}.csv").read_bytes())

    first, again, other = run(42, "a"), run(42, "b"), run(43, "c")
    assert first == again
    assert first[0] != other[0]
    assert hashlib.sha256(first[0]).hexdigest() == hashlib.sha256(
        stratified_sample_bytes(make_pool(), 42)).hexdigest()  # input order does not matter


def stratified_sample_bytes(pool: list[NormalizedSample], seed: int) -> bytes:
    from pytest_ragbench.datasets.export import dumps_line

    result = stratified_sample(pool, QUOTAS, seed, NO_ANSWER)
    return "".join(dumps_line(s) for s in result.samples).encode("utf-8")


def test_one_quota_change_does_not_reshuffle_the_others() -> None:
    before = stratified_sample(make_pool(), QUOTAS, 1, NO_ANSWER)
    changed = [QUOTAS[0], quota("table", 6, "lookup"), *QUOTAS[2:]]
    after = stratified_sample(make_pool(), changed, 1, NO_ANSWER)
    numeric = [s.id for s in before.samples if s.question_type == "numeric"]
    assert numeric == [s.id for s in after.samples if s.question_type == "numeric"]


def test_short_quota_is_scaled_down_keeping_the_share_and_reported() -> None:
    pool = make_pool()
    result = stratified_sample(pool, [quota("table", 100, "lookup", share=0.2)], 3, NO_ANSWER)
    [outcome] = result.outcomes
    assert outcome.available == 20
    assert (outcome.answerable, outcome.unanswerable) == (16, 4)  # 20% of what there is
    assert (outcome.shortfall, outcome.status) == (80, "scaled down")
    assert "only 20 questions match" in outcome.notes[0]


def test_no_donor_means_no_unanswerable_and_it_is_said() -> None:
    result = stratified_sample(make_pool(), [quota("code_config", 5, share=0.4)], 3, NO_ANSWER)
    [outcome] = result.outcomes
    assert (outcome.answerable, outcome.unanswerable, outcome.status) == (3, 0, "scaled down")
    assert "no other sample of the same doc_type with contexts" in outcome.notes[-1]


def test_difficulty_quotas() -> None:
    quotas = [quota("table", 4, "numeric", 0.0, "hard"), quota("table", 4, "numeric", 0.0,
                                                                "easy")]
    result = stratified_sample(make_pool(), quotas, 5, NO_ANSWER)
    assert Counter(s.difficulty for s in result.samples) == {"hard": 4, "easy": 4}


def test_source_unanswerables_count_first() -> None:
    declined = NormalizedSample(
        id="declined", question="Off topic?", ground_truth="I cannot answer.", contexts=(),
        doc_type="table", question_type="lookup", difficulty="easy", source_dataset="cases",
        metadata={"answerable": False})
    pool = [*make_pool(), declined]
    result = stratified_sample(pool, [quota("table", 10, "lookup")], 5, NO_ANSWER)
    assert [s.id for s in result.samples if not s.answerable] == ["declined"]


@pytest.mark.parametrize(("counts", "share", "expected"), [
    ([50, 25, 20, 5], 0.1, [5, 3, 2, 0]),
    ([450, 150], 0.1, [45, 15]),
    ([3, 3, 3], 0.5, [2, 2, 1]),  # ties go to the earlier quota
    ([10], 0.0, [0]),
])
def test_unanswerable_targets_largest_remainder(counts: list[int], share: float,
                                                expected: list[int]) -> None:
    targets = unanswerable_targets([quota("t", c, share=share) for c in counts])
    assert targets == expected
    assert sum(targets) == round(sum(counts) * share + 1e-9)


def test_config_checks(tmp_path: Path) -> None:
    path = tmp_path / "q.toml"

    def load(text: str) -> object:
        path.write_text(text, encoding="utf-8")
        return load_config(path)

    config = load('[build]\nseed = 3\n[[source]]\nadapter = "beir"\npath = "data/x"\n'
                  'max_contexts = 2\n[[quota]]\ndoc_type = "clean_text"\ncount = 4\n')
    assert config.seed == 3  # type: ignore[attr-defined]
    assert config.sources[0].path == tmp_path / "data" / "x"  # type: ignore[attr-defined]
    assert config.sources[0].options == {"max_contexts": 2}  # type: ignore[attr-defined]
    for text, message in [
        ("[[quota]]\ndoc_type='t'\ncount=1\n[[quota]]\ndoc_type='t'\nquestion_type='a'\n"
         "count=1\n", "overlap"),
        ("[[quota]]\ndoc_type='t'\ncount=-1\n", "count: expected a non-negative integer"),
        ("[[quota]]\ncount=1\n", "doc_type: required"),
        ("[[quota]]\ndoc_type='t'\ncount=1\nshare=0.1\n", "share: unknown key"),
        ("[[source]]\nadapter='beir'\npath='x'\nbogus=1\n", "bogus: not an option of adapter"),
        ("[[source]]\nadapter='csv'\npath='x'\n", "adapter: expected one of"),
        ("[build]\nunanswerable_share = 1.5\n", "unanswerable_share: expected a number"),
        ("[bulid]\n", r"unknown table \[bulid\]"),
        ("not toml", "invalid TOML"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load(text)
