from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import FrozenInstanceError
from typing import get_args

import pytest

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.metrics import (
    REGISTRY,
    DuplicateMetricError,
    MetricSpec,
    UnknownMetricError,
    Unscored,
    get_metric,
    parse_metric,
)
from pytest_ragbench.metrics.registry import Family, MetricRegistry, Need


@pytest.mark.parametrize(
    ("text", "canonical", "trec_key"),
    [
        ("nDCG@10", "nDCG@10", "ndcg_cut_10"),
        ("ndcg_cut_10", "nDCG@10", "ndcg_cut_10"),
        ("ndcg_cut.10", "nDCG@10", "ndcg_cut_10"),
        ("ndcg", "nDCG", "ndcg"),
        ("P@5", "P@5", "P_5"),
        ("P_5", "P@5", "P_5"),
        ("R@100", "R@100", "recall_100"),
        ("recall_100", "R@100", "recall_100"),
        ("AP", "AP", "map"),
        ("map", "AP", "map"),
        ("MAP@10", "AP@10", "map_cut_10"),
        ("map_cut_10", "AP@10", "map_cut_10"),
        ("RR", "RR", "recip_rank"),
        ("recip_rank", "RR", "recip_rank"),
        ("MRR", "RR", "recip_rank"),
        ("Rprec", "Rprec", "Rprec"),
        ("Bpref", "Bpref", "bpref"),
        ("bpref", "Bpref", "bpref"),
        ("Success@10", "Success@10", "success_10"),
        ("success_10", "Success@10", "success_10"),
        ("num_ret", "NumRet", "num_ret"),
        ("num_rel", "NumRel", "num_rel"),
        ("num_rel_ret", "NumRelRet", "num_rel_ret"),
        ("NumQ", "NumQ", "num_q"),
    ],
)
def test_ir_names_in_both_styles_parse_to_one_measure(text: str, canonical: str,
                                                      trec_key: str) -> None:
    measure = parse_metric(text)
    assert measure.name == canonical
    assert measure.trec_key == trec_key
    assert measure.spec.family == "ir"


def test_lookups_ignore_case_and_surrounding_space() -> None:
    assert parse_metric(" ndcg@10 ").name == "nDCG@10"
    assert parse_metric("TOKEN_F1").name == "token_f1"
    assert get_metric("f1_score") is get_metric("F1")


def test_plain_recall_is_the_set_metric_and_recall_with_cutoff_is_ir() -> None:
    assert parse_metric("recall").spec.family == "set"
    assert parse_metric("recall_20").spec.family == "ir"
    assert parse_metric("Recall@20").name == "R@20"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("P", "needs a cutoff"),
        ("Success", "needs a cutoff"),
        ("RR@10", "takes no cutoff"),
        ("token_f1@3", "takes no cutoff"),
        ("P@0", "at least 1"),
        ("ndgc@10", "unknown metric"),
        ("", "unknown metric"),
    ],
)
def test_bad_names_give_clear_errors(text: str, message: str) -> None:
    with pytest.raises(UnknownMetricError, match=message):
        parse_metric(text)


def test_unknown_metric_error_is_a_config_error_listing_known_names() -> None:
    with pytest.raises(ConfigError, match=r"known metrics: .*token_f1"):
        get_metric("bleurt")


def _spec(name: str, **kw: object) -> MetricSpec:
    return MetricSpec(name, "answer", "test metric", frozenset({"texts"}), **kw)  # type: ignore[arg-type]


def test_registering_a_name_twice_is_an_error() -> None:
    registry = MetricRegistry()
    registry.register(_spec("overlap"))
    with pytest.raises(DuplicateMetricError, match="overlap"):
        registry.register(_spec("overlap"))
    with pytest.raises(DuplicateMetricError, match="overlap"):
        registry.register(_spec("OVERLAP"))
    with pytest.raises(DuplicateMetricError, match="overlap"):
        registry.register(_spec("other", aliases=("Overlap",)))
    assert [s.name for s in registry] == ["overlap"]


def test_builtin_metric_names_cannot_be_registered_again() -> None:
    for spec in REGISTRY:
        with pytest.raises(DuplicateMetricError):
            REGISTRY.register(spec)


def test_every_builtin_declares_range_direction_and_needs() -> None:
    families = set(get_args(Family))
    for spec in REGISTRY:
        assert spec.low < spec.high, spec.name
        assert spec.direction in {"higher", "lower", "none"}, spec.name
        assert spec.needs and spec.needs <= set(get_args(Need))
        assert spec.family in families
        assert spec.description
        if spec.family == "ir":
            assert spec.trec or spec.trec_cut, spec.name
    assert "judge" in get_metric("faithfulness").needs
    assert "embeddings" in get_metric("semantic_similarity").needs
    assert get_metric("NumRet").high == math.inf


def test_check_keeps_the_range_and_turns_nan_into_unscored() -> None:
    ndcg = parse_metric("nDCG@10")
    assert ndcg.check(0.5) == 0.5
    assert ndcg.check(1.0 + 1e-12) == 1.0
    unscored = ndcg.check(float("nan"))
    assert isinstance(unscored, Unscored)
    assert "NaN" in unscored.reason
    with pytest.raises(ValueError, match=r"outside its range \[0.0, 1.0\]"):
        ndcg.check(1.5)
    assert parse_metric("semantic_similarity").check(-0.25) == -0.25
    assert parse_metric("num_ret").check(1500.0) == 1500.0
    reason = Unscored("no judge configured")
    assert ndcg.check(reason) is reason


def test_unscored_is_a_frozen_value_with_a_reason() -> None:
    value = Unscored("no judge configured")
    assert value == Unscored("no judge configured")
    with pytest.raises(FrozenInstanceError):
        value.reason = "x"  # type: ignore[misc]


def test_importing_metrics_and_stats_loads_no_heavy_library() -> None:
    code = (
        "import sys, pytest_ragbench.metrics, pytest_ragbench.stats\n"
        "heavy = [m for m in ('numpy', 'scipy', 'pytrec_eval', 'ragas', 'torch') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
