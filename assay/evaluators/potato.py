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

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import anyio.to_thread
from pydantic import AliasChoices, Field, create_model, model_validator

from assay.evaluators.agent_judge import AgentAsJudge, AgentAsJudgeParams
from assay.evaluators.embedding import DEFAULT_MODEL, EmbeddingSimilarity, EmbeddingSimilarityParams
from assay.evaluators.heuristic import JsonSchemaMatch, JsonValid
from assay.evaluators.judge_trajectory import TrajectoryJudge, TrajectoryJudgeParams
from assay.evaluators.rag import AnswerRelevance, ContextRelevance, Groundedness
from assay.evaluators.rubric_dag import RubricDag
from assay.evaluators.rubric_presets import RUBRIC_PRESETS
from assay.evaluators.tool_use import ToolCallAccuracy, ToolUse
from assay.evaluators.trajectory import TrajectoryMatch, TrajectoryMatchParams
from assay.exceptions import ConfigError
from assay.judges.base import JudgeRequest, JudgeResponse, JudgeUsage

ToolUseEvaluator = ToolUse
ToolCallAccuracyEvaluator = ToolCallAccuracy
JSONValid = JsonValid
JSONSchemaMatch = JsonSchemaMatch

#: potato endpoint_type -> (assay provider, default base URL or None, default key variable, default model)
_ENDPOINT_TYPES: dict[str, tuple[str, str | None, str | None, str]] = {
    "openai": ("openai", None, "OPENAI_API_KEY", "gpt-4o-mini"),
    "anthropic": ("anthropic", None, "ANTHROPIC_API_KEY", "claude-haiku-4-5-20251001"),
    "ollama": ("ollama", None, None, "llama3.2"),
    "vllm": ("openai", "http://localhost:8000/v1", None, "default"),
    "openrouter": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "openai/gpt-4o-mini"),
    "open_router": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "openai/gpt-4o-mini"),
    "gemini": (
        "openai",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "GEMINI_API_KEY",
        "gemini-2.0-flash",
    ),
    "huggingface": ("openai", "https://router.huggingface.co/v1", "HF_TOKEN", "meta-llama/Llama-3.1-8B-Instruct"),
}


def is_potato_config(obj: Any) -> bool:
    """Whether ``obj`` is a potato task config (holds ``ai_support`` or ``judge_alignment``)."""
    return isinstance(obj, Mapping) and ("ai_support" in obj or "judge_alignment" in obj)


def judge_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """An assay inline judge config from potato's ``ai_support`` section.

    A literal ``api_key`` is put in a process environment variable named after its hash (assay
    reads keys from the environment only, so they never appear in configs or logs).
    """
    section = config.get("judge_alignment", {}).get("ai_support") if "judge_alignment" in config else None
    ai = section or config.get("ai_support")
    if not isinstance(ai, Mapping):
        raise ConfigError("potato config: no ai_support section (config['ai_support'] or judge_alignment.ai_support)")
    if not ai.get("enabled", False):
        raise ConfigError("potato config: ai_support.enabled is not true, so there is no judge endpoint")
    kind = str(ai.get("endpoint_type", "openai")).removesuffix("_vision")
    if kind not in _ENDPOINT_TYPES:
        raise ConfigError(
            f"potato config: endpoint_type {kind!r} is not supported; use one of {sorted(_ENDPOINT_TYPES)}"
        )
    provider, base_url, key_env, model = _ENDPOINT_TYPES[kind]
    ai_config: Mapping[str, Any] = ai.get("ai_config") or {}
    out: dict[str, Any] = {"provider": provider, "model": str(ai_config.get("model") or model)}
    url = ai_config.get("base_url") or ai_config.get("api_base") or base_url
    if url:
        out["base_url"] = str(url)
    api_key = ai_config.get("api_key")
    if api_key and api_key != "EMPTY":
        env = "ASSAY_INLINE_KEY_" + hashlib.sha256(str(api_key).encode()).hexdigest()[:12].upper()
        os.environ[env] = str(api_key)
        out["api_key_env"] = env
    elif key_env and provider == "openai" and key_env != "OPENAI_API_KEY" and os.environ.get(key_env):
        out["api_key_env"] = key_env
    for name in ("max_tokens", "temperature", "timeout"):
        if ai_config.get(name) is not None:
            out[name] = ai_config[name]
    return out


class EndpointJudge:
    """A potato-style endpoint (``.query(prompt, PydanticModel)``) behind assay's Judge protocol.

    The request's messages are joined into one prompt (potato sends one user message); the verdict
    schema becomes a pydantic model with the schema's top-level properties.
    """

    name = "potato-endpoint"

    def __init__(self, endpoint: Any) -> None:
        self.endpoint = endpoint

    @staticmethod
    def _model(request: JudgeRequest) -> Any:
        props = (request.schema or {}).get("properties") or {}
        fields: dict[str, Any] = {str(k): (Any, None) for k in props}
        return create_model(request.schema_name or "Verdict", **fields)

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        parts = []
        for m in request.messages:
            content = m.get("content")
            if isinstance(content, list):
                content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            parts.append(str(content or ""))
        prompt = "\n\n".join(p for p in parts if p)
        reply = await anyio.to_thread.run_sync(self.endpoint.query, prompt, self._model(request))
        if hasattr(reply, "model_dump"):
            reply = reply.model_dump()
        if isinstance(reply, dict):
            return JudgeResponse(json.dumps(reply), reply, JudgeUsage(calls=1))
        text = str(reply)
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        return JudgeResponse(text, data if isinstance(data, dict) else None, JudgeUsage(calls=1))

    def estimate(self, request: JudgeRequest) -> JudgeUsage:
        return JudgeUsage(calls=1)


def judge_spec(config: Any = None, endpoint: Any = None) -> Any:
    """The ``judge`` parameter for a potato ``config``/``endpoint`` pair (None when neither)."""
    if endpoint is not None:
        return EndpointJudge(endpoint)
    if config is None:
        return None
    if is_potato_config(config):
        return judge_config(config)
    return config  # already an assay judge spec (a name, an inline dict, a Judge)


def potato_judge_fields(data: Any) -> Any:
    """Before-validator: turn potato's ``config``/``endpoint`` into ``judge``."""
    if isinstance(data, dict) and ("config" in data or "endpoint" in data):
        data = dict(data)
        config, endpoint = data.pop("config", None), data.pop("endpoint", None)
        if data.get("judge") is None:
            data["judge"] = judge_spec(config, endpoint)
    return data


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


class _PotatoJudgeInit:
    """``Cls(config, **params)`` as in potato; a params dict or model positionally still works."""

    def __init__(self, config: Any = None, /, **kwargs: Any) -> None:
        if is_potato_config(config):
            kwargs = {"config": config, **kwargs}
            config = None
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
    judge (the reference is shown when the record has one); registry name ``llm_trajectory_judge``."""

    name: ClassVar[str] = "llm_trajectory_judge"
    Params = LLMTrajectoryJudgeParams
    params: LLMTrajectoryJudgeParams


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
    """potato's ``AgentAsJudgeEvaluator(config, requirements=[...])``."""

    Params = AgentAsJudgeEvaluatorParams


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
