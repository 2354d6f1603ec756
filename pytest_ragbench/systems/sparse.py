"""BM25 as sparse vectors, for engines that score sparse vectors by dot product (Qdrant).

A document's vector holds, per term, BM25's term-frequency part
``tf / (tf + k1·(1 − b + b·len/avglen))``; a query's vector holds how often each term
occurs in it. The engine multiplies each query term by its IDF (Qdrant's
``Modifier.IDF``: ``ln(1 + (N − df + 0.5)/(df + 0.5))``, Lucene's), so the dot product is
the Lucene BM25 score that bm25s computes, over the same tokens (bm25s's tokenizer and
English stopwords, as :class:`~pytest_ragbench.systems.retrievers.BM25Retriever`).

Terms become vector indices by a 32-bit hash (no vocabulary to store or ship with the
collection); two terms of one corpus that share a hash are counted as one term
(:attr:`SparseEncoder.collisions` says how many indices are shared).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

HASH_NAME = "blake2b-32"


def term_index(term: str) -> int:
    """The sparse-vector index of a term: the first 4 bytes of its BLAKE2b digest."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest(), "little")


@dataclass(frozen=True)
class SparseVector:
    """Indices (unique, sorted) and their weights."""

    indices: list[int]
    values: list[float]


class SparseEncoder:
    """Turns documents and queries into BM25 sparse vectors (see the module docstring)."""

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, stopwords: str | None = "en") -> None:
        self.k1, self.b, self.stopwords = k1, b, stopwords
        self._indices: dict[str, int] = {}
        self._owners: dict[int, str] = {}
        self._shared: set[int] = set()

    @property
    def collisions(self) -> int:
        """How many indices of the documents seen so far stand for more than one term."""
        return len(self._shared)

    def params(self) -> dict[str, object]:
        """What determines the vectors (part of a collection's fingerprint)."""
        return {"k1": self.k1, "b": self.b, "stopwords": self.stopwords, "hash": HASH_NAME,
                "idf": "engine (Modifier.IDF)", "tokenizer": "bm25s"}

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """bm25s's tokens: lower-cased words of two or more characters, stopwords dropped."""
        import bm25s

        tokens: list[list[str]] = bm25s.tokenize(list(texts), stopwords=self.stopwords,
                                                 return_ids=False, show_progress=False)
        return tokens

    def _index(self, term: str) -> int:
        index = self._indices.get(term)
        if index is None:
            index = self._indices[term] = term_index(term)
        return index

    def documents(self, texts: Sequence[str]) -> list[SparseVector]:
        """One vector per document; the average length is taken over ``texts``."""
        tokens = self.tokenize(texts)
        lengths = [len(t) for t in tokens]
        average = (sum(lengths) / len(lengths)) if lengths and sum(lengths) else 1.0
        vectors = []
        for words in tokens:
            norm = self.k1 * (1.0 - self.b + self.b * len(words) / average)
            weights: dict[int, float] = {}
            for term, tf in Counter(words).items():
                index = self._index(term)
                if self._owners.setdefault(index, term) != term:
                    self._shared.add(index)
                weights[index] = weights.get(index, 0.0) + tf / (tf + norm)
            vectors.append(_vector(weights))
        return vectors

    def queries(self, texts: Sequence[str]) -> list[SparseVector]:
        """One vector per query: each term's count (a repeated term counts again, as in bm25s)."""
        vectors = []
        for words in self.tokenize(texts):
            counts: dict[int, float] = {}
            for term in words:
                index = self._index(term)
                counts[index] = counts.get(index, 0.0) + 1.0
            vectors.append(_vector(counts))
        return vectors


def _vector(weights: dict[int, float]) -> SparseVector:
    indices = sorted(weights)
    return SparseVector(indices, [float(weights[i]) for i in indices])
