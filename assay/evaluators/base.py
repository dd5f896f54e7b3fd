"""The evaluator contract.

Every evaluator:

* has a registry ``name``, a one-line ``description`` and a pydantic ``Params`` model (frozen,
  ``extra="forbid"``) that validates its parameters when it is built;
* scores canonical traces: ``score_trace(trace) -> list[Result]`` (the pipeline's hot path, no
  per-record validation), or ``ascore_trace`` for evaluators that call out (judges);
* offers the library face users know from openevals/agentevals/potato:
  ``evaluate(outputs=..., reference_outputs=..., inputs=...)``, accepting every shape the
  normalizers accept;
* may offer the optional hooks the engine looks for — ``score_traces`` / ``ascore_traces`` (a
  micro-batch at once), ``resolve_judge`` (the judge it calls) and ``build_requests`` (its judge
  requests, for ``--dry-run``). They are declared here with defaults that mean "not offered";
  :meth:`BaseEvaluator.offers` (or :func:`offers`) says whether a class overrides one.

>>> from assay.evaluators import TrajectoryMatch
>>> ev = TrajectoryMatch(mode="strict")
>>> call = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}
>>> ev.evaluate(outputs=[call], reference_outputs=[call]).score
1.0
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError

from assay.exceptions import ConfigError
from assay.records import Result
from assay.traces.model import Trace
from assay.traces.normalize import USAGE_KEYS, trace_from_args

if TYPE_CHECKING:
    from assay.judges.base import Judge, JudgeRequest
    from assay.judges.pool import JudgePool
    from assay.sampling import Sampler

#: The optional hooks of an evaluator (see :meth:`BaseEvaluator.offers`).
Hook = Literal["score_traces", "ascore_traces", "resolve_judge", "build_requests"]


class EvaluatorParams(BaseModel):
    """Parameters every evaluator accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    key: str | None = None
    """Result key (defaults to the evaluator's own key)."""
    threshold: float | None = None
    """Score at or above which a result counts as a pass in the summary (default 0.5)."""


P = TypeVar("P", bound=EvaluatorParams)


def format_validation_error(evaluator: str, exc: ValidationError) -> str:
    """One line per problem, naming the evaluator and the bad key."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(params)"
        given = err.get("input")
        shown = "" if err["type"] == "missing" else f" (got {given!r})"
        lines.append(f"evaluator {evaluator!r}: params.{loc}: {err['msg']}{shown}")
    return "\n".join(lines)


class BaseEvaluator(ABC, Generic[P]):
    """Common machinery: params validation, key, the library ``evaluate_all`` face."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    Params: ClassVar[type[EvaluatorParams]] = EvaluatorParams
    is_async: ClassVar[bool] = False
    #: Whether scoring reads ``trace.scenario`` (the record's scenario fields: by default the whole
    #: record). When no evaluator of a run does, the pipeline may decode only the fields a trace is
    #: built from (``assay.traces.openai_decode``). True unless a class says otherwise.
    reads_scenario: ClassVar[bool] = True
    #: Whether scoring reads message text (``content``, ``final_output``). When no evaluator of a run
    #: does, a columnar source may leave those columns unread (the Parquet source reads only roles,
    #: tool calls and ids for a trajectory match). True unless a class says otherwise.
    reads_text: ClassVar[bool] = True
    #: Whether scoring reads tool-call ids (``ToolCall.id``, ``Message.tool_call_id``: pairing a call
    #: with its result). When no evaluator of a run does, a columnar source may leave those columns
    #: unread too (they are most of what a trajectory match would decode). True unless a class says
    #: otherwise.
    reads_call_ids: ClassVar[bool] = True

    @property
    def reads_args(self) -> bool:
        """Whether scoring compares tool-call arguments. When no evaluator of a run does, a columnar
        source may leave them unread (the calls then read as having none, and argument defects
        are not reported). True unless an evaluator's params say otherwise (a name-level
        trajectory match: ``tool_args_match_mode: ignore``)."""
        return True

    #: Example params shown by ``assay evaluators show``.
    example: ClassVar[dict[str, Any]] = {}

    params: P
    sampler: Sampler | None = None
    """Which traces it scores when its run-file spec has ``sample:`` (see :mod:`assay.sampling`;
    set by the run's ``build_evaluators``); None: every trace."""
    version: int | str | None = None
    """The run file's ``version:`` of this evaluator (set by ``build_evaluators``): it enters the
    evaluator's identity (:mod:`assay.evaluators.identity`), so raising it makes earlier results stale."""
    judge_pool: JudgePool | None = None
    """Where the judges this evaluator names are found: the run's pool, handed by the engine
    (:meth:`use_judges`); None until then (see :meth:`judges`)."""

    def __init__(self, params: P | dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        if isinstance(params, EvaluatorParams):
            if kwargs:
                params = params.model_copy(update=kwargs)
            self.params = params
        else:
            merged = {**(params or {}), **kwargs}
            try:
                self.params = self.Params(**merged)  # type: ignore[assignment]
            except ValidationError as exc:
                raise ConfigError(format_validation_error(self.name or type(self).__name__, exc)) from exc
        self.key: str = self.params.key or self.default_key()
        self.threshold: float = 0.5 if self.params.threshold is None else self.params.threshold
        self.setup()

    def default_key(self) -> str:
        return self.name

    def use_judges(self, pool: JudgePool) -> None:
        """Find this evaluator's judges in ``pool``: the engine hands every evaluator it builds the
        run's pool (an argument, never an ambient one). A judge evaluator checks the names it
        refers to (ConfigError naming the known ones)."""
        self.judge_pool = pool

    def calls_judges(self) -> bool:
        """Whether scoring calls a judge endpoint (it offers ``resolve_judge``, or names a judge)."""
        return self.offers("resolve_judge") or getattr(self.params, "judge", None) is not None

    def judges(self) -> JudgePool:
        """The pool this evaluator's judges are found in: the one handed to it, else a pool of its
        own for inline configs (each endpoint built once, so repeated ``evaluate()`` calls share
        its limits and statistics)."""
        if self.judge_pool is None:
            from assay.judges.pool import JudgePool  # lazy: keeps aiohttp out of `import assay`

            self.judge_pool = JudgePool({})
        return self.judge_pool

    def setup(self) -> None:
        """Build-time work (compile patterns, validate schemas); raise ConfigError on bad params."""

    @abstractmethod
    def score_trace(self, trace: Trace) -> list[Result]:
        """Score one canonical trace (sync)."""

    async def ascore_trace(self, trace: Trace) -> list[Result]:
        """Score one canonical trace (async). Deterministic evaluators just call the sync path."""
        return self.score_trace(trace)

    async def aclose(self) -> None:
        """Release resources (HTTP sessions, subprocess pools)."""

    def result_keys(self) -> list[str]:
        """Keys this evaluator's results use (for summaries); may be a prefix for dynamic keys."""
        return [self.key]

    # --- optional hooks: the defaults below mean "not offered" (see :meth:`offers`) ---------------

    @classmethod
    def offers(cls, hook: Hook) -> bool:
        """Whether this evaluator class offers the optional ``hook`` (overrides this class's default).

        >>> from assay.evaluators import TrajectoryMatch
        >>> TrajectoryMatch.offers("score_traces"), TrajectoryMatch.offers("build_requests")
        (False, False)
        """
        return getattr(cls, hook) is not getattr(BaseEvaluator, hook)

    def score_traces(self, traces: list[Trace]) -> list[list[Result]]:
        """Score a micro-batch at once, one list of results per trace (one embedding pass over all
        its texts, say); the engine then calls it instead of :meth:`score_trace`. Not offered here."""
        raise NotImplementedError(f"{type(self).__name__} does not score traces in batches")

    async def ascore_traces(self, traces: list[Trace]) -> list[list[Result]]:
        """:meth:`score_traces` without blocking the event loop (preferred when both are offered).
        Not offered here."""
        raise NotImplementedError(f"{type(self).__name__} does not score traces in batches")

    def resolve_judge(self) -> Judge:
        """The judge this evaluator calls (the engine sizes the traces in flight by its capacity; a
        batch run's collect pass runs the evaluators that offer it). Not offered here: it calls none."""
        raise NotImplementedError(f"{type(self).__name__} calls no judge")

    def build_requests(self, trace: Trace) -> list[JudgeRequest]:
        """The judge requests this evaluator would send for ``trace`` (``--dry-run`` estimates).
        Not offered here: it calls no judge."""
        raise NotImplementedError(f"{type(self).__name__} calls no judge")

    @staticmethod
    def example_trace(outputs: Any, reference_outputs: Any, inputs: Any, kwargs: dict[str, Any]) -> Trace:
        """The Trace of one library call: ``context=`` and ``scenario=`` are taken from the keyword
        arguments, any other keyword argument becomes a scenario field."""
        if outputs is None and reference_outputs is None and ("actual" in kwargs or "expected" in kwargs):
            # the agent-evaluation catalog's spelling: evaluator(expected=..., actual=...)
            outputs, reference_outputs = kwargs.pop("actual", None), kwargs.pop("expected", None)
        trace = trace_from_args(
            outputs,
            reference_outputs,
            inputs,
            context=kwargs.pop("context", None),
            scenario=kwargs.pop("scenario", None),
        )
        if isinstance(outputs, dict):
            # a run result such as {"messages", "all_tool_calls", "metrics"}: its own fields are
            # visible to the evaluators as in the pipeline (the scenario's fields win)
            if trace.usage is None:
                trace.usage = next((outputs[k] for k in USAGE_KEYS if isinstance(outputs.get(k), dict)), None)
            kwargs = {**{k: v for k, v in outputs.items() if k != "messages"}, **(trace.scenario or {}), **kwargs}
        elif kwargs:
            kwargs = {**(trace.scenario or {}), **kwargs}
        if kwargs:
            trace.scenario = kwargs
        if trace.usage is None and isinstance(trace.scenario, dict):
            trace.usage = next((trace.scenario[k] for k in USAGE_KEYS if isinstance(trace.scenario.get(k), dict)), None)
        return trace

    def evaluate_all(
        self,
        *,
        outputs: Any = None,
        reference_outputs: Any = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> list[Result]:
        """Library face: every result this evaluator produces for one example."""
        trace = self.example_trace(outputs, reference_outputs, inputs, kwargs)
        if self.is_async:
            return self.with_threshold(anyio.run(self.ascore_trace, trace))
        return self.with_threshold(self.score_trace(trace))

    def with_threshold(self, results: list[Result]) -> list[Result]:
        """Stamp the evaluator's threshold on its results, so ``Result.passed`` honours it."""
        for r in results:
            if r.threshold is None:
                r.threshold = self.threshold
        return results

    async def aevaluate_all(
        self,
        *,
        outputs: Any = None,
        reference_outputs: Any = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> list[Result]:
        return self.with_threshold(
            await self.ascore_trace(self.example_trace(outputs, reference_outputs, inputs, kwargs))
        )


def offers(evaluator: object, hook: Hook) -> bool:
    """Whether ``evaluator`` offers the optional ``hook`` (:meth:`BaseEvaluator.offers`; an object
    outside the class hierarchy offers what it has)."""
    if isinstance(evaluator, BaseEvaluator):
        return type(evaluator).offers(hook)
    return hasattr(evaluator, hook)


class Evaluator(BaseEvaluator[P]):
    """An evaluator that produces exactly one Result per trace."""

    @abstractmethod
    def score(self, trace: Trace) -> Result:
        """Score one canonical trace."""

    def score_trace(self, trace: Trace) -> list[Result]:
        return [self.score(trace)]

    def evaluate(
        self,
        *,
        outputs: Any = None,
        reference_outputs: Any = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> Result:
        """Score one example given in any shape the normalizers accept."""
        return self.evaluate_all(outputs=outputs, reference_outputs=reference_outputs, inputs=inputs, **kwargs)[0]

    async def aevaluate(
        self,
        *,
        outputs: Any = None,
        reference_outputs: Any = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> Result:
        results = await self.aevaluate_all(
            outputs=outputs, reference_outputs=reference_outputs, inputs=inputs, **kwargs
        )
        return results[0]

    __call__ = evaluate


class MultiEvaluator(BaseEvaluator[P]):
    """An evaluator that produces several Results per trace (e.g. one per JSON key)."""

    def evaluate(
        self,
        *,
        outputs: Any = None,
        reference_outputs: Any = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> list[Result]:
        return self.evaluate_all(outputs=outputs, reference_outputs=reference_outputs, inputs=inputs, **kwargs)

    async def aevaluate(
        self,
        *,
        outputs: Any = None,
        reference_outputs: Any = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> list[Result]:
        """Async library face: every result for one example."""
        return await self.aevaluate_all(outputs=outputs, reference_outputs=reference_outputs, inputs=inputs, **kwargs)

    __call__ = evaluate


class AsyncEvaluator(Evaluator[P]):
    """A single-result evaluator whose real implementation is async (LLM judges)."""

    is_async: ClassVar[bool] = True

    @abstractmethod
    async def ascore(self, trace: Trace) -> Result:
        """Score one canonical trace."""

    async def ascore_trace(self, trace: Trace) -> list[Result]:
        return [await self.ascore(trace)]

    def score(self, trace: Trace) -> Result:
        return anyio.run(self.ascore, trace)
