"""Reading the trajectories of a few traces back from their source records.

Result rows do not hold the trajectory; they hold the record's ``position`` (file and line: a
``{file, line}`` object in JSON lines, the text ``file:line`` in Parquet and Delta outputs). For
the handful of traces a report shows, each source file is streamed once up to the last line
needed (a Parquet source: only the row groups holding the rows needed, the line being the row
number) and those records are normalized as ``assay run`` does. A record that cannot be read (the
file moved, a Kafka offset, an id that does not match) leaves the trace with its results only.
Remote source files are readable once a scheme has an opener (:func:`register_source_opener`);
``s3://`` objects are built in (the report's shared S3 reader).
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import IO, Any

from assay.connectors.file import iter_lines
from assay.exceptions import AssayError
from assay.report.aggregate import WorstTrace, short
from assay.report.store import open_decompressed

__all__ = ["attach_trajectories", "compact_trace", "register_source_opener"]

MAX_MESSAGES = 60
CONTENT_CHARS = 1500
ARGS_CHARS = 600

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


def attach_trajectories(traces: Iterable[WorstTrace]) -> None:
    """Fill ``trajectory`` of each trace whose source record is readable (one pass per file)."""
    wanted: dict[str, dict[int, list[WorstTrace]]] = defaultdict(lambda: defaultdict(list))
    for t in traces:
        fl = _file_line(t.position)
        if fl:
            wanted[fl[0]][fl[1]].append(t)
    for name, lines in wanted.items():
        with contextlib.suppress(OSError, AssayError, EOFError, ValueError):
            _read_lines(name, lines)


def _is_parquet(name: str, raw: IO[bytes]) -> bool:
    from assay.connectors.parquet_rows import MAGIC, has_parquet_suffix

    if has_parquet_suffix(name):
        return True
    if not raw.seekable():
        return False
    head = raw.read(4)
    raw.seek(0)
    return head == MAGIC


def _read_parquet_rows(name: str, raw: IO[bytes], rows: dict[int, list[WorstTrace]]) -> None:
    """The rows wanted of a Parquet source (1-based row numbers), read a row group at a time, as
    the Parquet source decodes them. Exports that spread a trace over many rows (LangSmith runs,
    Langfuse observations) are assembled across files by a run: one row is not the trace."""
    import pyarrow.parquet as pq

    from assay.connectors.parquet_traces import BatchRows, Row, columnar_plan
    from assay.records import Envelope, Position
    from assay.traces.exports import export_columns

    pf = pq.ParquetFile(raw)
    if export_columns(pf.schema_arrow.names):
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


def _read_lines(name: str, lines: dict[int, list[WorstTrace]]) -> None:
    raw = _open_source(name)
    if raw is None:
        return
    if _is_parquet(name, raw):
        with raw:
            _read_parquet_rows(name, raw, lines)
        return
    last = max(lines)
    with contextlib.ExitStack() as stack:
        stack.enter_context(raw)
        f = stack.enter_context(open_decompressed(raw, name))
        for i, text in enumerate(iter_lines(f), 1):
            for t in lines.get(i, ()):
                t.trajectory = compact_trace(text, name, i, t.trace_id)
            if i >= last:
                break


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
