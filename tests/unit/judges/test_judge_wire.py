"""Provider wire formats: request bodies, content blocks, replies and error bodies."""

from __future__ import annotations

from typing import Any

import pytest

from assay.exceptions import JudgeRequestError
from assay.judges.base import JudgeRequest
from assay.judges.config import JudgeConfig
from assay.judges.wire import (
    build_body,
    endpoint_url,
    error_message,
    estimate_input_tokens,
    parse_reply,
    request_headers,
    tool_name,
)

SCHEMA = {"type": "object", "properties": {"reasoning": {"type": "string"}, "score": {"type": "boolean"}}}
PNG = "data:image/png;base64,iVBORw0KGgo="
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be strict."},
    {"role": "user", "content": "Is 2+2=4?"},
]


def cfg(**kw: Any) -> JudgeConfig:
    return JudgeConfig(model="m", **kw)


def test_openai_body() -> None:
    body = build_body(cfg(seed=7, max_tokens=99), JudgeRequest(MESSAGES, schema=SCHEMA, schema_name="my verdict!"))
    assert body["messages"] == MESSAGES
    assert body["temperature"] == 0.0 and body["seed"] == 7 and body["max_tokens"] == 99
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"] == {"name": "my_verdict_", "schema": SCHEMA, "strict": True}


def test_openai_without_schema_and_extra_body() -> None:
    body = build_body(cfg(extra_body={"max_completion_tokens": 5}), JudgeRequest(MESSAGES))
    assert "response_format" not in body and "seed" not in body
    assert body["max_completion_tokens"] == 5


def test_azure_style_url_and_key_header() -> None:
    c = cfg(
        base_url="https://x.openai.azure.com/openai/deployments/d/", api_version="2024-06-01", api_key_header="api-key"
    )
    assert endpoint_url(c) == "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-06-01"
    headers = request_headers(c, "secret")
    assert headers["api-key"] == "secret" and "Authorization" not in headers
    assert request_headers(cfg(), "k")["Authorization"] == "Bearer k"
    assert "Authorization" not in request_headers(cfg(), None)


def test_anthropic_body_forced_tool() -> None:
    c = cfg(provider="anthropic")
    body = build_body(c, JudgeRequest(MESSAGES, schema=SCHEMA))
    assert body["system"] == "Be strict."
    assert body["messages"] == [{"role": "user", "content": "Is 2+2=4?"}]
    assert body["max_tokens"] == 1024  # required by the API
    assert body["tools"][0]["input_schema"] == SCHEMA
    assert body["tool_choice"] == {"type": "tool", "name": "verdict"}
    assert "seed" not in body
    headers = request_headers(c, "k")
    assert headers["x-api-key"] == "k" and headers["anthropic-version"] == "2023-06-01"
    assert endpoint_url(c) == "https://api.anthropic.com/v1/messages"


def test_anthropic_content_blocks() -> None:
    content = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "image_url", "image_url": "https://example.com/cat.jpg"},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
    ]
    body = build_body(cfg(provider="anthropic"), JudgeRequest([{"role": "user", "content": content}]))
    blocks = body["messages"][0]["content"]
    assert blocks[0] == {"type": "text", "text": "look"}
    assert blocks[1]["source"] == {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    assert blocks[2]["source"] == {"type": "url", "url": "https://example.com/cat.jpg"}
    assert blocks[3] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="},
    }


def test_anthropic_refuses_audio() -> None:
    audio = [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]
    with pytest.raises(JudgeRequestError, match="input_audio"):
        build_body(cfg(provider="anthropic"), JudgeRequest([{"role": "user", "content": audio}]))


def test_ollama_body_and_images() -> None:
    content = [{"type": "text", "text": "what is it?"}, {"type": "image_url", "image_url": {"url": PNG}}]
    body = build_body(
        cfg(provider="ollama", seed=3, max_tokens=50),
        JudgeRequest([{"role": "user", "content": content}], schema=SCHEMA),
    )
    assert body["stream"] is False and body["format"] == SCHEMA
    assert body["options"] == {"temperature": 0.0, "seed": 3, "num_predict": 50}
    assert body["messages"] == [{"role": "user", "content": "what is it?", "images": ["iVBORw0KGgo="]}]
    assert endpoint_url(cfg(provider="ollama")) == "http://localhost:11434/api/chat"
    with pytest.raises(JudgeRequestError, match="base64"):
        build_body(
            cfg(provider="ollama"),
            JudgeRequest([{"role": "user", "content": [{"type": "image_url", "image_url": "https://x/y.png"}]}]),
        )


def test_openai_passes_multimodal_blocks_through() -> None:
    content = [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]
    body = build_body(cfg(), JudgeRequest([{"role": "user", "content": content}]))
    assert body["messages"][0]["content"] == content


def test_replies() -> None:
    openai = {
        "model": "gpt",
        "choices": [{"message": {"content": '{"score": true}'}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3},
    }
    reply = parse_reply("openai", openai)
    assert (reply.data, reply.input_tokens, reply.output_tokens, reply.model) == ({"score": True}, 10, 3, "gpt")
    anthropic = {
        "model": "claude",
        "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "name": "verdict", "input": {"score": 0.5}}],
        "usage": {"input_tokens": 8, "cache_read_input_tokens": 2, "output_tokens": 4},
    }
    reply = parse_reply("anthropic", anthropic)
    assert reply.data == {"score": 0.5} and reply.text == '{"score":0.5}' and reply.input_tokens == 10
    ollama = {"model": "llama", "message": {"content": "Score: 1"}, "prompt_eval_count": 5, "eval_count": 2}
    reply = parse_reply("ollama", ollama)
    assert reply.data is None and reply.text == "Score: 1" and reply.output_tokens == 2
    with pytest.raises(JudgeRequestError, match="unexpected openai response shape"):
        parse_reply("openai", {"choices": []})


def test_error_messages_of_every_provider() -> None:
    assert error_message({"error": {"message": "bad schema", "type": "invalid_request_error"}}, "") == (
        "invalid_request_error: bad schema"
    )
    assert error_message({"type": "error", "error": {"type": "x", "message": "nope"}}, "") == "x: nope"
    assert error_message({"error": "model not found"}, "") == "model not found"
    assert error_message(None, "<html>502</html>") == "<html>502</html>"


def test_tool_name_and_estimate() -> None:
    assert tool_name("a b/c") == "a_b_c"
    assert tool_name("") == "verdict"
    small = estimate_input_tokens(JudgeRequest([{"role": "user", "content": "x" * 400}]))
    assert 100 <= small <= 110
    with_image = estimate_input_tokens(
        JudgeRequest([{"role": "user", "content": [{"type": "image_url", "image_url": PNG}]}])
    )
    assert with_image >= 800
