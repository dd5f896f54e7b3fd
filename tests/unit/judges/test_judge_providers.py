"""Provider classes: the registry, Azure OpenAI URLs and headers, Gemini bodies, replies and failure
policy, the judge's capacity as the engine reads it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from assay.exceptions import ConfigError, JudgeRequestError
from assay.judges import JudgeEndpoint, JudgeResponse, JudgeUsage
from assay.judges import providers as registry
from assay.judges.base import DEFAULT_CAPACITY, JudgeRequest, judge_capacity
from assay.judges.config import JudgeConfig
from assay.judges.providers.base import JudgeProvider
from assay.judges.providers.google_genai import gemini_schema
from assay.judges.providers.openai import OpenAIProvider

PNG = "data:image/png;base64,iVBORw0KGgo="
SCHEMA = {"type": "object", "properties": {"reasoning": {"type": "string"}, "score": {"type": "boolean"}}}


def provider(**kw: Any) -> JudgeProvider:
    cfg = JudgeConfig(**{"model": "m", **kw})
    return registry.get_provider_class(cfg.provider)(cfg)


# --- registry ---------------------------------------------------------------------------------


def test_builtin_providers_and_unknown_names() -> None:
    assert registry.provider_names() == ["anthropic", "azure_openai", "google_genai", "ollama", "openai"]
    with pytest.raises(ConfigError, match="unknown judge provider 'nope'; available: anthropic, azure_openai"):
        registry.get_provider_class("nope")


def test_register_provider_at_run_time() -> None:
    import assay.judges

    assert assay.judges.register_provider is registry.register_provider  # the library face
    assert assay.judges.JudgeProvider is JudgeProvider and assay.judges.provider_names() == registry.provider_names()

    class Echo(OpenAIProvider):
        name = "echo"

    registry.register_provider("echo", Echo)
    try:
        assert JudgeConfig(provider="echo", model="m").resolved_base_url() == "https://api.openai.com/v1"
        assert isinstance(JudgeEndpoint("e", {"provider": "echo", "model": "m"}).provider, Echo)
        registry.register_provider("bad", "builtins:dict")
        with pytest.raises(ConfigError, match="not a JudgeProvider subclass"):
            registry.get_provider_class("bad")
    finally:
        registry._extra.clear()
        registry.clear_cache()
    assert "echo" not in registry.provider_names()


# --- Azure OpenAI -----------------------------------------------------------------------------


def test_azure_urls_and_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    base = "https://r.openai.azure.com"
    p = provider(provider="azure_openai", base_url=base + "/", model="gpt-4o")
    assert p.url() == f"{base}/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
    p = provider(provider="azure_openai", base_url=base, deployment="my dep", api_version="2025-01-01-preview")
    assert p.url() == f"{base}/openai/deployments/my%20dep/chat/completions?api-version=2025-01-01-preview"
    p = provider(provider="azure_openai", base_url=f"{base}/openai/deployments/d")
    assert p.url().startswith(f"{base}/openai/deployments/d/chat/completions?")
    assert p.headers("k")["api-key"] == "k" and "Authorization" not in p.headers("k")
    entra = provider(provider="azure_openai", base_url=base, api_key_header="Authorization")
    assert entra.headers("tok")["Authorization"] == "Bearer tok"
    assert JudgeConfig(provider="azure_openai", model="m").resolved_key_env() == "AZURE_OPENAI_API_KEY"
    # the body is OpenAI's: structured output through response_format
    body = p.build_body(JudgeRequest([{"role": "user", "content": "hi"}], schema=SCHEMA))
    assert body["response_format"]["type"] == "json_schema"


def test_openai_with_api_version_is_still_azure_compatible() -> None:
    p = provider(base_url="https://r.openai.azure.com/openai/deployments/d", api_version="2024-06-01")
    assert p.url() == "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-06-01"


def test_openai_out_of_quota_is_neither_rate_limit_nor_retryable() -> None:
    p = provider()
    quota = b'{"error": {"code": "insufficient_quota"}}'
    assert p.is_out_of_quota(429, quota) and not p.is_rate_limited(429, quota) and not p.should_retry(429, quota)
    assert p.is_rate_limited(429, b"{}") and p.should_retry(503, b"") and not p.should_retry(400, b"")


# --- Google Gemini ----------------------------------------------------------------------------


def test_gemini_body() -> None:
    p = provider(provider="google_genai", model="models/gemini-2.5-pro", seed=4, max_tokens=300)
    assert p.url() == "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"
    messages = [
        {"role": "system", "content": "Be strict."},
        {"role": "user", "content": [{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": PNG}]},
        {"role": "assistant", "content": "Seen."},
        {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "UklG", "format": "mp3"}}]},
    ]
    body = p.build_body(JudgeRequest(messages, schema=SCHEMA))
    assert body["systemInstruction"] == {"parts": [{"text": "Be strict."}]}
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][0]["parts"] == [
        {"text": "Look:"},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
    ]
    assert body["contents"][2]["parts"] == [{"inlineData": {"mimeType": "audio/mp3", "data": "UklG"}}]
    assert body["generationConfig"] == {
        "temperature": 0.0,
        "seed": 4,
        "maxOutputTokens": 300,
        "responseMimeType": "application/json",
        "responseSchema": {
            "type": "OBJECT",
            "properties": {"reasoning": {"type": "STRING"}, "score": {"type": "BOOLEAN"}},
            "propertyOrdering": ["reasoning", "score"],
        },
    }
    assert "model" not in body  # the model is in the URL


def test_gemini_url_images_extra_body_and_refusals() -> None:
    p = provider(provider="google_genai", base_url="https://proxy/v1", extra_body={"generationConfig": {"topK": 1}})
    assert p.url() == "https://proxy/v1/models/m:generateContent"  # a versioned base is kept
    req = JudgeRequest([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}])
    body = p.build_body(req)
    assert body["contents"][0]["parts"] == [{"fileData": {"mimeType": "image/png", "fileUri": "https://x/a.png"}}]
    assert body["generationConfig"] == {"temperature": 0.0, "topK": 1}
    with pytest.raises(JudgeRequestError, match="file_data as a data: URL"):
        p.build_body(JudgeRequest([{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]))


def test_gemini_schema_conversion() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "definitions": {"lvl": {"type": "integer", "enum": [1, 2], "description": "Level."}},
        "properties": {
            "label": {"const": "ok"},
            "level": {"$ref": "#/definitions/lvl"},
            "maybe": {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"type": "string", "format": "uri"}, "minItems": 1},
        },
        "required": ["label", "level", "ghost"],
    }
    assert gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {
            "label": {"type": "STRING", "format": "enum", "enum": ["ok"]},
            "level": {"type": "INTEGER", "description": "Level. One of: 1, 2."},
            "maybe": {"nullable": True, "type": "NUMBER", "minimum": 0},
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "minItems": 1},
        },
        "propertyOrdering": ["label", "level", "maybe", "tags"],
        "required": ["label", "level"],
    }
    with pytest.raises(JudgeRequestError, match="points nowhere"):
        gemini_schema({"$ref": "#/$defs/missing"})


def test_gemini_reply() -> None:
    p = provider(provider="google_genai")
    payload = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"text": "thinking...", "thought": True}, {"text": '{"score": '}],
                },
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 7},
        "modelVersion": "gemini-2.5-flash-001",
    }
    payload["candidates"][0]["content"]["parts"].append({"text": "true}"})
    reply = p.parse_response(payload)
    assert (reply.text, reply.data) == ('{"score": true}', {"score": True})
    assert (reply.input_tokens, reply.output_tokens, reply.model) == (10, 12, "gemini-2.5-flash-001")
    with pytest.raises(JudgeRequestError, match="finishReason SAFETY"):
        p.parse_response({"candidates": [{"finishReason": "SAFETY"}]})
    with pytest.raises(JudgeRequestError, match="unexpected google_genai response shape"):
        p.parse_response({"candidates": [{"content": {"parts": [None]}}]})


def test_gemini_failure_policy() -> None:
    p = provider(provider="google_genai")
    bad_key = orjson.dumps(
        {"error": {"code": 400, "status": "INVALID_ARGUMENT", "details": [{"reason": "API_KEY_INVALID"}]}}
    )
    assert p.is_auth_failure(400, bad_key) and not p.is_auth_failure(400, b'{"error": {"code": 400}}')
    assert p.is_auth_failure(403, b"") and p.should_retry(503, b"") and p.is_rate_limited(429, b"")
    busy = orjson.dumps(
        {"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}}
    )
    assert p.retry_after({}, busy) == 1.5
    assert p.retry_after({"retry-after": "3"}, busy) == 3.0
    assert p.retry_after({}, b"not json") is None
    quota = "type.googleapis.com/google.rpc.QuotaFailure"
    daily = orjson.dumps(
        {"error": {"details": [{"@type": quota, "violations": [{"quotaId": "GenerateRequestsPerDay"}]}]}}
    )
    minute = orjson.dumps({"error": {"details": [{"@type": quota, "violations": [{"quotaId": "RequestsPerMinute"}]}]}})
    assert p.is_out_of_quota(429, daily) and not p.is_rate_limited(429, daily) and not p.should_retry(429, daily)
    assert not p.is_out_of_quota(429, minute) and p.is_rate_limited(429, minute)
    message = p.error_message({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota"}}, "")
    assert message == "RESOURCE_EXHAUSTED: quota"


def test_gemini_key_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    cfg = JudgeConfig(provider="google_genai", model="m")
    assert cfg.resolved_key_env() == "GOOGLE_API_KEY"
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    assert cfg.resolved_key_env() == "GEMINI_API_KEY"
    monkeypatch.setenv("GOOGLE_API_KEY", "g2")
    assert cfg.resolved_key_env() == "GOOGLE_API_KEY"
    assert provider(provider="google_genai").headers("g2")["x-goog-api-key"] == "g2"
    with pytest.raises(ValueError, match="api_key_env"):
        JudgeConfig(provider="google_genai", model="m", extra_headers={"X-Goog-Api-Key": "k"})


# --- capacity ---------------------------------------------------------------------------------


class Sized:
    name = "sized"

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        return JudgeResponse('{"score": true}', {"score": True}, JudgeUsage(calls=1))

    def estimate(self, request: JudgeRequest) -> JudgeUsage:
        return JudgeUsage()


def test_the_engine_reads_the_judges_capacity() -> None:
    from assay.registry import build_evaluator
    from assay.stages.evaluate import EvaluateStage

    assert judge_capacity(JudgeEndpoint("e", {"model": "m", "max_concurrency": 5})) == 5
    assert judge_capacity(object()) == DEFAULT_CAPACITY
    ev = build_evaluator("llm_judge", {"prompt": "correctness", "judge": Sized(200)})
    assert EvaluateStage([ev]).wanted_batches_in_flight(8) == 51  # ceil(2 * 200 / 8) + 1
    ev = build_evaluator("llm_judge", {"prompt": "correctness", "judge": Sized(4)})
    assert EvaluateStage([ev]).wanted_batches_in_flight(8) == 2


def test_batch_support_is_the_provider_classs() -> None:
    """``mode: batch`` follows the provider class (its ``batch_limits`` and ``batcher``), not a
    table of names: a registered provider can batch, a built-in one without a batch API cannot."""
    from assay.judges.batch.api import OpenAIBatches
    from assay.judges.providers import batcher_for

    class Gateway(OpenAIProvider):
        name = "gateway"
        batch_limits = (7, 1_000)

    registry.register_provider("gateway", Gateway)
    try:
        cfg = JudgeConfig(provider="gateway", model="m", mode="batch")
        client = batcher_for("g", cfg, "sk-x")
        assert isinstance(client, OpenAIBatches) and client.limits() == (7, 1_000)
        assert JudgeConfig(provider="gateway", model="m", mode="batch", batch={"max_requests": 3}).batch.limits(
            Gateway.batch_limits
        ) == (3, 1_000)
        with pytest.raises(
            ValidationError, match="mode: batch needs provider anthropic, azure_openai, gateway, openai"
        ):
            JudgeConfig(provider="ollama", model="m", mode="batch")
    finally:
        registry._extra.clear()
        registry.clear_cache()
    with pytest.raises(ConfigError, match="provider ollama has no batch API"):
        provider(provider="ollama", model="m").batcher("j", None)
