"""``ragbench generate``: evaluation cases from a team's own database, tables, logs and documents.

One module per source; each returns :class:`~.common.Generated` (the cases and the
accounting of what was kept, rejected and verified):

- ``sql``: questions from a database schema, ground truth by executing the SQL read-only;
- ``tables``: lookup, numeric and comparison questions on CSV/Markdown tables;
- ``logs``: counts, first/last occurrences, event templates, hosts and users from logs;
- ``documents``: passages of a folder of Markdown, text, HTML and PDF files, or of a BEIR
  corpus; ``questions``: vector cases a model writes from them, kept through filters.

Every case carries ``provenance`` and ``review: draft``: a person accepts or rejects it
(``ragbench review``) before ``pytest --ragbench`` runs it without ``--ragbench-drafts``.
"""
