"""Exports that hold one trace in many rows: LangSmith runs and Langfuse observations.

A LangSmith bulk export (Parquet), a ``list_runs`` JSON-lines dump or a flat JSON array of runs
has one row per run; a Langfuse blob-storage export (``observations_v2/`` enriched observations,
or the legacy ``observations/``) one row per observation, and the legacy ``traces/`` one row per
trace (:func:`is_langfuse_trace_row`; its ``id`` is the trace id). The rows of one trace share a
``trace_id`` and may be anywhere in any of the export's files. :func:`export_row_kind` recognises
such a row; :class:`~assay.traces.row_groups.RowGroups` collects rows by trace id in memory bounded
by a budget (past it, an external sort: runs sorted by trace id on disk, merged at the end) and
gives back each trace's rows in the order they came. The grouped rows (a JSON array) are then read
by the ``langsmith`` and ``langfuse`` normalizers, which decode the JSON-text ``inputs`` /
``outputs`` columns with :func:`decode_json_text`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson

from assay.traces.row_groups import DEFAULT_SPILL_BYTES, RowGroups
from assay.traces.timing import time_key

#: Observation types of Langfuse (the agent types included).
OBSERVATION_TYPES = frozenset(
    {
        "GENERATION",
        "SPAN",
        "EVENT",
        "TOOL",
        "AGENT",
        "CHAIN",
        "RETRIEVER",
        "EMBEDDING",
        "EVALUATOR",
        "GUARDRAIL",
    }
)


def export_row_kind(row: Any) -> str | None:
    """``"langsmith"`` for a LangSmith run row (``run_type`` with ``trace_id`` and
    ``dotted_order`` or ``parent_run_id``), ``"langfuse"`` for a Langfuse observation row (an
    observation ``type`` with a trace id and a parent or start-time field, or a legacy ``traces/``
    row: :func:`is_langfuse_trace_row`), else None.

    A run *tree* (runs in ``child_runs``) or a trace with its ``observations`` is a whole trace
    already."""
    if type(row) is not dict:
        return None
    if is_langfuse_trace_row(row):
        return "langfuse"
    if "run_type" in row:
        nested = row.get("child_runs")  # list_runs dumps carry ``child_runs: null``
        if "trace_id" in row and ("dotted_order" in row or "parent_run_id" in row) and not nested:
            return "langsmith"
        return None
    if row.get("type") in OBSERVATION_TYPES and "observations" not in row:
        has_trace = "trace_id" in row or "traceId" in row
        linked = any(k in row for k in ("parent_observation_id", "parentObservationId", "start_time", "startTime"))
        if has_trace and linked:
            return "langfuse"
    return None


#: Columns of a Langfuse ``traces/`` export row that tell it apart (with ``id`` and ``timestamp``).
_TRACE_ROW_MARKS = ("bookmarked", "public")


#: Columns of a Langfuse ``scores/`` export row (written beside the traces and observations).
_SCORE_COLUMNS = frozenset({"id", "timestamp", "name", "value", "data_type"})


def score_columns(names: Collection[str]) -> bool:
    """Whether a table with these columns holds Langfuse ``scores/`` rows (scores of traces, not
    traces): ``id``, ``timestamp``, ``name``, ``value``, ``data_type`` and a ``trace_id`` or
    ``observation_id``, no observation ``type``."""
    cols = set(names)
    return cols >= _SCORE_COLUMNS and not cols.isdisjoint({"trace_id", "observation_id"}) and "type" not in cols


def is_langfuse_score_row(row: Any) -> bool:
    """A row of a Langfuse ``scores/`` export (:func:`score_columns`, and a score ``data_type``)."""
    return (
        type(row) is dict
        and row.get("data_type") in ("NUMERIC", "BOOLEAN", "CATEGORICAL", "TEXT")
        and score_columns(row)
    )


def is_langfuse_trace_row(row: Any) -> bool:
    """A row of a legacy Langfuse ``traces/`` export: ``id``, ``timestamp``, ``project_id`` and
    ``bookmarked`` or ``public``, with no observation ``type`` and no ``trace_id`` (its trace id is
    its ``id``). Its observations are the ``observations/`` rows with that ``trace_id``."""
    return (
        type(row) is dict
        and "id" in row
        and "timestamp" in row
        and "project_id" in row
        and any(k in row for k in _TRACE_ROW_MARKS)
        and row.get("type") is None
        and not row.get("trace_id")
        and "observations" not in row
    )


def _trace_columns(cols: set[str]) -> bool:
    return {"id", "timestamp", "project_id"} <= cols and not cols.isdisjoint(_TRACE_ROW_MARKS) and "type" not in cols


def export_columns(names: Collection[str]) -> bool:
    """Whether a table with these columns holds export rows (:func:`export_row_kind`'s rule on the
    column names: a Parquet schema tells before any row is read)."""
    cols = set(names)
    if _trace_columns(cols) and "trace_id" not in cols:
        return True
    if "run_type" in cols:
        return "trace_id" in cols and ("dotted_order" in cols or "parent_run_id" in cols)
    has_trace = "trace_id" in cols or "traceId" in cols
    linked = not cols.isdisjoint({"parent_observation_id", "parentObservationId", "start_time", "startTime"})
    return "type" in cols and has_trace and linked and "observations" not in cols


def row_trace_id(row: dict[str, Any]) -> str | None:
    """The trace id of an export row (None when it has none: the row is a trace of its own); a
    Langfuse ``traces/`` row's is its ``id``."""
    tid = row.get("id") if is_langfuse_trace_row(row) else row.get("trace_id", row.get("traceId"))
    if tid is None or tid == "":
        return None
    return str(tid)


def decode_json_text(value: Any) -> Any:
    """A column exports store as JSON text (``inputs``, ``outputs``, ``input``, ``metadata``):
    the decoded value when the text is a JSON object, array or string; otherwise as it is (a plain
    string stays a string)."""
    if type(value) is not str:
        return value
    head = value.lstrip()[:1]
    if head not in ("{", "[", '"'):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def latest_by_id(rows: list[Any], *stamps: str) -> list[Any]:
    """One row per ``id``, in the order ids first appear: exports repeat a row (Langfuse writes an
    observation into every export window it was updated in, and into both ``observations_v2/`` and
    ``observations/`` in the combined mode), and a trace must not hold it twice. The row with the
    latest of the ``stamps`` fields wins (on a tie, the one with more fields: an enriched row over
    a legacy one); rows without an id are all kept.

    >>> latest_by_id([{"id": 1, "v": "a", "t": 1}, {"id": 2}, {"id": 1, "v": "b", "t": 2}], "t")
    [{'id': 1, 'v': 'b', 't': 2}, {'id': 2}]
    """

    def rank(row: dict[str, Any]) -> tuple[float, int]:
        for field in stamps:
            t = time_key(row.get(field))
            if t is not None:
                return t, len(row)
        return float("-inf"), len(row)

    out: list[Any] = []
    at: dict[Any, int] = {}
    for row in rows:
        key = row.get("id") if type(row) is dict else None
        if key is None or isinstance(key, dict | list):
            out.append(row)
        elif key not in at:
            at[key] = len(out)
            out.append(row)
        elif rank(row) >= rank(out[at[key]]):
            out[at[key]] = row
    return out


__all__ = [
    "DEFAULT_SPILL_BYTES",
    "OBSERVATION_TYPES",
    "RowGroups",
    "decode_json_text",
    "export_columns",
    "export_row_kind",
    "is_langfuse_score_row",
    "is_langfuse_trace_row",
    "latest_by_id",
    "row_trace_id",
    "score_columns",
]
