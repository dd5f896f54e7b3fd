"""Tool-use evaluators: did the agent call a given tool, and how many reference calls did it reproduce."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from assay.evaluators.args_match import MATCHERS, ArgsMode, build_overrides
from assay.evaluators.base import Evaluator, EvaluatorParams
from assay.evaluators.tool_calls import trace_calls
from assay.evaluators.trajectory import CallMatcher
from assay.records import Result
from assay.traces.model import Trace


class ToolUseParams(EvaluatorParams):
    expected_tool: str
    """Name of the tool the agent must call."""
    expected_args: dict[str, Any] | None = None
    """Arguments the call must carry (checked with args_match_mode); None = any arguments."""
    args_match_mode: ArgsMode = "subset"
    """subset/superset: expected_args ⊆ the call's args (potato semantics); exact; ignore."""


class ToolUse(Evaluator[ToolUseParams]):
    """Pass when any agent call has the expected name (and, if given, the expected args)."""

    name: ClassVar[str] = "tool_use"
    reads_scenario: ClassVar[bool] = False
    reads_text: ClassVar[bool] = False  # tool calls only
    reads_call_ids: ClassVar[bool] = False
    description: ClassVar[str] = "Did the agent call a given tool (optionally with expected arguments)?"
    Params = ToolUseParams
    example: ClassVar[dict[str, Any]] = {"expected_tool": "submit", "expected_args": {"id": 1}}

    @property
    def reads_args(self) -> bool:
        return bool(self.params.expected_args) and self.params.args_match_mode != "ignore"

    def default_key(self) -> str:
        return f"tool_use:{self.params.expected_tool}"

    def setup(self) -> None:
        mode = self.params.args_match_mode
        # potato rewrites subset to superset: both mean "the expected args are in the call".
        self._args = MATCHERS["superset" if mode == "subset" else mode]

    def score(self, trace: Trace) -> Result:
        p = self.params
        calls = trace_calls(trace)
        names = [c.name for c in calls]
        ok = any(
            c.name == p.expected_tool and (not p.expected_args or self._args(c.args, p.expected_args)) for c in calls
        )
        with_args = " with expected args" if p.expected_args else ""
        comment = f"tool {p.expected_tool!r} {'called' if ok else 'not called'}{with_args}"
        return Result(self.key, 1.0 if ok else 0.0, ok, comment, {"called_tools": names})


class ToolCallAccuracyParams(EvaluatorParams):
    args_match_mode: ArgsMode = "exact"
    """How arguments are compared: exact | ignore | subset (agent ⊆ reference) | superset."""
    tool_args_match_overrides: dict[str, Any] = Field(default_factory=dict)
    """Per-tool overrides, as for trajectory_match."""


class ToolCallAccuracy(Evaluator[ToolCallAccuracyParams]):
    """Fraction of reference tool calls the agent reproduced (partial credit; extras not penalised)."""

    name: ClassVar[str] = "tool_call_accuracy"
    reads_scenario: ClassVar[bool] = False
    reads_text: ClassVar[bool] = False  # tool calls only
    reads_call_ids: ClassVar[bool] = False
    description: ClassVar[str] = "Fraction of the reference tool calls the agent reproduced (partial credit)."
    Params = ToolCallAccuracyParams
    example: ClassVar[dict[str, Any]] = {"args_match_mode": "exact"}

    @property
    def reads_args(self) -> bool:
        return self.params.args_match_mode != "ignore" or bool(self.params.tool_args_match_overrides)

    def setup(self) -> None:
        self._match = CallMatcher(
            self.params.args_match_mode, build_overrides(self.params.tool_args_match_overrides, self.name)
        )

    def score(self, trace: Trace) -> Result:
        ref = trace_calls(trace.reference) if trace.reference is not None else []
        out = trace_calls(trace)
        if not ref:
            return Result(self.key, None, None, "no reference tool calls to score against")
        used = [False] * len(out)
        hits = 0
        for r in ref:
            for j, o in enumerate(out):
                if not used[j] and self._match(o, r):
                    used[j] = True
                    hits += 1
                    break
        return Result(
            self.key,
            hits / len(ref),
            f"{hits}/{len(ref)}",
            f"reproduced {hits} of {len(ref)} reference tool calls",
            {"matched": hits, "reference_count": len(ref), "agent_count": len(out)},
        )
