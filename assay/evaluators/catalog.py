"""The agent-evaluation catalog's helper names: ``check_trajectory`` over plain lists of tool
names and ``create_trajectory_llm_as_judge`` with a ``provider:model`` string.

>>> r = check_trajectory(expected=["lookup_order", "process_refund"],
...     actual=["lookup_order", "check_refund_policy", "process_refund", "send_email"], mode="subsequence")
>>> r.passed
True
"""

from __future__ import annotations

from typing import Any

from assay.evaluators.judge_base import JudgeParams
from assay.evaluators.judge_trajectory import TrajectoryJudge
from assay.evaluators.trajectory import TrajectoryMatch
from assay.records import Result


def check_trajectory(*, expected: Any, actual: Any, mode: str = "strict", **params: Any) -> Result:
    """Compare two tool-call sequences (tool names, call dicts or chat messages); arguments are
    ignored unless ``tool_args_match_mode`` says otherwise. ``result.passed`` is the verdict."""
    params.setdefault("tool_args_match_mode", "ignore")
    ev = TrajectoryMatch(mode=mode, strict_scope="tool_calls", **params)
    return ev.evaluate(outputs=list(actual) if isinstance(actual, tuple) else actual, reference_outputs=expected)


def judge_from_model(params: dict[str, Any]) -> dict[str, Any]:
    """openevals' ``model="provider:name"`` as an inline judge, unless the judge evaluators accept
    ``model`` themselves."""
    model = params.get("model")
    if isinstance(model, str) and "model" not in JudgeParams.model_fields and params.get("judge") is None:
        params = dict(params)
        del params["model"]
        provider, sep, name = model.partition(":")
        params["judge"] = {"provider": provider, "model": name} if sep else {"model": model}
    return params


#: agentevals' prompt constants, as the names of assay's prebuilt prompts.
TRAJECTORY_ACCURACY_PROMPT = "trajectory_accuracy"
TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE = "trajectory_accuracy_with_reference"


def create_trajectory_llm_as_judge(**params: Any) -> TrajectoryJudge:
    """A trajectory LLM judge (agentevals' factory name); ``model="openai:o3-mini"`` works.
    ``prompt=TRAJECTORY_ACCURACY_PROMPT`` grades against the reference when one is given."""
    if params.get("prompt") == TRAJECTORY_ACCURACY_PROMPT:
        params = {**params, "prompt": ""}  # the trajectory judge picks the reference-aware variant
    return TrajectoryJudge(judge_from_model(params))


__all__ = [
    "TRAJECTORY_ACCURACY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE",
    "check_trajectory",
    "create_trajectory_llm_as_judge",
    "judge_from_model",
]
