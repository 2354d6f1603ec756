"""The quota configuration of ``ragbench dataset build`` (a TOML file).

```toml
[build]
name = "phase2"                 # optional, for the report
seed = 42                       # default seed; --seed overrides
unanswerable_share = 0.10       # share of each quota built as unanswerable variants
unanswerable_ground_truth = "The question cannot be answered from the given contexts."

[[source]]
adapter = "tables"              # see `ragbench dataset build --help`
path = "data/tatqa_dataset_dev.json"   # relative to this file; ~ and $VARS expanded
# further keys are adapter options (checked)

[[quota]]
doc_type = "table"
question_type = "numeric"       # optional: any question type
difficulty = "hard"             # optional: any difficulty
count = 50
unanswerable_share = 0.0        # optional override of [build]'s
```

Quotas must not overlap: a sample may match at most one ``[[quota]]``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.sources import ADAPTERS, get_adapter
from pytest_ragbench.errors import ConfigError

DEFAULT_UNANSWERABLE = "The question cannot be answered from the given contexts."
SOURCE_KEYS = ("name", "adapter", "path")
QUOTA_KEYS = ("doc_type", "question_type", "difficulty", "count", "unanswerable_share")
BUILD_KEYS = ("name", "seed", "unanswerable_share", "unanswerable_ground_truth")


@dataclass(frozen=True)
class SourceSpec:
    """One ``[[source]]``: an adapter, the path it reads and its options."""

    name: str
    adapter: str
    path: Path
    given_path: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Quota:
    """One ``[[quota]]``: how many samples of a stratum (None matches any value)."""

    doc_type: str
    question_type: str | None
    difficulty: str | None
    count: int
    unanswerable_share: float

    @property
    def label(self) -> str:
        """``doc_type/question_type/difficulty`` with ``*`` for any."""
        return "/".join(v or "*" for v in (self.doc_type, self.question_type, self.difficulty))

    def matches(self, doc_type: str, question_type: str, difficulty: str) -> bool:
        """True when a sample of this stratum counts towards the quota."""
        return (doc_type == self.doc_type
                and self.question_type in (None, question_type)
                and self.difficulty in (None, difficulty))

    def overlaps(self, other: Quota) -> bool:
        """True when some stratum would match both quotas."""
        def meet(a: str | None, b: str | None) -> bool:
            return a is None or b is None or a == b

        return (self.doc_type == other.doc_type and meet(self.question_type, other.question_type)
                and meet(self.difficulty, other.difficulty))


@dataclass(frozen=True)
class BuildConfig:
    """A parsed quota configuration."""

    path: Path
    name: str
    seed: int
    unanswerable_share: float
    unanswerable_ground_truth: str
    sources: tuple[SourceSpec, ...]
    quotas: tuple[Quota, ...]

    @property
    def total(self) -> int:
        """Samples requested over all quotas."""
        return sum(q.count for q in self.quotas)


def load_config(path: str | Path) -> BuildConfig:
    """Read and check a quota configuration; ``ConfigError`` names the file and key."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    unknown = sorted(set(data) - {"build", "source", "quota"})
    if unknown:
        raise ConfigError(f"{path}: unknown table [{unknown[0]}] (expected [build], "
                          "[[source]], [[quota]])")
    build = _table(data.get("build", {}), f"{path}: [build]")
    _no_unknown(build, BUILD_KEYS, f"{path}: [build]")
    share = _share(build.get("unanswerable_share", 0.0), f"{path}: [build] unanswerable_share")
    seed = build.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"{path}: [build] seed: expected an integer, got {seed!r}")
    text = build.get("unanswerable_ground_truth", DEFAULT_UNANSWERABLE)
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{path}: [build] unanswerable_ground_truth: expected text")
    sources = tuple(_source(item, index, path)
                    for index, item in enumerate(_array(data, "source", path), start=1))
    names = [s.name for s in sources]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise ConfigError(f"{path}: [[source]] name {duplicate!r} is used twice")
    quotas = tuple(_quota(item, index, path, share)
                   for index, item in enumerate(_array(data, "quota", path), start=1))
    for i, first in enumerate(quotas):
        for second in quotas[i + 1:]:
            if first.overlaps(second):
                raise ConfigError(f"{path}: quotas {first.label} and {second.label} overlap; "
                                  "a sample may count towards one quota only")
    return BuildConfig(path, str(build.get("name") or path.stem), seed, share, text.strip(),
                       sources, quotas)


def _source(item: Any, index: int, path: Path) -> SourceSpec:
    where = f"{path}: [[source]] #{index}"
    item = _table(item, where)
    adapter = item.get("adapter")

    if adapter not in ADAPTERS:
        raise ConfigError(f"{where}: adapter: expected one of {', '.join(ADAPTERS)}, "
                          f"got {adapter!r}")
    given = item.get("path")
    if not isinstance(given, str) or not given.strip():
        raise ConfigError(f"{where}: path: expected text")
    options = {k: v for k, v in item.items() if k not in SOURCE_KEYS}
    allowed = get_adapter(adapter).OPTIONS
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: {unknown[0]}: not an option of adapter {adapter!r} "
                          f"(options: {', '.join(allowed) or 'none'})")
    resolved = Path(os.path.expandvars(os.path.expanduser(given)))
    if not resolved.is_absolute():
        resolved = Path(os.path.normpath(path.parent / resolved))
    name = item.get("name") or f"{adapter}:{Path(given).name}"
    return SourceSpec(str(name), adapter, resolved, given, options)


def _quota(item: Any, index: int, path: Path, default_share: float) -> Quota:
    where = f"{path}: [[quota]] #{index}"
    item = _table(item, where)
    _no_unknown(item, QUOTA_KEYS, where)
    values: dict[str, str | None] = {}
    for key in ("doc_type", "question_type", "difficulty"):
        value = item.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}: {key}: expected text")
        values[key] = value
    if values["doc_type"] is None:
        raise ConfigError(f"{where}: doc_type: required")
    count = item.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ConfigError(f"{where}: count: expected a non-negative integer, got {count!r}")
    share = _share(item.get("unanswerable_share", default_share),
                   f"{where}: unanswerable_share")
    return Quota(str(values["doc_type"]), values["question_type"], values["difficulty"],
                 count, share)


def _share(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise ConfigError(f"{where}: expected a number from 0 up to (not including) 1, "
                          f"got {value!r}")
    return float(value)


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table")
    return value


def _array(data: dict[str, Any], key: str, path: Path) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise ConfigError(f"{path}: {key}: expected an array of tables ([[{key}]])")
    return value


def _no_unknown(table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigError(f"{where}: {unknown[0]}: unknown key (known: {', '.join(known)})")
