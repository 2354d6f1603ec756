"""Rendering the results document: terminal section, report.html, JUnit testcases, files.

- :mod:`.terminal`, :mod:`.html` (with :mod:`.plots` and :mod:`.drilldown`) — the
  ``ragbench`` section and the self-contained page.
- :mod:`.text` — the one formatter: numbers, intervals, comparators, tables, shortened
  texts, for every rendering (report sections included).
- :mod:`.testcases` — gates and regressions as test reports (JUnit XML, the last line).
- :mod:`.files` — the files of the report dir.

Each renders the serialised document (``ResultsDocument.to_dict()``, what results.json
holds: JSON-safe, secrets masked), not the live objects: a page or a terminal line shows
nothing results.json does not, and a saved or resumed run renders through the same code.
Its metric cells, gates and comparisons are read by key, as the typed entries
(:mod:`pytest_ragbench.results.entries`) are too.
"""

REPORT_MARKER = ".ragbench-report"  # a file the report writes into its dir
