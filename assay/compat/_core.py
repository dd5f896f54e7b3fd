"""What every compatibility factory shares: openevals-shaped results, the sync/async call
wrappers, the ``judge``/``model`` arguments and prebuilt prompts recognised by their text."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from assay.evaluators.base import BaseEvaluator
from assay.exceptions import ConfigError, EvaluatorError
from assay.judges.prompts import PROMPTS, get_prompt
from assay.records import Result

#: Prompt names that are helpers of other evaluators, not prompts users pick.
_INTERNAL = "_"


@functools.cache
def _names_by_text() -> dict[str, str]:
    return {get_prompt(name).template: name for name in PROMPTS if not name.startswith(_INTERNAL)}


def prompt_param(prompt: Any) -> str:
    """A prompt argument as assay's ``prompt`` param: the text of a prebuilt prompt becomes its
    name (so its polarity and optional variables apply); any other text stays a template."""
    if not isinstance(prompt, str):
        raise ConfigError(
            f"prompt: expected a template string (f-string style), got {type(prompt).__name__}; "
            "LangChain prompt templates and prompt functions are not supported by assay.compat"
        )
    return _names_by_text().get(prompt, prompt)


def judge_params(judge: Any, model: str | None) -> dict[str, Any]:
    """openevals' ``judge``/``model`` arguments as assay's ``judge``/``model`` params.

    ``model="openai:o3-mini"`` goes through assay's own endpoint (``OPENAI_BASE_URL`` and
    ``OPENAI_API_KEY`` honoured); a bare model name is an OpenAI model unless it starts with
    ``claude``; an OpenAI SDK client as ``judge`` contributes its base URL; an assay judge (a
    name, an endpoint dict or a Judge object) is used as is.
    """
    if model is not None and ":" not in model:
        model = f"{'anthropic' if model.startswith('claude') else 'openai'}:{model}"
    if judge is None:
        if model is None:
            raise ConfigError("a judge is required: pass model='openai:<model>' (or judge=...)")
        return {"model": model}
    if _is_openai_client(judge):
        name = (model or "openai:gpt-4o-mini").partition(":")[2]
        return {"judge": {"provider": "openai", "model": name, "base_url": str(judge.base_url).rstrip("/")}}
    if hasattr(judge, "invoke") and not hasattr(judge, "complete"):
        raise ConfigError(
            "judge: LangChain chat models are not supported by assay.compat; pass "
            "model='provider:model' or an assay judge (name, endpoint dict or Judge object)"
        )
    return {"judge": judge}


def llm_judge_evaluator(
    cls: Callable[..., BaseEvaluator[Any]],
    *,
    prompt: Any,
    judge: Any,
    model: str | None,
    continuous: bool,
    is_async: bool,
    raw_object: bool = False,
    **params: Any,
) -> CompatEvaluator:
    """An openevals-style LLM judge factory's result: ``cls`` (an assay LLM-judge evaluator)
    built from openevals' arguments (``prompt``, ``judge``/``model``, ``continuous``; the rest,
    e.g. ``feedback_key``, ``system``, ``choices``, are assay params of the same name), wrapped."""
    evaluator = cls(prompt=prompt_param(prompt), continuous=continuous or None, **params, **judge_params(judge, model))
    return wrap(evaluator, is_async=is_async, raw_object=raw_object)


def _is_openai_client(obj: Any) -> bool:
    return hasattr(obj, "chat") and hasattr(obj, "base_url") and not hasattr(obj, "complete")


class EvaluatorResult(dict[str, Any]):
    """openevals' result dict (``{"key", "score", "comment", "metadata"}``), also readable as
    attributes (``r.score``, ``r.comment``; ``r.reasoning`` = the comment; ``r.passed``), the
    agent-evaluation catalog's spelling.

    >>> r = EvaluatorResult(key="k", score=True, comment="ok", metadata=None)
    >>> r["score"] is True, r.passed, r.reasoning
    (True, True, 'ok')
    """

    def __getattr__(self, name: str) -> Any:
        if name == "reasoning":
            return self.get("comment")
        if name == "passed":
            score = self.get("score")
            return None if score is None else bool(score >= 0.5)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def openevals_result(result: Result, *, raw_object: bool = False) -> Any:
    """An assay Result as openevals returns it: ``{"key", "score", "comment", "metadata"}`` with
    the judge's own answer as the score (a bool for pass/fail verdicts, the chosen number for
    choices); with ``raw_object`` (``output_schema``) the parsed verdict object itself. A result
    that could not be scored raises, as openevals does."""
    if result.error is not None:
        raise EvaluatorError(f"{result.key}: {result.error}")
    if raw_object and isinstance(result.value, dict):
        return result.value
    value, score = result.value, result.score
    if isinstance(value, bool):  # a pass/fail verdict: the judge's answer (True = toxic for TOXICITY)
        score = value if score in (0.0, 1.0) else score
    elif isinstance(value, int | float):  # the chosen number (choices), the number (continuous)
        score = value
    return EvaluatorResult(key=result.key, score=score, comment=result.comment, metadata=result.metadata or None)


class CompatEvaluator:
    """A sync evaluator function in openevals' shape: ``evaluator(inputs=, outputs=,
    reference_outputs=, **kwargs)`` returns a dict (a list for multi-key evaluators).
    ``.evaluator`` is the assay evaluator behind it (usable in a run; its ``evaluate()`` returns
    assay Results)."""

    def __init__(self, evaluator: BaseEvaluator[Any], *, raw_object: bool = False, many: bool = False) -> None:
        self.evaluator = evaluator
        self.key = evaluator.key
        self._raw = raw_object
        self._many = many

    def __call__(self, *, inputs: Any = None, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any) -> Any:
        results = self.evaluator.evaluate_all(
            inputs=inputs, outputs=outputs, reference_outputs=reference_outputs, **kwargs
        )
        return self._shape(results)

    def _shape(self, results: list[Result]) -> Any:
        if self._many:  # openevals' multi-key evaluators return a list of results
            return [openevals_result(r) for r in results]
        return openevals_result(results[0], raw_object=self._raw)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.evaluator.name!r}, key={self.key!r})"


class AsyncCompatEvaluator(CompatEvaluator):
    """The async twin: ``await evaluator(outputs=...)`` (the ``create_async_…`` factories)."""

    async def __call__(
        self, *, inputs: Any = None, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any
    ) -> Any:
        results = await self.evaluator.aevaluate_all(
            inputs=inputs, outputs=outputs, reference_outputs=reference_outputs, **kwargs
        )
        return self._shape(results)


def wrap(
    evaluator: BaseEvaluator[Any], *, is_async: bool = False, raw_object: bool = False, many: bool = False
) -> CompatEvaluator:
    """The openevals-shaped function around ``evaluator`` (``many``: a list of results)."""
    cls = AsyncCompatEvaluator if is_async else CompatEvaluator
    return cls(evaluator, raw_object=raw_object, many=many)


__all__ = [
    "AsyncCompatEvaluator",
    "CompatEvaluator",
    "EvaluatorResult",
    "judge_params",
    "llm_judge_evaluator",
    "openevals_result",
    "prompt_param",
    "wrap",
]
