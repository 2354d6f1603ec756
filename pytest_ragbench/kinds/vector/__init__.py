"""The ``vector`` kind: retrieval and answer over documents."""
