"""Building a canonical Trace step by step, for formats that record an agent run as events.

Observability formats (OTel spans, LangSmith runs, Langfuse observations, flattened Potato
turns) record a tool call and its result separately, sometimes without a call id, sometimes
without the call at all (only a "tool" span). :class:`TraceBuilder` pairs each result with the
call it answers (by id, else the oldest pending call of the same name, else the oldest pending
call) and, when no call was recorded, adds the assistant tool call itself, so every format
yields the same ``assistant(tool_calls) → tool(result)`` shape as an OpenAI trajectory.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from assay.traces.model import Message, ToolCall, Trace, content_text, final_assistant_text
from assay.traces.openai import parse_args

#: Keys of an inputs dict that usually hold the task, in preference order.
TASK_KEYS = ("input", "question", "query", "prompt", "task", "user_input", "text")
#: Keys of an outputs dict that usually hold the answer, in preference order.
ANSWER_KEYS = ("output", "answer", "result", "response", "final_output", "content", "text")


class TraceBuilder:
    """Accumulates messages; pairs tool results with their calls; builds the Trace."""

    __slots__ = ("_next_id", "_pending", "_seen_results", "messages", "tool_errors", "warnings")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.warnings: list[str] = []
        self.tool_errors: list[str] = []
        self._pending: list[ToolCall] = []
        self._seen_results: set[str] = set()
        self._next_id = 0

    def synth_id(self) -> str:
        """A call id for formats that record none (``call_0``, ``call_1``, …)."""
        self._next_id += 1
        return f"call_{self._next_id - 1}"

    def add(self, message: Message) -> None:
        """Append any message; assistant tool calls become pending, tool results settle them."""
        if message.role == "assistant" and message.tool_calls:
            for call in message.tool_calls:
                if call.id is None:
                    call.id = self.synth_id()
            self._pending.extend(message.tool_calls)
        elif message.role == "tool" and message.tool_call_id is not None:
            self._settle(message.tool_call_id)
            self._seen_results.add(message.tool_call_id)
        self.messages.append(message)

    def add_all(self, messages: list[Message]) -> None:
        for m in messages:
            self.add(m)

    def assistant(self, content: Any = "", calls: list[ToolCall] | None = None) -> None:
        """Append an assistant message (text and/or tool calls)."""
        self.add(Message("assistant", content, calls or None))

    def is_pending(self, name: str) -> bool:
        """Whether a call to the tool ``name`` awaits its result."""
        return any(c.name == name for c in self._pending)

    def has_result(self, call_id: str | None) -> bool:
        """Whether a result for this call id was already added (formats repeat history)."""
        return call_id is not None and call_id in self._seen_results

    def tool_result(
        self,
        content: Any,
        *,
        call_id: str | None = None,
        name: str | None = None,
        args: Any = None,
        is_error: bool = False,
        synthesize: bool = True,
    ) -> None:
        """Append a tool result, pairing it with its pending call or recording the call first.

        ``args`` (the tool's recorded input) is used only when no call was recorded. With
        ``synthesize=False`` an unpaired result is added as a tool message with no call id.
        """
        if call_id is not None and call_id in self._seen_results:
            return
        call = self._find_pending(call_id, name)
        if call is None and not synthesize:
            self.add(Message("tool", content, None, call_id, name))
            return
        if call is None:
            parsed, err = loose_args(args)
            call = ToolCall(name or "unknown_tool", parsed, call_id or self.synth_id(), err)
            self.add(Message("assistant", "", [call]))
        assert call.id is not None  # every pending call was given an id in add()
        if is_error:
            self.tool_errors.append(call.id)
        self.add(Message("tool", content, None, call.id, name or call.name))

    def add_llm_input(self, messages: list[Message]) -> None:
        """Add what is new in one LLM call's input messages.

        The first call's input is the conversation so far (system prompt, task) and is added
        whole. Later calls repeat the history, so only the messages after the input's last
        assistant message are new: tool results not yet recorded and new user turns.
        """
        if not self.messages:
            self.add_all(messages)
            return
        last_ai = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
        for m in messages[last_ai + 1 :]:
            if m.role == "tool":
                if m.tool_call_id is None or not self.has_result(m.tool_call_id):
                    self.tool_result(m.content, call_id=m.tool_call_id, name=m.name, synthesize=False)
            elif m.role == "user" and not self._repeats_user(m):
                self.add(m)

    def _repeats_user(self, m: Message) -> bool:
        text = content_text(m.content)
        return any(p.role == "user" and content_text(p.content) == text for p in self.messages)

    def _find_pending(self, call_id: str | None, name: str | None) -> ToolCall | None:
        if call_id is not None:
            for call in self._pending:
                if call.id == call_id:
                    return call
            return None
        if name is not None:
            return next((c for c in self._pending if c.name == name), None)
        return self._pending[0] if self._pending else None

    def _settle(self, call_id: str) -> None:
        for i, call in enumerate(self._pending):
            if call.id == call_id:
                del self._pending[i]
                return

    def build(
        self,
        format: str,
        *,
        id: Any = None,
        input: Any = None,
        final_output: Any = None,
        usage: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Trace:
        """The Trace: ``final_output`` defaults to the last assistant text, ``input`` to the
        first user message's text."""
        messages = self.messages
        if final_output is None:
            final_output = final_assistant_text(messages)
        if input is None:
            input = first_user_text(messages)
        md = dict(metadata) if metadata else {}
        if self.tool_errors:
            md["tool_errors"] = list(self.tool_errors)
        return Trace(
            id=None if id is None else str(id),
            input=input,
            messages=messages,
            final_output=final_output,
            metadata=md,
            usage=usage or None,
            format=format,
            warnings=self.warnings or None,
        )


def parent_cycles(parents: Mapping[Any, Any]) -> list[list[Any]]:
    """The cycles of parent links among ``parents`` (id → its parent's id, None for a root): each
    cycle's ids in child → parent order, starting at its smallest id (as text), so the same links
    name the same cycle whatever their order. A parent id that is not a key ends a chain (a parent
    outside the export: its child is a root). Runs or observations in a cycle, or below one, are
    reachable from no root: a tree walk would drop them without a word.

    >>> parent_cycles({"r": None, "a": "b", "b": "a", "c": "a", "s": "s"})
    [['a', 'b'], ['s']]
    """
    done: set[Any] = set()
    cycles: list[list[Any]] = []
    for start in parents:
        path: dict[Any, int] = {}  # the chain being followed, in order
        node = start
        while node is not None and node in parents and node not in done and node not in path:
            path[node] = len(path)
            node = parents[node]
        if node is not None and node in path:
            cycle = list(path)[path[node] :]
            first = min(range(len(cycle)), key=lambda i: str(cycle[i]))
            cycles.append(cycle[first:] + cycle[:first])
        done.update(path)
    return cycles


def cycle_text(cycles: list[list[Any]], limit: int = 3) -> str:
    """Cycles for an error message: ``a → b → a`` each, the first ``limit`` of them."""
    shown = ["; ".join(" → ".join(map(str, [*c, c[0]])) for c in cycles[:limit])]
    if len(cycles) > limit:
        shown.append(f" (and {len(cycles) - limit} more)")
    return "".join(shown)


def first_user_text(messages: list[Message]) -> str | None:
    """The text of the first user message, or None."""
    for m in messages:
        if m.role == "user":
            return content_text(m.content) or None
    return None


def task_of(inputs: Any) -> Any:
    """The task an inputs value describes: a string as is; a dict's ``input``/``question``/…
    string; otherwise None (the caller falls back to the first user message)."""
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, dict):
        for key in TASK_KEYS:
            v = inputs.get(key)
            if isinstance(v, str) and v:
                return v
    return None


def answer_of(outputs: Any) -> Any:
    """The answer an outputs value holds: a dict's ``output``/``answer``/… value (text blocks
    joined), else the value itself (None for an empty dict)."""
    if type(outputs) is dict:
        for key in ANSWER_KEYS:
            if key in outputs:
                v = outputs[key]
                return content_text(v) if type(v) is list else v
        return outputs or None
    return outputs


def usage_of(input_tokens: Any, output_tokens: Any, total_tokens: Any = None) -> dict[str, int] | None:
    """``{"input_tokens", "output_tokens", "total_tokens"}`` from whatever counts are known."""
    usage: dict[str, int] = {}
    for key, raw in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
        n = as_int(raw)
        if n is not None:
            usage[key] = n
    total = as_int(total_tokens)
    if total is None and usage:
        total = sum(usage.values())
    if total is not None:
        usage["total_tokens"] = total
    return usage or None


def add_usage(acc: dict[str, int] | None, more: dict[str, int] | None) -> dict[str, int] | None:
    """Sum two usage dicts (either may be None)."""
    if more is None:
        return acc
    if acc is None:
        return dict(more)
    for k, v in more.items():
        acc[k] = acc.get(k, 0) + v
    return acc


def loose_args(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool input as recorded by tracers: a dict, JSON text, or a Python ``repr`` of a dict
    (LangChain records ``str(tool_input)``); otherwise like :func:`parse_args`."""
    args, err = parse_args(raw)
    if err is not None and "_raw" in args and isinstance(raw, str) and raw.lstrip().startswith("{"):
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return args, err
        if type(value) is dict:
            return value, None
    return args, err


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty dict (for optional nested objects)."""
    return value if type(value) is dict else {}


def as_int(value: Any) -> int | None:
    """An int from an int, an integral float or a numeric string (OTLP sends int64 as strings)."""
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None
