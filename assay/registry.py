"""Evaluator registry: a table of lazy ``"module:attr"`` strings plus the entry-point group
``assay.evaluators`` for third-party evaluators.

>>> from assay.registry import build_evaluator
>>> build_evaluator("trajectory_match", {"mode": "unordered"}).key
'trajectory_unordered_match'
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from assay.evaluators.base import BaseEvaluator
from assay.exceptions import ConfigError, UnknownEvaluatorError

#: name -> "module:Class". Aliases are listed with the params they preset (see ALIASES).
BUILTIN_EVALUATORS: dict[str, str] = {
    # trajectory and tool use
    "trajectory_match": "assay.evaluators.trajectory:TrajectoryMatch",
    "tool_use": "assay.evaluators.tool_use:ToolUse",
    "tool_call_accuracy": "assay.evaluators.tool_use:ToolCallAccuracy",
    "graph_trajectory_strict_match": "assay.evaluators.graph_trajectory:GraphTrajectoryStrictMatch",
    # heuristic / string
    "exact_match": "assay.evaluators.heuristic:ExactMatch",
    "contains": "assay.evaluators.heuristic:Contains",
    "regex_match": "assay.evaluators.heuristic:RegexMatch",
    "edit_distance": "assay.evaluators.heuristic:EditDistance",
    "json_valid": "assay.evaluators.heuristic:JsonValid",
    "json_schema_match": "assay.evaluators.heuristic:JsonSchemaMatch",
    "json_match": "assay.evaluators.json_match:JsonMatch",
    "embedding_similarity": "assay.evaluators.embedding:EmbeddingSimilarity",
    # scenario (custom code evaluators of the agent-evals catalog, as built-ins)
    "max_turns": "assay.evaluators.scenario:MaxTurns",
    "token_budget": "assay.evaluators.scenario:TokenBudget",
    "response_contains": "assay.evaluators.scenario:ResponseContains",
    "escalation": "assay.evaluators.scenario:Escalation",
    "task_complete_signal": "assay.evaluators.scenario:TaskCompleteSignal",
    "pending_confirmation": "assay.evaluators.scenario:PendingConfirmation",
    "interrupt_rejection": "assay.evaluators.scenario:InterruptRejection",
    "error_suggestions": "assay.evaluators.scenario:ErrorSuggestions",
    "tool_graph": "assay.evaluators.scenario:ToolGraph",
    "routing_accuracy": "assay.evaluators.scenario:RoutingAccuracy",
    "latency": "assay.evaluators.latency:Latency",
    # code
    "pyright": "assay.evaluators.code:PyrightCheck",
    "mypy": "assay.evaluators.code:MypyCheck",
    "code_execution": "assay.evaluators.code_exec:CodeExecution",
    # composition and user code
    "composite": "assay.evaluators.composite:Composite",
    "python": "assay.evaluators.custom:PythonEvaluator",
    # LLM judges
    "llm_judge": "assay.evaluators.llm_judge:LLMJudge",
    "trajectory_judge": "assay.evaluators.judge_trajectory:TrajectoryJudge",
    "llm_trajectory_judge": "assay.evaluators.potato:LLMTrajectoryJudge",
    "graph_trajectory_llm_judge": "assay.evaluators.graph_trajectory:GraphTrajectoryJudge",
    "rubric_dag": "assay.evaluators.rubric_dag:RubricDag",
    "rag_triad": "assay.evaluators.rag:RagTriad",
    "context_relevance": "assay.evaluators.rag:ContextRelevance",
    "groundedness": "assay.evaluators.rag:Groundedness",
    "answer_relevance": "assay.evaluators.rag:AnswerRelevance",
    "agent_as_judge": "assay.evaluators.agent_judge:AgentAsJudge",
    "code_judge": "assay.evaluators.code_judge:CodeJudge",
}

#: alias -> (evaluator name, preset params)
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "trajectory_strict_match": ("trajectory_match", {"mode": "strict"}),
    "trajectory_unordered_match": ("trajectory_match", {"mode": "unordered"}),
    "trajectory_subset_match": ("trajectory_match", {"mode": "subset"}),
    "trajectory_superset_match": ("trajectory_match", {"mode": "superset"}),
    "trajectory_subsequence_match": ("trajectory_match", {"mode": "subsequence"}),
    "levenshtein": ("edit_distance", {}),
    "levenshtein_distance": ("edit_distance", {"key": "levenshtein_distance"}),
    "embedding_distance": ("embedding_similarity", {}),
}

_extra: dict[str, str | type[BaseEvaluator[Any]]] = {}


def register_evaluator(name: str, target: str | type[BaseEvaluator[Any]]) -> None:
    """Register an evaluator class (or a lazy ``"module:Class"`` string) under ``name``."""
    _extra[name] = target
    _table.cache_clear()
    get_evaluator_class.cache_clear()


def register_alias(alias: str, name: str, params: dict[str, Any]) -> None:
    ALIASES[alias] = (name, params)


@cache
def _table() -> dict[str, str | type[BaseEvaluator[Any]]]:
    table: dict[str, str | type[BaseEvaluator[Any]]] = dict(BUILTIN_EVALUATORS)
    for ep in entry_points(group="assay.evaluators"):
        table.setdefault(ep.name, ep.value)
    table.update(_extra)
    return table


def evaluator_names() -> list[str]:
    """Every registered evaluator name (aliases excluded), sorted."""
    return sorted(_table())


def _import(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import {target!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise ConfigError(f"{module_name!r} has no attribute {attr!r}") from exc


@cache
def get_evaluator_class(name: str) -> type[BaseEvaluator[Any]]:
    """The evaluator class registered under ``name`` (aliases resolve to their target)."""
    if name in ALIASES:
        name = ALIASES[name][0]
    table = _table()
    if name not in table:
        raise UnknownEvaluatorError(f"unknown evaluator {name!r}; available: {', '.join(evaluator_names())}")
    target = table[name]
    cls = _import(target) if isinstance(target, str) else target
    if not (isinstance(cls, type) and issubclass(cls, BaseEvaluator)):
        raise ConfigError(f"evaluator {name!r} ({target}) is not an assay evaluator class")
    return cls


def build_evaluator(name: str, params: dict[str, Any] | None = None) -> BaseEvaluator[Any]:
    """Build the evaluator ``name`` with ``params`` validated by its params model.

    Raises ConfigError naming the evaluator and the bad key.
    """
    preset: dict[str, Any] = {}
    if name in ALIASES:
        name, preset = ALIASES[name]
    cls = get_evaluator_class(name)
    return cls({**preset, **(params or {})})


def list_evaluators() -> list[dict[str, str]]:
    """``[{"name", "description"}]`` for every registered evaluator, sorted by name."""
    out = []
    for name in evaluator_names():
        try:
            desc = get_evaluator_class(name).description
        except ConfigError as exc:
            desc = f"(unavailable: {exc})"
        out.append({"name": name, "description": desc})
    return out
