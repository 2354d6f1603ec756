"""Numbers in answers: read ``$1,496.5`` / ``(12.3)`` / ``73.2%``, write them plainly."""

from __future__ import annotations

import math
import re
from decimal import Decimal

_NUMBER = re.compile(
    r"^(?P<open>\()?\s*(?P<sign>[-+−])?\s*[$€£¥]?\s*(?P<digits>\d{1,3}(?:,\d{3})+|\d*)"
    r"(?P<frac>\.\d+)?\s*(?:(?P<pct>%)|(?P<word>thousand|million|billion))?\s*(?P<close>\))?$",
    re.IGNORECASE)

SCALE_SUFFIX = {"": "", "percent": "%", "thousand": " thousand", "million": " million",
                "billion": " billion"}


def parse_number(text: str) -> tuple[float, str] | None:
    """``(value, scale)`` for a plain or formatted amount; None if it is not one.

    ``scale`` is ``percent`` for ``12%``, ``million`` for ``$14.7 million`` (also thousand,
    billion), else ``""``. Parentheses mean a negative amount, as in financial tables:
    ``(1,234)`` is -1234.
    """
    match = _NUMBER.match(text.strip())
    if not match or not (match["digits"] or match["frac"]):
        return None
    if bool(match["open"]) != bool(match["close"]):
        return None
    value = float((match["digits"] or "0").replace(",", "") + (match["frac"] or ""))
    if match["open"] or match["sign"] in ("-", "−"):
        value = -value
    scale = "percent" if match["pct"] else (match["word"] or "").lower()
    return value, scale


def format_number(value: float) -> str:
    """Shortest plain notation: ``2.0`` → ``2``, ``1e-05`` → ``0.00001``."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    if value == int(value) and abs(value) < 1e16:
        return str(int(value))
    text = repr(value)
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
    return text


def with_scale(number: str, scale: str) -> str:
    """``13989`` + ``million`` → ``13989 million``; ``percent`` → ``2.96%``."""
    return number + SCALE_SUFFIX.get(scale, f" {scale}" if scale else "")
