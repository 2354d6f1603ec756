"""``beir[<dataset>/<query-id>]`` items: BEIR folders through real pytest sessions.

Runs that index with the real all-MiniLM-L6-v2 embedder go through subprocesses (torch
cannot be loaded twice in one process) and share one cache folder, so the bundled corpus
is embedded once for the module. Collection-only runs stay in process.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.beir import QrelsLines, read_qrels, read_queries
from tests.conftest import REPO_ROOT, oracle_file
from tests.helpers import XDIST_MODES, failure_section
from tests.project import RagbenchProject

BUNDLED = REPO_ROOT / "test_cases" / "beir" / "nba_mini"


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ragbench-cache")


def _bundled_project(pytester: pytest.Pytester) -> RagbenchProject:
    """A project holding a copy of the bundled dataset and the bundled ragbench.toml."""
    project = RagbenchProject(pytester)
    shutil.copytree(BUNDLED, project.cases_dir() / "beir" / "nba_mini")
    project.gates((REPO_ROOT / "test_cases" / "ragbench.toml").read_text(encoding="utf-8"))
    return project


# -- the bundled dataset on the embedded default, checked against beir's own evaluation ------


def test_dataset_metrics_equal_beir_evaluate_retrieval(pytester: pytest.Pytester,
                                                       shared_cache: Path) -> None:
    evaluation = pytest.importorskip("beir.retrieval.evaluation")
    loader = pytest.importorskip("beir.datasets.data_loader")
    from beir.retrieval import custom_metrics

    project = _bundled_project(pytester)
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider",
                                          f"--ragbench-cache={shared_cache}")
    result.assert_outcomes(passed=34)
    assert result.ret == pytest.ExitCode.OK  # the bundled gates hold on the default
    report = project.report_dir()

    # The run as written, read back in file order (trec_eval order: score desc, id desc).
    run: dict[str, dict[str, float]] = {}
    for line in (report / "nba_mini.run.trec").read_text().splitlines():
        qid, _, doc, rank, score, _ = line.split()
        ranking = run.setdefault(qid, {})
        assert int(rank) == len(ranking) + 1
        ranking[doc] = float(score)
    assert len(run) == 34 and all(len(r) == 100 for r in run.values())
    for ranking in run.values():
        keys = [(score, doc) for doc, score in ranking.items()]
        assert keys == sorted(keys, reverse=True)

    _, _, qrels = loader.GenericDataLoader(str(BUNDLED)).load(split="test")
    ndcg, _map, recall, precision = evaluation.EvaluateRetrieval.evaluate(
        qrels, {q: dict(r) for q, r in run.items()}, [10, 100], ignore_identical_ids=False)
    mrr = custom_metrics.mrr(qrels, run, [100])
    ours = json.loads((report / "nba_mini.metrics.json").read_text())
    assert ours["judged_queries"] == 34 and "HybridRetriever" in ours["retriever"]
    metrics = ours["metrics"]
    pairs = {"nDCG@10": ndcg["NDCG@10"], "nDCG@100": ndcg["NDCG@100"],
             "R@10": recall["Recall@10"], "R@100": recall["Recall@100"],
             "P@10": precision["P@10"], "RR": mrr["MRR@100"]}
    for name, theirs in pairs.items():
        assert round(metrics[name], 5) == pytest.approx(theirs, abs=1e-9), name

    # Per-item scores average to the same dataset numbers (every judged query is an item).
    items = [i for i in project.items() if i["kind"] == "beir"]
    assert len(items) == 34 and {i["fields"]["dataset"] for i in items} == {"nba_mini"}
    for name, dataset_name in (("nDCG@10", "nDCG@10"), ("R@100", "R@100"), ("MRR", "RR")):
        mean = sum(i["metrics"][name] for i in items) / len(items)
        assert mean == pytest.approx(metrics[dataset_name], abs=1e-12), name
    results = project.results()
    assert results["beir"]["nba_mini"][""]["metrics"] == metrics
    board = [row for row in project.leaderboard() if row["kind"] == "beir"]
    assert {(row["dataset"], row["metric"]) for row in board} >= {("nba_mini", "nDCG@10"),
                                                                   ("nba_mini", "R@100")}
    assert all(row["time"] for row in board)
    output = result.stdout.str()
    assert "BEIR: dataset-level metrics" in output and "gate beir.nDCG@10" in output
    row = next(line.split() for line in output.splitlines() if line.startswith("nba_mini "))
    assert row[:3] == ["nba_mini", "(all)", "34"]  # dataset, system, judged queries


def test_a_worse_retriever_turns_the_bundled_gates_red(pytester: pytest.Pytester,
                                                       shared_cache: Path) -> None:
    """Dense retrieval alone (the hybrid without its BM25 half) misses the bundled gates."""
    project = _bundled_project(pytester)
    project.makeconftest("""
        import pytest
        from pytest_ragbench.systems.retrievers import DenseRetriever

        @pytest.fixture(scope="session")
        def ragbench_beir_retriever_factory(ragbench_embedder, ragbench_cache):
            def build(dataset, documents):
                retriever = DenseRetriever(ragbench_embedder, index_dir=ragbench_cache.index_dir)
                retriever.index(documents)
                return retriever
            return build
    """)
    result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider",
                                          f"--ragbench-cache={shared_cache}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    assert "FAILED gate beir.nDCG@10 >= 0.6: MISSED" in output
    assert "DenseRetriever" in output  # the report names what retrieved the run


# -- bad input --------------------------------------------------------------------------------

CORPUS = [
    ("d1", "Paris", "Paris is the capital and largest city of France."),
    ("d2", "Berlin", "Berlin is the capital of Germany."),
    ("d3", "Rome", "Rome is the capital city of Italy, on the Tiber."),
    ("d4", "Madrid", "Madrid is the capital of Spain."),
    ("d5", "Lisbon", "Lisbon is the capital of Portugal, on the Atlantic coast."),
]
QUERIES = {"q1": "France", "q2": "capital of Germany", "q3": "city on the Tiber"}
BM25_FACTORY = """
    import pytest
    from pytest_ragbench.systems.retrievers import BM25Retriever

    @pytest.fixture(scope="session")
    def ragbench_beir_retriever_factory():
        def build(dataset, documents):
            retriever = BM25Retriever()
            retriever.index(documents)
            return retriever
        return build
"""


def _tiny_dataset(root: Path, qrels: str, name: str = "capitals") -> Path:
    folder = root / name
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, t, x in CORPUS))
    (folder / "queries.jsonl").write_text("".join(
        json.dumps({"_id": q, "text": x}) + "\n" for q, x in QUERIES.items()))
    (folder / "qrels" / "test.tsv").write_text(textwrap.dedent(qrels).lstrip())
    return folder


def test_a_qrels_line_with_a_missing_column_fails_alone(pytester: pytest.Pytester) -> None:
    """Your own retriever through the factory fixture (BM25 here); q2's bad line fails q2 only."""
    project = RagbenchProject(pytester)
    _tiny_dataset(project.cases_dir(), """
        q1\td1\t2
        q1\td4\t0
        q2\td2
        q3\td3\t1
    """)
    project.makeconftest(BM25_FACTORY)
    result = project.runpytest_subprocess("--ragbench", "-q", "-rN", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    output = result.stdout.str()
    assert ("invalid case: test_cases/capitals/qrels/test.tsv:3: field 'score': missing "
            "column: expected 3 columns (query-id, corpus-id, score), got 2") in output
    items = project.items_by_case()
    assert items["capitals/q1"]["metrics"]["MRR"] == 1.0  # BM25 puts Paris first
    assert items["capitals/q1"]["evidence"]["ranking"][0][0] == "d1"
    assert "BM25Retriever" in items["capitals/q1"]["evidence"]["retriever"]
    assert items["beir[capitals/q2]"]["status"] == "error"  # the node name of the bad query
    # The dataset-level metrics leave the broken query out.
    metrics = json.loads((project.report_dir() / "capitals.metrics.json").read_text())
    assert metrics["judged_queries"] == 2 and metrics["metrics"]["RR"] == 1.0


@pytest.mark.parametrize("mode", XDIST_MODES[1:], ids=["n2", "no-xdist"])
def test_the_same_records_with_and_without_xdist(pytester: pytest.Pytester,
                                                 mode: tuple[str, ...]) -> None:
    """Each worker indexes and batches the dataset itself; the numbers do not change."""
    project = RagbenchProject(pytester)
    _tiny_dataset(project.cases_dir(), "q1\td1\t2\nq1\td4\t0\nq3\td3\t1\nq3\td1\t1\n")
    project.makeconftest(BM25_FACTORY)
    runs = []
    for flags in ((), mode):
        result = project.runpytest_subprocess("--ragbench", "-q", "-p", "no:cacheprovider",
                                              *flags)
        result.assert_outcomes(passed=2)
        items = project.items()
        metrics = (project.report_dir() / "capitals.metrics.json").read_text()
        runs.append(({i["case_id"]: (i["metrics"], i["evidence"]["ranking"]) for i in items},
                     json.loads(metrics)["metrics"]))
    assert runs[0] == runs[1]


def test_a_query_that_misses_its_threshold_fails_with_the_evidence(
        pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester)
    _tiny_dataset(project.cases_dir(), """
        query-id\tcorpus-id\tscore
        q1\td5\t1
        q3\td3\t2
    """)
    project.makeconftest(BM25_FACTORY)
    project.gates('[thresholds]\n"beir.nDCG@10" = 0.5\n')
    result = project.runpytest_subprocess("--ragbench", "-q", "-rN", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)  # the header line is not a judgment
    section = failure_section(result.stdout.str(), "beir: capitals/q1")
    assert "no relevant document in the top 100" in section
    assert "nDCG@10 = 0, needs >= 0.5" in section
    assert "query: France" in section
    assert "d5 (grade 1)" in section  # expected
    assert "1. d1 (score" in section and "not judged" in section  # got
    assert "case: test_cases/capitals/qrels/test.tsv:2" in section


def test_unjudged_queries_and_other_files_are_not_items(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester)
    folder = _tiny_dataset(project.cases_dir(), "q1\td1\t1\nq9\td2\t1\n")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "France"}\nnot json\n')
    result = project.runpytest("--ragbench", "--collect-only", "-q", "-p", "no:cacheprovider")
    output = result.stdout.str()
    assert "test_cases/capitals/qrels/test.tsv::beir[capitals/q1]" in output
    assert "beir[capitals/q9]" in output  # judged, but has no text: a failing item
    assert "beir[capitals/queries.jsonl:2]" in output  # the broken line
    assert "beir[capitals/q2]" not in output and "q3" not in output  # not judged
    assert "corpus.jsonl" not in output
    result = project.runpytest("--ragbench", "-q", "-p", "no:cacheprovider",
                               "-k", "q9 or queries")
    result.assert_outcomes(failed=2)
    output = result.stdout.str()
    assert ("test_cases/capitals/qrels/test.tsv:2: field 'query-id': query 'q9' is judged "
            "here but has no text in queries.jsonl") in output
    assert "test_cases/capitals/queries.jsonl:2: invalid JSON" in output


def test_a_query_runs_by_its_node_id_even_outside_the_case_paths(
        pytester: pytest.Pytester) -> None:
    """The id pytest prints selects the query: the qrels/ folder is a level of the tree."""
    project = RagbenchProject(pytester)
    project.cases_dir()
    _tiny_dataset(project.path / "data", "q1\td1\t2\nq3\td3\t1\n")
    project.makeconftest(BM25_FACTORY)
    flags = ("--ragbench", "-q", "-p", "no:cacheprovider")
    q1 = "data/capitals/qrels/test.tsv::beir[capitals/q1]"
    q3 = "data/capitals/qrels/test.tsv::beir[capitals/q3]"
    listed = project.runpytest(*flags, "--collect-only", "data/capitals")
    assert [line for line in listed.outlines if "::" in line] == [q1, q3]
    alone = project.runpytest_subprocess(*flags, q3)
    alone.assert_outcomes(passed=1)
    assert [r["nodeid"] for r in project.items()] == [q3]
    both = project.runpytest_subprocess(*flags, q3, q1, "data/capitals/qrels/test.tsv")
    both.assert_outcomes(passed=2)
    assert sorted(r["nodeid"] for r in project.items()) == [q1, q3]


def test_beir_folders_are_evaluation_items_only(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester)
    _tiny_dataset(project.cases_dir(), "q1\td1\t1\n")
    result = project.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_a_folder_without_a_test_split_must_name_one(pytester: pytest.Pytester) -> None:
    project = RagbenchProject(pytester)
    folder = _tiny_dataset(project.cases_dir(), "q1\td1\t1\n")
    (folder / "qrels" / "test.tsv").rename(folder / "qrels" / "dev.tsv")
    result = project.runpytest("--ragbench", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert "test_cases/capitals/qrels/dev.tsv::beir[capitals/q1]" in result.stdout.str()
    (folder / "qrels" / "train.tsv").write_text("q2\td2\t1\n")
    result = project.runpytest("--ragbench", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert ("cannot choose a qrels split: no test.tsv, found dev.tsv, train.tsv"
            in result.stdout.str())


# -- the loader on the real BEIR subsets (one with a header line, one without) ---------------


def _judgment_lines(path: Path) -> int:
    """Non-blank lines whose last column is an integer grade (the header's is not)."""
    count = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        count += bool(line.strip()) and fields[-1].strip().lstrip("-").isdigit()
    return count


@pytest.mark.parametrize(("name", "header", "judgments", "queries"), [
    ("dbpedia", True, 3709, 40),
    ("msmarco", False, 4102, 43),
])
def test_every_qrels_line_of_the_oracle_subsets_is_kept(
        pytester: pytest.Pytester, name: str, header: bool, judgments: int,
        queries: int) -> None:
    folder = oracle_file("beir-subsets", name)
    qrels_file = folder / "qrels" / "test.tsv"
    total_lines = len(qrels_file.read_text(encoding="utf-8").splitlines())
    assert _judgment_lines(qrels_file) == judgments == total_lines - header
    errors: list[CaseError] = []
    lines = QrelsLines()
    qrels, found_header = read_qrels(qrels_file, errors, lines)
    assert errors == [] and found_header is header
    assert sum(len(docs) for docs in qrels.values()) == judgments
    assert len(lines.first_line) == len(qrels) == queries
    assert min(lines.first_line.values()) == 1 + header  # the first judgment is kept
    assert all(q in read_queries(folder / "queries.jsonl", errors) for q in qrels)

    # Collected through a symlink in the case folder: one item per judged query.
    project = RagbenchProject(pytester)
    (project.cases_dir() / name).symlink_to(folder, target_is_directory=True)
    result = project.runpytest("--ragbench", "--collect-only", "-q", "-p", "no:cacheprovider")
    collected = [line for line in result.stdout.lines if f"::beir[{name}/" in line]
    assert len(collected) == queries
    assert {line.split("[", 1)[1].split("/", 1)[1].rstrip("]") for line in collected} == set(qrels)
