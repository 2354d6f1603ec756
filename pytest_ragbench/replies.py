"""Model replies are stored capped: ini ``ragbench_max_reply_bytes`` (default 1 MB).

A reply longer than the cap keeps its beginning (whole UTF-8 characters) and a note of
the cut, ``max_bytes`` in all, so the cache, the records and every report file hold at
most that much of it. Cheap to import.
"""

from __future__ import annotations

from typing import Any

DEFAULT_MAX_REPLY_BYTES = 1_000_000
INI = "ragbench_max_reply_bytes"


def cut(text: str, max_bytes: int) -> tuple[str, int | None]:
    """``text`` within ``max_bytes`` (with a note of the cut), and its size when it was cut."""
    if len(text) * 4 <= max_bytes:  # no character takes more than 4 bytes
        return text, None
    encoded = text.encode("utf-8", errors="surrogatepass")
    if len(encoded) <= max_bytes:
        return text, None
    note = f"\n[... cut: the reply has {len(encoded):,} bytes, {INI} keeps {max_bytes:,}]"
    room = max(max_bytes - len(note.encode()), 0)  # the note counts: cut once, stays cut
    return encoded[:room].decode("utf-8", errors="ignore") + note, len(encoded)


def cut_strings(value: Any, max_bytes: int) -> Any:
    """``value`` with every string longer than ``max_bytes`` cut (dicts and lists walked)."""
    if isinstance(value, str):
        return cut(value, max_bytes)[0]
    if isinstance(value, dict):
        return {key: cut_strings(item, max_bytes) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [cut_strings(item, max_bytes) for item in value]
    return value
