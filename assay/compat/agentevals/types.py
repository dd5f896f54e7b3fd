"""``from agentevals.types import …`` (see :mod:`assay.compat`): agentevals' type names and shapes."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from assay.compat.openevals.types import (
    ChatCompletionMessage,
    EvaluatorResult,
    FewShotExample,
    SimpleAsyncEvaluator,
    SimpleEvaluator,
    ToolArgsMatchMode,
    ToolArgsMatchOverrides,
)


class GraphTrajectory(TypedDict):
    """A graph trajectory: per-turn inputs, results and the nodes each turn visited."""

    inputs: list[dict[str, Any]] | None
    results: list[dict[str, Any]]
    steps: list[list[str]]


class ExtractedLangGraphThreadTrajectory(TypedDict):
    """A LangGraph thread as ``{"inputs", "outputs"}`` (what the extract helpers return)."""

    inputs: list[Any]
    outputs: GraphTrajectory


__all__ = [
    "ChatCompletionMessage",
    "EvaluatorResult",
    "ExtractedLangGraphThreadTrajectory",
    "FewShotExample",
    "GraphTrajectory",
    "SimpleAsyncEvaluator",
    "SimpleEvaluator",
    "ToolArgsMatchMode",
    "ToolArgsMatchOverrides",
]
