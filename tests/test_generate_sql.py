"""``ragbench generate`` from a database: sql cases whose ground truth comes from executing SQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_ragbench.datasets.generate.sql import CATEGORIES, generate_sql, humanize
from tests.conftest import REPO_ROOT
from tests.helpers import make_scores_db

NBA = REPO_ROOT / "test_cases" / "data" / "nba_stats.db"


def _ragbench(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_ragbench", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def test_sixty_cases_from_the_nba_database_pass_ragbench_verify(tmp_path: Path) -> None:
    out = tmp_path / "nba_generated.yaml"
    made = _ragbench(REPO_ROOT, "generate", f"--from={NBA}", "--n", "60", "--seed", "7",
                     f"--out={out}")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "exact cases verified: 60/60 (100.0%)" in made.stdout
    cases = yaml.safe_load(out.read_text())["cases"]
    assert len(cases) == 60
    assert {c["category"] for c in cases} == set(CATEGORIES)
    assert all(c["review"] == "draft" and c["provenance"]["generator"] == "sql"
               and c["provenance"]["seed"] == 7 for c in cases)
    assert len({c["expected_sql"] for c in cases}) == 60
    checked = _ragbench(tmp_path, "verify", "sql", str(out), "--db-url", f"sqlite:///{NBA}")
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr
    assert "60/60 passed, 100.0% success rate" in checked.stdout


def test_the_same_seed_gives_the_same_cases_and_another_seed_others() -> None:
    url = f"sqlite:///{NBA}"
    first = generate_sql(url, 24, seed=1).cases
    assert generate_sql(url, 24, seed=1).cases == first
    other = generate_sql(url, 24, seed=2).cases
    assert {c["expected_sql"] for c in other} != {c["expected_sql"] for c in first}


def test_the_ground_truth_is_what_the_database_answers(tmp_path: Path) -> None:
    import sqlite3

    generated = generate_sql(f"sqlite:///{NBA}", 30, seed=5)
    with sqlite3.connect(f"file:{NBA}?mode=ro", uri=True) as connection:
        for case in generated.cases:
            rows = connection.execute(case["expected_sql"]).fetchall()
            data = case["ground_truth_data"]
            records = [data] if isinstance(data, dict) else data
            assert [tuple(r.values()) for r in records] == [tuple(r) for r in rows] or (
                not case.get("order_matters")
                and sorted(map(repr, (tuple(r.values()) for r in records)))
                == sorted(map(repr, rows))), case["id"]


def test_a_ranking_with_a_tie_at_the_top_is_rejected_not_guessed(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "tied.db"
    with sqlite3.connect(path) as connection:
        connection.executescript("""
            CREATE TABLE cities (name TEXT UNIQUE NOT NULL, region TEXT, people INTEGER);
            INSERT INTO cities VALUES ('A', 'north', 10), ('B', 'north', 10), ('C', 'south', 5),
                                      ('D', 'south', 3), ('E', 'south', 3), ('F', 'north', 1);
        """)
    connection.close()
    generated = generate_sql(f"sqlite:///{path}", 30, seed=0)
    for case in generated.cases:
        if case["provenance"]["template"] == "highest_one":
            pytest.fail(f"a tied first place was kept: {case}")
    rejected = generated.accounting.rejected
    assert any("tie" in reason for reasons in rejected.values() for reason in reasons)


def test_the_database_is_opened_read_only_and_a_password_is_not_written(
        tmp_path: Path) -> None:
    path = make_scores_db(tmp_path / "scores.db")
    before = path.read_bytes()
    generated = generate_sql(f"sqlite:///{path}", 12, seed=0)
    assert path.read_bytes() == before
    assert generated.accounting.verified == generated.accounting.exact > 0
    made = _ragbench(tmp_path, "generate", "--from=postgresql://u:s3cret@127.0.0.1:1/x",
                     "--n", "3", f"--out={tmp_path / 'x.yaml'}")
    assert made.returncode == 2
    assert "s3cret" not in made.stdout + made.stderr


def test_column_names_become_words() -> None:
    assert humanize("three_pct") == "three percentage"
    assert humanize("playerName") == "player name"
