"""``ragbench generate`` from documents through model servers.

A real server (llama-cpp-python serving SmolLM2, tests/llama_server.py) for every path a
model takes: writing, judging, the filters recorded on each kept case and the reason on
each rejected one, the accounting, the response cache (a second run makes no request)
and reproducibility by ``--seed``. SmolLM2-135M is a weak model: the assertions are on the
plumbing and the recorded filters, not on how many questions survive. The scripted
loopback server is used only to inject faults (a reply that is not JSON, a hang).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_ragbench.cases.build import build_cases
from pytest_ragbench.cases.loaders import read_case_file
from pytest_ragbench.datasets.generate.questions import TEXT_CHARS, TYPES, QuestionGenerator
from pytest_ragbench.systems.protocols import Document
from tests.llama_server import LlamaServer, llama_server  # noqa: F401  (the fixture)

DOCUMENTS = {
    "knicks.md": "# Knicks\n\nJalen Brunson scored 40 points against the Pacers in game one. "
                 "The Knicks won the series in seven games.\n",
    "pacers.md": "# Pacers\n\nTyrese Haliburton ran the offense for Indiana. The Pacers "
                 "beat Jalen Brunson and the Knicks in game seven at the Garden.\n",
    "arena.html": "<html><head><title>Garden</title></head><body><p>Madison Square Garden "
                  "seats 19,812 fans for basketball games.</p></body></html>",
}
FILTERS = ("form", "overlap", "judge", "duplicate", "difficulty")


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text)
    return folder


def _generate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_ragbench.cli", "generate", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=900)


def test_generation_through_a_real_server_records_every_filter(
        tmp_path: Path, llama_server: LlamaServer) -> None:  # noqa: F811
    folder = _folder(tmp_path)
    out, report = tmp_path / "drafts.yaml", tmp_path / "report.json"
    args = [f"--from={folder}", f"--llm-url={llama_server.url}", "--n", "6", "--seed", "5",
            "--types", ",".join(TYPES), "--attempts", "1",
            f"--cache={tmp_path / 'cache'}", f"--out={out}", f"--report={report}"]
    before = llama_server.statuses()[200]
    made = _generate(tmp_path, *args)
    assert made.returncode in (0, 1), made.stderr  # 1: fewer than asked (a weak model)
    # answered calls (the server refuses json_schema once with a 500: the client then asks
    # for json_object, as negotiated for judges)
    answered = llama_server.statuses()[200] - before
    accounting = json.loads(report.read_text())
    print(made.stdout)  # the yield table, for the record
    assert accounting["model_calls"] - accounting["cached_calls"] == answered > 0
    assert "model calls: " in made.stdout and "llm/factual" in made.stdout
    cases = (yaml.safe_load(out.read_text()) or {}).get("cases") or []
    kept = sum(accounting["kept"].values())
    assert len(cases) == kept <= 6
    # every type was asked of the model (noisy perturbs a kept factual question: no call)
    tried = {f"llm/{t}" for t in TYPES if t != "noisy"}
    assert tried <= set(accounting["kept"]) | set(accounting["rejected"])
    for case in cases:
        # the schema's length bound, enforced by the server's grammar (a noisy variant's
        # perturbation may lengthen its question)
        assert len(case["ground_truth"]) <= TEXT_CHARS
        assert case["category"] == "noisy" or len(case["question"]) <= TEXT_CHARS
        assert case["review"] == "draft"
        provenance = case["provenance"]
        assert provenance["model"] == "local" and provenance["seed"] == 5
        assert provenance["generator"] == f"llm/{case['category']}"
        filters = provenance["filters"]
        assert set(FILTERS) - {"overlap"} <= set(filters)  # no overlap without a source
        assert filters["duplicate"]["max_similarity"] < filters["duplicate"]["bound"]
        assert filters["difficulty"]["level"] in case["tags"]
        if case["category"] == "unanswerable":
            assert case["expect"] == "decline" and "expected_sources" not in case
            assert filters["judge"] == {"answer_in_top_passages": False}
        else:
            assert set(case["expected_sources"]) <= set(DOCUMENTS)
            assert filters["judge"] == {"answer_in_sources": True}
            assert filters["overlap"]["value"] <= filters["overlap"]["bound"]
        if case["category"] == "conversational":
            assert [turn["role"] for turn in case["history"]] == ["user", "assistant"]
    # every rejected candidate says why, and the table counts it under that reason
    rejected = accounting["rejected_candidates"]
    for entry in rejected:
        assert entry["reason"]
        counted = accounting["rejected"][f"llm/{entry['type']}"]
        assert counted[entry["reason"]] >= 1
    assert kept + len(rejected) > 0

    # the same seed again: every call answered from the cache, the same file
    first = out.read_text()
    before = llama_server.statuses()[200]
    again = _generate(tmp_path, *args)
    assert again.returncode == made.returncode, again.stderr
    assert llama_server.statuses()[200] == before
    assert out.read_text() == first
    cached = json.loads(report.read_text())
    assert cached["cached_calls"] == cached["model_calls"] == accounting["model_calls"]
    assert cached["kept"] == accounting["kept"]
    assert sum(accounting["kept_by_difficulty"].values()) == kept
    built = build_cases(read_case_file(out))
    assert built.invalid == []
    assert {c.kind for c in built.cases} <= {"vector"}

    # --kind=ragas: the same kept questions, their source passages as contexts
    ragas_out = tmp_path / "drafts_ragas.yaml"
    as_ragas = _generate(tmp_path, *args[:-2], f"--out={ragas_out}", "--kind=ragas")
    assert as_ragas.returncode == made.returncode, as_ragas.stderr
    assert llama_server.statuses()[200] == before
    built = build_cases(read_case_file(ragas_out))
    assert built.invalid == []
    assert {c.kind for c in built.cases} <= {"ragas"}
    samples = yaml.safe_load(ragas_out.read_text()).get("cases") or []
    assert [s["question"] for s in samples] == [c["question"] for c in cases]
    for sample, case in zip(samples, cases, strict=True):
        if case["category"] != "unanswerable":
            assert sample["contexts"] and all(
                any(text in context or context in text for text in DOCUMENTS.values())
                for context in sample["contexts"])


def test_the_servers_grammar_holds_each_text_to_the_schemas_length_bound(
        llama_server: LlamaServer) -> None:  # noqa: F811
    # A small model under a JSON grammar can write one string until the token budget ends,
    # and a cut reply is no JSON: every text of the question schemas has a maxLength, which
    # the server's grammar enforces, so the budget leaves room for every field. Shown with
    # a bound far shorter than the reply the model writes unbounded.
    from pytest_ragbench.datasets.generate.questions import (
        CONVERSATION_SCHEMA,
        QA_SCHEMA,
        REPLY_TOKENS,
        SYSTEM,
    )
    from pytest_ragbench.systems.openai_client import OpenAICompatibleClient

    for schema in (QA_SCHEMA, CONVERSATION_SCHEMA):
        assert {p["maxLength"] for p in schema["properties"].values()} == {TEXT_CHARS}
    client = OpenAICompatibleClient(llama_server.url, "local", seed=1, role="generator")
    prompt = ("Passage:\n" + DOCUMENTS["knicks.md"] + "\n\nWrite one question this passage "
              'answers and its answer, in full sentences. Reply as JSON: {"question": "...", '
              '"answer": "..."}')
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    short = {"type": "string", "maxLength": 20}
    unbounded = client.generate(messages, schema={**QA_SCHEMA, "properties": {
        "question": {"type": "string"}, "answer": {"type": "string"}}},
        max_tokens=REPLY_TOKENS).data
    bounded = client.generate(messages, schema={**QA_SCHEMA, "properties": {
        "question": short, "answer": short}}, max_tokens=REPLY_TOKENS).data
    assert isinstance(unbounded, dict) and isinstance(bounded, dict)
    assert max(len(unbounded["question"]), len(unbounded["answer"])) > 20  # the model runs on
    assert all(len(bounded[k]) <= 20 for k in ("question", "answer"))


def test_a_beir_corpus_through_the_command_line_names_document_ids_as_sources(
        tmp_path: Path, llama_server: LlamaServer) -> None:  # noqa: F811
    folder = tmp_path / "beir"
    folder.mkdir()
    records = [{"_id": name.split(".")[0], "title": name, "text": text}
               for name, text in DOCUMENTS.items() if name.endswith(".md")]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out, report = tmp_path / "beir_drafts.yaml", tmp_path / "beir_report.json"
    made = _generate(tmp_path, f"--from={folder}", "--source=beir",
                     f"--llm-url={llama_server.url}", "--n", "2", "--seed", "3",
                     "--types", "factual,multi_hop", "--attempts", "1",
                     f"--cache={tmp_path / 'cache'}", f"--out={out}", f"--report={report}")
    assert made.returncode in (0, 1), made.stderr  # 1: fewer than asked (a weak model)
    print(made.stdout)
    accounting = json.loads(report.read_text())
    assert accounting["model_calls"] >= 1
    assert {"llm/factual", "llm/multi_hop"} <= set(accounting["kept"]) | set(
        accounting["rejected"])
    cases = (yaml.safe_load(out.read_text()) or {}).get("cases") or []
    assert len(cases) == sum(accounting["kept"].values())
    ids = {r["_id"] for r in records}
    for case in cases:
        # a BEIR case names the corpus's document ids, which the beir kind's qrels use
        assert set(case["expected_sources"]) <= ids
        assert case["review"] == "draft" and case["provenance"]["seed"] == 3
    assert build_cases(read_case_file(out)).invalid == []


class _Scripted:
    """Replies of a scripted server: a question, then a judge verdict, by prompt."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        self.count += 1
        if "verdict" in prompt:
            return json.dumps({"verdict": "yes"})
        return json.dumps({"question": f"Which player scored in game {self.count}?",
                           "answer": "Jalen Brunson"})


@pytest.fixture(scope="module")
def embedder_and_retriever() -> tuple[Any, Any]:
    from pytest_ragbench.systems.embedder import SentenceTransformerEmbedder
    from pytest_ragbench.systems.retrievers import default_retriever

    embedder = SentenceTransformerEmbedder()
    return embedder, default_retriever(embedder)


def _passages() -> list[Document]:
    return [Document("knicks.md#0", DOCUMENTS["knicks.md"], {"source": "knicks.md"}),
            Document("pacers.md#0", DOCUMENTS["pacers.md"], {"source": "pacers.md"})]


def test_a_reply_that_is_not_json_and_a_hang_are_rejections_not_crashes(
        embedder_and_retriever: tuple[Any, Any]) -> None:
    from pytest_ragbench.systems.openai_client import OpenAICompatibleClient
    from pytest_ragbench.testing import LoopbackServer

    embedder, retriever = embedder_and_retriever
    replies = _Scripted()

    def reply(body: dict[str, Any]) -> str:
        if replies.count == 0:  # the first answered request: not the JSON asked for
            replies.count += 1
            return "not json at all"
        return replies(body)

    with LoopbackServer(reply) as server:
        server.fail("hang")
        client = OpenAICompatibleClient(server.url, "scripted", timeout_s=1.0, max_retries=0,
                                        role="generator")
        try:
            generator = QuestionGenerator(_passages(), client, embedder=embedder,
                                          retriever=retriever, seed=0)
            generated = generator.run(2, ["factual"], attempts_per_case=2)
        finally:
            client.close()
    reasons = generated.accounting.rejected["llm/factual"]
    assert reasons["model call failed"] == 1  # the hang, after its timeout
    assert reasons["model reply unusable"] == 1  # the reply that is not JSON
    assert len(generated.cases) >= 1  # the run went on with the next candidates
    for entry in generated.rejections[:2]:
        assert entry["reason"] in ("model call failed", "model reply unusable")
        assert entry["detail"]
