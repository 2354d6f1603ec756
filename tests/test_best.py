"""The best configuration's statistics (results/best.py), shown by seeded simulation."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_ragbench.results.best import best_toml, pareto, rank_objective, section
from pytest_ragbench.results.records import ItemRecord

SYSTEMS = [f"c{i}" for i in range(5)]


def _records(rng: np.random.Generator, means: list[float], n: int, *, binary: bool = False
             ) -> list[ItemRecord]:
    """``n`` cases scored by each configuration: a shared case effect plus noise (paired)."""
    case = rng.normal(0, 0.1, n)
    records = []
    for system, mean in zip(SYSTEMS, means, strict=True):
        if binary:
            values = (rng.random(n) < np.clip(mean + case, 0, 1)).astype(float)
            metric = "answered"
        else:
            values = np.clip(mean + case + rng.normal(0, 0.15, n), 0, 1)
            metric = "semantic_similarity"
        records += [ItemRecord(nodeid=f"f::vector[{system}-q{i:03d}]", kind="vector",
                               case_kind="vector", case_id=f"q{i:03d}", file="f", line=i,
                               status="passed", system=system, metrics={metric: float(v)})
                    for i, v in enumerate(values)]
    return records


@pytest.mark.parametrize(("means", "binary"), [
    ([0.50, 0.49, 0.49, 0.48, 0.30], False),  # the best by a hair, and one far behind
    ([0.60, 0.58, 0.58, 0.55, 0.30], True),   # pass/fail metric: exact McNemar
])
def test_the_best_set_holds_the_truly_best_at_least_95_percent(means: list[float],
                                                               binary: bool) -> None:
    """Seeded: c0 is truly best; the set not significantly worse than the best keeps it."""
    rng = np.random.default_rng(20261128)
    metric = "vector.answered" if binary else "vector.semantic_similarity"
    runs = 200
    kept = excluded_far_behind = 0
    for _ in range(runs):
        found = rank_objective(_records(rng, means, 60, binary=binary), metric, SYSTEMS)
        assert found["family"] == len(SYSTEMS) - 1  # k - 1 comparisons, not all pairs
        kept += "c0" in found["best_set"]
        excluded_far_behind += "c4" not in found["best_set"]
    print(f"{metric}: truly best kept {kept}/{runs}, far behind left out "
          f"{excluded_far_behind}/{runs}")
    assert kept / runs >= 0.95
    # Not a set that keeps everything: the configuration far behind is left out.
    assert excluded_far_behind / runs >= 0.8


def test_ranking_delta_and_holm_against_the_reference() -> None:
    """Differences are each configuration's paired mean minus the best's; p Holm-adjusted."""
    from statsmodels.stats.multitest import multipletests

    from pytest_ragbench.results.comparisons import sign_flip_pvalues

    rng = np.random.default_rng(7)
    records = _records(rng, [0.4, 0.5, 0.45, 0.3, 0.5], 30)
    found = rank_objective(records, "vector.semantic_similarity", SYSTEMS)
    values = {s: [r.metrics["semantic_similarity"] for r in records if r.system == s]
              for s in SYSTEMS}
    means = {s: float(np.mean(v)) for s, v in values.items()}
    assert found["best"] == max(means, key=lambda s: means[s])
    rows = found["ranking"][1:]
    for row in rows:
        assert row["delta"] == pytest.approx(means[row["system"]] - means[found["best"]])
    raw = [p["p_value"] for p in sign_flip_pvalues(
        [(np.subtract(values[r["system"]], values[found["best"]]).tolist(), [None] * 30)
         for r in rows], 10_000)]
    expected = multipletests(raw, method="holm")[1]
    assert [r["p_holm"] for r in rows] == pytest.approx(list(expected))


def test_pareto_front_and_best_toml() -> None:
    ranked = {"direction": "higher", "ranking": [
        {"system": "a", "mean": 0.9}, {"system": "b", "mean": 0.8}, {"system": "c", "mean": 0.7}]}
    spent = {"a": {"latency_s": 2.0, "model_calls": 1.0},
             "b": {"latency_s": 1.0, "model_calls": 1.0},
             "c": {"latency_s": 1.5, "model_calls": 1.0}}  # worse and slower than b
    assert [r["pareto"] for r in pareto(ranked, spent)] == [True, True, False]
    records = _records(np.random.default_rng(3), [0.3, 0.8, 0.3, 0.3, 0.3], 20)
    configurations = [{"name": s, "system": "embedded", "params": {"top_k": i + 1},
                       "default": s == "c0"} for i, s in enumerate(SYSTEMS)]
    best = section(records, configurations, ["vector.semantic_similarity"], {})
    assert best is not None and best["recommended"]["system"] == "c1"
    gain = best["recommended"]["advantage"]
    assert gain["default"] == "c0" and gain["delta"] > 0 and gain["ci_low"] > 0
    import tomllib

    text = best_toml(best)
    assert tomllib.loads(text)["config"] == {"system": "embedded", "name": "c1",
                                             "params": {"top_k": 2}}
    assert "advantage over the default c0" in text
