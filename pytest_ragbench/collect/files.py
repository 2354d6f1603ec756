"""Which files hold cases, and the ``pytest.File`` collectors that turn them into items."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_ragbench.config import options
from pytest_ragbench.config.settings import get_config
from pytest_ragbench.errors import CaseError
from pytest_ragbench.kinds import registry

DATA_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
PYTHON_CASES = "_test_cases.py"
RAGCSV_SUFFIX = ".ragcsv.csv"
BEIR_MARKERS = ("corpus.jsonl", "queries.jsonl")
# Words a case file outside the case folders must contain to be read as one.
_SNIFF_WORDS = ("question", "query", "expected_sql", "gold_sql", "ground_truth", "setup")


@dataclass(frozen=True)
class CaseLocations:
    """Where case files are looked for in this session."""

    # All paths resolved (symlinks followed), and compared resolved.
    roots: tuple[Path, ...]           # ini ragbench_cases and --ragbench-cases
    explicit_files: tuple[Path, ...]  # files named on the command line
    cli_dirs: tuple[Path, ...]        # folders named on the command line
    ragcsv_files: tuple[Path, ...]    # ini ragbench_ragcsv

    def is_case_file(self, path: Path) -> bool:
        """True when ``path`` should be read as a case file."""
        name = path.name
        is_data = path.suffix in DATA_SUFFIXES
        is_ragcsv = name.endswith(RAGCSV_SUFFIX) or (
            path.suffix == ".csv" and path.resolve() in self.ragcsv_files)
        if not (is_data or is_ragcsv or name.endswith(PYTHON_CASES)):
            return False
        if in_beir_folder(path):
            return False  # a BEIR folder is collected as a whole
        path = path.resolve()  # command-line paths may reach it through a symlink
        if path in self.explicit_files or path in self.ragcsv_files:
            return True
        if _under(path, self.roots):
            return True
        if _under(path, self.cli_dirs):
            return not is_data or _looks_like_cases(path)
        return False

    def is_case_folder(self, path: Path) -> bool:
        """True when the BEIR folder ``path`` is in the case paths or the command-line paths.

        Checked as reached and with symlinks followed: a large dataset is often a symlink.
        """
        return any(_under(p, self.roots) or _under(p, self.cli_dirs)
                   for p in (path.absolute(), path.resolve()))

    def holds_named_file(self, folder: Path) -> bool:
        """True when a file named on the command line lies inside ``folder``.

        A BEIR item's node id names its qrels file: the dataset folder is collected for it
        even outside the case paths.
        """
        resolved = folder.resolve()
        return any(resolved in f.parents for f in self.explicit_files)


def _under(path: Path, folders: tuple[Path, ...]) -> bool:
    return any(path == f or f in path.parents for f in folders)


def is_beir_folder(path: Path) -> bool:
    """A BEIR dataset folder: corpus.jsonl, queries.jsonl and a qrels/ folder."""
    try:
        return all((path / m).is_file() for m in BEIR_MARKERS) and (path / "qrels").is_dir()
    except OSError:  # a folder that cannot be searched holds no dataset we can read
        return False


def in_beir_folder(path: Path) -> bool:
    """True for files inside a BEIR dataset folder (including its qrels/)."""
    return is_beir_folder(path.parent) or is_beir_folder(path.parent.parent)


def _looks_like_cases(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(65536)
    except OSError:
        return False
    return any(word in head for word in _SNIFF_WORDS)


def locations(config: pytest.Config, roots: tuple[Path, ...],
              ragcsv_files: tuple[Path, ...]) -> CaseLocations:
    """Resolve the case folders and the command-line paths of this session."""
    base = config.invocation_params.dir
    files, dirs = [], []
    for arg in config.args:
        path = (base / arg.split("::")[0]).resolve()
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            dirs.append(path)
    return CaseLocations(tuple(p.resolve() for p in roots), tuple(files), tuple(dirs),
                         tuple(p.resolve() for p in ragcsv_files))


def display_path(path: str | Path, config: pytest.Config) -> str:
    """A path relative to where pytest was started, for messages."""
    try:
        return os.path.relpath(path, config.invocation_params.dir)
    except ValueError:
        return str(path)


class CaseFile(pytest.File):
    """A YAML/JSON/JSONL file or ``*_test_cases.py`` module of cases."""

    holds_only_ragbench_items = True  # items.add_ragbench_marker

    def collect(self) -> Iterator[pytest.Item]:
        """Yield one item per case and item kind, and one failing item per bad record."""
        from pytest_ragbench.cases.raw import gc_paused

        with gc_paused():  # see cases/raw.py: millions of objects, no cycles
            entries = self._entries()
        for _, item in sorted(entries, key=lambda entry: entry[0]):
            yield item

    def _entries(self) -> list[tuple[int, pytest.Item]]:
        """(line, item) for every item of the file."""
        from pytest_ragbench.cases.build import build_cases
        from pytest_ragbench.cases.loaders import read_case_file
        from pytest_ragbench.cases.model import Case
        from pytest_ragbench.collect.items import CaseItem, InvalidCaseItem, systems_for
        from pytest_ragbench.kinds.robust.selection import robust_items

        shown = display_path(self.path, self.config)
        session_kinds = registry(self.config)
        item_kinds_for = session_kinds.item_kinds_for
        try:
            result = build_cases(read_case_file(self.path), session_kinds)
        except CaseError as exc:
            # The whole file is unreadable: one failing item, and the session goes on.
            return [(0, InvalidCaseItem.create(self, _relocate(exc, shown), None,
                                               self.path.name))]
        settings = get_config(self.config)
        first_seen: dict[str, Case] = {}
        entries: list[tuple[int, pytest.Item]] = []
        drafts = bool(options.value(self.config, "ragbench_drafts"))
        for case in result.cases:
            if case.review == "rejected" or (case.review == "draft" and not drafts):
                # Generated cases a person has not accepted: see README "Generating cases".
                from pytest_ragbench.collect.selection import note_not_collected

                note_not_collected(self.config, f"{case.review} case")
                continue
            first = first_seen.setdefault(case.id, case)
            if first is not case:
                error = CaseError(f"duplicate id {case.id!r}: first defined on line "
                                  f"{first.line}, again on line {case.line}",
                                  file=shown, line=case.line, field="id")
                kinds = item_kinds_for(case.kind, settings.evaluate)
                if kinds:
                    entries.append((case.line, InvalidCaseItem.create(
                        self, error, kinds[0].name, f"{case.id}@{case.line}")))
                continue
            if not settings.evaluate and not item_kinds_for(case.kind, False):
                from pytest_ragbench.collect.selection import note_not_collected

                note_not_collected(self.config, f"{case.kind} case")
            for item_kind in item_kinds_for(case.kind, settings.evaluate):
                for system in systems_for(item_kind, settings.systems, case, self.config):
                    entries.append((case.line, CaseItem.create(self, case, item_kind, system)))
            # --ragbench-robustness: robust[<kind>-<id>] (see kinds/robust/selection.py)
            entries += [(case.line, item) for item in robust_items(self, case, settings, shown)]
        for entry in result.invalid:
            kinds = item_kinds_for(entry.kind, settings.evaluate) if entry.kind else []
            if entry.kind and not kinds:
                continue  # an evaluation-only case, and evaluation is off
            error = entry.error
            entries.append((error.line or 0, InvalidCaseItem.create(
                self, _relocate(error, shown), kinds[0].name if kinds else None,
                entry.case_id)))
        return entries


class NotImported(pytest.File):
    """A case module whose name matches ``python_files``: pytest must not import it.

    It is collected as cases by :class:`CaseFile`; this stands in for pytest's ``Module``.
    """

    def collect(self) -> Iterator[pytest.Item]:
        """Nothing: the module is data."""
        return iter(())


def _relocate(error: CaseError, shown: str) -> CaseError:
    return CaseError(error.message, file=shown, line=error.line, field=error.field)


# -- BEIR folders and RAGCSV files (evaluation items only) ------------------------------------

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_.:/@+-]+")


def safe_label(text: str) -> str:
    """``text`` with the characters a case id may not hold replaced by ``_``."""
    return _UNSAFE_ID.sub("_", text) or "_"


def ragcsv_stem(path: Path) -> str:
    """``nba_qa`` for ``nba_qa.ragcsv.csv`` (and for ``nba_qa.csv``)."""
    return safe_label(path.name.removesuffix(".csv").removesuffix(".ragcsv"))


def _systems(config: pytest.Config, item_kind: Any) -> tuple[str | None, ...]:
    from pytest_ragbench.collect.items import systems_for

    return systems_for(item_kind, get_config(config).systems, config=config)


class BeirDataset(pytest.Directory):
    """A BEIR folder, collected as a whole: its qrels split (``test``, else the only one)."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        """Yield the qrels file of the split; a folder with no usable split fails once."""
        from pytest_ragbench.collect.items import InvalidCaseItem
        from pytest_ragbench.formats.beir import qrels_splits

        splits = qrels_splits(self.path)
        split = "test" if "test" in splits else (splits[0] if len(splits) == 1 else None)
        if split is None:
            names = ", ".join(f"{s}.tsv" for s in splits) or "none"
            error = CaseError(f"cannot choose a qrels split: no test.tsv, found {names}",
                              file=display_path(self.path / "qrels", self.config),
                              field="qrels")
            yield InvalidCaseItem.create(self, error, "beir", safe_label(self.path.name))
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
        from pytest_ragbench.cases.model import BeirCase
        from pytest_ragbench.collect.items import CaseItem, InvalidCaseItem
        from pytest_ragbench.formats.beir import QrelsLines, corpus_ids, read_qrels, read_queries
        from pytest_ragbench.kinds.robust.selection import robust_items

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
            yield InvalidCaseItem.create(self, _shown(exc, self.config), "beir", dataset)
            return
        empty = _empty_part(folder, documents, queries, self.config)
        if empty is not None:  # nothing can be retrieved or asked: one error, no items
            yield InvalidCaseItem.create(self, empty, "beir", dataset)
            return
        missing = _missing_documents(qrels, documents, lines, shown)
        if missing is not None:  # counted and reported; the queries still run
            yield InvalidCaseItem.create(self, missing, "beir", f"{dataset}/missing-documents")
        attached = {id(e) for found in lines.errors.values() for e in found}
        for error in errors:
            if id(error) not in attached:
                where = f"{Path(error.file or '').name}:{error.line or 0}"
                yield InvalidCaseItem.create(self, _shown(error, self.config), "beir",
                                             f"{dataset}/{safe_label(where)}")
        kind = registry(self.config).item_kinds["beir"]
        for query_id, line in lines.first_line.items():
            label = f"{dataset}/{safe_label(query_id)}"
            problem = _query_problem(query_id, line, lines, queries, shown)
            if problem is not None:
                yield InvalidCaseItem.create(self, problem, "beir", label)
                continue
            case = BeirCase(id=label, kind="beir", file=str(self.path), line=line,
                            dataset=dataset, query_id=query_id, query=queries[query_id],
                            qrels=dict(qrels[query_id]), folder=str(folder),
                            split=self.path.stem)
            for system in _systems(self.config, kind):
                yield CaseItem.create(self, case, kind, system)
            # --ragbench-robustness: robust[beir-<id>] (see kinds/robust/selection.py)
            yield from robust_items(self, case, get_config(self.config), shown)


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


def _shown(error: CaseError, config: pytest.Config) -> CaseError:
    file = display_path(error.file, config) if error.file else None
    return CaseError(error.message, file=file, line=error.line, field=error.field)


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


class RagcsvFile(pytest.File):
    """A RAGCSV file: one ``ragcsv[<file-stem>:<row>]`` item per row."""

    holds_only_ragbench_items = True  # items.add_ragbench_marker

    def collect(self) -> Iterator[pytest.Item]:
        """Yield one item per readable row and one failing item per unreadable row."""
        from pytest_ragbench.cases.model import RagcsvCase, RagcsvFragment
        from pytest_ragbench.collect.items import CaseItem, InvalidCaseItem
        from pytest_ragbench.formats.ragcsv import read_ragcsv

        stem = ragcsv_stem(self.path)
        shown = display_path(self.path, self.config)
        try:
            data = read_ragcsv(self.path)
        except CaseError as exc:
            yield InvalidCaseItem.create(self, _relocate(exc, shown), "ragcsv", stem)
            return
        kind = registry(self.config).item_kinds["ragcsv"]
        entries: list[tuple[int, pytest.Item]] = []
        for row in data.rows:
            case = RagcsvCase(
                id=f"{stem}:{row.row}", kind="ragcsv", file=str(self.path), line=row.line,
                question=row.question, expected=row.expected, row=row.row,
                fragments=tuple(RagcsvFragment(page_content=f.page_content, title=f.title)
                                for f in row.fragments), expected_facts=row.expected_facts)
            entries += [(row.line, CaseItem.create(self, case, kind, system))
                        for system in _systems(self.config, kind)]
        for index, error in enumerate(data.errors):
            row_number = data.row_of(index)
            label = f"{stem}:{row_number}" if row_number else f"{stem}:line-{error.line or 0}"
            entries.append((error.line or 0, InvalidCaseItem.create(
                self, _relocate(error, shown), "ragcsv", label)))
        for _, item in sorted(entries, key=lambda entry: entry[0]):
            yield item
