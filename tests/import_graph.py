"""The package's import graph, read from the source with ``ast`` (nothing is imported)."""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "pytest_ragbench"
# Libraries a plain pytest run must not load (tests/test_plugin_light.py) or that are slow
# to import: a function-level import of a module that loads one needs no other reason.
HEAVY = frozenset({
    "numpy", "scipy", "torch", "faiss", "ragas", "httpx", "sqlalchemy", "bm25s",
    "sentence_transformers", "pytrec_eval", "qdrant_client", "llama_cpp", "matplotlib",
    "jsonschema", "pandas", "openai", "hypothesis", "yaml", "tqdm", "beir", "langchain_core",
    "datasets", "transformers", "huggingface_hub",
})
LAZY_MARK = "# lazy:"


@dataclass(frozen=True)
class LazyImport:
    """One import inside a function: where it is, what it loads, whether it says why."""

    module: str
    line: int
    targets: tuple[str, ...]
    has_reason: bool


@dataclass
class ImportGraph:
    """Module-level and function-level imports between the package's modules."""

    modules: dict[str, Path]
    top: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    lazy: list[LazyImport] = field(default_factory=list)
    external_top: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    @classmethod
    def read(cls, root: Path) -> ImportGraph:
        """Read every module of the package under ``root``."""
        modules = {}
        for path in sorted((root / PACKAGE).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
        graph = cls(modules)
        for name, path in modules.items():
            graph._scan(name, path)
        return graph

    def _targets(self, name: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if node.level:
            base = name.split(".")
            if path.name != "__init__.py":
                base.pop()
            base = base[:len(base) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        # `from package import submodule` depends on the submodule, not on the package
        submodules = [f"{module}.{alias.name}" for alias in node.names
                      if f"{module}.{alias.name}" in self.modules]
        attributes = len(submodules) < len(node.names)
        return ([module] if attributes or module not in self.modules else []) + submodules

    def _scan(self, name: str, path: Path) -> None:
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        import_ends = {node.end_lineno: node for node in ast.walk(tree)
                       if isinstance(node, ast.Import | ast.ImportFrom)}

        def reason(node: ast.stmt) -> bool:
            """A ``# lazy:`` comment on the import, or above the block of imports it is in."""
            if any(LAZY_MARK in line for line in lines[node.lineno - 1:node.end_lineno]):
                return True
            first = node
            while first.lineno - 1 in import_ends:
                first = import_ends[first.lineno - 1]
            return first.lineno >= 2 and LAZY_MARK in lines[first.lineno - 2]

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                if isinstance(child, ast.Import | ast.ImportFrom):
                    targets = self._targets(name, path, child)
                    internal = tuple(t for t in targets if t in self.modules and t != name)
                    if in_function and internal:
                        self.lazy.append(LazyImport(name, child.lineno, internal, reason(child)))
                    elif not in_function:
                        self.top[name].update(internal)
                        self.external_top[name].update(
                            t.split(".")[0] for t in targets if not t.startswith(PACKAGE))
                visit(child, in_function or isinstance(
                    child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

        visit(tree, False)

    def closure(self, name: str) -> set[str]:
        """Modules loaded, at module level, by importing ``name`` (its packages too)."""
        seen: set[str] = set()
        todo = [name]
        while todo:
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            todo.extend(self.top[module])
            parts = module.split(".")
            todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        return seen

    def heavy(self, name: str) -> set[str]:
        """The heavy libraries importing ``name`` loads at module level, transitively."""
        external = set().union(*(self.external_top[m] for m in self.closure(name)))
        return external & HEAVY

    def cycles(self) -> list[list[str]]:
        """Strongly connected components of more than one module, lazy imports counted."""
        edges = {m: set(self.top[m]) for m in self.modules}
        for found in self.lazy:
            edges[found.module].update(found.targets)
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        components: list[list[str]] = []

        def connect(v: str) -> None:  # Tarjan's algorithm
            index[v] = low[v] = len(index)
            stack.append(v)
            on_stack.add(v)
            for w in edges[v]:
                if w not in index:
                    connect(w)
                    low[v] = min(low[v], low[w])
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    components.append(sorted(component))

        for module in self.modules:
            if module not in index:
                connect(module)
        return components
