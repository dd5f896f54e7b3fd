"""The trajectory factories of openevals and agentevals (one implementation, two import paths).

>>> ev = create_trajectory_match_evaluator(trajectory_match_mode="unordered")
>>> call = lambda n: {"role": "assistant", "tool_calls": [{"function": {"name": n, "arguments": "{}"}}]}
>>> ev(outputs=[call("a"), call("b")], reference_outputs=[call("b"), call("a")])["score"]
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from assay.compat._core import AsyncCompatEvaluator, CompatEvaluator, compat_errors, llm_judge_evaluator, wrap
from assay.compat.openevals.types import EvaluatorResult as TypedResult
from assay.compat.openevals.types import ToolArgsMatchMode, TrajectoryMatchMode
from assay.evaluators.args_match import _MISSING, _resolve
from assay.evaluators.judge_trajectory import REFERENCE_FREE, WITH_REFERENCE, TrajectoryJudge
from assay.evaluators.trajectory import TrajectoryMatch
from assay.judges.prompts import get_prompt

# the same texts as assay.compat.openevals.prompts (that package imports this module)
TRAJECTORY_ACCURACY_PROMPT = get_prompt(REFERENCE_FREE).template
TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE = get_prompt(WITH_REFERENCE).template


def missing_path_fails(paths: list[str]) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    """openevals' field-list override: every dotted path must be present on both sides and equal
    (a path missing on both sides fails; agentevals 0.0.9 and assay's own evaluator match it)."""
    split = [p.split(".") for p in paths]

    def match(out: dict[str, Any], ref: dict[str, Any]) -> bool:
        for steps in split:
            a, b = _resolve(out, steps), _resolve(ref, steps)
            if a is _MISSING or b is _MISSING or a != b:
                return False
        return True

    return match


def _match(
    trajectory_match_mode: str,
    tool_args_match_mode: str,
    tool_args_match_overrides: dict[str, Any] | None,
    is_async: bool,
    *,
    openevals_paths: bool = True,
) -> Any:
    overrides = dict(tool_args_match_overrides or {})
    if openevals_paths:
        for tool, spec in overrides.items():
            if isinstance(spec, list) and spec and all(isinstance(p, str) for p in spec):
                overrides[tool] = missing_path_fails(spec)
    with compat_errors():
        evaluator = TrajectoryMatch(
            mode=trajectory_match_mode,
            tool_args_match_mode=tool_args_match_mode,
            tool_args_match_overrides=overrides,
        )
    return wrap(evaluator, is_async=is_async)


def create_trajectory_match_evaluator(
    *,
    trajectory_match_mode: TrajectoryMatchMode = "strict",
    tool_args_match_mode: ToolArgsMatchMode = "exact",
    tool_args_match_overrides: dict[str, Any] | None = None,
) -> CompatEvaluator[TypedResult]:
    """Deterministic trajectory match (``strict``, ``unordered``, ``subset``, ``superset``);
    key ``trajectory_<mode>_match``, a bool score. See docs/semantics.md."""
    return cast(
        "CompatEvaluator[TypedResult]",
        _match(trajectory_match_mode, tool_args_match_mode, tool_args_match_overrides, False),
    )


def create_async_trajectory_match_evaluator(
    *,
    trajectory_match_mode: TrajectoryMatchMode = "strict",
    tool_args_match_mode: ToolArgsMatchMode = "exact",
    tool_args_match_overrides: dict[str, Any] | None = None,
) -> AsyncCompatEvaluator[TypedResult]:
    """:func:`create_trajectory_match_evaluator`, awaited."""
    return cast(
        "AsyncCompatEvaluator[TypedResult]",
        _match(trajectory_match_mode, tool_args_match_mode, tool_args_match_overrides, True),
    )


def _judge(**params: Any) -> Any:
    return llm_judge_evaluator(TrajectoryJudge, **params)


def create_trajectory_llm_as_judge(
    *,
    prompt: Any = TRAJECTORY_ACCURACY_PROMPT,
    model: str | None = None,
    system: str | None = None,
    judge: Any = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    feedback_key: str = "trajectory_accuracy",
) -> CompatEvaluator[TypedResult]:
    """An LLM judge of the whole trajectory (``outputs`` = the messages; ``reference_outputs``
    with ``TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE``); key ``trajectory_accuracy``."""
    return cast("CompatEvaluator[TypedResult]", _judge(**locals(), is_async=False))


def create_async_trajectory_llm_as_judge(
    *,
    prompt: Any = TRAJECTORY_ACCURACY_PROMPT,
    model: str | None = None,
    system: str | None = None,
    judge: Any = None,
    continuous: bool = False,
    choices: list[float] | None = None,
    use_reasoning: bool = True,
    few_shot_examples: list[dict[str, Any]] | None = None,
    feedback_key: str = "trajectory_accuracy",
) -> AsyncCompatEvaluator[TypedResult]:
    """:func:`create_trajectory_llm_as_judge`, awaited."""
    return cast("AsyncCompatEvaluator[TypedResult]", _judge(**locals(), is_async=True))


__all__ = [
    "TRAJECTORY_ACCURACY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE",
    "create_async_trajectory_llm_as_judge",
    "create_async_trajectory_match_evaluator",
    "create_trajectory_llm_as_judge",
    "create_trajectory_match_evaluator",
]
