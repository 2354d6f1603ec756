"""The collectors of BEIR folders: one ``beir[<dataset>/<query-id>]`` item per judged query.

A folder holding ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/`` is collected as a whole
(the kind's :class:`~pytest_ragbench.kinds.FormatReader`): its qrels split is the file the
items belong to, so a node id names ``<dataset>/qrels/test.tsv``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.cases.model import BeirCase
from pytest_ragbench.collect.files import (
    display_path,
    kind_systems,
    safe_label,
)
from pytest_ragbench.collect.files import shown_error as _shown
from pytest_ragbench.collect.items import CaseItem, InvalidCaseItem, derived_items
from pytest_ragbench.errors import CaseError
from pytest_ragbench.formats.beir import (
    QrelsLines,
    corpus_ids,
    qrels_splits,
    read_qrels,
    read_queries,
)
from pytest_ragbench.kinds import registry

KIND = "beir"


class BeirDataset(pytest.Directory):
    """A BEIR folder, collected as a whole: its qrels split (``test``, else the only one)."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        """Yield the qrels file of the split; a folder with no usable split fails once."""
        splits = qrels_splits(self.path)
        split = "test" if "test" in splits else (splits[0] if len(splits) == 1 else None)
        if split is None:
            names = ", ".join(f"{s}.tsv" for s in splits) or "none"
            error = CaseError(f"cannot choose a qrels split: no test.tsv, found {names}",
                              file=display_path(self.path / "qrels", self.config),
                              field="qrels")
            yield InvalidCaseItem.create(self, error, KIND, safe_label(self.path.name))
            return
        yield BeirQrelsFolder.from_parent(self, path=self.path / "qrels", split=split)


class BeirQrelsFolder(pytest.Directory):
    """The ``qrels/`` folder of a BEIR dataset, holding the split that is collected.

    A level of its own in the collection tree, as the folder is in the node id: pytest
    resolves ``<dataset>/qrels/test.tsv::beir[...]`` one path part at a time.
    """

    def __init__(self, *, split: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.split = split

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        """Yield the qrels file of the split."""
        yield BeirQrels.from_parent(self, path=self.path / f"{self.split}.tsv")


class BeirQrels(pytest.File):
    """One qrels file of a BEIR folder: one ``beir[<dataset>/<query-id>]`` item per judged query.

    The queries and qrels are read here; the corpus is read when the first item runs.
    A query with an unreadable judgment line, or missing from queries.jsonl, becomes one
    failing item naming the file, line and field; the other queries run.
    """

    holds_only_ragbench_items = True  # items.add_ragbench_marker

    def collect(self) -> Iterator[pytest.Item]:
        """Yield the items in the order of the qrels file."""
        folder = self.path.parent.parent
        dataset = safe_label(folder.name)
        shown = display_path(self.path, self.config)
        errors: list[CaseError] = []
        lines = QrelsLines()
        try:
            queries = read_queries(folder / "queries.jsonl", errors)
            qrels, _ = read_qrels(self.path, errors, lines)
            documents = corpus_ids(folder / "corpus.jsonl")
        except CaseError as exc:  # a file that cannot be read at all
            yield InvalidCaseItem.create(self, _shown(exc, self.config), KIND, dataset)
            return
        empty = _empty_part(folder, documents, queries, self.config)
        if empty is not None:  # nothing can be retrieved or asked: one error, no items
            yield InvalidCaseItem.create(self, empty, KIND, dataset)
            return
        missing = _missing_documents(qrels, documents, lines, shown)
        if missing is not None:  # counted and reported; the queries still run
            yield InvalidCaseItem.create(self, missing, KIND, f"{dataset}/missing-documents")
        attached = {id(e) for found in lines.errors.values() for e in found}
        for error in errors:
            if id(error) not in attached:
                where = f"{Path(error.file or '').name}:{error.line or 0}"
                yield InvalidCaseItem.create(self, _shown(error, self.config), KIND,
                                             f"{dataset}/{safe_label(where)}")
        kind = registry(self.config).item_kinds[KIND]
        for query_id, line in lines.first_line.items():
            label = f"{dataset}/{safe_label(query_id)}"
            problem = _query_problem(query_id, line, lines, queries, shown)
            if problem is not None:
                yield InvalidCaseItem.create(self, problem, KIND, label)
                continue
            case = BeirCase(id=label, kind=KIND, file=str(self.path), line=line,
                            dataset=dataset, query_id=query_id, query=queries[query_id],
                            qrels=dict(qrels[query_id]), folder=str(folder),
                            split=self.path.stem)
            for system in kind_systems(self.config, kind):
                yield CaseItem.create(self, case, kind, system)
            # items other kinds make from the query (ItemKind.derives): robust[beir-<id>]
            yield from derived_items(self, case, shown)


def _empty_part(folder: Path, documents: set[str], queries: dict[str, str],
                config: pytest.Config) -> CaseError | None:
    """An error when the corpus or the query set holds nothing usable."""
    for name, found in (("corpus.jsonl", documents), ("queries.jsonl", queries)):
        if not found:
            return CaseError("holds no usable entry ({\"_id\", \"text\"} per line): the "
                             "dataset cannot be evaluated",
                             file=display_path(folder / name, config))
    return None


def _missing_documents(qrels: dict[str, dict[str, int]], documents: set[str], lines: Any,
                       shown: str) -> CaseError | None:
    """One data error counting the judgments whose document is not in the corpus."""
    missing = sorted((lines.judgment_line.get((query_id, doc_id), 0), query_id, doc_id)
                     for query_id, judged in qrels.items() for doc_id in judged
                     if doc_id not in documents)
    if not missing:
        return None
    queries = len({query_id for _, query_id, _ in missing})
    listed = ", ".join(f"line {n}: {q} -> {d}" for n, q, d in missing[:5])
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return CaseError(f"{len(missing)} judgment(s) of {queries} query(ies) name documents "
                     f"missing from corpus.jsonl ({listed}{more}): those queries are scored "
                     "as if the documents were never retrieved", file=shown,
                     line=missing[0][0] or None, field="corpus-id")


def _query_problem(query_id: str, line: int, lines: Any, queries: dict[str, str],
                   shown: str) -> CaseError | None:
    """Why a judged query cannot run: a bad judgment line, or no text in queries.jsonl."""
    bad = lines.errors.get(query_id)
    if bad:
        first = bad[0]
        more = "" if len(bad) == 1 else (
            f" (and {len(bad) - 1} more bad line(s): "
            f"{', '.join(str(e.line) for e in bad[1:])})")
        return CaseError(first.message + more, file=shown, line=first.line, field=first.field)
    if query_id not in queries:
        return CaseError(f"query {query_id!r} is judged here but has no text in queries.jsonl",
                         file=shown, line=line, field="query-id")
    return None

