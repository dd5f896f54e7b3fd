"""The stable schema of result rows in Parquet and Delta tables, and the encoding into it.

``wide`` (default), one row per trace::

    trace_id  string          the trace's id
    run_id    string          the run's id (stable for a run file and --ds)
    ds        string          the logical date, YYYY-MM-DD (null without --ds)
    position  string          where the trace was read: "file:row", "s3://b/k:line", "topic[p]@offset"
    platform  struct          the ids a platform knows the trace by (null when it was read from no
                              platform's format): trace_id, root_id (root run / span), session_id
                              (LangSmith's project); what ``push:`` puts a score on
    <key>     struct          one column per result key, named by the key:
        score          double   in [0, 1]; null when not scored
        value          string   the raw outcome as text (JSON for non-strings: true, 3, {"a": 1})
        passed         bool     score >= the evaluator's threshold (the result's own, else the
                                summary's); null when not scored
        comment        string
        error          string   set when scoring failed
        input_tokens   int64    judge tokens and cost for this result (null for deterministic ones)
        output_tokens  int64
        cost_usd       double
        identity       string   what the result was scored with (evaluator, params, judge model: a
                                digest, as ``row.identity`` of the JSON rows; ``assay compare`` reads it)

``long``: the same top-level columns, then ``key`` (string) and the struct's fields as columns,
one row per trace and result key (for dashboards that pivot).

Rows arrive as the engine builds them (``Sink.write_results``: ``Result`` objects) or as their JSON
(``write_batch``, Delta's staged lines) and are converted column by column, many rows at a time: the
engine's rows without JSON when every value they hold would read back from JSON as itself
(:func:`result_columns`), else through their JSON (:func:`decode_staged`); both give the same columns.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, chain, repeat
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

import msgspec
import orjson
import pyarrow as pa

from assay.records import Result

ROW_GROUP_ROWS = 65_536
"""Rows per row group: large enough for scans (a few MB of columns), small enough to stay flat."""

RESULT_FIELDS: list[tuple[str, pa.DataType]] = [
    ("score", pa.float64()),
    ("value", pa.string()),
    ("passed", pa.bool_()),
    ("comment", pa.string()),
    ("error", pa.string()),
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("cost_usd", pa.float64()),
    ("identity", pa.string()),
]
RESULT_TYPE = pa.struct(RESULT_FIELDS)
OWN_THRESHOLD = ("threshold", pa.float64())
"""The extra field of a result in the Parquet sink's staged segments: the row's own pass mark
(null when the row has none; ``passed`` is then settled with the summary's at publish)."""
SEGMENT_RESULT_TYPE = pa.struct([*RESULT_FIELDS, OWN_THRESHOLD])
PLATFORM_FIELDS: list[tuple[str, pa.DataType]] = [
    ("trace_id", pa.string()),
    ("root_id", pa.string()),
    ("session_id", pa.string()),
]
PLATFORM_TYPE = pa.struct(PLATFORM_FIELDS)
"""A row's ``platform`` (:func:`assay.traces.platform.platform_ids`) as a column."""
TOP_FIELDS: list[tuple[str, pa.DataType]] = [
    ("trace_id", pa.string()),
    ("run_id", pa.string()),
    ("ds", pa.string()),
    ("position", pa.string()),
    ("platform", PLATFORM_TYPE),
]
#: The top columns that are plain text (the rest: ``platform``, built by :func:`platform_column`).
TEXT_TOP = 4


def result_schema(keys: Sequence[str], layout: str = "wide", *, own_threshold: bool = False) -> pa.Schema:
    """The table schema for these result keys (in this order); ``own_threshold``: with each
    result's own pass mark (:data:`OWN_THRESHOLD`, the staged segments' schema)."""
    if layout == "long":
        return pa.schema(
            [*TOP_FIELDS, ("key", pa.string()), *RESULT_FIELDS, *([OWN_THRESHOLD] if own_threshold else [])]
        )
    struct = SEGMENT_RESULT_TYPE if own_threshold else RESULT_TYPE
    return pa.schema([*TOP_FIELDS, *((k, struct) for k in keys)])


def position_text(pos: Any) -> str | None:
    """A row's position as text: ``file:line``, ``topic[partition]@offset``."""
    if type(pos) is dict and "line" in pos and "topic" not in pos:
        line = pos["line"]
        return f"{pos.get('file')}:{line}" if line is not None else str(pos.get("file"))
    if not isinstance(pos, dict):
        return None if pos is None else str(pos)
    if "topic" in pos:
        return f"{pos.get('topic')}[{pos.get('partition')}]@{pos.get('offset')}"
    line = pos.get("line")
    return f"{pos.get('file')}:{line}" if line is not None else str(pos.get("file"))


def platform_column(values: list[Any]) -> pa.Array:
    """The ``platform`` column of rows' ``platform`` dicts (None, or not a dict: a null struct)."""
    n = len(values)
    dicts = [v if type(v) is dict else None for v in values]
    if dicts.count(None) == n:
        return pa.nulls(n, PLATFORM_TYPE)
    fields = [
        column([None if d is None else _id_text(d.get(name)) for d in dicts], pa.string())
        for name, _ in PLATFORM_FIELDS
    ]
    mask = column([d is None for d in dicts], pa.bool_())
    return pa.StructArray.from_arrays(fields, fields=list(PLATFORM_TYPE), mask=mask)


def _id_text(value: Any) -> str | None:
    return value if value is None or type(value) is str else str(value)


def _text(value: Any) -> str | None:
    if value is None or type(value) is str:
        return value
    return orjson.dumps(value, default=str).decode()


def _bitmap(flags: bytes) -> bytes:
    """One bit per byte of ``flags`` (each 0 or 1), in Arrow's order (bit ``i % 8`` of byte
    ``i // 8``): eight bytes at a time, each 64-bit word times a constant that moves byte ``k``'s
    bit to bit ``56 + k`` (no two products meet, so nothing carries)."""
    n = len(flags)
    words = array("Q", flags + bytes(-n % 8))
    if words.itemsize != 8 or array("H", b"\x01\x00")[0] != 1:  # pragma: no cover - not little-endian 64-bit
        return bytes(sum(flags[i + k] << k for k in range(min(8, n - i))) for i in range(0, n, 8))
    return bytes([(w * 0x0102040810204080 >> 56) & 0xFF for w in words])


_NUMBERS = {"double": "d", "int64": "q"}


def _strings(values: list[Any]) -> pa.Array:
    """A string column. ASCII text (ids, positions, most comments) is joined and encoded once, its
    offsets the running sum of the lengths: a few C calls per column instead of one conversion
    per value; other text goes through Arrow's builder."""
    nulls = values.count(None)
    if nulls == len(values):
        return pa.nulls(nulls, pa.string())
    texts = values if not nulls else ["" if v is None else v for v in values]
    try:
        joined = "".join(texts)
    except TypeError:  # not all text: the builder says what is wrong
        joined = "\u00ff"
    if not joined.isascii() or len(joined) >= 1 << 31:
        builder = pa.lib.StringBuilder()
        builder.append_values(values)
        return builder.finish()
    offsets = array("i", accumulate(map(len, texts), initial=0))
    validity = None if not nulls else pa.py_buffer(_bitmap(bytes([v is not None for v in values])))
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(joined.encode("ascii"))]
    return pa.Array.from_buffers(pa.string(), len(values), buffers, null_count=nulls)


def column(values: list[Any], type_: pa.DataType) -> pa.Array:
    """``pa.array(values, type=type_)`` for the schema's types (string, double, int64, bool; None
    is null) without going through ``pa.array``, whose first call imports pandas to ask whether a
    list is a pandas object (~0.2 s and ~50 MB for every run that publishes Parquet)."""
    n = len(values)
    if pa.types.is_string(type_):
        return _strings(values)
    nulls = values.count(None)
    if nulls == n:
        return pa.nulls(n, type_)
    validity = None if not nulls else pa.py_buffer(_bitmap(bytes([v is not None for v in values])))
    if pa.types.is_boolean(type_):
        data = pa.py_buffer(_bitmap(bytes([v is True for v in values])))
    else:
        zero = 0.0 if pa.types.is_floating(type_) else 0
        code = _NUMBERS[str(type_)]
        data = pa.py_buffer(array(code, values if not nulls else [zero if v is None else v for v in values]))
    return pa.Array.from_buffers(type_, n, [validity, data], null_count=nulls)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _identity(ids: Mapping[str, Any], key: str) -> Any:
    """The identity a result key was scored with (a dynamic ``key:sub`` takes its evaluator's)."""
    ident = ids.get(key)
    if ident is None and ":" in key:
        ident = ids.get(key.split(":", 1)[0])
    return ident


class _Usage(msgspec.Struct, gc=False):
    input_tokens: Any = None
    output_tokens: Any = None
    cost_usd: Any = None


class _Meta(msgspec.Struct, gc=False):
    usage: _Usage | None = None  # the rest of a result's metadata is skipped by the decoder


class _StagedResult(msgspec.Struct, gc=False):
    score: Any = None
    value: Any = None
    comment: Any = None
    error: Any = None
    metadata: _Meta | None = None
    threshold: Any = None  # the evaluator's own pass mark (engine rows carry it)


class StagedRow(msgspec.Struct, gc=False):
    """The part of an engine row the Parquet schema keeps, decoded straight from its JSON (the
    decoder skips everything else: tool lists in metadata, warnings)."""

    trace_id: Any = None
    run_id: Any = None
    position: Any = None
    results: dict[str, _StagedResult] = msgspec.field(default_factory=dict)
    identity: dict[str, Any] | None = None
    platform: Any = None


_decode_lines = msgspec.json.Decoder(StagedRow).decode_lines
_decode_row = msgspec.json.Decoder(StagedRow).decode


def decode_staged(chunk: bytes) -> list[StagedRow] | None:
    """JSON lines of engine rows as :class:`StagedRow` (one C call per chunk); None when a line is
    not of that shape (the caller then reads the chunk as plain JSON)."""
    try:
        return _decode_lines(chunk)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


_JSON_SAME = frozenset({str, bool, type(None)})
_JSON_NUMBERS = frozenset({*_JSON_SAME, int, float})


def _same_in_json(values: list[Any]) -> bool:
    """Whether every value reads back from the engine's JSON as itself: text, bools, nulls,
    finite floats, 64-bit ints (a NaN reads back as null, a set as a list, an object as its text,
    a str subclass as str). A few C calls for a column of plain values."""
    types = set(map(type, values))
    if types <= _JSON_SAME:
        return True
    if not types <= _JSON_NUMBERS:
        return False
    if float in types:
        try:
            if not math.isfinite(math.fsum(v for v in values if type(v) is float)):
                return False
        except (OverflowError, ValueError):  # an infinity, or finite values too large to add
            return False
    if int in types:
        ints = [v for v in values if type(v) is int]
        return min(ints) >= -(1 << 63) and max(ints) < 1 << 64
    return True


def _usage(res: Any) -> Any:
    """A result's usage: of a staged result (``metadata.usage``) or of a ``Result`` (its metadata dict's)."""
    md = res.metadata
    if md is None:
        return None
    return md.usage if type(md) is _Meta else md.get("usage")


def _any_usage(results: list[Any]) -> bool:
    """Whether any of these results (staged ones, or ``Result`` objects) has usage (a metadata
    dict with a ``usage`` key counts), in a few C calls."""
    mds = [r.metadata for r in results]
    if None in mds:
        mds = [md for md in mds if md is not None]
    if not mds:
        return False
    if type(mds[0]) is _Meta:
        return any(map(attrgetter("usage"), mds))
    return any(map(operator.contains, mds, repeat("usage")))


class RowColumns(NamedTuple):
    """Result rows as columns of their top fields (the conversion's input, whatever the rows were)."""

    trace_ids: list[Any]
    run_ids: list[Any]
    positions: list[Any]
    identities: list[Any]
    results: list[Any]
    """Each row's results: key → a staged result or a ``Result``."""
    platforms: list[Any]
    """Each row's ``platform`` (a dict, or None)."""

    @classmethod
    def of_staged(cls, rows: Sequence[StagedRow]) -> RowColumns:
        fields = ("trace_id", "run_id", "position", "identity", "results", "platform")
        return cls(*(list(map(attrgetter(f), rows)) for f in fields))


_ROW_FIELDS = itemgetter("trace_id", "run_id", "position", "results")


def result_columns(rows: Sequence[Any]) -> tuple[RowColumns, set[str]] | None:
    """The engine's rows as it builds them (``Sink.write_results``) as columns, with their result
    keys, when every value the conversion reads is one that reads back from their JSON
    (:func:`~assay.records.encode_row`) as itself; None otherwise (or for rows that are not such
    rows: JSON lines). Such columns give the values their JSON gives through :func:`decode_staged`
    (``tests/unit/connectors/test_parquet_sink.py`` holds them equal); other rows are encoded and
    decoded."""
    if set(map(type, rows)) != {dict}:
        return None
    try:
        fields = list(map(_ROW_FIELDS, rows))
    except KeyError:
        return None
    trace_ids, run_ids, positions, results = (list(c) for c in zip(*fields, strict=True))
    identities = [r.get("identity") for r in rows]
    platforms = [r.get("platform") for r in rows]
    if set(map(type, results)) != {dict} or set(map(type, positions)) != {dict}:
        return None
    if not (
        _same_in_json(trace_ids)
        and _same_in_json(run_ids)
        and _same_in_json(list(chain.from_iterable(map(dict.values, positions))))
    ):
        return None
    for ident in {id(i): i for i in identities}.values():  # the engine's rows share one
        if ident is not None and (type(ident) is not dict or not _same_in_json(list(ident.values()))):
            return None
    keys: set[str] = set().union(*results)
    for key in keys:
        present = [res for res in (r.get(key) for r in results) if res is not None]
        if set(map(type, present)) != {Result}:
            return None
        for field in ("score", "value", "comment", "error", "threshold"):
            if not _same_in_json(list(map(attrgetter(field), present))):
                return None
        metadata = [r.metadata for r in present]
        if not set(map(type, metadata)) <= {dict, type(None)}:
            return None
        if _any_usage(present):
            usages = [u for u in (md.get("usage") for md in metadata if md is not None) if u is not None]
            if usages and (
                set(map(type, usages)) != {dict}
                or not _same_in_json([u.get(f) for u in usages for f in ("input_tokens", "output_tokens", "cost_usd")])
            ):
                return None
    for plat in platforms:
        if plat is not None and (type(plat) is not dict or not _same_in_json(list(plat.values()))):
            return None
    return RowColumns(trace_ids, run_ids, positions, identities, results, platforms), keys


class _ResultColumns:
    """The fields of a result struct as column lists (the hot loop of the conversion)."""

    __slots__ = (
        "comment",
        "cost",
        "error",
        "identity",
        "input_tokens",
        "missing",
        "output_tokens",
        "own",
        "passed",
        "score",
        "value",
    )

    def __init__(self, own_threshold: bool = False) -> None:
        self.score: list[Any] = []
        self.value: list[Any] = []
        self.passed: list[Any] = []
        self.comment: list[Any] = []
        self.error: list[Any] = []
        self.input_tokens: list[Any] = []
        self.output_tokens: list[Any] = []
        self.cost: list[Any] = []
        self.identity: list[Any] = []
        self.missing: list[bool] = []
        self.own: list[Any] | None = [] if own_threshold else None
        """Each result's own pass mark, when the builder keeps it (staged segments)."""

    def add_missing(self) -> None:
        for col in (self.score, self.value, self.passed, self.comment, self.error, self.identity):
            col.append(None)
        self.input_tokens.append(None)
        self.output_tokens.append(None)
        self.cost.append(None)
        self.missing.append(True)
        if self.own is not None:
            self.own.append(None)

    def add(
        self,
        score: Any,
        value: Any,
        comment: Any,
        error: Any,
        usage: Any,
        identity: Any,
        threshold: float,
        own: float | None = None,
    ) -> None:
        """One result's fields, as the JSON row holds them (converted to the column types here);
        ``own``: the result's own pass mark (already in ``threshold``), kept when asked."""
        if self.own is not None:
            self.own.append(own)
        if type(score) is not float:
            score = _float(score)
        self.score.append(score)
        self.value.append(value if value is None or type(value) is str else _text(value))
        self.passed.append(None if score is None else score >= threshold)
        self.comment.append(comment if comment is None or type(comment) is str else _text(comment))
        self.error.append(error if error is None or type(error) is str else _text(error))
        self.identity.append(identity if identity is None or type(identity) is str else _text(identity))
        if usage is None:
            self.input_tokens.append(None)
            self.output_tokens.append(None)
            self.cost.append(None)
        elif type(usage) is dict:
            self.input_tokens.append(_int(usage.get("input_tokens")))
            self.output_tokens.append(_int(usage.get("output_tokens")))
            self.cost.append(_float(usage.get("cost_usd")))
        else:
            self.input_tokens.append(_int(usage.input_tokens))
            self.output_tokens.append(_int(usage.output_tokens))
            self.cost.append(_float(usage.cost_usd))
        self.missing.append(False)

    def add_dict(self, res: Any, identity: Any, threshold: float) -> None:
        if type(res) is not dict:
            self.add_missing()
            return
        md = res.get("metadata")
        usage = md.get("usage") if type(md) is dict else None
        own = res.get("threshold")
        if type(own) is float or type(own) is int:
            threshold = own
        else:
            own = None
        self.add(
            res.get("score"),
            res.get("value"),
            res.get("comment"),
            res.get("error"),
            usage if type(usage) is dict else None,
            identity,
            threshold,
            own,
        )

    def add_staged(self, res: _StagedResult | Result | None, identity: Any, threshold: float) -> None:
        """A staged result (:func:`decode_staged`), or a ``Result`` of :func:`result_row_keys`'s rows."""
        if res is None:
            self.add_missing()
            return
        own = res.threshold
        if type(own) is float or type(own) is int:
            threshold = own
        else:
            own = None
        self.add(res.score, res.value, res.comment, res.error, _usage(res), identity, threshold, own)

    def add_present(self, results: Sequence[_StagedResult | Result], identities: list[Any], threshold: float) -> None:
        """Results present in every row and without usage (a deterministic evaluator's): the
        fields of :meth:`add` column by column."""
        scores = [s if type(s) is float else _float(s) for s in (r.score for r in results)]
        self.score.extend(scores)
        self.value.extend(
            [
                v if v is None or type(v) is str else ("true" if v else "false") if type(v) is bool else _text(v)
                for v in (r.value for r in results)
            ]
        )
        self.passed.extend(
            [
                None if s is None else s >= (t if type(t) is float or type(t) is int else threshold)
                for s, t in zip(scores, (r.threshold for r in results), strict=True)
            ]
        )
        self.comment.extend([c if c is None or type(c) is str else _text(c) for c in (r.comment for r in results)])
        self.error.extend([e if e is None or type(e) is str else _text(e) for e in (r.error for r in results)])
        self.identity.extend([i if i is None or type(i) is str else _text(i) for i in identities])
        nones = [None] * len(results)
        self.input_tokens.extend(nones)
        self.output_tokens.extend(nones)
        self.cost.extend(nones)
        self.missing.extend([False] * len(results))
        if self.own is not None:
            self.own.extend([t if type(t) is float or type(t) is int else None for t in (r.threshold for r in results)])

    def arrays(self) -> list[pa.Array]:
        cols = (
            self.score,
            self.value,
            self.passed,
            self.comment,
            self.error,
            self.input_tokens,
            self.output_tokens,
            self.cost,
            self.identity,
        )
        arrays = [column(col, t) for col, (_, t) in zip(cols, RESULT_FIELDS, strict=True)]
        if self.own is not None:
            arrays.append(column(self.own, pa.float64()))
        return arrays

    def struct(self) -> pa.StructArray:
        """The struct column; rows with no result under the key are null structs."""
        mask = column(self.missing, pa.bool_()) if any(self.missing) else None
        type_ = RESULT_TYPE if self.own is None else SEGMENT_RESULT_TYPE
        return pa.StructArray.from_arrays(self.arrays(), fields=list(type_), mask=mask)


class TableBuilder:
    """Result rows → Arrow record batches of the schema above (a batch per ``batch()`` call)."""

    def __init__(
        self,
        keys: Sequence[str],
        *,
        layout: str = "wide",
        ds: str | None = None,
        thresholds: Mapping[str, float] | None = None,
        own_threshold: bool = False,
    ) -> None:
        self.keys = list(keys)
        self.layout = layout
        self.ds = ds
        self.thresholds = dict(thresholds or {})
        self.own_threshold = own_threshold
        """Keep each result's own pass mark (:data:`OWN_THRESHOLD`): the staged segments' schema."""
        self.schema = result_schema(self.keys, layout, own_threshold=own_threshold)
        self._reset()

    def _reset(self) -> None:
        self.top: list[list[Any]] = [[], [], [], []]
        self.platforms: list[Any] = []
        self.cols: dict[str, _ResultColumns] = {k: _ResultColumns(self.own_threshold) for k in self.keys}
        self.long_keys: list[str] = []
        self.long = _ResultColumns(self.own_threshold)
        self.rows = 0

    def _top(self, tid: Any, rid: Any, position: Any, platform: Any = None) -> None:
        self.platforms.append(platform)
        t0, t1, t2, t3 = self.top
        t0.append(tid if tid is None or type(tid) is str else _text(tid))
        t1.append(rid if rid is None or type(rid) is str else _text(rid))
        t2.append(self.ds)
        t3.append(position_text(position))

    def add(self, row: Mapping[str, Any]) -> None:
        """One result row (the engine's JSON row, parsed)."""
        results = row.get("results")
        if type(results) is not dict:
            results = {}
        identity = row.get("identity")
        ids = identity if type(identity) is dict else {}
        thresholds = self.thresholds
        if self.layout == "long":
            for key, res in results.items():
                if type(res) is dict:
                    self._top(row.get("trace_id"), row.get("run_id"), row.get("position"), row.get("platform"))
                    self.long_keys.append(key)
                    self.long.add_dict(res, _identity(ids, key), thresholds.get(key, 0.5))
                    self.rows += 1
            return
        self._top(row.get("trace_id"), row.get("run_id"), row.get("position"), row.get("platform"))
        for key, cols in self.cols.items():
            cols.add_dict(results.get(key), _identity(ids, key), thresholds.get(key, 0.5))
        self.rows += 1

    def add_staged(self, row: StagedRow) -> None:
        """One result row as :func:`decode_staged` decodes it (the same columns as :meth:`add`)."""
        results = row.results
        ids = row.identity or {}
        thresholds = self.thresholds
        if self.layout == "long":
            for key, res in results.items():
                self._top(row.trace_id, row.run_id, row.position, row.platform)
                self.long_keys.append(key)
                self.long.add_staged(res, _identity(ids, key), thresholds.get(key, 0.5))
                self.rows += 1
            return
        self._top(row.trace_id, row.run_id, row.position, row.platform)
        get = results.get
        for key, cols in self.cols.items():
            cols.add_staged(get(key), _identity(ids, key), thresholds.get(key, 0.5))
        self.rows += 1

    def add_staged_rows(self, rows: Sequence[StagedRow]) -> None:
        """Rows as :func:`decode_staged` decodes them, column by column: the same values as
        :meth:`add_staged` row by row (``tests/unit/connectors/test_parquet_sink.py`` holds them
        together), in a few list comprehensions per column instead of a dozen calls per row."""
        if self.layout == "long":
            for row in rows:
                self.add_staged(row)
            return
        self.add_columns(RowColumns.of_staged(rows))

    def add_columns(self, rows: RowColumns) -> None:
        """Rows as columns: of staged rows (:meth:`add_staged_rows`), or of the engine's rows
        (:func:`result_columns`), whose ``Result`` objects are read as staged results are."""
        if self.layout == "long":
            for tid, rid, position, identity, results, platform in zip(*rows, strict=True):
                self.add_staged(StagedRow(tid, rid, position, results, identity, platform))
            return
        trace_ids, run_ids, positions, identities, results, platforms = rows
        self.platforms.extend(platforms)
        t0, t1, t2, t3 = self.top
        t0.extend([t if t is None or type(t) is str else _text(t) for t in trace_ids])
        t1.extend([t if t is None or type(t) is str else _text(t) for t in run_ids])
        t2.extend([self.ds] * len(trace_ids))
        t3.extend(
            [  # position_text, with the file sources' {file, line} inline (a call per row costs as much)
                f"{p['file']}:{line}"
                if type(p) is dict and len(p) == 2 and "file" in p and (line := p.get("line")) is not None
                else position_text(p)
                for p in positions
            ]
        )
        first = identities[0] if identities else None
        shared = identities.count(first) == len(identities)  # the engine's rows share one identity dict
        for key, cols in self.cols.items():
            found = [r.get(key) for r in results]
            present = [res for res in found if res is not None]
            if shared:
                ids = [_identity(first or {}, key)] * len(found)
            else:
                ids = [_identity(i or {}, key) for i in identities]
            if len(present) < len(found) or _any_usage(present):
                for res, ident in zip(found, ids, strict=True):  # missing results or usage: row by row
                    cols.add_staged(res, ident, self.thresholds.get(key, 0.5))
                continue
            cols.add_present(present, ids, self.thresholds.get(key, 0.5))
        self.rows += len(trace_ids)

    def add_all(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for r in rows:
            self.add(r)

    def batch(self) -> pa.RecordBatch:
        """The rows added since the last call, as one record batch."""
        arrays: list[pa.Array] = [column(col, t) for col, (_, t) in zip(self.top, TOP_FIELDS[:TEXT_TOP], strict=True)]
        arrays.append(platform_column(self.platforms))
        if self.layout == "long":
            arrays.append(column(self.long_keys, pa.string()))
            arrays += self.long.arrays()
        else:
            arrays += [cols.struct() for cols in self.cols.values()]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._reset()
        return batch


def summary_keys(summary: Mapping[str, Any]) -> tuple[list[str], dict[str, float]]:
    """The result keys of a run (sorted) and their thresholds, from its summary."""
    evaluators = summary.get("evaluators") or {}
    keys = sorted(k for k in evaluators if isinstance(k, str))
    thresholds = {
        k: float(v.get("threshold", 0.5))
        for k, v in evaluators.items()
        if isinstance(v, dict) and v.get("threshold") is not None
    }
    return keys, thresholds


__all__ = [
    "OWN_THRESHOLD",
    "PLATFORM_TYPE",
    "RESULT_FIELDS",
    "RESULT_TYPE",
    "ROW_GROUP_ROWS",
    "SEGMENT_RESULT_TYPE",
    "TOP_FIELDS",
    "RowColumns",
    "StagedRow",
    "TableBuilder",
    "decode_staged",
    "platform_column",
    "position_text",
    "result_columns",
    "result_schema",
    "summary_keys",
]
