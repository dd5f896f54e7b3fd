"""``potato.evaluators.registry``: potato's evaluator names, built from a name and a params dict.

An unknown name raises ``KeyError`` (as potato); ``register_evaluator`` adds a factory of your own.

>>> "agent_as_judge" in get_supported_evaluators()
True
>>> build_evaluator("trajectory_match", {"mode": "unordered"}).key
'trajectory_match'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.compat.potato.evaluators.heuristic import (
    Contains,
    EditDistance,
    EmbeddingDistance,
    ExactMatch,
    JSONSchemaMatch,
    JSONValid,
    RegexMatch,
)
from assay.compat.potato.evaluators.trajectory_match import TrajectoryMatchEvaluator
from assay.evaluators.potato import (
    AgentAsJudgeEvaluator,
    LLMTrajectoryJudge,
    ToolCallAccuracyEvaluator,
    ToolUseEvaluator,
    make_rubric_dag,
)
from assay.evaluators.potato_endpoint import judge_spec
from assay.evaluators.rag import AnswerRelevance, ContextRelevance, Groundedness


def _rag(cls: type[Any]) -> Callable[..., Any]:
    def build(config: Any = None, endpoint: Any = None, **params: Any) -> Any:
        return cls(judge=judge_spec(config, endpoint), **params)

    return build


_REGISTRY: dict[str, tuple[Callable[..., Any], str]] = {
    "trajectory_match": (TrajectoryMatchEvaluator, "Tool-call sequence match (strict, unordered, subset, superset)"),
    "tool_use": (ToolUseEvaluator, "The expected tool was called (optionally with these arguments)"),
    "tool_call_accuracy": (ToolCallAccuracyEvaluator, "Share of the reference's tool calls the agent made"),
    "llm_trajectory_judge": (LLMTrajectoryJudge, "LLM judge of a trajectory, no reference needed"),
    "rubric_dag": (make_rubric_dag, "A decision tree of judge questions ending in fixed scores"),
    "context_relevance": (_rag(ContextRelevance), "RAG: the retrieved context is relevant to the question"),
    "groundedness": (_rag(Groundedness), "RAG: the answer's claims are supported by the context"),
    "answer_relevance": (_rag(AnswerRelevance), "RAG: the answer addresses the question"),
    "agent_as_judge": (AgentAsJudgeEvaluator, "A judge checks each requirement against the trajectory"),
    "exact_match": (ExactMatch, "The output equals the reference"),
    "contains": (Contains, "The output contains a substring (or the reference)"),
    "regex_match": (RegexMatch, "The output matches a regular expression"),
    "edit_distance": (EditDistance, "Similarity from the Levenshtein distance to the reference"),
    "json_valid": (JSONValid, "The output parses as JSON"),
    "json_schema_match": (JSONSchemaMatch, "The output validates against a JSON schema"),
    "embedding_similarity": (EmbeddingDistance, "Cosine similarity of output and reference embeddings"),
}


def register_evaluator(name: str, factory: Callable[..., Any], description: str = "") -> None:
    """Make ``build_evaluator(name, params)`` call ``factory(**params)``."""
    _REGISTRY[name] = (factory, description)


def build_evaluator(name: str, params: dict[str, Any] | None = None) -> Any:
    """The evaluator registered as ``name``, built with ``params`` (``KeyError`` if unknown)."""
    if name not in _REGISTRY:
        raise KeyError(f"unknown evaluator {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    factory, _ = _REGISTRY[name]
    return factory(**(params or {}))


def list_evaluators() -> list[dict[str, str]]:
    """``[{"name", "description"}]``, sorted by name."""
    return [{"name": n, "description": d} for n, (_, d) in sorted(_REGISTRY.items())]


def get_supported_evaluators() -> list[str]:
    """The registered names, sorted."""
    return sorted(_REGISTRY)


__all__ = ["build_evaluator", "get_supported_evaluators", "list_evaluators", "register_evaluator"]
