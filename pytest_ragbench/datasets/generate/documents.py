"""Passages to generate questions from: a folder of documents, or a BEIR corpus.

A folder is read as the embedded system reads its corpus (``systems/corpus.py``):
Markdown and text through ``load_text_file`` (front matter, title, paragraph chunks);
HTML as its visible text (scripts and styles dropped, the ``<title>`` or first ``<h1>``
as title); PDF page by page through pypdf. A BEIR folder's ``corpus.jsonl`` records are
split into the same paragraph chunks. Every passage's ``metadata["source"]`` is what a
vector case's ``expected_sources`` names: the file name, or the BEIR document id.
"""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from pytest_ragbench.datasets.generate.common import GenerateError
from pytest_ragbench.errors import CaseError
from pytest_ragbench.systems.corpus import (
    DEFAULT_CHUNK_CHARS,
    TEXT_SUFFIXES,
    chunk_text,
    load_jsonl,
    load_text_file,
)
from pytest_ragbench.systems.protocols import Document

HTML_SUFFIXES = (".html", ".htm")
PDF_SUFFIXES = (".pdf",)
DOCUMENT_SUFFIXES = TEXT_SUFFIXES + HTML_SUFFIXES + PDF_SUFFIXES
_BLOCKS = {"p", "div", "section", "article", "li", "tr", "br", "h1", "h2", "h3", "h4", "h5",
           "h6", "pre", "blockquote", "table", "ul", "ol", "dd", "dt"}


class _VisibleText(HTMLParser):
    """Collects an HTML page's visible text, a blank line at each block, and its title."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0  # inside <script>/<style>/<head> parts that are not text
        self._in: str | None = None  # "title" or "h1" while reading one

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "noscript", "template"):
            self._skip += 1
        elif tag in ("title", "h1") and not self.title:
            self._in = tag
        if tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript", "template") and self._skip:
            self._skip -= 1
        if tag == self._in:
            self._in = None
        if tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in is not None:
            self.title += data.strip()
            if self._in == "title":
                return  # the <title> is not part of the body
        self.parts.append(" ".join(data.split()) + (" " if data[-1:].isspace() else ""))

    def text(self) -> str:
        lines = "".join(self.parts).split("\n")
        return "\n".join(line.strip() for line in lines)


def html_text(raw: str) -> tuple[str, str]:
    """The visible text of an HTML page (paragraphs apart) and its title."""
    parser = _VisibleText()
    parser.feed(raw)
    parser.close()
    return parser.text(), parser.title


def pdf_pages(file: Path) -> list[str]:
    """The text of each page of a PDF (pypdf)."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError as exc:
        raise GenerateError("reading PDF needs pypdf: pip install pypdf") from exc
    try:
        return [page.extract_text() or "" for page in PdfReader(str(file)).pages]
    except (PdfReadError, OSError, ValueError) as exc:
        raise CaseError(f"cannot read PDF: {exc}", file=file) from None


def _chunks(doc_id: str, text: str, metadata: dict[str, object], chunk_chars: int,
            page: int | None = None) -> Iterator[Document]:
    for n, (chunk, line) in enumerate(chunk_text(text, chunk_chars)):
        extra: dict[str, object] = {"chunk": n, "line": line + 1}
        if page is not None:
            extra["page"] = page
        suffix = f"p{page}#{n}" if page is not None else f"#{n}"
        yield Document(id=f"{doc_id}{suffix}", text=chunk, metadata={**metadata, **extra})


def read_file(file: Path, root: Path, chunk_chars: int = DEFAULT_CHUNK_CHARS,
              problems: list[CaseError] | None = None) -> list[Document]:
    """The passages of one document file (an unreadable one: a problem, no passages)."""
    problems = [] if problems is None else problems
    suffix = file.suffix.lower()
    relative = file.relative_to(root).as_posix() if file.is_relative_to(root) else file.name
    if suffix in TEXT_SUFFIXES:
        return load_text_file(file, root, chunk_chars, problems)
    try:
        if suffix in HTML_SUFFIXES:
            text, title = html_text(file.read_text(encoding="utf-8", errors="replace"))
            metadata: dict[str, object] = {"title": title or file.stem, "source": file.name,
                                           "path": relative}
            return list(_chunks(relative, text, metadata, chunk_chars))
        if suffix in PDF_SUFFIXES:
            metadata = {"title": file.stem, "source": file.name, "path": relative}
            return [doc for page, text in enumerate(pdf_pages(file), start=1)
                    for doc in _chunks(relative, text, metadata, chunk_chars, page)]
    except CaseError as exc:
        problems.append(exc)
        return []
    except OSError as exc:
        problems.append(CaseError(f"cannot read file: {exc}", file=file))
        return []
    return []


def read_documents(path: Path, chunk_chars: int = DEFAULT_CHUNK_CHARS
                   ) -> tuple[list[Document], list[CaseError]]:
    """Every passage of the documents at ``path`` (a file or a folder), in a stable order."""
    problems: list[CaseError] = []
    if path.is_file():
        files, root = [path], path.parent
    elif path.is_dir():
        root = path
        files = sorted(p for p in path.rglob("*") if p.is_file()
                       and p.suffix.lower() in DOCUMENT_SUFFIXES
                       and not any(part.startswith(".") for part in p.relative_to(path).parts))
    else:
        raise GenerateError(f"{path}: no such file or folder")
    passages = [doc for file in files for doc in read_file(file, root, chunk_chars, problems)]
    if not passages:
        raise GenerateError(f"{path}: no passage found in Markdown, text, HTML or PDF files")
    return passages, problems


def read_beir_corpus(path: Path, chunk_chars: int = DEFAULT_CHUNK_CHARS
                     ) -> tuple[list[Document], list[CaseError]]:
    """The passages of a BEIR folder's ``corpus.jsonl`` (``source``: the document id)."""
    corpus = path / "corpus.jsonl" if path.is_dir() else path
    if not corpus.is_file():
        raise GenerateError(f"{path}: no corpus.jsonl")
    problems: list[CaseError] = []
    passages: list[Document] = []
    for record in load_jsonl(corpus, problems):
        title = str(record.metadata.get("title") or "")
        metadata = {**record.metadata, "source": record.id, "title": title}
        passages.extend(_chunks(record.id, record.text, metadata, chunk_chars))
    if not passages:
        raise GenerateError(f"{corpus}: no passage found")
    return passages, problems
