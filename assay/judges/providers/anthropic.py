"""``provider: anthropic``: the Messages API.

``POST {base_url}/messages`` with ``x-api-key`` and ``anthropic-version``; system messages go to
``system``; structured output is a forced tool call whose ``input_schema`` is the verdict schema,
and the verdict is the ``tool_use`` block's input. Images and PDFs become ``image`` /
``document`` blocks; audio is refused (the API does not take it). A 529 ("overloaded") is retried
like every 5xx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from assay.exceptions import JudgeRequestError
from assay.judges.base import JudgeRequest
from assay.judges.providers.base import JudgeProvider
from assay.judges.retry import anthropic_resets
from assay.judges.wire import DATA_URL, WireReply, image_url, json_object, text_only, tool_name

if TYPE_CHECKING:
    from assay.judges.batch.api import BatchAPI
    from assay.judges.guard import Secrets

DEFAULT_ANTHROPIC_VERSION = "2023-06-01"
#: Anthropic requires max_tokens; used when the config and the request leave it unset.
ANTHROPIC_DEFAULT_MAX_TOKENS = 1024


class AnthropicProvider(JudgeProvider):
    name = "anthropic"
    default_base_url = "https://api.anthropic.com/v1"
    base_url_env = "ANTHROPIC_BASE_URL"
    key_envs: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)
    key_header = "x-api-key"
    path = "/messages"
    announced_rpm_headers: ClassVar[tuple[str, ...]] = ("anthropic-ratelimit-requests-limit",)
    reset_headers = (anthropic_resets,)
    batch_limits: ClassVar[tuple[int, int] | None] = (100_000, 256_000_000)

    def batcher(self, name: str, api_key: str | None, secrets: Secrets | None = None) -> BatchAPI:
        from assay.judges.batch.api import AnthropicBatches

        return AnthropicBatches(name, self, api_key, secrets)

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = super().headers(api_key)
        headers.setdefault("anthropic-version", self.config.api_version or DEFAULT_ANTHROPIC_VERSION)
        return headers

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        cfg = self.config
        system: list[str] = []
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            role = m.get("role", "user")
            content = m.get("content") or ""
            if role in {"system", "developer"}:
                system.append(text_only(content, "anthropic system message"))
                continue
            blocks = content if isinstance(content, str) else [_block(b) for b in content]
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

    def parse_payload(self, payload: Any) -> WireReply:
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


def _block(block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    kind = block.get("type")
    if kind in {"text", "image", "document"}:
        return dict(block)
    if kind == "image_url":
        url = image_url(block)
        parsed = DATA_URL.match(url)
        if parsed:
            mime = parsed["mime"] or "image/png"
            return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": parsed["data"]}}
        return {"type": "image", "source": {"type": "url", "url": url}}
    if kind == "file":
        file = block.get("file") or {}
        data = file.get("file_data")
        if not data:
            raise JudgeRequestError("anthropic: a file block needs inline file_data (not a file id)")
        parsed = DATA_URL.match(data)
        mime, raw = ("application/pdf", data) if not parsed else (parsed["mime"] or "application/pdf", parsed["data"])
        return {"type": "document", "source": {"type": "base64", "media_type": mime, "data": raw}}
    raise JudgeRequestError(f"anthropic does not accept {kind!r} content blocks")
