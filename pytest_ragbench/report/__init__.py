"""Controller-side aggregation of item records: terminal summary, report files, baselines.

- :mod:`.session` — the controller's plugin object: gathers records, runs the rest.
- :mod:`.aggregate` — metric cells, confidence intervals, breakdowns, usage, RAGCSV blocks.
- :mod:`.compare` — paired comparisons (systems, baseline), Holm correction, power.
- :mod:`.gates` — aggregate gates and regression verdicts.
- :mod:`.document` — the ``results.json`` document built from the above.
- :mod:`.runs`, :mod:`.files`, :mod:`.locking` — saved runs and the files of the report dir.
- :mod:`.verdict` — passed or failed, and why, read from the document.
- :mod:`.stages` — which component moved in a comparison: retrieval, answers or both.
- :mod:`.testcases` — gates and regressions as test reports (JUnit XML, the last line).
- :mod:`.text` — numbers, intervals and tables as both renderings print them.
- :mod:`.terminal`, :mod:`.html` — the ``ragbench`` section and ``report.html``, with
  :mod:`.plots` (matplotlib) and :mod:`.drilldown` (every item, shown by an inline script).

Only :mod:`.session` (and what it needs to follow the run) is imported at pytest start-up;
the rest (numpy, scipy, matplotlib) is imported at session end, and only when there are
records.
"""

REPORT_MARKER = ".ragbench-report"  # a file the report writes into its dir
