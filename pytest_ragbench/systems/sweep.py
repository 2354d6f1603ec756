"""A sweep's configurations as named systems: which factory, which keyword parameters it takes.

The embedded system (``embedded``, and the built-in ``dense``, ``bm25`` and ``hybrid``)
takes the keyword parameters of :class:`~pytest_ragbench.systems.default.EmbeddedSystem`;
a factory registered with ``pytest_ragbench_systems`` takes those of its own signature
after the request (any, with ``**kwargs``). Every configuration of the embedded system
shares the session's retriever (``ragbench_retriever``), its index and its generator:
only what a parameter changes is built again.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragbench.config.sweep import (
    CONFIG_FROM,
    EMBEDDED,
    Configuration,
    Scalar,
    Sweep,
    check_parameters,
    config_name,
)
from pytest_ragbench.errors import ConfigError
from pytest_ragbench.systems.fixtures import (
    BUILTIN_SYSTEMS,
    EMBEDDED_RETRIEVERS,
    known_systems,
    system_factories,
)

if TYPE_CHECKING:
    from pytest_ragbench.config.sweep import Chosen

# EmbeddedSystem's keyword parameters that the fixtures set themselves
_SET_BY_FIXTURES = ("no_generator_reason", "speller")


def embedded_parameters() -> dict[str, Any]:
    """The embedded system's keyword parameters and their defaults (``inspect.Parameter.empty``)."""
    # lazy: systems/default.py is the embedded system itself, imported when it is swept
    from pytest_ragbench.systems.default import EmbeddedSystem

    signature = inspect.signature(EmbeddedSystem.__init__)
    return {name: p.default for name, p in signature.parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in _SET_BY_FIXTURES}


def takes_parameters(config: pytest.Config, system: str) -> tuple[list[str] | None,
                                                                   dict[str, Scalar]]:
    """The parameters ``system``'s factory takes (None: any) and their defaults.

    ConfigError for a system that is unknown or takes none.
    """
    factories = system_factories(config, with_configurations=False)
    factory = factories.get(system)
    builtin = system == EMBEDDED or (system in BUILTIN_SYSTEMS
                                     and isinstance(factory, functools.partial))
    if builtin and system in (EMBEDDED, *EMBEDDED_RETRIEVERS):
        found = embedded_parameters()
        defaults = {k: v for k, v in found.items() if v is not inspect.Parameter.empty}
        k = config.getini("ragbench_k")
        if k not in (None, "") and "top_k" in found:
            defaults["top_k"] = int(k)
        return list(found), defaults
    if builtin:
        raise ConfigError(f"the built-in system {system!r} takes no parameters to sweep; "
                          f"sweep {EMBEDDED!r}, {', '.join(map(repr, EMBEDDED_RETRIEVERS))} "
                          "or a factory of yours that takes keyword parameters")
    if factory is None:
        raise ConfigError(f"sweep: unknown system {system!r}; known systems: {EMBEDDED} "
                          f"(the embedded system), {known_systems(factories)}")
    try:
        parameters = list(inspect.signature(factory).parameters.values())[1:]
    except (TypeError, ValueError):  # a builtin or C callable: it says nothing
        return None, {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None, {}
    named = [p for p in parameters if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                 inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    return ([p.name for p in named],
            {p.name: p.default for p in named if p.default is not inspect.Parameter.empty
             and isinstance(p.default, bool | int | float | str)})


def expand(config: pytest.Config, sweep: Sweep | None, chosen: Chosen | None
           ) -> tuple[Configuration, ...]:
    """The configurations to run, each as a named system (``--ragbench-systems`` joins them).

    Without a sweep, a ``--ragbench-config-from`` of the embedded system configures
    ``ragbench_system`` itself (no named system); of another system, it runs as the one
    named configuration.
    """
    if sweep is None:
        if chosen is None:
            return ()
        accepted, _ = takes_parameters(config, chosen.system)
        check_parameters(Sweep(chosen.system, base=chosen.params), accepted,
                         f"{CONFIG_FROM}={chosen.path}: system {chosen.system!r}")
        if chosen.system == EMBEDDED:
            return ()
        return (Configuration(config_name(chosen.system, chosen.params), chosen.system,
                              dict(chosen.params), default=True),)
    accepted, defaults = takes_parameters(config, sweep.system)
    check_parameters(sweep, accepted, f"system {sweep.system!r}")
    return tuple(sweep.configurations(defaults))
