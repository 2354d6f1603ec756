"""Stop a session whose rootdir or ini file was chosen from a path flag written ``--flag VALUE``.

pytest picks its rootdir and ini file from the command line before any plugin's options
are known, so in ``--ragbench-report /tmp/out`` it takes ``/tmp/out`` for a test path: the
rootdir moves to a common ancestor, the project's ini file (and its ``testpaths``) is lost
and the project's own tests are collected. ``--ragbench-report=/tmp/out`` is read
correctly. The plugin works out the rootdir and ini file pytest would have chosen without
those values; when they differ, the session stops with a usage error naming the
``--flag=VALUE`` form. When they are the same (a value inside the project), nothing is said.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

# Every path-valued flag, including those of other topics (the list is what matters).
PATH_FLAGS = ("--ragbench-cache", "--ragbench-report", "--ragbench-compare",
              "--ragbench-cases", "--ragbench-db-url", "--ragbench-judge-labels",
              "--ragbench-qdrant-path")
MANY_VALUES = ("--ragbench-cases",)  # nargs="+": every value up to the next option


def spaced_values(args: Sequence[str]) -> list[tuple[str, str]]:
    """``(flag, value)`` for each path flag written with a space before its value."""
    found = []
    index = 0
    while index < len(args):
        flag = args[index]
        index += 1
        if flag not in PATH_FLAGS:
            continue
        while index < len(args) and not args[index].startswith("-"):
            found.append((flag, args[index]))
            index += 1
            if flag not in MANY_VALUES:
                break
    return found


def check(config: pytest.Config) -> None:
    """Raise ``pytest.UsageError`` when a spaced path value moved the rootdir or the ini file."""
    args = [str(arg) for arg in config.invocation_params.args]
    spaced = spaced_values(args)
    if not spaced or config.option.rootdir:  # --rootdir fixes the rootdir whatever the args
        return
    expected = _setup_without(config)
    actual = (config.rootpath, config.inipath)
    if expected is None:  # pytest's internals changed: judge by where the values are
        here = config.invocation_params.dir.resolve()
        moved = any(_outside(value, here) for _, value in spaced)
    else:
        moved = expected != actual
    if not moved:
        return
    forms = " ".join(f"{flag}={value}" for flag, value in spaced)
    would = "" if expected is None else (
        f" instead of rootdir {expected[0]} and ini file {expected[1]}")
    raise pytest.UsageError(
        f"ragbench: write {forms} (with '='). pytest reads the command line before it knows "
        f"that these flags take a value, so it took {', '.join(repr(v) for _, v in spaced)} "
        f"for test paths and chose rootdir {actual[0]} and ini file {actual[1]}{would}")


def _outside(value: str, here: Path) -> bool:
    path = (here / value).resolve()
    return path.exists() and not path.is_relative_to(here)


def _setup_without(config: pytest.Config) -> tuple[Path, Path | None] | None:
    """The (rootdir, ini file) pytest chooses from the positional arguments alone."""
    try:
        from _pytest.config.findpaths import determine_setup
    except ImportError:
        return None
    option: Any = config.option
    kwargs: dict[str, Any] = {
        "inifile": option.inifilename, "args": list(option.file_or_dir or []),
        "rootdir_cmd_arg": None, "invocation_dir": config.invocation_params.dir,
        "override_ini": option.override_ini,
    }
    for drop in ((), ("override_ini",)):  # pytest < 8.x has no override_ini parameter
        try:
            found = determine_setup(**{k: v for k, v in kwargs.items() if k not in drop})
        except TypeError:
            continue
        except Exception:  # an ini file pytest cannot read: leave the judgement to pytest
            return None
        return found[0], found[1]
    return None
