"""The items of report.html: every item as JSON inside the page, shown by an inline script.

The script (``assets/report.js``) filters by kind, category, system and outcome,
searches ids and texts, adds rows a page at a time and builds an item's details only
when it is opened, so a 10,000-item page stays quick. Texts are folded in the page and
cut here (:data:`EVIDENCE_CHARS`) so that the file stays a reasonable size.
"""

from __future__ import annotations

import json
from functools import cache
from html import escape
from importlib import resources
from typing import Any

from pytest_ragbench.config.thresholds import below, lower_is_better
from pytest_ragbench.render.text import comparator
from pytest_ragbench.results.records import json_safe

EVIDENCE_CHARS = 20_000
OUTCOMES = (("all", "all"), ("notpassed", "not passed (failed, error, lost)"),
            ("failed", "failed"), ("error", "error"), ("lost", "lost"),
            ("warning", "warning"), ("passed", "passed"), ("skipped", "skipped"))


@cache
def asset(name: str) -> str:
    """The text of ``assets/<name>`` (the page's CSS and script)."""
    return resources.files("pytest_ragbench.render").joinpath("assets", name).read_text(
        encoding="utf-8")


def _text(value: Any, limit: int = EVIDENCE_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str, indent=1)
    if len(text) > limit:
        return f"{text[:limit]} … ({len(text) - limit} more characters)"
    return text


def _metrics(item: dict[str, Any]) -> list[list[Any]]:
    """``[name, value, threshold, passed, operator, unscored reason]`` per metric."""
    metrics = item.get("metrics") or {}
    unscored = item.get("unscored") or {}
    limits = item.get("thresholds") or {}
    rows = []
    for name in sorted(set(metrics) | set(unscored)):
        value = metrics.get(name)
        value = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        limit = limits.get(name)
        limit = limit if isinstance(limit, int | float) and not isinstance(limit, bool) else None
        passed = None
        if value is not None and limit is not None:
            try:
                passed = not below(name, float(value), float(limit))
            except Exception:
                passed = None
        reason = unscored.get(name) if value is None else None
        rows.append([name, value, limit, passed, comparator(lower_is_better(name)),
                     None if reason is None else _text(reason, 2000)])
    return rows


def item_payload(item: dict[str, Any]) -> dict[str, Any]:
    """What the script needs of one item of ``results.json``."""
    fields = dict(item.get("fields") or {})
    category = fields.pop("category", None)
    evidence = item.get("evidence") or {}
    return {
        "nodeid": str(item.get("nodeid", "")),
        "kind": str(item.get("kind", "")),
        "case_id": str(item.get("case_id", "")),
        "system": item.get("system") or "",
        "category": "" if category is None else str(category),
        "status": str(item.get("status", "")),
        "file": str(item.get("file", "")),
        "line": item.get("line") or 0,
        "fields": {str(k): _text(v, 2000) for k, v in fields.items() if v not in (None, "")},
        "tags": [str(t) for t in item.get("tags") or []],
        "duration": item.get("duration"),
        "metrics": _metrics(item),
        "summary": None if not item.get("summary") else _text(item["summary"]),
        "failures": [_text(f) for f in item.get("failures") or []],
        "warnings": [_text(w) for w in item.get("warnings") or []],
        "error": None if item.get("error") is None else _text(item["error"]),
        "evidence": [[str(k), _text(v)] for k, v in evidence.items()],
        "answers": item.get("answers") or [],
    }


def payload(document: dict[str, Any]) -> dict[str, Any]:
    """Every item, and the values the filters offer."""
    items = [item_payload(i) for i in document.get("items") or [] if isinstance(i, dict)]
    return {"items": items,
            "kinds": sorted({i["kind"] for i in items}),
            "categories": sorted({i["category"] for i in items if i["category"]}),
            "systems": sorted({i["system"] for i in items if i["system"]})}


def script_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``."""
    try:  # the items' records are JSON-safe already: convert only when they are not
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = json.dumps(json_safe(data), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":"))
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _select(name: str, label: str, options: list[tuple[str, str]]) -> str:
    choices = "".join(f'<option value="{escape(v)}">{escape(t)}</option>' for v, t in options)
    return (f'<label>{escape(label)} <select id="ragbench-{name}">{choices}</select></label>')


def section(document: dict[str, Any]) -> str:
    """The items section: filters, the list the script fills, and the data."""
    data = payload(document)
    filters = "".join([
        _select("kind", "kind", [("", "all")]),
        _select("category", "category", [("", "all")]),
        _select("system", "system", [("", "all")]),
        _select("outcome", "outcome", list(OUTCOMES)),
        '<label>search <input type="search" id="ragbench-search" '
        'placeholder="id, question, answer, evidence"></label>',
        '<span id="ragbench-count"></span>'])
    return (f'<h2 id=items>Items</h2><p class=meta>{len(data["items"])} items, those that did '
            'not pass first; open one for its question, expected answer, the system\'s answer and '
            'contexts, every metric with its threshold, the judge\'s replies and the evidence. '
            'Needs JavaScript (inline, no network).</p>'
            f'<div class="filters">{filters}</div><div id="ragbench-list"></div>'
            '<button type="button" id="ragbench-more">show more</button>'
            '<noscript><p class=problem>The item list needs JavaScript; the items are also in '
            'items.jsonl beside this page.</p></noscript>'
            f'<script type="application/json" id="ragbench-items">{script_json(data)}</script>')
