"""Which embedder, generator and judge a session used, as the report names them.

Fixtures call :func:`set_component` (``set_component(request.config, "generator",
llm.describe())``). On the controller the description is kept in ``config.stash``; on an
xdist worker it also goes to ``config.workeroutput``, which reaches the controller's
``pytest_testnodedown``. Cheap to import.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_ragbench.redact import scrub

COMPONENTS_KEY = pytest.StashKey[dict[str, str]]()
WORKEROUTPUT_KEY = "ragbench_components"
ROLES = ("embedder", "retriever", "generator", "judge", "system")


def set_component(config: pytest.Config, role: str, description: str) -> None:
    """Record the one-line description of the component playing ``role`` in this session.

    A URL in it is shown with its credentials masked, as any secret (redact.py).
    """
    text = scrub(" ".join(str(description).split()))
    config.stash.setdefault(COMPONENTS_KEY, {})[str(role)] = text
    workeroutput: Any = getattr(config, "workeroutput", None)
    if isinstance(workeroutput, dict):
        workeroutput.setdefault(WORKEROUTPUT_KEY, {})[str(role)] = text


def describe(component: Any) -> str:
    """One line naming a component: its ``describe()``, else its class and module.

    The plugin's own components without ``describe()`` are named by their ``repr`` (which
    says how they are set up); a user's object never is, since a repr may show settings
    such as keys.
    """
    method = getattr(component, "describe", None)
    if callable(method):
        try:
            return str(method())
        except Exception as exc:  # a broken describe() must not break the session
            return f"{_class_name(component)} (describe() failed: {type(exc).__name__})"
    cls = type(component)
    if cls.__module__.startswith("pytest_ragbench.") and cls.__repr__ is not object.__repr__:
        return repr(component)
    return _class_name(component)


def _class_name(component: Any) -> str:
    cls = type(component)
    return f"{cls.__qualname__} ({cls.__module__})"


def name_component(config: pytest.Config, role: str, component: Any) -> None:
    """Name ``component`` as ``role`` unless a fixture named that role already."""
    if role not in config.stash.get(COMPONENTS_KEY, {}):
        set_component(config, role, describe(component))


def components(config: pytest.Config) -> dict[str, str]:
    """The components recorded in this process, ``{role: description}``."""
    found = config.stash.get(COMPONENTS_KEY, None)
    return dict(found or {})


def ordered(found: dict[str, str]) -> dict[str, str]:
    """Known roles first, in :data:`ROLES` order, then the rest by name."""
    keys = [r for r in ROLES if r in found] + sorted(k for k in found if k not in ROLES)
    return {k: found[k] for k in keys}
