"""``ragbench review FILE``: the offline page that accepts, rejects and edits generated cases.

The page is driven in headless Chromium (tests/browser.py) with real key presses, saved
through the browser's own download (captured with DevTools' download behaviour), and the
saved file is read by the plugin's loader and run by pytest in a project.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_ragbench.cases.build import build_cases
from pytest_ragbench.cases.loaders import read_case_file
from pytest_ragbench.cli import main
from pytest_ragbench.datasets.generate.common import write_cases
from pytest_ragbench.datasets.generate.sql import generate_sql
from pytest_ragbench.datasets.review import script_json
from tests.browser import Page, browser, require_chromium
from tests.conftest import REPO_ROOT
from tests.project import RagbenchProject

HOSTILE = '</script><img src=x onerror="window.__pwned=1">Café – 東京 "quoted"\nsecond line'
# Values a naive JSON-as-YAML writer gets wrong under PyYAML (YAML 1.1).
AWKWARD = {"small": 1e-7, "large": 1e21, "count": 3, "ratio": 0.5, "whole_float": 2.0,
           "zero_padded": "007", "yes_word": "yes", "on_word": "on", "nothing": None, "flag": True,
           "breaks": "a\u2028b\u0085c\x7fd\te", "empty": [], "nested": {"k": [1, "2"]}}


def _key(page: Page, key: str, modifiers: int = 0) -> None:
    """A real key press (keyDown with its text, then keyUp)."""
    text = key if len(key) == 1 and not modifiers else ""
    page.send("Input.dispatchKeyEvent", type="keyDown", key=key, text=text,
              modifiers=modifiers,
              windowsVirtualKeyCode={"Enter": 13, "Escape": 27}.get(key, ord(key.upper()[0])))
    page.send("Input.dispatchKeyEvent", type="keyUp", key=key, modifiers=modifiers)


def _type_into(page: Page, field: str, text: str) -> None:
    """Select the current case's textarea for ``field`` and type ``text`` over it."""
    page.evaluate(f"(() => {{ const a = document.querySelector("
                  f"'.case.current textarea[data-field={field}]'); a.focus(); a.select(); }})()")
    page.send("Input.insertText", text=text)


def _downloaded(page: Page, folder: Path, timeout: float = 30,
                ignore: Path | None = None) -> Path:
    """The file of the download the page started (waits for the browser to finish it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = page.wait_event("Browser.downloadProgress", timeout)
        if event["params"]["state"] == "completed":
            break
        assert event["params"]["state"] != "canceled", "the download was canceled"
    files = [p for p in folder.iterdir()
             if not p.name.endswith(".crdownload") and p != ignore]
    assert len(files) == 1, files
    return files[0]


def _open_page(page: Page, html: Path, downloads: Path) -> None:
    page.send("Network.enable")
    page.send("Log.enable")  # CSP violations and script errors are logged
    page.send("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(downloads),
              eventsEnabled=True)
    page.open(html.as_uri())
    assert page.evaluate("document.body.dataset.ready") == "1"


def _requests(page: Page) -> list[str]:
    return [e["params"]["request"]["url"] for e in page.events
            if e["method"] == "Network.requestWillBeSent"]


def _problems(page: Page) -> list[dict[str, Any]]:
    """Script exceptions and console errors (a CSP violation is one) the page raised."""
    return [e for e in page.events if e["method"] == "Runtime.exceptionThrown"
            or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]


def _drafts_left(page: Page) -> int:
    return int(page.evaluate("document.getElementById('counter').dataset.draftsLeft"))


@pytest.fixture
def project(pytester: pytest.Pytester) -> RagbenchProject:
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    return project


def _draft_file(project: RagbenchProject) -> tuple[Path, list[dict[str, Any]], Any]:
    """Generated drafts (one with a wrong expected answer), a hostile draft, a hand-written one.

    Returns the file, its cases as written, and the true ground truth of the spoilt draft.
    """
    generated = generate_sql(f"sqlite:///{project.path / 'scores.db'}", 5, seed=1).cases
    assert len(generated) >= 3
    cases = copy.deepcopy(generated[:3])
    truth = cases[2]["ground_truth_data"]
    cases[2]["ground_truth_data"] = {"wrong": 0}  # a reviewer must correct this one
    cases.append({"id": "hostile", "kind": "sql", "question": HOSTILE,
                  "expected_sql": "SELECT COUNT(*) AS n FROM teams",
                  "ground_truth_data": {"n": 3}, "notes": AWKWARD, "review": "draft",
                  "provenance": {"generator": "sql", "seed": 1, "tables": ["teams"]}})
    cases.append({"id": "hand_written", "kind": "sql", "question": "Which city do the Heat "
                  "play in?", "expected_sql": "SELECT city FROM teams WHERE name = 'Heat'",
                  "ground_truth_data": {"city": "Miami"}})
    path = project.cases_dir() / "generated.yaml"
    write_cases(path, cases, "Generated by: a test\nsecond header line")
    return path, cases, truth


def test_review_accepts_rejects_and_edits_drafts_and_saves_a_file_pytest_runs(
        project: RagbenchProject, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chromium = require_chromium()
    path, cases, truth = _draft_file(project)
    accepted, rejected, corrected = (c["id"] for c in cases[:3])
    assert main(["review", str(path)]) == 0
    html = path.with_name("generated.yaml.review.html")  # the default: beside the file
    assert "5 cases, 4 drafts" in capsys.readouterr().out
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with browser(chromium) as page:
        _open_page(page, html, downloads)
        assert _drafts_left(page) == 4
        _key(page, "a")  # accept the first; the page moves on to the next case
        _key(page, "r")  # reject the second
        _key(page, "e")  # edit the third: its question and its wrong expected answer
        _type_into(page, "question", "Which team has the fewest points? (reviewed)")
        _type_into(page, "ground_truth_data", "{not json")
        _key(page, "Enter", modifiers=2)  # Ctrl+Enter: refused, and what was typed stays
        assert "ground_truth_data: not valid JSON" in page.evaluate(
            "document.querySelector('.case.current .editor .error').textContent")
        _type_into(page, "ground_truth_data", json.dumps(truth))
        _key(page, "Enter", modifiers=2)  # applied now
        assert page.evaluate("document.querySelector('.case.current .edited').textContent") \
            == "edited: question, ground_truth_data"
        _key(page, "a")
        _key(page, "j")  # leave the hostile draft as it is
        assert _drafts_left(page) == 1
        # The hostile question is shown as text: no image element, no script run.
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.evaluate(
            "[...document.querySelectorAll('dd[data-field=question] pre')]"
            f".some(p => p.textContent === {json.dumps(HOSTILE)})") is True
        _key(page, "s", modifiers=2)  # Ctrl+S saves: a download of the reviewed file
        saved = _downloaded(page, downloads)
        requests = _requests(page)
        assert not _problems(page)
    # Nothing was fetched: the page itself, and the blob of the download, only.
    assert "default-src 'none'" in html.read_text(encoding="utf-8").split("</head>")[0]
    assert requests[0] == html.as_uri()
    assert all(url == html.as_uri() or url.startswith("blob:") for url in requests), requests

    assert saved.name == "generated.yaml"
    text = saved.read_text(encoding="utf-8")
    assert text.startswith("# Generated by: a test\n# second header line\n")
    records = read_case_file(saved)
    built = build_cases(records)
    assert not built.errors, built.errors
    by_id = {r.data["id"]: r.data for r in records.records}
    assert list(by_id) == [c["id"] for c in cases]
    assert by_id[accepted]["review"] == "accepted"
    assert by_id[rejected]["review"] == "rejected"
    assert by_id[corrected]["review"] == "accepted"
    assert by_id[corrected]["question"] == "Which team has the fewest points? (reviewed)"
    assert by_id[corrected]["ground_truth_data"] == truth
    assert by_id[corrected]["provenance"]["edited"] == ["question", "ground_truth_data"]
    for case in cases[:3]:  # every other field as generated, provenance kept and stamped
        got = by_id[case["id"]]
        stamped = got["provenance"].pop("reviewed_at")
        assert stamped.endswith("Z") and stamped[:4].isdigit()
        got["provenance"].pop("edited", None)
        unchanged = {k for k in case if k not in ("review", "question", "ground_truth_data")}
        assert {k: got[k] for k in unchanged} == {k: case[k] for k in unchanged}
    # Untouched cases are exactly as written: unicode, quotes, newlines, numbers and strings.
    assert by_id["hostile"] == cases[3]
    assert isinstance(by_id["hostile"]["notes"]["whole_float"], float)  # 2.0, not 2
    assert by_id["hand_written"] == cases[4]
    assert "review" not in by_id["hand_written"]

    path.write_text(text, encoding="utf-8")  # the reviewed file in place of the drafts
    html.unlink()
    result = project.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"*[[]{accepted}[]]*PASSED*", f"*[[]{corrected}[]]*PASSED*",
                                 "*[[]hand_written[]]*PASSED*"])
    assert f"[{rejected}]" not in result.stdout.str()
    assert "[hostile]" not in result.stdout.str()
    with_drafts = project.runpytest("-p", "no:cacheprovider", "-v", "--ragbench-drafts")
    with_drafts.assert_outcomes(passed=4)
    with_drafts.stdout.fnmatch_lines(["*[[]hostile[]]*PASSED*"])
    assert f"[{rejected}]" not in with_drafts.stdout.str()


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".yml"])
def test_json_lines_json_and_yaml_with_defaults_are_saved_in_their_own_format(
        project: RagbenchProject, tmp_path: Path, suffix: str) -> None:
    chromium = require_chromium()
    generated = generate_sql(f"sqlite:///{project.path / 'scores.db'}", 5, seed=1).cases[:3]
    path = project.cases_dir() / f"drafts{suffix}"
    if suffix == ".jsonl":
        write_cases(path, generated)
    elif suffix == ".json":
        path.write_text(json.dumps(generated, indent=1), encoding="utf-8")
    else:  # kind and review given once for the file, as file-level defaults
        for case in generated:
            del case["kind"], case["review"]
        path.write_text(yaml.safe_dump({"kind": "sql", "review": "draft", "cases": generated},
                                       sort_keys=False), encoding="utf-8")
    page_path = tmp_path / "page.html"
    assert main(["review", str(path), f"--out={page_path}"]) == 0
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with browser(chromium) as page:
        _open_page(page, page_path, downloads)
        # Buttons work as the keys do; n jumps to the next draft, u undoes a decision.
        page.evaluate("document.querySelector('.case[data-index=\"1\"] "
                      "button[data-action=reject]').click()")
        assert page.evaluate("document.querySelector('.case.current').dataset.index") == "2"
        _key(page, "a")
        _key(page, "u")  # the third goes back to draft
        _key(page, "n")  # the next draft after it: the first
        assert page.evaluate("document.querySelector('.case.current').dataset.index") == "0"
        _key(page, "a")
        assert _drafts_left(page) == 1
        _key(page, "e")  # an edit given up with Esc changes nothing
        _type_into(page, "question", "given up")
        _key(page, "Escape")
        assert page.evaluate("document.querySelectorAll('.editor').length") == 0
        page.evaluate("document.getElementById('save').click()")
        saved = _downloaded(page, downloads)
    text = saved.read_text(encoding="utf-8")
    if suffix == ".jsonl":
        records = [json.loads(line) for line in text.splitlines()]
        assert len(records) == 3
    elif suffix == ".json":
        records = json.loads(text)
    else:
        document = yaml.safe_load(text)
        assert {k: v for k, v in document.items() if k != "cases"} == {
            "kind": "sql", "review": "draft"}
        records = document["cases"]
        assert "review" not in records[2]  # still a draft through the file's default
    assert [r.get("review") for r in records[:2]] == ["accepted", "rejected"]
    assert [r["question"] for r in records] == [c["question"] for c in generated]
    assert "reviewed_at" not in records[2]["provenance"]
    built = build_cases(read_case_file(saved))
    assert not built.errors
    assert [c.review for c in built.cases] == ["accepted", "rejected", "draft"]


@pytest.mark.parametrize("name", ["nba_sql.yaml", "nba_hybrid.yaml", "nba_vector.yaml",
                                  "memory_scenarios.yaml", "ragas_samples.jsonl"])
def test_saving_without_a_decision_gives_back_the_bundled_case_file(
        tmp_path: Path, name: str) -> None:
    chromium = require_chromium()
    original = REPO_ROOT / "test_cases" / name
    page_path = tmp_path / "page.html"
    assert main(["review", str(original), f"--out={page_path}"]) == 0
    with browser(chromium) as page:
        _open_page(page, page_path, tmp_path)
        page.evaluate("document.getElementById('save').click()")
        saved = _downloaded(page, tmp_path, ignore=page_path)
        assert not _problems(page)
    if original.suffix == ".jsonl":
        before = [json.loads(line) for line in original.read_text().splitlines() if line]
        after = [json.loads(line) for line in saved.read_text().splitlines()]
    else:
        before, after = yaml.safe_load(original.read_text()), yaml.safe_load(saved.read_text())
        before = before if isinstance(before, dict) else {"cases": before}
    # Equal as data, and as JSON text too: 2.0 stays a float, "1" stays a string.
    assert json.dumps(after, sort_keys=True) == json.dumps(before, sort_keys=True)


def test_a_bad_case_file_is_refused_naming_file_line_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "drafts.yaml"
    path.write_text("cases:\n- id: fine\n  kind: sql\n  question: q\n  expected_sql: SELECT 1\n"
                    "  ground_truth_data: {a: 1}\n- id: broken\n  kind: sql\n  question: q\n"
                    "  review: maybe\n  expected_sql: SELECT 1\n  ground_truth_data: {a: 1}\n",
                    encoding="utf-8")
    assert main(["review", str(path)]) == 2
    error = capsys.readouterr().err
    assert f"{path}:10: field 'review'" in error
    assert not path.with_name("drafts.yaml.review.html").exists()
    assert main(["review", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read file" in capsys.readouterr().err


def test_a_value_the_page_would_change_is_refused_naming_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "drafts.yaml"
    path.write_text("cases:\n- id: dated\n  kind: sql\n  question: q\n  expected_sql: SELECT 1\n"
                    "  ground_truth_data: {day: 2024-01-31}\n", encoding="utf-8")
    assert main(["review", str(path)]) == 2
    assert f"{path}:6: field 'ground_truth_data': a date value" in capsys.readouterr().err
    path.write_text("cases:\n- id: pivot\n  kind: sql\n  question: q\n  expected_sql: SELECT 1\n"
                    "  ground_truth_data: {team: Heat, '2023': 5}\n", encoding="utf-8")
    assert main(["review", str(path)]) == 2
    assert f"{path}:6: field 'ground_truth_data': keys 2023 would be moved first" \
        in capsys.readouterr().err
    path.write_text(path.read_text().replace("{team: Heat, '2023': 5}", "{'2023': 5, team: x}"))
    assert main(["review", str(path)]) == 0  # already in the order a browser keeps


def test_case_text_cannot_end_the_data_block() -> None:
    value = {"q": "</script><script>alert(1)</script><!-- & \u2028"}
    embedded = script_json(value)
    assert "<" not in embedded and ">" not in embedded and "&" not in embedded
    assert json.loads(embedded) == value
    assert yaml.safe_load(embedded) == value
