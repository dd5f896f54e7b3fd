"""The configuration of one judge endpoint (one entry under ``judges:`` in the run file).

>>> cfg = JudgeConfig(provider="openai", model="gpt-4o-mini", rpm=500)
>>> cfg.resolved_base_url()
'https://api.openai.com/v1'
>>> cfg.requests_per_second()
8.333333333333334
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assay.exceptions import ConfigError
from assay.judges.batch.config import BatchConfig
from assay.judges.provider_table import load_provider_class, provider_names
from assay.urls import redis_url


class JudgeConfig(BaseModel):
    """One judge endpoint: where it is, how to authenticate, and how hard it may be driven."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = "openai"
    """Wire format: ``openai`` (chat completions; also vLLM, LiteLLM and other OpenAI-compatible
    servers), ``azure_openai`` (Azure OpenAI deployments), ``anthropic`` (messages API),
    ``google_genai`` (Gemini ``generateContent``), ``ollama`` (native ``/api/chat``), or a
    provider a package registers under the ``assay.judge_providers`` entry point."""
    model: str = Field(min_length=1)
    """Model name sent to the provider (for Azure: the deployment's model name)."""
    base_url: str | None = None
    """API root. Defaults: ``https://api.openai.com/v1``, ``https://api.anthropic.com/v1``,
    ``https://generativelanguage.googleapis.com``, ``http://localhost:11434``; azure_openai:
    ``https://NAME.openai.azure.com`` (default from ``AZURE_OPENAI_ENDPOINT``). The provider's
    path (``/chat/completions``, ``/messages``, ``/api/chat``, ...) is appended."""
    deployment: str | None = None
    """azure_openai: the deployment name in the URL (default: ``model``)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (default ``OPENAI_API_KEY``,
    ``AZURE_OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GOOGLE_API_KEY`` or else ``GEMINI_API_KEY``;
    none for ollama). The key is read from the environment when the endpoint
    opens, never logged and redacted from error messages. When this field is set explicitly and the
    variable is missing, opening the endpoint fails; a missing default variable means no key."""
    api_key_header: str | None = None
    """Header carrying the key. Default: ``Authorization: Bearer KEY`` (openai, ollama),
    ``x-api-key: KEY`` (anthropic), ``api-key: KEY`` (azure_openai), ``x-goog-api-key: KEY``
    (google_genai). Any name but ``Authorization`` sends the bare key."""
    api_version: str | None = None
    """openai, azure_openai: the ``api-version`` query parameter (azure_openai default
    ``2024-10-21``). anthropic: the ``anthropic-version`` header (default ``2023-06-01``).
    google_genai: the API version in the path (default ``v1beta``). Ignored by ollama."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 by default so verdicts are as repeatable as the model allows."""
    seed: int | None = None
    """Sampling seed (openai and ollama; anthropic has none). Part of the cache key either way."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Cap on output tokens (a request's own ``max_tokens`` wins). Anthropic requires one: 1024
    when unset."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds one HTTP attempt may take (connect to last byte); a hung request ends here and is
    retried."""
    max_retries: int = Field(default=6, ge=0)
    """Retries after the first attempt, on 429, 5xx, timeouts and connection errors (never on
    other 4xx). When they are exhausted the call fails with a JudgeError."""
    hedge: bool = True
    """Send an attempt a second time when it is still unanswered 1.5x past the recent p99 latency
    (a hung request), at most ~5 % of sends; the first answer wins. The other copy may be billed by
    the provider: the summary counts them (``hedges``). ``false``: a hung attempt waits out
    ``timeout`` and is retried."""
    max_concurrency: int | None = Field(default=None, gt=0)
    """A hard cap on requests in flight. Unset (the default): the cap follows Little's law, the
    rate being sent × the measured tail latency × 1.5, between 4 and 512, so setting only ``rpm``
    is enough to reach it whatever the model's latency. The connection pool is sized to match."""
    max_response_bytes: int = Field(default=1024 * 1024, gt=0)
    """Largest reply read from the provider (bytes, read streaming); a larger one is an error
    result, so a runaway or hostile server cannot blow up memory."""
    shared_limit: str | None = None
    """``redis://host:port/db``: share this judge's ``rpm``/``tpm`` budget with every process and
    machine that names the same Redis and judge (GCRA in a Lua script, see docs/judges.md). Unset:
    each of N shards gets 1/N of the limits. Needs ``pip install 'assay[redis]'``."""
    rpm: float | None = Field(default=None, gt=0)
    """Requests per minute the client may send (paced evenly, no bursts). On 429 the client lowers
    its own rate below this and climbs back when it stays quiet (see docs/judges.md). None: no
    request-rate limit until the server answers 429."""
    tpm: float | None = Field(default=None, gt=0)
    """Tokens (input + expected output) per minute. Requests are estimated before sending (about
    4 characters per token) and the estimate is corrected from the usage the provider reports."""
    announced_limits: bool = True
    """Pace below the request limit the provider announces in its answers
    (``x-ratelimit-limit-requests``, ``anthropic-ratelimit-requests-limit``, per minute) when
    ``rpm`` is unset or higher: a run that leaves ``rpm`` out starts at the provider's limit after
    the first answer instead of searching for it."""
    limit_share: float = Field(default=1.0, gt=0.0, le=1.0)
    """This process's share of an announced limit; ``--shard``/``--workers`` set it to 1/N (like
    ``rpm``), so there is no need to set it by hand."""
    adaptive: bool = True
    """Lower the request rate on 429 and raise it again after quiet periods (AIMD). Off: only the
    shared pause after a 429 is applied."""
    input_price_per_mtok: float = Field(default=0.0, ge=0.0)
    """US dollars per million input tokens (for cost accounting and the run budget)."""
    output_price_per_mtok: float = Field(default=0.0, ge=0.0)
    """US dollars per million output tokens."""
    extra_headers: dict[str, str] = Field(default_factory=dict)
    """Headers added to every request (e.g. an OpenRouter ``HTTP-Referer``, a proxy tenant)."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Fields merged into every request body (e.g. ``{"max_completion_tokens": 512}`` or a vLLM
    ``guided_decoding_backend``). Part of the cache key."""
    strict_schema: bool = True
    """openai: send ``strict: true`` with the JSON schema (structured outputs). Turn off for servers
    that reject strict schemas."""
    mode: Literal["realtime", "batch"] = "realtime"
    """``batch``: answer through the provider's batch API at its batch price (openai, azure_openai,
    anthropic):
    ``assay run`` submits and exits 75 until every answer is in, see docs/judges.md "Batch mode"."""
    batch: BatchConfig = Field(default_factory=BatchConfig)
    """Settings of ``mode: batch`` (packing, polling, attempts, fallback, discount)."""

    @model_validator(mode="after")
    def _batch_provider(self) -> JudgeConfig:
        if self.mode == "batch" and not _can_batch(self.provider):
            able = [name for name in provider_names() if _can_batch(name)]
            raise ValueError(f"mode: batch needs provider {', '.join(able)}, not {self.provider}")
        return self

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, v: str) -> str:
        if v not in provider_names():
            raise ValueError(f"unknown provider {v!r}; available: {', '.join(provider_names())}")
        return v

    @field_validator("shared_limit")
    @classmethod
    def _redis_url(cls, v: str | None) -> str | None:
        return redis_url(v)

    @field_validator("base_url")
    @classmethod
    def _strip_slash(cls, v: str | None) -> str | None:
        return v.rstrip("/") if v else v

    @field_validator("extra_headers")
    @classmethod
    def _no_auth_in_headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if name.lower() in {"authorization", "x-api-key", "api-key", "x-goog-api-key"}:
                raise ValueError(f"put the key in an environment variable named by api_key_env, not {name!r}")
        return v

    def resolved_base_url(self) -> str:
        """``base_url``, else the provider's default API root."""
        url: str = load_provider_class(self.provider).base_url_for(self)
        return url

    def resolved_key_env(self) -> str | None:
        """The environment variable the key is read from (None: no key)."""
        env: str | None = load_provider_class(self.provider).key_env_for(self)
        return env

    def requests_per_second(self) -> float | None:
        return None if self.rpm is None else self.rpm / 60.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_price_per_mtok + output_tokens * self.output_price_per_mtok) / 1e6


def _can_batch(provider: str) -> bool:
    """Whether the provider class says it has a batch API (its ``batch_limits``)."""
    try:
        return load_provider_class(provider).batch_limits is not None
    except ConfigError:
        return False


def parse_judge_config(name: str, raw: dict[str, Any] | JudgeConfig) -> JudgeConfig:
    """Validate one ``judges.NAME`` entry; the ConfigError names the judge and the key."""
    if isinstance(raw, JudgeConfig):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(f"judges.{name}: expected a mapping, got {type(raw).__name__}")
    try:
        return JudgeConfig(**raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(config)"
            lines.append(f"judges.{name}.{loc}: {err['msg']}")
        # `from None`: pydantic's own message echoes the input, which may hold a secret
        raise ConfigError("\n".join(lines)) from None
