"""The ``traffic`` kind: a deployed app's logged interactions, evaluated without references.

Files: ``*.traffic.jsonl`` (the ``ragbench.traffic/1`` schema, formats/traffic.py) and
``*.otlp.jsonl`` (OpenTelemetry traces, formats/otlp.py), in the case paths or listed in
ini ``ragbench_traffic``; collected with ``--ragbench``. Each interaction is an item
``traffic[<file-stem>:<n>]`` (case.py, collect.py) scored by runner.py; the session's
windows, drift and triggers are report.py's section of the results document.
"""
