"""ragbench.toml files: which ones a session reads, the thresholds of each case file, the gates.

``[tool.ragbench]`` of the rootdir's pyproject.toml is the base. On top of it come the
``ragbench.toml`` files of every folder on the way from the rootdir to a collected path
(a command-line path, an ini ``ragbench_cases`` folder, ``--ragbench-cases``) and of the
folders below it that pytest would collect, as pytest finds conftest.py files:

- **Thresholds** of a ragbench.toml apply to the case files at or below its folder; for
  one case file the files from the rootdir down to its folder are layered, the nearest
  winning per key (``"vector.answered"``).
- **Gates** bound a kind's metric over the whole session. A gate set in several files on
  one path takes the deepest file's value; files in folders side by side that set one gate
  to different values are a usage error naming both (no file is nearer to the session).

Every value is a finite number: a string, a boolean, NaN or infinity is a usage error
naming the file and the key, before anything runs.
"""

from __future__ import annotations

import fnmatch
import math
import os
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import ConfigError, short_repr

FILE_NAME = "ragbench.toml"
SECTIONS = ("thresholds", "gates")


@dataclass(frozen=True)
class SettingsFile:
    """The thresholds and gates one file sets, flattened to ``"kind.metric"`` names."""

    path: Path
    folder: Path  # its thresholds apply to the case files at or below this folder
    thresholds: dict[str, float] = field(default_factory=dict)
    gates: dict[str, float] = field(default_factory=dict)
    # [triggers]: "kind.metric" -> {"below" | "above": x, "level": "critical" | "major"}
    triggers: dict[str, dict[str, Any]] = field(default_factory=dict)


TRIGGER_LEVELS = ("critical", "major")


def read_triggers(table: Any, where: str) -> dict[str, dict[str, Any]]:
    """``[triggers]``: each ``"kind.metric" = {below|above = x, level = "critical"|"major"}``."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table, got {short_repr(table)}")
    triggers = {}
    for name, rule in table.items():
        at = f"{where} {name!r}"
        if "." not in name:
            raise ConfigError(f"{at}: name a metric as \"kind.metric\" "
                              "(\"traffic.mean_similarity\")")
        if not isinstance(rule, dict):
            raise ConfigError(f"{at} must be a table such as {{below = 0.7, level = "
                              f"\"critical\"}}, got {short_repr(rule)}")
        unknown = sorted(set(rule) - {"below", "above", "level"})
        bounds = [key for key in ("below", "above") if key in rule]
        if unknown or len(bounds) != 1:
            raise ConfigError(f"{at}: give exactly one of below/above and a level"
                              + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
        value = rule[bounds[0]]
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise ConfigError(f"{at}: {bounds[0]} must be a finite number, got "
                              f"{short_repr(value)}")
        level = rule.get("level", "major")
        if level not in TRIGGER_LEVELS:
            raise ConfigError(f"{at}: level must be critical or major, got {short_repr(level)}")
        triggers[name] = {"metric": name, bounds[0]: float(value), "level": level}
    return triggers


def toml_table(path: Path, keys: Sequence[str] = ()) -> dict[str, Any] | None:
    """The table under ``keys`` (e.g. tool.ragbench) of a TOML file; None without the file.

    :class:`ConfigError` naming the file when it is not TOML or the keys hold no table.
    """
    try:
        if not path.is_file():
            return None
    except OSError:  # a folder that cannot be searched: its cases are not collected either
        return None
    try:
        data: Any = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    for key in keys:
        data = data.get(key, {}) if isinstance(data, dict) else {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: [{'.'.join(keys)}] must be a table")
    return data


def read(path: Path, keys: Sequence[str] = ()) -> SettingsFile | None:
    """Read ``[thresholds]`` and ``[gates]`` of a TOML file (under ``keys``: tool.ragbench).

    None when the file does not exist; :class:`ConfigError` naming the file and the key
    for anything that is not a table of finite numbers.
    """
    data = toml_table(path, keys)
    if data is None:
        return None
    tables = {}
    for section in SECTIONS:
        where = ".".join([*keys, section])
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [{where}] must be a table, got {short_repr(table)}")
        tables[section] = finite_numbers(table, f"{path}: [{where}]")
    triggers = read_triggers(data.get("triggers", {}), f"{path}: [{'.'.join([*keys, 'triggers'])}]")
    return SettingsFile(path, path.parent, tables["thresholds"], tables["gates"], triggers)


def finite_numbers(table: dict[str, Any], where: str, prefix: str = "") -> dict[str, float]:
    """Flatten nested tables into ``{"kind.metric": value}``; each value a finite number."""
    flat: dict[str, float] = {}
    for key, value in table.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(finite_numbers(value, where, name))
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where} {name!r} must be a number, got {short_repr(value)}")
        elif not math.isfinite(value):
            raise ConfigError(f"{where} {name!r} must be a finite number, got {value}")
        else:
            flat[name] = float(value)
    return flat


@dataclass
class SettingsTree:
    """The base settings and the ragbench.toml files of the folders a session looks at.

    ``anchors``: where a file's chain of folders starts: the rootdir, then collected paths
    outside it (their own ragbench.toml and those below them count; their parents' not).
    Each folder's file is read once, and each case file's thresholds merged once (every
    item of a file asks for them: the folder walk's system calls were the largest part of
    an item's own time).
    """

    base: SettingsFile
    anchors: tuple[Path, ...]
    _read: dict[Path, SettingsFile | None] = field(default_factory=dict, repr=False)
    _thresholds: dict[Path, dict[str, float]] = field(default_factory=dict, repr=False)

    def at(self, folder: Path) -> SettingsFile | None:
        """The ragbench.toml of ``folder``, if it has one."""
        if folder not in self._read:
            self._read[folder] = read(folder / FILE_NAME)
        return self._read[folder]

    def folders(self, path: Path) -> list[Path]:
        """The folders from the path's anchor down to ``path`` (a folder) or its folder."""
        path = path.resolve()
        folder = path if path.is_dir() else path.parent
        anchor = next((a for a in self.anchors if a == folder or a in folder.parents), folder)
        below = [p for p in folder.parents if p == anchor or anchor in p.parents]
        return [*reversed(below), folder] if folder != anchor else [folder]

    def chain(self, path: Path) -> list[SettingsFile]:
        """The ragbench.toml files that apply to ``path``, the rootdir's first."""
        return [f for f in map(self.at, self.folders(path)) if f is not None]

    def thresholds_for(self, path: Path) -> dict[str, float]:
        """The configured thresholds of a case file: the base, then its chain, nearest last."""
        merged = self._thresholds.get(path)
        if merged is None:
            merged = dict(self.base.thresholds)
            for found in self.chain(path):
                merged.update(found.thresholds)
            self._thresholds[path] = merged
        return dict(merged)  # the caller's own copy

    def discover(self, paths: Iterable[Path], skip: Callable[[Path], bool]) -> list[SettingsFile]:
        """Every ragbench.toml on the way to ``paths`` and below them, shallowest first."""
        found: dict[Path, SettingsFile] = {}
        for path in paths:
            for one in self.chain(path):
                found[one.path] = one
            if path.is_dir():
                for folder in walk(path.resolve(), skip):
                    below = self.at(folder)
                    if below is not None:
                        found[below.path] = below
        return sorted(found.values(), key=lambda f: (len(f.folder.parts), str(f.path)))


def walk(top: Path, skip: Callable[[Path], bool]) -> Iterator[Path]:
    """``top`` and the folders below it that hold a ragbench.toml, skipping what ``skip`` says.

    Symlinked folders are followed (pytest collects through them), each real folder once.
    """
    seen: set[Path] = set()
    stack = [top]
    while stack:
        folder = stack.pop()
        real = folder.resolve()
        if real in seen:
            continue
        seen.add(real)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        if any(e.name == FILE_NAME for e in entries):
            yield folder
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir and not skip(Path(entry.path)):
                stack.append(Path(entry.path))


def skipper(norecursedirs: Sequence[str], ignored: Iterable[Path]) -> Callable[[Path], bool]:
    """What pytest does not recurse into: ``norecursedirs``, virtualenvs, ``--ignore``."""
    ignore = {Path(p).resolve() for p in ignored}

    def skip(folder: Path) -> bool:
        if folder.name == "__pycache__" or folder in ignore:
            return True
        if any(fnmatch.fnmatch(folder.name, pattern) or fnmatch.fnmatch(str(folder), pattern)
               for pattern in norecursedirs):
            return True
        try:
            return ((folder / "pyvenv.cfg").is_file()
                    or (folder / "conda-meta" / "history").is_file())
        except OSError:  # cannot be searched: collection warns about it, nothing to read here
            return True

    return skip


def session_gates(base: SettingsFile, files: Sequence[SettingsFile]
                  ) -> tuple[dict[str, float], dict[str, Path]]:
    """The gates of the session and the file each comes from (see the module docstring)."""
    gates = dict(base.gates)
    origin = dict.fromkeys(base.gates, base.path)
    setters: dict[str, list[SettingsFile]] = defaultdict(list)
    for one in files:
        for name in one.gates:
            setters[name].append(one)
    for name, group in setters.items():
        for i, first in enumerate(group):
            for second in group[i + 1:]:
                if first.gates[name] != second.gates[name] and not _on_one_path(first, second):
                    raise ConfigError(
                        f"gate {name!r} is {first.gates[name]:g} in {first.path} but "
                        f"{second.gates[name]:g} in {second.path}: a gate bounds the whole "
                        "session, so ragbench.toml files in folders side by side must agree "
                        "(set it once in a folder above both)")
        deepest = max(group, key=lambda f: len(f.folder.parts))
        gates[name] = deepest.gates[name]
        origin[name] = deepest.path
    return gates, origin


def _on_one_path(first: SettingsFile, second: SettingsFile) -> bool:
    a, b = first.folder, second.folder
    return a == b or a in b.parents or b in a.parents
