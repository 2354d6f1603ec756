"""The robustness section of results.json, the terminal summary and report.html."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from scipy import stats as sps

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.kinds.report_sections import builtin_sections
from pytest_ragbench.kinds.robust import report as robustness
from pytest_ragbench.render import html, terminal
from pytest_ragbench.results import document as document_mod
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.stats import intervals


def record(case_id: str, holds: dict[str, float], *, system: str | None = None,
           unscored: dict[str, str] | None = None,
           minimal: dict[str, str] | None = None) -> ItemRecord:
    evidence: dict[str, object] = {"question": f"question of {case_id}?", "seed": 1234}
    for kind, question in (minimal or {}).items():
        evidence[f"{kind} minimal question"] = question
        evidence[f"{kind} change"] = "typo 'a'->'s' at 3"
        evidence[f"{kind} broke"] = "rbo = 0.2, needs >= 0.5"
    label = f"{system}-vector-{case_id}" if system else f"vector-{case_id}"
    return ItemRecord(nodeid=f"cases.yaml::robust[{label}]", kind="robust", case_kind="vector",
                      case_id=case_id, file="cases.yaml", line=1,
                      status="failed" if minimal else "passed", system=system,
                      metrics={f"{k}.holds": v for k, v in holds.items()},
                      unscored={f"{k}.holds": r for k, r in (unscored or {}).items()},
                      evidence=evidence)


def wilson_by_hand(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


RECORDS = [
    record("a", {"typos": 1.0, "case": 1.0}),
    record("b", {"typos": 0.0, "case": 1.0}, minimal={"typos": "Whst is b?"}),
    record("c", {"typos": 0.0, "case": 0.0}, minimal={"typos": "Whst is c?", "case": "WHAT IS C?"}),
    record("d", {"typos": 1.0}, unscored={"synonyms": "no word of the question is in the "
                                                      "synonym table"}),
    record("e", {"typos": 1.0}, unscored={"synonyms": "no word of the question is in the "
                                                      "synonym table"}),
]


def test_share_per_kind_with_the_pass_rate_interval() -> None:
    part = robustness.section(RECORDS, [])
    typos = part["perturbations"]["typos"]
    assert (typos["cases"], typos["held"], typos["share"]) == (5, 3, 0.6)
    low, high = wilson_by_hand(3, 5)
    # 2 failures: Brown, Cai & DasGupta's Poisson bound replaces Wilson's upper bound
    poisson = 1 - sps.chi2.ppf(0.05, 2 * 2) / (2 * 5)
    assert typos["ci_low"] == pytest.approx(low, abs=1e-9)
    assert typos["ci_high"] == pytest.approx(max(high, poisson), abs=1e-9)
    assert typos["ci_high"] > high
    # the same interval as any pass rate of 3 in 5 (a metric cell of 0/1 values)
    cell = intervals.cell_interval([1.0, 1.0, 1.0, 0.0, 0.0], low=0.0, high=1.0)
    assert (typos["ci_low"], typos["ci_high"]) == (cell.low, cell.high)
    case = part["perturbations"]["case"]
    assert (case["cases"], case["held"]) == (3, 2)
    synonyms = part["perturbations"]["synonyms"]
    assert synonyms["cases"] == 0 and synonyms["share"] is None and synonyms["ci_low"] is None
    assert synonyms["reasons"] == {"no word of the question is in the synonym table": 2}
    assert list(part["perturbations"]) == ["typos", "case", "synonyms"]  # the flag's order


def test_exact_coverage_of_a_share_near_one() -> None:
    """p = 0.97 over 5 cases: plain Wilson covers 0.859 of sessions, the report's 0.992."""
    p, n = 0.97, 5
    shown, plain = 0.0, 0.0
    for held in range(n + 1):
        records = [record(f"c{i}", {"typos": float(i < held)}) for i in range(n)]
        share = robustness.section(records, [])["perturbations"]["typos"]
        weight = sps.binom.pmf(held, n, p)
        shown += weight * (share["ci_low"] <= p <= share["ci_high"])
        low, high = wilson_by_hand(held, n)
        plain += weight * (low <= p <= high)
    assert plain == pytest.approx(0.859, abs=1e-3)
    assert shown == pytest.approx(0.992, abs=1e-3)


def test_all_holding_is_not_a_certainty() -> None:
    part = robustness.section([record(c, {"typos": 1.0}) for c in "abcde"], [])
    typos = part["perturbations"]["typos"]
    assert typos["share"] == 1.0 and typos["ci_high"] == pytest.approx(1.0)
    assert typos["ci_low"] == pytest.approx(wilson_by_hand(5, 5)[0], abs=1e-9)
    assert typos["ci_low"] < 0.6


def test_worst_cases_first_with_their_minimal_question() -> None:
    part = robustness.section(RECORDS, [])
    assert part["failing_cases"] == 2
    worst = part["worst"]
    assert [w["case"] for w in worst] == ["vector-c", "vector-b"]  # two kinds broke, then one
    assert worst[0]["failures"] == [
        {"perturbation": "typos", "minimal_question": "Whst is c?",
         "change": "typo 'a'->'s' at 3", "broke": "rbo = 0.2, needs >= 0.5"},
        {"perturbation": "case", "minimal_question": "WHAT IS C?",
         "change": "typo 'a'->'s' at 3", "broke": "rbo = 0.2, needs >= 0.5"}]
    assert worst[0]["seed"] == 1234 and worst[0]["checked"] == 2


def test_several_systems_are_shown_apart() -> None:
    records = [record("a", {"typos": 1.0}, system="x"), record("a", {"typos": 0.0}, system="y",
                                                               minimal={"typos": "q"})]
    typos = robustness.section(records, ["x", "y"])["perturbations"]["typos"]
    assert typos["held"] == 1
    assert typos["systems"]["x"]["share"] == 1.0 and typos["systems"]["y"]["share"] == 0.0


def test_no_section_without_robustness_items() -> None:
    other = ItemRecord(nodeid="f::vector[a]", kind="vector", case_kind="vector", case_id="a",
                       file="f", line=1, status="passed", metrics={"x.holds": 1.0})
    assert robustness.section([other], []) == {}
    section = robustness.report_section([other], [])
    assert section.data == {} and not section.table and not section.text
    document = built([other])
    assert document["robustness"] == {}
    assert "robustness" not in "\n".join(terminal.render(document, [], None))
    assert "section-robustness" not in html.render(document)


def built(records: list[ItemRecord]) -> dict:
    settings = RagbenchConfig(rootpath=Path("."), evaluate=True, robustness=True)
    return document_mod.build(records, settings, run={"id": "r", "time": "t"}, components={},
                              report_sections=builtin_sections)


def test_results_json_terminal_and_html_carry_the_section() -> None:
    document = built(RECORDS)
    assert document["robustness"]["perturbations"]["typos"]["held"] == 3
    lines = terminal.render(document, [], None)
    start = lines.index("robustness: share of cases whose perturbed questions keep every "
                        "property")
    block = lines[start:start + 10]
    assert block[1].split() == ["perturbation", "cases", "held", "share", "95%", "CI",
                                "(Wilson)", "not", "checked"]
    assert block[2].split()[:4] == ["typos", "5", "3", "60.0%"]
    assert any("worst cases (2 failing)" in line for line in block)
    assert any("typos: 'Whst is c?' (rbo = 0.2, needs >= 0.5; changed: typo 'a'->'s' at 3)"
               in line for line in block)
    page = html.render(document)
    assert "<h2>robustness: share of cases whose perturbed questions keep every property</h2>" \
        in page and "Whst is c?" in page
    assert "60.0%" in page


def test_questions_are_escaped_in_the_page() -> None:
    document = built([record("x", {"typos": 0.0}, minimal={"typos": "<script>alert(1)</script>"})])
    page = html.render(document)
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page
