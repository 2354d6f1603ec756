"""Verify every SQL case's expected SQL against its database (seed 002's script).

Prints one line per case and ``N/M passed, X% success rate``; exits non-zero on a failure.
Same code as ``pytest -k sql_ground_truth`` and ``ragbench verify sql``.
Usage: python verification/verify_all_sql_ground_truth.py [paths...]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pytest_ragbench.cli import main

if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parent.parent)  # the repository root: its ini applies
    sys.exit(main(["verify", "sql", *sys.argv[1:]]))
