"""Graph retrieval (seed 000's third mode): an entity graph with personalized PageRank.

Every document is linked to the entities it names: capitalised spans ("Rudy Gobert",
"Minnesota Timberwolves", "PIE"), leading stop words dropped. A query is matched with the
entities whose words it contains (case ignored; a multi-word entity by the share of its
words present), and PageRank personalised on those entities (networkx) scores every
document: one naming a query entity scores highest, one linked to it only through a shared
entity of such a document still scores, and one unreachable from them scores nothing and
is not returned. A query naming no known entity retrieves nothing.

Imported only when the ``graph`` system is used; the graph is built in memory when the
corpus is indexed (a regular-expression pass, no model).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_ragbench.metrics.answer import STOPWORDS
from pytest_ragbench.systems.protocols import Context, Document

DAMPING = 0.85  # PageRank's usual alpha: the walk restarts at the query's entities 15% of steps
_SPAN = re.compile(r"[A-Z][\w'’.&-]*(?:\s+(?:(?:of|the|de|van|von)\s+)*[A-Z][\w'’.&-]*)*")
_WORD = re.compile(r"\w+")


def entities(text: str) -> set[str]:
    """The capitalised spans of ``text``, lower-cased, without leading or trailing stop words.

    "The Boston Celtics" -> "boston celtics"; "What" alone -> nothing.
    """
    found = set()
    for match in _SPAN.finditer(text):
        words = [w.strip(".'’-&") for w in match.group().split()]
        while words and words[0].lower() in STOPWORDS:
            words.pop(0)
        while words and words[-1].lower() in STOPWORDS:
            words.pop()
        name = " ".join(w.lower() for w in words if w)
        if len(name) > 1:
            found.add(name)
    return found


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _doc_node(position: int) -> tuple[str, int]:
    return ("doc", position)


def _entity_node(name: str) -> tuple[str, str]:
    return ("entity", name)


class GraphRetriever:
    """Documents ranked by personalized PageRank from the query's entities (see module doc).

    ``dense``: an optional dense retriever over the same corpus, used only by the embedded
    system for its similarity-based decline and ``min_score`` (never for ranking).
    """

    name = "graph"

    def __init__(self, *, damping: float = DAMPING, dense: Any = None) -> None:
        self.damping = damping
        self.dense = dense
        self.documents: list[Document] = []
        self._graph: Any = None
        self._entity_words: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        entity_count = len(self._entity_words)
        return (f"GraphRetriever({len(self.documents)} docs, {entity_count} entities, "
                "personalized PageRank)")

    def describe(self) -> str:
        """One line naming the retrieval."""
        return repr(self)

    def __len__(self) -> int:
        return len(self.documents)

    def index(self, documents: Sequence[Document]) -> None:
        """Build the document-entity graph of ``documents``."""
        import networkx as nx

        graph = nx.Graph()
        entity_words: dict[str, set[str]] = {}
        for position, doc in enumerate(documents):
            graph.add_node(_doc_node(position))
            for name in entities(f"{doc.title}\n{doc.text}"):
                graph.add_edge(_doc_node(position), _entity_node(name))
                entity_words.setdefault(name, _words(name))
        with self._lock:
            self.documents = list(documents)
            self._graph = graph
            self._entity_words = entity_words

    def for_corpus(self, documents: Sequence[Document]) -> GraphRetriever:
        """A graph retriever of another corpus (a BEIR dataset), indexed."""
        other = GraphRetriever(damping=self.damping)
        other.index(documents)
        return other

    def query_entities(self, query: str) -> dict[str, float]:
        """The known entities a query names, weighted by the share of their words it has."""
        words = _words(query)
        weights = {}
        for name, wanted in self._entity_words.items():
            content = {w for w in wanted if w not in STOPWORDS} or wanted
            share = len(content & words) / len(content)
            if share > 0 and (share == 1 or any(len(w) > 3 for w in content & words)):
                weights[name] = share
        return weights

    def retrieve(self, query: str, top_k: int = 5, filters: Mapping[str, Any] | None = None,
                 min_score: float | None = None) -> list[Context]:
        """The ``top_k`` documents by personalized PageRank from the query's entities."""
        import networkx as nx

        from pytest_ragbench.systems.retrievers import matches

        seeds = self.query_entities(query)
        if not seeds or self._graph is None:
            return []
        personalization = {_entity_node(name): weight for name, weight in seeds.items()}
        reachable: set[Any] = set()
        for node in personalization:
            if node not in reachable:
                reachable |= nx.node_connected_component(self._graph, node)
        # PageRank on what the query's entities reach: anything else has no score at all
        ranks = nx.pagerank(self._graph.subgraph(reachable), alpha=self.damping,
                            personalization=personalization)
        scored = []
        for position, doc in enumerate(self.documents):
            score = ranks.get(_doc_node(position), 0.0)
            if score <= 0 or (min_score is not None and score < min_score):
                continue
            if filters and not matches(doc.metadata, filters):
                continue
            scored.append((score, position))
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [Context(id=self.documents[p].id, text=self.documents[p].text, score=float(s),
                        metadata=dict(self.documents[p].metadata)) for s, p in scored[:top_k]]

    def retrieve_many(self, queries: Sequence[str], top_k: int = 5,
                      filters: Mapping[str, Any] | None = None,
                      min_score: float | None = None) -> list[list[Context]]:
        """:meth:`retrieve` for each query."""
        return [self.retrieve(q, top_k, filters, min_score) for q in queries]
