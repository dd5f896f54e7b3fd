"""The Parquet fast path scores a table exactly as the general path and the JSON line do: with
every column read, and with only what a trajectory match reads (no text, no call ids), on the
shapes that take a fast path apart (null and empty tool-call lists, JSON-text arguments that are
not objects or not JSON, non-ASCII, calls in another order than the reference's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.connectors.parquet_source import ParquetSource
from assay.connectors.parquet_traces import BatchRows, Row, columnar_plan
from assay.records import Envelope, Failure, Position
from assay.registry import build_evaluator
from assay.stages.normalize import parse_envelope
from assay.traces.model import Trace
from assay.traces.normalize import DEFAULT_OPTIONS
from assay.traces.openai_decode import decode_openai_record

FN = pa.struct([("name", pa.string()), ("arguments", pa.string())])
CALL = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", FN)])
MSG = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
SCHEMA = pa.schema([("id", pa.string()), ("messages", pa.list_(MSG)), ("reference", pa.list_(MSG))])


def call(i: int, name: str, args: str | None) -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}


def turn(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def result(i: int, text: str = "{}") -> dict[str, Any]:
    return {"role": "tool", "content": text, "tool_call_id": f"call_{i}"}


USER = {"role": "user", "content": "do it"}
FINAL = {"role": "assistant", "content": "done"}
A = call(0, "search", '{"q": "weather", "n": 1}')
B = call(1, "get_order", '{"id": 7}')
C = call(2, "send_email", '{"to": "ü@example.org", "body": "grüße ✓"}')


def cases() -> list[tuple[Any, Any]]:
    """(messages, reference) pairs: what each row of the table holds."""
    same = [USER, turn(A), result(0), turn(B, C), result(1), result(2), FINAL]
    return [
        (same, same),
        ([USER, turn(B, A), result(1), result(0), FINAL], [USER, turn(A, B), result(0), result(1), FINAL]),
        ([USER, turn(A), result(0), turn(B), result(1), FINAL], [USER, turn(B), result(1), turn(A), result(0), FINAL]),
        ([USER, {**turn(A), "tool_calls": None}, FINAL], [USER, turn(A), result(0), FINAL]),  # null tool calls
        ([USER, {**turn(A), "tool_calls": []}, FINAL], [USER, {**turn(), "tool_calls": []}, FINAL]),  # empty lists
        ([USER, turn(call(0, "search", "[1, 2]")), FINAL], [USER, turn(call(0, "search", "[1, 2]")), FINAL]),
        ([USER, turn(call(0, "search", "not json")), FINAL], [USER, turn(call(0, "search", "{}")), FINAL]),
        ([USER, turn(call(0, "search", "")), FINAL], [USER, turn(call(0, "search", None)), FINAL]),
        ([USER, turn(call(0, "search", '{"q": 1.0}')), FINAL], [USER, turn(call(0, "search", '{"q": 1}')), FINAL]),
        ([USER, turn(C), result(2, "envoyé ✓"), FINAL], [USER, turn(C), FINAL]),
        ([USER, turn(A, B), result(0), result(1), FINAL], [USER, turn(A), result(0), FINAL]),  # an extra call
        ([USER, FINAL], [USER, turn(A), result(0), FINAL]),  # no calls at all
        ([USER, turn(A), FINAL], None),  # a null reference
        ([USER, turn(A), FINAL], []),  # an empty reference
        ([], [USER, turn(A), FINAL]),  # an empty message list: the general path decides
        (None, [USER, turn(A), FINAL]),  # null messages
        ([USER, {**turn(A), "role": "ai"}, FINAL], [USER, turn(A), FINAL]),  # a role alias
        ([USER, turn(call(0, "", "{}")), FINAL], [USER, turn(call(0, "", "{}")), FINAL]),  # a call without a name
    ]


def table(tmp_path: Path, row_group_size: int = 7) -> Path:
    recs = [{"id": f"t{i}", "messages": m, "reference": r} for i, (m, r) in enumerate(cases())]
    path = tmp_path / "edge.parquet"
    pq.write_table(pa.Table.from_pylist(recs, SCHEMA), path, row_group_size=row_group_size)
    return path


async def read_all(src: ParquetSource) -> list[Envelope]:
    async with src:
        return [e async for b in src.batches() for e in b]


EVALUATORS = [
    build_evaluator("trajectory_match", {"mode": mode, "tool_args_match_mode": args})
    for mode in ("strict", "unordered", "subset", "superset", "subsequence")
    for args in ("exact", "ignore")
]


def scores(trace: Trace | Failure | None) -> list[Any]:
    if not isinstance(trace, Trace):
        return [type(trace).__name__]
    return [(r.key, r.score, r.value, r.comment, r.error) for ev in EVALUATORS for r in ev.score_trace(trace)]


def general(env: Envelope) -> Trace | Failure:
    return parse_envelope(env, DEFAULT_OPTIONS)


def json_line(env: Envelope) -> Trace | Failure:
    """The row as a JSON line, through the JSON path (typed decoder, else the general one)."""
    line = orjson.dumps(env.record.as_dict())
    trace = decode_openai_record(line)
    return trace if trace is not None else parse_envelope(Envelope(line, env.position), DEFAULT_OPTIONS)


def test_the_fast_path_scores_every_row_as_the_general_path_and_the_json_line(tmp_path: Path) -> None:
    path = table(tmp_path)
    full = anyio.run(read_all, ParquetSource([str(path)]))
    lean = anyio.run(read_all, ParquetSource([str(path)], skip_text=True, skip_call_ids=True))
    lean_type = str(lean[0].record.rows.batch.schema.field("messages").type)
    assert "content" not in lean_type and "tool_call_id" not in lean_type and "id:" not in lean_type
    declined: set[tuple[int | None, bool]] = set()
    for a, b in zip(full, lean, strict=True):
        expected = scores(general(a))
        assert scores(json_line(a)) == expected, a.position
        for env in (a, b):
            fast = env.record.trace()
            if fast is None:
                declined.add((env.position.line, env is b))
            got = scores(fast if fast is not None else general(env))
            assert got == expected, (env.position, got, expected)
    # the fast path takes every row but the last five (an empty reference, empty and null message
    # lists, a role alias, a nameless call), which the general path decides, with or without text
    assert {line for line, _ in declined} == set(range(len(cases()) - 4, len(cases()) + 1))
    assert len(declined) == 10


@pytest.mark.parametrize("row_group_size", [7, 100])
def test_the_fast_path_builds_the_general_paths_trace_when_it_reads_every_column(
    tmp_path: Path, row_group_size: int
) -> None:
    """Trace for trace, argument defects counted per row (a batch converts its calls at once: the
    defects, role aliases and nameless calls of one row never reach another)."""
    hits = 0
    for env in anyio.run(read_all, ParquetSource([str(table(tmp_path, row_group_size))])):
        fast = env.record.trace()
        if fast is not None:
            hits += 1
            slow = general(env)
            assert isinstance(slow, Trace)
            slow.scenario = None  # the general path keeps the whole record there; the fast path never
            assert fast == slow, env.position
            assert fast.args_defects == slow.args_defects, env.position
    assert hits == len(cases()) - 5


def test_a_null_call_list_has_no_calls_whatever_its_offsets_span() -> None:
    """Arrow lets a null list's offsets span values (a batch built in memory; a Parquet reader
    never makes one); the fast path reads it as no calls, as ``to_pylist`` (the general path) does."""
    calls = pa.array([A, B], CALL)
    tool_calls = pa.ListArray.from_arrays(
        pa.array([0, 0, 1, 2], pa.int32()), calls, mask=pa.array([False, True, False])
    )
    roles = pa.array(["user", "assistant", "assistant"])
    nulls = pa.nulls(3, pa.string())
    msgs = pa.StructArray.from_arrays([roles, nulls, tool_calls, nulls, nulls], fields=list(MSG))
    messages = pa.ListArray.from_arrays(pa.array([0, 3], pa.int32()), msgs)
    batch = pa.record_batch({"id": ["t0"], "messages": messages, "reference": messages}, SCHEMA)
    env = Envelope(b"", Position("mem", 1), record=Row(BatchRows(batch, columnar_plan(batch.schema)), 0))
    fast, slow = env.record.trace(), general(env)
    assert isinstance(fast, Trace) and isinstance(slow, Trace)
    slow.scenario = None
    assert fast == slow
    assert [m.tool_calls is None for m in fast.messages] == [True, True, False]


def test_trajectory_match_reads_no_call_ids_and_the_engine_skips_them(tmp_path: Path) -> None:
    from assay.config import build_config
    from assay.connectors.builtin import FILE
    from assay.connectors.registry import SourceContext

    assert build_evaluator("trajectory_match", {}).reads_call_ids is False
    assert build_evaluator("exact_match", {}).reads_call_ids is True
    path = str(table(tmp_path))
    cfg = build_config({"source": {"path": path}, "evaluators": ["trajectory_match"], "sink": {"path": "o/"}})
    src = FILE.build_source(cfg.source, SourceContext(reads_text=False, reads_call_ids=False))
    inner = getattr(src, "inner", src)
    assert isinstance(inner, ParquetSource) and inner.skip_text and inner.skip_call_ids
