"""One qdrant-client per Qdrant location, with every call bounded and retried.

A location is a server (``--ragbench-qdrant-url``; API key from the environment variable
``RAGBENCH_QDRANT_API_KEY``) or qdrant-client's local mode (``--ragbench-qdrant-path``:
a folder, or ``:memory:``). Calls to a server are retried like the model clients: a
refused connection, a timeout, a 5xx, 408 or 429 is tried again after an exponential
backoff with jitter, up to ``retries`` more times, each attempt bounded by ``timeout_s``
(qdrant-client rounds it up to whole seconds); then :class:`QdrantError` says what failed,
where and how often. Other 4xx answers are not retried. The API key goes to the client
and nowhere else: not into a repr, an error message, a log line or a report.

Imported only when Qdrant is used (imports qdrant-client lazily, in :meth:`client`).
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pytest_ragbench.errors import RagbenchError
from pytest_ragbench.redact import mask_url, register, scrub

T = TypeVar("T")
API_KEY_ENV = "RAGBENCH_QDRANT_API_KEY"
QDRANT_EXTRA_HINT = "install the extra 'qdrant' (pip install 'pytest-ragbench[qdrant]')"
RETRY_STATUS = frozenset({408, 429})


class QdrantError(RagbenchError):
    """A Qdrant call failed (after its retries), or a collection cannot be used."""


@dataclass(frozen=True)
class QdrantLocation:
    """Where the collections live: ``url`` (a server) or ``path`` (local mode)."""

    url: str | None = None
    path: str | None = None  # a folder, or ":memory:"
    timeout_s: float = 60.0
    retries: int = 4
    api_key_env: str = API_KEY_ENV

    def __post_init__(self) -> None:
        if (self.url is None) == (self.path is None):
            raise ValueError("give exactly one of url and path")

    @property
    def remote(self) -> bool:
        """True for a server, False for local mode."""
        return self.url is not None

    def describe(self) -> str:
        """The server's URL (credentials masked), or ``local mode <path>``."""
        if self.url is not None:
            return str(mask_url(self.url))
        return f"local mode {self.path}"


class QdrantConnection:
    """A lazily opened qdrant-client; :meth:`call` runs one operation with retries.

    Local mode is not thread-safe, so its calls are serialised; a server's are not.
    """

    def __init__(self, location: QdrantLocation, *, backoff_base_s: float = 0.25,
                 backoff_max_s: float = 5.0) -> None:
        self.location = location
        self.backoff_base_s, self.backoff_max_s = backoff_base_s, backoff_max_s
        self._client: Any = None
        self._open_lock = threading.Lock()
        self._local_lock = threading.RLock()
        self.attempts = 0  # every attempt made, retries included

    def __repr__(self) -> str:
        return f"QdrantConnection({self.location.describe()!r})"

    def describe(self) -> str:
        """One line naming the location (without credentials)."""
        return f"Qdrant at {self.location.describe()}"

    def client(self) -> Any:
        """The qdrant-client, opened at the first call."""
        with self._open_lock:
            if self._client is None:
                self._client = self._open()
            return self._client

    def _open(self) -> Any:
        try:
            from qdrant_client import QdrantClient
        except ImportError:
            raise QdrantError(f"qdrant-client is not installed: {QDRANT_EXTRA_HINT}") from None
        location = self.location
        if location.url is not None:
            api_key = os.environ.get(location.api_key_env) or None
            register(api_key)  # masked should qdrant-client ever echo it
            return QdrantClient(url=location.url, api_key=api_key,
                                timeout=max(1, int(-(-location.timeout_s // 1))),
                                prefer_grpc=False, check_compatibility=False)
        if location.path == ":memory:":
            return QdrantClient(location=":memory:", force_disable_check_same_thread=True)
        try:
            return QdrantClient(path=location.path, force_disable_check_same_thread=True)
        except RuntimeError as exc:  # "already accessed by another instance"
            raise QdrantError(f"cannot open {location.describe()}: {exc}") from None
        except Exception as exc:  # a damaged storage folder
            raise QdrantError(f"cannot open {location.describe()}: {_scrub(str(exc))} "
                              f"({type(exc).__name__}); delete the folder to start "
                              "afresh") from None

    @contextlib.contextmanager
    def _serialised(self) -> Iterator[None]:
        if self.location.remote:
            yield
        else:
            with self._local_lock:
                yield

    def call(self, what: str, operation: Callable[[Any], T]) -> T:
        """Run ``operation(client)``, retrying transient failures of a server."""
        client = self.client()
        tries = self.location.retries + 1 if self.location.remote else 1
        for attempt in range(1, tries + 1):
            self.attempts += 1
            try:
                with self._serialised():
                    return operation(client)
            except QdrantError:
                raise
            except Exception as exc:
                reason, transient = self._classify(exc)
                if not transient or attempt == tries:
                    raise QdrantError(self._message(what, reason, attempt)) from None
            delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
            time.sleep(delay * (0.5 + random.random() / 2))
        raise AssertionError("unreachable")

    def _classify(self, exc: Exception) -> tuple[str, bool]:
        """A short reason for ``exc`` and whether another attempt may succeed."""
        try:
            from qdrant_client.http.exceptions import (
                ResponseHandlingException,
                UnexpectedResponse,
            )
        except ImportError:  # pragma: no cover - the client imported it already
            return _scrub(f"{type(exc).__name__}: {exc}"), False
        if isinstance(exc, UnexpectedResponse):
            status = exc.status_code or 0
            detail = _answer_detail(exc.content)
            text = f"HTTP {status} {exc.reason_phrase}".rstrip() + (f": {detail}" if detail else "")
            return _scrub(text), status >= 500 or status in RETRY_STATUS
        if isinstance(exc, ResponseHandlingException):
            return _transport_reason(exc.source, self.location.timeout_s), True
        return _scrub(f"{type(exc).__name__}: {exc}"), False

    def _message(self, what: str, reason: str, attempts: int) -> str:
        tries = f" after {attempts} attempt{'s' if attempts != 1 else ''}" if attempts > 1 else ""
        where = self.describe()
        limits = (f" (timeout {self.location.timeout_s:g} s per call, "
                  f"{self.location.retries} retries)" if self.location.remote else "")
        return f"{where}: {what} failed{tries}: {reason}{limits}"

    def reopen(self) -> None:
        """Close the client; the next call opens it again (local mode reloads its folder)."""
        self.close()

    def close(self) -> None:
        """Close the client (and release a local-mode folder)."""
        with self._open_lock:
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


def _transport_reason(source: BaseException, timeout_s: float) -> str:
    import httpx

    if isinstance(source, httpx.TimeoutException):
        return f"no answer within {timeout_s:g} s ({type(source).__name__})"
    if isinstance(source, httpx.ConnectError):
        return f"cannot connect ({_scrub(str(source)) or 'connection refused'})"
    if isinstance(source, httpx.RemoteProtocolError | httpx.ReadError):
        return f"the connection was dropped ({type(source).__name__})"
    return _scrub(f"{type(source).__name__}: {source}")


def _answer_detail(content: bytes) -> str:
    """The ``status.error`` of a Qdrant error answer, else the start of the body."""
    import json

    try:
        data = json.loads(content or b"null")
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        status = data.get("status")
        if isinstance(status, Mapping) and status.get("error"):
            return str(status["error"])[:300]
        error = data.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            return str(error["message"])[:300]
    return content[:200].decode("utf-8", "replace").strip()


def _scrub(text: str) -> str:
    """Mask the API key (and any other secret) in a message, should a library echo it."""
    return scrub(text)
