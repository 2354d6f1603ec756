"""No generic module names a built-in kind: a kind is whole in its own package.

Collection, items, fixtures, the run machinery, aggregation, rendering, plugin.py and
config/ learn about kinds from the registry (``pytest_ragbench.kinds``), never by name:
a string literal equal to a built-in kind's name outside ``pytest_ragbench/kinds/`` fails
this test unless the allow-list below says why it means something else there. Nor does
one import a built-in kind's package (``pytest_ragbench.kinds.ragcsv...``), unless
``IMPORTS_LEFT`` names it as not moved yet.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pytest_ragbench.kinds import builtin_registry

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_ragbench"
KIND_NAMES = frozenset({"sql", "sql_ground_truth", "hybrid", "hybrid_ground_truth", "vector",
                        "memory", "ragas", "beir", "ragcsv", "robust", "traffic"})

# (module under pytest_ragbench/, literal): why the literal is not the kind there.
ALLOWED: dict[tuple[str, str], str] = {
    ("systems/retrievers.py", "hybrid"): "the hybrid retriever (dense + BM25), a retriever mode",
    ("systems/fixtures.py", "hybrid"): "the built-in system named after its hybrid retriever",
    ("systems/qdrant/fixtures.py", "hybrid"): "Qdrant's hybrid search mode",
    ("systems/qdrant/retriever.py", "hybrid"): "Qdrant's hybrid search mode",
    ("systems/protocols.py", "sql"): "the Answer's sql field: the SQL the system ran",
    ("systems/trace.py", "sql"): "the Answer's sql field: the SQL the system ran",
    ("sql/engine.py", "memory"): "a query stopped for using too much memory",
    ("metrics/relevance.py", "memory"): "the noun the relevance prompt names (a memory)",
    ("datasets/sample.py", "ragas"): "the kind of the records the dataset builder writes: "
                                     "a NormalizedSample is a ragas case by definition",
    ("datasets/sources/__init__.py", "beir"): "the name of an input format of the builder",
    ("datasets/sources/__init__.py", "ragcsv"): "the name of an input format of the builder",
    ("datasets/sources/beir.py", "beir"): "the name of an input format of the builder",
    ("datasets/sources/ragcsv.py", "ragcsv"): "the name of an input format of the builder",
    ("datasets/sources/code.py", "sql"): "a code block's language tag",
    ("datasets/sources/cases.py", "ragas"): "the builder turns the project's case files "
                                            "into samples, reading each built-in kind's fields",
    ("datasets/sources/cases.py", "vector"): "as above",
    ("datasets/sources/cases.py", "hybrid"): "as above",
    ("datasets/sources/cases.py", "sql"): "as above",
    ("render/files.py", "ragas"): "a library whose version the report records",
    ("render/files.py", "beir"): "a library whose version the report records",
    ("datasets/generate/command.py", "sql"): "the name of an input source of the generator",
    ("datasets/generate/command.py", "beir"): "the name of an input source of the generator",
    ("datasets/generate/sql.py", "sql"): "the kind of the records the SQL generator writes",
    ("datasets/generate/command.py", "vector"): "a kind the documents generator writes",
    ("datasets/generate/command.py", "ragas"): "a kind the documents generator writes",
    ("datasets/generate/command.py", "hybrid"): "a kind the database generator writes",
    ("datasets/generate/hybrid.py", "hybrid"): "the kind of the records the hybrid "
                                               "generator writes",
}


# (module under pytest_ragbench/, kind): a generic module still importing a kind's package.
IMPORTS_LEFT: dict[tuple[str, str], str] = {}


def kind_imports(package: Path) -> dict[tuple[str, str], list[int]]:
    """``{(module, kind): [line, ...]}`` for every import of a built-in kind outside kinds/."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        if module.startswith("kinds/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), module)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["pytest_ragbench", "kinds"] and len(parts) > 2 \
                        and parts[2] in KIND_NAMES:
                    lines = found.setdefault((module, parts[2]), [])
                    if node.lineno not in lines:
                        lines.append(node.lineno)
    return found


def kind_literals(package: Path) -> dict[tuple[str, str], list[int]]:
    """``{(module, literal): [line, ...]}`` for every built-in kind name outside kinds/."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        if module.startswith("kinds/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), module)):
            if isinstance(node, ast.Constant) and node.value in KIND_NAMES:
                found.setdefault((module, str(node.value)), []).append(node.lineno)
    return found


def test_the_names_checked_are_the_built_in_kinds() -> None:
    registry = builtin_registry()
    assert set(registry.item_kinds) | set(registry.case_kinds) == KIND_NAMES


def test_no_generic_module_names_a_built_in_kind() -> None:
    found = kind_literals(PACKAGE)
    named = [f"pytest_ragbench/{module}:{lines[0]}: {literal!r}"
             for (module, literal), lines in found.items() if (module, literal) not in ALLOWED]
    assert named == [], ("a module outside pytest_ragbench/kinds/ names a built-in kind: ask "
                         "the registry (pytest_ragbench.kinds) instead:\n" + "\n".join(named))
    stale = sorted(set(ALLOWED) - set(found))
    assert stale == [], f"allowed but no longer found (remove them from ALLOWED): {stale}"


def test_no_generic_module_imports_a_built_in_kind() -> None:
    found = kind_imports(PACKAGE)
    named = [f"pytest_ragbench/{module}:{lines[0]}: imports the {kind} kind"
             for (module, kind), lines in found.items() if (module, kind) not in IMPORTS_LEFT]
    assert named == [], ("a module outside pytest_ragbench/kinds/ imports a built-in kind: "
                         "let the kind contribute it through its ItemKind:\n" + "\n".join(named))
    stale = sorted(set(IMPORTS_LEFT) - set(found))
    assert stale == [], f"no longer imported (remove them from IMPORTS_LEFT): {stale}"


def test_the_import_check_finds_a_kind_imported_outside_kinds(tmp_path: Path) -> None:
    (tmp_path / "plugin.py").write_text(
        "from pytest_ragbench.kinds.ragcsv.progress import RagcsvProgress\n"
        "from pytest_ragbench.kinds import beir, registry\n"
        "import pytest_ragbench.kinds.sql.runner\n"
        "from pytest_ragbench.kinds import answer_common\n")
    assert kind_imports(tmp_path) == {("plugin.py", "ragcsv"): [1], ("plugin.py", "beir"): [2],
                                      ("plugin.py", "sql"): [3]}


def test_the_check_finds_a_kind_name_outside_kinds(tmp_path: Path) -> None:
    """A literal is found wherever it is (a default, a dict key, a comparison), not in kinds/."""
    (tmp_path / "collect").mkdir()
    (tmp_path / "collect" / "x.py").write_text(
        'def f(kind="vector"):\n'
        '    return {"ragcsv": 1}.get(kind) if kind == "beir" else "beir[x]"\n')
    (tmp_path / "kinds" / "beir").mkdir(parents=True)
    (tmp_path / "kinds" / "beir" / "collect.py").write_text('KIND = "beir"\n')
    assert kind_literals(tmp_path) == {("collect/x.py", "vector"): [1],
                                       ("collect/x.py", "ragcsv"): [2],
                                       ("collect/x.py", "beir"): [2]}
