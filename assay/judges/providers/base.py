"""What a judge provider is: the one place that knows a provider's wire format, its auth, the
rate-limit headers it sends and which of its failures are worth retrying.

:class:`~assay.judges.endpoint.JudgeEndpoint` is provider-neutral (limits, retries, cache, budget,
breaker, session); it asks its provider for the URL, the headers, the body of a
:class:`~assay.judges.base.JudgeRequest`, how to read a 200 answer and how to classify a failure.
Batch mode builds its request lines with :meth:`JudgeProvider.build_body` and reads each output
line with :meth:`JudgeProvider.parse_response`, so a batched answer is exactly a real-time one.

A new provider is one module with a subclass (set the class attributes, implement
:meth:`~JudgeProvider.request_body` and :meth:`~JudgeProvider.parse_payload`, override a policy
method where the provider differs) and one line in :data:`assay.judges.providers.BUILTIN_PROVIDERS`
(or an ``assay.judge_providers`` entry point for a third-party package).

>>> from assay.judges.config import JudgeConfig
>>> from assay.judges.providers import get_provider_class
>>> p = get_provider_class("anthropic")(JudgeConfig(provider="anthropic", model="m"))
>>> p.url(), p.should_retry(529, b""), p.is_auth_failure(403, b"")
('https://api.anthropic.com/v1/messages', True, True)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from assay.exceptions import ConfigError, JudgeRequestError
from assay.judges.base import JudgeRequest
from assay.judges.config import JudgeConfig
from assay.judges.retry import (
    ANNOUNCED_RPM_HEADERS,
    DEFAULT_RESETS,
    ResetHint,
    announced_rpm,
    is_retryable_status,
    retry_delay,
)
from assay.judges.wire import WireReply, error_message

if TYPE_CHECKING:
    from assay.judges.batch.api import BatchAPI
    from assay.judges.guard import Secrets


class JudgeProvider:
    """One provider's wire format, auth and retry/auth policy, for one judge config."""

    name: ClassVar[str] = ""
    """The ``provider:`` value of the run file."""
    default_base_url: ClassVar[str | None] = None
    """API root when ``base_url`` is unset (None: the config must give one)."""
    base_url_env: ClassVar[str | None] = None
    """Environment variable the ``model: "provider:name"`` shorthand reads the API root from."""
    key_envs: ClassVar[tuple[str, ...]] = ()
    """Environment variables the key is read from when ``api_key_env`` is unset (first one set)."""
    key_header: ClassVar[str] = "Authorization"
    """Header carrying the key (``Authorization`` sends ``Bearer KEY``, any other the bare key)."""
    path: ClassVar[str] = ""
    """Appended to the base URL (see :meth:`url`)."""
    announced_rpm_headers: ClassVar[tuple[str, ...]] = ANNOUNCED_RPM_HEADERS
    """Headers in which the provider announces its request limit per minute."""
    reset_headers: ClassVar[tuple[ResetHint, ...]] = DEFAULT_RESETS
    """Readers of the provider's rate-limit reset headers (after ``retry-after-ms`` / ``Retry-After``)."""
    batch_limits: ClassVar[tuple[int, int] | None] = None
    """The provider's own limits per batch (requests, bytes of the request file / body); None: the
    provider has no batch API (``mode: batch`` is refused). A provider that sets it implements
    :meth:`batcher`."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.config.model!r})"

    # --- where, and who -------------------------------------------------------------------------

    @classmethod
    def base_url_for(cls, config: JudgeConfig) -> str:
        """``base_url`` when set, else the provider's default (ConfigError when it has none)."""
        if config.base_url:
            return config.base_url
        if cls.default_base_url is None:
            raise ConfigError(f"judge provider {cls.name!r} needs base_url (it has no default API root)")
        return cls.default_base_url

    @classmethod
    def key_env_for(cls, config: JudgeConfig) -> str | None:
        """The environment variable the key comes from: ``api_key_env``, else the first of
        :attr:`key_envs` that is set, else the first of them (None: the provider takes no key)."""
        if config.api_key_env is not None:
            return config.api_key_env
        for env in cls.key_envs:
            if os.environ.get(env):
                return env
        return cls.key_envs[0] if cls.key_envs else None

    @classmethod
    def base_url_from_env(cls) -> str | None:
        """The API root in :attr:`base_url_env` (for the ``model`` shorthand), if set."""
        value = os.environ.get(cls.base_url_env, "").strip() if cls.base_url_env else ""
        return value.rstrip("/") or None

    def base_url(self) -> str:
        return self.base_url_for(self.config)

    def url(self) -> str:
        """Where a judge call is POSTed."""
        return self.base_url() + self.path

    def auth_headers(self, api_key: str) -> dict[str, str]:
        name = self.config.api_key_header or self.key_header
        return {name: f"Bearer {api_key}" if name.lower() == "authorization" else api_key}

    def headers(self, api_key: str | None) -> dict[str, str]:
        """Every header of a request, the key included (never log the result)."""
        headers = {"content-type": "application/json", "accept": "application/json"}
        if api_key:
            headers.update(self.auth_headers(api_key))
        headers.update(self.config.extra_headers)
        return headers

    # --- wire format ----------------------------------------------------------------------------

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The provider's JSON body for ``request`` (before ``extra_body``); raise
        JudgeRequestError for content the provider cannot take."""
        raise NotImplementedError

    def build_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The body sent for ``request``: :meth:`request_body` with ``extra_body`` merged in (also
        the cache key's main ingredient, and the ``body`` of a batch line)."""
        body = self.request_body(request)
        for key, value in self.config.extra_body.items():
            if isinstance(value, dict) and isinstance(body.get(key), dict):
                body[key] = {**body[key], **value}
            else:
                body[key] = value
        return body

    # --- embeddings (``embedding_similarity`` with a hosted model) -------------------------------

    def embeddings_url(self) -> str:
        """Where an embeddings request is POSTed (ConfigError: the provider has none in assay)."""
        raise ConfigError(
            f"judge provider {self.name!r} has no embeddings API in assay (openai and azure_openai have; "
            "or give embedding_similarity a local model or params.embed_fn)"
        )

    def embeddings_body(self, texts: list[str]) -> dict[str, Any]:
        """The body that embeds ``texts`` in one request."""
        raise NotImplementedError

    def parse_embeddings(self, payload: Any) -> WireReply:
        """An embeddings answer as a reply whose ``data["embeddings"]`` lists the vectors in order."""
        raise NotImplementedError

    def parse_embeddings_response(self, payload: Any) -> WireReply:
        """:meth:`parse_embeddings`; JudgeRequestError when the answer's shape is not the provider's."""
        try:
            return self.parse_embeddings(payload)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            snippet = orjson.dumps(payload, default=str)[:300].decode(errors="replace")
            raise JudgeRequestError(f"unexpected {self.name} embeddings response shape ({exc!r}): {snippet}") from exc

    def parse_payload(self, payload: Any) -> WireReply:
        """Read a 200 answer's JSON (may raise KeyError/IndexError/TypeError on a foreign shape)."""
        raise NotImplementedError

    def parse_response(self, payload: Any) -> WireReply:
        """Read a 200 answer's JSON; JudgeRequestError when its shape is not the provider's."""
        try:
            return self.parse_payload(payload)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            snippet = orjson.dumps(payload, default=str)[:300].decode(errors="replace")
            raise JudgeRequestError(f"unexpected {self.name} response shape ({exc!r}): {snippet}") from exc

    def error_message(self, payload: Any, fallback: str) -> str:
        """The provider's own message from an error body (``fallback``: the raw text)."""
        return error_message(payload, fallback)

    # --- limits and retry policy ----------------------------------------------------------------

    def announced_rpm(self, headers: Mapping[str, str]) -> float | None:
        """The request limit per minute an answer announces (None: not announced)."""
        return announced_rpm(headers, self.announced_rpm_headers)

    def retry_after(self, headers: Mapping[str, str], body: bytes) -> float | None:
        """Seconds a refused (429) answer asks us to wait, from its headers (or body)."""
        return retry_delay(headers, resets=self.reset_headers)

    def should_retry(self, status: int, body: bytes) -> bool:
        """Whether a failed answer may succeed when sent again: 408, 429 and every 5xx."""
        return is_retryable_status(status) and not self.is_out_of_quota(status, body)

    def is_rate_limited(self, status: int, body: bytes) -> bool:
        """A refusal for pacing (waits and retries, and slows the endpoint down)."""
        return status == 429 and not self.is_out_of_quota(status, body)

    def is_auth_failure(self, status: int, body: bytes) -> bool:
        """The key is wrong or lacks access: every later call fails too, so the run stops."""
        return status in (401, 403)

    def is_out_of_quota(self, status: int, body: bytes) -> bool:
        """The account has no credit left (no wait makes it pass): the run stops."""
        return False

    # --- batch mode -------------------------------------------------------------------------------

    def batcher(self, name: str, api_key: str | None, secrets: Secrets | None = None) -> BatchAPI:
        """The client of the provider's batch API for judge ``name`` (a
        :class:`~assay.judges.batch.api.BatchAPI` subclass; use it with ``async with``)."""
        raise ConfigError(f"judge {name!r}: provider {self.name} has no batch API (mode: batch)")
