"""``potato.evaluators.rag_triad``: the three RAG judges under potato's class names, and
``rag_triad(config, ...)``."""

from __future__ import annotations

from assay.evaluators.potato import rag_triad
from assay.evaluators.rag import AnswerRelevance as AnswerRelevanceEvaluator
from assay.evaluators.rag import ContextRelevance as ContextRelevanceEvaluator
from assay.evaluators.rag import Groundedness as GroundednessEvaluator

__all__ = ["AnswerRelevanceEvaluator", "ContextRelevanceEvaluator", "GroundednessEvaluator", "rag_triad"]
