"""Trajectory judge: an LLM grades the agent's whole trajectory, with or without a reference.

The trajectory is rendered compactly for the judge, one line per message::

    [user] weather in Paris?
    [assistant] -> get_weather({"city":"Paris"})
    [tool get_weather] 18C, sunny
    [assistant] It is 18C and sunny.

Tool results longer than ``max_tool_result_chars`` are truncated. With ``reference: auto`` the
reference-aware prompt is used when the record has a reference trajectory, the reference-free one
otherwise (openevals always uses the reference prompt and leaves the reference empty; potato
appends the reference when there is one — auto does what both mean).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from assay.evaluators.llm_judge import CompiledPrompt, LLMJudge, LLMJudgeParams
from assay.exceptions import EvaluatorError
from assay.traces.model import Trace

WITH_REFERENCE = "trajectory_accuracy_with_reference"
REFERENCE_FREE = "trajectory_accuracy"


class TrajectoryJudgeParams(LLMJudgeParams):
    prompt: str = ""
    """A template or prebuilt prompt name; empty: ``trajectory_accuracy`` or
    ``trajectory_accuracy_with_reference`` depending on ``reference``."""
    reference: Literal["auto", "required", "ignore"] = "auto"
    """auto: compare with the reference trajectory when the record has one; required: a record
    without one is an error; ignore: always grade reference-free."""
    outputs_as: Literal["auto", "final_output", "trajectory"] | None = "trajectory"
    """How the trajectory renders (default: the compact trajectory)."""


class TrajectoryJudge(LLMJudge):
    """LLM judge of an agent trajectory (reference-free or against a reference)."""

    name: ClassVar[str] = "trajectory_judge"
    description: ClassVar[str] = (
        "LLM judge of the agent's trajectory (logical, efficient, equivalent to a reference when given); "
        "pass/fail or continuous."
    )
    Params = TrajectoryJudgeParams
    example: ClassVar[dict[str, Any]] = {
        "judge": "gpt4o_mini",
        "continuous": True,
        "max_tool_result_chars": 300,
    }
    fallback_key: ClassVar[str] = "trajectory_accuracy"

    params: TrajectoryJudgeParams

    def default_key(self) -> str:
        if self.params.feedback_key:
            return self.params.feedback_key
        return self.fallback_key

    def setup(self) -> None:
        super().setup()
        if not self.params.prompt:
            self._free = self.compile(REFERENCE_FREE)
            self._with_ref = self.compile(WITH_REFERENCE)

    def prompt_for(self, trace: Trace) -> CompiledPrompt:
        has_ref = trace.reference is not None and (
            bool(trace.reference.messages) or trace.reference.final_output is not None
        )
        mode = self.params.reference
        if mode == "required" and not has_ref:
            raise EvaluatorError("no reference trajectory (reference: required)")
        if self.params.prompt:
            return self._main
        return self._with_ref if has_ref and mode != "ignore" else self._free


__all__ = ["TrajectoryJudge", "TrajectoryJudgeParams"]
