"""Verify every hybrid case: SQL data matches and the answer mentions its key entities.

Prints one line per case and ``N/M passed, X% success rate``; exits non-zero on a failure.
Usage: python verification/verify_all_hybrid_ground_truth.py [paths...]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pytest_ragbench.cli import main

if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parent.parent)  # the repository root: its ini applies
    sys.exit(main(["verify", "hybrid", *sys.argv[1:]]))
