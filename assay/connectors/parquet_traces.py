"""Parquet rows to traces: the decoded record of every row, and a columnar fast path for tables of
OpenAI chat messages (the Parquet twin of :mod:`assay.traces.openai_decode`).

A :class:`BatchRows` wraps one record batch; each row's envelope carries a :class:`Row` of it.
The pipeline's parser asks a row for :meth:`Row.trace` when its normalize options are the
defaults: for a batch whose ``messages`` (and reference) columns are ``list<struct<role, content,
tool_calls: list<struct<id, type, function: struct<name, arguments>>>, tool_call_id, name>>``,
the trace is built straight from the leaf columns, converted to Python once per batch, without
building a dict per message (what ``to_pylist`` costs) and without a Python loop per message: a
batch's calls and messages are built by a few ``map`` calls over its leaf lists (each distinct
argument text parsed once per batch), and a row's messages are a slice of them. It returns None
wherever the general path could decide differently (a role alias, a call without a name, an
empty message list…), and the parser then normalizes :meth:`Row.as_dict` like any JSON record.
The two paths give the same trace: ``tests/unit/connectors/test_parquet_source.py`` and
``test_parquet_fast_path.py`` hold them together.

The fast path is derived from the normalizer's own key lists (``ID_KEYS``, ``INPUT_KEYS``,
``REFERENCE_KEYS``, ``CONTEXT_KEYS``, ``USAGE_KEYS``): a table with any other column that the
normalizer reads (``outputs``, ``trajectory``, ``response``…) takes the general path.
"""

from __future__ import annotations

import operator
from bisect import bisect_right
from itertools import chain, compress, pairwise, repeat
from typing import Any

import orjson
import pyarrow as pa

from assay.connectors.parquet_rows import checked_records, decode_json_text, is_text
from assay.traces.model import Message, ToolCall, Trace, final_assistant_text
from assay.traces.normalize import CONTEXT_KEYS, ID_KEYS, INPUT_KEYS, REFERENCE_KEYS, USAGE_KEYS
from assay.traces.openai import parse_args

_loads = orjson.loads
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
    # arguments may be left unread (no evaluator compares them): calls then have none
    if not pa.types.is_struct(fn) or not {"name"} <= {f.name for f in fn} <= {"name", "arguments"}:
        return False
    return all(_is_text_or_null(f.type) for f in fn) and all(
        _is_text_or_null(f.type) for f in st if f.name != "function"
    )


def _list_parts(arr: pa.Array) -> tuple[list[int], pa.Array]:
    """A list array's offsets (from 0) and the slice of its values they index (``values`` and
    ``offsets``, not ``flatten()``, whose first call imports ``pyarrow.compute``: ~50 ms a run)."""
    o: list[int] = arr.offsets.to_pylist()
    first = o[0]
    values = arr.values.slice(first, o[-1] - first)
    return ([x - first for x in o] if first else o), values


_BITS = [tuple(bool(b >> k & 1) for k in range(8)) for b in range(256)]


def _valid(arr: pa.Array) -> list[bool]:
    """Whether each value of ``arr`` is valid, from its validity bitmap (``is_valid()`` would
    import ``pyarrow.compute``)."""
    bitmap = arr.buffers()[0]
    if bitmap is None or not arr.null_count:
        return [True] * len(arr)
    first = arr.offset
    flags = list(chain.from_iterable(map(_BITS.__getitem__, memoryview(bitmap)[first // 8 :])))
    return flags[first % 8 : first % 8 + len(arr)]


def _children(arr: pa.Array) -> dict[str, pa.Array]:
    """The fields of a struct array, sliced and with the struct's own nulls applied."""
    return dict(zip([f.name for f in arr.type], arr.flatten(), strict=True))


def _texts(fields: dict[str, pa.Array], name: str, n: int) -> list[Any] | None:
    arr = fields.get(name)
    if arr is None or arr.null_count == n:
        return None  # not read, or all null: None for every value
    return arr.to_pylist()  # type: ignore[no-any-return]


def _owner(offsets: list[int], i: int) -> int:
    """The list (row, message) that holds value ``i`` of a list column."""
    return bisect_right(offsets, i) - 1


def _args(raws: list[Any], memo: dict[str, dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """Each call's arguments as ``parse_args`` reads them, every distinct JSON-object text parsed
    once per batch (calls with equal text share one dict, as within a record; nothing mutates
    arguments), and the defects by call index (what ``parse_args`` flags)."""
    new = [raw for raw in dict.fromkeys(raws) if raw not in memo]
    if new:
        try:
            parsed = list(map(_loads, new))
        except (orjson.JSONDecodeError, TypeError):  # a defect or a null: one at a time
            parsed = [_object_or_none(raw) for raw in new]
        memo.update({raw: value for raw, value in zip(new, parsed, strict=True) if type(value) is dict})
    get = memo.get
    args: list[Any] = list(map(get, raws))
    errors: dict[int, str] = {}
    if None in args:
        for j, raw in enumerate(raws):
            if args[j] is None:
                args[j], err = parse_args(raw)
                if err is not None:
                    errors[j] = err
    return args, errors


def _object_or_none(raw: Any) -> Any:
    if type(raw) is not str:
        return None
    try:
        return _loads(raw)
    except orjson.JSONDecodeError:
        return None


class _Messages:
    """One message-list column of a batch, converted to canonical messages at once: each leaf
    column to Python once, then the calls, the messages and each row's slice of them built by a
    few ``map`` calls over the whole batch instead of a loop per message (the Parquet twin of
    ``openai_decode._messages``: the same messages, ``tests/unit/connectors`` holds them equal)."""

    def __init__(self, arr: pa.Array, memo: dict[str, dict[str, Any]]) -> None:
        self.valid: list[bool] | None = _valid(arr) if arr.null_count else None
        self.offsets, values = _list_parts(arr)
        n = len(values)
        fields = _children(values)
        self.has_text = "content" in fields  # left unread when no evaluator reads text
        self.bad: set[int] = set()
        """Rows the general path decides (a role alias or a missing role, a call without a name)."""
        self.defects: list[int] | None = None
        """Per row, calls whose arguments ``parse_args`` flagged (None: none in the batch)."""
        self.messages: list[Message] | None = None
        if values.null_count:  # a null message: the general path names it
            return
        role = _texts(fields, "role", n) or [None] * n
        calls = self._calls(fields.get("tool_calls"), n, memo)
        if calls is _DECLINE:
            return
        content = _texts(fields, "content", n)
        if content is None:
            content_it: Any = repeat("", n)
        else:
            content_it = content if None not in content else ["" if c is None else c for c in content]
        tcid, name = _texts(fields, "tool_call_id", n), _texts(fields, "name", n)
        self.messages = list(
            map(
                Message,
                role,
                content_it,
                repeat(None, n) if calls is None else calls,
                repeat(None, n) if tcid is None else tcid,
                repeat(None, n) if name is None else name,
            )
        )
        if not _ROLES.issuperset(role):
            self.bad.update(_owner(self.offsets, i) for i, ro in enumerate(role) if ro not in _ROLES)

    def _calls(self, arr: pa.Array | None, n: int, memo: dict[str, dict[str, Any]]) -> Any:
        """Each message's tool calls (None where it has none), None when no message has any, or
        :data:`_DECLINE` (a null call or function: the general path names the defect)."""
        if arr is None or pa.types.is_null(arr.type) or arr.null_count == n:
            return None
        offs, values = _list_parts(arr)
        m = len(values)
        if not m:
            return None
        if values.null_count:
            return _DECLINE
        cf = _children(values)
        fn = cf["function"]
        if fn.null_count:
            return _DECLINE
        ff = _children(fn)
        names = _texts(ff, "name", m) or [None] * m
        args, errors = _args(_texts(ff, "arguments", m) or [None] * m, memo)
        ids = _texts(cf, "id", m)
        calls = list(map(ToolCall, names, args)) if ids is None else list(map(ToolCall, names, args, ids))
        if errors:
            defects = [0] * (len(self.offsets) - 1)
            for j, err in errors.items():
                calls[j].args_error = err
                defects[_owner(self.offsets, _owner(offs, j))] += 1
            self.defects = defects
        if not all(names):
            self.bad.update(_owner(self.offsets, _owner(offs, j)) for j, name in enumerate(names) if not name)
        per_message = [calls[a:b] if a != b else None for a, b in pairwise(offs)]
        if arr.null_count:  # a null list has no calls, whatever its offsets span
            for i in compress(range(n), map(operator.not_, _valid(arr))):
                per_message[i] = None
        return per_message

    def row(self, r: int) -> list[Message] | None:
        """The canonical messages of row ``r``, as ``openai_decode._messages`` builds them; None
        where that would return None (or where the general path must decide)."""
        if self.messages is None or (self.valid is not None and not self.valid[r]) or r in self.bad:
            return None
        start, end = self.offsets[r], self.offsets[r + 1]
        if start == end:
            return None
        return self.messages[start:end]

    def defects_of(self, r: int) -> int:
        return 0 if self.defects is None else self.defects[r]


_DECLINE = object()


class _Columnar:
    """The fast path's view of a batch: message columns as flat lists, simple columns as values."""

    def __init__(self, batch: pa.RecordBatch, reference: str | None) -> None:
        memo: dict[str, dict[str, Any]] = {}  # argument texts parsed, shared by both columns
        self.messages = _Messages(batch.column("messages"), memo)
        self.reference = _Messages(batch.column(reference), memo) if reference else None
        self.ref_valid: list[bool] | None = None
        if reference and batch.column(reference).null_count:
            self.ref_valid = _valid(batch.column(reference))
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
        messages = self.messages.row(r)
        if messages is None:
            return None
        trace = Trace(messages=messages, format="openai")
        if self.final is not None:
            trace.final_output = self.final[r]
            trace.format = "canonical"
        if trace.final_output is None and self.messages.has_text:  # (no text read: no final text)
            trace.final_output = final_assistant_text(messages)
        defects = self.messages.defects_of(r)
        reference = self.reference
        if reference is not None and (self.ref_valid is None or self.ref_valid[r]):
            ref = reference.row(r)
            if ref is None:
                return None
            final = final_assistant_text(ref) if reference.has_text else None
            trace.reference = Trace(messages=ref, format="openai", final_output=final)
            defects += reference.defects_of(r)
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
        trace.args_defects = defects
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


def text_free_columns(pf: Any, *, call_ids: bool = True, args: bool = True) -> list[str] | None:
    """The columns of a Parquet file to read when no evaluator reads message text: every column,
    with the ``content`` of its OpenAI message-list columns (``messages``, the reference) left
    out (and the calls' ``type``, which no reading uses); with ``call_ids=False`` (no evaluator
    reads which call a result answers) the calls' ``id`` and the messages' ``tool_call_id`` too;
    with ``args=False`` (no evaluator compares arguments) the calls' ``arguments``.
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
            if parts[0] == name and not _unread_leaf(parts, call_ids, args):
                out.append(path)
    return out


def _unread_leaf(parts: list[str], call_ids: bool, args: bool = True) -> bool:
    """A leaf of a message-list column (``messages.list.element.<field>[.list.element.<field>…]``)
    that no reading without text needs: the text, the calls' type (always "function"), unless
    ``call_ids`` the ids that pair calls with results, and unless ``args`` the arguments."""
    if len(parts) == 4:
        return parts[3] == "content" or (not call_ids and parts[3] == "tool_call_id")
    if len(parts) == 7 and parts[3] == "tool_calls":
        return parts[6] == "type" or (not call_ids and parts[6] == "id")
    if len(parts) == 8 and parts[3] == "tool_calls" and parts[6] == "function":
        return not args and parts[7] == "arguments"
    return False


class BatchRows:
    """One record batch, converted lazily: to traces column by column (the fast path), or to
    records (dicts) all at once the first time a row needs one."""

    __slots__ = ("_bad", "_columnar", "_records", "batch", "plan")

    def __init__(self, batch: pa.RecordBatch, plan: tuple[bool, str | None]) -> None:
        self.batch = batch
        self.plan = plan
        self._records: list[dict[str, Any]] | None = None
        self._bad: dict[int, str] = {}
        self._columnar: _Columnar | None = None

    def record(self, i: int) -> dict[str, Any]:
        if self._records is None:
            self._records, self._bad = checked_records(self.batch)
        return self._records[i]

    def decode_error(self, i: int) -> str | None:
        """What makes row ``i`` unreadable (text that is not UTF-8, naming the column), or None."""
        if self._records is None:
            self.record(i)
        return self._bad.get(i)

    def trace(self, i: int) -> Trace | None:
        ok, ref = self.plan
        if not ok:
            return None
        if self._columnar is None:
            try:
                self._columnar = _Columnar(self.batch, ref)
            except UnicodeDecodeError:  # a row's text is not UTF-8: the general path names it
                self.plan = (False, None)
                return None
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
        """The row as a record (nested columns as lists and dicts, JSON text decoded; text that is
        not UTF-8 with U+FFFD in place of the bad bytes: :meth:`decode_error` says so)."""
        return self.rows.record(self.i)

    def decode_error(self) -> str | None:
        """Why the row cannot be read as it was written (``column 'x': invalid UTF-8 at byte 4
        (0xff): …``), or None: such a row is a dead letter, not a trace."""
        return self.rows.decode_error(self.i)

    def column_names(self) -> list[str]:
        """The table's column names (multi-row exports are recognised by them)."""
        return list(self.rows.batch.schema.names)


__all__ = ["BatchRows", "Row", "columnar_plan", "text_free_columns"]
