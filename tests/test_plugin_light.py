"""A repository without case files and without --ragbench* flags is not affected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("numpy", "scipy", "sqlalchemy", "yaml", "torch", "sentence_transformers", "faiss",
         "bm25s", "ragas", "httpx", "matplotlib", "pytrec_eval", "pandas", "llama_cpp",
         "openai", "beir", "hypothesis.strategies")

PROBE = '''
import json, socket, sys

def _refuse(*args, **kwargs):
    raise AssertionError("network access during the session")

socket.socket.connect = _refuse
socket.create_connection = _refuse

def test_plain():
    assert 1 + 1 == 2

def test_modules():
    loaded = sorted(name for name in {HEAVY!r} if name in sys.modules)
    with open("MODULES_OUT", "w") as handle:
        json.dump(loaded, handle)
'''


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_no_heavy_imports_no_files_no_network(tmp_path: Path) -> None:
    """Compare a session with the plugin to one without: the plugin adds no heavy module."""
    pytest.importorskip("xdist")
    # The probe writes its module list to MODULES_OUT relative to cwd; allow that file.
    with_plugin = _heavy_modules_allowing_probe(tmp_path, ())
    without_plugin = _heavy_modules_allowing_probe(tmp_path, ("-p", "no:ragbench"))
    added = sorted(set(with_plugin) - set(without_plugin))
    assert added == [], f"pytest-ragbench imported {added}"
    assert "pytest_ragbench.plugin" in _loaded_plugins(tmp_path)


def _heavy_modules_allowing_probe(tmp_path: Path, plugin_args: tuple[str, ...]) -> list[str]:
    name = "without" if plugin_args else "with"
    project = tmp_path / name
    project.mkdir()
    (project / "test_probe.py").write_text(PROBE.replace("{HEAVY!r}", repr(HEAVY)))
    before = _snapshot(project)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args],
        cwd=project, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    written = _snapshot(project) - before - {"MODULES_OUT"}
    assert written == set(), f"files written: {written}"
    return json.loads((project / "MODULES_OUT").read_text())


def _loaded_plugins(tmp_path: Path) -> str:
    project = tmp_path / "plugins"
    project.mkdir()
    (project / "test_x.py").write_text(
        "def test_x(pytestconfig):\n"
        "    import sys\n"
        "    print('LOADED', 'pytest_ragbench.plugin' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p",
                             "no:cacheprovider"], cwd=project, capture_output=True, text=True,
                            check=False)
    return "pytest_ragbench.plugin" if "LOADED True" in result.stdout else ""


def test_collecting_case_files_imports_no_statistics_library() -> None:
    """scipy (2 s of import) waits for the report: collection and the items need none."""
    root = Path(__file__).resolve().parent.parent
    probe = ("import sys, pytest\n"
             "code = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider',\n"
             "                    'test_cases/nba_sql.yaml'])\n"
             "print('EXIT', int(code), 'SCIPY', 'scipy' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True,
                            text=True, check=False, timeout=300)
    assert "EXIT 0 SCIPY False" in result.stdout, result.stdout[-2000:] + result.stderr
