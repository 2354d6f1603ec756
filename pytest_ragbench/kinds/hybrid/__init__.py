"""The ``hybrid`` case kind: ``hybrid_ground_truth[...]`` and ``hybrid[...]`` items."""
