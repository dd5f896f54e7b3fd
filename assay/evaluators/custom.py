"""User evaluators: any Python function (sync or async) as an evaluator.

The function is named ``"module:function"`` in a run file (or passed as a callable in code) and
is called with the keyword arguments it accepts among ``outputs``, ``reference_outputs``,
``inputs``, ``trace`` (the canonical Trace), ``context``, ``scenario``, ``metadata`` and
``result`` (the agent-evaluation catalog's run dict: ``messages``, ``all_tool_calls`` with their
results, ``metrics``; so ``def eval_escalation(result, scenario)`` binds), a ``**kwargs``
function receiving them all, plus the constant ``kwargs`` from params. It may
return (openevals / potato conventions):

* a bool (1.0 / 0.0), a number in [0, 1] (a number outside it is kept as ``value``, score None),
  or None (not scored);
* a tuple ``(score, comment)`` or ``(score, comment, metadata)``;
* a dict with ``score`` (plus optional ``key``, ``comment``/``reasoning``, ``value``, ``metadata``);
* a dict without ``score``: several results, key -> score (or key -> dict / list of those);
* a :class:`~assay.records.Result`, or a list of any of the above.

So one function may produce several results: this is a multi-result evaluator and
``evaluate()`` returns a list. An exception raised by the function becomes an error result.

``outputs`` / ``reference_outputs`` are the plain values given, or, for a message trajectory,
its canonical message dicts (``role``, ``content``, ``tool_calls: [{id, name, args}]``), as a
list that also answers ``outputs["messages"]`` (agentevals-style functions);
take ``trace`` for the parsed Trace (``trace.final_output``, ``trace.tool_calls()``, …).

>>> def short(outputs, reference_outputs):
...     return {"score": len(outputs) <= len(reference_outputs), "comment": "length check"}
>>> PythonEvaluator(function=short).evaluate(outputs="hi", reference_outputs="hello")[0].score
1.0
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any, ClassVar

import anyio
from pydantic import Field

from assay.evaluators.base import EvaluatorParams, MultiEvaluator
from assay.evaluators.code import load_function
from assay.records import Result
from assay.traces.model import Trace

ARG_NAMES = ("outputs", "reference_outputs", "inputs", "trace", "context", "scenario", "metadata", "result")


class Messages(list[Any]):
    """A trajectory handed to a user function: a list of message dicts that also answers
    ``outputs["messages"]`` / ``outputs.get("messages")``, so functions written for
    ``{"messages": [...]}`` outputs (agentevals' custom evaluators) work on either shape."""

    def __getitem__(self, index: Any) -> Any:
        if index == "messages":
            return self
        if isinstance(index, str):
            raise KeyError(index)
        return super().__getitem__(index)

    def get(self, key: str, default: Any = None) -> Any:
        """``outputs.get("messages")`` as on a dict."""
        return self if key == "messages" else default

    def keys(self) -> list[str]:
        """``["messages"]``, as the dict it stands for."""
        return ["messages"]


def run_result(trace: Trace) -> dict[str, Any]:
    """The agent-evaluation catalog's ``result``: the run as a dict with ``messages`` (message
    dicts), ``tool_calls`` / ``all_tool_calls`` (``{name, args, id, result}``, in order) and
    ``metrics`` (the usage), over the record's own fields."""
    from assay.evaluators.scenario import calls_with_results

    calls = [{"name": c.name, "args": c.args, "id": c.id, "result": res} for c, res in calls_with_results(trace)]
    record = trace.scenario if isinstance(trace.scenario, dict) else {}
    return {
        **record,
        "messages": [m.to_dict() for m in trace.messages],
        "tool_calls": calls,
        "all_tool_calls": calls,
        "metrics": trace.usage or record.get("metrics") or {},
        "final_output": trace.final_output,
    }


class PythonEvaluatorParams(EvaluatorParams):
    function: str | Callable[..., Any]
    """The scoring function: ``"module:function"`` (importable) or, in code, a callable."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Constant keyword arguments passed on every call (e.g. a budget)."""


class PythonEvaluator(MultiEvaluator[PythonEvaluatorParams]):
    """Run a user function (sync or async) and turn what it returns into results."""

    name: ClassVar[str] = "python"
    description: ClassVar[str] = "A user Python function (module:function), sync or async, as an evaluator."
    Params = PythonEvaluatorParams
    example: ClassVar[dict[str, Any]] = {"function": "my_evals:no_apologies"}

    def default_key(self) -> str:
        fn = self.params.function
        if isinstance(fn, str):
            return fn.rpartition(":")[2].rpartition(".")[2] or self.name
        return getattr(fn, "__name__", self.name)

    def setup(self) -> None:
        fn = load_function(self.params.function, f"evaluator {self.name!r}: params.function")
        self._fn = fn
        sig = inspect.signature(fn)
        params = sig.parameters.values()
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        self._wanted = tuple(a for a in ARG_NAMES if (var_kw and a != "result") or a in names)
        # An instance flag: this evaluator is async exactly when the user's function is.
        self.is_async = inspect.iscoroutinefunction(fn)  # type: ignore[misc]

    def _call_kwargs(self, trace: Trace) -> dict[str, Any]:
        available = {
            "outputs": _outputs_of(trace),
            "reference_outputs": None if trace.reference is None else _outputs_of(trace.reference),
            "inputs": trace.input,
            "trace": trace,
            "context": trace.context,
            "scenario": trace.scenario,
            "metadata": trace.metadata,
        }
        wanted = {k: available[k] for k in self._wanted if k != "result"}
        if "result" in self._wanted:
            wanted["result"] = run_result(trace)
        return {**wanted, **self.params.kwargs}

    def score_trace(self, trace: Trace) -> list[Result]:
        if self.is_async:
            return anyio.run(self.ascore_trace, trace)
        try:
            returned = self._fn(**self._call_kwargs(trace))
        except Exception as exc:  # user code: its failure is this record's error result
            return [Result.from_error(self.key, exc)]
        return self.to_results(returned)

    async def ascore_trace(self, trace: Trace) -> list[Result]:
        if not self.is_async:
            return self.score_trace(trace)
        try:
            returned = await self._fn(**self._call_kwargs(trace))
        except Exception as exc:
            return [Result.from_error(self.key, exc)]
        return self.to_results(returned)

    def to_results(self, returned: Any) -> list[Result]:
        """Turn a function's return value into results (see the module docstring)."""
        try:
            return _convert(self.key, returned)
        except (TypeError, ValueError) as exc:
            return [Result.from_error(self.key, f"unusable return value: {exc}")]


def _outputs_of(trace: Trace) -> Any:
    """A plain output as given; a trajectory as its canonical message dicts."""
    if not trace.messages:
        return trace.final_output
    return Messages(m.to_dict() for m in trace.messages)


def _score(key: str, raw: Any, comment: str | None = None, **extra: Any) -> Result:
    metadata = extra.pop("metadata", None) or {}
    value = extra.pop("value", raw)
    if raw is None:
        return Result(key, None, value, comment, metadata)
    if isinstance(raw, bool):
        return Result(key, 1.0 if raw else 0.0, value, comment, metadata)
    if isinstance(raw, int | float):
        x = float(raw)
        if math.isnan(x) or not 0.0 <= x <= 1.0:
            note = f"score {raw!r} is outside [0, 1]; kept as value"
            return Result(key, None, value, f"{comment}; {note}" if comment else note, metadata)
        return Result(key, x, value, comment, metadata)
    raise TypeError(f"score must be a bool, a number or None, got {type(raw).__name__}")


def _from_dict(key: str, d: dict[str, Any]) -> Result:
    comment = d.get("comment", d.get("reasoning"))
    extra = {k: d[k] for k in ("value", "metadata") if k in d}
    return _score(str(d.get("key") or key), d["score"], comment, **extra)


def _convert(key: str, returned: Any) -> list[Result]:
    if isinstance(returned, Result):
        return [returned]
    if isinstance(returned, tuple):
        if len(returned) not in (2, 3):
            raise ValueError(f"a tuple must be (score, comment[, metadata]), got {len(returned)} items")
        md = returned[2] if len(returned) == 3 else None
        return [_score(key, returned[0], returned[1], metadata=md)]
    if isinstance(returned, list):
        return [r for item in returned for r in _convert(key, item)]
    if isinstance(returned, dict):
        if "score" in returned:
            return [_from_dict(key, returned)]
        results: list[Result] = []
        for k, v in returned.items():
            for item in v if isinstance(v, list) else [v]:
                if isinstance(item, dict):
                    if "score" not in item:
                        raise ValueError(f"result {k!r} is a dict without 'score'")
                    results.append(_from_dict(str(k), {**item, "key": k}))
                else:
                    results.append(_score(str(k), item))
        return results
    return [_score(key, returned)]
