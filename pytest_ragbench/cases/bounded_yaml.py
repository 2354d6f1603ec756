"""Load one YAML document safely, quickly and within bounds, keeping its nodes for line numbers.

- libyaml (``yaml.CSafeLoader``) when PyYAML was built with it, else the pure-Python
  ``SafeLoader``: the same safe tags, the same line numbers, several times faster.
- Nesting is checked on the parser's events before anything is composed (libyaml's
  composer recurses in C and a few tens of thousands of ``[`` crash the interpreter).
- Aliases may not multiply the data: the values the constructed document would hold
  when expanded (what a ``repr``, a JSON dump or a deep copy of it walks) may exceed the
  document's own count by at most :data:`EXPANSION_ALLOWANCE` (or by the document's own
  size, when that is larger). An alias bomb is refused while its nodes are walked, in
  time linear in the file, before any value is expanded.
- A mapping that gives a key twice is recorded (both lines): PyYAML silently keeps the
  last value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import Node

MAX_DEPTH = 100
EXPANSION_ALLOWANCE = 1_000_000
_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"


def _loader_class() -> type[Any]:
    """Libyaml's loader, unless it builds nodes of other classes than ``yaml.nodes`` holds.

    That happens when ``yaml`` was imported again after ``sys.modules`` was restored (as
    pytester's in-process runs do): the C extension is not re-initialised and keeps the
    first import's classes, which PyYAML's own constructor then refuses.
    """
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        probe = fast("a: [1]")
        try:
            if probe.get_single_data() == {"a": [1]}:
                return fast
        except yaml.YAMLError:
            pass
        finally:
            probe.dispose()
    return yaml.SafeLoader


class YamlLimitError(Exception):
    """The document is nested too deeply or its aliases expand too far (``line`` is 1-based)."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class DuplicateKey:
    """A mapping key given twice: PyYAML would keep the second value."""

    key: str
    first_line: int
    second_line: int


@dataclass
class YamlDocument:
    """The constructed data, its root node (for line numbers) and the duplicate keys found."""

    data: Any
    root: Node | None
    duplicates: list[DuplicateKey] = field(default_factory=list)


def load(text: str) -> YamlDocument:
    """Load one document; raises ``yaml.YAMLError`` (syntax) or :class:`YamlLimitError`."""
    cls = _loader_class()
    own_nodes = _check_nesting(cls, text)
    loader = cls(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return YamlDocument(None, None)
        builder = _Builder(loader, max(EXPANSION_ALLOWANCE, own_nodes))
        data = builder.build(root, _line(root))
        return YamlDocument(data, root, builder.duplicates)
    finally:
        loader.dispose()


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _check_nesting(cls: type[Any], text: str) -> int:
    """Refuse a document nested deeper than :data:`MAX_DEPTH`; return its node count."""
    parser = cls(text)
    depth = nodes = 0
    try:
        while parser.check_event():
            event = parser.get_event()
            kind = type(event).__name__
            if kind in ("SequenceStartEvent", "MappingStartEvent"):
                depth += 1
                nodes += 1
                if depth > MAX_DEPTH:
                    raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep",
                                         int(event.start_mark.line) + 1)
            elif kind in ("SequenceEndEvent", "MappingEndEvent"):
                depth -= 1
            elif kind == "ScalarEvent":
                nodes += 1
    finally:
        parser.dispose()
    return nodes


class _Builder:
    """Construct the data from the composed nodes, checking what PyYAML does not.

    Each node is built once (an alias returns the same object, as PyYAML does); its
    expanded size and depth are remembered, so an alias costs O(1) to check.
    """

    def __init__(self, constructor: Any, allowance: int) -> None:
        self.constructor = constructor  # the loader is a SafeConstructor
        self.allowance = allowance
        self.built: dict[int, Any] = {}
        self.size: dict[int, int] = {}    # values the node holds when expanded
        self.depth: dict[int, int] = {}   # its nesting depth when expanded
        self.open: set[int] = set()       # nodes being built (an alias to one is recursive)
        self.extra = 0                    # values added by aliases so far
        self.duplicates: list[DuplicateKey] = []

    def build(self, node: Any, line: int) -> Any:
        """Return the value of ``node``; ``line`` is where it is used (for an alias)."""
        key = id(node)
        if key in self.built:
            return self._alias(node, line)
        if key in self.open:
            raise YamlLimitError(f"a recursive alias (its anchor is on line {_line(node)}) "
                                 "cannot be expanded", line)
        if node.id == "scalar":  # not isinstance: see _loader_class
            value = node.value if node.tag == _STR else self.constructor.construct_object(node)
            self.size[key], self.depth[key] = 1, 0
        else:
            self.open.add(key)
            try:
                value = self._collection(node)
            finally:
                self.open.discard(key)
        self.built[key] = value
        return value

    def _alias(self, node: Any, line: int) -> Any:
        key = id(node)
        self.extra += self.size[key]
        if self.extra > self.allowance:
            raise YamlLimitError(
                f"aliases expand this document past {self.allowance:,} values beyond its own "
                f"(here an alias repeats the {self.size[key]:,} values anchored on line "
                f"{_line(node)}); case data must not be multiplied by aliases", line)
        return self.built[key]

    def _collection(self, node: Any) -> Any:
        key = id(node)
        children: list[Any]
        if node.id == "mapping":
            self._check_keys(node)
            self.constructor.flatten_mapping(node)  # merge keys (<<), as SafeConstructor does
            pairs = [(self.build(k, _line(k)), self.build(v, _line(k))) for k, v in node.value]
            children = [n for pair in node.value for n in pair]
            value: Any = {}
            for name, item in pairs:
                try:
                    value[name] = item
                except TypeError:
                    raise YamlLimitError(f"a mapping key must be a plain value, got "
                                         f"{type(name).__name__}", _line(node)) from None
        elif node.id == "sequence":
            value = [self.build(child, _line(node)) for child in node.value]
            children = list(node.value)
        else:  # pragma: no cover - composers make only these three
            raise TypeError(node)
        self.size[key] = 1 + sum(self.size[id(child)] for child in children)
        depth = 1 + max((self.depth[id(child)] for child in children), default=0)
        if depth > MAX_DEPTH:
            raise YamlLimitError(f"aliases nest this value more than {MAX_DEPTH} levels deep",
                                 _line(node))
        self.depth[key] = depth
        if node.tag not in (_SEQ, _MAP):  # !!set, !!omap, !!pairs: PyYAML's own constructors
            value = self.constructor.construct_object(node, deep=True)
        return value

    def _check_keys(self, node: Any) -> None:
        first: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if key_node.id != "scalar" or key_node.tag == _MERGE:
                continue
            name = (key_node.tag, key_node.value)
            if name in first:
                self.duplicates.append(DuplicateKey(str(key_node.value), first[name],
                                                    _line(key_node)))
            else:
                first[name] = _line(key_node)
