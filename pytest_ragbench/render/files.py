"""The report dir's files: results.json and its schema, items.jsonl, leaderboard.csv, more.

The report sections (results/sections.py) name more files: BEIR runs, RAGCSV rows.

Files are written to a temporary name of their own and renamed, so a reader never sees
half a file, and sessions writing the same report dir at once never trip over each
other's temporary files; ``leaderboard.csv`` is appended under an exclusive lock, so
concurrent sessions never interleave or lose rows.

Every file names its run: ``run.id`` in results.json and saved runs, ``run`` (id and
status) on each line of items.jsonl, ``run_id`` and ``status`` in the leaderboard rows and
BEIR metric files, a ``<meta>`` tag in report.html. The files of the earlier run are
removed before this run's are written, so a session killed while writing leaves the
files of one run only (and its journal, see journal.py).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import platform
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_ragbench.config.settings import RagbenchConfig
from pytest_ragbench.render import REPORT_MARKER, html
from pytest_ragbench.results import runs
from pytest_ragbench.results.document import SCHEMA_FILE, schema_text
from pytest_ragbench.results.records import ItemRecord
from pytest_ragbench.results.sections import ReportSection
from pytest_ragbench.run.locking import locked

LIBRARIES = ("pytest-ragbench", "pytest", "pytest-xdist", "numpy", "scipy", "matplotlib",
             "SQLAlchemy", "pytrec-eval-terrier", "sentence-transformers", "faiss-cpu",
             "bm25s", "torch", "ragas", "beir", "llama-cpp-python", "openai", "httpx")
LEADERBOARD_COLUMNS = ("time", "run_id", "git_commit", "system", "kind", "dataset", "metric",
                       "n", "mean", "ci_low", "ci_high", "status")
# Files that belong to one run; the report sections' files are named in results.json.
RUN_FILES = ("results.json", "report.html")


def run_info(rootpath: Path, run_id: str | None = None) -> dict[str, Any]:
    """Run id (a new one unless given), UTC time, git commit, machine, versions."""
    from importlib import metadata

    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return {
        "id": run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)) + "-"
        + uuid.uuid4().hex[:8],
        "time": stamp,
        "git_commit": git_commit(rootpath),
        "machine": {"node": platform.node(), "system": platform.system(),
                    "release": platform.release(), "machine": platform.machine(),
                    "python": platform.python_version(), "cpu_count": os.cpu_count()},
        "plugin_version": versions.get("pytest-ragbench"),
        "versions": versions,
    }


def git_commit(rootpath: Path) -> str | None:
    """The commit checked out at ``rootpath`` (None outside a git work tree)."""
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=rootpath, capture_output=True,
                                text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = result.stdout.strip()
    return commit if result.returncode == 0 and len(commit) >= 7 else None


def write_text(path: Path, text: str) -> Path:
    """Write a file atomically: a temporary file of this process, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; a report is not
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return path


def write_json(path: Path, data: Any) -> Path:
    """Write JSON atomically: indented, but the ``items`` of a document one per line.

    json.dumps with an indent runs the pure-Python encoder; a run of 10,000 items
    spends most of its report writing there, and an item per line reads as well.
    """
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        return write_text(path, json.dumps(data, indent=1, allow_nan=False) + "\n")
    head = json.dumps({**data, "items": []}, indent=1, allow_nan=False)
    lines = ",\n".join("  " + json.dumps(item, allow_nan=False) for item in items)
    text = head.replace('\n "items": []', '\n "items": [\n' + lines + "\n ]", 1)
    return write_text(path, text + "\n")


def write_items(path: Path, records: Iterable[ItemRecord],
                run: dict[str, Any] | None = None) -> Path:
    """One JSON record per line, in node-id order, written atomically.

    ``run`` (``{"id", "status"}``) is added to every line as its ``run`` key.
    """
    tag = {"run": run} if run else {}
    return write_text(path, "".join(json.dumps({**record.to_dict(), **tag}, allow_nan=False)
                                    + "\n" for record in records))


def previous_run_files(folder: Path) -> list[str]:
    """The per-run files now in the report dir: results.json, report.html, sections' files.

    The sections' files are those the report dir's results.json names; a file it does not
    name (of a results.json that cannot be read) is left alone.
    """
    names = [name for name in RUN_FILES if (folder / name).exists()]
    try:
        document = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        named = {str(name) for section in document.get("sections") or ()
                 for name in section.get("files") or ()}
    except (OSError, ValueError, AttributeError, TypeError):
        named = set()
    names += sorted(name for name in named if "/" not in name and name not in (".", "..")
                    and (folder / name).exists())
    return names


def leaderboard_rows(document: dict[str, Any]) -> list[list[str]]:
    """Long-format rows: one per (system, kind, metric), plus the report sections' rows."""
    run = document["run"]
    head = [run["time"], run["id"], run.get("git_commit") or ""]
    status = run.get("status") or ""
    rows = []
    for kind, metrics in document["metrics"].items():
        for metric, entry in metrics.items():
            per_system = entry.get("systems") or {"": entry}
            for system, cell in per_system.items():
                if cell.get("n"):
                    rows.append([*head, system, kind, "", metric, str(cell["n"]),
                                 _cell(cell["mean"]), _cell(cell["ci_low"]),
                                 _cell(cell["ci_high"]), status])
    for section in document.get("sections") or ():
        for system, kind, dataset, metric, n, mean, low, high in section.get("leaderboard", ()):
            rows.append([*head, system, kind, dataset, metric, "" if n is None else str(n),
                         _cell(mean), _cell(low), _cell(high), status])
    return rows


def _cell(value: Any) -> str:
    return "" if value is None else repr(float(value))


def append_leaderboard(path: Path, rows: list[list[str]]) -> Path:
    """Append rows (header first when the file is new) in one locked write.

    A file with an older header (no ``status`` column) is rewritten once with the
    column added, left empty in its old rows. A run continued with --ragbench-resume
    appends its rows again under the same run id: the newest rows of a run id count.
    """
    with locked(path) as handle:
        handle.seek(0)
        first = handle.readline()
        header = tuple(next(csv.reader([first]))) if first.strip() else None
        if header is None or header == LEADERBOARD_COLUMNS:
            handle.seek(0, os.SEEK_END)
            head = [list(LEADERBOARD_COLUMNS)] if header is None and handle.tell() == 0 else []
            handle.write(_csv_text([*head, *rows]))
            return path
        handle.seek(0)
        old = [_widen(row, header) for row in list(csv.reader(handle))[1:] if row]
        handle.seek(0)
        handle.truncate()
        handle.write(_csv_text([list(LEADERBOARD_COLUMNS), *old, *rows]))
    return path


def _csv_text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def _widen(row: list[str], header: tuple[str, ...] | None) -> list[str]:
    """An old row under the current columns (by the old header's names)."""
    if header is None or header == LEADERBOARD_COLUMNS:
        return row
    by_name = dict(zip(header, row, strict=False))
    return [by_name.get(name, "") for name in LEADERBOARD_COLUMNS]


def remove_stale(folder: Path, names: Iterable[str], problems: list[str]) -> None:
    """Remove report files of an earlier run that this run could not replace."""
    for name in names:
        try:
            (folder / name).unlink(missing_ok=True)
        except OSError as exc:
            problems.append(f"could not remove the stale {folder / name} ({exc})")


def write_all(document: dict[str, Any], records: list[ItemRecord], settings: RagbenchConfig,
              problems: list[str] | None = None, *, items_written: bool = False,
              plots_ahead: dict[str, html.DrawnPlots] | None = None,
              sections: Sequence[ReportSection] = ()) -> list[Path]:
    """Write every report file; returns the paths written, in that order.

    Data first (items.jsonl, results.json and results.schema.json, the report sections'
    files, leaderboard rows, the saved run), then report.html. A file that fails is named
    in ``problems`` and the others are still written; a report file that could not be
    replaced is removed, so that no file of an earlier run sits beside this run's as if it
    were current.
    """
    problems = [] if problems is None else problems
    folder = settings.report_dir
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / REPORT_MARKER).write_text("pytest-ragbench report directory: never "
                                            "collected as test cases\n", encoding="utf-8")
    except OSError as exc:
        problems.append(f"could not write the report to {folder}: {exc}")
        return []
    written: list[Path] = []

    def step(name: str, stale: Iterable[str], action: Callable[[], Path | None]) -> None:
        try:
            path = action()
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            problems.append(f"could not write {folder / name} ({detail})")
            remove_stale(folder, stale, problems)
            return
        if path is not None:
            written.append(path)

    if not items_written:
        tag = {"id": document["run"]["id"], "status": document["run"].get("status")}
        step("items.jsonl", ["items.jsonl"],
             lambda: write_items(folder / "items.jsonl", records, tag))
    step("results.json", ["results.json"], lambda: write_json(folder / "results.json", document))
    step(SCHEMA_FILE, [], lambda: write_text(folder / SCHEMA_FILE, schema_text()))
    for section in sections:
        for name, write in section.files.items():
            step(name, [name], lambda name=name, write=write: _section_file(  # type: ignore[misc]
                folder / name, write))
    step("best.toml", ["best.toml"], lambda: write_best(folder / "best.toml", document))
    step("leaderboard.csv", [], lambda: append_leaderboard(folder / "leaderboard.csv",
                                                           leaderboard_rows(document)))
    if settings.save:
        step(f"runs/ (--ragbench-save {settings.save})", [],
             lambda: runs.save(document, folder, settings.save or ""))
    step("report.html", [], lambda: write_report_html(folder / "report.html", document,
                                                      problems, plots_ahead))
    return written


def write_best(path: Path, document: dict[str, Any]) -> Path | None:
    """best.toml: a sweep's recommended configuration (none: an earlier run's is removed)."""
    best = document.get("best") or {}
    if not best.get("recommended"):
        path.unlink(missing_ok=True)
        return None
    # lazy: only a sweep writes it
    from pytest_ragbench.results.best import best_toml

    return write_text(path, best_toml(best))


def _section_file(path: Path, write: Callable[[Path], object]) -> Path | None:
    """A report section's file, as its ``write`` made it (None when it wrote none)."""
    write(path)
    return path if path.exists() else None


def write_report_html(path: Path, document: dict[str, Any], problems: list[str],
                      plots_ahead: dict[str, html.DrawnPlots] | None = None) -> Path:
    """report.html; if the page cannot be rendered, a short page saying so replaces it."""
    try:
        page = html.render(document, problems, plots_ahead)
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        problems.append(f"report.html could not be rendered ({detail}); a page saying so "
                        "was written instead")
        page = html.fallback_page(document, detail)
    return write_text(path, page)
