"""``ragbench generate --kind hybrid``: exact SQL answers joined to what the documents say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from pytest_ragbench.cases.build import build_cases
from pytest_ragbench.cases.loaders import read_case_file
from pytest_ragbench.datasets.generate.hybrid import naming, sentences
from tests.conftest import REPO_ROOT

NBA = REPO_ROOT / "test_cases" / "data" / "nba_stats.db"
CORPUS = REPO_ROOT / "test_cases" / "corpus"


def _ragbench(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_ragbench", *args], cwd=cwd,
                          capture_output=True, text=True, check=False, timeout=600)


def test_hybrid_cases_from_the_nba_database_and_corpus_pass_ragbench_verify(
        tmp_path: Path) -> None:
    out = tmp_path / "hybrid_generated.yaml"
    made = _ragbench(REPO_ROOT, "generate", f"--from={NBA}", "--kind=hybrid",
                     f"--documents={CORPUS}", "--n", "12", "--seed", "7", f"--out={out}")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "exact cases verified: 12/12 (100.0%)" in made.stdout
    assert "model calls: 0" in made.stdout
    cases = yaml.safe_load(out.read_text())["cases"]
    assert len(cases) == 12 and build_cases(read_case_file(out)).invalid == []
    # one case per answer: a paraphrased SQL question with the same answer adds nothing
    assert len({str(sorted(c["ground_truth_data"].items())) for c in cases}) == 12
    for case in cases:
        assert case["kind"] == "hybrid" and case["review"] == "draft"
        named = case["provenance"]["named"]
        assert named in case["ground_truth_data"].values()
        # the question gives no answer away: it names only what it asked with
        asked = case["question"].split(" What do the documents say about ")[0]
        assert named in asked or named not in case["question"]
        for source in case["expected_sources"]:  # each source names it (a line may break it)
            text = " ".join((CORPUS / source).read_text(encoding="utf-8").split())
            assert named.lower() in text.lower()
        context = case["ground_truth_answer"].split(". ", 1)[1]
        assert named.lower() in context.lower()
        assert any(context in s for s in sentences(
            (CORPUS / case["expected_sources"][0]).read_text(encoding="utf-8")))
        assert [str(v) for v in case["ground_truth_data"].values()] == case["expected_facts"]
    checked = _ragbench(tmp_path, "verify", "hybrid", str(out), f"--db-url=sqlite:///{NBA}")
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr
    assert "12/12 passed, 100.0% success rate" in checked.stdout


def test_hybrid_needs_its_documents_and_a_database_gives_no_other_kind(tmp_path: Path) -> None:
    out = tmp_path / "x.yaml"
    alone = _ragbench(REPO_ROOT, "generate", f"--from={NBA}", "--kind=hybrid", f"--out={out}")
    assert alone.returncode == 2 and "--documents=FOLDER" in alone.stderr
    vector = _ragbench(REPO_ROOT, "generate", f"--from={NBA}", "--kind=vector", f"--out={out}")
    assert vector.returncode == 2 and "a database gives sql cases" in vector.stderr
    assert not out.exists()


def test_sentences_skip_headings_and_split_list_items() -> None:
    text = ("# Title\n\n**A bold heading line**\n\nFirst sentence about Jalen Brunson and the "
            "Knicks. Second one is long enough to keep as well.\n\n- Jalen Brunson (New York): "
            "scored 40 in game seven.\n- Tyrese Haliburton (Indiana): ran the offense all year.")
    said = sentences(text)
    assert said == ["First sentence about Jalen Brunson and the Knicks.",
                    "Second one is long enough to keep as well.",
                    "Jalen Brunson (New York): scored 40 in game seven.",
                    "Tyrese Haliburton (Indiana): ran the offense all year."]
    found = naming("jalen brunson", {"a.md": text, "b.md": "Nothing about him here at all."})
    assert found == [("a.md", "First sentence about Jalen Brunson and the Knicks.")]


def test_an_unreadable_document_is_named_on_stderr_and_the_rest_is_used(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    lakers = "team_los_angeles_lakers.md"
    (docs / lakers).write_text((CORPUS / lakers).read_text(encoding="utf-8"))
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not a pdf")
    out = tmp_path / "one.yaml"
    made = _ragbench(REPO_ROOT, "generate", f"--from={NBA}", "--kind=hybrid",
                     f"--documents={docs}", "--n", "1", "--seed", "7", f"--out={out}")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "skipped:" in made.stderr and "broken.pdf" in made.stderr
    [case] = yaml.safe_load(out.read_text())["cases"]
    assert case["expected_sources"] == [lakers]
