"""The ``ragas`` kind: RAGAS metrics on NormalizedSample records."""
