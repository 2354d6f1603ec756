"""The bundled tables perturbations draw from (``perturbations.yaml`` beside this module)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import ConfigError

TABLES_FILE = Path(__file__).with_name("perturbations.yaml")


@dataclass(frozen=True)
class Tables:
    """Keyboard neighbours, filler phrases, synonyms and injection instructions."""

    neighbours: dict[str, tuple[str, ...]]
    filler_prefixes: tuple[str, ...]
    filler_suffixes: tuple[str, ...]
    synonyms: dict[str, tuple[str, ...]]
    injection_templates: tuple[str, ...]
    injection_payloads: tuple[str, ...]


@functools.cache
def bundled_tables() -> Tables:
    """The tables shipped with the package (read once)."""
    return load_tables(TABLES_FILE)


def load_tables(path: Path) -> Tables:
    """Read and check a tables file; a bad section raises ConfigError naming it."""
    import yaml

    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read the perturbation tables: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of tables")

    def texts(key: str) -> tuple[str, ...]:
        value = data.get(key)
        if not isinstance(value, list) or not value or not all(
                isinstance(v, str) and v.strip() for v in value):
            raise ConfigError(f"{path}: '{key}' must be a non-empty list of texts")
        return tuple(value)

    def table(key: str) -> dict[str, tuple[str, ...]]:
        value = data.get(key)
        if not isinstance(value, dict) or not value:
            raise ConfigError(f"{path}: '{key}' must be a non-empty mapping")
        result = {}
        for word, options in value.items():
            if not isinstance(options, list) or not options or not all(
                    isinstance(o, str) and o for o in options):
                raise ConfigError(f"{path}: '{key}.{word}' must be a non-empty list of texts")
            result[str(word).lower()] = tuple(options)
        return result

    templates = texts("injection_templates")
    if not all("{payload}" in t for t in templates):
        raise ConfigError(f"{path}: every injection template must contain {{payload}}")
    return Tables(neighbours=table("keyboard_neighbours"),
                  filler_prefixes=texts("filler_prefixes"),
                  filler_suffixes=texts("filler_suffixes"),
                  synonyms=table("synonyms"),
                  injection_templates=templates,
                  injection_payloads=texts("injection_payloads"))
