"""Code QA records (SWE-QA-Bench, CodeRepoQA, seed-style snippets) → ``code_config`` samples.

Question types (keyword rules): ``howto``, ``definition``, ``lookup``,
``entity`` (errors and bugs). Record shapes, told apart by their fields:

- Snippet records ``{question, answer, code|snippet, file_path?, repo?, language?}``: the
  context is the code in a markdown fence whose info string is the language — taken from
  an explicit ``language``/``lang`` field, else the file extension, else ``text`` — with a
  ``# File:`` / ``# Repository:`` header. Difficulty by code length (≤20 lines easy,
  ≤80 medium, else hard).
- SWE-QA-Bench ``{question, answer}`` only: the repository is the file name
  (``flask.jsonl``), resolved to ``owner/name`` and the pinned upstream commit through
  ``repo_commit.txt`` (same folder, or the ``commits`` option). SWE-QA ships no code, so
  ``contexts`` is empty rather than made up; the files and symbols that the *answer*
  names are listed in ``metadata.referenced_files`` / ``referenced_symbols`` and the
  language comes from those files' extensions. ``metadata.contexts_note`` says so.
  Difficulty by the number of files the answer names (≤1 easy, 2-3 medium, ≥4 hard).
- CodeRepoQA issues ``{title, body, comments_details: [{body, author_association}],
  repository_url|html_url}``: the question is title + body, the answer the first comment
  by an OWNER/MEMBER/COLLABORATOR (an issue without one is skipped), the contexts the
  fenced code blocks of the body. Difficulty by thread length (≤2 comments easy, ≤5
  medium, else hard).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_ragbench.datasets.readers import read_records
from pytest_ragbench.datasets.sample import NormalizedSample, make_id, short_hash
from pytest_ragbench.datasets.sources.base import (
    AdaptResult,
    build_sample,
    classify,
    origin,
    require_mapping,
    require_text,
)
from pytest_ragbench.errors import CaseError

NAME = "code"
OPTIONS = {
    "source_dataset": "name written to source_dataset (default: by record shape)",
    "commits": "path of repo_commit.txt (default: the one beside the data files)",
    "repo": "repository of every record in the file(s) (default: from the file name)",
}
DOC_TYPE = "code_config"

LANGUAGE_HINTS = {
    ".py": "python", ".pyx": "cython", ".pyi": "python", ".js": "javascript",
    ".jsx": "javascript", ".ts": "typescript", ".tsx": "typescript", ".java": "java",
    ".go": "go", ".rs": "rust", ".cpp": "cpp", ".cc": "cpp", ".hpp": "cpp", ".c": "c",
    ".h": "c", ".rb": "ruby", ".yml": "yaml", ".yaml": "yaml", ".json": "json",
    ".toml": "toml", ".cfg": "ini", ".ini": "ini", ".sh": "bash", ".sql": "sql",
    ".rst": "rst", ".md": "markdown", ".txt": "text", ".html": "html", ".css": "css",
}
QUESTION_RULES = (
    ("howto", ("how to", "how do", "how can", "how should", "how would", "implement",
               "create ")),
    ("definition", ("what does", "what is", "what are", "explain", "describe", "why ",
                    "purpose", "role of")),
    ("lookup", ("where", "which file", "which module", "find ", "located")),
    ("entity", ("error", "exception", "bug", " fix", "issue", "crash", "fail")),
)
MAINTAINERS = ("OWNER", "MEMBER", "COLLABORATOR")
CONTEXTS_NOTE = ("SWE-QA publishes question and answer only; no code is available "
                 "offline, so contexts are empty. referenced_files and referenced_symbols "
                 "are taken from the reference answer, not retrieved evidence.")

_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:"
                   + "|".join(sorted((e[1:] for e in LANGUAGE_HINTS), key=len, reverse=True))
                   + r"))(?!\.?\w)")  # "app.json.ensure_ascii" is an attribute, not a file
_SYMBOL = re.compile(r"`([A-Za-z_][\w.]*)(?:\(\))?`")
_FENCE = re.compile(r"^(`{3,}|~{3,})[ \t]*([^\n`]*)\n(.*?)^\1[ \t]*$", re.MULTILINE | re.DOTALL)


def adapt_source(path: Path, options: Mapping[str, Any]) -> AdaptResult:
    """A ``.json``/``.jsonl`` file, or a folder of ``*.jsonl`` files (SWE-QA-Bench)."""
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    folder = path if path.is_dir() else path.parent
    commits_path = Path(options["commits"]) if options.get("commits") else (
        folder / "repo_commit.txt")
    result = AdaptResult()
    commits = read_commits(commits_path, result.errors) if commits_path.is_file() else {}
    for file in files:
        source = read_records(file)
        result.errors.extend(source.errors)
        seen: dict[str, int] = {}
        for line, record in source.records:
            try:
                sample = adapt_record(record, file=file, line=line,
                                      repo=options.get("repo") or file.stem, commits=commits,
                                      source_dataset=options.get("source_dataset"))
            except CaseError as exc:
                result.errors.append(exc)
                continue
            if sample is None:
                result.skipped["issue without a maintainer answer"] += 1
            elif sample.id in seen:
                result.errors.append(CaseError(
                    f"duplicate question (same id {sample.id} as line {seen[sample.id]})",
                    file=file, line=line, field="question"))
            else:
                seen[sample.id] = line
                result.samples.append(sample)
    return result


def adapt_record(record: Any, *, file: str | Path | None = None, line: int | None = None,
                 repo: str | None = None, commits: Mapping[str, tuple[str, str]] | None = None,
                 source_dataset: str | None = None) -> NormalizedSample | None:
    """One sample, or None for an issue that has no maintainer answer."""
    record = require_mapping(record, file=file, line=line)
    if "title" in record and ("comments_details" in record or "body" in record):
        return _issue(record, file, line, source_dataset or "coderepoqa")
    if any(k in record for k in ("code", "snippet")):
        return _snippet(record, file, line, source_dataset or "coderepoqa")
    return _swe_qa(record, file, line, repo, commits or {}, source_dataset or "swe-qa-bench")


def detect_language(record: Mapping[str, Any], paths: list[str] | None = None) -> str:
    """Explicit ``language``/``lang`` field, else the (most common) file extension."""
    for name in ("language", "lang"):
        value = record.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip().lower()
    if paths is None:
        file_path = record.get("file_path") or record.get("path")
        paths = [file_path] if isinstance(file_path, str) else []
    found = Counter(lang for lang in (_language_of(p) for p in paths) if lang)
    return found.most_common(1)[0][0] if found else "text"


def fence(code: str, language: str, header: list[str]) -> str:
    """Code in a markdown fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    marker = "`" * max(3, longest + 1)
    body = "\n".join([*header, "", code.rstrip("\n")]) if header else code.rstrip("\n")
    return f"{marker}{language}\n{body}\n{marker}"


def read_commits(path: Path, errors: list[CaseError]) -> dict[str, tuple[str, str]]:
    """``repo_commit.txt``: ``https://github.com/owner/name <commit>`` per line.

    Returns ``{name: (owner/name, commit)}``.
    """
    commits: dict[str, tuple[str, str]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(f"cannot read commits file: {exc}", file=path) from None
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        parts = text.split()
        match = re.match(r"^https?://[^/]+/([^/\s]+/([^/\s]+?))(?:\.git)?/?$", parts[0])
        if len(parts) != 2 or not match:
            errors.append(CaseError("expected '<repository URL> <commit>'", file=path,
                                    line=number))
            continue
        commits[match[2].lower()] = (match[1], parts[1])
    return commits


def _swe_qa(record: dict[str, Any], file: str | Path | None, line: int | None,
            repo: str | None, commits: Mapping[str, tuple[str, str]],
            source_dataset: str) -> NormalizedSample:
    question = require_text(record, "question", file=file, line=line)
    answer = require_text(record, "answer", file=file, line=line)
    name = str(record.get("repo") or repo or "unknown")
    full_name, commit = commits.get(name.lower().rsplit("/", 1)[-1], (name, None))
    files = _unique(m.group(1) for m in _PATH.finditer(answer))
    symbols = [s for s in _unique(m.group(1) for m in _SYMBOL.finditer(answer))
               if _language_of(s) is None][:30]
    difficulty = "easy" if len(files) <= 1 else ("medium" if len(files) <= 3 else "hard")
    return build_sample(
        file=file, line=line, id=make_id("swe-qa", name, short_hash(question)),
        question=question, ground_truth=answer, contexts=(), doc_type=DOC_TYPE,
        question_type=classify(question, QUESTION_RULES, "lookup"), difficulty=difficulty,
        source_dataset=source_dataset,
        metadata={"answerable": True, "repo": full_name, "commit": commit,
                  "language": detect_language(record, files),
                  "language_source": "referenced file extensions" if files else "none",
                  "referenced_files": files, "referenced_symbols": symbols,
                  "contexts_note": CONTEXTS_NOTE, "context_group": full_name,
                  **origin(file, line)})


def _snippet(record: dict[str, Any], file: str | Path | None, line: int | None,
             source_dataset: str) -> NormalizedSample:
    question = require_text(record, "question", file=file, line=line)
    answer = require_text(record, "answer", file=file, line=line)
    code_field = "code" if "code" in record else "snippet"
    code = require_text(record, code_field, file=file, line=line)
    file_path = record.get("file_path")
    repo = record.get("repo")
    for name, value in (("file_path", file_path), ("repo", repo)):
        if value is not None and not isinstance(value, str):
            raise CaseError("expected text", file=file, line=line, field=name)
    language = detect_language(record)
    header = [f"# File: {file_path or 'unknown'}"] + ([f"# Repository: {repo}"] if repo else [])
    lines = code.count("\n") + 1
    return build_sample(
        file=file, line=line,
        id=make_id("code", record.get("id") or short_hash(question + "\x1f" + code)),
        question=question, ground_truth=answer, contexts=(fence(code, language, header),),
        doc_type=DOC_TYPE, question_type=classify(question, QUESTION_RULES, "lookup"),
        difficulty="easy" if lines <= 20 else ("medium" if lines <= 80 else "hard"),
        source_dataset=source_dataset,
        metadata={"answerable": True, "repo": repo, "file_path": file_path,
                  "language": language, "code_length": len(code),
                  "context_group": f"{repo}:{file_path}", **origin(file, line)})


def _issue(record: dict[str, Any], file: str | Path | None, line: int | None,
           source_dataset: str) -> NormalizedSample | None:
    title = require_text(record, "title", file=file, line=line)
    body = record.get("body") or ""
    if not isinstance(body, str):
        raise CaseError("expected text", file=file, line=line, field="body")
    comments = record.get("comments_details") or []
    if not isinstance(comments, list):
        raise CaseError("expected a list", file=file, line=line, field="comments_details")
    answer = next((c["body"] for c in comments if isinstance(c, dict)
                   and c.get("author_association") in MAINTAINERS
                   and isinstance(c.get("body"), str) and c["body"].strip()), None)
    if answer is None:
        return None
    repo = _issue_repo(record)
    blocks = [(m.group(2).strip(), m.group(3)) for m in _FENCE.finditer(body)]
    language = detect_language(record, []) if any(
        k in record for k in ("language", "lang")) else next(
        (info.split()[0].lower() for info, _ in blocks if info), "text")
    number = record.get("number")
    header = [f"# Repository: {repo}"] + ([f"# Issue: #{number}"] if number else [])
    contexts = tuple(fence(code, info.split()[0].lower() if info else language, header)
                     for info, code in blocks if code.strip())
    question = f"{title.strip()}\n\n{body.strip()}" if body.strip() else title.strip()
    return build_sample(
        file=file, line=line,
        id=make_id("coderepoqa", repo.replace("/", "-"), number or short_hash(question)),
        question=question, ground_truth=answer.strip(), contexts=contexts, doc_type=DOC_TYPE,
        question_type=classify(title, QUESTION_RULES, "lookup"),
        difficulty=("easy" if len(comments) <= 2 else
                    "medium" if len(comments) <= 5 else "hard"),
        source_dataset=source_dataset,
        metadata={"answerable": True, "repo": repo, "issue_number": _plain(number),
                  "language": language, "comments": len(comments),
                  "context_group": f"{repo}#{number}", **origin(file, line)})


def _issue_repo(record: Mapping[str, Any]) -> str:
    for name in ("repository_url", "html_url", "url"):
        value = record.get(name)
        if isinstance(value, str):
            match = (re.search(r"/repos/([^/\s]+/[^/\s]+)", value)
                     or re.search(r"github\.com/([^/\s]+/[^/\s]+)", value))
            if match:
                return match[1]
    repo = record.get("repo") or record.get("full_name")
    return repo if isinstance(repo, str) and repo else "unknown"


def _language_of(path: str) -> str | None:
    suffix = Path(path).suffix.lower()
    return LANGUAGE_HINTS.get(suffix)


def _unique(values: Any) -> list[str]:
    return list(dict.fromkeys(values))


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None
