"""The ``memory`` kind: conversational-memory scenarios."""
