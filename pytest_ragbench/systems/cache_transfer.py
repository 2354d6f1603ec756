"""Moving cache entries between machines: ``ragbench cache export | import | merge``.

Shards of one evaluation run on different machines, each with its own cache folder. An
export is one SQLite file holding every entry of a cache folder's stores (embeddings,
model replies, spelling corrections); an import or a merge adds the entries the
destination lacks. Keys are content hashes (model, input, parameters), so an entry
present on both sides answers the same request: the destination's value is kept (a
model sampled twice may have answered differently; the first answer stays, as it would
have on one machine) and the number of such differing values is printed. Retriever
indexes are not moved: they are rebuilt from the cached embeddings without a model call.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_ragbench.errors import ConfigError
from pytest_ragbench.systems.cache import (
    STORE_FILES,
    SqliteStore,
    open_read_only,
    prepare_cache_dir,
)

EXPORT_FORMAT = "pytest-ragbench cache export 1"
_BATCH = 2_000


@dataclass
class TransferCount:
    """Entries of one store: read from the source, added, already there (same or different)."""

    read: int = 0
    added: int = 0
    same: int = 0
    different: int = 0


@dataclass
class TransferReport:
    """Counts per store of one import or merge."""

    stores: dict[str, TransferCount] = field(default_factory=dict)

    def count(self, store: str) -> TransferCount:
        """The counts of ``store``, created on first use."""
        return self.stores.setdefault(store, TransferCount())

    def lines(self) -> list[str]:
        """One line per store, for the terminal."""
        out = []
        for store, n in sorted(self.stores.items()):
            line = f"{store}: {n.read} read, {n.added} added, {n.same} already present"
            if n.different:
                line += (f", {n.different} present with a different value "
                         "(the destination's kept)")
            out.append(line)
        return out


def _read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only; ConfigError when it is not a cache file or an export."""
    conn = open_read_only(path)
    if conn is None:
        raise ConfigError(f"{path}: not a pytest-ragbench cache file or export")
    return conn


def _folder_entries(folder: Path) -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    """``(store, batch of (key, value))`` for every store file of a cache folder."""
    for name in STORE_FILES:
        path = folder / name
        if not path.is_file():
            continue
        conn = _read_only(path)
        try:
            rows = conn.execute("SELECT key, value FROM entries ORDER BY key")
            while batch := rows.fetchmany(_BATCH):
                yield name, [(str(key), bytes(value)) for key, value in batch]
        finally:
            conn.close()


def _export_entries(path: Path) -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    """``(store, batch of (key, value))`` of an export file, checked to be one."""
    conn = _read_only(path)
    try:
        try:
            found = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
        except sqlite3.DatabaseError:
            found = None
        if found is None or found[0] != EXPORT_FORMAT:
            raise ConfigError(f"{path}: not a pytest-ragbench cache export "
                              f"(expected format {EXPORT_FORMAT!r})")
        stores = conn.execute("SELECT DISTINCT store FROM entries ORDER BY store").fetchall()
        for (store,) in stores:
            if store not in STORE_FILES:
                raise ConfigError(f"{path}: unknown cache store {store!r} "
                                  f"(known: {', '.join(STORE_FILES)})")
            rows = conn.execute("SELECT key, value FROM entries WHERE store = ? ORDER BY key",
                                (store,))
            while batch := rows.fetchmany(_BATCH):
                yield store, [(str(key), bytes(value)) for key, value in batch]
    finally:
        conn.close()


def entries_of(source: Path) -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    """The entries of a cache folder or of an export file."""
    if source.is_dir():
        return _folder_entries(source)
    if source.is_file():
        return _export_entries(source)
    raise ConfigError(f"{source}: no such cache folder or export file")


def export_cache(folder: Path, out: Path) -> dict[str, int]:
    """Write every entry of the cache ``folder`` to the export file ``out``; counts per store.

    The file is written beside ``out`` under a temporary name and renamed when complete,
    so an interrupted export never leaves a file that looks whole.
    """
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such cache folder")
    partial = out.with_name(out.name + ".partial")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    counts: dict[str, int] = {}
    conn = sqlite3.connect(partial)
    try:
        conn.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('format', ?)", (EXPORT_FORMAT,))
        conn.execute("CREATE TABLE entries (store TEXT NOT NULL, key TEXT NOT NULL, "
                     "value BLOB NOT NULL, PRIMARY KEY (store, key)) WITHOUT ROWID")
        for store, batch in _folder_entries(folder):
            conn.executemany("INSERT INTO entries VALUES (?, ?, ?)",
                             [(store, key, value) for key, value in batch])
            counts[store] = counts.get(store, 0) + len(batch)
        conn.commit()
    except BaseException:
        conn.close()
        partial.unlink(missing_ok=True)
        raise
    conn.close()
    partial.replace(out)
    return counts


def add_entries(sources: list[Path], folder: Path) -> TransferReport:
    """Add to the cache ``folder`` the entries of ``sources`` (folders or export files)."""
    prepare_cache_dir(folder)
    report = TransferReport()
    stores: dict[str, SqliteStore] = {}
    try:
        for source in sources:
            if source.resolve() == folder.resolve():
                raise ConfigError(f"{source}: the destination cannot be merged into itself")
            for store_name, batch in entries_of(source):
                store = stores.get(store_name)
                if store is None:
                    store = stores[store_name] = SqliteStore(folder / store_name)
                    if not store.writes:
                        raise ConfigError(f"{folder / store_name}: cannot be written")
                _add_batch(store, batch, report.count(store_name))
    finally:
        for store in stores.values():
            store.close()
    return report


def _add_batch(store: SqliteStore, batch: list[tuple[str, bytes]], count: TransferCount) -> None:
    present = store.get_many([key for key, _ in batch])
    new = {}
    for key, value in batch:
        count.read += 1
        if key in present:
            if present[key] == value:
                count.same += 1
            else:
                count.different += 1
        elif key not in new:
            new[key] = value
    added = store.put_new(new)
    count.added += added
    count.same += len(new) - added  # written by another process meanwhile


def _export(args: argparse.Namespace) -> int:
    counts = export_cache(Path(args.cache), Path(args.file))
    total = sum(counts.values())
    detail = ", ".join(f"{store} {n}" for store, n in sorted(counts.items())) or "no entries"
    print(f"exported {total} entries from {args.cache} to {args.file} ({detail})")
    return 0


def _import(args: argparse.Namespace) -> int:
    report = add_entries([Path(args.file)], Path(args.cache))
    for line in report.lines() or ["no entries"]:
        print(line)
    return 0


def _merge(args: argparse.Namespace) -> int:
    report = add_entries([Path(p) for p in args.sources], Path(args.cache))
    for line in report.lines() or ["no entries"]:
        print(line)
    return 0


def _run(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``func`` with a usage error printed as one line and exit code 2."""
    def run(args: argparse.Namespace) -> int:
        try:
            return int(func(args))
        except ConfigError as exc:
            print(f"ragbench cache: {exc}", file=sys.stderr)
            return 2
    return run


def register(commands: Any) -> None:
    """Add ``ragbench cache export|import|merge`` to the ``ragbench`` command."""
    cache = commands.add_parser(
        "cache", help="move cached embeddings and model replies between machines",
        description=__doc__.split("\n\n")[1].replace("\n", " "))
    actions = cache.add_subparsers(dest="action", required=True)
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--cache", default=".ragbench_cache", metavar="DIR",
                       help="the cache folder (default .ragbench_cache, as --ragbench-cache)")
    export = actions.add_parser("export", parents=[where],
                                help="write every entry of the cache folder to FILE")
    export.add_argument("file", metavar="FILE")
    export.set_defaults(func=_run(_export))
    load = actions.add_parser("import", parents=[where],
                              help="add the entries of an export FILE the cache folder lacks")
    load.add_argument("file", metavar="FILE")
    load.set_defaults(func=_run(_import))
    merge = actions.add_parser("merge", parents=[where],
                               help="add the entries of other cache folders (or export files)")
    merge.add_argument("sources", nargs="+", metavar="DIR")
    merge.set_defaults(func=_run(_merge))
