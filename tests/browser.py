"""Headless Chromium driven through the Chrome DevTools protocol (no browser download).

Debian's ``chromium`` is started with ``--remote-debugging-port=0``; the page is driven
over its WebSocket with ``websockets`` (sync client): navigate, evaluate JavaScript,
take screenshots. Used by the report.html tests and ``benchmarks/bench_report.py``.
Without a browser the tests skip, or fail when ``RAGBENCH_REQUIRE_BROWSER=1`` (CI).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-extensions", "--mute-audio")
MISSING = "headless Chromium not installed (Debian: apt-get install -y chromium)"


def chromium_path() -> str | None:
    """The Chromium executable, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def require_chromium() -> str:
    """The Chromium executable; skips the test (fails it in CI) when there is none."""
    import importlib.util

    import pytest

    found = chromium_path()
    problem = MISSING if not found else None
    if importlib.util.find_spec("websockets") is None:
        problem = "websockets not installed (pip install 'pytest-ragbench[dev]')"
    if problem is None and found:
        return found
    if os.environ.get("RAGBENCH_REQUIRE_BROWSER") == "1":
        pytest.fail(problem or MISSING)
    pytest.skip(problem or MISSING)


class Page:
    """One browser tab: send DevTools commands, wait for events."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, timeout: float = 120, **params: Any) -> dict[str, Any]:
        """Run one command and return its result (raises on a protocol error)."""
        self.next_id += 1
        ident = self.next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, timeout: float = 120) -> dict[str, Any]:
        """Wait for an event (one already received counts)."""
        for index, event in enumerate(self.events):
            if event["method"] == method:
                return self.events.pop(index)
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("method") == method:
                return message
            if "method" in message:
                self.events.append(message)

    def open(self, url: str, timeout: float = 120) -> float:
        """Navigate and wait for the load event; returns the seconds it took."""
        self.events.clear()
        started = time.perf_counter()
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired", timeout)
        return time.perf_counter() - started

    def evaluate(self, expression: str, timeout: float = 120) -> Any:
        """The value of a JavaScript expression (promises awaited)."""
        result = self.send("Runtime.evaluate", timeout, expression=expression,
                           returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, width: int = 1280, height: int = 2400) -> Path:
        """A PNG of the page's top ``width`` x ``height`` pixels."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def browser(chromium: str, timeout: float = 60) -> Iterator[Page]:
    """A headless Chromium with one tab, closed afterwards."""
    from websockets.sync.client import connect

    profile = tempfile.mkdtemp(prefix="ragbench-chromium-")
    # Its own session, so that the helper processes Chromium forks (which keep writing
    # to the profile for a moment after the browser exits) are ended with it.
    process = subprocess.Popen(
        [chromium, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
         "--remote-allow-origins=*", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        port = _devtools_port(process, timeout)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list",
                                    timeout=timeout) as reply:
            targets = json.loads(reply.read())
        target = next(t for t in targets if t.get("type") == "page")
        with connect(target["webSocketDebuggerUrl"], max_size=None,
                     open_timeout=timeout) as socket:
            page = Page(socket)
            page.send("Page.enable")
            page.send("Runtime.enable")
            yield page
    finally:
        _end_process_group(process)
        _remove_profile(profile)


def _end_process_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    # Whatever is left of the group (the browser, or helpers that outlived it).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _remove_profile(profile: str) -> None:
    # A killed helper may still be flushing into the profile; retry briefly.
    for _ in range(20):
        try:
            shutil.rmtree(profile)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    shutil.rmtree(profile, ignore_errors=True)


def _devtools_port(process: subprocess.Popen[str], timeout: float) -> int:
    assert process.stderr is not None
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        if match:
            return int(match.group(1))
    raise RuntimeError("Chromium did not start its DevTools server:\n" + "".join(seen[-20:]))
