"""``from openevals.string.embedding_similarity import create_embedding_similarity_evaluator``.

As in openevals, the default model is OpenAI's ``text-embedding-3-small`` through the embeddings API
(``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` honoured; through assay's endpoint: retries, limits) and
the score is rounded to 2 decimals. A local sentence-transformers model name (``all-MiniLM-L6-v2``,
bundled, offline) or your own ``text -> vector`` function as ``embeddings`` work too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from assay.compat._core import AsyncCompatEvaluator, CompatEvaluator, as_async, wrap
from assay.compat.openevals.types import EvaluatorResult as TypedResult
from assay.evaluators.embedding import EmbeddingSimilarity

OPENEVALS_DEFAULT_MODEL = "openai:text-embedding-3-small"


def create_embedding_similarity_evaluator(
    *,
    model: str = OPENEVALS_DEFAULT_MODEL,
    algorithm: str = "cosine",
    embeddings: Callable[[str], Any] | None = None,
) -> CompatEvaluator[TypedResult]:
    """Similarity of the output and reference embeddings (key ``embedding_similarity``)."""
    ev = EmbeddingSimilarity(model=model, algorithm=algorithm, embed_fn=embeddings, round_digits=2)
    return cast("CompatEvaluator[TypedResult]", wrap(ev))


def create_async_embedding_similarity_evaluator(
    *,
    model: str = OPENEVALS_DEFAULT_MODEL,
    algorithm: str = "cosine",
    embeddings: Callable[[str], Any] | None = None,
) -> AsyncCompatEvaluator[TypedResult]:
    """:func:`create_embedding_similarity_evaluator` whose evaluator is awaited: ``await evaluator(outputs=...)``."""
    return as_async(create_embedding_similarity_evaluator(model=model, algorithm=algorithm, embeddings=embeddings))


__all__ = ["create_async_embedding_similarity_evaluator", "create_embedding_similarity_evaluator"]
