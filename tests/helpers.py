"""Small helpers shared by the project's pytester tests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

XDIST_MODES = ((), ("-n", "2"), ("-p", "no:xdist"))

# Two sql cases on make_scores_db's data: the Lakers' ground truth is right, the Heat's wrong.
SQL_CASES_ONE_WRONG = """
kind: sql
cases:
  - id: lakers
    question: How many points did the Lakers score
    category: lookup
    expected_sql: SELECT points FROM scores WHERE team = 'Lakers'
    ground_truth_data: {points: 9500}
  - id: heat
    question: How many points did the Heat score
    category: lookup
    expected_sql: SELECT points FROM scores WHERE team = 'Heat'
    ground_truth_data: {points: 1}
"""


def four_documents() -> list:
    """Four short documents on unrelated topics (Lakers, Eiffel Tower, Python, coffee)."""
    from pytest_ragbench.systems.protocols import Document

    topics = [
        ("Lakers", "The Lakers won the 2020 NBA title. They beat the Miami Heat in six games."),
        ("Tower", "The Eiffel Tower is in Paris. It was completed in 1889 for a world fair."),
        ("Python", "Python was created by Guido van Rossum. It first appeared in 1991."),
        ("Coffee", "Espresso is made by forcing hot water through finely ground coffee."),
    ]
    return [Document(f"d{i}", text, {"title": title, "source": f"{title.lower()}.md"})
            for i, (title, text) in enumerate(topics)]


def failure_section(output: str, title: str) -> str:
    """The text under one ``___ title ___`` header of pytest's FAILURES block."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("_") and f" {title} " in line)
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith(("___", "===="))), len(lines))
    return "\n".join(lines[start + 1:end])


def ragbench_section(output: str) -> list[str]:
    """The first table of the ``ragbench`` terminal summary section (after the coverage line)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "= ragbench =" in line)
    if start + 1 < len(lines) and lines[start + 1].startswith("checked: "):
        start = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), start)
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].startswith("=") or not lines[i].strip()
                or (" in " in lines[i] and lines[i].rstrip().endswith("s"))), len(lines))
    return lines[start + 1:end]


def make_scores_db(path: Path) -> Path:
    """A tiny SQLite database: teams(name, city) and scores(team, season, points, pct)."""
    with sqlite3.connect(path) as connection:
        connection.executescript("""
            CREATE TABLE teams (name TEXT PRIMARY KEY, city TEXT);
            CREATE TABLE scores (team TEXT, season INTEGER, points INTEGER, pct REAL, note TEXT);
            INSERT INTO teams VALUES ('Lakers', 'Los Angeles'), ('Celtics', 'Boston'),
                                     ('Heat', 'Miami');
            INSERT INTO scores VALUES ('Lakers', 2023, 9500, 47.512, NULL),
                                      ('Celtics', 2023, 9900, 48.25, ''),
                                      ('Heat', 2023, 8900, 45.0, 'rebuild');
        """)
    connection.close()
    return path


def as_user(command: list[str]) -> list[str]:
    """``command`` run as an ordinary user would: without root's power to ignore file modes.

    Under root, setpriv drops the capabilities that override permissions (the process
    stays uid 0, owner of the test's files); an ordinary user runs the command as it is.
    """
    import os
    import shutil

    import pytest

    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps=-all",
            "--", *command]
