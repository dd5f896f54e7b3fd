"""Potato's evaluator names, so code written for ``potato.evaluators`` runs with only the import
changed to ``assay.evaluators``.

Most are assay's own classes under potato's name (``ToolUseEvaluator`` *is* ``ToolUse``). The
differences potato users rely on:

* ``TrajectoryMatchEvaluator`` compares the flat tool-call sequence in ``strict`` mode (potato's
  reading; assay's ``TrajectoryMatch`` compares message by message like openevals) and keeps the key
  ``trajectory_match``;
* the judge evaluators take potato's ``config`` (``{"ai_support": {"endpoint_type", "ai_config":
  {model, base_url, api_key, …}}}``, or ``{"judge_alignment": {"ai_support": …}}``), as the first
  positional argument or ``config=``, or an injected potato-style ``endpoint`` (anything with
  ``.query(prompt, PydanticModel)`` returning text, a dict or a pydantic object);
* ``make_rubric_dag`` / ``rag_triad`` are potato's factories.

>>> TrajectoryMatchEvaluator(mode="unordered").key
'trajectory_match'
>>> judge_config({"ai_support": {"enabled": True, "endpoint_type": "vllm",
...     "ai_config": {"model": "qwen", "base_url": "http://127.0.0.1:8000/v1"}}})["provider"]
'openai'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, Field, model_validator

from assay.evaluators.agent_judge import AgentAsJudge, AgentAsJudgeParams
from assay.evaluators.embedding import DEFAULT_MODEL, EmbeddingSimilarity, EmbeddingSimilarityParams
from assay.evaluators.heuristic import JsonSchemaMatch, JsonValid
from assay.evaluators.judge_base import JudgeCalls
from assay.evaluators.judge_trajectory import TrajectoryJudge, TrajectoryJudgeParams
from assay.evaluators.potato_endpoint import EndpointJudge, UnconfiguredEndpoint, judge_spec, potato_judge_fields
from assay.evaluators.rag import AnswerRelevance, ContextRelevance, Groundedness
from assay.evaluators.rubric_dag import RubricDag
from assay.evaluators.rubric_presets import RUBRIC_PRESETS
from assay.evaluators.tool_use import ToolCallAccuracy, ToolUse
from assay.evaluators.trajectory import TrajectoryMatch, TrajectoryMatchParams
from assay.exceptions import ConfigError
from assay.potato_config import is_potato_config, judge_config
from assay.records import Result
from assay.traces.model import Trace

ToolUseEvaluator = ToolUse
ToolCallAccuracyEvaluator = ToolCallAccuracy
JSONValid = JsonValid
JSONSchemaMatch = JsonSchemaMatch

# --------------------------------------------------------------------------- deterministic


class TrajectoryMatchEvaluatorParams(TrajectoryMatchParams):
    strict_scope: Literal["messages", "tool_calls"] = "tool_calls"
    """potato compares the flat tool-call sequence in strict mode."""


class TrajectoryMatchEvaluator(TrajectoryMatch):
    """potato's ``TrajectoryMatchEvaluator``: tool calls only (roles, content and message
    boundaries are ignored in every mode); key ``trajectory_match``."""

    Params = TrajectoryMatchEvaluatorParams

    def default_key(self) -> str:
        return "trajectory_match"


class EmbeddingDistanceParams(EmbeddingSimilarityParams):
    model: str = Field(DEFAULT_MODEL, validation_alias=AliasChoices("model", "model_name"))
    """sentence-transformers model (potato's ``model_name``)."""


class EmbeddingDistance(EmbeddingSimilarity):
    """potato's ``EmbeddingDistance(embed_fn=None, model_name=...)``: cosine similarity of the
    output and reference embeddings, not rounded."""

    Params = EmbeddingDistanceParams


# --------------------------------------------------------------------------- judges


def _no_judge_in(config: Any) -> bool:
    """A potato task config that names no judge endpoint (no ``ai_support`` section, e.g. ``{}``)."""
    return isinstance(config, Mapping) and not is_potato_config(config) and not {"provider", "model"} & config.keys()


class _PotatoJudgeInit:
    """``Cls(config, **params)`` as in potato; a params dict or model positionally still works.

    A ``config`` without an ``ai_support`` section (and no ``endpoint``) is potato's "no judge
    endpoint configured": every evaluation is an error result with score None, not an exception."""

    def __init__(self, config: Any = None, /, **kwargs: Any) -> None:
        if is_potato_config(config) or (_no_judge_in(config) and "endpoint" not in kwargs):
            kwargs = {"config": config, **kwargs}
            config = None
        if _no_judge_in(kwargs.get("config")) and kwargs.get("endpoint") is None and kwargs.get("judge") is None:
            kwargs["config"] = None
            kwargs["endpoint"] = UnconfiguredEndpoint()
        super().__init__(config, **kwargs)  # type: ignore[call-arg]


class LLMTrajectoryJudgeParams(TrajectoryJudgeParams):
    config: Any = None
    """potato task config (its ``ai_support`` section names the judge endpoint)."""
    endpoint: Any = None
    """An injected potato-style endpoint (``.query(prompt, Model)``)."""
    continuous: bool | None = False
    """A 0–1 score instead of pass/fail (potato's default: pass/fail)."""

    _potato = model_validator(mode="before")(potato_judge_fields)


class LLMTrajectoryJudge(_PotatoJudgeInit, TrajectoryJudge):
    """potato's ``LLMTrajectoryJudge(config=..., continuous=...)``: reference-free trajectory
    judge (the reference is shown when the record has one); registry name ``llm_trajectory_judge``.
    As in potato, the task (the record's ``inputs``) is shown above the trajectory when given."""

    name: ClassVar[str] = "llm_trajectory_judge"
    Params = LLMTrajectoryJudgeParams
    params: LLMTrajectoryJudgeParams

    def messages_for(self, trace: Trace, compiled: Any) -> list[dict[str, Any]]:
        messages = super().messages_for(trace, compiled)
        if trace.input is None or "inputs" in compiled.variables:
            return messages
        task = self.variable("inputs", trace, compiled)
        last = messages[-1]
        if task and isinstance(last.get("content"), str):
            messages[-1] = {**last, "content": f"<task>\n{task}\n</task>\n\n{last['content']}"}
        return messages


class AgentAsJudgeEvaluatorParams(AgentAsJudgeParams):
    config: Any = None
    """potato task config (its ``ai_support`` section names the judge endpoint)."""
    endpoint: Any = None
    """An injected potato-style endpoint (``.query(prompt, Model)``)."""
    requirements_field: str = Field(
        "requirements", validation_alias=AliasChoices("requirements_field", "requirements_key")
    )
    """Record field holding per-record requirements (potato's ``requirements_key``)."""

    _potato = model_validator(mode="before")(potato_judge_fields)


class AgentAsJudgeEvaluator(_PotatoJudgeInit, AgentAsJudge):
    """potato's ``AgentAsJudgeEvaluator(config, requirements=[...])``; its metadata also carries
    potato's ``spot_check_units`` (the requirements a reviewer checks: one per requirement)."""

    Params = AgentAsJudgeEvaluatorParams

    async def judge_trace(self, trace: Trace, calls: JudgeCalls) -> Result:
        result = await super().judge_trace(trace, calls)
        if "total" in result.metadata:
            result.metadata["spot_check_units"] = result.metadata["total"]
        return result


def make_rubric_dag(
    config: Any = None,
    dag: dict[str, Any] | None = None,
    preset: str | None = None,
    endpoint: Any = None,
    **params: Any,
) -> RubricDag:
    """potato's factory: a rubric_dag evaluator from an explicit ``dag`` (wins) or a preset name
    from :data:`RUBRIC_PRESETS` (an unknown preset raises KeyError, as in potato)."""
    if dag is None:
        if preset is None:
            raise ConfigError("make_rubric_dag: give dag= or preset=")
        dag = RUBRIC_PRESETS[preset]
    return RubricDag(dag=dag, judge=judge_spec(config, endpoint), **params)


def rag_triad(config: Any = None, endpoint: Any = None, **params: Any) -> dict[str, Any]:
    """potato's factory: ``{"context_relevance", "groundedness", "answer_relevance"}`` evaluators
    sharing one judge."""
    judge = judge_spec(config, endpoint)
    return {cls.name: cls(judge=judge, **params) for cls in (ContextRelevance, Groundedness, AnswerRelevance)}


__all__ = [
    "RUBRIC_PRESETS",
    "AgentAsJudgeEvaluator",
    "EmbeddingDistance",
    "EndpointJudge",
    "JSONSchemaMatch",
    "JSONValid",
    "LLMTrajectoryJudge",
    "ToolCallAccuracyEvaluator",
    "ToolUseEvaluator",
    "TrajectoryMatchEvaluator",
    "judge_config",
    "make_rubric_dag",
    "rag_triad",
]
