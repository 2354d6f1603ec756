"""The results document: everything a session concluded, computed from item records alone.

- :mod:`.records` — one item's record (JSON-safe: it travels on test reports under xdist).
- :mod:`.document` — the typed results document (``results.json``, described by
  ``results.schema.json`` beside it), built from the parts below.
- :mod:`.entries` — its typed entries: a metric cell, a gate's verdict, a comparison.
- :mod:`.sections` — report sections that kinds and plugins add through the hook
  ``pytest_ragbench_report_sections``.
- :mod:`.aggregate` — cells of scores and their statistics: metrics, breakdowns, usage.
- :mod:`.gates`, :mod:`.verdict` — aggregate gates and regressions; passed or failed, and why.
- :mod:`.comparisons`, :mod:`.stages` — paired comparisons of systems and runs; which
  component moved.
- :mod:`.calibration`, :mod:`.judging` — judges against people; unscored and repeated judging.
- :mod:`.runs` — saved runs and the baseline a run is compared with.
"""
