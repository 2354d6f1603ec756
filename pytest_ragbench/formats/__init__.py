"""Readers of external data formats shared by the test kinds and the dataset builder.

Each reader uses only the standard library at import time and returns the records it
could read together with a list of :class:`~pytest_ragbench.errors.CaseError` for the
lines it could not; a problem with a whole file raises ``CaseError``.
"""
