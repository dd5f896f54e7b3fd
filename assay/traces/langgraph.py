"""LangGraph thread state and checkpoints → canonical trace.

Reads what LangGraph hands out for a thread, as saved by users:

* a ``ThreadState`` / ``StateSnapshot`` (``GET /threads/{id}/state``, ``graph.get_state(config)``
  as JSON): ``{"values": {"messages": [...]}, "next", "tasks", "metadata", "created_at", ...}``;
* a checkpoint (``{"v", "id", "ts", "channel_values": {"messages": [...]}}``) or a checkpoint
  tuple ``{"config", "checkpoint": {...}, "metadata", "parent_config"}``;
* a state history (a list of snapshots, newest first): the snapshot with the most messages.

Messages are LangChain messages in any serialized form (flat ``{type, content, tool_calls}``
dicts as the LangGraph API returns them, ``dumpd`` constructors) or OpenAI role dicts.
"""

from __future__ import annotations

from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.assemble import TraceBuilder, add_usage, as_dict
from assay.traces.base import TraceFormat
from assay.traces.langchain import add_messages, is_lc_message
from assay.traces.llm_io import any_message
from assay.traces.model import Trace

#: Keys of a snapshot beside ``values`` (at least one must be present, so a record that merely
#: has a ``values`` key is not taken for a thread state).
_SNAPSHOT_KEYS = ("next", "tasks", "checkpoint", "checkpoint_id", "config", "parent_config", "created_at")


def _messages(state: Any) -> Any:
    """The ``messages`` channel of one snapshot or checkpoint (None when it is not one)."""
    if type(state) is not dict:
        return None
    values = state.get("values")
    if type(values) is dict and any(k in state for k in _SNAPSHOT_KEYS):
        return values.get("messages")
    if type(values) is list and any(k in state for k in _SNAPSHOT_KEYS):
        return values  # a MessageGraph: the state is the message list
    checkpoint = state.get("checkpoint")
    if type(checkpoint) is dict and type(checkpoint.get("channel_values")) is dict:
        return checkpoint["channel_values"].get("messages")
    channels = state.get("channel_values")
    if type(channels) is dict and ("channel_versions" in state or "v" in state):
        return channels.get("messages")
    return None


def _latest(value: Any) -> dict[str, Any] | None:
    if type(value) is dict:
        return value if type(_messages(value)) is list else None
    if type(value) is list and value and type(_messages(value[0])) is list:
        best: dict[str, Any] = max(value, key=lambda s: len(_messages(s) or ()))
        return best
    return None


def detect(value: Any) -> bool:
    """A snapshot, checkpoint (tuple) or state history with a ``messages`` list."""
    return _latest(value) is not None


def normalize(value: Any) -> Trace:
    state = _latest(value)
    if state is None:
        raise NormalizationError("langgraph: expected a thread state or checkpoint with a 'messages' list")
    messages: list[Any] = _messages(state)
    builder = TraceBuilder()
    usage: dict[str, int] | None = None
    if messages and is_lc_message(messages[0]):
        usage = add_messages(builder, messages)
    else:
        for i, m in enumerate(messages):
            builder.add_all(any_message(m, f"langgraph message {i}"))
    md = as_dict(state.get("metadata"))
    metadata: dict[str, Any] = {k: md[k] for k in ("thread_id", "step", "graph_id", "source") if k in md}
    configurable = as_dict(as_dict(state.get("config")).get("configurable"))
    if "thread_id" in configurable:
        metadata.setdefault("thread_id", configurable["thread_id"])
    trace = builder.build("langgraph", usage=add_usage(None, usage), metadata=metadata)
    checkpoint = state.get("checkpoint")
    cid = state.get("checkpoint_id") or (as_dict(checkpoint).get("checkpoint_id") or as_dict(checkpoint).get("id"))
    if isinstance(cid, str):
        trace.metadata["checkpoint_id"] = cid
    return trace


FORMAT = TraceFormat(
    name="langgraph",
    description="LangGraph thread state / StateSnapshot (values.messages), checkpoints (channel_values.messages)",
    detect=detect,
    normalize=normalize,
)
