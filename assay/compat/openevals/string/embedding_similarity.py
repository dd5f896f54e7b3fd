"""``from openevals.string.embedding_similarity import create_embedding_similarity_evaluator``.

assay embeds locally (sentence-transformers, ``all-MiniLM-L6-v2`` by default); openevals' default
is OpenAI's embeddings API. A ``provider:model`` name is refused at build time (use a local model
name, or pass your own ``text -> vector`` function as ``embeddings``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.compat._core import CompatEvaluator, wrap
from assay.evaluators.embedding import DEFAULT_MODEL, EmbeddingSimilarity


def create_embedding_similarity_evaluator(
    *,
    model: str = DEFAULT_MODEL,
    algorithm: str = "cosine",
    embeddings: Callable[[str], Any] | None = None,
) -> CompatEvaluator:
    """Similarity of the output and reference embeddings (key ``embedding_similarity``)."""
    ev = EmbeddingSimilarity(model=model, algorithm=algorithm, embed_fn=embeddings)
    return wrap(ev)


__all__ = ["create_embedding_similarity_evaluator"]
