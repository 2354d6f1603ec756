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
