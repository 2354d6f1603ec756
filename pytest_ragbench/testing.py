"""A small OpenAI-compatible chat server on 127.0.0.1 with scripted replies and faults.

For the project's tests and benchmarks, and for dry runs of a configuration without a
real model: ``python -m pytest_ragbench.testing --port 8011 --latency 0.1``
serves ``http://127.0.0.1:8011/v1``. Faults are queued with :meth:`LoopbackServer.fail`
and consumed one per request: ``"429"`` (with ``Retry-After``), ``"500"``, ``"401"``,
``"hang"`` (no reply until stopped), ``"malformed"`` (a 200 whose body is not JSON),
``"reset"`` (the connection is dropped with a TCP reset) and ``"echo"`` (a 401 whose body
echoes the request's headers, credentials included, as some proxies do).

Each reply names the model that was asked for, or ``model`` when given (a server that
answers as another model).

Structured output: ``formats`` lists the ``response_format`` types the server accepts
(default ``json_schema`` and ``json_object``); any other is refused with ``reject_status``
and a body naming ``response_format`` — as llama-cpp-python's server answers HTTP 500
to ``json_schema``.

It is an asyncio server on its own thread (HTTP/1.1 with keep-alive), so a hundred
concurrent requests cost no threads and the configured latency is all there is.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from typing import Any

Reply = Callable[[dict[str, Any]], str]
FAULTS = ("429", "500", "401", "hang", "malformed", "reset", "echo")


def echo_reply(body: dict[str, Any]) -> str:
    """Reply with the last user message, prefixed (a deterministic stand-in answer)."""
    users = [m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"]
    return f"echo: {users[-1] if users else ''}"


class LoopbackServer:
    """Serves ``POST /v1/chat/completions`` from a background thread; a context manager."""

    def __init__(self, reply: str | Reply = echo_reply, *, latency_s: float = 0.0,
                 accept_schema: bool = True, retry_after: str = "0.2", port: int = 0,
                 formats: tuple[str, ...] = ("json_schema", "json_object"),
                 reject_status: int = 400, model: str | None = None) -> None:
        self.reply = reply
        self.model = model  # the model each reply says answered (default: the one asked for)
        self.latency_s = latency_s
        self.formats = formats if accept_schema else ()
        self.reject_status = reject_status
        self.retry_after = retry_after
        self.requests: list[dict[str, Any]] = []
        self.arrivals: list[float] = []  # time.monotonic() of each request, in order
        self.authorizations: list[str | None] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._faults: collections.deque[str] = collections.deque()
        self._lock = threading.Lock()
        self._port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Return the base URL (ending in /v1) to give to a client."""
        return f"http://127.0.0.1:{self._port}/v1"

    def fail(self, *faults: str) -> None:
        """Queue faults for the next requests, one per request, in order."""
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault(s) {unknown}; choose from {FAULTS}")
        with self._lock:
            self._faults.extend(faults)

    def start(self) -> LoopbackServer:
        """Start serving; returns once the port accepts connections."""
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._open())
            except BaseException as exc:  # e.g. the port is taken
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="ragbench-loopback", daemon=True)
        self._thread.start()
        ready.wait()
        if errors:
            raise errors[0]
        return self

    async def _open(self) -> None:
        self._stopping = asyncio.Event()
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", self._port,
                                                  backlog=512)
        self._port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Stop serving and release hanging requests."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def close() -> None:
            assert self._server is not None and self._stopping is not None
            self._stopping.set()
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(close(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_fault(self) -> str | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one_request(reader, writer):
                pass
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # the client went away mid-request
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()

    async def _one_request(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> bool:
        """Serve one request; returns whether the connection stays open."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # the client closed an idle keep-alive connection
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        with self._lock:
            self.requests.append(body)
            self.arrivals.append(time.monotonic())
            self.authorizations.append(headers.get("authorization"))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._respond(body, writer, headers)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _respond(self, body: dict[str, Any], writer: asyncio.StreamWriter,
                       headers: dict[str, str]) -> bool:
        assert self._stopping is not None
        fault = self._next_fault()
        if fault == "hang":
            await self._stopping.wait()
            return False
        if fault == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if fault == "429":
            await _send(writer, 429, {"error": {"message": "rate limited"}},
                        {"Retry-After": self.retry_after})
        elif fault in ("500", "401"):
            await _send(writer, int(fault), {"error": {"message": f"scripted {fault}"}})
        elif fault == "echo":
            await _send(writer, 401, {"error": {
                "message": "invalid credentials", "authorization": headers.get("authorization"),
                "request_headers": headers}})
        elif fault == "malformed":
            await _send_raw(writer, 200, b'{"choices": [{"message": {"content": "trunc')
        elif "response_format" in body and _format(body) not in self.formats:
            await _send(writer, self.reject_status, {"error": {
                "message": f"response_format: type {_format(body)!r} is not supported"}})
        else:
            content = self.reply(body) if callable(self.reply) else self.reply
            await _send(writer, 200, _completion(body, content, self.model))
        return True


def _format(body: dict[str, Any]) -> str:
    """The ``response_format`` type a request asks for."""
    fmt = body.get("response_format")
    return str(fmt.get("type")) if isinstance(fmt, dict) else str(fmt)


async def _send(writer: asyncio.StreamWriter, status: int, payload: dict[str, Any],
                headers: dict[str, str] | None = None) -> None:
    await _send_raw(writer, status, json.dumps(payload).encode("utf-8"), headers)


async def _send_raw(writer: asyncio.StreamWriter, status: int, data: bytes,
                    headers: dict[str, str] | None = None) -> None:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
             "Content-Type: application/json", f"Content-Length: {len(data)}",
             *(f"{name}: {value}" for name, value in (headers or {}).items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
    await writer.drain()


def _completion(body: dict[str, Any], content: str, model: str | None = None) -> dict[str, Any]:
    prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    completion = len(content.split())
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model or body.get("model", "loopback"),
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion},
    }


@contextlib.contextmanager
def server_process(latency: float = 0.0, reply: str | None = None) -> Iterator[str]:
    """Run the loopback server in a process of its own, like a real model server; yield its URL.

    A separate process shares no GIL with the client under measurement (benchmarks).
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", __name__, "--port", str(port), "--latency", str(latency)]
    proc = subprocess.Popen(command + (["--reply", reply] if reply else []),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the loopback server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(10)


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    parser.add_argument("--reply", default=None, help="fixed reply text (default: echo)")
    args = parser.parse_args(argv)
    server = LoopbackServer(args.reply or echo_reply, latency_s=args.latency, port=args.port)
    with server:
        print(f"serving {server.url} (Ctrl-C to stop)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
