"""openevals' ``create_llm_as_judge`` / ``create_async_llm_as_judge`` over assay's LLM judge.

Change only the import line of openevals code::

    from assay.compat.openevals.llm import create_llm_as_judge
    from assay.compat.openevals.prompts import CORRECTNESS_PROMPT

    evaluator = create_llm_as_judge(prompt=CORRECTNESS_PROMPT, model="openai:o3-mini")
    evaluator(inputs="...", outputs="...", reference_outputs="...")
    # {'key': 'score', 'score': True, 'comment': '...', 'metadata': {...}}

The call goes through assay's judge endpoint (``OPENAI_BASE_URL``/``OPENAI_API_KEY`` honoured),
with its retries and limits. ``evaluator.evaluator`` is the assay :class:`~assay.evaluators.LLMJudge`.
"""

from __future__ import annotations

from typing import Any

from assay.compat._core import CompatEvaluator, llm_judge_evaluator
from assay.evaluators.llm_judge import LLMJudge


def _raw_object(output_schema: Any) -> bool | type:
    """What ``output_schema`` makes a call return: an instance of a pydantic class, else the dict."""
    if isinstance(output_schema, type) and hasattr(output_schema, "model_validate"):
        return output_schema
    return output_schema is not None


def _build(*, output_schema: Any, is_async: bool, **params: Any) -> CompatEvaluator:
    return llm_judge_evaluator(
        LLMJudge,
        output_schema=output_schema,
        raw_object=_raw_object(output_schema),
        is_async=is_async,
        strict_variables=True,  # openevals formats the template: a variable not given is a KeyError
        **params,
    )


def create_llm_as_judge(
    *,
    prompt: Any,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    output_schema: Any = None,
) -> CompatEvaluator:
    """An LLM-as-judge evaluator function with openevals' arguments and results: a bool score
    (``continuous``: a number in [0, 1]; ``choices``: the chosen number), the reasoning as
    ``comment``; with ``output_schema`` (a JSON schema, TypedDict or pydantic model) the parsed
    object itself. Extra keyword arguments of a call fill extra template variables."""
    return _build(**locals(), is_async=False)


def create_async_llm_as_judge(
    *,
    prompt: Any,
    feedback_key: str = "score",
    judge: Any = None,
    model: str | None = None,
    system: str | None = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    output_schema: Any = None,
) -> CompatEvaluator:
    """:func:`create_llm_as_judge` whose evaluator is awaited: ``await evaluator(outputs=...)``."""
    return _build(**locals(), is_async=True)


__all__ = ["create_async_llm_as_judge", "create_llm_as_judge"]
