"""RAG apps built with the real frameworks over one retriever, for the adapters' tests.

Each app searches through its framework's own retriever interface (a LangChain
``BaseRetriever``, a LlamaIndex ``BaseRetriever``, a Haystack component) wrapping the
retriever it is given, so its retrieval is that retriever's; it answers with the
framework's own fake model (LangChain's ``FakeListChatModel``, LlamaIndex's ``MockLLM``,
which echoes its prompt, a Haystack chat-generator component). With ``log``, every prompt
a fake model gets is appended to that JSONL file, to show that prior turns reached it.

Tests import this module; pytester projects get a copy as ``apps.py``. The frameworks are
imported inside the functions.
"""


import json
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.systems.protocols import Answer, Context, Document

ANSWER = "The documents cover this; the first source gives the details."
USAGE = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
_LOG_LOCK = threading.Lock()

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no network from the tests


def first_sentence(contexts: Sequence[Context]) -> str:
    """The direct system's answer: the best context's first sentence."""
    if not contexts:
        return "I don't know."
    text = " ".join(contexts[0].text.split())
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]


def log_prompt(log: str | Path | None, app: str, prompt: str) -> None:
    """Append one prompt a fake model was given."""
    if log is None:
        return
    with _LOG_LOCK, Path(log).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"app": app, "prompt": prompt}) + "\n")


class KeywordRetriever:
    """Ranks documents by the words they share with the query (no model: cheap tests)."""

    def __init__(self, documents: Sequence[Document]) -> None:
        self.documents = list(documents)

    @staticmethod
    def _words(text: str) -> set[str]:
        return set(re.findall(r"\w+", text.lower()))

    def retrieve(self, query: str, top_k: int = 5, filters: Any = None,
                 min_score: Any = None) -> list[Context]:
        words = self._words(query)
        scored = [(len(words & self._words(d.text)) / (1 + len(words)), i, d)
                  for i, d in enumerate(self.documents)]
        best = sorted(scored, key=lambda t: (-t[0], t[1]))[:top_k]
        return [Context(d.id, d.text, s, dict(d.metadata)) for s, _, d in best if s > 0]

    def retrieve_many(self, queries: Sequence[str], top_k: int = 5, filters: Any = None,
                      min_score: Any = None) -> list[list[Context]]:
        return [self.retrieve(q, top_k) for q in queries]


class DirectSystem:
    """The retriever used directly: its top 5, and the best one's first sentence."""

    def __init__(self, retriever: Any, top_k: int = 5) -> None:
        self.retriever, self.top_k = retriever, top_k

    def answer(self, question: str, history: Any = None) -> Answer:
        contexts = tuple(self.retriever.retrieve(question, top_k=self.top_k))
        return Answer(first_sentence(contexts), contexts)


# -- LangChain -----------------------------------------------------------------------------------

def langchain_chain(retriever: Any, log: str | Path | None = None, top_k: int = 5) -> Any:
    """A conversational LCEL chain: ``{question, chat_history}`` -> ``{answer, context}``."""
    from operator import itemgetter

    from langchain_core.documents import Document as LCDocument
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    class Docs(BaseRetriever):
        source: Any
        k: int = 5

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[LCDocument]:
            return [LCDocument(page_content=c.text, metadata={**c.metadata, "score": c.score},
                               id=c.id) for c in self.source.retrieve(query, top_k=self.k)]

    def spy(prompt: Any) -> Any:
        log_prompt(log, "langchain", "\n".join(f"{m.type}: {m.content}"
                                               for m in prompt.to_messages()))
        return prompt

    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from these documents:\n{documents}"),
        MessagesPlaceholder("chat_history"), ("human", "{question}")])
    generate = (RunnablePassthrough.assign(
        documents=lambda x: "\n\n".join(d.page_content for d in x["context"]))
        | prompt | RunnableLambda(spy) | FakeListChatModel(responses=[ANSWER])
        | StrOutputParser())
    return (RunnablePassthrough.assign(context=itemgetter("question")
                                       | Docs(source=retriever, k=top_k))
            .assign(answer=generate))


# -- LlamaIndex ----------------------------------------------------------------------------------

def llama_index_engine(retriever: Any, log: str | Path | None = None, chat: bool = False,
                       top_k: int = 5) -> Any:
    """A query engine (or, ``chat``, a context chat engine) answered by an echoing MockLLM."""
    from llama_index.core.chat_engine import ContextChatEngine
    from llama_index.core.llms import CompletionResponse, MockLLM
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode

    class Nodes(BaseRetriever):
        def __init__(self, source: Any, k: int) -> None:
            self._source, self._k = source, k
            super().__init__()

        def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(text=c.text, id_=c.id,
                                                metadata=dict(c.metadata)), score=c.score)
                    for c in self._source.retrieve(query_bundle.query_str, top_k=self._k)]

    class LoggingMockLLM(MockLLM):
        """MockLLM's echo of the prompt, with the usage a real model would report."""

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False,
                     **kwargs: Any) -> CompletionResponse:
            log_prompt(log, "llama_index", prompt)
            return CompletionResponse(text=prompt, additional_kwargs=dict(USAGE))

    nodes = Nodes(retriever, top_k)
    if chat:
        return ContextChatEngine.from_defaults(retriever=nodes, llm=LoggingMockLLM())
    return RetrieverQueryEngine.from_args(nodes, llm=LoggingMockLLM())


# -- Haystack ------------------------------------------------------------------------------------

def haystack_pipeline(retriever: Any, log: str | Path | None = None, top_k: int = 5) -> Any:
    """retriever -> chat prompt builder (documents, history, question) -> generator."""
    from haystack import Document as HSDocument
    from haystack import Pipeline, component
    from haystack.components.builders import ChatPromptBuilder
    from haystack.dataclasses import ChatMessage

    @component
    class Retrieve:
        def __init__(self, source: Any, k: int) -> None:
            self.source, self.k = source, k

        @component.output_types(documents=list[HSDocument])
        def run(self, query: str) -> dict[str, Any]:
            return {"documents": [HSDocument(id=c.id, content=c.text, meta=dict(c.metadata),
                                             score=c.score)
                                  for c in self.source.retrieve(query, top_k=self.k)]}

    @component
    class ScriptedChatGenerator:
        @component.output_types(replies=list[ChatMessage])
        def run(self, messages: list[ChatMessage]) -> dict[str, Any]:
            log_prompt(log, "haystack", "\n".join(str(m.text) for m in messages))
            return {"replies": [ChatMessage.from_assistant(ANSWER, meta={"usage": dict(USAGE)})]}

    template = [ChatMessage.from_system(
                    "Answer from these documents:\n"
                    "{% for d in documents %}{{ d.content }}\n{% endfor %}"),
                ChatMessage.from_user(
                    "{% for m in history %}{{ m.role.value }}: {{ m.text }}\n{% endfor %}"
                    "{{ question }}")]
    pipeline = Pipeline()
    pipeline.add_component("retriever", Retrieve(retriever, top_k))
    pipeline.add_component("prompt_builder", ChatPromptBuilder(
        template=template, required_variables=["question", "documents"]))
    pipeline.add_component("llm", ScriptedChatGenerator())
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.messages")
    return pipeline


# -- the comparison of tests/test_adapters_runs.py and benchmarks/bench_adapters.py --------------
# A project's conftest.py registering the direct system and the three apps over the built-in
# dense retriever; "default" is the service of --ragbench-system-url (tests/rag_service.py).

SYSTEMS_CONFTEST = '''
from apps import DirectSystem, haystack_pipeline, langchain_chain, llama_index_engine
from pytest_ragbench.adapters import haystack, langchain, llama_index
from pytest_ragbench.systems.fixtures import builtin_retriever


def dense(request):
    return builtin_retriever(request, "dense")  # MiniLM + FAISS over ragbench_corpus


def pytest_ragbench_systems(config):
    return {
        "direct": lambda request: DirectSystem(dense(request)),
        "langchain": lambda request: langchain.system(langchain_chain(dense(request))),
        "llama_index": lambda request: llama_index.system(
            llama_index_engine(dense(request), chat=True)),
        "haystack": lambda request: haystack.system(haystack_pipeline(dense(request))),
    }
'''
SERVICE_INI = """
ragbench_system_request = {"query": "{question}", "chat_history": "{history}"}
ragbench_system_answer = reply
ragbench_system_contexts = sources[*].{id: doc_id, text: chunk, score: relevance, source: file}
"""
COMPARED = ("direct", "langchain", "llama_index", "haystack", "default")
