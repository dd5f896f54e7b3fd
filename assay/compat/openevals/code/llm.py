"""``from openevals.code.llm import create_code_llm_as_judge`` (see :mod:`assay.compat`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.compat._core import CompatEvaluator, judge_params, prompt_param, wrap
from assay.evaluators.code_judge import CodeJudge


def _build(is_async: bool, p: dict[str, Any]) -> CompatEvaluator:
    ev = CodeJudge(
        prompt=prompt_param(p["prompt"]),
        feedback_key=p["feedback_key"],
        system=p["system"],
        continuous=p["continuous"] or None,
        choices=p["choices"],
        use_reasoning=p["use_reasoning"],
        few_shot_examples=p["few_shot_examples"],
        code_extraction=p["code_extraction_strategy"],
        code_extractor=p["code_extractor"],
        **judge_params(p["judge"], p["model"]),
    )
    return wrap(ev, is_async=is_async)


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
) -> CompatEvaluator:
    """An LLM judge of the code in the output (``code_extraction_strategy``: ``none``,
    ``markdown_code_blocks`` or ``llm``); key ``code_correctness``."""
    return _build(False, dict(locals()))


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
) -> CompatEvaluator:
    """:func:`create_code_llm_as_judge`, awaited."""
    return _build(True, dict(locals()))


__all__ = ["create_async_code_llm_as_judge", "create_code_llm_as_judge"]
