"""What every judge-based evaluator shares: the ``judge`` parameter, judge resolution at first
use, usage accounting per result, dry-run request building and the error policy.

Error policy (the same for every judge evaluator):

* a judge call that failed after its retries (:class:`~assay.exceptions.JudgeError`) or an answer
  no verdict could be salvaged from (:class:`~assay.exceptions.VerdictParseError`, raw output kept
  in ``metadata["raw_output"]``) becomes an error Result — never a score;
* a trace that lacks what the prompt needs (a missing variable) becomes an error Result naming it;
* :class:`~assay.exceptions.BudgetExceeded` and configuration errors (an unknown judge name)
  propagate: they stop the run, they are not per-record outcomes.
"""

from __future__ import annotations

import inspect
import os
import re
from abc import abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import field_validator

from assay.evaluators.base import AsyncEvaluator, EvaluatorParams
from assay.exceptions import ConfigError, EvaluatorError, VerdictParseError
from assay.judges.base import Judge, JudgeRequest, JudgeResponse, JudgeUsage
from assay.records import Result
from assay.traces.model import Trace


class JudgeParams(EvaluatorParams):
    """Parameters every judge evaluator accepts."""

    judge: Any = None
    """The judge: a name from the run file's ``judges:`` section, an inline endpoint dict
    (``{provider, model, base_url, …}``), or (library use) an object implementing the Judge
    protocol. None: the run's only judge (an error when the run file declares several)."""
    max_tokens: int | None = None
    """Cap on the judge's output tokens per call (None: the endpoint's setting)."""
    model: str | None = None
    """Shorthand for an ad-hoc judge (openevals style): ``"openai:gpt-4.1-mini"``,
    ``"anthropic:claude-sonnet-4-5"`` or ``"ollama:llama3.1"``: the provider's base URL
    (``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` / ``OLLAMA_HOST`` when set, else its default) and
    key variable (``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``). Used when ``judge`` is not set."""

    @field_validator("model")
    @classmethod
    def _model_shorthand(cls, v: str | None) -> str | None:
        if v is not None:
            model_shorthand(v)
        return v

    @field_validator("judge")
    @classmethod
    def _judge_reference(cls, v: Any) -> Any:
        """An inline config must be a valid endpoint; a name must exist in the active pool."""
        if isinstance(v, dict):
            from assay.judges.config import parse_judge_config

            parse_judge_config("(inline)", v)
        elif isinstance(v, str):
            from assay.judges.pool import current_pool

            pool = current_pool()
            if pool is not None:
                pool.get(v)  # ConfigError naming the known judges
        return v


JP = TypeVar("JP", bound=JudgeParams)


def schema_name(key: str) -> str:
    """A provider-safe schema name (OpenAI allows ``[A-Za-z0-9_-]{1,64}``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", key)[:64] or "verdict"


PROVIDERS = ("openai", "anthropic", "ollama")


def model_shorthand(text: str) -> dict[str, Any]:
    """``"openai:gpt-4.1-mini"`` → the inline judge config it stands for.

    >>> model_shorthand("anthropic:claude-sonnet-4-5")
    {'provider': 'anthropic', 'model': 'claude-sonnet-4-5'}
    """
    provider, sep, model = text.partition(":")
    if not sep or provider not in PROVIDERS or not model:
        raise ConfigError(f"model: expected PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)}, got {text!r}")
    return {"provider": provider, "model": model}


#: The variables the providers' own SDKs read for their API root; the ``model`` shorthand honours
#: them, so ``OPENAI_BASE_URL`` pointed at a proxy or a stand-in server works as with openevals.
BASE_URL_ENVS = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL", "ollama": "OLLAMA_HOST"}


def shorthand_judge(text: str) -> dict[str, Any]:
    """The inline judge config of a ``model`` shorthand, with the base URL from the provider's
    environment variable (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``OLLAMA_HOST``) when set."""
    config = model_shorthand(text)
    base_url = os.environ.get(BASE_URL_ENVS[config["provider"]], "").strip()
    if base_url:
        if config["provider"] == "ollama" and "://" not in base_url:
            base_url = f"http://{base_url}"
        config["base_url"] = base_url.rstrip("/")
    return config


def find_judge(spec: Any, evaluator: str, model: str | None = None) -> Judge:
    """Resolve a ``judge`` parameter: a Judge object as is; a name or an inline config through
    :func:`assay.judges.resolve_judge`; None → the ``model`` shorthand when given, else the
    active pool's only judge."""
    if isinstance(spec, Judge):
        return spec
    from assay.judges import current_pool, resolve_judge  # lazy: keeps aiohttp out of imports

    if spec is None and model is not None:
        spec = shorthand_judge(model)
    if spec is None:
        pool = current_pool()
        names = pool.names if pool is not None else []
        if len(names) != 1:
            where = f"the run declares {len(names)} judges" if pool is not None else "no judge pool is active"
            raise ConfigError(f"evaluator {evaluator!r}: params.judge is required ({where})")
        spec = names[0]
    return resolve_judge(spec)


class JudgeCalls:
    """The judge calls made for one trace: resolves the judge at first use, sums usage."""

    __slots__ = ("_judge", "_resolve", "cached", "calls", "models", "usage")

    def __init__(self, resolve: Callable[[], Any]) -> None:
        self._resolve = resolve
        self._judge: Any = None
        self.usage = JudgeUsage()
        self.calls = 0
        self.cached = 0
        self.models: set[str] = set()

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        if self._judge is None:
            judge = self._resolve()
            if inspect.isawaitable(judge):
                judge = await judge
            self._judge = judge
        response: JudgeResponse = await self._judge.complete(request)
        self.usage.add(response.usage)
        self.calls += 1
        self.cached += bool(response.cached)
        if response.model:
            self.models.add(response.model)
        return response

    def usage_dict(self) -> dict[str, Any]:
        d = self.usage.to_dict()
        d["calls"] = self.calls
        d["cached_calls"] = self.cached
        d["cached"] = self.calls > 0 and self.cached == self.calls
        return d


class JudgeEvaluator(AsyncEvaluator[JP]):
    """Base of the judge evaluators: implement ``build_requests`` and ``judge_trace``."""

    def resolve_judge(self) -> Judge:
        """The judge endpoint, resolved at first use (so building an evaluator needs no network)."""
        return find_judge(self.params.judge, self.name, self.params.model)

    def build_requests(self, trace: Trace) -> list[JudgeRequest]:
        """The requests this evaluator would send for ``trace`` (for ``--dry-run`` estimates).

        ``[]`` when no call would be made: nothing to score, or a trace the real run turns into an
        error Result before calling (a missing prompt variable). For multi-step evaluators
        (rubric_dag) this is the longest possible path, an upper bound.
        """
        try:
            return self.requests_for(trace)
        except EvaluatorError:
            return []

    @abstractmethod
    def requests_for(self, trace: Trace) -> list[JudgeRequest]:
        """The requests for ``trace``; raises EvaluatorError when the trace cannot be judged."""

    @abstractmethod
    async def judge_trace(self, trace: Trace, calls: JudgeCalls) -> Result:
        """Score one trace, making judge calls through ``calls``."""

    def request(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> JudgeRequest:
        return JudgeRequest(
            messages=messages,
            schema=schema,
            schema_name=schema_name(self.key),
            max_tokens=self.params.max_tokens,
            metadata={"evaluator": self.key},
        )

    def error_result(self, exc: BaseException, calls: JudgeCalls, **metadata: Any) -> Result:
        if isinstance(exc, VerdictParseError):
            metadata.setdefault("raw_output", exc.raw)
        return Result.from_error(self.key, exc, usage=calls.usage_dict(), **metadata)

    async def ascore(self, trace: Trace) -> Result:
        calls = JudgeCalls(self.resolve_judge)
        try:
            result = await self.judge_trace(trace, calls)
        except EvaluatorError as exc:  # JudgeError, VerdictParseError, missing variables
            return self.error_result(exc, calls)
        result.metadata.setdefault("usage", calls.usage_dict())
        if calls.models:
            result.metadata.setdefault("judge_model", sorted(calls.models)[0])
        return result


__all__ = ["JudgeCalls", "JudgeEvaluator", "JudgeParams", "schema_name", "shorthand_judge"]
