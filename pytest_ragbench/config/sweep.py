"""Parameter sweeps (``--ragbench-sweep "top_k=3,5,10"``, ``[sweep]``) and a base configuration.

A sweep expands one system factory (the embedded system, or a factory registered with
``pytest_ragbench_systems`` that takes keyword parameters) into configurations, each run
as a named system of its own (``embedded[top_k=3]``), exactly like ``--ragbench-systems``.

``[sweep]`` of ragbench.toml (the rootdir's, the case folders' and ``[tool.ragbench.sweep]``
of pyproject.toml; the same files on the controller and on every xdist worker, so both
collect the same items)::

    [sweep]
    system = "embedded"        # or a registered factory's name
    mode = "grid"              # or "one-at-a-time": each parameter moved alone from the base
    top_k = [3, 5, 10]
    [sweep.base]               # the default configuration's values
    top_k = 5

``--ragbench-sweep`` adds parameters (repeatable) and replaces one the file sweeps too.
``--ragbench-config-from=best.toml`` (the report's recommended configuration) gives the
base: the values of the default configuration, and without a sweep the configuration
the run evaluates.
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.config.setting_files import toml_table
from pytest_ragbench.errors import ConfigError, did_you_mean, short_repr

EMBEDDED = "embedded"
MODES = ("grid", "one-at-a-time")
RESERVED = ("system", "mode", "base")
FLAG = "--ragbench-sweep"
CONFIG_FROM = "--ragbench-config-from"
_PARAMETER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
Scalar = bool | int | float | str


@dataclass(frozen=True)
class Configuration:
    """One point of a sweep: the system factory, its keyword parameters and its name."""

    name: str
    system: str
    params: dict[str, Scalar]
    default: bool = False  # the base configuration, which the best is measured against

    def to_dict(self) -> dict[str, Any]:
        """JSON for results.json."""
        return {"name": self.name, "system": self.system, "params": dict(self.params),
                "default": self.default}


@dataclass(frozen=True)
class Sweep:
    """What to sweep: the factory, the values of each parameter, the mode and the base."""

    system: str = EMBEDDED
    mode: str = "grid"
    params: dict[str, tuple[Scalar, ...]] = field(default_factory=dict)
    base: dict[str, Scalar] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)  # parameter -> flag or file

    def configurations(self, defaults: Mapping[str, Scalar] = {}) -> list[Configuration]:
        """The configurations to run, the default one among them (added when missing).

        ``defaults``: the factory's own defaults, used where the base gives no value.
        A parameter with no base value leaves the grid without a default configuration;
        one-at-a-time needs one for every parameter.
        """
        names = list(self.params)
        base = {**{k: v for k, v in defaults.items() if k in names}, **self.base}
        if self.mode == "grid":
            points = [dict(zip(names, values, strict=True))
                      for values in itertools.product(*(self.params[n] for n in names))]
        else:
            missing = [n for n in names if n not in base]
            if missing:
                raise ConfigError(f"sweep mode one-at-a-time moves each parameter from the "
                                  f"base: give a base value of {', '.join(missing)} "
                                  "([sweep.base] or --ragbench-config-from)")
            points = [{n: base[n] for n in names}]
            for name in names:
                points += [{**points[0], name: v} for v in self.params[name] if v != base[name]]
        default = {n: base[n] for n in names} if all(n in base for n in names) else None
        if default is not None and default not in points:
            points.insert(0, default)
        extra = {k: v for k, v in self.base.items() if k not in names}
        unique: dict[str, Configuration] = {}
        for point in points:
            name = config_name(self.system, point)
            unique.setdefault(name, Configuration(name, self.system, {**extra, **point},
                                                  default=point == default))
        return list(unique.values())


def config_name(system: str, params: Mapping[str, Scalar]) -> str:
    """``embedded[top_k=3,min_score=0.5]``: the system name a configuration runs under."""
    inside = ",".join(f"{k}={format_value(v)}" for k, v in params.items())
    return f"{system}[{inside}]"


def format_value(value: Scalar) -> str:
    """A value as a name shows it (``true``, ``0.5``, ``bge-small``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def parse_value(raw: str) -> Scalar:
    """A flag's value as TOML reads it (``3``, ``0.5``, ``true``, ``"x"``), else the text."""
    text = raw.strip()
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    return value if _scalar(value) else text


def _scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, bool | int | str)


def parse_flag(spec: str) -> tuple[str, tuple[Scalar, ...]]:
    """``"top_k=3,5,10"`` -> ``("top_k", (3, 5, 10))``; ConfigError naming the flag."""
    name, sep, raw = spec.partition("=")
    name = name.strip()
    if not sep or not _PARAMETER.match(name):
        raise ConfigError(f"{FLAG} {spec!r}: expected PARAMETER=V1,V2,... (\"top_k=3,5,10\")")
    values = [part for part in raw.split(",") if part.strip()]
    if not values:
        raise ConfigError(f"{FLAG} {spec!r}: parameter {name!r} has no values")
    return name, _distinct(tuple(parse_value(v) for v in values), f"{FLAG} {spec!r}", name)


def _distinct(values: tuple[Scalar, ...], where: str, name: str) -> tuple[Scalar, ...]:
    seen = [v for i, v in enumerate(values) if v in values[:i] and type(v) is type(values[i])]
    if seen:
        raise ConfigError(f"{where}: parameter {name!r} repeats {format_value(seen[0])}")
    return values


def read_table(table: Any, where: str) -> Sweep:
    """A ``[sweep]`` table; ConfigError naming the file (``where``) and the key."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table, got {short_repr(table)}")
    system = table.get("system", EMBEDDED)
    if not isinstance(system, str) or not system:
        raise ConfigError(f"{where} system must be a system name, got {short_repr(system)}")
    mode = table.get("mode", "grid")
    if mode not in MODES:
        raise ConfigError(f"{where} mode must be {' or '.join(map(repr, MODES))}, "
                          f"got {short_repr(mode)}")
    base = read_base(table.get("base", {}), f"{where} base")
    params: dict[str, tuple[Scalar, ...]] = {}
    for name, raw in table.items():
        if name in RESERVED:
            continue
        values = raw if isinstance(raw, list) else [raw]
        if not _PARAMETER.match(name):
            raise ConfigError(f"{where} {name!r}: not a keyword parameter name")
        if not values or not all(_scalar(v) for v in values):
            raise ConfigError(f"{where} {name!r} must be a list of numbers, strings or "
                              f"booleans, got {short_repr(raw)}")
        params[name] = _distinct(tuple(values), where, name)
    return Sweep(system, str(mode), params, base, dict.fromkeys(params, where))


def read_base(table: Any, where: str) -> dict[str, Scalar]:
    """A table of parameter values (``[sweep.base]``, best.toml's ``[config.params]``)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table, got {short_repr(table)}")
    for name, value in table.items():
        if not _PARAMETER.match(name) or not _scalar(value):
            raise ConfigError(f"{where} {name!r} must be a number, string or boolean, "
                              f"got {short_repr(value)}")
    return dict(table)


def read_file_table(path: Path, keys: Sequence[str] = ()) -> Sweep | None:
    """The ``[sweep]`` table of a TOML file (under ``keys``), or None without one."""
    data = toml_table(path, keys)
    if data is None or "sweep" not in data:
        return None
    return read_table(data["sweep"], f"{path}: [{'.'.join([*keys, 'sweep'])}]")


@dataclass(frozen=True)
class Chosen:
    """``--ragbench-config-from``: a system and its parameter values."""

    path: Path
    system: str
    params: dict[str, Scalar]


def read_config_from(path: Path) -> Chosen:
    """best.toml (``[config]`` with ``system`` and ``[config.params]``); ConfigError naming it."""
    where = f"{CONFIG_FROM}={path}"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: invalid TOML: {exc}") from None
    table = data.get("config")
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: no [config] table (write it as the report's best.toml "
                          "does: [config] system = \"embedded\" and [config.params])")
    system = table.get("system", EMBEDDED)
    if not isinstance(system, str) or not system:
        raise ConfigError(f"{where}: [config] system must be a system name, "
                          f"got {short_repr(system)}")
    return Chosen(path, system, read_base(table.get("params", {}), f"{where}: [config.params]"))


def combine(files: Sequence[Sweep], flags: Sequence[str], chosen: Chosen | None
            ) -> Sweep | None:
    """The session's sweep: the files' tables, then the flags; the base of ``chosen`` below.

    Two files that sweep one parameter differently, or name different systems or modes,
    are a usage error naming both.
    """
    merged: Sweep | None = None
    for one in files:
        if merged is None:
            merged = one
            continue
        for attribute in ("system", "mode"):
            if getattr(one, attribute) != getattr(merged, attribute) \
                    and attribute in _given(one):
                raise ConfigError(f"[sweep] {attribute} is {getattr(merged, attribute)!r} in "
                                  f"{_first(merged)} but {getattr(one, attribute)!r} in "
                                  f"{_first(one)}: set it once")
        for name, values in one.params.items():
            if name in merged.params and merged.params[name] != values:
                raise ConfigError(f"[sweep] {name!r} is {list(merged.params[name])} in "
                                  f"{merged.where[name]} but {list(values)} in "
                                  f"{one.where[name]}: sweep it in one file")
        merged = Sweep(merged.system, merged.mode, {**merged.params, **one.params},
                       {**merged.base, **one.base}, {**merged.where, **one.where})
    from_flags = dict(parse_flag(spec) for spec in flags)
    if from_flags:
        merged = merged or Sweep()
        merged = Sweep(merged.system, merged.mode, {**merged.params, **from_flags},
                       merged.base, {**merged.where, **dict.fromkeys(from_flags, FLAG)})
    if merged is None or not merged.params:
        return None
    if chosen is not None:
        if chosen.system != merged.system:
            raise ConfigError(f"{CONFIG_FROM}={chosen.path} configures system "
                              f"{chosen.system!r}, but the sweep sweeps {merged.system!r}")
        merged = Sweep(merged.system, merged.mode, merged.params,
                       {**chosen.params, **merged.base}, merged.where)
    return merged


def _given(sweep: Sweep) -> set[str]:
    return {a for a in ("system", "mode") if getattr(sweep, a) != getattr(Sweep(), a)}


def _first(sweep: Sweep) -> str:
    return next(iter(sweep.where.values()), "a file")


def check_parameters(sweep: Sweep, accepted: Sequence[str] | None, described: str) -> None:
    """ConfigError for a parameter the factory does not take (``accepted`` None: any)."""
    if accepted is None:
        return
    for name in [*sweep.params, *sweep.base]:
        if name not in accepted:
            where = sweep.where.get(name, "[sweep.base]")
            raise ConfigError(f"{where}: {described} takes no parameter {name!r}"
                              f"{did_you_mean(name, accepted)}; it takes "
                              f"{', '.join(accepted) or 'none'}")
