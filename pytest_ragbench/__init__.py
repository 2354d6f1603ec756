"""pytest-ragbench: evaluate RAG systems as an ordinary pytest suite."""

__version__ = "0.1.0"
