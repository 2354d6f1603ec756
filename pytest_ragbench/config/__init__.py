"""Settings of a session: flags and ini keys, ragbench.toml, environment variables.

- :mod:`.options` — the ``--ragbench-*`` flags and ini keys (``parser.getgroup``).
- :mod:`.settings` — :class:`RagbenchConfig`, resolved once per session and kept in
  ``config.stash``; ragbench.toml and ``[tool.ragbench]`` read and merged.
- :mod:`.thresholds` — item thresholds: the kind's, then the settings', then the case's.
- :mod:`.vocabulary` — metric and kind names in thresholds, gates and labels checked.
- :mod:`.ragcsv_env` — the RAGCSV benchmark's environment variables as defaults.
- :mod:`.spaced_flags` — a path flag written ``--flag VALUE`` that misled pytest's rootdir.
- :mod:`.perturbations` — the perturbation kinds (standard library only).
"""
