"""``from openevals.code.llm import create_code_llm_as_judge`` (see :mod:`assay.compat`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from assay.compat._core import AsyncCompatEvaluator, CompatEvaluator, llm_judge_evaluator
from assay.compat.openevals.code.base import extraction_strategy
from assay.compat.openevals.prompts import CODE_CORRECTNESS_PROMPT, CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS
from assay.compat.openevals.types import EvaluatorResult as TypedResult
from assay.evaluators.code_judge import CodeJudge


def _build(is_async: bool, p: dict[str, Any]) -> Any:
    return llm_judge_evaluator(
        CodeJudge,
        code_extraction=extraction_strategy(p.pop("code_extraction_strategy"), p.get("code_extractor")),
        is_async=is_async,
        **p,
    )


def create_code_llm_as_judge(
    *,
    prompt: Any,
    model: str | None = None,
    judge: Any = None,
    system: str | None = None,
    feedback_key: str = "code_correctness",
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> CompatEvaluator[TypedResult]:
    """An LLM judge of the code in the output (``code_extraction_strategy``: ``none``,
    ``markdown_code_blocks`` or ``llm``); key ``code_correctness``."""
    return cast("CompatEvaluator[TypedResult]", _build(False, dict(locals())))


def create_async_code_llm_as_judge(
    *,
    prompt: Any,
    model: str | None = None,
    judge: Any = None,
    system: str | None = None,
    feedback_key: str = "code_correctness",
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> AsyncCompatEvaluator[TypedResult]:
    """:func:`create_code_llm_as_judge`, awaited."""
    return cast("AsyncCompatEvaluator[TypedResult]", _build(True, dict(locals())))


__all__ = [
    "CODE_CORRECTNESS_PROMPT",
    "CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS",
    "create_async_code_llm_as_judge",
    "create_code_llm_as_judge",
]
