"""The inputs and outputs of one recorded LLM call, whatever SDK produced them.

Observability tools (LangSmith, Langfuse) store an LLM call's input and output as the calling SDK
serialized them: OpenAI messages or chat completions, LangChain messages or ``LLMResult``
generations, Anthropic messages. These helpers turn either side into canonical messages.
"""

from __future__ import annotations

from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.anthropic import block_messages
from assay.traces.assemble import as_dict, usage_of
from assay.traces.langchain import as_message_dict, is_lc_message, parse_lc_message
from assay.traces.model import Message
from assay.traces.openai import parse_message

_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})


def _has_blocks(content: Any) -> bool:
    return type(content) is list and any(type(b) is dict and b.get("type") in _ANTHROPIC_BLOCKS for b in content)


def any_message(m: Any, where: str) -> list[Message]:
    """One message in OpenAI, LangChain or Anthropic form → canonical messages."""
    if is_lc_message(m):
        return [parse_lc_message(m, where)[0]]
    if type(m) is not dict:
        raise NormalizationError(f"{where}: expected a message object, got {type(m).__name__}")
    role = m.get("role")
    kwargs = m.get("additional_kwargs")
    if not m.get("tool_calls") and type(kwargs) is dict and kwargs.get("tool_calls"):
        m = {**m, "tool_calls": kwargs["tool_calls"]}  # LangChain callbacks' role-keyed dicts
    if role in ("user", "assistant") and _has_blocks(m.get("content")):
        return block_messages(role, m.get("content"), where)
    try:
        return [parse_message(m, 0)]
    except NormalizationError as exc:
        raise NormalizationError(f"{where}: {str(exc).removeprefix('message 0: ')}") from exc


def _flat(items: list[Any]) -> list[Any]:
    """LangSmith nests chat inputs one level per prompt: ``[[msg, msg]]`` → ``[msg, msg]``."""
    if items and type(items[0]) is list:
        return list(items[0])
    return items


def input_messages(value: Any, where: str = "input") -> list[Message]:
    """An LLM call's input → its messages (``[]`` when the input holds none)."""
    if isinstance(value, str):
        return [Message("user", value)]
    if type(value) is dict:
        msgs = value.get("messages")
        if type(msgs) is list:
            value = msgs
        elif type(value.get("prompts")) is list:
            return [Message("user", p) for p in value["prompts"] if isinstance(p, str)]
        elif "role" in value or is_lc_message(value):
            value = [value]
        else:
            return []
    if type(value) is not list:
        return []
    out: list[Message] = []
    for i, m in enumerate(_flat(value)):
        if _is_tool_definition(m):
            continue
        if isinstance(m, str):
            out.append(Message("user", m))
        else:
            out.extend(any_message(m, f"{where} message {i}"))
    return out


def _is_tool_definition(m: Any) -> bool:
    """A bound tool's schema among the input messages, not a message: Langfuse's LangChain
    ``CallbackHandler`` appends ``{"role": "tool", "content": <tool schema>}`` to a generation's
    input for every tool the model was given (no ``tool_call_id``; an OpenAI ``{"type":
    "function", "function"}`` or an Anthropic ``{"name", "input_schema"}`` schema)."""
    if type(m) is not dict or m.get("role") != "tool" or m.get("tool_call_id") is not None:
        return False
    schema = m.get("content")
    if type(schema) is not dict:
        return False
    return (schema.get("type") == "function" and type(schema.get("function")) is dict) or "input_schema" in schema


def tool_message_output(value: Any, where: str = "tool output") -> tuple[Any, str | None, bool]:
    """A tool's recorded output → ``(content, tool_call_id, is_error)``: a LangChain ``ToolMessage``
    (as tracers record what a LangChain tool returns) gives its content, call id and ``status``;
    anything else is the content itself."""
    if is_lc_message(value):
        d = as_message_dict(value, where)
        call_id = d.get("tool_call_id")
        return d.get("content", ""), call_id if isinstance(call_id, str) else None, d.get("status") == "error"
    return value, None, False


def output_messages(value: Any, where: str = "output") -> list[Message]:
    """An LLM call's output → the assistant message(s) it produced."""
    if value is None:
        return []
    if isinstance(value, str):
        return [Message("assistant", value)]
    if type(value) is list:
        return [msg for i, m in enumerate(value) for msg in any_message(m, f"{where} message {i}")]
    if type(value) is not dict and not is_lc_message(value):
        raise NormalizationError(f"{where}: unsupported LLM output {type(value).__name__}")
    if type(value) is not dict or is_lc_message(value) or "role" in value:
        return any_message(value, where)
    gens = value.get("generations")
    if type(gens) is list:
        first = _flat(gens)[0] if gens else None
        if type(first) is not dict:
            return []
        if first.get("message") is not None:
            return any_message(first["message"], f"{where} generation")
        return [Message("assistant", first.get("text") or "")]
    choices = value.get("choices")
    if type(choices) is list:
        msg = choices[0].get("message") if choices and type(choices[0]) is dict else None
        return any_message(msg, f"{where} choice 0") if msg is not None else []
    if value.get("type") == "message" and type(value.get("content")) is list:
        return block_messages("assistant", value["content"], where)
    for key in ("output", "message", "messages"):
        if key in value:
            return output_messages(value[key], f"{where}.{key}")
    if isinstance(value.get("text"), str):
        return [Message("assistant", value["text"])]
    if isinstance(value.get("content"), str):
        return [Message("assistant", value["content"])]
    return []


def output_usage(value: Any) -> dict[str, int] | None:
    """Token usage reported inside an LLM call's output (OpenAI, LangChain, Anthropic shapes)."""
    if type(value) is not dict:
        return None
    u = value.get("usage")
    if type(u) is not dict:
        llm_output = value.get("llm_output")
        u = llm_output.get("token_usage") if type(llm_output) is dict else None
    if type(u) is not dict:
        u = value.get("usage_metadata")
    if type(u) is not dict:
        gens = value.get("generations")
        first = _flat(gens)[0] if type(gens) is list and gens else None
        msg = first.get("message") if type(first) is dict else None
        if type(msg) is dict:
            kwargs = as_dict(msg.get("kwargs")) or msg
            u = kwargs.get("usage_metadata")
    if type(u) is not dict:
        return None
    return usage_of(
        u.get("input_tokens", u.get("prompt_tokens", u.get("input"))),
        u.get("output_tokens", u.get("completion_tokens", u.get("output"))),
        u.get("total_tokens", u.get("total")),
    )
