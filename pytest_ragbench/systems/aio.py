"""An asyncio event loop in a background thread, shared by model clients and prefetching.

pytest items run synchronously; model calls are asynchronous so that many can be in
flight at once. Every async client of a session runs on one such loop, which makes
each client's concurrency limit hold for the whole session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A daemon thread running an event loop; started on first use, stopped by close()."""

    def __init__(self, name: str = "ragbench-loop") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """Return the running loop, starting the thread if needed."""
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name=self.name, daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def in_loop_thread(self) -> bool:
        """Return whether the caller runs on this loop's thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule a coroutine on the loop and return a thread-safe future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the loop and wait for its result."""
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError("LoopThread.run() called from its own loop; await instead")
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        """Cancel pending tasks, stop the loop and join the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def _shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if thread.is_alive():
            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                asyncio.run_coroutine_threadsafe(_shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
        if not loop.is_running():
            loop.close()
