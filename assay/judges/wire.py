"""Wire-format helpers every provider shares, and the provider-neutral entry points.

Each provider's own format lives in its class (``assay/judges/providers/``): the request body of a
provider-neutral :class:`JudgeRequest`, and the provider's reply back to text, structured data and
token usage (:class:`WireReply`). The functions here (:func:`build_body`, :func:`parse_reply`,
:func:`endpoint_url`, :func:`request_headers`) look the provider up by the config's name and ask it.

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
from assay.judges.config import JudgeConfig
from assay.judges.provider_table import load_provider_class

DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*)*,(?P<data>.*)$", re.DOTALL)
TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(slots=True)
class WireReply:
    """What a provider's 200 response carried."""

    text: str
    data: dict[str, Any] | None
    input_tokens: int
    output_tokens: int
    model: str

    def cache_value(self) -> dict[str, Any]:
        """What the judge cache keeps of this answer (real-time and batch alike)."""
        return {
            "text": self.text,
            "data": self.data,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


# One-call forms of the provider methods (the provider class looked up by ``cfg.provider`` in
# :mod:`assay.judges.provider_table`; :func:`assay.judges.providers.provider_for` gives the object).


def endpoint_url(cfg: JudgeConfig) -> str:
    url: str = load_provider_class(cfg.provider)(cfg).url()
    return url


def request_headers(cfg: JudgeConfig, api_key: str | None) -> dict[str, str]:
    """Every header of a request, the key included (never log the result)."""
    headers: dict[str, str] = load_provider_class(cfg.provider)(cfg).headers(api_key)
    return headers


def build_body(cfg: JudgeConfig, request: JudgeRequest) -> dict[str, Any]:
    """The JSON body for ``cfg.provider`` (also the cache key's main ingredient)."""
    body: dict[str, Any] = load_provider_class(cfg.provider)(cfg).build_body(request)
    return body


def parse_reply(provider: str, payload: Any) -> WireReply:
    """Read a 200 response; raise JudgeRequestError when its shape is not the provider's."""
    cls = load_provider_class(provider)
    reply: WireReply = cls(JudgeConfig(provider=provider, model="-")).parse_response(payload)
    return reply


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


# --- shared -----------------------------------------------------------------------------------


def tool_name(name: str) -> str:
    """A schema / tool name every provider accepts (``[A-Za-z0-9_-]{1,64}``)."""
    return TOOL_NAME.sub("_", name)[:64] or "verdict"


def image_url(block: dict[str, Any]) -> str:
    ref = block.get("image_url")
    url = ref.get("url") if isinstance(ref, dict) else ref
    if not isinstance(url, str) or not url:
        raise JudgeRequestError("an image_url block needs a url")
    return url


def text_only(content: Any, where: str) -> str:
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
