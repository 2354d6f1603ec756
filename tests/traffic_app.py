"""A small RAG app traced as teams trace theirs: LangChain, OpenInference, OpenTelemetry.

The chain is real langchain-core (a retriever, a prompt, a FakeListChatModel, an output
parser), instrumented by the real ``openinference-instrumentation-langchain`` into the
OpenTelemetry SDK; finished spans are written by :class:`OtlpJsonLinesExporter` with
OpenTelemetry's own OTLP encoder, one ``ExportTraceServiceRequest`` per line as the
collector's file exporter does. What the app retrieves (passages and their scores) and
when each request happens (the process's clock, moved by time-machine) are the
simulation's: :meth:`TracedApp.ask` takes them, so a
test can plant a drop in quality in a chosen week.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class OtlpJsonLinesExporter:
    """A SpanExporter writing each export as one OTLP/JSON line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def export(self, spans: Sequence[Any]) -> Any:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        line = json.dumps(MessageToDict(encode_spans(spans)))
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Every export is written at once."""
        return True


class TracedApp:
    """The instrumented chain; :meth:`ask` answers one question at a simulated time."""

    def __init__(self, path: Path) -> None:
        import opentelemetry.sdk.trace as sdk_trace
        from langchain_core.callbacks import CallbackManagerForRetrieverRun
        from langchain_core.documents import Document
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
        from langchain_core.output_parsers import StrOutputParser
        from langchain_core.prompts import ChatPromptTemplate
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import RunnableLambda
        from openinference.instrumentation.langchain import LangChainInstrumentor
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        self.provider = sdk_trace.TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLinesExporter(path)))
        self.instrumentor = LangChainInstrumentor()
        self.instrumentor.instrument(tracer_provider=self.provider)
        self.next_hits: list[tuple[str, float]] = []
        app = self

        class KnowledgeBase(BaseRetriever):
            """Returns what the simulation chose, with scores in metadata as vector stores do."""

            def _get_relevant_documents(self, query: str, *,
                                        run_manager: CallbackManagerForRetrieverRun
                                        ) -> list[Document]:
                return [Document(page_content=text, id=f"kb-{i}",
                                 metadata={"score": score, "id": f"kb-{i}"})
                        for i, (text, score) in enumerate(app.next_hits)]

        self.llm = FakeListChatModel(responses=["(unused)"])
        prompt = ChatPromptTemplate.from_template(
            "Answer from the context.\nContext: {context}\nQuestion: {question}")
        self.chain = ({"context": KnowledgeBase(), "question": RunnableLambda(lambda q: q)}
                      | prompt | self.llm | StrOutputParser())

    def ask(self, question: str, hits: list[tuple[str, float]], answer: str,
            when: dt.datetime, user: str, feedback: bool | None = None) -> str:
        """Run the chain once at ``when`` (the retriever returns ``hits``)."""
        import time_machine
        from openinference.instrumentation import using_attributes

        self.next_hits = hits
        self.llm.responses = [answer]
        self.llm.i = 0
        metadata = {} if feedback is None else {"user_feedback": feedback}
        # the whole process's clock (LangChain's run times become the spans' times)
        with time_machine.travel(when, tick=True), using_attributes(
                session_id=f"session-{user}", user_id=user, metadata=metadata):
            return str(self.chain.invoke(question))

    def close(self) -> None:
        """Stop instrumenting LangChain and flush the spans."""
        self.instrumentor.uninstrument()
        self.provider.shutdown()


@contextmanager
def traced_app(path: Path) -> Iterator[TracedApp]:
    """A :class:`TracedApp` writing to ``path``, uninstrumented on exit."""
    app = TracedApp(path)
    try:
        yield app
    finally:
        app.close()
