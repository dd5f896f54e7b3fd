"""Wire formats: a provider-neutral :class:`JudgeRequest` to each provider's HTTP body, and the
provider's reply back to text, structured data and token usage.

* ``openai``: ``POST {base_url}/chat/completions`` with ``response_format = {"type": "json_schema"}``;
  the verdict is JSON in ``choices[0].message.content``. Content blocks pass through as they are
  (``text``, ``image_url``, ``input_audio``, ``file``).
* ``anthropic``: ``POST {base_url}/messages``; system messages go to ``system``; structured output
  is a forced tool call whose ``input_schema`` is the verdict schema, and the verdict is the
  ``tool_use`` block's input. Images and PDFs become ``image`` / ``document`` blocks; audio is
  refused (the API does not take it).
* ``ollama``: ``POST {base_url}/api/chat`` with ``stream: false`` and ``format`` = the schema;
  images travel as base64 strings in the message's ``images``; audio and files are refused.

A request the provider cannot take raises :class:`~assay.exceptions.JudgeRequestError` before
anything is sent.

>>> from assay.judges.config import JudgeConfig
>>> req = JudgeRequest([{"role": "system", "content": "Be strict."}, {"role": "user", "content": "2+2=4?"}],
...                    schema={"type": "object", "properties": {"score": {"type": "boolean"}}})
>>> body = build_body(JudgeConfig(provider="anthropic", model="m"), req)
>>> body["system"], body["tool_choice"]
('Be strict.', {'type': 'tool', 'name': 'verdict'})
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from assay.exceptions import JudgeRequestError
from assay.judges.base import JudgeRequest
from assay.judges.config import (
    ANTHROPIC_DEFAULT_MAX_TOKENS,
    DEFAULT_ANTHROPIC_VERSION,
    JudgeConfig,
)

_PATHS = {"openai": "/chat/completions", "anthropic": "/messages", "ollama": "/api/chat"}
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*)*,(?P<data>.*)$", re.DOTALL)
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(slots=True)
class WireReply:
    """What a provider's 200 response carried."""

    text: str
    data: dict[str, Any] | None
    input_tokens: int
    output_tokens: int
    model: str


def endpoint_url(cfg: JudgeConfig) -> str:
    url = cfg.resolved_base_url() + _PATHS[cfg.provider]
    if cfg.provider == "openai" and cfg.api_version:
        url += f"?api-version={cfg.api_version}"
    return url


def request_headers(cfg: JudgeConfig, api_key: str | None) -> dict[str, str]:
    """Every header of a request, the key included (never log the result)."""
    headers = {"content-type": "application/json", "accept": "application/json"}
    if cfg.provider == "anthropic":
        headers["anthropic-version"] = cfg.api_version or DEFAULT_ANTHROPIC_VERSION
    if api_key:
        name = cfg.api_key_header or ("x-api-key" if cfg.provider == "anthropic" else "Authorization")
        headers[name] = f"Bearer {api_key}" if name.lower() == "authorization" else api_key
    headers.update(cfg.extra_headers)
    return headers


def build_body(cfg: JudgeConfig, request: JudgeRequest) -> dict[str, Any]:
    """The JSON body for ``cfg.provider`` (also the cache key's main ingredient)."""
    if cfg.provider == "anthropic":
        body = _anthropic_body(cfg, request)
    elif cfg.provider == "ollama":
        body = _ollama_body(cfg, request)
    else:
        body = _openai_body(cfg, request)
    for key, value in cfg.extra_body.items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return body


def parse_reply(provider: str, payload: Any) -> WireReply:
    """Read a 200 response; raise JudgeRequestError when its shape is not the provider's."""
    try:
        if provider == "anthropic":
            return _anthropic_reply(payload)
        if provider == "ollama":
            return _ollama_reply(payload)
        return _openai_reply(payload)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        snippet = orjson.dumps(payload, default=str)[:300].decode(errors="replace")
        raise JudgeRequestError(f"unexpected {provider} response shape ({exc!r}): {snippet}") from exc


def error_message(payload: Any, fallback: str) -> str:
    """The provider's own error message from an error body (all three shapes), else the raw text."""
    if isinstance(payload, dict):
        err = payload.get("error")
        if isinstance(err, dict) and err.get("message"):
            kind = err.get("type") or err.get("code")
            return f"{kind}: {err['message']}" if kind else str(err["message"])
        if isinstance(err, str) and err:
            return err
        if payload.get("message"):
            return str(payload["message"])
    return fallback.strip()[:500] or "(empty body)"


def json_object(text: str) -> dict[str, Any] | None:
    """The text as a JSON object when it is exactly one, else None (salvage is the verdict's job)."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


# --- openai -----------------------------------------------------------------------------------


def _openai_body(cfg: JudgeConfig, request: JudgeRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": cfg.model,
        "messages": [_openai_message(m) for m in request.messages],
        "temperature": cfg.temperature,
    }
    if cfg.seed is not None:
        body["seed"] = cfg.seed
    max_tokens = request.max_tokens or cfg.max_tokens
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if request.schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": tool_name(request.schema_name),
                "schema": request.schema,
                "strict": cfg.strict_schema,
            },
        }
    return body


def _openai_message(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": message.get("role", "user"), "content": message.get("content") or ""}


def _openai_reply(payload: Any) -> WireReply:
    message = payload["choices"][0]["message"]
    text = message.get("content") or ""
    if not text and message.get("tool_calls"):  # a server that answered with a function call
        text = message["tool_calls"][0]["function"]["arguments"] or ""
    if not text and message.get("refusal"):
        text = str(message["refusal"])
    usage = payload.get("usage") or {}
    return WireReply(
        text=text,
        data=json_object(text),
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        model=str(payload.get("model") or ""),
    )


# --- anthropic --------------------------------------------------------------------------------


def _anthropic_body(cfg: JudgeConfig, request: JudgeRequest) -> dict[str, Any]:
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for m in request.messages:
        role = m.get("role", "user")
        content = m.get("content") or ""
        if role in {"system", "developer"}:
            system.append(_text_only(content, "anthropic system message"))
            continue
        blocks = content if isinstance(content, str) else [_anthropic_block(b) for b in content]
        messages.append({"role": "assistant" if role == "assistant" else "user", "content": blocks})
    body: dict[str, Any] = {
        "model": cfg.model,
        "max_tokens": request.max_tokens or cfg.max_tokens or ANTHROPIC_DEFAULT_MAX_TOKENS,
        "messages": messages,
        "temperature": cfg.temperature,
    }
    if system:
        body["system"] = "\n\n".join(system)
    if request.schema is not None:
        name = tool_name(request.schema_name)
        body["tools"] = [{"name": name, "description": "Record your verdict.", "input_schema": request.schema}]
        body["tool_choice"] = {"type": "tool", "name": name}
    return body


def _anthropic_block(block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    kind = block.get("type")
    if kind in {"text", "image", "document"}:
        return dict(block)
    if kind == "image_url":
        url = _image_url(block)
        parsed = _DATA_URL.match(url)
        if parsed:
            mime = parsed["mime"] or "image/png"
            return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": parsed["data"]}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    if kind == "file":
        file = block.get("file") or {}
        data = file.get("file_data")
        if not data:
            raise JudgeRequestError("anthropic: a file block needs inline file_data (not a file id)")
        parsed = _DATA_URL.match(data)
        mime, raw = ("application/pdf", data) if not parsed else (parsed["mime"] or "application/pdf", parsed["data"])
        return {"type": "document", "source": {"type": "base64", "media_type": mime, "data": raw}}
    raise JudgeRequestError(f"anthropic does not accept {kind!r} content blocks")


def _anthropic_reply(payload: Any) -> WireReply:
    texts: list[str] = []
    data: dict[str, Any] | None = None
    for block in payload["content"]:
        if block.get("type") == "tool_use" and data is None and isinstance(block.get("input"), dict):
            data = block["input"]
        elif block.get("type") == "text":
            texts.append(block.get("text") or "")
    usage = payload.get("usage") or {}
    input_tokens = sum(
        int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    text = orjson.dumps(data).decode() if data is not None else "".join(texts)
    return WireReply(
        text=text,
        data=data if data is not None else json_object(text),
        input_tokens=input_tokens,
        output_tokens=int(usage.get("output_tokens") or 0),
        model=str(payload.get("model") or ""),
    )


# --- ollama -----------------------------------------------------------------------------------


def _ollama_body(cfg: JudgeConfig, request: JudgeRequest) -> dict[str, Any]:
    options: dict[str, Any] = {"temperature": cfg.temperature}
    if cfg.seed is not None:
        options["seed"] = cfg.seed
    max_tokens = request.max_tokens or cfg.max_tokens
    if max_tokens is not None:
        options["num_predict"] = max_tokens
    body: dict[str, Any] = {
        "model": cfg.model,
        "messages": [_ollama_message(m) for m in request.messages],
        "stream": False,
        "options": options,
    }
    if request.schema is not None:
        body["format"] = request.schema
    return body


def _ollama_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content") or ""
    out: dict[str, Any] = {"role": message.get("role", "user")}
    if isinstance(content, str):
        out["content"] = content
        return out
    texts: list[str] = []
    images: list[str] = []
    for block in content:
        kind = "text" if isinstance(block, str) else block.get("type")
        if kind == "text":
            texts.append(block if isinstance(block, str) else block.get("text") or "")
        elif kind == "image_url":
            parsed = _DATA_URL.match(_image_url(block))
            if not parsed:
                raise JudgeRequestError("ollama accepts images only as base64 data, not URLs")
            images.append(parsed["data"])
        else:
            raise JudgeRequestError(f"ollama does not accept {kind!r} content blocks")
    out["content"] = "\n".join(texts)
    if images:
        out["images"] = images
    return out


def _ollama_reply(payload: Any) -> WireReply:
    text = payload["message"].get("content") or ""
    return WireReply(
        text=text,
        data=json_object(text),
        input_tokens=int(payload.get("prompt_eval_count") or 0),
        output_tokens=int(payload.get("eval_count") or 0),
        model=str(payload.get("model") or ""),
    )


# --- shared -----------------------------------------------------------------------------------


def tool_name(name: str) -> str:
    """A schema / tool name every provider accepts (``[A-Za-z0-9_-]{1,64}``)."""
    return _TOOL_NAME.sub("_", name)[:64] or "verdict"


def _image_url(block: dict[str, Any]) -> str:
    ref = block.get("image_url")
    url = ref.get("url") if isinstance(ref, dict) else ref
    if not isinstance(url, str) or not url:
        raise JudgeRequestError("an image_url block needs a url")
    return url


def _text_only(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif block.get("type") == "text":
            parts.append(block.get("text") or "")
        else:
            raise JudgeRequestError(f"{where}: only text is allowed, got {block.get('type')!r}")
    return "\n".join(parts)


def estimate_input_tokens(request: JudgeRequest) -> int:
    """About four characters per token, plus per-message overhead; images count ~800 tokens."""
    chars = 0
    media = 0
    for m in request.messages:
        content = m.get("content") or ""
        if isinstance(content, str):
            chars += len(content)
            continue
        for block in content:
            if isinstance(block, str):
                chars += len(block)
            elif block.get("type") == "text":
                chars += len(block.get("text") or "")
            else:
                media += 1
    if request.schema is not None:
        chars += len(orjson.dumps(request.schema))
    return chars // 4 + 4 * len(request.messages) + 800 * media + 3
