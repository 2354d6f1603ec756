"""Rendering the results document: terminal section, report.html, JUnit testcases, files.

- :mod:`.terminal`, :mod:`.html` (with :mod:`.plots` and :mod:`.drilldown`) — the
  ``ragbench`` section and the self-contained page.
- :mod:`.text` — the one formatter: numbers, intervals, comparators, tables, shortened
  texts, for every rendering (report sections included).
- :mod:`.testcases` — gates and regressions as test reports (JUnit XML, the last line).
- :mod:`.files` — the files of the report dir.
"""

REPORT_MARKER = ".ragbench-report"  # a file the report writes into its dir
