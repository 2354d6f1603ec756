"""pytest-ragbench: evaluate RAG systems as an ordinary pytest suite.

PYTEST_DONT_REWRITE: this file holds no asserts. pytest >= 9.2 marks an editable
install's plugin package for assertion rewriting and warns when the package is already
imported (every in-process pytester run); the submodules are still rewritten.
"""

__version__ = "0.1.0"
