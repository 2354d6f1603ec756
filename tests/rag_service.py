"""A RAG service behind FastAPI and uvicorn on 127.0.0.1, for ``--ragbench-system-url`` tests.

``python -m tests.rag_service --corpus DIR [--retriever dense|keyword] [--log FILE]`` binds a
free port, prints it on the first line of its output, then serves:

- ``POST /rag`` ``{"query", "chat_history", ...}`` -> ``{"reply", "sources": [{"doc_id",
  "chunk", "relevance", "file"}]}``: the retriever's top 5 and the best one's first sentence
  (the answer of ``tests.adapter_apps.DirectSystem``), under the service's own key names;
- ``POST /rag/stream`` the same as server-sent events (``{"reply": piece}`` events, then
  ``{"sources": [...]}``, then ``[DONE]``), ``POST /rag/ndjson`` as JSON lines;
- faults, by a word in the question: ``FAIL500`` (HTTP 500), ``SLOW`` (replies after 5 s),
  ``MALFORMED`` (a cut JSON body), ``FLAKY`` (503 on the first try of each question),
  ``NOANSWER`` (JSON without ``reply``), ``PACED`` (a stream's first event after 0.2 s,
  the others 0.05 s apart: a known time to first token and inter-token latency);
- ``GET /health``.

With ``RAG_SERVICE_TOKEN`` in its environment it answers only ``Authorization: Bearer
<token>``. Every request body is appended to ``--log``.
"""

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 240.0  # the dense service loads torch and MiniLM first


def build_retriever(corpus: str, kind: str) -> Any:
    from pytest_ragbench.systems.corpus import load_corpus

    documents = load_corpus([corpus])
    if kind == "keyword":
        from tests.adapter_apps import KeywordRetriever

        return KeywordRetriever(documents)
    from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder
    from pytest_ragbench.systems.retrievers import DenseRetriever

    retriever = DenseRetriever(SentenceTransformerEmbedder())
    retriever.index(documents)
    return retriever


def create_app(retriever: Any, log: str | None = None, token: str | None = None) -> Any:
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.responses import JSONResponse, Response, StreamingResponse

    from tests.adapter_apps import first_sentence

    app = FastAPI()
    tries: Counter[str] = Counter()
    lock = threading.Lock()

    async def read(request: Request) -> tuple[str, list[Any]]:
        if token is not None and request.headers.get("authorization") != f"Bearer {token}":
            raise HTTPException(401, "missing or wrong bearer token")
        body = await request.json()
        if log:
            with lock, Path(log).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(body) + "\n")
        return str(body["query"]), list(body.get("chat_history") or [])

    def reply(question: str) -> dict[str, Any]:
        contexts = retriever.retrieve(question, top_k=5)
        return {"reply": first_sentence(contexts),
                "sources": [{"doc_id": c.id, "chunk": c.text, "relevance": c.score,
                             "file": c.metadata.get("source")} for c in contexts]}

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/rag")
    async def rag(request: Request) -> Any:
        question, _ = await read(request)
        with lock:
            tries[question] += 1
            first_try = tries[question] == 1
        if "FAIL500" in question:
            return JSONResponse({"detail": "the index is down"}, status_code=500)
        if "SLOW" in question:
            await asyncio.sleep(5)
        if "MALFORMED" in question:
            return Response('{"reply": "cut sho', media_type="application/json")
        if "FLAKY" in question and first_try:
            return JSONResponse({"detail": "warming up"}, status_code=503)
        if "NOANSWER" in question:
            return {"result": "no reply key here"}
        return await asyncio.to_thread(reply, question)

    def events(question: str) -> list[dict[str, Any]]:
        whole = reply(question)
        words = whole["reply"].split(" ")
        pieces = [{"reply": w + (" " if i < len(words) - 1 else "")} for i, w in enumerate(words)]
        return [*pieces, {"sources": whole["sources"]}]

    @app.post("/rag/stream")
    async def stream(request: Request) -> Any:
        question, _ = await read(request)
        found = await asyncio.to_thread(events, question)

        paced = "PACED" in question

        async def sse() -> Any:
            if paced:
                await asyncio.sleep(0.2)
            for event in found:
                yield f"data: {json.dumps(event)}\n\n"
                await asyncio.sleep(0.05 if paced else 0.001)
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    @app.post("/rag/ndjson")
    async def ndjson(request: Request) -> Any:
        question, _ = await read(request)
        found = await asyncio.to_thread(events, question)

        async def lines() -> Any:
            for event in found:
                yield json.dumps(event) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    return app


@contextlib.contextmanager
def serve(corpus: Path, retriever: str = "dense", log: Path | None = None,
          token: str | None = None) -> Iterator[str]:
    """Run the service in a subprocess; yields its base URL; stops it afterwards."""
    command = [sys.executable, "-m", "tests.rag_service", "--corpus", str(corpus),
               "--retriever", retriever] + (["--log", str(log)] if log else [])
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    env.pop("RAG_SERVICE_TOKEN", None)
    if token is not None:
        env["RAG_SERVICE_TOKEN"] = token
    errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed after the process)
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=errors, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline().strip()  # the port (nothing else is printed)
        if not first.isdigit():
            errors.seek(0)
            raise RuntimeError(f"the RAG service did not start:\n{errors.read()[-3000:]}")
        url = f"http://127.0.0.1:{first}"
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the RAG service at {url} is not answering")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        errors.close()


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--retriever", choices=("dense", "keyword"), default="dense")
    parser.add_argument("--log")
    args = parser.parse_args()
    app = create_app(build_retriever(args.corpus, args.retriever), args.log,
                     os.environ.get("RAG_SERVICE_TOKEN"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
