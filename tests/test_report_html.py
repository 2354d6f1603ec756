"""``report.html``: self-contained, verdict first, every item; driven in headless Chromium.

The page comes from real sessions: SQL ground-truth items against SQLite (one case has a
wrong ground truth), the toy kind answered by a conftest.py system under two named
systems, aggregate gates (one missed) and a comparison with a saved baseline. Chromium
(Debian's, headless) is driven through the DevTools protocol: the test selects the
outcome filter, opens the known failing item and checks that its evidence is visible.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image as mpimage

from tests.browser import browser, require_chromium
from tests.helpers import SQL_CASES_ONE_WRONG
from tests.project import RagbenchProject
from tests.toy_project import make_toy_project

GATES = '[tool.ragbench.gates]\n"toy.token_f1" = 0.99\n"toy.exact_match" = 0.1\n'
FAILING = "test_cases/scores.yaml::sql_ground_truth[heat]"


@pytest.fixture(scope="module")
def report_page(html_project: RagbenchProject) -> Path:
    return html_project.report_dir() / "report.html"


@pytest.fixture(scope="module")
def html_project(tmp_path_factory: pytest.TempPathFactory) -> RagbenchProject:
    """One project for the module: two runs (a baseline, then a worse one)."""
    runner = _Runner(tmp_path_factory.mktemp("html"))
    project = make_toy_project(runner, 30,  # type: ignore[arg-type]  # a folder, not pytester
                               ini="[pytest]\nragbench_db_url = sqlite:///scores.db\n",
                               pyproject=GATES)
    project.scores_db()
    project.cases("scores.yaml", SQL_CASES_ONE_WRONG)
    runner.run("--ragbench", "--ragbench-systems=exact,terse", "--ragbench-save=a")
    (project.path / "degrade.txt").write_text("x")
    runner.run("--ragbench", "--ragbench-systems=exact,terse", "--ragbench-compare=a",
               "--ragbench-fail-on=regression")
    return project


class _Runner:
    """Enough of ``pytester`` for a module-scoped project (pytester is function-scoped)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def makeconftest(self, text: str) -> None:
        (self.path / "conftest.py").write_text(text)

    def mkdir(self, name: str) -> Path:
        (self.path / name).mkdir()
        return self.path / name

    def makefile(self, ext: str, **files: str) -> None:
        for name, text in files.items():
            (self.path / f"{name}{ext}").write_text(text)

    def makeini(self, text: str) -> None:
        (self.path / "pytest.ini").write_text(text)

    def run(self, *args: str) -> None:
        import subprocess
        import sys

        subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                       cwd=self.path, capture_output=True, text=True, timeout=600, check=False)


def _images(page: str) -> list[bytes]:
    return [base64.b64decode(data)
            for data in re.findall(r'<img[^>]* src="data:image/png;base64,([^"]+)"', page)]


def _not_blank(png: bytes) -> bool:
    pixels = mpimage.imread(io.BytesIO(png))[..., :3]
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    return float(pixels.std()) > 0.02 and len(colours) > 20


def _items_json(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="ragbench-items">(.*?)</script>',
                      page, re.S)
    assert match
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def test_page_is_self_contained_and_reads_from_the_verdict_down(
        html_project: RagbenchProject) -> None:
    page = html_project.html()
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert not re.search(r"<script[^>]*\ssrc=", page)
    references = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page)
    assert references and all(r.startswith(("#", "data:image/png;base64,")) for r in references)
    order = [page.index(anchor) for anchor in ('id="verdict"', "id=gates", "id=results",
                                               "id=comparisons", "id=plots", "id=items",
                                               "id=components")]
    assert order == sorted(order)
    results = html_project.results()
    missed = sum(g["passed"] is False for g in results["gates"])
    regressions = len(results["regressions"])
    assert missed >= 2 and regressions >= 1
    verdict = page[page.index('id="verdict"'):page.index("id=gates")]
    assert "FAILED" in verdict and f"{missed} gates missed" in verdict
    assert f"{regressions} regression" in verdict
    assert "did not pass" in verdict and "#items?outcome=notpassed" in verdict
    assert "gate toy.token_f1 [system=exact] &gt;= 0.99: MISSED" in page
    assert "toy: answers worse (" in page  # which component moved
    # 0/1 metrics as proportions with their interval; no histogram of them
    assert re.search(r"\d+/30 = \d+\.\d%", page)
    assert "toy.exact_match" not in "".join(re.findall(r"toy\.\w+(?= by)", page))
    images = _images(page)
    # token_f1's histogram, intervals per system and per category, one delta plot per
    # comparison (exact_vs_terse, exact_vs_baseline, terse_vs_baseline, current_vs_baseline)
    assert len(images) == 1 + 2 + 4
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") and _not_blank(png) for png in images)
    # every item is in the page, with what the system answered
    data = _items_json(page)
    nodeids = {item["nodeid"] for item in html_project.items()}
    assert {item["nodeid"] for item in data["items"]} == nodeids
    toy = next(i for i in data["items"] if i["nodeid"].endswith("toy[exact-q000]"))
    assert toy["answers"][0]["question"].startswith("question 000 about")
    assert toy["answers"][0]["service_s"] is not None
    metrics = {row[0]: row for row in toy["metrics"]}
    assert metrics["token_f1"][2:] == [None, None, ">=", None]  # no threshold set here
    assert metrics["faithfulness"][1] is None and "no judge" in metrics["faithfulness"][5]
    assert data["systems"] == ["exact", "terse"] and data["kinds"] == ["sql_ground_truth",
                                                                       "toy"]


CLICK_OUTCOME = """(() => {
  const select = document.getElementById('ragbench-outcome');
  select.value = 'notpassed';
  select.dispatchEvent(new Event('change'));
  return [...document.querySelectorAll('#ragbench-list details.item')].map(d => d.dataset.nodeid);
})()"""
OPEN_ITEM = """((nodeid) => {
  const row = [...document.querySelectorAll('#ragbench-list details.item')]
    .find(d => d.dataset.nodeid === nodeid);
  row.querySelector('summary').click();
  row.scrollIntoView();
  const evidence = row.querySelector('.evidence-failure');
  const rest = [...row.querySelectorAll('.evidence .text')];
  return {open: row.open, why: evidence.innerText, whyVisible: evidence.checkVisibility(),
          evidence: rest.map(e => e.innerText),
          evidenceVisible: rest.every(e => e.checkVisibility()),
          text: row.innerText};
})"""


def test_chromium_shows_the_verdict_first_and_a_failing_items_evidence(
        html_project: RagbenchProject, report_page: Path, tmp_path: Path) -> None:
    chromium = require_chromium()
    records = html_project.items()
    not_passed = {r["nodeid"] for r in records if r["status"] in ("failed", "error", "lost")}
    assert FAILING in not_passed
    with browser(chromium) as page:
        page.open(report_page.as_uri())
        assert page.evaluate("document.body.dataset.ready") is not None  # the script ran
        top = page.evaluate("(() => { const v = document.getElementById('verdict');"
                            " return [v.getBoundingClientRect().top, v.innerText]; })()")
        assert top[0] < 200 and top[1].startswith("FAILED")
        assert page.evaluate("document.querySelectorAll('#ragbench-list details.item').length") \
            == min(100, len(records))
        shown = page.evaluate(CLICK_OUTCOME)
        assert set(shown) == not_passed
        opened = page.evaluate(f"{OPEN_ITEM}({json.dumps(FAILING)})")
        assert opened["open"] and opened["whyVisible"] and opened["evidenceVisible"]
        assert "the result differs from ground_truth_data" in opened["why"]
        assert any("points" in text for text in opened["evidence"])
        for expected in ("How many points did the Heat score",
                         "SELECT points FROM scores WHERE team = 'Heat'",
                         "test_cases/scores.yaml:", "match"):
            assert expected in opened["text"]
        shot = page.screenshot(tmp_path / "item.png", 1280, 1400)
        assert _not_blank(shot.read_bytes())
        decoded = page.evaluate("[...document.images].filter(i => i.complete && "
                                "i.naturalWidth > 0).length")
        assert decoded == len(_images(report_page.read_text(encoding="utf-8")))


def test_search_and_links_to_filtered_items(report_page: Path) -> None:
    chromium = require_chromium()
    lakers = "test_cases/scores.yaml::sql_ground_truth[lakers]"
    with browser(chromium) as page:
        page.open(report_page.as_uri() + "#items?q=lakers&open=" + lakers)
        rows = page.evaluate("[...document.querySelectorAll('#ragbench-list details.item')]"
                             ".map(d => [d.dataset.nodeid, d.open])")
        assert rows == [[lakers, True]]
        count = page.evaluate("document.getElementById('ragbench-count').innerText")
        assert count.startswith("1 of ")
        # the verdict's link filters to the items that did not pass
        page.evaluate("document.querySelector('#verdict a[href=\"#items?outcome=notpassed\"]')"
                      ".click()")
        page.evaluate("new Promise(r => setTimeout(r, 100))")
        assert page.evaluate("document.getElementById('ragbench-outcome').value") == "notpassed"
        statuses = page.evaluate("[...document.querySelectorAll('#ragbench-list .badge')]"
                                 ".map(b => b.innerText.toLowerCase())")
        assert statuses and set(statuses) <= {"failed", "error", "lost"}
