"""Comparisons that keep their power with many systems, end to end (issue 15).

Eight scripted systems, registered through ``pytest_ragbench_systems`` in the project's
conftest.py, answer 30 quiz cases: ``perfect`` ranks the relevant documents first and
answers exactly, ``wrong`` never does, and ``s1`` ... ``s6`` are right on more and more
cases. A test-only ``quiz`` kind scores each answer on ten real metrics (token F1, exact
match, keyword overlap, and seven trec_eval measures of the ranking), so 28 pairs of
systems make a Holm family of 280 comparisons: a randomization test that always draws
10,000 resamples (p >= 2e-4, 280 × 2e-4 > 0.05) could never call perfect-vs-wrong
significant.
"""

from __future__ import annotations

import pytest

from tests.project import RagbenchProject

SYSTEMS = ("perfect", "s1", "s2", "s3", "s4", "s5", "s6", "wrong")
CASES = 30

CONFTEST = '''
import zlib

from pytest_ragbench.cases.build import mapping, text
from pytest_ragbench.kinds import CaseKind, Field, ItemKind
from pytest_ragbench.systems.protocols import Answer, Context

QUIZ_CASES = CaseKind("quiz", {"question": Field(True, text), "ground_truth": Field(True, text),
                               "metadata": Field(convert=mapping)})
QUIZ = ItemKind(name="quiz", case_kind="quiz", runner="quiz_runner:run",
                description="test-only kind: an answer and a ranking",
                fixtures=("ragbench_config", "ragbench_system"),
                metrics=("token_f1", "exact_match", "keyword_overlap", "nDCG@10", "P@5", "R@10",
                         "RR", "AP", "Success@5", "Rprec"))
DOCS = [f"d{i:02d}" for i in range(40)]


def pytest_ragbench_item_kinds(config):
    return [QUIZ_CASES, QUIZ]


class Quizzer:
    """Right on a case when its hash falls below ``skill`` (1: always, 0: never)."""

    def __init__(self, skill):
        self.skill = skill

    def answer(self, question, history=None):
        truth, relevant = ANSWERS[question]
        right = zlib.crc32(question.encode()) % 1000 < 1000 * self.skill
        text = truth if right else truth.split()[0] + " zulu yankee"  # one word right
        first = relevant if right else [d for d in DOCS if d not in relevant][:5]
        rest = [d for d in DOCS if d not in first]
        ranking = [*first, *rest][:20]
        return Answer(text, tuple(Context(d, d, 1.0 / (i + 1)) for i, d in enumerate(ranking)))


SKILLS = {"perfect": 1.0, "s1": 0.2, "s2": 0.35, "s3": 0.5, "s4": 0.65, "s5": 0.8,
          "s6": 0.9, "wrong": 0.0}


def pytest_ragbench_systems(config):
    return {name: lambda request, skill=skill: Quizzer(skill) for name, skill in SKILLS.items()}
'''

RUNNER = '''
"""The test-only ``quiz`` kind: answer metrics and trec_eval measures of the ranking."""
from pytest_ragbench.metrics import evaluate_run, exact_match, keyword_overlap, token_f1
from pytest_ragbench.kinds import Outcome

MEASURES = ["nDCG@10", "P@5", "R@10", "RR", "AP", "Success@5", "Rprec"]


def run(case, item):
    answer = item.answer(case.question)
    relevant = case.metadata["relevant"]
    qrels = {"q": {d: 1 for d in relevant}}
    ranking = {"q": {c.id: c.score for c in answer.contexts}}
    measures = evaluate_run(qrels, ranking, MEASURES, per_query=True)["q"]
    metrics = {"token_f1": token_f1(answer.text, case.ground_truth),
               "exact_match": exact_match(answer.text, case.ground_truth),
               "keyword_overlap": keyword_overlap(answer.text, case.ground_truth),
               **{name: float(value) for name, value in measures.items()}}
    return Outcome(metrics=metrics, evidence={"answer": answer.text})
'''

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa")


def _project(pytester: pytest.Pytester) -> RagbenchProject:
    cases, answers = [], {}
    for i in range(CASES):
        truth = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(3 + i % 4))
        relevant = [f"d{(3 * i + k) % 40:02d}" for k in range(1 + i % 3)]
        question = f"question {WORDS[i % len(WORDS)]}{i} what is it?"
        cases.append({"id": f"q{i:02d}", "kind": "quiz", "question": question,
                      "ground_truth": truth, "metadata": {"relevant": relevant}})
        answers[question] = [truth, relevant]
    project = RagbenchProject(pytester).conftest(f"ANSWERS = {answers!r}\n" + CONFTEST).ini()
    (project.path / "quiz_runner.py").write_text(RUNNER)
    project.cases("quiz.jsonl", cases)
    return project


def test_eight_systems_find_perfect_vs_wrong_on_every_metric(pytester: pytest.Pytester) -> None:
    project = _project(pytester)
    result = project.runpytest("--ragbench", "--ragbench-systems", ",".join(SYSTEMS))
    result.assert_outcomes(passed=len(SYSTEMS) * CASES)
    data = project.results()
    assert len(data["comparisons"]) == 28
    family = [c for kinds in data["comparisons"].values() for c in kinds["quiz"].values()]
    assert len(family) == 280 and all(c["holm_family"] == 280 for c in family)
    extremes = data["comparisons"]["perfect_vs_wrong"]["quiz"]
    assert len(extremes) == 10
    for metric, c in extremes.items():
        assert c["delta"] > 0, metric
        assert c["significant"] and c["better"], (metric, c["p_value"], c["p_holm"])
        assert c["p_value"] > 0 and c["p_holm"] < 0.05
    # The binary metrics get exact McNemar, the others the sign-flip test with enough
    # resamples for the family (and its bound where no resample reaches the difference).
    assert extremes["exact_match"]["test"] == extremes["Success@5"]["test"] == "mcnemar"
    flips = extremes["token_f1"]
    assert flips["test"] == "randomization" and flips["resamples"] >= 20 * 280 / 0.05
    assert flips["p_resolution"] * 280 < 0.05 / 5
    assert flips["p_method"] == "hoeffding bound" and flips["p_value"] < flips["p_resolution"]
    # Power for the tests used at Holm's alpha / 280, on the 30 pairs scored.
    power = data["power_analysis"]["quiz"]
    assert (power["n"], power["family"]) == (CASES, 280)
    assert power["alpha"] == pytest.approx(0.05 / 280)
    assert set(power["by_test"]) == {"mcnemar", "randomization"}
    result.stdout.fnmatch_lines([
        "paired comparisons (A - B; p Holm-corrected over 280 comparisons, alpha 0.05; "
        "CIs 95% each, unadjusted):",
        "perfect_vs_wrong * quiz * exact_match * mcnemar * 30 * +1.000 * W * better",
        "perfect_vs_wrong * quiz * token_f1 * randomization * 30 * +0.7* B * <* * <* better",
        "power (test used, Holm alpha / m) * test * n * alpha * d=0.2 * d=0.3 * d=0.5",
        "quiz * mcnemar (*% discordant) * 30 * 0.00018 *",
        "quiz * randomization (as paired t) * 30 * 0.00018 *",
    ])
    assert " 0 " not in " ".join(line for line in result.stdout.lines
                                 if line.startswith("perfect_vs_wrong"))


# -- the randomization test's p-values, unit by unit ------------------------------------------


def test_resamples_grow_with_the_family() -> None:
    from pytest_ragbench.results.comparisons import resamples_for

    assert resamples_for(1) == resamples_for(25) == 10_000
    assert resamples_for(280) == 112_000
    for family in (50, 280, 1000):
        assert 2 / (resamples_for(family) + 1) * family < 0.05 / 5  # the floor, 10x below


def test_exact_sign_flips_enumerate_every_cluster_sign() -> None:
    """Brute force over all 2^6 cluster signs: the same two-sided p."""
    import itertools

    import numpy as np

    from pytest_ragbench.results.comparisons import sign_flip_pvalues

    diffs = [0.3, 0.1, -0.05, 0.2, 0.4, 0.15, 0.25, -0.1, 0.3]
    keys = ["a", "a", "b", "c", "c", "d", "e", "f", "f"]
    sums = {}
    for d, k in zip(diffs, keys, strict=True):
        sums[k] = sums.get(k, 0.0) + d
    values = np.array(list(sums.values()))
    null = np.array([values @ np.array(s) for s in itertools.product([1, -1], repeat=6)])
    observed = values.sum()
    expected = min(1.0, 2 * min(np.mean(null >= observed - 1e-12),
                                np.mean(null <= observed + 1e-12)))
    (found,) = sign_flip_pvalues([(diffs, keys)], resamples=10_000)
    assert found["p_method"] == "exact" and found["resamples"] == 64
    assert found["p_value"] == pytest.approx(expected)


def test_where_no_flip_reaches_the_difference_hoeffding_bounds_p() -> None:
    import math

    from pytest_ragbench.results.comparisons import sign_flip_pvalues

    (found,) = sign_flip_pvalues([([1.0] * 40, [None] * 40)], resamples=10_000)
    assert found["p_method"] == "hoeffding bound"
    assert found["p_value"] == pytest.approx(2 * math.exp(-20)) and found["p_value"] > 0
    assert found["p_resolution"] == pytest.approx(2 / 10_001)


def test_sign_flip_p_values_are_uniform_under_the_null() -> None:
    """500 null comparisons (one block of shared flips): about 5% below 0.05, never 0."""
    import numpy as np

    from pytest_ragbench.results.comparisons import sign_flip_pvalues

    rng = np.random.default_rng(5)
    tests = [(list(rng.normal(0, 1, 30) * rng.choice([0.2, 1.0], 30)), [None] * 30)
             for _ in range(500)]
    p = np.array([f["p_value"] for f in sign_flip_pvalues(tests, resamples=10_000)])
    assert 0.025 <= np.mean(p <= 0.05) <= 0.08
    assert 0.4 <= np.mean(p <= 0.5) <= 0.6 and p.min() > 0


def test_clustered_pairs_use_the_cluster_sign_flip_not_mcnemar() -> None:
    from pytest_ragbench.results.comparisons import Pairs, evaluate

    a = [1.0, 1.0, 1.0, 0.0] * 5
    b = [0.0, 0.0, 1.0, 0.0] * 5
    plain = Pairs("x_vs_y", "k", "exact_match", a=a, b=b, clusters=[None] * 20)
    clustered = Pairs("x_vs_y", "k", "exact_match", a=a, b=b,
                      clusters=[("cluster", str(i // 4)) for i in range(20)])
    (first,) = evaluate([plain])
    (second,) = evaluate([clustered])
    assert first["test"] == "mcnemar" and first["p_method"] == "exact binomial"
    assert second["test"] == "randomization" and second["n_clusters"] == 5
    assert second["p_method"] == "exact" and second["p_value"] == pytest.approx(2 / 32)
    assert second["ci_high"] - second["ci_low"] > first["ci_high"] - first["ci_low"]


def test_p_values_print_as_bounds_never_zero() -> None:
    from pytest_ragbench.render.terminal import p_text

    floor = 2 / 112_001
    assert p_text({"p_value": floor, "p_method": "monte-carlo", "p_resolution": floor}) \
        == "<1.8e-05"
    assert p_text({"p_value": 6.1e-7, "p_method": "hoeffding bound",
                   "p_resolution": floor}) == "<6.1e-07"
    assert p_text({"p_value": 0.0123, "p_method": "monte-carlo",
                   "p_resolution": floor}) == "0.0123"
    assert p_text({"p_value": None}) == "undefined"


def test_a_hoeffding_bound_below_a_double_is_written_as_the_bound() -> None:
    """n = 5000 pairs with Cohen's d near 1: 2 exp(-T^2 / 2 sum d^2) is about 1e-543."""
    import math

    import numpy as np

    from pytest_ragbench.results.comparisons import Pairs, evaluate, sign_flip_pvalues

    rng = np.random.default_rng(1)
    diffs = list(rng.normal(1.0, 1.0, 5000))
    (found,) = sign_flip_pvalues([(diffs, [None] * 5000)], resamples=10_000)
    total, squares = sum(diffs), sum(d * d for d in diffs)
    log10_bound = (math.log(2) - total**2 / (2 * squares)) / math.log(10)
    assert log10_bound < -300
    assert found["p_value"] == 1e-300 and found["p_value"] > 0
    assert found["p_method"] == "hoeffding bound, below 1e-300"
    assert found["p_log10"] == pytest.approx(log10_bound)
    # through a comparison: never 0, Holm's p neither, and printed as a bound
    from pytest_ragbench.render.terminal import p_text

    b = list(rng.random(5000))
    (c,) = evaluate([Pairs("x_vs_y", "k", "token_f1", a=[x + d for x, d in zip(b, diffs,
                                                                                 strict=True)],
                           b=b, clusters=[None] * 5000)])
    assert 0 < c["p_value"] <= c["p_holm"] and c["p_method"].startswith("hoeffding bound")
    assert p_text(c) == "<1e-300"


def test_mcnemar_is_summed_in_log_space() -> None:
    """The exact binomial p equals scipy's where a double holds it, and stays positive
    (the floor 1e-300, said so) where it does not."""
    from scipy import stats as sps

    from pytest_ragbench.results.comparisons import _mcnemar

    for a_only, b_only in ((7, 2), (30, 12), (0, 15), (40, 40), (3, 50)):
        a = [1.0] * a_only + [0.0] * b_only + [1.0] * 4
        b = [0.0] * a_only + [1.0] * b_only + [1.0] * 4
        found = _mcnemar(a, b)
        expected = sps.binomtest(min(a_only, b_only), a_only + b_only, 0.5).pvalue
        assert found["p_value"] == pytest.approx(min(1.0, expected), rel=1e-9)
        assert found["p_method"] == "exact binomial"
    lopsided = _mcnemar([1.0] * 1100, [0.0] * 1100)
    assert sps.binomtest(0, 1100, 0.5).pvalue == 0.0  # what a double gives
    assert lopsided["p_value"] == 1e-300 and lopsided["p_resolution"] == 1e-300
    assert lopsided["p_method"] == "exact binomial, below 1e-300"
    assert lopsided["p_log10"] == pytest.approx(-1099 * 0.30102999566, rel=1e-9)


def test_identical_systems_differ_by_exactly_zero() -> None:
    from pytest_ragbench.render.terminal import comparison_rows
    from pytest_ragbench.results.comparisons import Pairs, evaluate

    same = [0.2, 0.9, 0.4, 0.7, 0.5]
    (c,) = evaluate([Pairs("x_vs_y", "k", "token_f1", a=same, b=list(same),
                           clusters=[None] * 5)])
    assert (c["delta"], c["ci_low"], c["ci_high"], c["ci_method"]) == (0.0, 0.0, 0.0,
                                                                       "identical")
    assert c["p_value"] == 1.0 and not c["significant"]
    row = comparison_rows({"comparisons": {"x_vs_y": {"k": {"token_f1": c}}}})[1]
    assert row[5:7] == ["+0.000", "[+0.000, +0.000] identical"]


def test_effect_size_needs_two_pairs_and_some_spread() -> None:
    from pytest_ragbench.render.terminal import comparison_rows
    from pytest_ragbench.results import gates
    from pytest_ragbench.results.comparisons import Pairs, evaluate

    one, constant, varied = evaluate([
        Pairs("x_vs_y", "k", "token_f1", a=[0.9], b=[0.1], clusters=[None]),
        Pairs("x_vs_y", "k", "rouge_l", a=[0.9, 0.8, 0.7], b=[0.4, 0.3, 0.2],
              clusters=[None] * 3),
        Pairs("x_vs_y", "k", "bleu", a=[0.9, 0.5, 0.7], b=[0.4, 0.3, 0.2],
              clusters=[None] * 3)])
    assert (one["effect_size"], one["effect_size_note"]) == (None, "n too small")
    assert (constant["effect_size"], constant["effect_size_note"]) == (None, "no spread")
    d = 0.4 / (0.03**0.5)  # differences 0.5, 0.2, 0.5: mean 0.4, sample SD sqrt(0.03)
    assert varied["effect_size"] == pytest.approx(d) and varied["effect_size_note"] is None
    document = {"comparisons": {"x_vs_y": {"k": {c["metric"]: c
                                                 for c in (one, constant, varied)}}}}
    rows = comparison_rows(document)
    assert [r[9] for r in rows[1:]] == ["n too small", "no spread", "+2.31"]
    shown = " ".join(" ".join(r) for r in rows) + gates.regression_line(
        {**one, "worse": True}, "before")
    assert "inf" not in shown and "nan" not in shown
    assert "d=n too small" in shown


def test_report_html_shows_bounds_and_notes_never_inf_or_nan() -> None:
    """The comparisons section of report.html (the terminal's rows, and a delta plot) for a
    p below a double, identical systems and a single pair."""
    import re

    import numpy as np

    from pytest_ragbench.render import html
    from pytest_ragbench.results.comparisons import Pairs, evaluate

    rng = np.random.default_rng(1)
    b = list(rng.random(5000))
    a = [x + d for x, d in zip(b, rng.normal(1.0, 1.0, 5000), strict=True)]
    same = [0.2, 0.9, 0.4, 0.7, 0.5]
    found = evaluate([Pairs("x_vs_y", "k", "token_f1", a=a, b=b, clusters=[None] * 5000),
                      Pairs("x_vs_y", "k", "rouge_l", a=same, b=list(same), clusters=[None] * 5),
                      Pairs("x_vs_y", "k", "bleu", a=[0.9], b=[0.1], clusters=[None])])
    document = {"comparisons": {"x_vs_y": {"k": {c["metric"]: c for c in found}}}}
    problems: list[str] = []
    section = html.comparisons_section(document, html.Page(problems))
    assert problems == []
    text = re.sub(r"<[^>]+>", " ", section)
    assert "&lt;1e-300" in text and "identical" in text and "n too small" in text
    assert not re.search(r"\b(inf|nan|NaN)\b", text)
