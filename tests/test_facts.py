# ruff: noqa: E501  (case files read best with one field per line)
"""``expected_facts`` and ``fact_recall``: the normaliser, the case field, and real sessions.

The sessions run in subprocesses (the real MiniLM embedder and ragas load there) with the
user's own application as ``ragbench_system`` (README "Evaluating your own RAG system"):
it answers each question with a fixed text, so each test knows the answer it checks.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragbench.cases.build import build_case
from pytest_ragbench.cases.raw import RawRecord
from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.ragcsv import parse_row
from pytest_ragbench.metrics.answer import fact_recall, normalize_fact
from pytest_ragbench.metrics.registry import Unscored
from pytest_ragbench.results import coverage
from tests.helpers import failure_section
from tests.project import RagbenchProject

# -- the normaliser --------------------------------------------------------------------------


@pytest.mark.parametrize(("written", "normal"), [
    ("1,234", "1234"), ("1234", "1234"), ("$1,234,567.50", "1234567.5"), ("12.0", "12"),
    ("12.50", "12.5"), ("0.5", "0.5"), (".5", "0.5"), ("007", "7"), ("67%", "67 percent"),
    ("Rudy  Gobert's\t4th DPOY!", "rudy gobert s 4 th dpoy"), ("Dončić", "doncic"),
    ("2023-24", "2023 24"), ("3-pt", "3 pt"), ("3pt", "3 pt"), ("x_y", "x y"),
    ("İSTANBUL", "istanbul"), ("٣٠", "30"), ("", ""), ("?!", ""),
])
def test_normal_forms(written: str, normal: str) -> None:
    assert normalize_fact(written) == normal


def test_number_formats_and_case_match_and_whole_words_do_not_leak() -> None:
    answer = "IMFT sold 1,234 units to INTEL in 2019, up 12.0% (about $4.5 million)."
    result = fact_recall(answer, ["1234 units", "intel", "2019", "12 percent", "4.50 million",
                                  "12", "123", "4", "IMF", "sold to Intel"])
    assert result.found == ("1234 units", "intel", "2019", "12 percent", "4.50 million", "12")
    # "123" is not in 1234, "4" not in 4.5, "IMF" not in IMFT, and the words are not adjacent
    assert result.missing == ("123", "4", "IMF", "sold to Intel")
    assert result.score == pytest.approx(6 / 10)


def test_a_fact_with_nothing_to_look_for_is_unscored_not_zero() -> None:
    assert isinstance(fact_recall("anything", ["!!"]).score, Unscored)


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
WORDS = st.lists(st.from_regex(r"[A-Za-z]{1,8}", fullmatch=True), min_size=1, max_size=5)


@given(TEXT)
def test_normalising_twice_changes_nothing(text: str) -> None:
    once = normalize_fact(text)
    assert normalize_fact(once) == once
    assert once == " ".join(once.split())  # single spaces, none at the ends


@given(st.integers(min_value=0, max_value=10**15), st.integers(min_value=0, max_value=3))
def test_thousands_separators_and_trailing_zeros_do_not_matter(number: int, zeros: int) -> None:
    plain = str(number)
    assert normalize_fact(f"{number:,}") == plain
    assert normalize_fact(f"{number}.{'0' * zeros}" if zeros else plain) == plain
    assert fact_recall(f"It was {number:,}.", [plain]).score == 1.0
    assert fact_recall(f"It was {number}.", [f"{number:,}"]).score == 1.0


@given(st.integers(min_value=1, max_value=10**6), st.integers(min_value=0, max_value=9))
def test_a_number_is_not_found_inside_a_longer_one(number: int, digit: int) -> None:
    assert fact_recall(f"{number}{digit}", [str(number)]).score == 0.0
    assert fact_recall(f"{number}.{digit}1", [str(number)]).score == 0.0


@given(WORDS, WORDS, WORDS, st.sampled_from([" ", ", ", " - ", "... ", "\n", "'", "; "]))
def test_a_fact_is_found_whatever_the_case_and_punctuation_around_it(
        before: list[str], fact: list[str], after: list[str], separator: str) -> None:
    answer = separator.join([*before, *(w.upper() for w in fact), *after]) + "."
    assert fact_recall(answer, [" ".join(fact).lower()]).score == 1.0


@given(TEXT, TEXT)
def test_a_text_contains_itself_and_recall_is_a_share(fact: str, other: str) -> None:
    result = fact_recall(f"{other} {fact}", [fact, other])
    if normalize_fact(fact):
        assert fact in result.found
    assert isinstance(result.score, Unscored) or 0.0 <= result.score <= 1.0


# -- the case field --------------------------------------------------------------------------

VECTOR = {"kind": "vector", "question": "What were its sales to Intel in 2019?",
          "ground_truth": "Should retrieve sales.md: 1,234 units."}


def _build(data: dict[str, Any]) -> Any:
    lines = {name: number for number, name in enumerate(data, start=2)}
    return build_case(RawRecord(data, line=1, field_lines=lines), Path("cases.yaml"))


def test_expected_facts_are_read_for_each_answer_kind() -> None:
    vector = _build({**VECTOR, "expected_facts": ["1,234 units", 2019]})
    assert vector.expected_facts == ("1,234 units", "2019")
    assert _build({**VECTOR, "expected_facts": "Intel"}).expected_facts == ("Intel",)
    assert _build(VECTOR).expected_facts == ()
    ragas = _build({"kind": "ragas", "question": "q?", "ground_truth": "g",
                    "expected_facts": ["Paris"]})
    assert ragas.expected_facts == ("Paris",)
    hybrid = _build({"kind": "hybrid", "question": "q?", "ground_truth_answer": "g",
                     "expected_facts": ["9,500 points"]})
    assert hybrid.expected_facts == ("9,500 points",)


@pytest.mark.parametrize(("facts", "message"), [
    (["Intel", {"units": 1234}], "entry 2: expected text, got dict"),
    (["Intel", "--"], "entry 2 ('--') has no letter or digit"),
    ([True], "entry 1: expected text, got bool"),
])
def test_a_bad_fact_is_an_error_naming_file_line_and_field(facts: list[object],
                                                           message: str) -> None:
    with pytest.raises(CaseError) as caught:
        _build({**VECTOR, "expected_facts": facts})
    assert caught.value.field == "expected_facts" and caught.value.line == 5
    assert message in str(caught.value) and "cases.yaml" in str(caught.value)


def test_a_decline_case_cannot_expect_facts() -> None:
    with pytest.raises(CaseError, match="expects a refusal, which states no facts") as caught:
        _build({**VECTOR, "expect": "decline", "expected_facts": ["Intel"]})
    assert caught.value.field == "expected_facts"


def test_a_ragcsv_row_carries_facts_in_an_optional_sixth_column() -> None:
    cells = ["Gobert", "[{'page_content': 'Rudy Gobert won.', 'metadata': {}}]", "", "",
             "Who won DPOY?"]
    assert parse_row(cells, 1, 1).expected_facts == ()
    assert parse_row([*cells, ""], 1, 1).expected_facts == ()
    assert parse_row([*cells, "['Rudy Gobert', 2024]"], 1, 1).expected_facts == \
        ("Rudy Gobert", "2024")
    with pytest.raises(CaseError, match="Python literal list of strings") as caught:
        parse_row([*cells, "Rudy Gobert"], 1, 7)
    assert caught.value.field == "column 5 (expected facts)" and caught.value.line == 7


# -- what the verdict covers (documents as results.json holds them) --------------------------


def _item(kind: str, metrics: dict[str, float], thresholds: dict[str, float] | None = None,
          unscored: dict[str, str] | None = None) -> dict[str, object]:
    return {"kind": kind, "metrics": metrics, "unscored": unscored or {},
            "thresholds": thresholds or {}, "judge": {}}


NO_JUDGE = {"faithfulness": "no judge configured", "answer_relevancy": "no judge configured"}


def test_without_a_judge_or_facts_the_line_says_answers_were_not_checked() -> None:
    document = {"config": {"judge_url": None}, "gates": [], "items": [
        _item("vector", {"source_hit@5": 1, "answered": 1, "semantic_similarity": 0.03},
              {"source_hit@5": 1, "answered": 1}, NO_JUDGE),
        _item("vector", {"declined": 1}, {"declined": 1}, {"semantic_similarity": "decline"}),
        _item("ragas", {"semantic_similarity": 0.2, "token_f1": 0.1}, {}, NO_JUDGE),
        _item("beir", {"nDCG@10": 0.5, "MRR": 1.0}, {"MRR": 0.01}),
    ]}
    line = coverage.line(document)
    assert line == ("checked: refusals (vector); retrieval (beir, vector 1/2) · answer "
                    "correctness not checked: no judge configured, no expected_facts (ragas, "
                    "vector: similarity to the reference at most)")
    assert coverage.recommendation(document) == coverage.RECOMMENDATION


def test_facts_data_and_gates_are_named_with_how_they_check() -> None:
    document = {"config": {}, "components": {"judge": "none"}, "gates": [
        {"kind": "sql", "metric": "value_recall", "passed": True},
        {"kind": "ragas", "metric": "token_f1", "passed": None}], "items": [
        _item("vector", {"fact_recall": 1.0, "answered": 1}, {"fact_recall": 1, "answered": 1}),
        _item("vector", {"fact_recall": 0.5, "answered": 1}, {"fact_recall": 1, "answered": 1}),
        _item("vector", {"semantic_similarity": 0.9, "answered": 1}, {"answered": 1}),
        # "sql.correct" = 0 cannot fail; the gate on value_recall's mean checks
        _item("sql", {"correct": 0, "value_recall": 0.5}, {"correct": 0}),
    ]}
    cover = coverage.section(document)
    assert cover["kinds"]["vector"]["checked"]["facts"] == {"items": 2, "how": "item"}
    assert cover["kinds"]["sql"]["checked"]["data"] == {"items": 1, "how": "mean"}
    assert coverage.line(document) == (
        "checked: answers by facts (vector 2/3); answers by ground-truth data (sql on the mean); "
        "refusals (vector) · answer correctness not checked: no judge configured, no "
        "expected_facts (vector 1/3: similarity to the reference at most)")


def test_with_a_judge_judged_answers_are_checked_only_when_gated() -> None:
    judged = {"faithfulness": 0.9, "answer_relevancy": 0.8, "semantic_similarity": 0.5}
    document = {"config": {"judge_url": "http://127.0.0.1:1/v1"}, "gates": [], "items": [
        _item("ragas", judged), _item("ragas", judged)]}
    assert coverage.line(document) == ("checked: nothing that can fail · recorded, no "
                                       "threshold or gate: answers by a judge (ragas)")
    assert coverage.recommendation(document) is None
    document["gates"] = [{"kind": "ragas", "metric": "faithfulness", "passed": False}]
    assert coverage.line(document) == "checked: answers by a judge (ragas on the mean)"


# -- real sessions ---------------------------------------------------------------------------

CONFTEST = '''
import pytest
from pytest_ragbench.protocols import Answer, Context

ANSWERS = {
    "How many units did Acme sell to Intel in 2019?": "Acme sold 1,234 units to Intel in 2019, 12.0% more than in 2018.",
    "What were its sales to Intel in 2019?": "IMFT is a joint venture between Intel and IntelCorp.",
    "Who makes the chips?": "Acme makes the chips in Oregon.",
}
SALES = Context("sales.md#0", "Acme sold 1234 units to Intel in 2019, 12 percent more than in 2018.",
                0.9, {"source": "sales.md"})


class SalesApp:
    def answer(self, question, history=None):
        return Answer(ANSWERS[question], (SALES,))

    def answer_from(self, question, contexts, history=None):
        return Answer(ANSWERS[question], tuple(contexts))


@pytest.fixture(scope="session")
def ragbench_system():
    return SalesApp()
'''
CASES = """
kind: vector
cases:
  - id: sales_stated
    question: "How many units did Acme sell to Intel in 2019?"
    ground_truth: "Should retrieve sales.md: Acme sold 1,234 units to Intel in 2019, up 12%."
    expected_sources: [sales.md]
    expected_facts: ["1234 units", "Intel", "12 percent"]
  - id: sales_missed
    question: "What were its sales to Intel in 2019?"
    ground_truth: "Should retrieve sales.md: 1,234 units."
    expected_sources: [sales.md]
    expected_facts: ["1,234 units", "Intel"]
  - id: no_facts
    question: "Who makes the chips?"
    ground_truth: "Acme makes the chips."
    expected_sources: [sales.md]
"""
# a logged answer, scored as given: nothing is asked
LOGGED = [{"id": "logged_wrong", "question": "What were its sales to Intel in 2019?",
           "ground_truth": "Acme sold 1,234 units to Intel in 2019.",
           "answer": "IMFT is a joint venture between Intel and IntelCorp.",
           "contexts": ["Acme sold 1234 units to Intel in 2019."],
           "expected_facts": ["1,234"]}]


def _ragcsv_row(facts: str) -> str:
    buffer = io.StringIO()
    fragments = repr([{"page_content": "Acme sold 1234 units to Intel in 2019.",
                       "metadata": {"title": "sales"}}])
    csv.writer(buffer, lineterminator="\n").writerow(
        ["1,234 units", fragments, "", "", "How many units did Acme sell to Intel in 2019?",
         facts])
    return buffer.getvalue()


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).conftest(CONFTEST)
    project.cases("sales.yaml", CASES)
    return project


def _run(project: RagbenchProject, *args: str) -> pytest.RunResult:
    return project.run("--ragbench", "-q", "-rN", "-p", "no:cacheprovider", *args,
                       subprocess=True)


def _section(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "= ragbench =" in line)
    return lines[start + 1:]


def test_an_answer_missing_a_fact_fails_and_one_stating_them_passes(
        project: RagbenchProject) -> None:
    project.cases("logged.jsonl", "".join(json.dumps(s) + "\n" for s in LOGGED))
    project.cases("sales.ragcsv.csv", _ragcsv_row("['1,234 units', 'Intel', '2019']"))
    result = _run(project)
    result.assert_outcomes(passed=3, failed=2)
    items = project.items_by_case()
    stated = items["sales_stated"]
    assert stated["status"] == "passed"  # "1,234" = "1234", "12.0%" = "12 percent"
    assert stated["metrics"]["fact_recall"] == 1.0 and stated["thresholds"]["fact_recall"] == 1.0
    assert "fact_recall" not in items["no_facts"]["metrics"]  # no facts: no value, not 0
    assert "fact_recall" not in items["no_facts"]["unscored"]
    assert items["sales:1"]["metrics"]["fact_recall"] == 1.0  # the RAGCSV row's column 5

    missed = items["sales_missed"]
    assert missed["status"] == "failed" and missed["metrics"]["fact_recall"] == 0.5
    assert missed["metrics"]["source_hit@1"] == 1.0  # retrieval alone would have passed it
    section = failure_section(result.stdout.str(), "vector: sales_missed")
    assert "the answer does not state the expected fact(s): 1,234 units" in section
    assert "fact_recall = 0.5, needs >= 1" in section
    assert "facts not in the answer: 1,234 units" in section
    assert "got: IMFT is a joint venture between Intel and IntelCorp." in section

    logged = items["logged_wrong"]  # a wrong logged ragas answer no longer passes
    assert logged["status"] == "failed" and logged["metrics"]["fact_recall"] == 0.0
    assert "facts not in the answer: 1,234" in failure_section(result.stdout.str(),
                                                               "ragas: logged_wrong")

    first, hint = _section(result.stdout.str())[:2]
    assert first == ("checked: answers by facts (ragas, ragcsv, vector 2/3); refusals "
                     "(vector); retrieval (vector) · answer correctness not checked: no judge configured, no "
                     "expected_facts (vector 1/3: similarity to the reference at most)")
    assert hint == f"  hint: {coverage.RECOMMENDATION}"
    assert project.results()["coverage"]["kinds"]["vector"]["answers_not_checked"] == 1
    page = project.html()
    assert page.index('class="coverage"') < page.index("did not pass")
    assert "answers by facts (ragas, ragcsv, vector 2/3)" in page

    project.gates('[thresholds]\n"vector.fact_recall" = 0.5\n')  # overridable as every threshold
    _run(project, "-k", "sales_missed").assert_outcomes(passed=1)


def test_without_a_judge_a_passing_verdict_names_what_it_did_not_check(
        project: RagbenchProject) -> None:
    result = _run(project, "-k", "no_facts")
    result.assert_outcomes(passed=1)
    section = _section(result.stdout.str())
    not_checked = ("answer correctness not checked: no judge configured, no expected_facts "
                   "(vector: similarity to the reference at most)")
    assert section[0] == f"checked: refusals (vector); retrieval (vector) · {not_checked}"
    assert f"verdict: PASSED — {not_checked}" in section
    assert project.results()["coverage"]["judge_configured"] is False
    assert not_checked.split(" (")[0] in project.html()
