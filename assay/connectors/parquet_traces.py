"""Parquet rows to traces: the decoded record of every row, and a columnar fast path for tables of
OpenAI chat messages (the Parquet twin of :mod:`assay.traces.openai_decode`).

A :class:`BatchRows` wraps one record batch; each row's envelope carries a :class:`Row` of it.
The pipeline's parser asks a row for :meth:`Row.trace` when its normalize options are the
defaults: for a batch whose ``messages`` (and reference) columns are ``list<struct<role, content,
tool_calls: list<struct<id, type, function: struct<name, arguments>>>, tool_call_id, name>>``,
the trace is built straight from the leaf columns, converted to Python once per batch, without
building a dict per message (what ``to_pylist`` costs). It returns None wherever the general path
could decide differently (a role alias, a call without a name, an empty message list…), and the
parser then normalizes :meth:`Row.as_dict` like any JSON record. The two paths give the same
trace: ``tests/unit/connectors/test_parquet_source.py`` holds them together.

The fast path is derived from the normalizer's own key lists (``ID_KEYS``, ``INPUT_KEYS``,
``REFERENCE_KEYS``, ``CONTEXT_KEYS``, ``USAGE_KEYS``): a table with any other column that the
normalizer reads (``outputs``, ``trajectory``, ``response``…) takes the general path.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from assay.connectors.parquet_rows import batch_records, decode_json_text, is_text
from assay.traces.model import Message, ToolCall, Trace, final_assistant_text
from assay.traces.normalize import CONTEXT_KEYS, ID_KEYS, INPUT_KEYS, REFERENCE_KEYS, USAGE_KEYS
from assay.traces.openai import ARGS_MEMO, args_defects, object_args, parse_args, reset_args_memo

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_MESSAGE_FIELDS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})
#: columns the fast path reads (besides messages and the reference); any other column is ignored
#: by the normalizer's OpenAI reading too, except those in _GENERAL_ONLY
_SIMPLE = frozenset({*ID_KEYS, *INPUT_KEYS, *CONTEXT_KEYS, *USAGE_KEYS, "metadata", "scenario", "final_output"})
_GENERAL_ONLY = frozenset({"outputs", "trajectory", "actual", "response"})


def _is_text_or_null(t: pa.DataType) -> bool:
    return is_text(t) or pa.types.is_null(t)


def _message_list_type(t: pa.DataType) -> bool:
    """``list<struct<role, content, tool_calls, tool_call_id, name>>`` with text leaves."""
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(t.value_type):
        return False
    st = t.value_type
    names = {f.name for f in st}
    if "role" not in names or not names <= _MESSAGE_FIELDS:
        return False
    for f in st:
        if f.name == "tool_calls":
            if not _call_list_type(f.type):
                return False
        elif not _is_text_or_null(f.type):
            return False
    return True


def _call_list_type(t: pa.DataType) -> bool:
    if pa.types.is_null(t):
        return True
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_struct(t.value_type):
        return False
    st = t.value_type
    names = {f.name for f in st}
    if "function" not in names or not names <= {"id", "type", "function"}:
        return False
    fn = st.field("function").type
    if not pa.types.is_struct(fn) or {f.name for f in fn} != {"name", "arguments"}:
        return False
    return all(_is_text_or_null(f.type) for f in fn) and all(
        _is_text_or_null(f.type) for f in st if f.name != "function"
    )


def _relative(offsets: pa.Array) -> list[int]:
    o: list[int] = offsets.to_pylist()
    first = o[0]
    return [x - first for x in o] if first else o


def _children(arr: pa.Array) -> dict[str, pa.Array]:
    """The fields of a struct array, sliced and with the struct's own nulls applied."""
    return dict(zip([f.name for f in arr.type], arr.flatten(), strict=True))


def _texts(fields: dict[str, pa.Array], name: str, n: int) -> list[Any]:
    arr = fields.get(name)
    return arr.to_pylist() if arr is not None else [None] * n


class _Messages:
    """One message-list column of a batch as flat Python lists (converted once per batch)."""

    def __init__(self, arr: pa.Array) -> None:
        self.valid: list[bool] | None = arr.is_valid().to_pylist() if arr.null_count else None
        self.offsets = _relative(arr.offsets)
        values = arr.flatten()
        n = len(values)
        self.message_nulls = values.null_count
        fields = _children(values)
        self.role = _texts(fields, "role", n)
        self.has_text = "content" in fields  # left unread when no evaluator reads text
        self.content = _texts(fields, "content", n)
        self.tool_call_id = _texts(fields, "tool_call_id", n)
        self.name = _texts(fields, "name", n)
        calls = fields.get("tool_calls")
        if calls is None or pa.types.is_null(calls.type):
            self.call_offsets: list[int] | None = None
            return
        self.call_offsets = _relative(calls.offsets)
        cv = calls.flatten()
        self.call_nulls = cv.null_count
        cf = _children(cv)
        m = len(cv)
        self.call_id = _texts(cf, "id", m)
        fn = cf["function"]
        self.fn_nulls = fn.null_count
        ff = _children(fn)
        self.fn_name = _texts(ff, "name", m)
        self.fn_args = _texts(ff, "arguments", m)

    def row(self, r: int) -> list[Message] | None:
        """The canonical messages of row ``r``, as ``openai_decode._messages`` builds them; None
        where that would return None (or where the general path must decide)."""
        if self.valid is not None and not self.valid[r]:
            return None
        start, end = self.offsets[r], self.offsets[r + 1]
        if start == end or self.message_nulls:
            return None
        role, content, tcid, name = self.role, self.content, self.tool_call_id, self.name
        coffs = self.call_offsets
        if coffs is not None and (self.call_nulls or self.fn_nulls):
            return None  # a null call or function: the general path names the defect
        fn_name, fn_args, call_id = (self.fn_name, self.fn_args, self.call_id) if coffs is not None else ((), (), ())
        out: list[Message] = []
        append = out.append
        memo = ARGS_MEMO
        roles = _ROLES
        for i in range(start, end):
            ro = role[i]
            if ro not in roles:
                return None  # a role alias or a missing role: the general path decides
            c = content[i]
            if c is None:
                c = ""
            if coffs is None or coffs[i] == coffs[i + 1]:
                append(Message(ro, c, None, tcid[i], name[i]))
                continue
            calls: list[ToolCall] = []
            for j in range(coffs[i], coffs[i + 1]):
                fname = fn_name[j]
                if not fname:
                    return None
                raw = fn_args[j]
                if raw is not None:
                    args = memo.get(raw)
                    if args is None:
                        args = object_args(raw)
                    if args is not None:
                        calls.append(ToolCall(fname, args, call_id[j]))
                        continue
                parsed, err = parse_args(raw)
                calls.append(ToolCall(fname, parsed, call_id[j], err))
            append(Message(ro, c, calls, tcid[i], name[i]))
        return out


class _Columnar:
    """The fast path's view of a batch: message columns as flat lists, simple columns as values."""

    def __init__(self, batch: pa.RecordBatch, reference: str | None) -> None:
        self.messages = _Messages(batch.column("messages"))
        self.reference = _Messages(batch.column(reference)) if reference else None
        self.ref_valid: list[bool] | None = None
        if reference and batch.column(reference).null_count:
            self.ref_valid = batch.column(reference).is_valid().to_pylist()
        self.simple: dict[str, list[Any]] = {}
        for f in batch.schema:
            if f.name in _SIMPLE:
                values = batch.column(f.name).to_pylist()
                if is_text(f.type):
                    values = decode_json_text(values)
                self.simple[f.name] = values

        # the first column of each group that the table has (as the decoder takes the first key present)
        self.ids, self.inputs, self.contexts, self.usages = (
            next((self.simple[k] for k in keys if k in self.simple), None)
            for keys in (ID_KEYS, INPUT_KEYS, CONTEXT_KEYS, USAGE_KEYS)
        )
        self.final = self.simple.get("final_output")
        self.scenario = self.simple.get("scenario")
        self.metadata = self.simple.get("metadata")

    def trace(self, r: int) -> Trace | None:
        reset_args_memo()
        messages = self.messages.row(r)
        if messages is None:
            return None
        trace = Trace(messages=messages, format="openai")
        if self.final is not None:
            trace.final_output = self.final[r]
            trace.format = "canonical"
        if trace.final_output is None and self.messages.has_text:  # (no text read: no final text)
            trace.final_output = final_assistant_text(messages)
        reference = self.reference
        if reference is not None and (self.ref_valid is None or self.ref_valid[r]):
            ref = reference.row(r)
            if ref is None:
                return None
            final = final_assistant_text(ref) if reference.has_text else None
            trace.reference = Trace(messages=ref, format="openai", final_output=final)
        if self.ids is not None and (tid := self.ids[r]) is not None:
            trace.id = str(tid)
        inputs = None
        if self.inputs is not None:
            inputs = trace.input = self.inputs[r]
        if self.contexts is not None and (ctx := self.contexts[r]) is not None:
            trace.context = ctx
        elif type(inputs) is dict:
            trace.context = next((inputs[k] for k in CONTEXT_KEYS if k in inputs), None)
        if self.scenario is not None and type(sc := self.scenario[r]) is dict:
            trace.scenario = sc
        if self.metadata is not None and type(md := self.metadata[r]) is dict:
            trace.metadata = md
        if self.usages is not None and type(usage := self.usages[r]) is dict:
            trace.usage = usage
        trace.args_defects = args_defects()
        return trace


def columnar_plan(schema: pa.Schema) -> tuple[bool, str | None]:
    """(whether the fast path reads this schema, its reference column)."""
    names = set(schema.names)
    if "messages" not in names or names & _GENERAL_ONLY:
        return False, None
    if not _message_list_type(schema.field("messages").type):
        return False, None
    refs = [k for k in REFERENCE_KEYS if k in names]
    ref = refs[0] if refs else None
    if ref is not None and not _message_list_type(schema.field(ref).type):
        return False, None
    return True, ref


def text_free_columns(pf: Any, *, call_ids: bool = True) -> list[str] | None:
    """The columns of a Parquet file to read when no evaluator reads message text: every column,
    with the ``content`` of its OpenAI message-list columns (``messages``, the reference) left
    out (and the calls' ``type``, which no reading uses); with ``call_ids=False`` (no evaluator
    reads which call a result answers) the calls' ``id`` and the messages' ``tool_call_id`` too.
    None when the file has no such column (read everything). Roles, tool names and arguments,
    ids of traces stay."""
    schema = pf.schema_arrow
    message_cols = {
        f.name for f in schema if (f.name == "messages" or f.name in REFERENCE_KEYS) and _message_list_type(f.type)
    }
    if not message_cols:
        return None
    leaves = [pf.schema.column(i).path for i in range(len(pf.schema))]
    out: list[str] = []
    for name in schema.names:
        if name not in message_cols:
            out.append(name)
            continue
        for path in leaves:
            parts = path.split(".")
            if parts[0] == name and not _unread_leaf(parts, call_ids):
                out.append(path)
    return out


def _unread_leaf(parts: list[str], call_ids: bool) -> bool:
    """A leaf of a message-list column (``messages.list.element.<field>[.list.element.<field>…]``)
    that no reading without text needs: the text, the calls' type (always "function"), and
    unless ``call_ids`` the ids that pair calls with results."""
    if len(parts) == 4:
        return parts[3] == "content" or (not call_ids and parts[3] == "tool_call_id")
    if len(parts) == 7 and parts[3] == "tool_calls":
        return parts[6] == "type" or (not call_ids and parts[6] == "id")
    return False


class BatchRows:
    """One record batch, converted lazily: to traces column by column (the fast path), or to
    records (dicts) all at once the first time a row needs one."""

    __slots__ = ("_columnar", "_records", "batch", "plan")

    def __init__(self, batch: pa.RecordBatch, plan: tuple[bool, str | None]) -> None:
        self.batch = batch
        self.plan = plan
        self._records: list[dict[str, Any]] | None = None
        self._columnar: _Columnar | None = None

    def record(self, i: int) -> dict[str, Any]:
        if self._records is None:
            self._records = batch_records(self.batch)
        return self._records[i]

    def trace(self, i: int) -> Trace | None:
        ok, ref = self.plan
        if not ok:
            return None
        if self._columnar is None:
            self._columnar = _Columnar(self.batch, ref)
        return self._columnar.trace(i)


class Row:
    """One row of a :class:`BatchRows`: what a Parquet envelope carries as its ``record``."""

    __slots__ = ("i", "rows")

    def __init__(self, rows: BatchRows, i: int) -> None:
        self.rows = rows
        self.i = i

    def trace(self) -> Trace | None:
        """The trace by the fast path, or None (then normalize :meth:`as_dict`)."""
        return self.rows.trace(self.i)

    def as_dict(self) -> dict[str, Any]:
        """The row as a record (nested columns as lists and dicts, JSON text decoded)."""
        return self.rows.record(self.i)

    def column_names(self) -> list[str]:
        """The table's column names (multi-row exports are recognised by them)."""
        return list(self.rows.batch.schema.names)


__all__ = ["BatchRows", "Row", "columnar_plan", "text_free_columns"]
