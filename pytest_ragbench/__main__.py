"""``python -m pytest_ragbench`` runs the ``ragbench`` command."""

import sys

from pytest_ragbench.cli import main

sys.exit(main())
