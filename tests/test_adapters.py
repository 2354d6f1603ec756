"""The framework adapters against the real frameworks (langchain-core, llama-index-core,
haystack-ai) and their own fake models, over a keyword retriever (tests/adapter_apps.py).

Each adapter must hand the plugin what the app retrieved (ids, texts, sources, order) and
answered, pass prior turns to an app that takes them, read token usage from the
framework's own reports, and say clearly what it cannot read.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.cases.model import Turn
from pytest_ragbench.errors import UnusableReply
from pytest_ragbench.metrics.grades import agrade
from pytest_ragbench.systems.protocols import Usage
from tests.adapter_apps import ANSWER, USAGE, KeywordRetriever
from tests.helpers import four_documents

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
pytest.importorskip("haystack")

QUESTION = "When was the Eiffel Tower completed?"
HISTORY = [{"role": "user", "content": "Tell me about Paris landmarks."},
           {"role": "assistant", "content": "Paris has the Louvre and the Eiffel Tower."}]


@pytest.fixture
def retriever() -> KeywordRetriever:
    return KeywordRetriever(four_documents())


def expected(retriever: KeywordRetriever, question: str = QUESTION) -> list[tuple[str, str, str]]:
    return [(c.id, c.text, c.metadata["source"]) for c in retriever.retrieve(question, top_k=5)]


def got(answer: Any) -> list[tuple[str, str, str]]:
    return [(c.id, c.text, c.metadata["source"]) for c in answer.contexts]


def prompts(log: Path) -> list[str]:
    return [json.loads(line)["prompt"] for line in log.read_text().splitlines()]


# -- LangChain -----------------------------------------------------------------------------------

def test_langchain_system_gives_the_chains_answer_documents_and_history(
        retriever: KeywordRetriever, tmp_path: Path) -> None:
    from pytest_ragbench.adapters import langchain
    from tests.adapter_apps import langchain_chain

    log = tmp_path / "prompts.jsonl"
    system = langchain.system(langchain_chain(retriever, log))
    assert (system.input_key, system.history_key) == ("question", "chat_history")
    answer = system.answer(QUESTION, HISTORY)
    assert answer.text == ANSWER
    assert got(answer) == expected(retriever) and len(answer.contexts) >= 2
    assert [c.score for c in answer.contexts] == [
        c.score for c in retriever.retrieve(QUESTION)]  # the score kept in the metadata
    assert answer.latency_s > 0
    prompt = prompts(log)[-1]
    assert "human: Tell me about Paris landmarks.\nai: Paris has the Louvre and the Eiffel " \
           "Tower.\nhuman: When was the Eiffel Tower completed?" in prompt
    # The plugin's own case turns (Turn objects) arrive the same way; no history, none passed.
    system.answer(QUESTION, [Turn(role="user", content="Earlier question?")])
    assert "human: Earlier question?\nhuman: When" in prompts(log)[-1]
    system.answer(QUESTION)
    assert prompts(log)[-1].count("human:") == 1
    # ainvoke, as the prefetcher calls it
    again = asyncio.run(system.aanswer(QUESTION, HISTORY))
    assert again.text == ANSWER and got(again) == got(answer)


def test_langchain_string_chain_contexts_from_the_callbacks_and_usage(
        retriever: KeywordRetriever) -> None:
    from langchain_core.documents import Document as LCDocument
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough

    from pytest_ragbench.adapters import langchain

    class Docs(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[LCDocument]:
            return [LCDocument(page_content=c.text, metadata=dict(c.metadata), id=c.id)
                    for c in retriever.retrieve(query)]

    replies = iter([AIMessage("It was completed in 1889.", usage_metadata={
        "input_tokens": 31, "output_tokens": 7, "total_tokens": 38})] * 3)
    chain = ({"context": Docs() | (lambda docs: "\n".join(d.page_content for d in docs)),
              "question": RunnablePassthrough()}
             | ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{question}")])
             | GenericFakeChatModel(messages=replies) | StrOutputParser())
    system = langchain.system(chain)
    assert system.input_key is None  # the chain takes the question as a string
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        answer = system.answer(QUESTION)  # no history: nothing to warn about
    assert answer.text == "It was completed in 1889."
    assert got(answer) == expected(retriever)  # read from on_retriever_end
    # no score given: 1 / rank
    assert [c.score for c in answer.contexts] == [1 / r for r in range(1, len(answer.contexts) + 1)]
    assert answer.usage == Usage(31, 7, 38)  # the message's usage_metadata (on_llm_end)
    with pytest.warns(UserWarning, match="takes a string: the prior turns of conversational "
                                         "cases are not passed to it"):
        system.answer(QUESTION, HISTORY)


def test_langchain_output_without_an_answer_is_named(retriever: KeywordRetriever) -> None:
    from langchain_core.runnables import RunnableLambda

    from pytest_ragbench.adapters import langchain

    system = langchain.system(RunnableLambda(lambda q: {"reply": "x", "sources": []}))
    with pytest.raises(KeyError, match="returned a mapping with keys 'reply', 'sources': no "
                                       "answer among answer, result, output, text, response "
                                       r"\(give answer_key=\)"):
        system.answer(QUESTION)
    named = langchain.system(RunnableLambda(lambda q: {"reply": "x", "sources": []}),
                             answer_key="reply")
    assert named.answer(QUESTION).text == "x"
    with pytest.raises(TypeError, match="returned int: expected a string, a message or a mapping"):
        langchain.system(RunnableLambda(lambda q: 3)).answer(QUESTION)


def test_langchain_retriever_passes_k_to_a_vector_store() -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from pytest_ragbench.adapters import langchain

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_texts([d.text for d in four_documents()],
                    metadatas=[dict(d.metadata) for d in four_documents()])
    adapted = langchain.retriever(store.as_retriever())  # LangChain's own default k is 4
    assert [len(adapted.retrieve("Paris", top_k=k)) for k in (1, 2, 3)] == [1, 2, 3]
    many = adapted.retrieve_many(["Paris", "coffee"], top_k=2)
    assert [len(row) for row in many] == [2, 2]
    assert all(c.metadata["source"].endswith(".md") for row in many for c in row)


def test_langchain_generator_and_judge() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from pytest_ragbench.adapters import langchain

    judge = langchain.generator(FakeListChatModel(responses=['{"score": 7}', "seven"]))
    messages = [{"role": "user", "content": "Grade this."}]
    grade = asyncio.run(agrade(judge, messages, high=10, max_tokens=16))
    assert grade.score == 7
    with pytest.raises(UnusableReply, match="reply is not one JSON object: 'seven'"):
        judge.generate(messages, schema={"type": "object", "required": ["score"]})
    plain = langchain.generator(FakeListChatModel(responses=["hello"]))
    assert plain.generate(messages, temperature=0.0, max_tokens=5).text == "hello"
    with pytest.raises(ValueError, match="params: unknown name"):
        langchain.generator(FakeListChatModel(responses=["x"]), params=("top_p",))


# -- LlamaIndex ----------------------------------------------------------------------------------

def test_llama_index_query_engine_gives_source_nodes_and_usage(
        retriever: KeywordRetriever) -> None:
    from pytest_ragbench.adapters import llama_index
    from tests.adapter_apps import llama_index_engine

    system = llama_index.system(llama_index_engine(retriever))
    answer = system.answer(QUESTION)
    assert got(answer) == expected(retriever)
    assert [c.score for c in answer.contexts] == [c.score for c in retriever.retrieve(QUESTION)]
    assert QUESTION in answer.text  # MockLLM echoes its prompt
    assert answer.usage == Usage.from_dict(USAGE)  # one model call, from its end event
    again = asyncio.run(system.aanswer(QUESTION))
    assert got(again) == got(answer) and again.usage == Usage.from_dict(USAGE)
    with pytest.warns(UserWarning, match="takes no conversation history"):
        system.answer(QUESTION, HISTORY)


def test_llama_index_chat_engine_gets_the_history_and_forgets_it(
        retriever: KeywordRetriever) -> None:
    from pytest_ragbench.adapters import llama_index
    from tests.adapter_apps import llama_index_engine

    system = llama_index.system(llama_index_engine(retriever, chat=True))
    answer = system.answer(QUESTION, HISTORY)
    assert "user: Tell me about Paris landmarks.\nassistant: Paris has the Louvre and the " \
           "Eiffel Tower.\nuser: When was the Eiffel Tower completed?" in answer.text
    assert got(answer) == expected(retriever)
    later = system.answer("Who created Python?")  # a new conversation: no earlier turn
    assert "Paris landmarks" not in later.text and "When was the Eiffel" not in later.text
    assert later.contexts[0].metadata["source"] == "python.md"


def test_llama_index_retriever_and_generator(retriever: KeywordRetriever) -> None:
    from llama_index.core.llms import MockLLM

    from pytest_ragbench.adapters import llama_index
    from tests.adapter_apps import llama_index_engine

    nodes = llama_index_engine(retriever).retriever
    adapted = llama_index.retriever(nodes)
    assert [c.id for c in adapted.retrieve(QUESTION, top_k=1)] == [expected(retriever)[0][0]]
    assert len(adapted.retrieve_many([QUESTION, "coffee"], top_k=5)) == 2
    generator = llama_index.generator(MockLLM())
    reply = generator.generate([{"role": "user", "content": "Say hi."}])
    assert "Say hi." in reply.text  # the echo
    with pytest.raises(UnusableReply, match="reply is not one JSON object"):
        generator.generate([{"role": "user", "content": "Grade."}],
                           schema={"type": "object", "required": ["score"]})


# -- Haystack ------------------------------------------------------------------------------------

def test_haystack_pipeline_documents_answer_history_and_usage(
        retriever: KeywordRetriever, tmp_path: Path) -> None:
    from pytest_ragbench.adapters import haystack
    from tests.adapter_apps import haystack_pipeline

    log = tmp_path / "prompts.jsonl"
    system = haystack.system(haystack_pipeline(retriever, log))
    assert (system.answer_component, system.documents_component) == ("llm", "retriever")
    assert system.question_inputs == [("retriever", "query"), ("prompt_builder", "question")]
    assert system.history_inputs == [("prompt_builder", "history")]
    answer = system.answer(QUESTION, HISTORY)
    assert answer.text == ANSWER
    assert got(answer) == expected(retriever)
    assert answer.usage == Usage.from_dict(USAGE)  # the reply's meta["usage"]
    assert "user: Tell me about Paris landmarks.\nassistant: Paris has the Louvre and the " \
           "Eiffel Tower.\nWhen was the Eiffel Tower completed?" in prompts(log)[-1]
    again = asyncio.run(system.aanswer(QUESTION))
    assert got(again) == got(answer)
    assert "Paris landmarks" not in prompts(log)[-1]


def test_haystack_answer_builder_documents_and_clear_errors(retriever: KeywordRetriever) -> None:
    from haystack.components.builders import AnswerBuilder

    from pytest_ragbench.adapters import haystack
    from tests.adapter_apps import haystack_pipeline

    pipeline = haystack_pipeline(retriever)
    pipeline.add_component("answer_builder", AnswerBuilder())
    pipeline.connect("llm.replies", "answer_builder.replies")
    pipeline.connect("retriever.documents", "answer_builder.documents")
    system = haystack.system(pipeline)  # the AnswerBuilder's answer and its documents
    assert (system.answer_component, system.documents_component) == ("answer_builder", None)
    answer = system.answer(QUESTION)
    assert answer.text == ANSWER and got(answer) == expected(retriever)
    assert answer.usage == Usage.from_dict(USAGE)

    with pytest.raises(ValueError, match="has no component 'generator' "
                                         r"\(components: retriever, prompt_builder, llm"):
        haystack.system(pipeline, answer="generator")
    with pytest.raises(ValueError, match="no open input named q for the question"):
        haystack.system(pipeline, question="q")
    bare = haystack_pipeline(retriever)
    bare.add_component("second_retriever", type(bare.get_component("retriever"))(retriever, 2))
    with pytest.raises(ValueError, match="several components of the Haystack pipeline give "
                                         r"'documents' \(retriever, second_retriever\): give "
                                         "documents="):
        haystack.system(bare)
