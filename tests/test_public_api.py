"""The public API: ``from pytest_ragbench import ...``, imported lazily, and the README uses it."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys

import pytest

import pytest_ragbench
from tests.conftest import REPO_ROOT


def test_every_public_name_resolves_to_the_object_of_its_module() -> None:
    assert pytest_ragbench.__all__ == sorted(pytest_ragbench._PUBLIC)
    # the modules as sys.modules holds them now (pytester's in-process runs of other tests
    # on this worker may have imported them afresh; a package attribute can be the older one)
    kinds = importlib.import_module("pytest_ragbench.kinds")
    stats = importlib.import_module("pytest_ragbench.stats")
    sections = importlib.import_module("pytest_ragbench.results.sections")

    assert pytest_ragbench.ItemKind is kinds.ItemKind
    assert pytest_ragbench.bootstrap_ci is stats.bootstrap_ci
    assert pytest_ragbench.ReportSection is sections.ReportSection
    for name in pytest_ragbench.__all__:
        assert getattr(pytest_ragbench, name) is not None, name
    assert set(pytest_ragbench.__all__) <= set(dir(pytest_ragbench))
    with pytest.raises(AttributeError, match="no attribute 'bootstrap'"):
        pytest_ragbench.bootstrap  # noqa: B018


def test_importing_the_package_loads_none_of_its_modules() -> None:
    """pytest imports the package for every run: the public names cost nothing until used."""
    code = ("import sys, pytest_ragbench; "
            "print(sorted(m for m in sys.modules if m.startswith('pytest_ragbench')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "['pytest_ragbench']"
    code = ("import sys; from pytest_ragbench import Answer; "
            "print('numpy' in sys.modules, 'pytest_ragbench.stats' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "False False"  # one name loads its own module only


def test_the_readme_imports_only_from_the_package() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    imports = [node for block in blocks for node in ast.walk(ast.parse(block))
               if isinstance(node, ast.Import | ast.ImportFrom)]
    ours = [node for node in imports
            if any(name.startswith("pytest_ragbench") for name in _modules(node))]
    assert ours, "the README shows no import of the package"
    assert [ast.unparse(n) for n in ours if _modules(n) != ["pytest_ragbench"]
            or isinstance(n, ast.Import)] == []
    names = {alias.name for node in ours for alias in node.names}
    assert names <= set(pytest_ragbench.__all__)


def _modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return [alias.name for alias in node.names]
