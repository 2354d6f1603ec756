"""The RAGCSV benchmark's environment variables, read as defaults when no flag or ini key is given.

| variable | setting |
|---|---|
| ``RAGCSV_FILE`` | a RAGCSV file to read (as ini ``ragbench_ragcsv``) |
| ``RAGCSV_MODEL`` | ``--ragbench-llm-model`` |
| ``RAGCSV_GRADING_MODEL`` | ``--ragbench-judge-model`` (default: ``RAGCSV_MODEL``) |
| ``RAGCSV_CONCURRENCY`` | ``--ragbench-concurrency`` |
| ``RAGCSV_LIMIT`` | ``--ragbench-limit`` |
| ``RAGCSV_MAX_TOKENS`` | ``--ragbench-max-tokens`` |
| ``RAGCSV_DEBUG`` | print the first RAGCSV row's prompt, answer and grade |
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.config import options
from pytest_ragbench.errors import ConfigError

ENVIRONMENT: dict[str, tuple[str, ...]] = {
    "ragbench_llm_model": ("RAGCSV_MODEL",),
    "ragbench_judge_model": ("RAGCSV_GRADING_MODEL", "RAGCSV_MODEL"),
    "ragbench_concurrency": ("RAGCSV_CONCURRENCY",),
    "ragbench_limit": ("RAGCSV_LIMIT",),
    "ragbench_max_tokens": ("RAGCSV_MAX_TOKENS",),
    "ragcsv_debug": ("RAGCSV_DEBUG",),
}
INTEGERS = frozenset({"ragbench_concurrency", "ragbench_limit", "ragbench_max_tokens"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def env_setting(config: pytest.Config, dest: str) -> Any:
    """The flag's value, else its ini key's, else the first of its environment variables set.

    An integer setting from the environment that is not a positive integer is a
    :class:`ConfigError` naming the variable; ``RAGCSV_DEBUG`` is a boolean.
    """
    if dest != "ragcsv_debug":
        given = options.value(config, dest)
        if given not in (None, "", []):
            return given
    for name in ENVIRONMENT.get(dest, ()):
        raw = os.environ.get(name)
        if raw is None or raw.strip() == "":
            continue
        if dest == "ragcsv_debug":
            return raw.strip().lower() not in _FALSE
        if dest in INTEGERS and not (raw.strip().isdigit() and int(raw) > 0):
            raise ConfigError(f"{name} must be a positive integer, got {raw!r}")
        return raw.strip()
    return None


def ragcsv_env_files(config: pytest.Config) -> tuple[Path, ...]:
    """``RAGCSV_FILE`` (``~`` expanded, relative to where pytest started), if set."""
    raw = os.environ.get("RAGCSV_FILE", "").strip()
    if not raw:
        return ()
    path = (config.invocation_params.dir / Path(raw).expanduser()).resolve()
    if not path.is_file():
        raise ConfigError(f"RAGCSV_FILE={raw}: no such file")
    return (path,)
