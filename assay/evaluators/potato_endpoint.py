"""A potato-style endpoint (``.query(prompt, PydanticModel)``) and potato's ``config``/``endpoint``
parameters as assay's ``judge`` parameter: what every judge evaluator's params accept
(:class:`assay.evaluators.judge_base.JudgeParams`), apart from the potato evaluator catalog
(:mod:`assay.evaluators.potato`), which builds on the judge evaluators.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
from pydantic import create_model

from assay.exceptions import JudgeError
from assay.judges.base import JudgeRequest, JudgeResponse, JudgeUsage
from assay.potato_config import is_potato_config, judge_config


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
            return JudgeResponse(json.dumps(reply), _potato_verdict(reply, request), JudgeUsage(calls=1))
        text = str(reply)
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        verdict = _potato_verdict(data, request) if isinstance(data, dict) else None
        return JudgeResponse(text, verdict, JudgeUsage(calls=1))

    def estimate(self, request: JudgeRequest) -> JudgeUsage:
        return JudgeUsage(calls=1)


def _potato_verdict(data: dict[str, Any], request: JudgeRequest) -> dict[str, Any]:
    """potato's pass/fail judges answer ``{"pass": true, "reasoning": …}`` (``pass_`` from its
    pydantic model): that is the ``score`` a boolean verdict schema asks for."""
    props = (request.schema or {}).get("properties") or {}
    if "score" in props and "score" not in data:
        for name in ("pass", "pass_"):
            if name in data:
                return {**data, "score": data[name]}
    return data


class UnconfiguredEndpoint:
    """potato's "no judge endpoint configured" (a task config without ``ai_support``): every
    query fails, so each evaluation is an error result with score None."""

    def query(self, prompt: str, model: Any = None) -> Any:
        raise JudgeError("no judge endpoint configured: the potato config has no ai_support section")


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
