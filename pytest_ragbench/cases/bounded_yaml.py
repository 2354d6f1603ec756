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
        data = builder.build(root, root)
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

    Each collection is built once (an alias returns the same object, as PyYAML does); its
    expanded size and depth are remembered, so an alias costs O(1) to check. Scalars are
    built where they stand: one value each, whether aliased or not.
    """

    def __init__(self, constructor: Any, allowance: int) -> None:
        self.constructor = constructor  # the loader is a SafeConstructor
        self.allowance = allowance
        self.built: dict[int, Any] = {}
        self.size: dict[int, int] = {}    # values the collection holds when expanded
        self.depth: dict[int, int] = {}   # its nesting depth when expanded
        self.open: set[int] = set()       # collections being built (an alias: recursive)
        self.extra = 0                    # values added by aliases so far
        self.duplicates: list[DuplicateKey] = []

    def build(self, node: Any, where: Any) -> Any:
        """Return the value of ``node``; ``where`` is the node it is used at (for errors)."""
        return self._child(node, where)[0]

    def _child(self, node: Any, where: Any) -> tuple[Any, int, int]:
        """The value of ``node`` with its expanded size and depth."""
        if node.id == "scalar":  # not isinstance: see _loader_class
            if node.tag == _STR:
                return node.value, 1, 0
            return self.constructor.construct_object(node), 1, 0
        key = id(node)
        if key in self.built:
            size = self.size[key]
            self.extra += size
            if self.extra > self.allowance:
                raise YamlLimitError(
                    f"aliases expand this document past {self.allowance:,} values beyond its "
                    f"own (here an alias repeats the {size:,} values anchored on line "
                    f"{_line(node)}); case data must not be multiplied by aliases",
                    _line(where))
            return self.built[key], size, self.depth[key]
        if key in self.open:
            raise YamlLimitError(f"a recursive alias (its anchor is on line {_line(node)}) "
                                 "cannot be expanded", _line(where))
        self.open.add(key)
        try:
            value, size, depth = self._collection(node)
        finally:
            self.open.discard(key)
        if depth > MAX_DEPTH:
            raise YamlLimitError(f"aliases nest this value more than {MAX_DEPTH} levels deep",
                                 _line(node))
        self.built[key], self.size[key], self.depth[key] = value, size, depth
        return value, size, depth

    def _collection(self, node: Any) -> tuple[Any, int, int]:
        size, depth = 1, 0
        child = self._child
        value: Any
        if node.id == "sequence":
            value = []
            for item in node.value:
                built, item_size, item_depth = child(item, node)
                value.append(built)
                size += item_size
                depth = max(depth, item_depth)
        else:
            self._check_keys(node)
            value = {}
            for key_node, value_node in node.value:
                name, key_size, key_depth = child(key_node, key_node)
                built, item_size, item_depth = child(value_node, key_node)
                try:
                    value[name] = built
                except TypeError:
                    raise YamlLimitError(f"a mapping key must be a plain value, got "
                                         f"{type(name).__name__}", _line(key_node)) from None
                size += key_size + item_size
                depth = max(depth, key_depth, item_depth)
        if node.tag not in (_SEQ, _MAP):  # !!set, !!omap, !!pairs: PyYAML's own constructors
            value = self.constructor.construct_object(node, deep=True)
        return value, size, depth + 1

    def _check_keys(self, node: Any) -> None:
        """Note keys given twice, then apply merge keys (``<<``) as SafeConstructor does."""
        first: dict[tuple[str, str], Any] = {}
        merge = False
        for key_node, _ in node.value:
            if key_node.id != "scalar":
                continue
            if key_node.tag == _MERGE:
                merge = True
                continue
            name = (key_node.tag, key_node.value)
            earlier = first.setdefault(name, key_node)
            if earlier is not key_node:
                self.duplicates.append(DuplicateKey(str(key_node.value), _line(earlier),
                                                    _line(key_node)))
        if merge:
            self.constructor.flatten_mapping(node)
