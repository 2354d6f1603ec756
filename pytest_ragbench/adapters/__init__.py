"""One-line adapters from RAG frameworks to the plugin's protocols (README "Interfaces").

- :mod:`pytest_ragbench.adapters.langchain`: ``system(runnable)``, ``retriever(r)``,
  ``generator(chat_model)``;
- :mod:`pytest_ragbench.adapters.llama_index`: ``system(engine)``, ``retriever(r)``,
  ``generator(llm)``;
- :mod:`pytest_ragbench.adapters.haystack`: ``system(pipeline, answer=..., documents=...)``.

Each module imports its framework when it is imported, so a module is imported only by the
conftest.py that uses it: the plugin never imports this package.
"""
