"""Reading the trajectories of a few traces back from their source records.

Result rows do not hold the trajectory; they hold the record's ``position`` (file and line: a
``{file, line}`` object in JSON lines, the text ``file:line`` in Parquet and Delta outputs). For
the handful of traces a report shows, each source file is streamed once up to the last line
needed (a Parquet source: only the row groups holding the rows needed, the line being the row
number) and those records are normalized as ``assay run`` does. A record that cannot be read (the
file moved, a Kafka offset, an id that does not match) leaves the trace with its results only.
Remote source files are readable once a scheme has an opener (:func:`register_source_opener`);
``s3://`` objects are built in (the report's shared S3 reader).

Multi-row exports (LangSmith runs, Langfuse observations: :func:`assay.traces.exports.export_row_kind`)
hold a trace in many rows, and a result's position is its first row's. When the row there is an
export row, the rows of the wanted traces are gathered, as ``assay run`` groups them, from that
file and the other files of its folder (an export's files are cut by size; Langfuse's legacy
``traces/`` and ``observations/`` folders are read together), JSON lines or Parquet (only the rows of
the wanted traces are decoded), at most :data:`MAX_EXPORT_ROWS` per trace, and assembled into the
trace the run scored (an export object in S3 is read alone).
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import IO, Any

import orjson

from assay.connectors.file import iter_lines
from assay.exceptions import AssayError
from assay.report.aggregate import WorstTrace, short
from assay.report.store import open_decompressed

__all__ = ["attach_trajectories", "compact_trace", "register_source_opener"]

MAX_MESSAGES = 60
CONTENT_CHARS = 1500
ARGS_CHARS = 600
#: Rows of one multi-row export trace gathered for its trajectory (a larger trace shows its first ones).
MAX_EXPORT_ROWS = 5000
#: Langfuse's export folders: the legacy ``traces/`` rows and their ``observations/`` are read together.
_LANGFUSE_FOLDERS = ("traces", "observations")

SourceOpener = Callable[[str], IO[bytes]]
_OPENERS: dict[str, SourceOpener] = {}


def register_source_opener(scheme: str, opener: SourceOpener) -> None:
    """Read source records of ``scheme://…`` positions with ``opener(location)`` (raw bytes;
    decompressed here by suffix)."""
    _OPENERS[scheme] = opener


def _open_s3(name: str) -> IO[bytes]:
    from assay.connectors.s3_client import parse_s3_url
    from assay.connectors.s3_results import shared_reader

    url = parse_s3_url(name)
    return shared_reader().open_object(url.bucket, url.key)


register_source_opener("s3", _open_s3)


def _open_source(name: str) -> IO[bytes] | None:
    scheme, sep, _ = name.partition("://")
    if sep:
        opener = _OPENERS.get(scheme)
        return opener(name) if opener else None
    if not os.path.isfile(name):
        return None
    return open(name, "rb")


def _file_line(position: Any) -> tuple[str, int] | None:
    """A row's position as (file, line): the JSON-lines object, or the ``file:line`` text of
    Parquet and Delta outputs (a Kafka ``topic[p]@offset`` is neither)."""
    if isinstance(position, dict):
        file, line = position.get("file") or position.get("key"), position.get("line")
        if isinstance(file, str) and isinstance(line, int):
            return file, line
    elif isinstance(position, str):
        file, sep, line_text = position.rpartition(":")
        if sep and file and line_text.isdigit() and int(line_text) > 0:
            return file, int(line_text)
    return None


_Exports = dict[str, dict[str, list[tuple[int, WorstTrace]]]]
"""Per export file: per trace id, the (first row, trace) whose rows are to be gathered."""


def attach_trajectories(traces: Iterable[WorstTrace]) -> None:
    """Fill ``trajectory`` of each trace whose source record is readable (one pass per file; a
    multi-row export: one more pass over its folder's files)."""
    wanted: dict[str, dict[int, list[WorstTrace]]] = defaultdict(lambda: defaultdict(list))
    for t in traces:
        fl = _file_line(t.position)
        if fl:
            wanted[fl[0]][fl[1]].append(t)
    exports: _Exports = defaultdict(lambda: defaultdict(list))
    for name, lines in wanted.items():
        with contextlib.suppress(OSError, AssayError, EOFError, ValueError):
            _read_lines(name, lines, exports)
    for name, ids in exports.items():
        with contextlib.suppress(OSError, AssayError, EOFError, ValueError):
            _assemble_exports(name, ids)


def _is_parquet(name: str, raw: IO[bytes]) -> bool:
    from assay.connectors.parquet_rows import MAGIC, has_parquet_suffix

    if has_parquet_suffix(name):
        return True
    if not raw.seekable():
        return False
    head = raw.read(4)
    raw.seek(0)
    return head == MAGIC


def _read_parquet_rows(name: str, raw: IO[bytes], rows: dict[int, list[WorstTrace]], exports: _Exports) -> None:
    """The rows wanted of a Parquet source (1-based row numbers), read a row group at a time, as
    the Parquet source decodes them. An export's row is its trace's first: the trace is gathered
    (``exports``)."""
    import pyarrow.parquet as pq

    from assay.connectors.parquet_traces import BatchRows, Row, columnar_plan
    from assay.records import Envelope, Position
    from assay.traces.exports import export_columns

    pf = pq.ParquetFile(raw)
    if export_columns(pf.schema_arrow.names):
        for r, ts in rows.items():
            for t in ts:
                exports[name][t.trace_id].append((r, t))
        return
    first, last = 0, max(rows)
    for g in range(pf.metadata.num_row_groups):
        if first >= last:
            return
        size = pf.metadata.row_group(g).num_rows
        if not any(first < r <= first + size for r in rows):
            first += size
            continue
        for batch in pf.read_row_group(g).to_batches():
            block = BatchRows(batch, columnar_plan(batch.schema))
            for r in (r for r in rows if first < r <= first + batch.num_rows):
                env = Envelope(b"", Position(name, r), record=Row(block, r - first - 1))
                for t in rows[r]:
                    t.trajectory = compact_trace(b"", name, r, t.trace_id, envelope=env)
            first += batch.num_rows


def _read_lines(name: str, lines: dict[int, list[WorstTrace]], exports: _Exports) -> None:
    from assay.traces.exports import export_row_kind, row_trace_id

    raw = _open_source(name)
    if raw is None:
        return
    if _is_parquet(name, raw):
        with raw:
            _read_parquet_rows(name, raw, lines, exports)
        return
    last = max(lines)
    with contextlib.ExitStack() as stack:
        stack.enter_context(raw)
        f = stack.enter_context(open_decompressed(raw, name))
        for i, text in enumerate(iter_lines(f), 1):
            ts = lines.get(i, ())
            row = _json_row(text) if ts else None
            if row is not None and export_row_kind(row) is not None:
                for t in ts:  # one row of a trace the export spreads over many
                    exports[name][row_trace_id(row) or t.trace_id].append((i, t))
            else:
                for t in ts:
                    t.trajectory = compact_trace(text, name, i, t.trace_id)
            if i >= last:
                break


def _json_row(text: bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _export_files(name: str) -> list[str]:
    """The files whose rows may belong to the traces of export file ``name``: it, then the other
    files of its folder (and of Langfuse's sibling ``traces/``/``observations/`` folder), sorted;
    a remote file alone."""
    if "://" in name:
        return [name]
    folder = os.path.dirname(name) or "."
    folders = [folder]
    parent, base = os.path.split(os.path.abspath(folder))
    if base in _LANGFUSE_FOLDERS:
        folders += [os.path.join(parent, other) for other in _LANGFUSE_FOLDERS if other != base]
    found = [name]
    for d in folders:
        with contextlib.suppress(OSError):
            for entry in sorted(os.listdir(d)):
                path = os.path.join(d, entry)
                if not entry.startswith((".", "_")) and os.path.isfile(path) and not _same(path, name):
                    found.append(path)
    return found


def _same(a: str, b: str) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


def _assemble_exports(name: str, ids: dict[str, list[tuple[int, WorstTrace]]]) -> None:
    """Gather the rows of the traces ``ids`` from export file ``name``'s files and show each
    trace as the run assembled it."""
    gathered: dict[str, list[bytes]] = {tid: [] for tid in ids}
    files: dict[str, set[str]] = {tid: set() for tid in ids}
    for path in _export_files(name):
        with contextlib.suppress(OSError, AssayError, EOFError, ValueError):
            for tid, payload in _export_rows(path, gathered):
                rows = gathered[tid]
                if len(rows) < MAX_EXPORT_ROWS:
                    rows.append(payload)
                    files[tid].add(path)
    for tid, firsts in ids.items():
        rows = gathered[tid]
        if not rows:
            continue
        payload = b"[" + b",".join(rows) + b"]"
        for line, t in firsts:
            traj = compact_trace(payload, name, line, tid)
            if traj is not None and "where" in traj:
                where = name if len(files[tid]) == 1 else f"{len(files[tid])} files of {os.path.dirname(name) or '.'}"
                traj["where"] = f"{len(rows)} export rows in {where} (first: {name}:{line})"
            t.trajectory = traj


def _export_rows(path: str, wanted: dict[str, list[bytes]]) -> Iterable[tuple[str, bytes]]:
    """(trace id, row as JSON) of the rows of ``path`` that belong to a ``wanted`` trace."""
    from assay.traces.exports import export_row_kind, row_trace_id

    raw = _open_source(path)
    if raw is None:
        return
    with raw:
        if _is_parquet(path, raw):
            yield from _parquet_export_rows(raw, wanted)
            return
        with open_decompressed(raw, path) as f:
            for text in iter_lines(f):
                row = _json_row(text.rstrip(b"\r"))
                if type(row) is dict and export_row_kind(row) is not None:
                    tid = row_trace_id(row)
                    if tid in wanted:
                        yield tid, bytes(text.rstrip(b"\r"))


def _parquet_export_rows(raw: IO[bytes], wanted: dict[str, list[bytes]]) -> Iterable[tuple[str, bytes]]:
    """The wanted traces' rows of a Parquet export, read a row group at a time: the trace id
    columns first, then only the groups holding a wanted row, decoded as the Parquet source does."""
    import pyarrow.parquet as pq

    from assay.connectors.parquet_traces import BatchRows, Row, columnar_plan
    from assay.traces.exports import export_columns, row_trace_id

    pf = pq.ParquetFile(raw)
    names = pf.schema_arrow.names
    if not export_columns(names):
        return
    id_columns = [c for c in ("trace_id", "traceId", "id") if c in names]
    for g in range(pf.metadata.num_row_groups):
        ids = pf.read_row_group(g, columns=id_columns)
        if not any(str(v) in wanted for c in id_columns for v in ids.column(c).to_pylist() if v is not None):
            continue
        for batch in pf.read_row_group(g).to_batches():
            block = BatchRows(batch, columnar_plan(batch.schema))
            for i in range(batch.num_rows):
                row = Row(block, i).as_dict()
                tid = row_trace_id(row)
                if tid in wanted:
                    yield tid, orjson.dumps(row, default=str, option=orjson.OPT_NON_STR_KEYS)


def compact_trace(
    payload: bytes, file: str, line: int, trace_id: str | None = None, *, envelope: Any = None
) -> dict[str, Any] | None:
    """A bounded, display-ready view of one source record (``payload``, or an ``envelope`` whose
    record a source decoded: a Parquet row): messages (role, text, tool calls), final output and
    the reference's tool calls; the raw record when it does not normalize; None when it is
    another trace than ``trace_id``."""
    from assay.records import Envelope, Position
    from assay.stages.normalize import parse_envelope
    from assay.traces.model import Trace
    from assay.traces.normalize import NormalizeOptions

    if payload[-1:] == b"\r":
        payload = payload[:-1]
    env = envelope if envelope is not None else Envelope(payload, Position(file, line))
    trace = parse_envelope(env, NormalizeOptions())
    if not isinstance(trace, Trace):
        raw = env.raw() if envelope is not None else payload
        return {"raw": short(raw.decode("utf-8", "replace"), 4000), "error": short(trace.message, 300)}
    if trace_id is not None and trace.id not in (trace_id, None) and trace_id != f"{file}:{line}":
        return None
    messages = []
    for m in trace.messages[:MAX_MESSAGES]:
        content = m.content
        text = content if isinstance(content, str) or content is None else short(content, CONTENT_CHARS)
        messages.append(
            {
                "role": m.role,
                "content": short(text or "", CONTENT_CHARS),
                "tool_calls": [
                    {"name": tc.name, "args": short(tc.args, ARGS_CHARS), "error": tc.args_error}
                    for tc in (m.tool_calls or [])
                ],
                "tool_call_id": m.tool_call_id,
            }
        )
    reference_calls = [tc.name for tc in trace.reference.tool_calls()] if trace.reference is not None else None
    return {
        "format": trace.format,
        "input": short(trace.input, CONTENT_CHARS) if trace.input is not None else None,
        "messages": messages,
        "omitted_messages": max(0, len(trace.messages) - MAX_MESSAGES),
        "final_output": short(trace.final_output, CONTENT_CHARS) if trace.final_output is not None else None,
        "reference_tool_calls": reference_calls,
        "where": f"{file}:{line}",
    }
