"""The contract between judge evaluators (prompt building, verdict parsing) and judge endpoints
(transport, limits, retries, cache, cost).

An evaluator builds a :class:`JudgeRequest` (chat messages plus an optional JSON schema for the
verdict) and awaits ``judge.complete(request)``; the endpoint turns it into the provider's wire
format (OpenAI ``response_format``, Anthropic tool use, Ollama ``format``), enforces the limits,
retries transient failures, consults the cache and accounts tokens and cost. It returns a
:class:`JudgeResponse` or raises a :class:`~assay.exceptions.JudgeError` once retries are exhausted
(or at once for a 4xx other than 429), and :class:`~assay.exceptions.BudgetExceeded` when the run's
budget is spent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(slots=True)
class JudgeRequest:
    """One judge call, provider-neutral."""

    messages: list[dict[str, Any]]
    """Chat messages: ``{"role": "system"|"user"|"assistant", "content": str | list[content blocks]}``.
    Content blocks use the OpenAI shapes (``text``, ``image_url``, ``input_audio``, ``file``)."""
    schema: dict[str, Any] | None = None
    """JSON schema of the verdict object, or None for free text."""
    schema_name: str = "verdict"
    max_tokens: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    """Evaluator-side bookkeeping (evaluator key); never sent to the provider."""
    sample: int = 0
    """Which sample of the same question this is (``samples: k``): never sent; a sample above 0
    has its own judge-cache entry, so k samples are k answers."""


@dataclass(slots=True)
class JudgeUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    cached_calls: int = 0

    def add(self, other: JudgeUsage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd += other.cost_usd
        self.calls += other.calls
        self.cached_calls += other.cached_calls

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 8),
            "calls": self.calls,
            "cached_calls": self.cached_calls,
        }


@dataclass(slots=True)
class JudgeResponse:
    """What the judge answered."""

    text: str
    """The raw text output (for tool-use answers: the tool input as JSON text)."""
    data: dict[str, Any] | None
    """The structured verdict when the provider returned parseable JSON, else None."""
    usage: JudgeUsage
    model: str = ""
    cached: bool = False
    latency_s: float = 0.0


#: In-flight calls assumed for a judge that does not say (:attr:`Judge.capacity`).
DEFAULT_CAPACITY = 16


@runtime_checkable
class Judge(Protocol):
    """One named judge endpoint.

    Besides these members a judge may tell the engine its ``capacity`` (an int: calls in flight
    it can use at most, e.g. :attr:`~assay.judges.endpoint.JudgeEndpoint.capacity`); the engine
    keeps about twice as many traces in flight. A judge that does not is assumed to take
    :data:`DEFAULT_CAPACITY`: read it with :func:`judge_capacity`.
    """

    name: str

    async def complete(self, request: JudgeRequest) -> JudgeResponse: ...

    def estimate(self, request: JudgeRequest) -> JudgeUsage:
        """Estimated tokens and cost of a request, without calling (for --dry-run)."""
        ...


@runtime_checkable
class SizedJudge(Judge, Protocol):
    """A :class:`Judge` that tells the engine how many calls it can keep in flight."""

    @property
    def capacity(self) -> int:
        """Calls in flight this judge can use at most (the engine keeps ~2x as many traces)."""
        ...


def judge_capacity(judge: object) -> int:
    """The judge's :attr:`SizedJudge.capacity`, or :data:`DEFAULT_CAPACITY` when it does not say.

    >>> judge_capacity(object())
    16
    """
    if isinstance(judge, SizedJudge):
        return max(1, int(judge.capacity))
    return DEFAULT_CAPACITY
