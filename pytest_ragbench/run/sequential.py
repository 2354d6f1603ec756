"""``--ragbench-sequential``: run items until every gate is decided, and no further.

The evaluation items run in a seeded random order, stratified by kind and category (every
stretch of the run holds each stratum in its share, so the first items are a fair sample
of all of them). After each item the controller (:class:`SequentialGates`) updates each
gate's anytime-valid confidence sequence (:mod:`pytest_ragbench.stats.sequences`) with the
item's value; a gate is decided once its sequence lies wholly on one side of its bound
(passed, or missed) with at least ``ragbench_gate_min_n`` values. An item whose gates are
all decided is not needed and is not run; once every gate is decided no item is: each is
deselected, "not needed: every gate decided after N items".

Error: each gate's sequence covers its mean at every n with chance at least 1 - alpha / G
(G gates, Bonferroni), and a gate's decision can only be wrong on the side away from its
true mean, so the chance that any decision differs from the one at the true means is at
most alpha / 2 = 2.5% at every stopping time (the fixed-n ci-lower gate's promise, for all
the gates together): ``benchmarks/bench_sequential.py`` simulates it. A gate the sequence
cannot decide (a metric without a known range, values in clusters, or one still undecided
when the items run out) is checked at the end as without the flag.

Under pytest-xdist the controller decides and writes what is decided to a file beside the
run's journal; each worker reads it before each item and runs no item that is not needed,
and hands the ones it left out back in its ``workeroutput``. With ``--ragbench-resume``
the kept records are counted first, in the order they were run.
"""

from __future__ import annotations

import json
import os
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.results.records import ItemRecord

ALPHA = 0.05
"""Two-sided, shared by the gates: any wrong decision has chance at most ALPHA / 2."""
METHOD = "betting confidence sequence"
WORKEROUTPUT_KEY = "ragbench_not_needed"
NOT_NEEDED = "not needed: every gate decided after {n} items"
KIND_DONE = "not needed: the gates of its kind were decided after {n} items"


# -------------------------------------------------------------------------- the order


def stratified_order(items: list[pytest.Item], seed: int) -> list[pytest.Item]:
    """Ragbench items in a seeded random order, each kind and category spread evenly.

    Each stratum is shuffled, and its i-th item of n placed at (i + u) / n on one line
    (u uniform): every stretch of the order holds each stratum in proportion. Other tests
    keep their places before the evaluation items.
    """
    rng = random.Random(seed)
    ours = [item for item in items if hasattr(item, "record_for_report")]
    strata: dict[tuple[str, str], list[pytest.Item]] = defaultdict(list)
    for item in ours:
        strata[_stratum(item)].append(item)
    placed: list[tuple[float, int, pytest.Item]] = []
    for key in sorted(strata):
        members = sorted(strata[key], key=lambda i: i.nodeid)
        rng.shuffle(members)
        for index, item in enumerate(members):
            placed.append(((index + rng.random()) / len(members), len(placed), item))
    others = [item for item in items if not hasattr(item, "record_for_report")]
    return others + [item for _, _, item in sorted(placed, key=lambda p: (p[0], p[1]))]


def _stratum(item: pytest.Item) -> tuple[str, str]:
    kind = getattr(getattr(item, "item_kind", None), "name", "") or ""
    category = getattr(getattr(item, "case", None), "category", None)
    return kind, "" if category is None else str(category)


def item_key(item: Any) -> tuple[str, str | None]:
    """An item's kind and system (records carry the same)."""
    kind = getattr(getattr(item, "item_kind", None), "name", None) \
        or getattr(item, "kind_name", "") or ""
    return str(kind), getattr(item, "system_name", None)


# -------------------------------------------------------------------------- the gates


@dataclass
class Track:
    """One gate on one metric (``x@k`` at one k) and one system: its sequence and decision."""

    gate: Any  # results.gates.Gate, its metric as recorded
    system: str | None
    alpha: float
    low: float | None
    high: float | None
    lower_better: bool
    sequence: Any = None  # stats.sequences.BettingSequence, made with the first value
    status: str = "undecided"  # "passed", "missed", or why it is decided only at the end
    decided_after: int | None = None  # items the session had when it was decided
    n: int = 0
    mean_sum: float = 0.0

    @property
    def decided(self) -> bool:
        return self.status in ("passed", "missed")

    def matches(self, record: ItemRecord) -> bool:
        from pytest_ragbench.results.aggregate import field_value

        if record.kind != self.gate.kind:
            return False
        if self.system is not None and record.system != self.system:
            return False
        return all(field_value(record, k) == v for k, v in self.gate.where if k != "system")

    def add(self, value: float, clustered: bool, min_n: int, items: int) -> None:
        """One more value of the gate's metric (the session has ``items`` records now)."""
        if self.decided or self.status.startswith("end:"):
            return
        if clustered:
            self.status = "end: values in clusters are not independent"
            return
        if self.low is None or self.high is None:
            self.status = "end: the metric has no known range"
            return
        if self.sequence is None:
            from pytest_ragbench.stats.sequences import BettingSequence

            self.sequence = BettingSequence(self.alpha)
        width = self.high - self.low
        self.sequence.add((value - self.low) / width)
        self.n += 1
        self.mean_sum += value
        if self.n < min_n:
            return
        low, high = self.bounds()
        above, below = low >= self.gate.bound, high < self.gate.bound
        if self.lower_better:
            above, below = high <= self.gate.bound, low > self.gate.bound
        if above or below:
            self.status = "passed" if above else "missed"
            self.decided_after = items

    def bounds(self) -> tuple[float, float]:
        """The sequence's bounds in the metric's units."""
        assert self.sequence is not None and self.low is not None and self.high is not None
        width = self.high - self.low
        return self.low + self.sequence.low * width, self.low + self.sequence.high * width

    def to_json(self) -> dict[str, Any]:
        low, high = self.bounds() if self.sequence is not None else (None, None)
        return {"gate": self.gate.name, "kind": self.gate.kind, "metric": self.gate.metric,
                "system": self.system, "bound": self.gate.bound,
                "direction": "lower" if self.lower_better else "higher",
                "status": self.status if not self.status.startswith("end:") else "undecided",
                "why_undecided": self.status[5:] if self.status.startswith("end:") else None,
                "decided_after": self.decided_after, "n": self.n,
                "mean": self.mean_sum / self.n if self.n else None,
                "cs_low": low, "cs_high": high, "alpha": self.alpha, "method": METHOD}


@dataclass
class SequentialGates:
    """The controller's view: every gate's sequence, and which items are still needed."""

    gates: Sequence[Any]
    systems: Sequence[str]
    min_n: int
    cluster_by: str | None = None
    alpha: float = ALPHA
    tracks: dict[tuple[str, str, str | None], Track] = field(default_factory=dict)
    pending: dict[tuple[str, str | None], list[Any]] = field(default_factory=dict)
    items: int = 0  # records seen (kept ones of a resumed run included)
    all_decided_after: int | None = None
    kinds: set[str] = field(default_factory=set)

    def start(self, kinds: Iterable[str]) -> None:
        """The kinds of the selected items: gates on other kinds wait for nothing."""
        from pytest_ragbench.results.aggregate import direction, metric_range
        from pytest_ragbench.results.gates import gate_cells

        self.kinds = set(kinds)
        live = [g for g in self.gates if g.kind in self.kinds]
        cells = [(g, c.system) for g in live for c in gate_cells(g, self.systems)]
        alpha = self.alpha / max(1, len(cells))
        for gate, system in cells:
            if gate.metric.endswith("@k"):  # its k is known with the first record
                self.pending.setdefault((gate.name, system), []).append((gate, alpha))
                continue
            low, high = metric_range(gate.metric)
            self.tracks[(gate.name, gate.metric, system)] = Track(
                gate, system, alpha, low, high, direction(gate.metric) == "lower")
        self._check_all()

    def add(self, record: ItemRecord) -> bool:
        """Count one record; True when a gate was decided by it."""
        from pytest_ragbench.results.aggregate import scored_value

        self.items += 1
        self._expand(record)
        clustered = bool(record.fields.get("cluster")) or bool(
            self.cluster_by and record.fields.get(self.cluster_by) not in (None, ""))
        newly = False
        for track in self.tracks.values():
            if track.decided or not track.matches(record):
                continue
            value = scored_value(record, track.gate.metric)
            if value is None:
                continue
            track.add(value, clustered, self.min_n, self.items)
            newly = newly or track.decided
        if newly:
            self._check_all()
        return newly

    def _expand(self, record: ItemRecord) -> None:
        """A gate on ``x@k``: one track per k the first matching record recorded."""
        from pytest_ragbench.results.aggregate import direction, metric_range
        from pytest_ragbench.results.gates import at_recorded_k

        for key, waiting in list(self.pending.items()):
            name, system = key
            gate, alpha = waiting[0]
            if record.kind != gate.kind or (system is not None and record.system != system):
                continue
            found = at_recorded_k(gate, [*record.metrics, *record.unscored])
            if found == [gate]:
                continue
            del self.pending[key]
            for concrete in found:
                low, high = metric_range(concrete.metric)
                self.tracks[(name, concrete.metric, system)] = Track(
                    concrete, system, alpha / len(found), low, high,
                    direction(concrete.metric) == "lower")

    def _check_all(self) -> None:
        if self.all_decided_after is None and self.tracks and not self.pending \
                and all(t.decided for t in self.tracks.values()):
            self.all_decided_after = self.items

    @property
    def all_decided(self) -> bool:
        return self.all_decided_after is not None

    def done_keys(self) -> list[tuple[str, str | None]]:
        """(kind, system) whose gates are all decided (system None: every system)."""
        by_kind: dict[str, list[Track]] = defaultdict(list)
        for track in self.tracks.values():
            by_kind[track.gate.kind].append(track)
        waiting = {gate.kind for entries in self.pending.values() for gate, _ in entries}
        done: list[tuple[str, str | None]] = []
        for kind, tracks in by_kind.items():
            if kind in waiting:
                continue
            if all(t.decided for t in tracks):
                done.append((kind, None))
            else:
                systems = {t.system for t in tracks if t.system is not None}
                done += [(kind, s) for s in sorted(systems)
                         if all(t.decided for t in tracks if t.system in (s, None))]
        return done

    def decisions(self) -> dict[tuple[str, str, str | None], dict[str, Any]]:
        """The decided gates, by (gate name, metric, system)."""
        return {key: track.to_json() for key, track in self.tracks.items() if track.decided}

    def state(self) -> dict[str, Any]:
        """What workers need: the (kind, system) pairs done, and whether all gates are."""
        return {"done": [list(k) for k in self.done_keys()], "all": self.all_decided,
                "after": self.all_decided_after}


class Needed:
    """Whether an item still needs to run, from the controller's state (or its file)."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self.state = state or {"done": [], "all": False, "after": None}

    def reason(self, item: Any) -> str | None:
        """None when the item is needed; else why not."""
        if not hasattr(item, "record_for_report") or not hasattr(item, "item_kind"):
            return None  # other tests, and invalid-case items (their error is the point)
        if self.state.get("all"):
            return NOT_NEEDED.format(n=self.state.get("after"))
        kind, system = item_key(item)
        for done_kind, done_system in self.state.get("done") or []:
            if done_kind == kind and done_system in (None, system):
                return KIND_DONE.format(n=self.state.get("after_kind", {}).get(kind, "?"))
        return None


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write the controller's state for the workers (replaced whole: never half-read)."""
    partial = path.with_name(path.name + ".part")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text(json.dumps(state), encoding="utf-8")
    os.replace(partial, path)


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def state_path(journal: Path) -> Path:
    """The file beside the run's journal that tells workers what is decided."""
    return journal.with_name(journal.name + ".sequential.json")


# -------------------------------------------------------------------------- the plugin


@dataclass(frozen=True)
class NotRun:
    """An item left out on a worker, as the controller's terminal counts it."""

    nodeid: str


class SequentialRun:
    """The pytest side: the order, the items left out, the controller's decisions."""

    def __init__(self, config: pytest.Config, settings: RagbenchConfig) -> None:
        self.config = config
        self.settings = settings
        self.worker = hasattr(config, "workerinput")
        self.gates: SequentialGates | None = None
        # the items not run: node id, kind, system and why (sent home by each worker)
        self.left_out: list[dict[str, Any]] = []
        self._state_file: Path | None = None
        self._state_seen: float | None = None
        self.needed = Needed()
        self.kind_after: dict[str, int] = {}

    # -- the controller -----------------------------------------------------------------

    def begin(self, gates: Sequence[Any], kinds: Iterable[str],
              kept: Iterable[dict[str, Any]], journal: Path | None) -> None:
        """The selected kinds are known: start the sequences and count the kept records."""
        self.gates = SequentialGates(gates, self.settings.systems, self.settings.gate_min_n,
                                     self.settings.cluster_by)
        self.gates.start(kinds)
        self._state_file = state_path(journal) if journal is not None else None
        for data in kept:
            self.gates.add(ItemRecord.from_dict(data))
        self._publish()

    def arrived(self, record: ItemRecord) -> None:
        """The controller received an item's record."""
        if self.gates is not None and self.gates.add(record):
            self._publish()

    def _publish(self) -> None:
        assert self.gates is not None
        state = self.gates.state()
        for kind, _ in self.gates.done_keys():
            self.kind_after.setdefault(kind, self.gates.items)
        state["after_kind"] = dict(self.kind_after)
        self.needed = Needed(state)
        if self._state_file is not None and getattr(self.config.option, "numprocesses", None):
            write_state(self._state_file, state)

    def not_needed_ids(self) -> set[str]:
        """The node ids of the items not run because no gate needed them."""
        return {str(entry["nodeid"]) for entry in self.left_out}

    def section_data(self, records: Sequence[ItemRecord]) -> dict[str, Any]:
        """What results.json says of the sequential run, with what it saved."""
        gates = self.gates
        tracks = [t.to_json() for t in gates.tracks.values()] if gates is not None else []
        left = sorted(self.left_out, key=lambda e: str(e["nodeid"]))
        return {"alpha": ALPHA, "seed": self.settings.sequential_seed, "method": METHOD,
                "items_run": len(records), "items_not_needed": len(left),
                "decided_after": gates.all_decided_after if gates is not None else None,
                "gates": tracks, "saved": saved(records, left), "not_needed": left}

    # -- every process ------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """The seeded, stratified order (after every selection)."""
        items[:] = stratified_order(items, self.settings.sequential_seed)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None
                                ) -> bool | None:
        """An item no gate needs is not run: deselected with the reason."""
        if self.worker:
            self._read_state()
        reason = self.needed.reason(item)
        if reason is None:
            return None
        kind, system = item_key(item)
        self.left_out.append({"nodeid": item.nodeid, "kind": kind, "system": system,
                              "reason": reason})
        if not self.worker:
            item.ihook.pytest_deselected(items=[item])
        return True

    def _read_state(self) -> None:
        if self._state_file is None:
            run = (getattr(self.config, "workerinput", {}) or {}).get("ragbench_run")
            if not isinstance(run, dict):
                return
            self._state_file = state_path(Path(run["journal"]))
        try:
            seen = self._state_file.stat().st_mtime_ns
        except OSError:
            return
        if seen != self._state_seen:
            state = read_state(self._state_file)
            if state is not None:
                self.needed = Needed(state)
                self._state_seen = seen

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A worker hands the items it left out to the controller, which removes its file."""
        output = getattr(self.config, "workeroutput", None)
        if self.worker and output is not None:
            output[WORKEROUTPUT_KEY] = list(self.left_out)
        elif not self.worker and self._state_file is not None:
            self._state_file.unlink(missing_ok=True)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """The controller: a worker's left-out items."""
        left = (getattr(node, "workeroutput", None) or {}).get(WORKEROUTPUT_KEY) or []
        left = [entry for entry in left if isinstance(entry, dict) and "nodeid" in entry]
        self.left_out += left
        if left:
            self.config.hook.pytest_deselected(items=[NotRun(str(e["nodeid"])) for e in left])


def saved(records: Sequence[ItemRecord], left_out: Sequence[dict[str, Any]]
          ) -> dict[str, Any]:
    """Items, model calls and tokens not spent: each left-out item at its kind's mean."""
    from pytest_ragbench.results.aggregate import _roles

    per_kind: dict[tuple[str, str | None], list[tuple[float, float]]] = defaultdict(list)
    for record in records:
        calls = tokens = 0.0
        for counts in _roles(record.usage or {}).values():
            calls += _number(counts.get("calls")) - _number(counts.get("cache_hits"))
            tokens += _number(counts.get("prompt_tokens")) \
                + _number(counts.get("completion_tokens"))
        per_kind[(record.kind, record.system)].append((calls, tokens))
    calls_saved = tokens_saved = 0.0
    by_kind: dict[str, int] = defaultdict(int)
    for entry in left_out:
        kind, system = str(entry.get("kind")), entry.get("system")
        by_kind[kind] += 1
        seen = per_kind.get((kind, system)) or []
        if seen:
            calls_saved += sum(c for c, _ in seen) / len(seen)
            tokens_saved += sum(t for _, t in seen) / len(seen)
    return {"items": len(left_out), "items_by_kind": dict(sorted(by_kind.items())),
            "model_calls": round(calls_saved), "tokens": round(tokens_saved),
            "estimate": "each item not run at the mean model calls (cache hits excluded) "
                        "and tokens of the items of its kind and system that ran"}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else 0.0



def report_section(data: dict[str, Any]) -> Any:
    """The ``sequential`` section of the terminal, report.html and results.json."""
    from pytest_ragbench.results.sections import ReportSection

    table: list[list[Any]] = [["gate", "system", "decision", "after items", "values",
                               "sequence low", "sequence high", "alpha"]]
    for gate in data["gates"]:
        decision = gate["status"] if gate["status"] != "undecided" \
            else f"undecided ({gate['why_undecided'] or 'at the end: checked on every item'})"
        table.append([f"{gate['gate']} ({gate['metric']})" if gate["metric"] not in gate["gate"]
                      else gate["gate"], gate["system"] or "-", decision,
                      gate["decided_after"], gate["n"], gate["cs_low"], gate["cs_high"],
                      gate["alpha"]])
    saved_part = data["saved"]
    if data["decided_after"] is not None:
        head = (f"every gate decided after {data['decided_after']} items: "
                f"{data['items_not_needed']} items not needed (deselected)")
    elif data["items_not_needed"]:
        head = (f"{data['items_not_needed']} items not needed (their kind's gates decided); "
                f"the other gates were checked on every item run")
    else:
        head = "not every gate was decided before the items ran out: every item ran"
    text = [head]
    if data["items_not_needed"]:
        text.append(f"saved: about {saved_part['model_calls']} model calls and "
                    f"{saved_part['tokens']} tokens ({saved_part['estimate']})")
    text.append(f"order: seeded ({data['seed']}) random order stratified by kind and "
                f"category; {data['method']}, any wrong decision at most "
                f"{data['alpha'] / 2:.3g} for all gates together")
    return ReportSection(key="sequential", title="sequential gates (--ragbench-sequential)",
                         data=data, table=table, text=text)
