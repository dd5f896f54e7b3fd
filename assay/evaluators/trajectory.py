"""Trajectory match: compare the agent's tool calls with a reference trajectory.

Semantics follow openevals 0.2.2 where openevals, agentevals and potato disagree (see
docs/semantics.md for the full matrix); ``subsequence`` is assay's addition.

* ``strict``: message by message (same number of messages, same roles, same "has tool calls"),
  and within each assistant message the same multiset of tool calls. Content is not compared.
  With ``strict_scope="tool_calls"`` strict instead compares the flat sequence of tool calls
  position by position (potato's reading), ignoring message boundaries and non-tool messages.
* ``unordered``: the same multiset of tool calls, any order.
* ``subset``: every agent call is covered by a distinct reference call (the agent called only
  reference tools).
* ``superset``: every reference call is covered by a distinct agent call (extras allowed).
* ``subsequence``: the reference calls appear in order within the agent's calls.

Calls match when the names are equal (case-sensitive) and the args matcher accepts
``(agent_args, reference_args)``. Multiset pairing is greedy first-fit, like all three references.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import orjson
from pydantic import Field, field_validator

from assay.evaluators.args_match import ARGS_MODES, MATCHERS, ArgsMode, Matcher, build_overrides
from assay.evaluators.base import Evaluator, EvaluatorParams
from assay.evaluators.tool_calls import is_listed, trace_calls
from assay.exceptions import ConfigError
from assay.records import Result
from assay.traces.model import Message, ToolCall, Trace

TrajectoryMode = Literal["strict", "unordered", "subset", "superset", "subsequence"]


def describe_call(call: ToolCall) -> str:
    args = orjson.dumps(call.args, option=orjson.OPT_SORT_KEYS, default=str).decode()
    if len(args) > 120:
        args = args[:117] + "..."
    return f"{call.name}({args})"


class CallMatcher:
    """Name equality plus the configured args matcher (with per-tool overrides)."""

    __slots__ = ("default", "overrides")

    def __init__(self, mode: str, overrides: dict[str, Matcher]):
        self.default: Matcher = MATCHERS[mode]
        self.overrides = overrides

    def __call__(self, out: ToolCall, ref: ToolCall) -> bool:
        if out.name != ref.name:
            return False
        m = self.overrides.get(ref.name, self.default) if self.overrides else self.default
        return m(out.args, ref.args)


def cover(
    covering: Sequence[ToolCall], covered: Sequence[ToolCall], match: CallMatcher, covering_is_output: bool
) -> int | None:
    """Greedy first-fit: give each call of ``covered`` its own call of ``covering``.

    Returns the index of the first call of ``covered`` left without a partner, or None when all
    are covered. The matcher always receives (output call, reference call).
    """
    used = [False] * len(covering)
    for i, c in enumerate(covered):
        for j, candidate in enumerate(covering):
            if used[j]:
                continue
            ok = match(candidate, c) if covering_is_output else match(c, candidate)
            if ok:
                used[j] = True
                break
        else:
            return i
    return None


def _strict_messages(out: list[Message], ref: list[Message], match: CallMatcher) -> str | None:
    if len(out) != len(ref):
        return f"{len(out)} messages vs {len(ref)} in the reference"
    for i, (a, b) in enumerate(zip(out, ref, strict=True)):
        ac, bc = a.tool_calls, b.tool_calls
        if a.role != b.role:
            return f"message {i}: role {a.role!r} vs {b.role!r} in the reference"
        if not ac:
            if bc:
                return f"message {i}: agent message has no tool calls, the reference message does"
            continue
        if not bc:
            return f"message {i}: agent message has tool calls, the reference message does not"
        if len(ac) != len(bc):
            return f"message {i}: {len(ac)} tool calls vs {len(bc)} in the reference"
        if len(ac) == 1:  # the common case: one call per message
            if not match(ac[0], bc[0]):
                return f"message {i}: agent call {describe_call(ac[0])} has no match in the reference message"
        else:
            miss = cover(bc, ac, match, covering_is_output=False)
            if miss is not None:
                return f"message {i}: agent call {describe_call(ac[miss])} has no match in the reference message"
    return None


def _strict_calls(out: list[ToolCall], ref: list[ToolCall], match: CallMatcher) -> str | None:
    if len(out) != len(ref):
        return f"{len(out)} agent tool calls vs {len(ref)} in the reference"
    for i, (a, b) in enumerate(zip(out, ref, strict=True)):
        if not match(a, b):
            return f"tool call {i}: agent {describe_call(a)} vs reference {describe_call(b)}"
    return None


def _superset(out: list[ToolCall], ref: list[ToolCall], match: CallMatcher) -> str | None:
    miss = cover(out, ref, match, covering_is_output=True)
    if miss is None:
        return None
    return f"reference call {miss} {describe_call(ref[miss])} not found among the agent's calls"


def _subset(out: list[ToolCall], ref: list[ToolCall], match: CallMatcher) -> str | None:
    miss = cover(ref, out, match, covering_is_output=False)
    if miss is None:
        return None
    return f"agent call {miss} {describe_call(out[miss])} is not in the reference"


def _subsequence(out: list[ToolCall], ref: list[ToolCall], match: CallMatcher) -> str | None:
    j = 0
    for call in out:
        if j < len(ref) and match(call, ref[j]):
            j += 1
    if j == len(ref):
        return None
    return f"reference call {j} {describe_call(ref[j])} does not appear in order after the earlier matches"


def _not_a_trajectory(trace: Trace) -> bool:
    """A non-empty list that no trajectory format accepted (e.g. messages without a role).

    Normalization keeps such a list as a plain value with no messages; scoring it as an empty
    trajectory would be a silent wrong answer (openevals raises on it).
    """
    return trace.format == "value" and type(trace.final_output) is list and bool(trace.final_output)


class TrajectoryMatchParams(EvaluatorParams):
    mode: TrajectoryMode = "strict"
    """strict | unordered | subset | superset | subsequence (``trajectory_match_mode`` also accepted)."""
    tool_args_match_mode: ArgsMode = "exact"
    """exact | ignore | subset (agent args ⊆ reference) | superset (agent args ⊇ reference)."""
    tool_args_match_overrides: dict[str, Any] = Field(default_factory=dict)
    """Per tool: a mode string, a list of dotted field paths, a callable, or {callable: "module:fn"}."""
    strict_scope: Literal["messages", "tool_calls"] = "messages"
    """strict compares messages (openevals/agentevals) or the flat tool-call sequence (potato)."""

    @field_validator("tool_args_match_overrides", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return {} if v is None else v


class TrajectoryMatch(Evaluator[TrajectoryMatchParams]):
    """Deterministic trajectory match in five modes with configurable argument matching."""

    name: ClassVar[str] = "trajectory_match"
    reads_scenario: ClassVar[bool] = False
    reads_text: ClassVar[bool] = False  # tool calls and roles only
    reads_call_ids: ClassVar[bool] = False  # names and arguments, never which call a result answers
    description: ClassVar[str] = (
        "Compare the agent's tool calls with a reference trajectory "
        "(strict | unordered | subset | superset | subsequence)."
    )
    Params = TrajectoryMatchParams
    example: ClassVar[dict[str, Any]] = {
        "mode": "unordered",
        "tool_args_match_mode": "subset",
        "tool_args_match_overrides": {"search": "ignore"},
    }

    def __init__(self, params: Any = None, /, **kwargs: Any) -> None:
        if "trajectory_match_mode" in kwargs:  # the openevals spelling
            kwargs["mode"] = kwargs.pop("trajectory_match_mode")
        if isinstance(params, dict) and "trajectory_match_mode" in params:
            params = {**params, "mode": params["trajectory_match_mode"]}
            del params["trajectory_match_mode"]
        super().__init__(params, **kwargs)

    @property
    def reads_args(self) -> bool:
        p = self.params
        return p.tool_args_match_mode != "ignore" or bool(p.tool_args_match_overrides)

    def default_key(self) -> str:
        return f"trajectory_{self.params.mode}_match"

    def setup(self) -> None:
        p = self.params
        if p.tool_args_match_mode not in ARGS_MODES:  # pragma: no cover - pydantic checks first
            raise ConfigError(f"invalid tool_args_match_mode {p.tool_args_match_mode!r}")
        self._match = CallMatcher(p.tool_args_match_mode, build_overrides(p.tool_args_match_overrides, self.name))
        self._label = p.mode if p.mode != "strict" or p.strict_scope == "messages" else "strict (tool calls)"

    def score(self, trace: Trace) -> Result:
        ref_trace = trace.reference
        if ref_trace is None:
            return Result(self.key, None, None, "no reference trajectory to compare with")
        for side, t in (("outputs", trace), ("reference_outputs", ref_trace)):
            if _not_a_trajectory(t) and not is_listed(t):
                return Result.from_error(
                    self.key, f"{side} is a list but not a list of chat messages, tool names or tool calls"
                )
        mode = self.params.mode
        out_calls = trace_calls(trace)
        ref_calls = trace_calls(ref_trace)
        if mode == "strict":
            flat = self.params.strict_scope == "tool_calls" or is_listed(trace) or is_listed(ref_trace)
            if not flat:
                why = _strict_messages(trace.messages, ref_trace.messages, self._match)
            else:
                why = _strict_calls(out_calls, ref_calls, self._match)
        elif mode == "superset":
            why = _superset(out_calls, ref_calls, self._match)
        elif mode == "subset":
            why = _subset(out_calls, ref_calls, self._match)
        elif mode == "unordered":
            why = _superset(out_calls, ref_calls, self._match) or _subset(out_calls, ref_calls, self._match)
        else:
            why = _subsequence(out_calls, ref_calls, self._match)
        ok = why is None
        summary = (
            f"{self._label} match {'pass' if ok else 'fail'}: "
            f"{len(out_calls)} agent tool call(s) vs {len(ref_calls)} reference"
        )
        return Result(
            self.key,
            1.0 if ok else 0.0,
            ok,
            summary if ok else f"{summary}; {why}",
            {
                "mode": mode,
                "tool_args_match_mode": self.params.tool_args_match_mode,
                "agent_tools": [c.name for c in out_calls],
                "reference_tools": [c.name for c in ref_calls],
            },
        )
