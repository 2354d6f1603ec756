"""From files to pytest items: which files hold cases, their collectors, and selection.

- :mod:`.files` — case files and folders, and the ``pytest.File`` collector of case files.
- :mod:`.items` — the items: one ``pytest.Function`` per case and item kind.
- :mod:`.guard` — each real folder and file once; unreadable ones skipped with a warning.
- :mod:`.selection` — ``--ragbench-limit``, and the cases that wait for ``--ragbench``.

Kinds that read their own formats (BEIR folders, RAGCSV files) bring their collectors
(:mod:`pytest_ragbench.kinds`).
"""
