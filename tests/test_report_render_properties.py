"""The renderers never raise, whatever the records (hypothesis), and clip at rounding edges.

Records with constant values, n = 1, floats a rounding step from their interval's bounds,
unscored-only metrics, kinds without metrics, unicode and huge strings go through the real
document builder, then through the terminal section, report.html and its plots. A part
that fails would be named in ``problems``: it must stay empty.
"""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.render import html, plots, terminal
from pytest_ragbench.results import document
from pytest_ragbench.results.gates import parse_gates
from pytest_ragbench.results.records import ItemRecord

PROPERTY = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
METRICS = ("token_f1", "exact_match", "id_context_precision", "semantic_similarity",
           "faithfulness", "total_time_ms", "my_own_metric", "nDCG@10")
EDGES = (0.0, 1.0, 0.2, 0.19999999999999998, 0.20000000000000004, 0.1 + 0.2, 5e-324,
         0.9999999999999999, 1e-12)
STRANGE = ("</script><script>throw 1</script>", "naïve – 日本語 🎉 עברית", "\u2028\u2029",
           "<b>&amp;</b>", "x" * 60_000, "line\nbreak\ttab", "")

texts = st.one_of(st.sampled_from(STRANGE),
                  st.text(st.characters(exclude_categories=("Cs",)), max_size=30))
values = st.one_of(st.sampled_from(EDGES), st.floats(0, 1, allow_nan=False),
                   st.floats(0, 5000, allow_nan=False))


@st.composite
def record_sets(draw: st.DrawFn) -> tuple[list[ItemRecord], tuple[str, ...]]:
    """Records of a few kinds; the same value everywhere with some luck."""
    systems = draw(st.sampled_from(((), ("a", "b"))))
    constant = draw(st.one_of(st.none(), st.sampled_from(EDGES)))
    kinds = draw(st.lists(st.sampled_from(("vector", "sql", "ragas", "empty")), min_size=1,
                          max_size=3, unique=True))
    records = []
    for kind in kinds:
        n = draw(st.integers(1, 6))
        metrics = [] if kind == "empty" else draw(st.lists(st.sampled_from(METRICS),
                                                          min_size=1, max_size=4, unique=True))
        only_unscored = draw(st.booleans())
        for index in range(n):
            for system in systems or (None,):
                scored: dict[str, float] = {}
                unscored: dict[str, str] = {}
                for metric in metrics:
                    if only_unscored and metric == metrics[0]:
                        unscored[metric] = draw(texts)
                    else:
                        value = constant if constant is not None else draw(values)
                        scored[metric] = 1.0 if metric == "exact_match" and value > 0.5 else \
                            0.0 if metric == "exact_match" else value
                label = f"{system}-c{index}" if system else f"c{index}"
                status = draw(st.sampled_from(("passed", "failed", "error", "lost", "warning")))
                records.append(ItemRecord(
                    nodeid=f"cases/{kind}.yaml::{kind}[{label}]", kind=kind, case_kind=kind,
                    case_id=f"c{index}", file=f"cases/{kind}.yaml", line=index + 1,
                    status=status, system=system,
                    fields={"category": draw(st.sampled_from(("x", "日本", "y"))),
                            "difficulty": draw(st.one_of(st.none(), texts))},
                    metrics=scored, unscored=unscored,
                    thresholds={m: 0.2 for m in metrics if draw(st.booleans())},
                    failures=[draw(texts)] if status == "failed" else [],
                    error=draw(texts) if status == "error" else None,
                    evidence={"question": draw(texts), "judge_reply": draw(texts),
                              "retrieved": draw(texts)},
                    answers=[{"question": draw(texts), "text": draw(texts), "sql": None,
                              "contexts": [{"rank": 1, "id": draw(texts), "source": None,
                                            "score": draw(values), "text": draw(texts)}],
                              "n_contexts": 1, "service_s": 0.01, "latency_s": None,
                              "cached": False}]))
    return records, systems


def nudge_to_edges(doc: dict[str, Any]) -> None:
    """Put every mean a rounding step outside its interval, as float sums can."""
    def cells(section: Any) -> list[dict[str, Any]]:
        found = []
        if isinstance(section, dict):
            if "mean" in section and "ci_low" in section:
                found.append(section)
            for value in section.values():
                found += cells(value)
        return found

    for cell in cells(doc["metrics"]) + cells(doc["breakdowns"]):
        if cell.get("mean") is not None and cell.get("ci_low") is not None:
            cell["mean"] = math.nextafter(cell["ci_low"], -math.inf)
            cell["ci_high"] = cell["ci_low"]
    for kinds in doc["comparisons"].values():
        for metrics in kinds.values():
            for c in metrics.values():
                if c.get("ci_low") is not None:  # no interval: nothing to nudge
                    c["delta"] = math.nextafter(c["ci_low"], -math.inf)


class _Checker(HTMLParser):
    """Collects the JSON of the item list and every external reference."""

    def __init__(self) -> None:
        super().__init__()
        self.in_items = False
        self.items_json = ""
        self.references: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.in_items = tag == "script" and found.get("id") == "ragbench-items"
        for name in ("src", "href"):
            if found.get(name):
                self.references.append(str(found[name]))

    def handle_data(self, data: str) -> None:
        if self.in_items:
            self.items_json += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.in_items = False


def render_everything(doc: dict[str, Any]) -> str:
    problems: list[str] = []
    lines = terminal.render(doc, [], None, problems=problems)
    page = html.render(doc, problems)
    assert problems == []
    assert lines and page.startswith("<!DOCTYPE html>")
    checker = _Checker()
    checker.feed(page)
    assert all(r.startswith(("#", "data:image/png;base64,")) for r in checker.references)
    data = json.loads(checker.items_json)
    assert [i["nodeid"] for i in data["items"]] == [i["nodeid"] for i in doc["items"]]
    return page


@PROPERTY
@given(record_sets(), st.booleans(), st.booleans())
def test_renderers_never_raise(data: tuple[list[ItemRecord], tuple[str, ...]], edges: bool,
                               ci_lower: bool) -> None:
    records, systems = data
    metrics = sorted({(r.kind, m) for r in records for m in (*r.metrics, *r.unscored)})
    gates = parse_gates({f"{k}.{m}": 0.5 for k, m in metrics[:3]})
    settings_ = RagbenchConfig(rootpath=Path("."), systems=systems,
                               gate="ci-lower" if ci_lower else "mean")
    doc = document.build(records, settings_, run={"id": "r", "time": "t"},
                         components={"system": STRANGE[1]}, gate_list=gates)
    if edges:
        nudge_to_edges(doc)
    render_everything(doc)


def test_a_mean_a_rounding_step_under_its_interval_draws_a_zero_length_bar() -> None:
    """The bug that killed a session: mean 0.19999999999999998 under ci_low 0.2.

    matplotlib raised ``'xerr' must not contain negative values``.
    """
    lower, upper = plots.clipped_errors(0.19999999999999998, 0.2, 0.2)
    assert lower == 0.0 and 0.0 <= upper < 1e-15
    cell = {"n": 5, "mean": 0.19999999999999998, "ci_low": 0.2, "ci_high": 0.2}
    image = plots.interval_plot("vector", "category", {"id_context_precision": {"a": cell,
                                                                               "b": cell}}, {})
    assert image.startswith('<img alt="plot" src="data:image/png;base64,')


def test_constant_data_is_drawn_on_the_natural_range() -> None:
    assert plots.metric_range("id_context_precision", [0.2, 0.2]) == (0.0, 1.0)
    assert plots.metric_range("semantic_similarity", [0.4]) == (0.0, 1.0)  # [-1, 1] in theory
    assert plots.metric_range("semantic_similarity", [-0.3]) == (-1.0, 1.0)
    low, high = plots.metric_range("total_time_ms", [120.0, 120.0])
    assert low == 0.0 and high > 120.0
    assert plots.metric_range("my_own_metric", [7.0, 7.0])[1] > 7.0
    # 0/1 and constant metrics get no histogram
    values = {("v", "exact_match"): {"": [0.0, 1.0, 1.0]}, ("v", "p"): {"": [0.2, 0.2]},
              ("v", "token_f1"): {"": [0.1, 0.7]}}
    assert plots.continuous_metrics(values, "v", ["exact_match", "p", "token_f1"]) == \
        ["token_f1"]


@pytest.mark.parametrize("doc", [
    {},
    {"metrics": {"vector": {}}, "counts": {"vector": {"all": {"items": 0}}}, "items": []},
    {"items": [{"nodeid": "x", "metrics": {"m": None}}], "systems": ["a", "b"],
     "metrics": {"k": {"m": {"n": 0, "n_unscored": 3, "mean": None, "ci_low": None,
                             "ci_high": None, "systems": {"a": {"n": 0}}}}}},
])
def test_a_sparse_document_still_renders(doc: dict[str, Any]) -> None:
    problems: list[str] = []
    page = html.render(doc, problems)
    assert problems == [] and "pytest-ragbench report" in page
    assert terminal.render(doc, [], None, problems=problems) is not None
    assert problems == []


def test_keys_from_other_parts_of_the_plugin_are_shown_when_present() -> None:
    """ci_method, pass-rate intervals, n too small, calibration, run.status, judge unscored."""
    cell = {"n": 1, "n_unscored": 0, "mean": 1.0, "ci_low": None, "ci_high": None,
            "ci_method": None, "std": None, "threshold": 0.5, "pass_rate": 1.0,
            "pass_rate_ci_low": None, "pass_rate_ci_high": None, "direction": "higher",
            "unscored_reasons": {}}
    judged = {"n": 6, "n_unscored": 4, "mean": 0.5, "ci_low": 0.2, "ci_high": 0.8,
              "ci_method": "bca", "std": 0.3, "threshold": None, "pass_rate": 0.5,
              "pass_rate_ci_low": 0.19, "pass_rate_ci_high": 0.81, "direction": "higher",
              "unscored_reasons": {"the judge's reply was not JSON": 4}}
    doc = {"run": {"id": "r", "status": "interrupted", "items_not_run": 12},
           "config": {"judge_url": "http://127.0.0.1:9/v1"},
           "counts": {"vector": {"all": {"items": 7, "passed": 7}}},
           "metrics": {"vector": {"answered": cell, "faithfulness": judged}},
           "failures": ["judge: vector.faithfulness: 4 of 10 items unscored (40%), more than "
                        "--ragbench-max-unscored 0.2"],
           "judge_calibration": {"vector": {"faithfulness": {
               "n_labeled": 30, "n_judged": 10, "judge_mean": 0.61, "human_mean": 0.55,
               "agreement": 0.8, "agreement_method": None, "kappa": 0.52, "bias": 0.06,
               "bias_ci_low": -0.02,
               "bias_ci_high": 0.14, "ppi_mean": 0.56, "ppi_ci_low": 0.49,
               "ppi_ci_high": 0.63}}},
           "items": []}
    problems: list[str] = []
    page = html.render(doc, problems)
    assert problems == []
    assert "Partial run: the run was interrupted (12 items not run)" in page
    assert re.search(r'class="verdict interrupted"', page)
    assert "n too small" in page
    assert "50.0% [19.0%, 81.0%]" in page  # pass rate with its interval
    assert "<span class=note>bca</span>" in page
    assert "Calibration against human labels" in page and "0.560 [0.490, 0.630]" in page
    assert "the judge&#x27;s reply was not JSON" in page
    assert "4 of 10 items unscored" in page  # the failures line is a reason of the verdict
    assert page.index('id="verdict"') < page.index("id=judge") < page.index("id=results")
    lines = terminal.render(doc, [], None)
    assert lines[0] == "PARTIAL RUN: the run was interrupted (12 items not run): the " \
                       "numbers cover the finished items only"
    assert lines[1] == "  continue it with --ragbench-resume: the finished items are kept, not " \
                       "run again, and the report then covers the whole run"
    assert any("n too small" in line for line in lines)
