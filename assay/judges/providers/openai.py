"""``provider: openai``: chat completions, for OpenAI and every OpenAI-compatible server (vLLM,
LiteLLM, OpenRouter, Azure OpenAI through its deployment URL, ...).

``POST {base_url}/chat/completions`` (``?api-version=`` appended when ``api_version`` is set, as
Azure wants) with ``response_format = {"type": "json_schema"}``; the verdict is JSON in
``choices[0].message.content``. Content blocks pass through as they are (``text``, ``image_url``,
``input_audio``, ``file``). A 429 whose body says ``insufficient_quota`` is an account out of
credit, not a rate limit: the run stops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from assay.judges.base import JudgeRequest
from assay.judges.providers.base import JudgeProvider
from assay.judges.retry import openai_resets
from assay.judges.wire import WireReply, json_object, tool_name

if TYPE_CHECKING:
    from assay.judges.batch.api import BatchAPI
    from assay.judges.guard import Secrets


class OpenAIProvider(JudgeProvider):
    name = "openai"
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    base_url_env = "OPENAI_BASE_URL"
    key_envs: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)
    path = "/chat/completions"
    announced_rpm_headers: ClassVar[tuple[str, ...]] = ("x-ratelimit-limit-requests",)
    reset_headers = (openai_resets,)
    batch_limits: ClassVar[tuple[int, int] | None] = (50_000, 200_000_000)

    def batcher(self, name: str, api_key: str | None, secrets: Secrets | None = None) -> BatchAPI:
        from assay.judges.batch.api import OpenAIBatches

        return OpenAIBatches(name, self, api_key, secrets)

    def url(self) -> str:
        url = self.base_url() + self.path
        if self.config.api_version:
            url += f"?api-version={self.config.api_version}"
        return url

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "messages": [_message(m) for m in request.messages],
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

    def parse_payload(self, payload: Any) -> WireReply:
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

    def embeddings_url(self) -> str:
        # the same root, deployment and api-version as chat completions (Azure's URL too)
        return self.url().replace("/chat/completions", "/embeddings", 1)

    def embeddings_body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.config.model, "input": texts}

    def parse_embeddings(self, payload: Any) -> WireReply:
        rows = sorted(payload["data"], key=lambda d: d.get("index", 0))
        usage = payload.get("usage") or {}
        return WireReply(
            text="",
            data={"embeddings": [[float(x) for x in row["embedding"]] for row in rows]},
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=0,
            model=str(payload.get("model") or ""),
        )

    def is_out_of_quota(self, status: int, body: bytes) -> bool:
        # OpenAI's 429 for an account out of credit is no rate limit: no wait makes it pass
        return status == 429 and b"insufficient_quota" in body


def _message(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": message.get("role", "user"), "content": message.get("content") or ""}
