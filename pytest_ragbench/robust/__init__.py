"""Robustness items: hypothesis-generated perturbations of a case, with metamorphic checks.

- :mod:`.collect` — which cases get a ``robust[<kind>-<id>]`` item (light, used at collection).
- :mod:`.tables` and ``perturbations.yaml`` — keyboard neighbours, fillers, synonyms, injections.
- :mod:`.perturb` — one hypothesis strategy per perturbation kind.
- :mod:`.properties` — RBO, Jaccard@k, expected sources kept, injection resisted.
- :mod:`.checker` — observes the system and measures an example against the original.
- :mod:`.search` — the seeded hypothesis search, shrinking, and replay of failures.
- :mod:`.evidence` — how a record names its results (shared with the report).

The runner is :mod:`pytest_ragbench.kinds.robust`; the report section is
:mod:`pytest_ragbench.kinds.robust.report`. Only :mod:`.collect` is imported at collection
time, and :mod:`.evidence` at session end.
"""
