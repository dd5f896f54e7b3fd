"""OpenAI chat-completions messages (and LangChain-style / canonical tool calls) → canonical messages.

Accepted per message: ``role`` system/developer/user/assistant/tool/function (plus the LangChain
aliases human/ai), ``content`` as a string, None or a list of content blocks, ``tool_calls`` whose
entries are OpenAI style (``{"id", "type": "function", "function": {"name", "arguments"}}`` with
JSON-string or dict arguments) or LangChain/canonical style (``{"id", "name", "args"}``), and the
legacy ``function_call``. Arguments that do not parse are kept (``{"_raw": text}``) and flagged.
"""

from __future__ import annotations

from typing import Any

import orjson

from assay.exceptions import NormalizationError
from assay.traces.model import Message, ToolCall

ROLE_ALIASES: dict[str, str] = {
    "system": "system",
    "developer": "developer",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "tool": "tool",
    "function": "tool",
}

_loads = orjson.loads
_JSONDecodeError = orjson.JSONDecodeError


def parse_args(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Parse tool-call arguments into a dict; never raises.

    Returns ``(args, error)``: a dict is used as is; None or ``""`` give ``{}``; a JSON object
    string gives that object; other JSON gives ``{"_value": parsed}``; text that is not JSON gives
    ``{"_raw": text}``. ``error`` describes the defect, or is None.
    """
    if type(raw) is dict:
        return raw, None
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, str | bytes):
        try:
            parsed = _loads(raw)
        except _JSONDecodeError as exc:
            text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
            _DEFECTS[0] += 1
            return {"_raw": text}, f"tool arguments are not valid JSON ({exc})"
        if type(parsed) is dict:
            return parsed, None
        _DEFECTS[0] += 1
        return {"_value": parsed}, f"tool arguments are JSON but not an object ({type(parsed).__name__})"
    if isinstance(raw, dict):
        return dict(raw), None
    _DEFECTS[0] += 1
    return {"_value": raw}, f"tool arguments are not an object ({type(raw).__name__})"


def parse_tool_call(tc: Any, where: str | tuple[int, int]) -> ToolCall:
    """One OpenAI- or LangChain-style tool call dict → ToolCall.

    ``where`` names the call in error messages: a text, or (message index, call index).
    """
    if type(tc) is dict:
        fn = tc.get("function")
        if fn is not None:
            if type(fn) is dict:
                name = fn.get("name")
                raw = fn.get("arguments")
            else:
                raise NormalizationError(f"{_where(where)}: 'function' is not an object")
        else:
            name = tc.get("name")
            raw = tc["args"] if "args" in tc else tc.get("arguments", tc.get("input"))
    else:
        raise NormalizationError(f"{_where(where)}: tool call is not an object")
    if type(name) is not str or not name:
        raise NormalizationError(f"{_where(where)}: tool call has no name")
    if type(raw) is str and raw:
        try:
            parsed = _loads(raw)
        except _JSONDecodeError:
            parsed = _MISSING
        if type(parsed) is dict:
            return ToolCall(name, parsed, tc.get("id"))
    args, err = parse_args(raw)
    return ToolCall(name, args, tc.get("id"), err)


_MISSING = object()


def _where(where: str | tuple[int, int]) -> str:
    return where if isinstance(where, str) else f"message {where[0]} tool call {where[1]}"


def parse_message(msg: Any, index: int) -> Message:
    """One OpenAI chat message dict → Message. Raises NormalizationError on a bad shape."""
    if type(msg) is not dict:
        raise NormalizationError(f"message {index}: expected an object, got {type(msg).__name__}")
    role_raw = msg.get("role")
    if role_raw is None:
        role_raw = msg.get("type")  # LangChain serialized messages use "type"
    role = ROLE_ALIASES.get(role_raw) if isinstance(role_raw, str) else None
    if role is None:
        raise NormalizationError(f"message {index}: unknown role {role_raw!r}")
    content = msg.get("content")
    if content is None:
        content = ""
    calls: list[ToolCall] | None = None
    raw_calls = msg.get("tool_calls")
    if raw_calls:
        if type(raw_calls) is not list:
            raise NormalizationError(f"message {index}: 'tool_calls' is not a list")
        calls = [parse_tool_call(tc, (index, j)) for j, tc in enumerate(raw_calls)]
    fc = msg.get("function_call")
    if fc and role == "assistant":
        call = parse_tool_call(fc, f"message {index} function_call")
        calls = [*calls, call] if calls else [call]
    tool_call_id = msg.get("tool_call_id")
    name = msg.get("name")
    if role_raw == "function" and tool_call_id is None and isinstance(name, str):
        tool_call_id = name
    return Message(role, content, calls, tool_call_id, name if isinstance(name, str) else None)


#: Parsed arguments by their JSON text. A trace and its reference usually repeat the same calls, so
#: each distinct argument text is parsed once per record (``reset_args_memo`` at each record; the
#: size cap bounds library use). Calls with equal text share one dict: evaluators never mutate args.
ARGS_MEMO: dict[str, dict[str, Any]] = {}
_MEMO_CAP = 4096


#: Tool-argument defects found since the last ``reset_args_memo`` (so the pipeline only looks for
#: the defective calls of a record when there are some).
_DEFECTS = [0]


def reset_args_memo() -> None:
    ARGS_MEMO.clear()
    _DEFECTS[0] = 0


def args_defects() -> int:
    """Tool-argument defects found since the last ``reset_args_memo``."""
    return _DEFECTS[0]


def _fast_call(tc: Any, i: int, j: int) -> ToolCall:
    """The common OpenAI tool call (function.name + JSON-object arguments text), else the full parser."""
    if type(tc) is dict:
        fn = tc.get("function")
        if type(fn) is dict:
            name = fn.get("name")
            raw = fn.get("arguments")
            if type(name) is str and name and type(raw) is str:
                args = object_args(raw)
                if args is not None:
                    return ToolCall(name, args, tc.get("id"))
    return parse_tool_call(tc, (i, j))


def object_args(raw: str) -> dict[str, Any] | None:
    """The arguments text parsed, when it is a JSON object (memoized per record); else None (the
    caller then goes through ``parse_args``, which flags and counts the defect)."""
    args = ARGS_MEMO.get(raw)
    if args is None:
        try:
            parsed = _loads(raw)
        except _JSONDecodeError:
            return None
        if type(parsed) is not dict:
            return None
        if len(ARGS_MEMO) >= _MEMO_CAP:
            ARGS_MEMO.clear()
        ARGS_MEMO[raw] = args = parsed
    return args


def parse_plain_openai(messages: list[Any]) -> list[Message] | None:
    """Parse a list that is plainly OpenAI chat (every message a dict with a known role, no
    ``type``/``sender`` keys, no legacy ``function_call``, no Anthropic content blocks) in one pass;
    None as soon as a message is anything else (auto-detection then decides). Detection and
    parsing in one loop: this is the hot path of OpenAI-format runs, so it is written for speed."""
    if not messages:
        return []
    first = messages[0]
    if type(first) is not dict or "type" in first or "sender" in first:
        return None  # Responses items, LangChain dicts, AutoGen: formats are homogeneous
    out: list[Message] = []
    append = out.append
    roles = _FAST_ROLES
    memo = ARGS_MEMO
    for i, m in enumerate(messages):
        if type(m) is not dict:
            return None
        get = m.get
        role = get("role")
        if role not in roles or type(role) is not str:
            return None
        content = get("content")
        if content is None:
            content = ""
        elif type(content) is list and has_anthropic_blocks(content):
            return None
        name = get("name")
        if name is not None and type(name) is not str:
            name = None
        raw_calls = get("tool_calls")
        if not raw_calls:
            if role == "assistant" and "function_call" in m:
                return None
            append(Message(role, content, None, get("tool_call_id"), name))
            continue
        if type(raw_calls) is not list or "function_call" in m:
            return None
        calls = []
        for j, tc in enumerate(raw_calls):
            fn = tc.get("function") if type(tc) is dict else None
            raw = fn.get("arguments") if type(fn) is dict else None
            args = memo.get(raw) if type(raw) is str else None
            if args is not None and type(fname := fn.get("name")) is str and fname:  # type: ignore[union-attr]
                calls.append(ToolCall(fname, args, tc.get("id")))
            else:
                calls.append(_fast_call(tc, i, j))
        append(Message(role, content, calls, get("tool_call_id"), name))
    return out


#: Content blocks only Anthropic messages carry: a message holding one is not OpenAI chat.
ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})


def has_anthropic_blocks(content: Any) -> bool:
    """Whether message content is a list of blocks with an Anthropic-only block among them."""
    return type(content) is list and any(type(b) is dict and b.get("type") in ANTHROPIC_BLOCKS for b in content)


def parse_messages(messages: Any) -> list[Message]:
    """A list of OpenAI chat message dicts → canonical messages.

    The loop handles the common shapes inline (it is the hot path of every OpenAI-format run);
    anything unusual (aliases, legacy function calls, bad shapes) goes through ``parse_message``.
    """
    if type(messages) is not list:
        raise NormalizationError(f"'messages' must be a list, got {type(messages).__name__}")
    out: list[Message] = []
    append = out.append
    roles = _FAST_ROLES
    for i, m in enumerate(messages):
        if type(m) is dict and "function_call" not in m:
            role_raw = m.get("role")
            if type(role_raw) is str and role_raw in roles:
                content = m.get("content")
                if content is None:
                    content = ""
                name = m.get("name")
                if type(name) is not str:
                    name = None
                raw_calls = m.get("tool_calls")
                if not raw_calls:
                    append(Message(role_raw, content, None, m.get("tool_call_id"), name))
                    continue
                if type(raw_calls) is list:
                    calls = [_fast_call(tc, i, j) for j, tc in enumerate(raw_calls)]
                    append(Message(role_raw, content, calls, m.get("tool_call_id"), name))
                    continue
        append(parse_message(m, i))
    return out


_FAST_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def is_openai_message(value: Any) -> bool:
    """Whether a dict looks like one OpenAI/LangChain chat message."""
    if type(value) is not dict:
        return False
    role = value.get("role", value.get("type"))
    return isinstance(role, str) and role in ROLE_ALIASES
