"""A batch of traces as flat integer arrays: what the columnar forms read.

:func:`layout_of` says whether a schema is one the forms read (an OpenAI ``messages`` column the
Parquet source's fast path reads, and its reference column), :class:`BatchView` extracts, lazily
and once per batch, each side's messages and calls: per-row offsets, role codes, tool-name codes
shared by both sides (a dictionary over the names of the batch, or the column's own dictionary),
argument codes (canonical JSON, see :mod:`~assay.evaluators.columnar.canon`), the output texts,
and the rows the object path would read differently (:meth:`BatchView.fallback_mask`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from assay.connectors.arrow_arrays import bool_scalar, from_numpy, int_scalar, strings, text_scalar, to_numpy
from assay.connectors.parquet_rows import decode_json_text, is_text
from assay.connectors.parquet_traces import columnar_plan
from assay.evaluators.columnar.canon import argument_codes
from assay.traces.normalize import ID_KEYS

#: The roles the Parquet fast path reads as they are (others: the general path decides).
ROLES = ("system", "developer", "user", "assistant", "tool")
ASSISTANT = ROLES.index("assistant")
_ROLE_SET = strings(ROLES)
_EMPTY = text_scalar("")

#: What a form may need besides tool names and roles.
ARGS, TEXT = "args", "text"


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a schema keeps what the forms read."""

    reference: str | None
    """The reference message column (None: no trace has a reference)."""
    final_output: str | None
    """A ``final_output`` text column, when the table has one."""
    id_column: str | None
    """The trace id column (the first of the normalizer's id keys present)."""
    messages: str = "messages"

    def columns(self, needs: set[str]) -> list[str]:
        """Top-level columns to read (the id column included)."""
        out = [c for c in (self.id_column, self.messages, self.reference) if c is not None]
        if TEXT in needs and self.final_output is not None:
            out.append(self.final_output)
        return out

    def parquet_columns(self, parquet_schema: Any, needs: set[str]) -> list[str]:
        """Leaf paths of a Parquet schema to read: roles and tool names of the message columns,
        arguments and text only when needed, and every leaf of the other columns read."""
        message_cols = {c for c in (self.messages, self.reference) if c is not None}
        wanted = set(self.columns(needs))
        out: list[str] = []
        for i in range(len(parquet_schema)):
            path = parquet_schema.column(i).path
            parts = path.split(".")
            if parts[0] not in wanted:
                continue
            if parts[0] not in message_cols or _leaf_needed(parts, needs):
                out.append(path)
        return out


def _leaf_needed(parts: list[str], needs: set[str]) -> bool:
    if len(parts) == 4:
        return parts[3] == "role" or (parts[3] == "content" and TEXT in needs)
    if len(parts) == 8 and parts[3] == "tool_calls" and parts[6] == "function":
        return parts[7] == "name" or (parts[7] == "arguments" and ARGS in needs)
    return False


def _plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` with dictionary-encoded text as plain text (the forms read both alike)."""
    if pa.types.is_dictionary(t):
        return t.value_type if is_text(t.value_type) else t
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _plain_type(t.value_type)
        return pa.list_(inner) if pa.types.is_list(t) else pa.large_list(inner)
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain_type(f.type), f.nullable) for f in t])
    return t


def layout_of(schema: pa.Schema) -> Layout | None:
    """The layout of a schema the forms read, or None (then nothing is scored by columns)."""
    ok, ref = columnar_plan(pa.schema([pa.field(f.name, _plain_type(f.type)) for f in schema]))
    names = set(schema.names)
    if not ok or "scenario" in names:  # a scenario's tool calls count when the messages have none
        return None
    final = None
    if "final_output" in names:
        t = schema.field("final_output").type
        if not (is_text(t) or pa.types.is_null(t)):
            return None
        final = "final_output"
    id_column = next((k for k in ID_KEYS if k in names), None)
    return Layout(ref, final, id_column)


class Decline(Exception):
    """The batch holds something only the object path reads as it should (every row falls back)."""


def _offsets(arr: pa.Array) -> np.ndarray:
    return to_numpy(arr.offsets, np.int64)


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return to_numpy(arr.is_valid())


def _field(struct: pa.Array, name: str) -> pa.Array | None:
    t = struct.type
    idx = t.get_field_index(name)
    return None if idx < 0 else struct.field(idx)


def _role_codes(role: pa.Array | None, m: int) -> np.ndarray:
    """Each message's role as its index in :data:`ROLES` (-1: null or any other text)."""
    if role is None or pa.types.is_null(role.type) or not m:
        return np.full(m, -1, dtype=np.int64)
    idx = pc.index_in(role, value_set=_ROLE_SET)
    return to_numpy(idx.fill_null(int_scalar(-1, idx.type)), np.int64)


class Side:
    """One message-list column of a batch (the agent's or the reference's), flattened.

    ``row_msgs``: message offsets per row (n + 1); ``msg_calls``: call offsets per message
    (M + 1, into the flat calls); ``row_calls``: call offsets per row; ``roles``: role codes
    (index in :data:`ROLES`, -1 for any other); ``names``/``args``: the flat calls' name and
    argument arrays; ``valid``: non-null lists; ``bad``: rows the fast path leaves to the general
    path (an empty list, a role it does not know, a call without a name)."""

    def __init__(self, arr: pa.Array) -> None:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        self.n = len(arr)
        self.valid = _valid(arr)
        row_msgs = _offsets(arr)
        msgs = arr.values
        if msgs.null_count:
            raise Decline("a null message")
        first, last = int(row_msgs[0]), int(row_msgs[-1])
        self.msgs = msgs = msgs.slice(first, last - first)
        self.row_msgs = row_msgs = row_msgs - first
        m = len(msgs)
        counts = np.diff(row_msgs)
        if not self.valid.all() and (counts[~self.valid] != 0).any():
            raise Decline("a null message list spanning messages")
        self.roles = _role_codes(_field(msgs, "role"), m)
        self.empty = self.valid & (counts == 0)
        """Rows whose list is empty: the general reading's (an empty reference list is a reference
        with no messages; an empty agent list is a trace the normalizer warns about)."""
        bad = np.zeros(len(counts), dtype=bool)
        if m:
            unknown = np.flatnonzero(self.roles < 0)
            if len(unknown):
                bad[np.searchsorted(row_msgs, unknown, side="right") - 1] = True
        calls_list = _field(msgs, "tool_calls")
        self.names: pa.Array = strings([])
        self.args: pa.Array | None = None
        if calls_list is None or pa.types.is_null(calls_list.type) or len(calls_list) == 0:
            self.msg_calls = np.zeros(m + 1, dtype=np.int64)
        else:
            offs = _offsets(calls_list)
            self.msg_ncalls = np.diff(offs)
            if calls_list.null_count and (self.msg_ncalls[~_valid(calls_list)] != 0).any():
                raise Decline("a null tool-call list spanning calls")
            calls = calls_list.values.slice(int(offs[0]), int(offs[-1] - offs[0]))
            if calls.null_count:
                raise Decline("a null tool call")
            fn = _field(calls, "function")
            if fn is None or fn.null_count:
                raise Decline("a tool call without a function")
            self.msg_calls = offs - offs[0]
            names = _field(fn, "name")
            self.names = names if names is not None else pa.nulls(len(calls), pa.string())
            self.args = _field(fn, "arguments")
        if not hasattr(self, "msg_ncalls"):
            self.msg_ncalls = np.diff(self.msg_calls)
        self.row_calls = self.msg_calls[row_msgs]
        self.row_ncalls = np.diff(self.row_calls)
        self.row_nmsgs = counts
        self.bad = bad
        self._msg_row: np.ndarray | None = None
        self._call_row: np.ndarray | None = None

    @property
    def msg_row(self) -> np.ndarray:
        """The row of each message."""
        if self._msg_row is None:
            self._msg_row = np.repeat(np.arange(self.n, dtype=np.int64), self.row_nmsgs)
        return self._msg_row

    @property
    def call_row(self) -> np.ndarray:
        """The row of each flat call."""
        if self._call_row is None:
            self._call_row = np.repeat(np.arange(self.n, dtype=np.int64), self.row_ncalls)
        return self._call_row

    def calls_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The flat calls of some rows, in order, and the row of each."""
        lens = self.row_ncalls[rows]
        total = int(lens.sum())
        starts = np.repeat(self.row_calls[rows], lens)
        within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        owner: np.ndarray = np.repeat(rows, lens)
        return starts + within, owner

    def rows_of_calls(self, calls: np.ndarray) -> np.ndarray:
        """The rows of a few flat calls (without the per-call row array)."""
        rows: np.ndarray = np.searchsorted(self.row_calls, calls, side="right") - 1
        return rows

    def role_names(self, i: int) -> str | None:
        code = int(self.roles[i])
        return ROLES[code] if code >= 0 else None


def _codes(arrays: list[pa.Array]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Integer codes of the values of several string arrays, one dictionary for all (equal
    strings, equal codes; a dictionary-encoded array is mapped through its own dictionary), and
    per array which values are null or empty (a call without a name)."""
    plain: list[pa.Array] = []
    for a in arrays:
        if pa.types.is_dictionary(a.type):
            plain.append(a.dictionary.cast(pa.string()))
        elif pa.types.is_null(a.type):
            plain.append(strings([]))
        else:
            plain.append(a if pa.types.is_string(a.type) else a.cast(pa.string()))
    enc = pc.dictionary_encode(pa.concat_arrays(plain), null_encoding="encode")
    idx = to_numpy(enc.indices, np.int64)
    empty_codes = np.flatnonzero(to_numpy(pc.or_kleene(pc.is_null(enc.dictionary), pc.equal(enc.dictionary, _EMPTY))))
    codes: list[np.ndarray] = []
    missing: list[np.ndarray] = []
    start = 0
    for a, p in zip(arrays, plain, strict=True):
        part = idx[start : start + len(p)]
        start += len(p)
        if pa.types.is_dictionary(a.type):
            nulls = to_numpy(a.indices.is_null()) if a.indices.null_count else None
            at = a.indices.cast(pa.int64()).fill_null(int_scalar(0))
            c = part[to_numpy(at)] if len(part) else np.zeros(len(a), np.int64)
            miss = np.isin(c, empty_codes)
            if nulls is not None:
                miss |= nulls
        elif pa.types.is_null(a.type):
            c = np.zeros(len(a), dtype=np.int64)
            miss = np.ones(len(a), dtype=bool)
        else:
            c = part
            miss = np.isin(c, empty_codes) if len(empty_codes) else np.zeros(len(c), dtype=bool)
        codes.append(c)
        missing.append(miss)
    return codes, missing


class BatchView:
    """The flat arrays of one batch (see the module docstring), built on first use."""

    def __init__(self, batch: pa.RecordBatch, layout: Layout, needs: set[str]) -> None:
        self.batch = batch
        self.layout = layout
        self.needs = needs
        self.n = batch.num_rows
        self.declined: str | None = None
        self._fallback = np.zeros(self.n, dtype=bool)
        self.out: Side | None = None
        self.ref: Side | None = None
        self.has_ref = np.zeros(self.n, dtype=bool)
        """Rows with a reference trace (a non-null reference list)."""
        self._names: tuple[np.ndarray, np.ndarray] | None = None
        self._args: tuple[np.ndarray, np.ndarray] | None = None
        self._canon: dict[bytes, int] = {}
        self._cache: dict[Any, Any] = {}
        self.name_dictionary: dict[str, int] | None = None
        try:
            self.out = Side(batch.column(layout.messages))
            if layout.reference is not None:
                self.ref = Side(batch.column(layout.reference))
        except Decline as exc:
            self.declined = str(exc)
            self._fallback[:] = True
            return
        self._fallback |= ~self.out.valid | self.out.empty | self.out.bad
        if self.ref is not None:
            self.has_ref = self.ref.valid.copy()
            self._fallback |= self.ref.valid & self.ref.bad  # (an empty list: a reference with no messages)
        self.name_codes()  # a call without a name: the object path's general reading
        if ARGS in needs or self.out.args is not None or (self.ref is not None and self.ref.args is not None):
            self.arg_codes()  # the object path parses arguments it reads: a defect is its warning row

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        """A value several forms of one batch share, made once."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # -- codes ------------------------------------------------------------------------------------

    def name_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """The flat calls' tool-name codes, agent side and reference side (one dictionary)."""
        if self._names is None:
            assert self.out is not None
            sides = [self.out, *([self.ref] if self.ref is not None else [])]
            codes, missing = _codes([side.names for side in sides])
            for side, miss in zip(sides, missing, strict=True):
                if miss.any():
                    self._fallback[side.rows_of_calls(np.flatnonzero(miss))] = True
            self._names = (codes[0], codes[1] if len(codes) > 1 else np.zeros(0, dtype=np.int64))
        return self._names

    def code_of_name(self, name: str) -> int | None:
        """The code of one tool name in this batch's dictionary (None: no call has that name)."""
        assert self.out is not None
        ref_names = self.ref.names if self.ref is not None else strings([])
        a, b = self.name_codes()
        for arr, codes in ((self.out.names, a), (ref_names, b)):
            plain = arr if pa.types.is_string(arr.type) or pa.types.is_null(arr.type) else arr.cast(pa.string())
            if pa.types.is_null(plain.type) or not len(plain):
                continue
            hit = pc.index(plain, text_scalar(name)).as_py()
            if hit is not None and hit >= 0:
                return int(codes[hit])
        return None

    def arg_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """The flat calls' argument codes (equal when the parsed arguments are equal as the object
        path compares them); rows with a defective argument fall back."""
        if self._args is None:
            assert self.out is not None
            sides = [self.out, *([self.ref] if self.ref is not None else [])]
            arrays = [s.args if s.args is not None else pa.nulls(len(s.names), pa.string()) for s in sides]
            codes, defects, self._canon = argument_codes(arrays)
            for side, bad in zip(sides, defects, strict=True):
                if bad.any():
                    self._fallback[side.rows_of_calls(np.flatnonzero(bad))] = True
            self._args = (codes[0], codes[1] if len(codes) > 1 else np.zeros(0, dtype=np.int64))
        return self._args

    def canon_code(self, text: bytes) -> int | None:
        """The argument code of a canonical JSON text in this batch (None: no call has it)."""
        self.arg_codes()
        return self._canon.get(text)

    def call_codes(self, with_args: bool) -> tuple[np.ndarray, np.ndarray]:
        """Codes of whole calls: the name, or (name, arguments) as one integer."""
        a, b = self.name_codes()
        if not with_args:
            return a, b

        def make() -> tuple[np.ndarray, np.ndarray]:
            x, y = self.arg_codes()
            width = int(max(x.max(initial=0), y.max(initial=0))) + 1
            return a * width + x, b * width + y

        codes: tuple[np.ndarray, np.ndarray] = self.cached("call_codes", make)
        return codes

    # -- texts ------------------------------------------------------------------------------------

    def output_texts(self) -> list[Any]:
        """Each row's ``trace.final_output`` as the Parquet fast path sets it."""
        assert self.out is not None
        final: list[Any] = [None] * self.n
        if self.layout.final_output is not None:
            final = decode_json_text(self.batch.column(self.layout.final_output).to_pylist())
        if None in final:
            last = self.last_assistant_text(self.out)
            if last is not None:
                final = [f if f is not None else t for f, t in zip(final, last, strict=True)]
        return final

    def reference_texts(self) -> list[Any]:
        """Each row's ``trace.reference.final_output`` (None without text or without a reference;
        an empty reference list reads as the value ``[]``, as the normalizer reads it)."""
        if self.ref is None:
            return [None] * self.n
        last = self.last_assistant_text(self.ref)
        texts = last if last is not None else [None] * self.n
        for i in np.flatnonzero(self.ref.empty).tolist():
            texts[i] = []
        return texts

    @staticmethod
    def last_assistant_text(side: Side) -> list[Any] | None:
        """The last assistant message with text per row (``final_assistant_text``), None when the
        batch's messages have no text column."""
        content = _field(side.msgs, "content")
        if content is None:
            return None
        if pa.types.is_null(content.type):
            return [None] * side.n
        nonempty = to_numpy(pc.fill_null(pc.greater(pc.binary_length(content), int_scalar(0)), bool_scalar(False)))
        cand = np.flatnonzero(nonempty & (side.roles == ASSISTANT))
        last = np.full(side.n, -1, dtype=np.int64)
        if len(cand):
            np.maximum.at(last, side.msg_row[cand], cand)
        has = last >= 0
        texts: list[Any] = [None] * side.n
        if has.any():
            picked = content.take(from_numpy(last[has])).to_pylist()
            for i, t in zip(np.flatnonzero(has).tolist(), picked, strict=True):
                texts[i] = t
        return texts

    # -- rows the columns cannot decide -----------------------------------------------------------

    def fallback(self) -> np.ndarray:
        return self._fallback

    def fallback_mask(self) -> pa.BooleanArray | None:
        if not self._fallback.any():
            return None
        return from_numpy(self._fallback)
