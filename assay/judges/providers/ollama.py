"""``provider: ollama``: Ollama's native chat API.

``POST {base_url}/api/chat`` with ``stream: false`` and ``format`` = the verdict schema; images
travel as base64 strings in the message's ``images``; audio and files are refused. No key.
"""

from __future__ import annotations

from typing import Any, ClassVar

from assay.exceptions import JudgeRequestError
from assay.judges.base import JudgeRequest
from assay.judges.providers.base import JudgeProvider
from assay.judges.wire import DATA_URL, WireReply, image_url, json_object


class OllamaProvider(JudgeProvider):
    name = "ollama"
    default_base_url = "http://localhost:11434"
    base_url_env = "OLLAMA_HOST"
    path = "/api/chat"
    announced_rpm_headers: ClassVar[tuple[str, ...]] = ()
    reset_headers = ()

    @classmethod
    def base_url_from_env(cls) -> str | None:
        value = super().base_url_from_env()
        if value and "://" not in value:  # OLLAMA_HOST is often host:port
            value = f"http://{value}"
        return value

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        cfg = self.config
        options: dict[str, Any] = {"temperature": cfg.temperature}
        if cfg.seed is not None:
            options["seed"] = cfg.seed
        max_tokens = request.max_tokens or cfg.max_tokens
        if max_tokens is not None:
            options["num_predict"] = max_tokens
        body: dict[str, Any] = {
            "model": cfg.model,
            "messages": [_message(m) for m in request.messages],
            "stream": False,
            "options": options,
        }
        if request.schema is not None:
            body["format"] = request.schema
        return body

    def parse_payload(self, payload: Any) -> WireReply:
        text = payload["message"].get("content") or ""
        return WireReply(
            text=text,
            data=json_object(text),
            input_tokens=int(payload.get("prompt_eval_count") or 0),
            output_tokens=int(payload.get("eval_count") or 0),
            model=str(payload.get("model") or ""),
        )


def _message(message: dict[str, Any]) -> dict[str, Any]:
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
            parsed = DATA_URL.match(image_url(block))
            if not parsed:
                raise JudgeRequestError("ollama accepts images only as base64 data, not URLs")
            images.append(parsed["data"])
        else:
            raise JudgeRequestError(f"ollama does not accept {kind!r} content blocks")
    out["content"] = "\n".join(texts)
    if images:
        out["images"] = images
    return out
