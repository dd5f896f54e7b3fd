"""The ``batch:`` settings of a judge with ``mode: batch`` (pydantic only: importing it is cheap).

>>> BatchConfig().limits((50_000, 200_000_000))
(50000, 200000000)
>>> BatchConfig(max_requests=10).limits((100_000, 256_000_000))
(10, 256000000)

Which providers can batch, and their own limits, are the provider classes' business
(:attr:`~assay.judges.providers.base.JudgeProvider.batch_limits`, ``batcher``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class BatchConfig(BaseModel):
    """How a batch judge packs, submits and collects (see docs/judges.md, "Batch mode")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_requests: int | None = Field(default=None, gt=0)
    """Requests per batch. Default: the provider's limit (OpenAI 50,000; Anthropic 100,000)."""
    max_bytes: int | None = Field(default=None, gt=0)
    """Bytes of one batch's request file (OpenAI) or body (Anthropic). Default: the provider's
    limit (200 MB; 256 MB)."""
    max_enqueued_tokens: int | None = Field(default=None, gt=0)
    """The provider's enqueued-token quota for this model: the estimated tokens of unfinished
    batches stay under it; more is submitted as batches finish. None: unlimited."""
    poll_interval_s: float = Field(default=30.0, gt=0)
    """Seconds between polls of the open batches (``assay run --wait``)."""
    max_attempts: int = Field(default=3, ge=1)
    """A line is submitted at most this many times in total (the first submission included);
    expired, errored (5xx, rate-limited inside the batch) and cancelled lines are resubmitted."""
    fallback: Literal["realtime", "error"] = "realtime"
    """What a line gets after ``max_attempts``: one real-time call (full price), or an error result."""
    discount: float = Field(default=0.5, ge=0.0, le=1.0)
    """Price factor of batch tokens in the cost accounting (the providers charge 50 %)."""
    completion_window: str = "24h"
    """OpenAI's ``completion_window``."""
    max_wait_h: float | None = Field(default=None, gt=0)
    """Cancel a batch still unfinished this many hours after its creation (its unfinished lines are
    then resubmitted). Azure OpenAI does not expire late jobs: set 24 there. None: the provider's
    own window."""
    base_url: str | None = None
    """API root of the files and batches endpoints. Default: the judge's ``base_url``
    (azure_openai: ``https://NAME.openai.azure.com/openai``)."""
    line_url: str | None = None
    """openai: the ``url`` of each request line. Default: ``/v1/chat/completions``
    (azure_openai: ``/chat/completions``)."""
    ledger: str | None = None
    """Set by the run (the path of its ledger); not a setting."""

    def limits(self, provider_limits: tuple[int, int]) -> tuple[int, int]:
        """(requests, bytes) per batch: the configured values or the provider's own
        (``provider_limits``, its class's ``batch_limits``)."""
        requests, size = provider_limits
        return self.max_requests or requests, self.max_bytes or size
