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

import dataclasses
import inspect
import re
from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
from pydantic import Field, field_validator, model_validator

from assay.evaluators.base import AsyncEvaluator, EvaluatorParams
from assay.evaluators.jury import Vote, aggregate_votes, combine_swapped, judge_label, merge_usage, swapped
from assay.evaluators.potato_endpoint import potato_judge_fields
from assay.exceptions import ConfigError, EvaluatorError, VerdictParseError
from assay.judges.base import Judge, JudgeRequest, JudgeResponse, JudgeUsage
from assay.records import Result
from assay.traces.model import Trace

if TYPE_CHECKING:
    from assay.judges.pool import JudgePool


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
    ``"anthropic:claude-sonnet-4-5"``, ``"google_genai:gemini-2.5-flash"``,
    ``"azure_openai:DEPLOYMENT"`` or ``"ollama:llama3.1"``: the provider's base URL (its
    ``*_BASE_URL`` / ``AZURE_OPENAI_ENDPOINT`` / ``OLLAMA_HOST`` variable when set, else its
    default) and key variable (``OPENAI_API_KEY``, ``AZURE_OPENAI_API_KEY``,
    ``ANTHROPIC_API_KEY``, ``GOOGLE_API_KEY`` / ``GEMINI_API_KEY``). Used when ``judge`` is not set."""

    judges: list[Any] | None = None
    """A jury: several judges (names or inline configs, like ``judge``) each asked the same
    question; their verdicts become one result through ``aggregate`` (every verdict and an
    ``agreement`` figure are kept in ``metadata.jury``). Replaces ``judge``."""
    aggregate: Literal["majority", "mean", "min", "all"] = "majority"
    """How a jury's (or the samples') verdicts become the score: ``majority`` (1.0 when more than
    half pass; a tie fails), ``mean``, ``min`` (the strictest), ``all`` (1.0 when every one passes)."""
    samples: int = Field(default=1, ge=1, le=20)
    """Ask each judge this many times (at its configured temperature; each sample is cached on
    its own) and aggregate the verdicts like a jury's."""
    swap: bool = False
    """A pairwise prompt (``{outputs}`` is answer A, ``{reference_outputs}`` answer B; a passing
    verdict means A is better): ask in both orders; orders that disagree make a tie (0.5), and the
    summary reports the position-consistency rate."""

    @model_validator(mode="before")
    @classmethod
    def _potato_config(cls, data: Any) -> Any:
        """potato's ``config`` (a task config whose ``ai_support`` names the endpoint) and
        ``endpoint`` (a potato-style endpoint object) are accepted by every judge evaluator, so
        ``build_evaluator("rubric_dag", {"config": config, ...})`` works as in potato."""
        if isinstance(data, dict) and ("config" in data or "endpoint" in data):
            return potato_judge_fields(data)
        return data

    @field_validator("model")
    @classmethod
    def _model_shorthand(cls, v: str | None) -> str | None:
        if v is not None:
            model_shorthand(v)
        return v

    @field_validator("judges")
    @classmethod
    def _jury_references(cls, v: list[Any] | None) -> list[Any] | None:
        if v is not None:
            if not v:
                raise ValueError("judges: name at least one judge")
            for spec in v:
                cls._judge_reference(spec)
        return v

    @field_validator("judge")
    @classmethod
    def _judge_reference(cls, v: Any) -> Any:
        """An inline config must be a valid endpoint (a name is checked against the run's judges
        when the engine hands the evaluator their pool: :meth:`JudgeEvaluator.use_judges`)."""
        if isinstance(v, dict):
            from assay.judges.config import parse_judge_config

            parse_judge_config("(inline)", v)
        return v


JP = TypeVar("JP", bound=JudgeParams)


def schema_name(key: str) -> str:
    """A provider-safe schema name (OpenAI allows ``[A-Za-z0-9_-]{1,64}``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", key)[:64] or "verdict"


def model_shorthand(text: str) -> dict[str, Any]:
    """``"openai:gpt-4.1-mini"`` → the inline judge config it stands for (any registered provider:
    ``openai``, ``azure_openai``, ``anthropic``, ``google_genai``, ``ollama``, or a plugin's).

    >>> model_shorthand("anthropic:claude-sonnet-4-5")
    {'provider': 'anthropic', 'model': 'claude-sonnet-4-5'}
    >>> model_shorthand("google_genai:gemini-2.5-flash")
    {'provider': 'google_genai', 'model': 'gemini-2.5-flash'}
    """
    from assay.judges.providers import provider_names

    provider, sep, model = text.partition(":")
    if not sep or provider not in provider_names() or not model:
        known = ", ".join(provider_names())
        raise ConfigError(f"model: expected PROVIDER:MODEL with PROVIDER one of {known}, got {text!r}")
    return {"provider": provider, "model": model}


def shorthand_judge(text: str) -> dict[str, Any]:
    """The inline judge config of a ``model`` shorthand, with the base URL from the variable the
    provider's own SDK reads (``OPENAI_BASE_URL``, ``AZURE_OPENAI_ENDPOINT``, ``ANTHROPIC_BASE_URL``,
    ``GOOGLE_GEMINI_BASE_URL``, ``OLLAMA_HOST``) when it is set."""
    from assay.judges.providers import get_provider_class

    config = model_shorthand(text)
    base_url = get_provider_class(config["provider"]).base_url_from_env()
    if base_url:
        config["base_url"] = base_url
    return config


def find_judge(spec: Any, evaluator: str, model: str | None = None, pool: JudgePool | None = None) -> Judge:
    """Resolve a ``judge`` parameter in ``pool`` (a :class:`~assay.judges.pool.JudgePool`: the
    run's, or the evaluator's own): a Judge object as is; a name or an inline config through
    :func:`assay.judges.resolve_judge`; None → the ``model`` shorthand when given, else the pool's
    only judge."""
    if isinstance(spec, Judge):
        return spec
    from assay.judges import resolve_judge  # lazy: keeps aiohttp out of imports

    if spec is None and model is not None:
        spec = shorthand_judge(model)
    if spec is None:
        names = pool.names if pool is not None else []
        if len(names) != 1:
            where = f"the run declares {len(names)} judges" if names else "no judges are declared"
            raise ConfigError(f"evaluator {evaluator!r}: params.judge is required ({where})")
        spec = names[0]
    return resolve_judge(spec, pool)


def require_judge(evaluator: Any, declared: int) -> None:
    """A judge evaluator that names no judge (``judge`` and ``model`` unset) needs the run's only
    judge: refuse at build time (``assay validate`` too) when the run declares none or several."""
    params = getattr(evaluator, "params", None)
    if not isinstance(params, JudgeParams) or params.judge is not None or params.model is not None or params.judges:
        return
    if declared == 1:
        return
    where = "declares no judge" if declared == 0 else f"declares {declared} judges"
    raise ConfigError(
        f'names no judge and the run {where}: give it params.model (e.g. model: "openai:gpt-4.1-mini") '
        "or params.judge, or declare one judge under `judges:` (used by every judge evaluator that names none)"
    )


class JudgeCalls:
    """The judge calls made for one trace: resolves the judge at first use, sums usage."""

    __slots__ = ("_judge", "_resolve", "cached", "calls", "models", "sample", "usage")

    def __init__(self, resolve: Callable[[], Any], sample: int = 0) -> None:
        self._resolve = resolve
        self.sample = sample
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
        if self.sample:  # another sample of the same question: its own cache entry
            request = dataclasses.replace(request, sample=self.sample)
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

    def use_judges(self, pool: JudgePool) -> None:
        """Find the judges in ``pool`` (the run's); a judge named by ``judge`` / ``judges`` that
        the pool does not know is a ConfigError naming the known ones."""
        for spec in self.panel:
            if isinstance(spec, str):
                pool.get(spec)
        super().use_judges(pool)

    def resolve_judge(self) -> Judge:
        """The judge endpoint, resolved at first use (so building an evaluator needs no network);
        a jury's first judge (the engine sizes its in-flight traces by it)."""
        return find_judge(self.panel[0], self.name, self.params.model, self.judges())

    @property
    def panel(self) -> list[Any]:
        """The judges asked: ``judges`` (a jury), else the one ``judge``."""
        return list(self.params.judges) if self.params.judges else [self.params.judge]

    @property
    def is_jury(self) -> bool:
        """More than one verdict per trace (several judges, or several samples)."""
        return bool(self.params.judges) or self.params.samples > 1

    def build_requests(self, trace: Trace) -> list[JudgeRequest]:
        """The requests this evaluator would send for ``trace`` (for ``--dry-run`` estimates).

        ``[]`` when no call would be made: nothing to score, or a trace the real run turns into an
        error Result before calling (a missing prompt variable); ``no_call_reason`` then says which.
        For multi-step evaluators (rubric_dag) this is the longest possible path, an upper bound.
        """
        self.no_call_reason: str | None = None
        try:
            requests = self.requests_for(trace)
        except EvaluatorError as exc:
            self.no_call_reason = str(exc)
            return []
        if not requests and self.no_call_reason is None:
            self.no_call_reason = "nothing to judge in this trace"
        return requests * (len(self.panel) * self.params.samples * (2 if self.params.swap else 1))

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
        if self.is_jury:
            return await self._ascore_jury(trace)
        calls = JudgeCalls(self.resolve_judge)
        try:
            result = await self.verdict(trace, calls)
        except EvaluatorError as exc:  # JudgeError, VerdictParseError, missing variables
            return self.error_result(exc, calls)
        result.metadata.setdefault("usage", calls.usage_dict())
        if calls.models:
            result.metadata.setdefault("judge_model", sorted(calls.models)[0])
        return result

    async def verdict(self, trace: Trace, calls: JudgeCalls) -> Result:
        """One judge's verdict: :meth:`judge_trace`, asked in both orders with ``swap``."""
        if not self.params.swap:
            return await self.judge_trace(trace, calls)
        first = await self.judge_trace(trace, calls)
        second = await self.judge_trace(swapped(trace), calls)
        return combine_swapped(first, second, self.threshold)

    async def _ascore_jury(self, trace: Trace) -> Result:
        """Every judge of the panel, ``samples`` times each, concurrently; one aggregated result."""
        panel, k = self.panel, self.params.samples
        slots: list[tuple[str, int, JudgeCalls]] = []
        for i, spec in enumerate(panel):
            label = judge_label(spec, i) if spec is not None else (self.params.model or "judge")

            def resolve(spec: Any = spec) -> Judge:
                return find_judge(spec, self.name, self.params.model, self.judges())

            slots.extend((label, s, JudgeCalls(resolve, sample=s)) for s in range(k))
        results: list[Result | None] = [None] * len(slots)

        async def one(index: int) -> None:
            calls = slots[index][2]
            try:
                results[index] = await self.verdict(trace, calls)
            except EvaluatorError as exc:
                results[index] = self.error_result(exc, calls)

        try:
            async with anyio.create_task_group() as tg:
                for index in range(len(slots)):
                    tg.start_soon(one, index)
        except ExceptionGroup as group:  # what stops a run (budget, a bad key) leaves as itself
            raise _first_leaf(group) from None
        votes = [Vote(label, s, r) for (label, s, _), r in zip(slots, results, strict=True) if r is not None]
        result = aggregate_votes(self.key, votes, self.params.aggregate, threshold=self.threshold)
        result.metadata["usage"] = merge_usage([calls.usage_dict() for _, _, calls in slots])
        models = sorted({m for _, _, calls in slots for m in calls.models})
        if models:
            result.metadata["judge_model"] = ",".join(models)
        return result


def _first_leaf(group: BaseExceptionGroup[Exception]) -> Exception:
    """The first exception inside (nested) groups: the one a single judge call would have raised."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    assert isinstance(exc, Exception)
    return exc


__all__ = ["JudgeCalls", "JudgeEvaluator", "JudgeParams", "require_judge", "schema_name", "shorthand_judge"]
