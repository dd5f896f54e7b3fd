"""The columnar scorer against the object path, row by row and key by key.

A seeded universe of distinct generated rows (``tests/support/columnar_corpus.py``: duplicates,
empty and null lists, unicode names, very long lists, argument key order, ``1`` vs ``1.0`` vs
``true``, defective rows) is scored once by the object path (each row's trace, as the Parquet
source builds it, through each evaluator); then 10⁶ rows drawn from it in a seeded random order
are scored by columns in batches of 65,536, and every batch's score, value and ``passed`` columns
must equal the object path's (vectorised: the universe's results taken by the rows' indices), as
must the rows sent back to the object path. Comments are compared on the universe itself and on
the first batch. ``ASSAY_COLUMNAR_DIFF_ROWS`` sets the row count (default 10⁶).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from assay.connectors.parquet_traces import BatchRows, columnar_plan
from assay.evaluators import ToolCallAccuracy, ToolUse, TrajectoryMatch
from assay.evaluators.base import BaseEvaluator
from assay.evaluators.columnar import ColumnarScores, plan
from assay.exceptions import NormalizationError
from assay.stages.normalize import trace_warnings
from assay.traces.model import Trace
from assay.traces.normalize import DEFAULT_OPTIONS, normalize_record
from tests.support.columnar_corpus import spread, universe

ROWS = int(os.environ.get("ASSAY_COLUMNAR_DIFF_ROWS", "1000000"))
BATCH = 65_536


def evaluators() -> list[BaseEvaluator[Any]]:
    evs: list[BaseEvaluator[Any]] = []
    for mode in ("strict", "unordered", "subset", "superset", "subsequence"):
        for args in ("ignore", "exact"):
            evs.append(TrajectoryMatch(mode=mode, tool_args_match_mode=args, key=f"{mode}:{args}"))
    for args in ("ignore", "exact"):
        evs.append(
            TrajectoryMatch(mode="strict", strict_scope="tool_calls", tool_args_match_mode=args, key=f"flat:{args}")
        )
        evs.append(ToolCallAccuracy(args_match_mode=args, key=f"accuracy:{args}"))
    evs.append(ToolUse(expected_tool="search", key="use:search"))
    evs.append(ToolUse(expected_tool="工具", key="use:unicode"))
    evs.append(ToolUse(expected_tool="get_order", expected_args={"id": 1}, args_match_mode="exact", key="use:args"))
    return evs


def object_trace(rows: BatchRows, i: int) -> Trace | None:
    """Row ``i`` as the engine reads it: the Parquet fast path, else the general normalizer
    (None: a dead letter)."""
    trace = rows.trace(i)
    if trace is not None:
        return trace
    try:
        return normalize_record(rows.record(i), DEFAULT_OPTIONS)
    except (NormalizationError, TypeError, ValueError, KeyError, AttributeError, IndexError):
        return None


def object_path(
    batch: pa.RecordBatch, evs: list[BaseEvaluator[Any]]
) -> tuple[np.ndarray, dict[str, dict[str, pa.Array]]]:
    """The rows the object path reads another way (general path or argument warnings), and per
    key the score, value, passed and comment of every other row (nulls at the others)."""
    rows = BatchRows(batch, columnar_plan(batch.schema))
    n = batch.num_rows
    fallback = np.zeros(n, dtype=bool)
    cols: dict[str, dict[str, list[Any]]] = {
        ev.key: {f: [] for f in ("score", "value", "passed", "comment")} for ev in evs
    }
    for i in range(n):
        trace = object_trace(rows, i)
        if trace is None or trace_warnings(trace):
            fallback[i] = True  # a dead letter, or a warning row beside the result: the object path's
        for ev in evs:
            r = ev.score_trace(trace)[0] if trace is not None else None
            c = cols[ev.key]
            c["score"].append(None if r is None else r.score)
            c["value"].append(None if r is None else r.value)
            c["passed"].append(None if r is None else r.passed)
            c["comment"].append(None if r is None else r.comment)
    typed: dict[str, dict[str, pa.Array]] = {}
    for key, c in cols.items():
        value_type = pa.string() if key.startswith("accuracy") else pa.bool_()
        typed[key] = {
            "score": pa.array(c["score"], pa.float64()),
            "value": pa.array(c["value"], value_type),
            "passed": pa.array(c["passed"], pa.bool_()),
            "comment": pa.array(c["comment"], pa.string()),
        }
    return fallback, typed


def check(
    scores: ColumnarScores,
    fallback: np.ndarray,
    expected: dict[str, dict[str, pa.Array]],
    idx: np.ndarray | None,
    fields: tuple[str, ...],
) -> None:
    got_fallback = np.zeros(scores.num_rows, dtype=bool)
    if scores.fallback is not None:
        got_fallback = np.asarray(scores.fallback.to_numpy(zero_copy_only=False), dtype=bool)
    must = fallback if idx is None else fallback[idx]
    # every row the object path reads with a dead letter or a warning row goes back to it; the
    # columnar forms may send back a few more (a role alias, a call without a name), never many
    assert (got_fallback | ~must).all(), "a row the object path dead-letters or warns about was scored by columns"
    assert got_fallback.sum() <= must.sum() + 0.02 * len(must)
    keep = pa.array(~got_fallback)
    take = None if idx is None else pa.array(idx)
    for key, want in expected.items():
        got = scores.results[key]
        for field in fields:
            w = want[field] if take is None else want[field].take(take)
            g = getattr(got, field)
            w, g = w.filter(keep), g.filter(keep)
            if not w.equals(g):
                wl, gl = w.to_pylist(), g.to_pylist()
                bad = [i for i in range(len(wl)) if wl[i] != gl[i]][:3]
                pytest.fail(f"{key}.{field}: {len(bad)}+ rows differ, e.g. {[(wl[i], gl[i]) for i in bad]}")


def test_columnar_equals_object_path_over_a_million_rows() -> None:
    evs = evaluators()
    base = universe(4000, seed=7)
    fallback, expected = object_path(base, evs)
    assert 0 < fallback.sum() < 0.1 * base.num_rows  # some defective rows, not many
    p = plan(evs, base.schema)
    assert p is not None and p.keys == [ev.key for ev in evs]
    # the universe itself, comments included
    check(p.score(base), fallback, expected, None, ("score", "value", "passed", "comment"))
    # every verdict occurs: no key is trivially all-pass or all-fail
    for key, cols in expected.items():
        passed = [v for v, f in zip(cols["passed"].to_pylist(), fallback, strict=True) if not f and v is not None]
        assert 0 < sum(passed) < len(passed), key
    idx = spread(base, ROWS, seed=11)
    table = pa.Table.from_batches([base])
    for start in range(0, ROWS, BATCH):
        part = idx[start : start + BATCH]
        batch = table.take(pa.array(part)).combine_chunks().to_batches()[0]
        fields = ("score", "value", "passed", "comment") if start == 0 else ("score", "value", "passed")
        check(p.score(batch), fallback, expected, part, fields)
