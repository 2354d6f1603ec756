// report.html's per-item drill-down: filters, search, pages of rows, details built on open.
// Inline and self-contained (no network); the items are the JSON in #ragbench-items.
(function () {
  "use strict";
  var PAGE = 100;          // rows added per page
  var FOLD = 600;          // characters shown before a text is folded
  var source = document.getElementById("ragbench-items");
  if (!source) { return; }
  var data = JSON.parse(source.textContent);
  var items = data.items;
  var SEVERITY = {lost: 0, error: 1, failed: 2, warning: 3, skipped: 4, passed: 5};
  var order = items.map(function (_, i) { return i; });
  order.sort(function (a, b) {
    var x = items[a], y = items[b];
    var s = (SEVERITY[x.status] === undefined ? 9 : SEVERITY[x.status]) -
            (SEVERITY[y.status] === undefined ? 9 : SEVERITY[y.status]);
    return s !== 0 ? s : (x.nodeid < y.nodeid ? -1 : x.nodeid > y.nodeid ? 1 : 0);
  });

  var controls = {
    kind: document.getElementById("ragbench-kind"),
    category: document.getElementById("ragbench-category"),
    system: document.getElementById("ragbench-system"),
    outcome: document.getElementById("ragbench-outcome"),
    q: document.getElementById("ragbench-search")
  };
  var list = document.getElementById("ragbench-list");
  var more = document.getElementById("ragbench-more");
  var count = document.getElementById("ragbench-count");
  var filtered = [];
  var shown = 0;
  var haystacks = null;

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }

  function fill(select, values, counts) {
    if (!select) { return; }
    values.forEach(function (value) {
      var option = el("option", null, value + " (" + (counts[value] || 0) + ")");
      option.value = value;
      select.appendChild(option);
    });
    if (values.length < 2 && select.parentNode) { select.parentNode.style.display = "none"; }
  }

  function tally(key) {
    var counts = {};
    items.forEach(function (it) { var v = it[key] || ""; counts[v] = (counts[v] || 0) + 1; });
    return counts;
  }

  fill(controls.kind, data.kinds, tally("kind"));
  fill(controls.category, data.categories, tally("category"));
  fill(controls.system, data.systems, tally("system"));

  function text(value) {
    if (value === null || value === undefined) { return ""; }
    return typeof value === "string" ? value : JSON.stringify(value, null, 1);
  }

  function haystack(it) {
    var parts = [it.nodeid, it.case_id, it.category || "", it.system || "", it.error || "",
                 it.summary || ""];
    parts = parts.concat(it.failures || []);
    (it.evidence || []).forEach(function (pair) { parts.push(pair[0], text(pair[1])); });
    (it.answers || []).forEach(function (a) {
      parts.push(a.question || "", a.text || "", a.sql || "");
      (a.contexts || []).forEach(function (c) { parts.push(c.id || "", c.source || ""); });
    });
    return parts.join("\n").toLowerCase();
  }

  function outcomeMatches(wanted, status) {
    if (!wanted || wanted === "all") { return true; }
    if (wanted === "notpassed") { return status === "failed" || status === "error" || status === "lost"; }
    return status === wanted;
  }

  function matches(it, index, query) {
    if (controls.kind && controls.kind.value && it.kind !== controls.kind.value) { return false; }
    if (controls.category && controls.category.value && (it.category || "") !== controls.category.value) { return false; }
    if (controls.system && controls.system.value && (it.system || "") !== controls.system.value) { return false; }
    if (!outcomeMatches(controls.outcome && controls.outcome.value, it.status)) { return false; }
    if (query) {
      if (!haystacks) { haystacks = items.map(haystack); }
      var terms = query.split(/\s+/);
      for (var t = 0; t < terms.length; t++) {
        if (terms[t] && haystacks[index].indexOf(terms[t]) < 0) { return false; }
      }
    }
    return true;
  }

  function folded(value, cls) {
    var body = text(value);
    var box = el("div", "text" + (cls ? " " + cls : ""), body);
    if (body.length <= FOLD) { return box; }
    var wrap = el("div");
    box.classList.add("folded");
    var button = el("button", "unfold", "show all " + body.length + " characters");
    button.type = "button";
    button.addEventListener("click", function () {
      var open = box.classList.toggle("folded");
      button.textContent = open ? "show all " + body.length + " characters" : "fold";
    });
    wrap.appendChild(box);
    wrap.appendChild(button);
    return wrap;
  }

  function section(parent, title) {
    parent.appendChild(el("h4", null, title));
  }

  function table(head, rows) {
    var t = el("table");
    var tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", null, h)); });
    var thead = el("thead");
    thead.appendChild(tr);
    t.appendChild(thead);
    var body = el("tbody");
    rows.forEach(function (row) {
      var line = el("tr");
      row.forEach(function (cell) {
        if (cell instanceof Node) { var td = el("td"); td.appendChild(cell); line.appendChild(td); }
        else if (cell && typeof cell === "object" && "cls" in cell) { line.appendChild(el("td", cell.cls, cell.text)); }
        else { line.appendChild(el("td", null, cell)); }
      });
      body.appendChild(line);
    });
    t.appendChild(body);
    return t;
  }

  function num(value) {
    if (value === null || value === undefined) { return "-"; }
    if (typeof value !== "number") { return String(value); }
    return Math.abs(value) >= 100 ? value.toFixed(1) : value.toFixed(3);
  }

  function seconds(value) {
    if (value === null || value === undefined) { return "-"; }
    return value < 1 ? (value * 1000).toFixed(0) + " ms" : value.toFixed(2) + " s";
  }

  function detail(it) {
    var box = el("div", "detail");
    var where = el("dl", "kv");
    function kv(key, value) {
      if (value === null || value === undefined || value === "") { return; }
      where.appendChild(el("dt", null, key));
      where.appendChild(el("dd", "mono", value));
    }
    kv("node id", it.nodeid);
    kv("case", it.file + (it.line ? ":" + it.line : ""));
    kv("system", it.system);
    Object.keys(it.fields || {}).forEach(function (k) { kv(k, text(it.fields[k])); });
    if (it.tags && it.tags.length) { kv("tags", it.tags.join(", ")); }
    kv("item time", seconds(it.duration));
    box.appendChild(where);

    var failing = it.status === "failed" || it.status === "error" || it.status === "lost";
    if ((it.failures && it.failures.length) || it.error || (failing && it.summary)) {
      section(box, "Why it " + (it.status === "lost" ? "was lost" : failing ? "failed" : "warned"));
      var why = el("div", "evidence-failure evidence");
      if (it.summary) { why.appendChild(el("pre", null, it.summary)); }
      (it.failures || []).forEach(function (line) { why.appendChild(el("pre", null, line)); });
      if (it.error) { why.appendChild(el("pre", null, it.error)); }
      box.appendChild(why);
    }
    if (it.warnings && it.warnings.length) {
      section(box, "Warnings");
      it.warnings.forEach(function (line) { box.appendChild(el("pre", null, line)); });
    }

    var evidence = it.evidence || [];
    var used = {};
    function pick(test) {
      return evidence.filter(function (pair) {
        if (used[pair[0]] || !test(pair[0].toLowerCase())) { return false; }
        used[pair[0]] = true;
        return true;
      });
    }
    var question = pick(function (k) { return k === "question" || k === "history"; });
    var answers = it.answers || [];
    if (!question.length && answers.length) { question = [["question", answers[0].question]]; }
    question.forEach(function (pair) { section(box, pair[0]); box.appendChild(folded(pair[1])); });

    var expected = pick(function (k) {
      return k.indexOf("expected") === 0 || k.indexOf("ground_truth") === 0 || k === "expect" || k === "reference";
    });
    if (expected.length) {
      section(box, "Expected");
      expected.forEach(function (pair) {
        box.appendChild(el("div", "note", pair[0]));
        box.appendChild(folded(pair[1]));
      });
    }

    answers.forEach(function (a, n) {
      section(box, "System answer" + (answers.length > 1 ? " " + (n + 1) : ""));
      if (answers.length > 1 && a.question) { box.appendChild(el("div", "note", "question: " + a.question)); }
      box.appendChild(folded(a.text || "(an empty answer)"));
      if (a.sql) { box.appendChild(el("div", "note", "SQL")); box.appendChild(folded(a.sql)); }
      var timing = "service time " + seconds(a.service_s) + " (measured by the plugin)";
      if (a.latency_s !== null && a.latency_s !== undefined) { timing += " · system's latency_s " + seconds(a.latency_s); }
      if (a.cached) { timing += " · from the cache"; }
      box.appendChild(el("div", "note", timing));
      if (a.contexts && a.contexts.length) {
        var rows = a.contexts.map(function (c) {
          return [String(c.rank), c.id || "-", c.source || "-", num(c.score), folded(c.text || "")];
        });
        var shownCount = a.contexts.length < (a.n_contexts || 0) ? " (first " + a.contexts.length + " of " + a.n_contexts + ")" : "";
        box.appendChild(el("div", "note", "retrieved contexts" + shownCount));
        box.appendChild(table(["rank", "id", "source", "score", "text"], rows));
      }
    });

    if (it.metrics && it.metrics.length) {
      section(box, "Metrics");
      box.appendChild(table(["metric", "value", "threshold", "result"], it.metrics.map(function (m) {
        var result = m[5] ? {cls: "note", text: "unscored: " + m[5]} :
          m[3] === false ? {cls: "bad", text: "below threshold"} :
          m[3] === true ? {cls: "good", text: "ok"} : "-";
        return [m[0], m[1] === null ? "-" : num(m[1]), m[2] === null ? "-" : m[4] + " " + m[2], result];
      })));
    }

    var judge = pick(function (k) { return k.indexOf("judge") >= 0 || k.indexOf("reason") >= 0 || k.indexOf("verdict") >= 0; });
    if (judge.length) {
      section(box, "Judge");
      judge.forEach(function (pair) { box.appendChild(el("div", "note", pair[0])); box.appendChild(folded(pair[1])); });
    }
    var rest = evidence.filter(function (pair) { return !used[pair[0]]; });
    if (rest.length) {
      section(box, "Evidence");
      var ev = el("div", "evidence");
      rest.forEach(function (pair) { ev.appendChild(el("div", "note", pair[0])); ev.appendChild(folded(pair[1])); });
      box.appendChild(ev);
    }
    return box;
  }

  function row(index) {
    var it = items[index];
    var item = el("details", "item st-" + it.status);
    item.dataset.nodeid = it.nodeid;
    var summary = el("summary");
    summary.appendChild(el("span", "badge " + it.status, it.status));
    summary.appendChild(el("span", "note", it.kind));
    summary.appendChild(el("span", "sum-id", it.case_id));
    if (it.system) { summary.appendChild(el("span", "note", it.system)); }
    if (it.category) { summary.appendChild(el("span", "note", it.category)); }
    var why = it.summary || (it.failures && it.failures[0]) || it.error;
    if (why && it.status !== "passed") { summary.appendChild(el("span", "sum-why", why)); }
    item.appendChild(summary);
    function build() { if (item.children.length === 1) { item.appendChild(detail(it)); } }
    summary.addEventListener("click", build);  // before it opens: no flash of an empty row
    item.addEventListener("toggle", function () { if (item.open) { build(); } });
    return item;
  }

  function showMore() {
    var end = Math.min(shown + PAGE, filtered.length);
    var fragment = document.createDocumentFragment();
    for (var i = shown; i < end; i++) { fragment.appendChild(row(filtered[i])); }
    list.appendChild(fragment);
    shown = end;
    more.style.display = shown < filtered.length ? "" : "none";
    more.textContent = "show " + Math.min(PAGE, filtered.length - shown) + " more (" + (filtered.length - shown) + " left)";
    count.textContent = filtered.length + " of " + items.length + " items" + (shown < filtered.length ? ", " + shown + " shown" : "");
  }

  function apply() {
    var query = controls.q ? controls.q.value.trim().toLowerCase() : "";
    filtered = order.filter(function (index) { return matches(items[index], index, query); });
    list.textContent = "";
    shown = 0;
    showMore();
    document.body.dataset.itemsShown = String(filtered.length);
  }

  function fromHash() {
    // #items?outcome=failed&kind=vector&q=heat&open=<node id> (links in the verdict use it)
    var hash = decodeURIComponent(location.hash || "");
    if (hash.indexOf("#items?") !== 0) { return false; }
    var params = {};
    hash.slice(7).split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) { params[part.slice(0, at)] = part.slice(at + 1); }
    });
    // a link states the whole filter: what it does not name is reset
    ["kind", "category", "system", "outcome"].forEach(function (key) {
      if (controls[key]) { controls[key].value = params[key] || (key === "outcome" ? "all" : ""); }
    });
    if (controls.q) { controls.q.value = params.q || ""; }
    apply();
    if (params.open) {
      var rows = list.querySelectorAll("details.item");
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].dataset.nodeid === params.open) {
          rows[i].querySelector("summary").click();
          rows[i].scrollIntoView();
        }
      }
    } else {
      document.getElementById("items").scrollIntoView();
    }
    return true;
  }

  var timer = null;
  ["kind", "category", "system", "outcome"].forEach(function (key) {
    if (controls[key]) { controls[key].addEventListener("change", apply); }
  });
  if (controls.q) {
    controls.q.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(apply, 150);
    });
  }
  more.addEventListener("click", showMore);
  window.addEventListener("hashchange", fromHash);
  if (!fromHash()) { apply(); }
  document.body.dataset.ready = String(Math.round(performance.now()));
})();
