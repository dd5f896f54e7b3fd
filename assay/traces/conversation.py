"""Whether a JSON value is one item of a conversation: a chat message (OpenAI, Anthropic), a
LangChain message (``messages_to_dict`` ``{"type", "data"}``, ``dumpd`` ``{"lc", "type", "id",
"kwargs"}``, ``model_dump()``) or an OpenAI Responses input/output item.

A top-level JSON array whose elements are all such items is one trace's messages, not a list of
records (:mod:`assay.connectors.framing`).

>>> is_conversation_item({"role": "user", "content": "hi"})
True
>>> is_conversation_item({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"})
True
>>> is_conversation_item({"type": "human", "data": {"content": "hi"}})
True
>>> is_conversation_item({"id": "t1", "messages": [{"role": "user", "content": "hi"}]})
False
"""

from __future__ import annotations

from typing import Any

from assay.traces.langchain import is_lc_message
from assay.traces.openai import ROLE_ALIASES
from assay.traces.openai_responses import is_item

#: Keys that mark a record holding a conversation (not a message of one).
_RECORD_KEYS = frozenset({"messages", "outputs", "inputs", "trajectory", "reference", "run_type", "observations"})


def is_conversation_item(value: Any) -> bool:
    """A chat message, a LangChain message or a Responses item (see the module docs)."""
    if type(value) is not dict or not _RECORD_KEYS.isdisjoint(value):
        return False
    role = value.get("role")
    if isinstance(role, str) and role in ROLE_ALIASES and value.get("type") in (None, "message"):
        return "content" in value or "tool_calls" in value or "function_call" in value
    return is_lc_message(value) or is_item(value)


__all__ = ["is_conversation_item"]
