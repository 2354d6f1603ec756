"""Qdrant as retriever and memory store (``--ragbench-qdrant-url`` / ``--ragbench-qdrant-path``).

- :mod:`.connection` — one client per location, every call bounded and retried.
- :mod:`.collection` — a corpus in a collection: built if missing, reused when it matches.
- :mod:`.retriever` — dense, BM25 or hybrid retrieval, fused by Qdrant.
- :mod:`.memory` — conversational memory in a collection.
- :mod:`.fixtures` — how the fixtures use them.
"""
