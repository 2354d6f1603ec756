"""The ``sql`` case kind: ``sql_ground_truth[...]`` and ``sql[...]`` items."""
