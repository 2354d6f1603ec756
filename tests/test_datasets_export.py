"""JSONL / manifest exports, reading back, combining, and the stats numbers."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest

from pytest_ragbench.datasets.export import (
    DuplicateIdError,
    combine,
    read_jsonl,
    write_jsonl,
    write_manifest,
)
from pytest_ragbench.datasets.sample import NormalizedSample
from pytest_ragbench.datasets.summary import dataset_stats, format_stats
from pytest_ragbench.stats import proportion_half_width, sample_size_for_half_width


def s(sample_id: str, doc_type: str = "table", answerable: bool = True, **meta: object
      ) -> NormalizedSample:
    return NormalizedSample(
        id=sample_id, question=f"Q {sample_id}?", ground_truth="A", contexts=("c",),
        doc_type=doc_type, question_type="lookup", difficulty="easy", source_dataset="src",
        metadata={"answerable": answerable, **meta})


def test_manifest_rows_check_the_jsonl_lines(tmp_path: Path) -> None:
    samples = [s("a", source_file="x.json", source_line=3), s("b", answerable=False)]
    write_jsonl(samples, tmp_path / "d.jsonl")
    write_manifest(samples, tmp_path / "d.csv")
    lines = (tmp_path / "d.jsonl").read_bytes().split(b"\n")[:-1]
    with (tmp_path / "d.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["id"] for r in rows] == ["a", "b"]
    assert [r["answerable"] for r in rows] == ["true", "false"]
    assert (rows[0]["source_file"], rows[0]["source_line"], rows[1]["source_line"]) == (
        "x.json", "3", "")
    for row, line in zip(rows, lines, strict=True):
        assert row["sha256"] == hashlib.sha256(line + b"\n").hexdigest()
    assert oct((tmp_path / "d.jsonl").stat().st_mode & 0o777) == "0o644"
    assert not list(tmp_path.glob(".*.tmp"))


def test_write_refuses_duplicate_ids(tmp_path: Path) -> None:
    with pytest.raises(DuplicateIdError, match="a"):
        write_jsonl([s("a"), s("a")], tmp_path / "d.jsonl")
    assert not (tmp_path / "d.jsonl").exists()


def test_combine_refuses_duplicates_and_names_them(tmp_path: Path) -> None:
    write_jsonl([s("a"), s("b"), s("c")], tmp_path / "one.jsonl")
    write_jsonl([s("d"), s("b"), s("a")], tmp_path / "two.jsonl")
    write_jsonl([s("e")], tmp_path / "three.jsonl")
    files = [read_jsonl(tmp_path / n) for n in ("one.jsonl", "two.jsonl")]
    with pytest.raises(DuplicateIdError) as info:
        combine(files)
    assert set(info.value.places) == {"a", "b"}
    message = str(info.value)
    assert "2 duplicate id(s)" in message
    assert f"a ({tmp_path / 'one.jsonl'}:1, {tmp_path / 'two.jsonl'}:3)" in message
    combined = combine([files[0], read_jsonl(tmp_path / "three.jsonl")])
    assert [x.id for x in combined] == ["a", "b", "c", "e"]


def test_read_jsonl_skips_and_reports_bad_lines(tmp_path: Path) -> None:
    good = json.dumps(s("a").to_dict())
    bad_field = json.dumps({**s("b").to_dict(), "question": ""})
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join([good, "{oops", bad_field, "", json.dumps({**s("c").to_dict(),
                                                                          "kind": "sql"})])
                    + "\n", encoding="utf-8")
    data = read_jsonl(path)
    assert [(line, x.id) for line, x in data.samples] == [(1, "a")]
    assert [(e.line, e.field) for e in data.errors] == [(2, None), (3, "question"),
                                                        (5, "kind")]
    assert str(data.errors[1]).startswith(f"{path}:3: field 'question'")


@pytest.mark.parametrize(("n", "half_width"), [(500, 0.0438), (800, 0.0346), (1000, 0.0310),
                                               (100, 0.098)])
def test_half_width_matches_seed_000(n: int, half_width: float) -> None:
    assert proportion_half_width(n) == pytest.approx(half_width, abs=5e-5)


def test_sample_size_for_half_width() -> None:
    assert sample_size_for_half_width(0.035) == 784
    assert sample_size_for_half_width(0.04) == 601
    assert sample_size_for_half_width(0.03) == 1068
    for target in (0.01, 0.035, 0.05, 0.1):
        n = sample_size_for_half_width(target)
        assert proportion_half_width(n) <= target < proportion_half_width(n - 1)
    with pytest.raises(ValueError, match="half_width"):
        sample_size_for_half_width(0)


def test_dataset_stats_counts_per_stratum() -> None:
    samples = [s("a"), s("b", answerable=False), s("c", doc_type="code_config")]
    stats = dataset_stats(samples, target_half_width=0.05)
    assert stats.n == 3 and stats.unanswerable == 1
    assert stats.by_doc_type == {"code_config": 1, "table": 2}
    assert stats.by_stratum == {"code_config/lookup": 1, "table/lookup": 2}
    assert stats.half_width == pytest.approx(proportion_half_width(3))
    assert stats.half_width_by_doc_type["table"] == pytest.approx(proportion_half_width(2))
    assert stats.n_for_target == 385
    text = format_stats(stats)
    assert "samples: 3" in text and "unanswerable: 1 (33.3%)" in text
    assert "n needed for ±5.0%: 385" in text
    assert format_stats(dataset_stats([])).startswith("samples: 0")
