"""One-line adapters from RAG frameworks to the plugin's protocols (README "Interfaces").

- :mod:`pytest_ragbench.adapters.langchain`: ``system(runnable)``, ``retriever(r)``,
  ``generator(chat_model)``;
- :mod:`pytest_ragbench.adapters.llama_index`: ``system(engine)``, ``retriever(r)``,
  ``generator(llm)``;
- :mod:`pytest_ragbench.adapters.haystack`: ``system(pipeline, answer=..., documents=...)``;
- :mod:`pytest_ragbench.adapters.http_service`: a RAG service over HTTP, built by the
  ``ragbench_system`` fixture when ``--ragbench-system-url`` is given.

Each framework module imports its framework when it is imported, so it is imported only by
the conftest.py that uses it; the plugin imports ``http_service`` only for that flag.
"""

import importlib
from types import ModuleType

FRAMEWORKS = ("langchain", "llama_index", "haystack", "http_service")


def __getattr__(name: str) -> ModuleType:
    """``adapters.langchain`` and the others, imported on first use (each loads its framework)."""
    if name not in FRAMEWORKS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")
