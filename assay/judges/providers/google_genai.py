"""``provider: google_genai``: Google's Gemini API (``generateContent``).

``POST {base_url}/v1beta/models/{model}:generateContent`` with the key in ``x-goog-api-key``
(from ``GOOGLE_API_KEY``, else ``GEMINI_API_KEY``). System messages become
``systemInstruction``; assistant turns are the ``model`` role; images, audio and PDFs travel as
``inlineData`` (a non-data image URL as ``fileData``). Structured output: ``generationConfig``
with ``responseMimeType: application/json`` and ``responseSchema``, the verdict schema turned
into the OpenAPI subset Gemini takes (``$ref`` inlined, ``["string", "null"]`` as ``nullable``,
keys it does not know dropped, ``propertyOrdering`` kept as written so the reasoning comes before
the score). Usage comes from ``usageMetadata`` (thinking tokens count as output).

Failure policy: a 400 whose body says ``API_KEY_INVALID`` is a wrong key (the run stops, like a
401/403); a 429 ``RESOURCE_EXHAUSTED`` waits for the ``RetryInfo.retryDelay`` of its body when
no header says how long, unless its ``QuotaFailure`` names a per-day quota (out of quota: the run
stops); a prompt or answer blocked by the safety filters is an error result.

>>> from assay.judges.config import JudgeConfig
>>> GoogleGenAIProvider(JudgeConfig(provider="google_genai", model="gemini-2.5-flash")).url()
'https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent'
>>> gemini_schema({"type": "object", "additionalProperties": False,
...     "properties": {"reasoning": {"type": "string"}, "score": {"type": ["boolean", "null"]}}})
... # doctest: +NORMALIZE_WHITESPACE
{'type': 'OBJECT', 'properties': {'reasoning': {'type': 'STRING'},
 'score': {'nullable': True, 'type': 'BOOLEAN'}}, 'propertyOrdering': ['reasoning', 'score']}
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote

import orjson

from assay.exceptions import JudgeRequestError
from assay.judges.base import JudgeRequest
from assay.judges.providers.base import JudgeProvider
from assay.judges.retry import MAX_HINT_S, parse_duration, retry_delay
from assay.judges.wire import DATA_URL, WireReply, image_url, json_object, text_only

DEFAULT_GEMINI_API_VERSION = "v1beta"
_VERSIONED = re.compile(r"/v\d+(?:alpha|beta)?\d*$")
#: Schema keys Gemini's ``responseSchema`` accepts besides type/properties/items/anyOf/enum.
_KEPT_KEYS = (
    "title",
    "description",
    "nullable",
    "minItems",
    "maxItems",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "default",
    "example",
)
_FORMATS = {"date-time", "int32", "int64", "float", "double"}
_TYPES = {"string", "number", "integer", "boolean", "array", "object"}
#: finishReason values that mean the candidate was withheld, not merely cut short.
_BLOCKED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE"}


class GoogleGenAIProvider(JudgeProvider):
    name = "google_genai"
    default_base_url = "https://generativelanguage.googleapis.com"
    base_url_env = "GOOGLE_GEMINI_BASE_URL"
    key_envs: ClassVar[tuple[str, ...]] = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
    key_header = "x-goog-api-key"
    announced_rpm_headers: ClassVar[tuple[str, ...]] = ()
    reset_headers = ()

    def url(self) -> str:
        base = self.base_url()
        if not _VERSIONED.search(base):
            base += f"/{self.config.api_version or DEFAULT_GEMINI_API_VERSION}"
        model = self.config.model.removeprefix("models/")
        return f"{base}/models/{quote(model, safe='.-_')}:generateContent"

    # --- wire format ----------------------------------------------------------------------------

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        cfg = self.config
        system: list[str] = []
        contents: list[dict[str, Any]] = []
        for m in request.messages:
            role = m.get("role", "user")
            content = m.get("content") or ""
            if role in {"system", "developer"}:
                system.append(text_only(content, "google_genai system message"))
                continue
            parts = [{"text": content}] if isinstance(content, str) else [_part(b) for b in content]
            contents.append({"role": "model" if role == "assistant" else "user", "parts": parts})
        config: dict[str, Any] = {"temperature": cfg.temperature}
        if cfg.seed is not None:
            config["seed"] = cfg.seed
        max_tokens = request.max_tokens or cfg.max_tokens
        if max_tokens is not None:
            config["maxOutputTokens"] = max_tokens
        if request.schema is not None:
            config["responseMimeType"] = "application/json"
            config["responseSchema"] = gemini_schema(request.schema)
        body: dict[str, Any] = {"contents": contents, "generationConfig": config}
        if system:
            body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
        return body

    def parse_payload(self, payload: Any) -> WireReply:
        candidates = payload.get("candidates") or []
        if not candidates:
            reason = (payload.get("promptFeedback") or {}).get("blockReason") or "no candidates"
            raise JudgeRequestError(f"google_genai answered no candidate ({reason})")
        candidate = candidates[0]
        parts = (candidate.get("content") or {}).get("parts") or []
        text = "".join(str(p.get("text") or "") for p in parts if not p.get("thought"))
        finish = candidate.get("finishReason")
        if not text and finish in _BLOCKED:
            raise JudgeRequestError(f"google_genai withheld the answer (finishReason {finish})")
        usage = payload.get("usageMetadata") or {}
        output = int(usage.get("candidatesTokenCount") or 0) + int(usage.get("thoughtsTokenCount") or 0)
        return WireReply(
            text=text,
            data=json_object(text),
            input_tokens=int(usage.get("promptTokenCount") or 0),
            output_tokens=output,
            model=str(payload.get("modelVersion") or ""),
        )

    def error_message(self, payload: Any, fallback: str) -> str:
        err = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(err, dict) and err.get("message"):
            kind = err.get("status") or err.get("code")
            return f"{kind}: {err['message']}" if kind else str(err["message"])
        return super().error_message(payload, fallback)

    # --- failure policy -------------------------------------------------------------------------

    def retry_after(self, headers: Mapping[str, str], body: bytes) -> float | None:
        hint = retry_delay(headers, resets=())
        if hint is None:
            hint = _retry_info(body)
        return None if hint is None else min(hint, MAX_HINT_S)

    def is_out_of_quota(self, status: int, body: bytes) -> bool:
        # a per-day quota (the free tier's GenerateRequestsPerDay...) is no rate limit: no wait helps
        return status == 429 and b"QuotaFailure" in body and b"PerDay" in body

    def is_auth_failure(self, status: int, body: bytes) -> bool:
        # Gemini answers a wrong key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID
        return super().is_auth_failure(status, body) or (status == 400 and b"API_KEY_INVALID" in body)


def _retry_info(body: bytes) -> float | None:
    """``error.details[].retryDelay`` (``google.rpc.RetryInfo``, e.g. ``"31s"``) of an error body."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    err = payload.get("error") if isinstance(payload, dict) else None
    details = err.get("details") if isinstance(err, dict) else None
    for detail in details if isinstance(details, list) else []:
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and (seconds := parse_duration(delay)) is not None:
            return seconds
    return None


def _part(block: Any) -> dict[str, Any]:
    if isinstance(block, str):
        return {"text": block}
    kind = block.get("type")
    if kind == "text":
        return {"text": block.get("text") or ""}
    if kind == "image_url":
        url = image_url(block)
        parsed = DATA_URL.match(url)
        if parsed:
            return {"inlineData": {"mimeType": parsed["mime"] or "image/png", "data": parsed["data"]}}
        mime = mimetypes.guess_type(url.split("?", 1)[0])[0] or "image/jpeg"
        return {"fileData": {"mimeType": mime, "fileUri": url}}
    if kind == "input_audio":
        audio = block.get("input_audio") or {}
        if not audio.get("data"):
            raise JudgeRequestError("google_genai: an input_audio block needs base64 data")
        return {"inlineData": {"mimeType": f"audio/{audio.get('format') or 'wav'}", "data": audio["data"]}}
    if kind == "file":
        data = (block.get("file") or {}).get("file_data")
        parsed = DATA_URL.match(data) if isinstance(data, str) else None
        if not parsed:
            raise JudgeRequestError("google_genai: a file block needs inline file_data as a data: URL")
        return {"inlineData": {"mimeType": parsed["mime"] or "application/pdf", "data": parsed["data"]}}
    raise JudgeRequestError(f"google_genai does not accept {kind!r} content blocks")


def gemini_schema(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None, depth: int = 0) -> dict[str, Any]:
    """A JSON schema as Gemini's ``responseSchema`` (an OpenAPI 3.0 subset); see the module doc."""
    root = schema if root is None else root
    if depth > 16:
        return {"type": "STRING"}
    if isinstance(ref := schema.get("$ref"), str):
        target = _resolve_ref(root, ref)
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return gemini_schema(merged, root, depth + 1)
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) < len(kind):
            out["nullable"] = True
        kind = kinds[0] if kinds else None
    if "const" in schema and "enum" not in schema:
        schema = {**schema, "enum": [schema["const"]]}
    if isinstance(kind, str) and kind in _TYPES:
        out["type"] = kind.upper()
    for key in ("anyOf", "oneOf"):
        if isinstance(options := schema.get(key), list) and options:
            branches = [b for b in options if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(branches) < len(options):
                out["nullable"] = True
            if len(branches) == 1 and isinstance(branches[0], dict):
                out.update(gemini_schema(branches[0], root, depth + 1))
            else:
                out["anyOf"] = [gemini_schema(b, root, depth + 1) for b in branches if isinstance(b, dict)]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        out.setdefault("type", "STRING")
        out["format"] = "enum"
        out["enum"] = list(enum)
    elif isinstance(enum, list) and enum:  # Gemini takes string enums only: say it in words instead
        allowed = ", ".join(orjson.dumps(v).decode() for v in enum)
        out["description"] = f"{schema.get('description') or ''} One of: {allowed}.".strip()
    if isinstance(props := schema.get("properties"), dict):
        out.setdefault("type", "OBJECT")
        out["properties"] = {k: gemini_schema(v, root, depth + 1) for k, v in props.items() if isinstance(v, dict)}
        out["propertyOrdering"] = list(out["properties"])
    if isinstance(items := schema.get("items"), dict):
        out.setdefault("type", "ARRAY")
        out["items"] = gemini_schema(items, root, depth + 1)
    for key in _KEPT_KEYS:
        if key in schema and key not in out:
            out[key] = schema[key]
    if schema.get("format") in _FORMATS and "format" not in out:
        out["format"] = schema["format"]
    if "required" in out and "properties" in out:
        out["required"] = [k for k in out["required"] if k in out["properties"]]
    return out


def _resolve_ref(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    if not ref.startswith("#/"):
        raise JudgeRequestError(f"google_genai: only local $refs can be inlined, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        raise JudgeRequestError(f"google_genai: $ref {ref!r} points nowhere")
    return node
