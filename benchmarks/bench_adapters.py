"""The bundled vector cases direct, through each adapter and by URL: the metric comparison.

    python benchmarks/bench_adapters.py          # one pytest run of 5 x 45 items (minutes)

Builds a project in a temporary folder (test_cases/nba_vector.yaml over test_cases/corpus/),
whose conftest.py registers four systems over one dense retriever (MiniLM + FAISS, the
built-in ``dense``): ``direct`` (the retriever used directly, answering with the best
context's first sentence), ``langchain``, ``llama_index`` and ``haystack`` (the apps of
tests/adapter_apps.py through the adapters, answered by each framework's fake model), and
``default``: the same retrieval and answer behind FastAPI on 127.0.0.1
(tests/rag_service.py) by ``--ragbench-system-url``. Runs ``pytest --ragbench
--ragbench-systems=...`` once and prints each metric's mean per system, the items that
passed, and the run's wall time. The retrieval metrics must be the same in every column;
answer metrics differ with each app's model (LlamaIndex's MockLLM echoes its prompt).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.adapter_apps import COMPARED as NAMES  # noqa: E402
from tests.adapter_apps import SERVICE_INI, SYSTEMS_CONFTEST  # noqa: E402
from tests.rag_service import serve  # noqa: E402

METRICS = ("source_hit@5", "source_recall@5", "source_mrr", "source_ndcg@5",
           "id_context_precision", "id_context_recall", "top_similarity", "similarity_in_range",
           "answered", "declined", "semantic_similarity")


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        shutil.copytree(REPO / "test_cases" / "corpus", root / "test_cases" / "corpus")
        shutil.copy(REPO / "test_cases" / "nba_vector.yaml", root / "test_cases")
        shutil.copy(REPO / "tests" / "adapter_apps.py", root / "apps.py")
        (root / "conftest.py").write_text(SYSTEMS_CONFTEST, encoding="utf-8")
        with serve(root / "test_cases" / "corpus", "dense") as url:
            (root / "pytest.ini").write_text(f"[pytest]\nragbench_system_url = {url}/rag\n"
                                             + SERVICE_INI, encoding="utf-8")
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "pytest", "--ragbench", "-q", "-p",
                            "no:cacheprovider", f"--ragbench-systems={','.join(NAMES)}"],
                           cwd=root, check=False, capture_output=True)
            wall = time.perf_counter() - started
        results = json.loads((root / ".ragbench" / "results.json").read_text())
        items = [json.loads(line) for line in
                 (root / ".ragbench" / "items.jsonl").read_text().splitlines()]
    vector = results["metrics"]["vector"]
    shown = {"default": "url"}
    print(f"{'metric':22} {'n':>3} " + " ".join(f"{shown.get(n, n):>11}" for n in NAMES))
    for metric in METRICS:
        cells = vector.get(metric, {}).get("systems", {})
        if not cells:
            continue
        n = cells[NAMES[0]]["n"]
        print(f"{metric:22} {n:>3} " + " ".join(f"{cells[name]['mean']:>11.4f}"
                                                 for name in NAMES))
    passed = Counter(item["system"] for item in items if item["status"] == "passed")
    print(f"{'items passed':22} {'':>3} " + " ".join(f"{passed[n]:>8}/45" for n in NAMES))
    print(f"\none pytest run of {len(items)} items: {wall:.0f} s wall")


if __name__ == "__main__":
    main()
