"""Labels where they count: active sampling of the items to label, and its estimate.

The statistics (pytest_ragbench/stats/active.py) are checked by seeded simulation and by
brute force: the variance of the estimate under a design is computed by enumerating every
labelling and every human verdict of a small item set, and the design the judge's
uncertainty gives is compared with uniform and random designs of the same label budget.
The point estimate is checked against the authors' ``ppi_py`` with inverse-probability
weights. Then ``ragbench label --next N`` on items.jsonl records, the calibration of the
labels it picked, a real session, and the labelling page in headless Chromium.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_ragbench import cli
from pytest_ragbench.cases.labels import read_labels
from pytest_ragbench.results import calibration
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.stats.active import (
    active_mean_ci,
    design_variance,
    judge_uncertainty,
    poisson_sample,
    sampling_probabilities,
)
from tests.project import RagbenchProject

# ---------------------------------------------------------------- sampling probabilities


def test_probabilities_sum_to_the_budget_with_a_floor_and_a_cap() -> None:
    u = np.array([0.0, 0.0, 0.1, 0.2, 0.5, 5.0] + [0.05] * 14)
    pi = sampling_probabilities(u, 6)
    assert pi.sum() == pytest.approx(6)
    assert pi.max() == 1.0  # the dominant item is capped and its excess shared out
    assert pi.min() >= 0.5 * 6 / u.size - 1e-12  # the uniform share is a floor
    order = np.argsort(u, kind="stable")
    assert (np.diff(pi[order]) >= -1e-12).all()  # more uncertainty, more probability
    assert sampling_probabilities(np.zeros(10), 4) == pytest.approx(np.full(10, 0.4))
    assert sampling_probabilities(u, u.size) == pytest.approx(np.ones(u.size))
    with pytest.raises(ValueError, match="expected label count"):
        sampling_probabilities(u, 0)
    with pytest.raises(ValueError, match=">= 0"):
        sampling_probabilities([-1.0, 1.0], 1)


def test_uncertainty_is_the_samples_spread_else_that_of_the_score() -> None:
    u = judge_uncertainty([0.5, 1.0, 0.0, 2 / 3], [[], [1.0], [0.0, 0.0, 0.0], [1, 1, 0]])
    assert u == pytest.approx([0.5, 0.0, 0.0, np.std([1, 1, 0], ddof=1)])
    # on a metric's own range: 3 on 1-5 is the middle
    assert judge_uncertainty([3.0, 5.0], low=1, high=5) == pytest.approx([0.5, 0.0])


def test_poisson_sampling_is_seeded_and_follows_the_probabilities() -> None:
    pi = np.linspace(0.05, 0.95, 50)
    assert (poisson_sample(pi, 3) == poisson_sample(pi, 3)).all()
    draws = np.array([poisson_sample(pi, seed) for seed in range(4000)])
    assert np.abs(draws.mean(0) - pi).max() < 4 * np.sqrt(0.25 / 4000)


# ---------------------------------------------------------------- the estimate


def _population(rng: np.random.Generator, n: int, judge: str = "calibrated"
                ) -> tuple[np.ndarray, np.ndarray, float]:
    """Judge scores f, human 0/1 labels h, and the population's human mean.

    ``calibrated``: the person says 1 with probability f (f ~ Beta(0.4, 0.4): a judge
    sure of most items); ``biased``: the same people, the judge's score shifted up by 0.2.
    """
    p = rng.beta(0.4, 0.4, n)
    h = (rng.random(n) < p).astype(float)
    f = p if judge == "calibrated" else np.clip(p + 0.2, 0, 1)
    return f, h, 0.5


def test_point_estimate_matches_ppi_py_with_inverse_probability_weights() -> None:
    """``ppi_py`` weights the labeled terms by w = 1/π normalised to mean 1 (Hájek): with
    S = Σ 1/π over the labeled items its rectifier R is Σ (h − λ·f)/π / S, and the active
    estimate is λ·mean(f) + c·(1 − S/N) + R·S/N; with uniform π = n/N (S = N) the two are
    equal."""
    from ppi_py import ppi_mean_pointestimate

    rng = np.random.default_rng(5)
    f, h, _ = _population(rng, 400)
    pi = sampling_probabilities(judge_uncertainty(f), 60)
    xi = poisson_sample(pi, 8)
    n = int(xi.sum())
    total = float((1 / pi[xi]).sum())
    for method in ("active", "active++"):
        result = active_mean_ci(f, f[xi], h[xi], pi[xi], method=method)  # type: ignore[arg-type]
        theirs = float(np.squeeze(ppi_mean_pointestimate(h[xi], f[xi], f, lam=result.lam,
                                                         w=1 / pi[xi])))
        rectifier = theirs - result.lam * f.mean()
        assert result.mean == pytest.approx(
            result.lam * f.mean() + result.shift * (1 - total / f.size)
            + rectifier * total / f.size, abs=1e-12)
    even = np.full(f.size, n / f.size)
    result = active_mean_ci(f, f[xi], h[xi], even[xi])
    theirs = float(np.squeeze(ppi_mean_pointestimate(h[xi], f[xi], f, lam=result.lam)))
    assert result.mean == pytest.approx(theirs, abs=1e-12)
    plain = active_mean_ci(f, f[xi], h[xi], pi[xi], method="active")
    assert (plain.lam, plain.shift) == (1.0, 0.0)


def test_tuning_picks_the_lambda_and_shift_of_least_estimated_variance() -> None:
    rng = np.random.default_rng(2)
    f, h, _ = _population(rng, 500, "biased")
    pi = sampling_probabilities(judge_uncertainty(f), 50)
    xi = poisson_sample(pi, 1)
    tuned = active_mean_ci(f, f[xi], h[xi], pi[xi])
    weights = np.where(xi, 1 / pi, 0.0)

    def se(lam: float, shift: float) -> float:
        z = lam * f + shift + (h - lam * f - shift) * weights
        return float(z.std(ddof=1) / np.sqrt(f.size))

    grid = [(lam, shift) for lam in np.linspace(0, 1, 201)
            for shift in np.linspace(-0.5, 0.5, 201)]
    best = min(grid, key=lambda x: se(*x))
    assert tuned.se == pytest.approx(se(tuned.lam, tuned.shift))
    assert tuned.se <= se(*best) + 1e-12
    assert (tuned.lam, tuned.shift) == pytest.approx(best, abs=0.01)
    assert tuned.se < active_mean_ci(f, f[xi], h[xi], pi[xi], method="active").se


def test_the_estimate_is_unbiased_for_any_probabilities() -> None:
    """A fixed population, a lopsided design; the λ = 1 estimate averages to mean(h)."""
    rng = np.random.default_rng(11)
    f, h, _ = _population(rng, 300, "biased")
    pi = np.clip(rng.uniform(0.02, 0.4, f.size), 0, 1)  # unrelated to anything
    estimates = []
    for seed in range(4000):
        xi = poisson_sample(pi, seed)
        estimates.append(active_mean_ci(f, f[xi], h[xi], pi[xi], method="active").mean)
    values = np.array(estimates)
    assert abs(values.mean() - h.mean()) < 4 * values.std() / np.sqrt(values.size)
    assert abs(f.mean() - h.mean()) > 0.1  # the judge alone is far off


def _sessions(judge: str, budget: int, reps: int, seed: int
              ) -> dict[str, tuple[float, float]]:
    """Coverage and mean width of the active and uniform designs over fresh populations."""
    rng = np.random.default_rng(seed)
    found: dict[str, list[tuple[bool, float]]] = {"active": [], "uniform": []}
    for _ in range(reps):
        f, h, truth = _population(rng, 1000, judge)
        designs = {"active": sampling_probabilities(judge_uncertainty(f), budget),
                   "uniform": np.full(f.size, budget / f.size)}
        for name, pi in designs.items():
            xi = poisson_sample(pi, int(rng.integers(2**31)))
            if xi.sum() < 2:
                continue
            ci = active_mean_ci(f, f[xi], h[xi], pi[xi])
            found[name].append((ci.low <= truth <= ci.high, ci.high - ci.low))
    return {name: (float(np.mean([c for c, _ in rows])), float(np.mean([w for _, w in rows])))
            for name, rows in found.items()}


@pytest.mark.parametrize("budget", [20, 50, 100])
def test_active_intervals_cover_and_are_narrower_than_uniform_ones(budget: int) -> None:
    """Coverage near 0.95; narrower than uniform picks at equal budget.

    At 20 labels every interval here covers 0.92-0.93 of sessions (the report's PPI++ with
    20 uniformly picked labels too, benchmarks/bench_active_labels.py): the aim there is
    0.9, from 50 labels 0.93. The biased judge is sure (score 1) of a third of the items and
    wrong on a tenth of those: rare labels of heavy weight.
    """
    aim = 0.93 if budget >= 50 else 0.9
    for judge in ("calibrated", "biased"):
        result = _sessions(judge, budget, 600, seed=budget)
        assert result["active"][0] >= aim, (judge, result)
        assert result["uniform"][0] >= aim, (judge, result)
        if judge == "calibrated":  # the judge's uncertainty is informative
            assert result["active"][1] < 0.95 * result["uniform"][1], result


# ---------------------------------------------------------------- brute force


def _brute_force_variance(f: np.ndarray, p: np.ndarray, pi: np.ndarray) -> float:
    """Var of (1/N)·Σ [f + (h − f)·ξ/π] over every labelling ξ and every verdict h.

    h_i ~ Bernoulli(p_i) and ξ_i ~ Bernoulli(π_i), all independent: 2^N × 2^N outcomes.
    """
    n = f.size
    outcomes = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
    h, xi = outcomes[:, None, :], outcomes[None, :, :]
    estimate = (f + (h - f) * xi / pi).mean(-1)
    weight = (np.where(h == 1, p, 1 - p).prod(-1) * np.where(xi == 1, pi, 1 - pi).prod(-1))
    mean = float((weight * estimate).sum())
    return float((weight * (estimate - mean) ** 2).sum())


def test_the_uncertainty_design_has_the_least_variance_by_brute_force() -> None:
    """With a calibrated judge (h ~ Bernoulli(f)) E[(h − f)²] = f(1 − f): the design
    π ∝ sqrt(f(1 − f)) is the closed-form optimum, and brute force agrees that no design of
    the same budget does better."""
    rng = np.random.default_rng(4)
    f = np.array([0.02, 0.1, 0.3, 0.5, 0.6, 0.85, 0.95, 0.99])
    p = f  # calibrated
    budget = 3.0
    optimum = sampling_probabilities(judge_uncertainty(f), budget, uniform_share=0.0)
    default = sampling_probabilities(judge_uncertainty(f), budget)
    uniform = np.full(f.size, budget / f.size)
    assert optimum.max() < 1  # no cap: exactly the closed form, scaled to the budget
    assert optimum == pytest.approx(budget * np.sqrt(f * (1 - f)) / np.sqrt(f * (1 - f)).sum())
    best = _brute_force_variance(f, p, optimum)
    assert best == pytest.approx(design_variance(f, f * (1 - f), np.zeros(f.size), optimum))
    assert best < _brute_force_variance(f, p, default) < _brute_force_variance(f, p, uniform)
    for _ in range(200):
        other = sampling_probabilities(rng.random(f.size) ** 3, budget, uniform_share=0.0)
        assert best <= _brute_force_variance(f, p, other) + 1e-12


def test_the_ranking_is_that_of_the_variance_each_label_removes() -> None:
    """Labelling item i for sure (π_i = 1, the others uniform) removes the most variance,
    by brute force, for the items the design gives the highest probability."""
    f = np.array([0.5, 0.02, 0.75, 0.97, 0.35, 0.15])
    base = np.full(f.size, 0.4)
    base_variance = _brute_force_variance(f, f, base)
    removed = []
    for index in range(f.size):
        design = base.copy()
        design[index] = 1.0
        removed.append(base_variance - _brute_force_variance(f, f, design))
    pi = sampling_probabilities(judge_uncertainty(f), 2.4)
    assert list(np.argsort(removed)[::-1]) == list(np.argsort(pi)[::-1])


# ---------------------------------------------------------------- ragbench label


def _record(index: int, samples: list[float], **extra: Any) -> dict[str, Any]:
    mean = sum(samples) / len(samples)
    record = {"nodeid": f"cases.jsonl::ragas[q{index}]", "kind": "ragas",
              "case_kind": "ragas", "case_id": f"q{index}", "file": "cases.jsonl",
              "line": index + 1, "status": "passed",
              "metrics": {"faithfulness": mean, "token_f1": 0.25},
              "judge": {"metrics": ["faithfulness"], "samples": {"faithfulness": samples},
                        "n_samples": len(samples)},
              "evidence": {"question": f"<b>question {index}</b>", "answer": f"answer {index}",
                           "contexts": f"[1] context of {index}"}}
    record.update(extra)
    return record


def _report(folder: Path, n: int = 80, seed: int = 0) -> list[dict[str, Any]]:
    """items.jsonl of ``n`` judged items: a third the judge is split on, the rest sure."""
    rng = np.random.default_rng(seed)
    records = []
    for index in range(n):
        if index % 3 == 0:
            samples = [float(x) for x in rng.random(3) < 0.5]
            samples[:2] = [0.0, 1.0]  # split
        else:
            samples = [float(index % 2)] * 3
        records.append(_record(index, samples))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def _label(*args: str) -> int:
    return cli.main(["label", *args])


def test_label_next_picks_where_the_judge_is_split_and_keeps_pi(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _report(tmp_path / "run")
    assert _label("--next", "20", f"--report={tmp_path / 'run'}", "--seed", "3") == 0
    out = capsys.readouterr().out
    assert "ragas.faithfulness:" in out and "expected 20" in out
    lines = [json.loads(x) for x in (tmp_path / "run" / "labels-next.jsonl").read_text()
             .splitlines()]
    assert lines and {x["metric"] for x in lines} == {"faithfulness"}
    assert all(x["score"] is None and 0 < x["pi"] <= 1 and x["kind"] == "ragas"
               for x in lines)
    assert [x["pi"] for x in lines] == sorted((x["pi"] for x in lines), reverse=True)
    split = {f"q{i}" for i in range(0, len(records), 3)}
    pis = {x["id"]: x["pi"] for x in lines}
    rest = [pis[i] for i in pis if i not in split]
    assert not rest or min(pis[i] for i in pis if i in split) > max(rest)
    # the split items, a third of them, get more than half the budget and of the picks
    assert sum(x["id"] in split for x in lines) > len(lines) / 2
    again = tmp_path / "again.jsonl"
    assert _label("--next", "20", f"--report={tmp_path / 'run'}", "--seed", "3",
                  f"--out={again}") == 0
    assert [json.loads(x) for x in again.read_text().splitlines()] == lines
    assert again.with_suffix(".html").is_file()
    other = tmp_path / "other.jsonl"
    assert _label("--next", "20", f"--report={tmp_path / 'run'}", "--seed", "4",
                  f"--out={other}") == 0
    assert other.read_text() != again.read_text()


def test_the_probabilities_sum_to_n_over_every_item(tmp_path: Path) -> None:
    from pytest_ragbench.labelling.pick import plan_cell, read_items

    _report(tmp_path)
    records = read_items(tmp_path)
    plan = plan_cell(records, "ragas", "faithfulness", 20, seed=0)
    assert len(plan.items) == 80
    assert sum(p.pi for p in plan.items) == pytest.approx(20)
    active, uniform = plan.half_widths()
    assert active < uniform


@pytest.mark.parametrize(("args", "message"), [
    (["--next", "0"], "--next must be at least 1"),
    (["--next", "5", "--report=missing"], "missing: no such report folder"),
    (["--next", "5", "--report=empty"], "no items file in the report folder"),
    (["--next", "5", "--report=run", "--metric=faithfulnes"],
     "no item scored metric 'faithfulnes' (scored metrics: faithfulness, token_f1)"),
    (["--next", "5", "--report=unjudged"], "no judged metric in this run"),
])
def test_label_errors_are_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str], args: list[str],
                                message: str) -> None:
    monkeypatch.chdir(tmp_path)
    _report(tmp_path / "run", 10)
    (tmp_path / "empty").mkdir()
    (tmp_path / "unjudged").mkdir()
    (tmp_path / "unjudged" / "items.jsonl").write_text(
        json.dumps(_record(0, [1.0], judge={})) + "\n")
    assert _label(*args) == 2
    assert message in capsys.readouterr().err


def test_a_scored_metric_without_a_judge_can_be_named(tmp_path: Path) -> None:
    _report(tmp_path, 30)
    assert _label("--next", "5", f"--report={tmp_path}", "--metric=token_f1") == 0
    lines = (tmp_path / "labels-next.jsonl").read_text().splitlines()
    assert all(json.loads(x)["metric"] == "token_f1" for x in lines)


# ---------------------------------------------------------------- the calibration


def _fill(template: Path, human: dict[str, float], out: Path) -> None:
    lines = [json.loads(x) for x in template.read_text().splitlines()]
    for line in lines:
        line["score"] = human[line["id"]]
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_labels_with_pi_get_the_active_estimate(tmp_path: Path) -> None:
    raw = _report(tmp_path, 200, seed=1)
    rng = np.random.default_rng(9)
    human = {r["case_id"]: float(rng.random() < r["metrics"]["faithfulness"]) for r in raw}
    assert _label("--next", "40", f"--report={tmp_path}") == 0
    _fill(tmp_path / "labels-next.jsonl", human, tmp_path / "filled.jsonl")
    labels = read_labels(tmp_path / "filled.jsonl")
    assert not labels.errors and all(x.pi is not None for x in labels.labels)
    records = [ItemRecord.from_dict(r) for r in raw]
    matching = calibration.match(records, labels.labels)
    document = calibration.section(records, [], matching)
    entry = document["ragas"]["faithfulness"]
    assert entry["ppi_method"] == "active++"
    assert entry["ppi_gate_method"] == "active++ (large-sample)"
    chosen = [x for x in labels.labels]
    f_all = [r["metrics"]["faithfulness"] for r in raw]
    by_id = {r["case_id"]: r["metrics"]["faithfulness"] for r in raw}
    by_hand = active_mean_ci(f_all, [by_id[x.case_id] for x in chosen],
                             [x.score for x in chosen], [x.pi for x in chosen])
    assert entry["ppi_mean"] == pytest.approx(by_hand.mean)
    assert (entry["ppi_ci_low"], entry["ppi_ci_high"]) == pytest.approx(
        (by_hand.low, by_hand.high))
    lines = calibration.lines({"judge_calibration": document})
    assert any("active sampling, each weighted by 1/pi" in x for x in lines)
    # The same labels without pi: PPI++, as before.
    plain = [type(x)(x.case_id, x.metric, x.score, x.kind, x.system) for x in labels.labels]
    entry = calibration.section(records, [], calibration.match(records, plain))[
        "ragas"]["faithfulness"]
    assert entry["ppi_method"] == "ppi++"
    # Some with pi and some without: PPI++, and a note says why.
    mixed = calibration.section(records, [], calibration.match(
        records, labels.labels[:5] + plain[5:]))["ragas"]["faithfulness"]
    assert mixed["ppi_method"] == "ppi++"
    assert "carry an inclusion probability (pi) and the others do not" in mixed["note"]


@pytest.mark.parametrize(("value", "shown"), [
    ("0", "int 0"), ("1.5", "float 1.5"), ('"high"', 'str "high"'), ("true", "bool true"),
    ("-0.2", "float -0.2")])
def test_a_bad_pi_names_file_line_and_field(tmp_path: Path, value: str, shown: str) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"id": "a", "metric": "m", "score": 1, "pi": 0.5}\n'
                    f'{{"id": "b", "metric": "m", "score": 1, "pi": {value}}}\n')
    result = read_labels(path, "labels.jsonl")
    assert [x.pi for x in result.labels] == [0.5]
    assert [str(e) for e in result.errors] == [
        f"labels.jsonl:2: field 'pi': expected an inclusion probability in (0, 1], got {shown}"]


SQL_CASES = "kind: sql\ncases:\n" + "".join(
    f"  - id: team_{i}\n    question: How many points did team {i} score?\n"
    f"    expected_sql: SELECT points FROM scores WHERE team = 'Lakers'\n"
    f"    ground_truth_data: {{points: {9500 if i % 3 else 1}}}\n" for i in range(12))


def test_label_next_after_a_real_session_and_back(pytester: pytest.Pytester) -> None:
    """A session (sql ground truth, no model), ``ragbench label``, the labels back in."""
    project = RagbenchProject(pytester).ini(ragbench_db_url="sqlite:///scores.db")
    project.scores_db()
    project.cases("scores.yaml", SQL_CASES)
    project.runpytest_subprocess("-p", "no:cacheprovider")
    report = project.path / ".ragbench"
    assert _label("--next", "8", f"--report={report}", "--metric=match",
                  "--kind=sql_ground_truth", "--seed", "1") == 0
    template = report / "labels-next.jsonl"
    lines = [json.loads(x) for x in template.read_text().splitlines()]
    assert len(lines) >= 2 and all(x["pi"] == pytest.approx(8 / 12) for x in lines)
    # A reviewer who agrees with the check except on team_0.
    items = {i["case_id"]: i["metrics"]["match"] for i in project.items()
             if i["kind"] == "sql_ground_truth"}
    human = {k: (1.0 - v if k == "team_0" else v) for k, v in items.items()}
    _fill(template, human, project.path / "labels.jsonl")
    project.runpytest_subprocess("-p", "no:cacheprovider", "--ragbench-judge-labels=labels.jsonl")
    entry = project.results()["judge_calibration"]["sql_ground_truth"]["match"]
    assert entry["ppi_method"] == "active++"
    assert entry["n_labeled"] == len(lines)
    assert entry["ppi_ci_low"] <= entry["ppi_mean"] <= entry["ppi_ci_high"]


# ---------------------------------------------------------------- the labelling page


def _press(page: Any, key: str) -> None:
    code = f"Digit{key}" if key.isdigit() else f"Key{key.upper()}"
    for kind in ("keyDown", "keyUp"):
        page.send("Input.dispatchKeyEvent", type=kind, key=key, code=code,
                  text=key if kind == "keyDown" else "",
                  windowsVirtualKeyCode=ord(key.upper()))


def test_the_page_labels_with_the_keyboard_and_saves_a_label_file(tmp_path: Path) -> None:
    from tests.browser import browser, require_chromium

    chromium = require_chromium()
    _report(tmp_path / "run", 40)
    assert _label("--next", "10", f"--report={tmp_path / 'run'}") == 0
    template = [json.loads(x) for x in (tmp_path / "run" / "labels-next.jsonl")
                .read_text().splitlines()]
    html = tmp_path / "run" / "labels-next.html"
    assert "http" not in html.read_text().replace("http-equiv", "")  # nothing to fetch
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with browser(chromium) as page:
        page.send("Page.setDownloadBehavior", behavior="allow", downloadPath=str(downloads))
        page.open(html.as_uri())
        assert page.evaluate("document.getElementById('progress').textContent") == \
            f"item 1 of {len(template)}, 0 labelled"
        # the case text is text, never markup
        assert page.evaluate("document.querySelector('#evidence b')") is None
        assert page.evaluate("document.querySelector('#evidence .block').textContent") == \
            next(f"<b>question {x['id'][1:]}</b>" for x in template)
        _press(page, "1")  # item 1: 1, moves on
        _press(page, "0")  # item 2: 0, moves on
        _press(page, "k")  # back to item 2
        assert "item 2 of" in page.evaluate("document.getElementById('progress').textContent")
        assert page.evaluate("document.getElementById('score').value") == "0"
        _press(page, "j")
        _press(page, "s")
        saved = downloads / "labels.jsonl"
        deadline = time.monotonic() + 30
        while not saved.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        warning = page.evaluate("document.getElementById('warning').textContent")
    assert f"{len(template) - 2} item(s) not labelled yet" in warning
    result = read_labels(saved)
    assert not result.errors
    assert [(x.case_id, x.metric, x.score, x.kind, x.pi) for x in result.labels] == [
        (t["id"], "faithfulness", score, "ragas", t["pi"])
        for t, score in zip(template[:2], (1.0, 0.0), strict=True)]


def test_several_systems_keep_their_own_picks_and_weights(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    raw = []
    for system in ("dense", "bm25"):
        for index in range(60):
            samples = [float(x) for x in rng.random(3) < (0.5 if index % 2 else 0.95)]
            record = _record(index, samples, system=system)
            record["nodeid"] += f"[{system}]"
            raw.append(record)
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in raw))
    assert _label("--next", "30", f"--report={tmp_path}", "--seed", "2") == 0
    lines = [json.loads(x) for x in (tmp_path / "labels-next.jsonl").read_text().splitlines()]
    assert {x["system"] for x in lines} == {"dense", "bm25"}
    human = {(r["case_id"], r["system"]): float(rng.random() < r["metrics"]["faithfulness"])
             for r in raw}
    for line in lines:
        line["score"] = human[line["id"], line["system"]]
    (tmp_path / "filled.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    labels = read_labels(tmp_path / "filled.jsonl")
    records = [ItemRecord.from_dict(r) for r in raw]
    matching = calibration.match(records, labels.labels)
    assert sum(len(v) for v in matching.pi.values()) == len(lines)  # one item per line
    entry = calibration.section(records, ["dense", "bm25"], matching)["ragas"]["faithfulness"]
    assert entry["ppi_method"] == "active++" and entry["n_labeled"] == len(lines)
    assert {s: e["ppi_method"] for s, e in entry["systems"].items()} == {
        "dense": "active++", "bm25": "active++"}
