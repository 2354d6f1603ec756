// The review page of `ragbench review FILE`: accept, reject or edit each case, then save
// the file in its own format. Case text is untrusted: it is only ever set as textContent
// or a textarea's value, never parsed as HTML.
(function () {
  "use strict";
  // A whole number written as a float (2.0) stays one: kept as its source text where the
  // browser can (JSON.rawJSON), so a saved file gives the same Python types back.
  function keepFloats(key, value, context) {
    if (typeof value === "number" && Number.isInteger(value) && context &&
        /[.eE]/.test(context.source || "") && typeof JSON.rawJSON === "function") {
      return JSON.rawJSON(context.source);
    }
    return value;
  }
  function parse(text) { return JSON.parse(text, keepFloats); }
  function copy(value) { return parse(JSON.stringify(value)); }
  const data = parse(document.getElementById("ragbench-review").textContent);
  const defaults = data.defaults || {};
  const STATES = ["draft", "accepted", "rejected"];
  const SHOWN = ["category", "question", "query", "ground_truth", "ground_truth_answer",
                 "expected_sql", "ground_truth_data", "expected_facts", "expected_sources",
                 "contexts", "answer"];
  const entries = data.cases.map(function (record) {
    const state = reviewOf(record);
    return {record: copy(record), original: state, state: state,
            edited: [], editing: false, section: null};
  });
  let current = 0;
  let unsaved = false;  // a decision or an edit made since the last save

  function reviewOf(record) {
    if (Object.prototype.hasOwnProperty.call(record, "review")) return record.review;
    return Object.prototype.hasOwnProperty.call(defaults, "review") ? defaults.review : null;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function shown(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  function editable(entry) {
    const names = data.question_fields.concat(data.answer_fields);
    return names.filter(function (name) {
      return Object.prototype.hasOwnProperty.call(entry.record, name);
    });
  }

  // -- the bar: counter, save, shortcuts ---------------------------------------------------

  const bar = document.getElementById("bar");
  const title = el("h1", "", "Review " + data.file);
  const counter = el("p", "counter");
  counter.id = "counter";
  const save = el("button", "save", "Save reviewed file");
  save.id = "save";
  save.type = "button";
  save.addEventListener("click", download);
  const help = el("p", "help", "a accept · r reject · u undo decision · e edit · " +
                  "j/k next/previous · n next draft · Ctrl+Enter apply edit · Esc cancel · Ctrl+S save");
  bar.append(title, counter, save, help);

  function changed() {
    unsaved = true;
    updateCounter();
  }

  function updateCounter() {
    const count = function (state) {
      return entries.filter(function (e) { return e.state === state; }).length;
    };
    const edited = entries.filter(function (e) { return e.edited.length; }).length;
    counter.textContent = count("draft") + " drafts left of " + entries.length +
      " cases · " + count("accepted") + " accepted · " + count("rejected") + " rejected · " +
      edited + " edited";
    counter.dataset.draftsLeft = String(count("draft"));
  }

  // -- one case ----------------------------------------------------------------------------

  function render(index) {
    const entry = entries[index];
    const section = entry.section || el("section", "case");
    entry.section = section;
    section.replaceChildren();
    section.dataset.index = String(index);
    section.dataset.state = entry.state || "hand-written";
    section.classList.toggle("current", index === current);
    const head = el("div", "head");
    head.append(el("span", "number", "#" + (index + 1)),
                el("span", "state " + (entry.state || "hand-written"),
                   entry.state || "hand-written"),
                el("span", "id", String(entry.record.id || "(no id)")),
                el("span", "kind", String(entry.record.kind || defaults.kind || "")));
    if (entry.edited.length) head.append(el("span", "edited", "edited: " +
                                           entry.edited.join(", ")));
    section.append(head);
    if (entry.editing) {
      section.append(editor(entry, index));
    } else {
      const fields = el("dl", "fields");
      SHOWN.forEach(function (name) {
        if (!Object.prototype.hasOwnProperty.call(entry.record, name)) return;
        const value = el("dd", "value");
        const raw = entry.record[name];
        if (Array.isArray(raw) && raw.length && raw.every(function (x) {
          return typeof x === "string";
        })) {  // passages, sources, facts: one block each, their line breaks as written
          const list = el("ol", "texts");
          raw.forEach(function (text) {
            const item = el("li");
            item.append(el("pre", "", text));
            list.append(item);
          });
          value.append(list);
        } else {
          value.append(el("pre", "", shown(raw)));
        }
        value.dataset.field = name;
        fields.append(el("dt", "", name), value);
      });
      section.append(fields);
      const rest = Object.keys(entry.record).filter(function (name) {
        return SHOWN.indexOf(name) < 0 && ["id", "kind", "review"].indexOf(name) < 0;
      });
      if (rest.length) {
        const more = el("details", "more");
        more.append(el("summary", "", rest.join(", ")));
        const other = {};
        rest.forEach(function (name) { other[name] = entry.record[name]; });
        more.append(el("pre", "", JSON.stringify(other, null, 2)));
        more.open = rest.indexOf("provenance") >= 0;
        section.append(more);
      }
      const actions = el("div", "actions");
      [["accept", "Accept (a)"], ["reject", "Reject (r)"], ["edit", "Edit (e)"],
       ["undo", "Undo decision (u)"]].forEach(function (pair) {
        const button = el("button", pair[0], pair[1]);
        button.type = "button";
        button.dataset.action = pair[0];
        button.addEventListener("click", function () { select(index); act(pair[0]); });
        actions.append(button);
      });
      section.append(actions);
    }
    return section;
  }

  function editor(entry, index) {
    const form = el("div", "editor");
    editable(entry).forEach(function (name) {
      const label = el("label", "", name);
      const value = entry.record[name];
      const area = el("textarea");
      area.value = shown(value);
      area.dataset.field = name;
      area.dataset.json = typeof value === "string" ? "" : "1";
      area.rows = Math.min(12, Math.max(2, area.value.split("\n").length + 1));
      label.append(area);
      form.append(label);
    });
    const apply = el("button", "apply", "Apply (Ctrl+Enter)");
    apply.type = "button";
    apply.addEventListener("click", function () { applyEdit(index); });
    const cancel = el("button", "cancel", "Cancel (Esc)");
    cancel.type = "button";
    cancel.addEventListener("click", function () { cancelEdit(index); });
    const buttons = el("div", "actions");
    buttons.append(apply, cancel);
    form.append(buttons);
    return form;
  }

  function applyEdit(index) {
    const entry = entries[index];
    const changes = {};
    const areas = entry.section.querySelectorAll("textarea");
    for (const area of areas) {
      const name = area.dataset.field;
      let value = area.value;
      if (area.dataset.json) {
        try {
          value = parse(value);
        } catch (problem) {
          showError(entry, name + ": not valid JSON (" + problem.message + ")");
          return;
        }
      } else if (!value.trim()) {
        showError(entry, name + ": must not be empty");
        return;
      }
      if (JSON.stringify(value) !== JSON.stringify(entry.record[name])) changes[name] = value;
    }
    Object.keys(changes).forEach(function (name) {
      entry.record[name] = changes[name];
      if (entry.edited.indexOf(name) < 0) entry.edited.push(name);
    });
    entry.editing = false;
    render(index);
    changed();
  }

  function cancelEdit(index) {
    entries[index].editing = false;
    render(index);
  }

  // Shown in the open editor, which keeps what was typed.
  function showError(entry, message) {
    const form = entry.section.querySelector(".editor");
    let line = form.querySelector(".error");
    if (!line) {
      line = el("p", "error");
      form.insertBefore(line, form.lastChild);
    }
    line.textContent = message;
  }

  // -- moving and deciding -----------------------------------------------------------------

  function select(index) {
    if (index < 0 || index >= entries.length) return;
    const before = current;
    current = index;
    entries[before].section.classList.remove("current");
    entries[current].section.classList.add("current");
    entries[current].section.scrollIntoView({block: "nearest"});
  }

  function act(action) {
    const entry = entries[current];
    if (!entry || entry.editing) return;
    if (action === "accept" || action === "reject") {
      entry.state = action === "accept" ? "accepted" : "rejected";
      render(current);
      changed();
      select(current + 1);
    } else if (action === "undo") {
      entry.state = entry.original;
      render(current);
      changed();
    } else if (action === "edit") {
      entry.editing = true;
      render(current);
      const first = entry.section.querySelector("textarea");
      if (first) first.focus();
    }
  }

  function nextDraft() {
    for (let step = 1; step <= entries.length; step++) {
      const index = (current + step) % entries.length;
      if (entries[index].state === "draft") {
        select(index);
        return;
      }
    }
  }

  document.addEventListener("keydown", function (event) {
    const entry = entries[current];
    if ((event.ctrlKey || event.metaKey) && event.key === "s") {
      event.preventDefault();
      download();
      return;
    }
    if (entry && entry.editing) {
      if (event.key === "Escape") {
        event.preventDefault();
        cancelEdit(current);
      } else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        applyEdit(current);
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT")) return;
    const keys = {a: "accept", r: "reject", u: "undo", e: "edit"};
    if (keys[event.key]) {
      event.preventDefault();
      act(keys[event.key]);
    } else if (event.key === "j") {
      select(current + 1);
    } else if (event.key === "k") {
      select(current - 1);
    } else if (event.key === "n") {
      nextDraft();
    }
  });

  // -- saving ------------------------------------------------------------------------------

  function reviewed(entry) {
    const record = copy(entry.record);
    const decided = entry.state !== entry.original;
    if (decided && STATES.indexOf(entry.state) >= 0) record.review = entry.state;
    const provenance = record.provenance;
    if ((decided || entry.edited.length) && provenance && typeof provenance === "object" &&
        !Array.isArray(provenance)) {
      provenance.reviewed_at = new Date().toISOString();
      if (entry.edited.length) provenance.edited = entry.edited.slice();
    }
    return record;
  }

  function hex(character) {
    return "\\u" + character.charCodeAt(0).toString(16).padStart(4, "0");
  }

  // YAML 1.1 (PyYAML) reads JSON but for three things: a number like 1e-7 (no dot) is a
  // string there, characters it does not print are refused, and U+0085, U+2028 and U+2029
  // are line breaks inside quotes; they are written escaped.
  function yamlFlow(value, pad) {
    if (value === null || typeof value === "boolean") return String(value);
    const raw = typeof JSON.isRawJSON === "function" && JSON.isRawJSON(value);
    if (typeof value === "number" || raw) {
      const text = raw ? value.rawJSON : Number.isFinite(value) ? String(value) : "null";
      return /e/.test(text) && text.indexOf(".") < 0 ? text.replace("e", ".0e") : text;
    }
    if (typeof value === "string") {
      return JSON.stringify(value).replace(/[\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]/g,
                                           hex);
    }
    const inner = pad + "  ";
    if (Array.isArray(value)) {
      if (!value.length) return "[]";
      return "[\n" + value.map(function (item) { return inner + yamlFlow(item, inner); })
        .join(",\n") + "\n" + pad + "]";
    }
    const keys = Object.keys(value);
    if (!keys.length) return "{}";
    return "{\n" + keys.map(function (key) {
      return inner + yamlFlow(key, inner) + ": " + yamlFlow(value[key], inner);
    }).join(",\n") + "\n" + pad + "}";
  }

  function savedText() {
    const cases = entries.map(reviewed);
    const hasDefaults = Object.keys(defaults).length > 0;
    if (data.format === "jsonl") {
      return cases.map(function (c) { return JSON.stringify(c); }).join("\n") + "\n";
    }
    const documentValue = hasDefaults || data.format === "yaml"
      ? Object.assign({}, defaults, {cases: cases}) : cases;
    if (data.format === "json") return JSON.stringify(documentValue, null, 2) + "\n";
    const note = "# Reviewed with ragbench review (JSON is YAML's flow style).";
    const header = data.header ? data.header + "\n" : "";
    return header + (header.indexOf(note) < 0 ? note + "\n" : "") +
      yamlFlow(documentValue, "") + "\n";
  }

  window.addEventListener("beforeunload", function (event) {
    if (unsaved) event.preventDefault();  // the browser asks before leaving
  });

  function download() {
    const blob = new Blob([savedText()], {type: "application/octet-stream"});
    unsaved = false;
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = data.file;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(link.href); }, 60000);
    save.textContent = "Saved as " + data.file + " (again to save again)";
  }

  const main = document.getElementById("cases");
  entries.forEach(function (_, index) { main.append(render(index)); });
  updateCounter();
  document.body.dataset.ready = "1";
})();
