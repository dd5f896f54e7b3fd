"""What every compatibility factory shares: openevals-shaped results, the sync/async call
wrappers, the ``judge``/``model`` arguments and prebuilt prompts recognised by their text."""

from __future__ import annotations

import contextlib
import functools
import string
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar, cast

from assay.compat.langchain import (
    RAW_ARGS,
    LangChainJudge,
    PromptFunctionJudge,
    is_chat_model,
    is_prompt_function,
)
from assay.evaluators.base import BaseEvaluator
from assay.evaluators.judge_base import JudgeEvaluator
from assay.evaluators.llm_judge import LLMJudge
from assay.exceptions import ConfigError, EvaluatorError
from assay.judges.prompts import PROMPTS, get_prompt
from assay.records import Result

#: What an evaluator function returns (openevals' result dict, a list of them, a parsed object).
R = TypeVar("R")


class CompatConfigError(ConfigError, ValueError):
    """A bad argument through the compat path: a ``ValueError``, as openevals and agentevals
    raise, and assay's ``ConfigError``."""


@contextlib.contextmanager
def compat_errors() -> Iterator[None]:
    """Raise assay's ConfigErrors as :class:`CompatConfigError` (also a ``ValueError``)."""
    try:
        yield
    except CompatConfigError:
        raise
    except ConfigError as exc:
        raise CompatConfigError(str(exc)) from exc


def template_variables(template: str) -> tuple[str, ...]:
    """The ``{name}`` variables of an f-string style template, in order, once each."""
    names: dict[str, None] = {}
    for _, field, _, _ in string.Formatter().parse(template):
        if field:
            names[field.split(".")[0].split("[")[0]] = None
    return tuple(names)


#: Prompt names that are helpers of other evaluators, not prompts users pick.
_INTERNAL = "_"


@functools.cache
def _names_by_text() -> dict[str, str]:
    return {get_prompt(name).template: name for name in PROMPTS if not name.startswith(_INTERNAL)}


def prompt_param(prompt: Any) -> str:
    """A prompt argument as assay's ``prompt`` param: the text of a prebuilt prompt becomes its
    name (so its polarity and optional variables apply); any other text stays a template.
    (Prompt functions and LangChain prompt templates are handled by :func:`llm_judge_evaluator`.)"""
    if not isinstance(prompt, str):
        raise ConfigError(f"prompt: expected a template string (f-string style), got {type(prompt).__name__}")
    return _names_by_text().get(prompt, prompt)


def judge_params(
    judge: Any, model: str | None, structured_output_kwargs: dict[str, Any] | None = None
) -> dict[str, Any]:
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
    if is_chat_model(judge):  # called through its own async API, outside assay's limits (as openevals does)
        return {"judge": LangChainJudge(judge, structured_output_kwargs)}
    return {"judge": judge}


def llm_judge_evaluator(
    cls: Callable[..., BaseEvaluator[Any]],
    *,
    prompt: Any,
    judge: Any,
    model: str | None,
    continuous: bool,
    is_async: bool,
    raw_object: bool | type = False,
    strict_variables: bool = False,
    structured_output_kwargs: dict[str, Any] | None = None,
    **params: Any,
) -> Any:
    """An openevals-style LLM judge factory's result: ``cls`` (an assay LLM-judge evaluator)
    built from openevals' arguments (``prompt``, ``judge``/``model``, ``continuous``; the rest,
    e.g. ``feedback_key``, ``system``, ``choices``, are assay params of the same name), wrapped.
    ``strict_variables``: a call must give every variable of a string prompt (openevals' rule)."""
    with compat_errors():
        return _llm_judge_evaluator(
            cls,
            prompt=prompt,
            judge=judge,
            model=model,
            continuous=continuous,
            is_async=is_async,
            raw_object=raw_object,
            strict_variables=strict_variables,
            structured_output_kwargs=structured_output_kwargs,
            **params,
        )


def _llm_judge_evaluator(
    cls: Callable[..., BaseEvaluator[Any]],
    *,
    prompt: Any,
    judge: Any,
    model: str | None,
    continuous: bool,
    is_async: bool,
    raw_object: bool | type,
    strict_variables: bool,
    structured_output_kwargs: dict[str, Any] | None,
    **params: Any,
) -> Any:
    judge_spec = judge_params(judge, model, structured_output_kwargs)
    if is_prompt_function(prompt):  # a LangChain prompt template or a callable returning messages
        if not (isinstance(cls, type) and issubclass(cls, LLMJudge)):
            raise ConfigError(f"prompt: a prompt function is not supported by {cls.__name__}; pass a template string")
        evaluator: BaseEvaluator[Any] = PromptFunctionJudge(
            prompt, continuous=continuous or None, **params, **judge_spec
        )
        return wrap(evaluator, is_async=is_async, raw_object=raw_object, raw_args=True)
    evaluator = cls(prompt=prompt_param(prompt), continuous=continuous or None, **params, **judge_spec)
    wrapped = wrap(evaluator, is_async=is_async, raw_object=raw_object)
    if strict_variables:
        wrapped.required_variables = template_variables(prompt)
    return wrapped


def _is_openai_client(obj: Any) -> bool:
    return hasattr(obj, "chat") and hasattr(obj, "base_url") and not hasattr(obj, "complete")


class EvaluatorResult(dict[str, Any]):
    """openevals' result dict (``{"key", "score", "comment", "metadata"}``), also readable as
    attributes (``r.score``, ``r.comment``; ``r.reasoning`` = the comment; ``r.passed``), the
    agent-evaluation catalog's spelling, where ``r.score`` is a number ("score.score: float
    0.0-1.0") while ``r["score"]`` stays openevals' bool.

    >>> r = EvaluatorResult(key="k", score=True, comment="ok", metadata=None)
    >>> r["score"] is True, r.score, r.passed, r.reasoning
    (True, 1.0, True, 'ok')
    """

    def __getattr__(self, name: str) -> Any:
        if name == "reasoning":
            return self.get("comment")
        if name == "score":  # the catalog's spelling reads a number (0.0-1.0); r["score"] keeps openevals' bool
            score = self.get("score")
            return float(score) if isinstance(score, bool) else score
        if name == "passed":
            score = self.get("score")
            return None if score is None else bool(score >= 0.5)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def openevals_result(result: Result, *, raw_object: bool | type = False, comment: bool = True) -> Any:
    """An assay Result as openevals returns it: ``{"key", "score", "comment", "metadata"}`` with
    the judge's own answer as the score (a bool for pass/fail verdicts, the chosen number for
    choices); with ``raw_object`` (``output_schema``) the parsed verdict object itself (an instance
    when ``raw_object`` is the pydantic class, as openevals returns it). A result
    that could not be scored raises, as openevals does.

    As in openevals, ``metadata`` is ``None`` and ``comment`` is the judge's reasoning (``None``
    without one, and always ``None`` with ``comment=False``: the deterministic evaluators); assay's
    richer comments and metadata stay on the assay Results (``.evaluator``, run outputs)."""
    if result.error is not None:
        raise EvaluatorError(f"{result.key}: {result.error}")
    if raw_object and isinstance(result.value, dict):
        if isinstance(raw_object, type) and hasattr(raw_object, "model_validate"):  # a pydantic class
            return raw_object.model_validate(result.value)
        return result.value
    value, score = result.value, result.score
    if isinstance(value, bool):  # a pass/fail verdict: the judge's answer (True = toxic for TOXICITY)
        score = value if score in (0.0, 1.0) else score
    elif isinstance(value, int | float):  # the chosen number (choices), the number (continuous)
        score = value
    return EvaluatorResult(key=result.key, score=score, comment=result.comment if comment else None, metadata=None)


class CompatEvaluator(Generic[R]):
    """A sync evaluator function in openevals' shape: ``evaluator(inputs=, outputs=,
    reference_outputs=, **kwargs)`` returns a dict (a list for multi-key evaluators).
    ``.evaluator`` is the assay evaluator behind it (usable in a run; its ``evaluate()`` returns
    assay Results)."""

    def __init__(
        self,
        evaluator: BaseEvaluator[Any],
        *,
        raw_object: bool | type = False,
        many: bool = False,
        raw_args: bool = False,
        errors_fail: bool = False,
        comment: bool | None = None,
    ) -> None:
        self.evaluator = evaluator
        # openevals' comment is a judge's reasoning (or a code checker's errors); None elsewhere
        self._comment = isinstance(evaluator, JudgeEvaluator) or errors_fail if comment is None else comment
        self.key = evaluator.key
        self._raw = raw_object
        self._many = many
        self._raw_args = raw_args
        self._errors_fail = errors_fail
        #: Template variables a call must give (openevals' string prompts: all of them).
        self.required_variables: tuple[str, ...] = ()

    def _check_variables(self, inputs: Any, outputs: Any, reference_outputs: Any, kwargs: dict[str, Any]) -> None:
        """openevals formats a template with the values given: a variable left out (``None``) is
        a ``KeyError`` (e.g. ``CORRECTNESS_PROMPT`` without ``reference_outputs``)."""
        given = {"inputs": inputs, "outputs": outputs, "reference_outputs": reference_outputs, **kwargs}
        for name in self.required_variables:
            if given.get(name) is None:
                raise KeyError(name)

    def _with_raw_args(self, inputs: Any, outputs: Any, reference_outputs: Any, kwargs: dict[str, Any]) -> None:
        """A prompt function receives the call's own arguments (openevals passes them raw)."""
        if self._raw_args:
            raw = {"inputs": inputs, "outputs": outputs, "reference_outputs": reference_outputs, **kwargs}
            kwargs[RAW_ARGS] = raw

    def __call__(self, *, inputs: Any = None, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any) -> R:
        self._check_variables(inputs, outputs, reference_outputs, kwargs)
        self._with_raw_args(inputs, outputs, reference_outputs, kwargs)
        with compat_errors():
            results = self.evaluator.evaluate_all(
                inputs=inputs, outputs=outputs, reference_outputs=reference_outputs, **kwargs
            )
        return cast(R, self._shape(results))

    def _shape(self, results: list[Result]) -> Any:
        if self._errors_fail:  # openevals' code checkers: a tool that failed to run is a failing score
            results = [Result(r.key, 0.0, False, r.error, r.metadata) if r.error is not None else r for r in results]
        if self._many:  # openevals' multi-key evaluators return a list of results
            return [openevals_result(r, comment=self._comment) for r in results]
        return openevals_result(results[0], raw_object=self._raw, comment=self._comment)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.evaluator.name!r}, key={self.key!r})"


class AsyncCompatEvaluator(CompatEvaluator[R]):
    """The async twin: ``await evaluator(outputs=...)`` (the ``create_async_…`` factories)."""

    async def __call__(  # type: ignore[override]  # the awaited twin of the sync call
        self, *, inputs: Any = None, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any
    ) -> R:
        self._check_variables(inputs, outputs, reference_outputs, kwargs)
        self._with_raw_args(inputs, outputs, reference_outputs, kwargs)
        with compat_errors():
            results = await self.evaluator.aevaluate_all(
                inputs=inputs, outputs=outputs, reference_outputs=reference_outputs, **kwargs
            )
        return cast(R, self._shape(results))


def wrap(
    evaluator: BaseEvaluator[Any],
    *,
    is_async: bool = False,
    raw_object: bool | type = False,
    many: bool = False,
    raw_args: bool = False,
    errors_fail: bool = False,
    comment: bool | None = None,
) -> Any:
    """The openevals-shaped function around ``evaluator`` (``many``: a list of results;
    ``raw_args``: the call's raw arguments reach a prompt function; ``errors_fail``: a result
    that could not be scored is a failing score with the error as its comment, not an exception)."""
    cls = AsyncCompatEvaluator if is_async else CompatEvaluator
    return cls(evaluator, raw_object=raw_object, many=many, raw_args=raw_args, errors_fail=errors_fail, comment=comment)


def as_async(evaluator: CompatEvaluator[R]) -> AsyncCompatEvaluator[R]:
    """The async twin of a sync evaluator function (same assay evaluator behind it)."""
    twin: AsyncCompatEvaluator[R] = wrap(
        evaluator.evaluator,
        is_async=True,
        raw_object=evaluator._raw,
        many=evaluator._many,
        raw_args=evaluator._raw_args,
        errors_fail=evaluator._errors_fail,
        comment=evaluator._comment,
    )
    twin.required_variables = evaluator.required_variables
    return twin


__all__ = [
    "AsyncCompatEvaluator",
    "CompatConfigError",
    "CompatEvaluator",
    "EvaluatorResult",
    "as_async",
    "compat_errors",
    "judge_params",
    "llm_judge_evaluator",
    "openevals_result",
    "prompt_param",
    "template_variables",
    "wrap",
]
