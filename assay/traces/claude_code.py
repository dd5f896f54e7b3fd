"""Claude Code session transcripts and Claude Agent SDK message streams → canonical trace.

Both are JSONL where one trace spans many lines; :func:`group_session_rows` cuts a stream of
rows into sessions, and :func:`normalize` reads one session (a list of rows, or
``{"session": [...]}``). Rows:

* Claude Code (``~/.claude/projects/*/<session>.jsonl``): ``{"type": "user"|"assistant"|"system"|
  "summary"|…, "uuid", "parentUuid", "sessionId", "isSidechain", "isMeta", "message": {"role",
  "content": [blocks]}}``. The main trajectory is the ``parentUuid`` chain ending at the last
  user/assistant row (``logicalParentUuid`` bridges a compaction); sidechains (sub-agents),
  ``isMeta`` rows, summaries and bookkeeping rows are left out. An assistant message streamed as
  several rows (one content block each, same ``message.id``) is merged back into one message.
* Agent SDK ``stream-json`` (``{"type": "system"|"assistant"|"user"|"result", "message",
  "session_id", "parent_tool_use_id"}``): rows in file order; sub-agent rows (a non-null
  ``parent_tool_use_id``) are left out; the ``result`` row gives the final answer, usage and cost.
* Bare Anthropic messages (``{"role", "content"}``) or bare content blocks, one per line.

Content blocks are read as in the ``anthropic`` format (tool_use → calls, tool_result → tool
messages, ``is_error`` recorded in ``metadata.tool_errors``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.anthropic import add_message
from assay.traces.assemble import TraceBuilder, add_usage, as_int, usage_of
from assay.traces.base import TraceFormat
from assay.traces.model import Trace

ROW_TYPES = frozenset({"user", "assistant", "system", "summary", "result", "queue-operation", "file-history-snapshot"})
_ROW_KEYS = ("sessionId", "session_id", "parentUuid", "leafUuid", "uuid", "messageId")
_ASSISTANT_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking", "server_tool_use"})


def session_id_of(row: Any) -> str | None:
    if type(row) is not dict:
        return None
    sid = row.get("sessionId", row.get("session_id"))
    return sid if isinstance(sid, str) and sid else None


def group_session_rows(rows: Iterable[Any]) -> Iterator[list[Any]]:
    """Cut rows (in file order) into sessions, one list of rows per session.

    A new group starts when a row names a different session, unless the row continues the
    current group's ``parentUuid`` chain (a resumed session keeps its history). Rows naming no
    session (summaries, file snapshots) stay with the current group, or join the first one.
    Memory holds one session at a time.
    """
    current: list[Any] = []
    current_sid: str | None = None
    uuids: set[Any] = set()
    for row in rows:
        sid = session_id_of(row)
        if sid is not None and sid != current_sid:
            continues = type(row) is dict and row.get("parentUuid") in uuids
            if current_sid is not None and not continues:
                yield current
                current, uuids = [], set()
            current_sid = sid
        current.append(row)
        if type(row) is dict and row.get("uuid") is not None:
            uuids.add(row["uuid"])
    if current:
        yield current


def _is_row(r: Any) -> bool:
    return type(r) is dict and r.get("type") in ROW_TYPES and any(k in r for k in _ROW_KEYS)


def detect(value: Any) -> bool:
    if type(value) is dict:
        session = value.get("session")
        if type(session) is list:
            return bool(session) and _is_row(session[0])
        return _is_row(value) and "message" in value
    return type(value) is list and bool(value) and _is_row(value[0])


def _rows_of(value: Any) -> tuple[list[Any], bool]:
    """(rows, whether the value was a single row)."""
    if type(value) is list:
        return value, False
    if type(value) is dict:
        if type(value.get("session")) is list:
            return value["session"], False
        if _is_row(value) or "role" in value:
            return [value], True
    raise NormalizationError(
        f"claude_code: expected a list of session rows or {{'session': [...]}}, got {type(value).__name__}"
    )


def _main_chain(rows: list[Any]) -> list[dict[str, Any]]:
    """The user/assistant rows of the main trajectory, in order."""
    dict_rows = [r for r in rows if type(r) is dict]
    convo = [
        r
        for r in dict_rows
        if r.get("type") in ("user", "assistant")
        and not r.get("isSidechain")
        and not r.get("isMeta")
        and r.get("parent_tool_use_id") is None
    ]
    if not any("parentUuid" in r for r in dict_rows):
        return convo  # SDK streams: file order
    by_uuid = {r["uuid"]: r for r in dict_rows if r.get("uuid") is not None and not r.get("isSidechain")}
    leaf = next((r for r in reversed(convo) if r.get("uuid") is not None), None)
    if leaf is None:
        return convo
    chain: list[dict[str, Any]] = []
    seen: set[Any] = set()
    row: dict[str, Any] | None = leaf
    while row is not None and row["uuid"] not in seen:
        seen.add(row["uuid"])
        chain.append(row)
        parent = row.get("parentUuid") or row.get("logicalParentUuid")
        row = by_uuid.get(parent) if parent is not None else None
    keep = {id(r) for r in chain}
    return [r for r in convo if id(r) in keep]


def _messages(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Row messages with streamed assistant pieces (same message.id) merged."""
    out: list[dict[str, Any]] = []
    last_id: Any = None
    for r in rows:
        msg = r.get("message")
        if type(msg) is not dict:
            continue
        mid = msg.get("id")
        content = msg.get("content")
        if msg.get("role") == "assistant" and mid is not None and mid == last_id and out:
            prev = out[-1]
            prev["content"] = _as_blocks(prev["content"]) + _as_blocks(content)
            if type(msg.get("usage")) is dict:  # every piece repeats the usage; keep the latest
                prev["usage"] = msg["usage"]
            continue
        out.append({**msg, "content": content})
        last_id = mid if msg.get("role") == "assistant" else None
    return out


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if type(content) is list else []


def _bare_message(row: dict[str, Any]) -> dict[str, Any] | None:
    """A line that is a bare message or a bare content block → a message dict."""
    if "role" in row and "content" in row:
        return row
    kind = row.get("type")
    if kind == "tool_result":
        return {"role": "user", "content": [row]}
    if kind in _ASSISTANT_BLOCKS:
        return {"role": "assistant", "content": [row]}
    return None


def _usage(messages: list[dict[str, Any]]) -> dict[str, int] | None:
    total: dict[str, int] | None = None
    for m in messages:
        u = m.get("usage")
        if m.get("role") == "assistant" and type(u) is dict:
            total = add_usage(total, _row_usage(u))
    return total


def _row_usage(u: dict[str, Any]) -> dict[str, int] | None:
    cached = sum(as_int(u.get(k)) or 0 for k in ("cache_creation_input_tokens", "cache_read_input_tokens"))
    inp = as_int(u.get("input_tokens"))
    return usage_of(None if inp is None else inp + cached, u.get("output_tokens"))


def normalize(value: Any) -> Trace:
    rows, single = _rows_of(value)
    for i, r in enumerate(rows):
        if type(r) is not dict:
            raise NormalizationError(f"claude_code: row {i} is not an object")
    typed = any(r.get("type") in ROW_TYPES for r in rows)
    if typed:
        messages = _messages(_main_chain(rows))
    else:
        messages = [m for r in rows if (m := _bare_message(r)) is not None]
        merged: list[dict[str, Any]] = []
        for m in messages:  # consecutive bare blocks of one role form one message
            if merged and merged[-1]["role"] == m["role"] and type(m["content"]) is list:
                merged[-1] = {**merged[-1], "content": _as_blocks(merged[-1]["content"]) + m["content"]}
            else:
                merged.append(m)
        messages = merged
    if not messages:
        raise NormalizationError(f"claude_code: no user or assistant messages in {len(rows)} row(s)")
    builder = TraceBuilder()
    for i, msg in enumerate(messages):
        add_message(builder, msg, f"session message {i}")
    if single:
        builder.warnings.append("one row of a session was read alone; read the file in session mode")
    metadata: dict[str, Any] = {}
    final: Any = None
    usage = _usage(messages)
    for r in rows:
        kind = r.get("type")
        if kind == "summary" and isinstance(r.get("summary"), str):
            metadata.setdefault("summary", r["summary"])
        elif kind == "result":
            if isinstance(r.get("result"), str):
                final = r["result"]
            if type(r.get("usage")) is dict:
                usage = _row_usage(r["usage"])
            for key in ("total_cost_usd", "num_turns", "duration_ms", "is_error", "subtype"):
                if key in r:
                    metadata[key] = r[key]
        for key in ("cwd", "gitBranch", "version"):
            if key not in metadata and isinstance(r.get(key), str) and r[key]:
                metadata[key] = r[key]
    model = next((m.get("model") for m in messages if isinstance(m.get("model"), str)), None)
    if model:
        metadata["model"] = model
    sid = next((s for r in rows if (s := session_id_of(r)) is not None), None)
    return builder.build("claude_code", id=sid, final_output=final, usage=usage, metadata=metadata)


FORMAT = TraceFormat(
    name="claude_code",
    description="Claude Code session JSONL and Claude Agent SDK streams (one session = many rows)",
    detect=detect,
    normalize=normalize,
)
