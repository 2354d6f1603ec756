"""The ini keys of seed 004's knobs, read into the embedded system's keyword parameters.

A key left empty is left out, so the system's own default holds and a run without any of
them behaves as before. A value that cannot be read is a ConfigError naming the key.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda", "mps")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _ini(config: pytest.Config, name: str) -> str:
    return str(config.getini(name) or "").strip()


def _number(name: str, text: str, low: float = -math.inf, high: float = math.inf) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"ini {name} = {text!r}: expected a number") from None
    if not math.isfinite(value) or not low <= value <= high:
        raise ConfigError(f"ini {name} = {text!r}: expected a number from {low:g} to {high:g}")
    return value


def _filters(lines: list[str]) -> dict[str, Any]:
    filters: dict[str, Any] = {}
    for line in lines:
        if not line.strip():
            continue
        field, sep, value = line.partition("=")
        if not sep or not field.strip() or not value.strip():
            raise ConfigError(f"ini ragbench_filter: {line!r} is not 'field = value'")
        values = [v.strip() for v in value.split(",") if v.strip()]
        filters[field.strip()] = values if len(values) > 1 else values[0]
    return filters


def knob_settings(config: pytest.Config) -> dict[str, Any]:
    """The keyword parameters of :class:`.systems.default.EmbeddedSystem` set in the ini."""
    found: dict[str, Any] = {}
    if text := _ini(config, "ragbench_min_score"):
        found["min_score"] = _number("ragbench_min_score", text, -1.0, 1.0)
    if text := _ini(config, "ragbench_recency_weight"):
        found["recency_weight"] = _number("ragbench_recency_weight", text, 0.0)
    if text := _ini(config, "ragbench_date_field"):
        found["date_field"] = text
    if filters := _filters(list(config.getini("ragbench_filter") or [])):
        found["filters"] = filters
    expansion = _ini(config, "ragbench_query_expansion").lower()
    if expansion not in _TRUE + _FALSE:
        raise ConfigError(f"ini ragbench_query_expansion = {expansion!r}: expected true or false")
    if expansion in _TRUE:
        found["query_expansion"] = True
    if text := _ini(config, "ragbench_rerank"):
        found["rerank"] = text if text == "llm" else rerank_folder(config, text)
        found["device"] = device_setting(config)
    if text := _ini(config, "ragbench_rerank_k"):
        value = _number("ragbench_rerank_k", text, 1)
        if not value.is_integer():
            raise ConfigError(f"ini ragbench_rerank_k = {text!r}: expected an integer")
        found["rerank_k"] = int(value)
    return found


def rerank_folder(config: pytest.Config, text: str) -> str:
    """A cross-encoder folder, relative to the rootdir; a missing one is a ConfigError."""
    path = Path(text).expanduser()
    path = path if path.is_absolute() else Path(config.rootpath) / path
    if not path.is_dir():
        raise ConfigError(f"ini ragbench_rerank = {text!r}: neither 'llm' nor a cross-encoder "
                          f"model folder ({path} does not exist)")
    return str(path)


def fusion_weight_setting(config: pytest.Config) -> float | None:
    """Ini ``ragbench_fusion_weight``: the dense share of a weighted fusion, or None (RRF)."""
    text = _ini(config, "ragbench_fusion_weight")
    return _number("ragbench_fusion_weight", text, 0.0, 1.0) if text else None


def device_setting(config: pytest.Config) -> str:
    """Ini ``ragbench_device`` (default ``cpu``), its form checked; availability on use."""
    text = _ini(config, "ragbench_device") or "cpu"
    base = text.split(":", 1)[0]
    if base not in DEVICES or (":" in text and (base != "cuda"
                                                or not text.split(":", 1)[1].isdigit())):
        raise ConfigError(f"ini ragbench_device = {text!r}: expected auto, cpu, cuda, "
                          "cuda:N or mps")
    return text


def embedding_model_setting(config: pytest.Config) -> tuple[str | None, str | None]:
    """Ini ``ragbench_embedding_model`` as ``(folder or id to load, model id)``.

    ``(None, None)`` for the bundled MiniLM. A folder's id is its resolved path, a cached
    model's its id, so two models never share cached vectors or an index.
    """
    text = _ini(config, "ragbench_embedding_model")
    if not text:
        return None, None
    path = Path(text).expanduser()
    local = path if path.is_absolute() else Path(config.rootpath) / path
    if local.is_dir():
        return str(local.resolve()), str(local.resolve())
    if "/" in text and not text.startswith((".", "/", "~")) and text.count("/") == 1:
        return text, text  # a model id: looked up in the local cache on first use
    raise ConfigError(f"ini ragbench_embedding_model = {text!r}: no such folder ({local}), "
                      "and not a model id (owner/name) of the local Hugging Face cache")
