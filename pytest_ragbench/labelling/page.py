"""A self-contained offline page to label the picked items (no network, no external assets).

Each item shows its question, contexts, answer and the judge's score; a person types the
score (digits, or a number in the box), moves with j/k, and saves the labels as a
``--ragbench-judge-labels`` JSONL file that keeps every item's inclusion probability
(``pi``). The case text is put on the page with ``textContent``, never as markup, and the
page's content security policy allows no request at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from pytest_ragbench.labelling.pick import Pick
from pytest_ragbench.render.drilldown import script_json

EVIDENCE = (("question", "question"), ("contexts", "contexts"), ("answer", "answer"),
            ("ground truth", "ground_truth"))


def page_item(pick: Pick) -> dict[str, Any]:
    """What the page shows and saves of one pick."""
    evidence = pick.record.evidence or {}
    shown = [(title, _text(evidence[key])) for title, key in EVIDENCE
             if evidence.get(key) not in (None, "", [])]
    return {**pick.label_line(), "nodeid": pick.record.nodeid, "low": pick.low,
            "high": pick.high, "evidence": shown}


def _text(value: Any) -> str:
    if isinstance(value, list):  # contexts given one by one
        return "\n\n".join(f"[{i}] {v}" for i, v in enumerate(value, start=1))
    return str(value)


def render(picks: Sequence[Pick], title: str = "ragbench: label the picked items") -> str:
    """The page's HTML."""
    data = {"items": [page_item(p) for p in picks]}
    return TEMPLATE.replace("{title}", escape(title)).replace("{data}", script_json(data))


TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>{title}</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem}
header{display:flex;gap:1rem;align-items:center;flex-wrap:wrap}
#progress{font-weight:600}
.block{white-space:pre-wrap;border:1px solid #ccc;border-radius:4px;padding:.5rem;margin:.3rem 0}
h3{margin:.8rem 0 .2rem;font-size:.95rem;color:#444}
#meta{color:#555}
#score{width:6rem;font-size:1.1rem}
.labelled{color:#070}
kbd{border:1px solid #aaa;border-radius:3px;padding:0 .25rem;font-size:.85rem}
#warning{color:#a00}
</style></head>
<body>
<header><h1 style="font-size:1.2rem;margin:0">{title}</h1>
<span id="progress"></span>
<button id="save" type="button">Save labels (s)</button></header>
<p id="help"><kbd>0</kbd>-<kbd>9</kbd> score (for a 0-1 metric: <kbd>0</kbd>, <kbd>1</kbd>,
or type a fraction in the box), <kbd>j</kbd>/<kbd>k</kbd> next/previous item,
<kbd>s</kbd> save. Label every item: the estimate reweights each label by 1/pi and
assumes all the picked items were labelled.</p>
<p id="warning"></p>
<main>
<p id="meta"></p>
<label>Your score: <input id="score" type="number" step="any"></label>
<span id="range"></span>
<div id="evidence"></div>
</main>
<script type="application/json" id="ragbench-picks">{data}</script>
<script>
"use strict";
const items = JSON.parse(document.getElementById("ragbench-picks").textContent).items;
const scores = new Array(items.length).fill(null);
let at = 0;
const $ = (id) => document.getElementById(id);

function show() {
  const progress = $("progress");
  const done = scores.filter((s) => s !== null).length;
  progress.textContent = items.length ? `item ${at + 1} of ${items.length}, ` +
    `${done} labelled` : "no items to label";
  if (!items.length) return;
  const item = items[at];
  const parts = [`${item.kind} ${item.id}`, `metric ${item.metric}`,
    `judge score ${item.judge}`, `pi ${item.pi.toFixed(3)}`];
  if (item.system) parts.splice(1, 0, `system ${item.system}`);
  $("meta").textContent = parts.join(" \\u00b7 ");
  $("range").textContent = `(${item.low} to ${item.high})` +
    (scores[at] === null ? "" : " \\u2713 labelled");
  $("range").className = scores[at] === null ? "" : "labelled";
  $("score").value = scores[at] === null ? "" : String(scores[at]);
  const box = $("evidence");
  box.replaceChildren();
  for (const [title, text] of item.evidence) {
    const heading = document.createElement("h3");
    heading.textContent = title;
    const block = document.createElement("div");
    block.className = "block";
    block.textContent = text;
    box.append(heading, block);
  }
}

function setScore(value) {
  const item = items[at];
  if (!Number.isFinite(value) || value < item.low || value > item.high) {
    $("warning").textContent = `${value} is outside ${item.low} to ${item.high}`;
    return false;
  }
  $("warning").textContent = "";
  scores[at] = value;
  return true;
}

function move(step) {
  at = Math.min(items.length - 1, Math.max(0, at + step));
  show();
}

function labelsJsonl() {
  const lines = [];
  items.forEach((item, index) => {
    if (scores[index] === null) return;
    const line = {id: item.id, metric: item.metric, score: scores[index], kind: item.kind};
    if (item.system) line.system = item.system;
    line.pi = item.pi;
    lines.push(JSON.stringify(line));
  });
  return lines.map((l) => l + "\\n").join("");
}

function save() {
  const missing = scores.filter((s) => s === null).length;
  $("warning").textContent = missing ? `${missing} item(s) not labelled yet: the saved ` +
    "file holds the others; label them all before calibrating" : "";
  const blob = new Blob([labelsJsonl()], {type: "application/x-ndjson"});
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = "labels.jsonl";
  document.body.append(link);
  link.click();
  link.remove();
}

$("score").addEventListener("change", (event) => {
  if (event.target.value !== "" && setScore(Number(event.target.value))) show();
});
$("save").addEventListener("click", save);
document.addEventListener("keydown", (event) => {
  if (event.target === $("score") || event.ctrlKey || event.metaKey || event.altKey) return;
  if (/^[0-9]$/.test(event.key) && items.length) {
    if (setScore(Number(event.key))) move(1);
    show();
  } else if (event.key === "j") {
    move(1);
  } else if (event.key === "k") {
    move(-1);
  } else if (event.key === "s") {
    save();
  } else {
    return;
  }
  event.preventDefault();
});
show();
</script>
</body></html>
"""
