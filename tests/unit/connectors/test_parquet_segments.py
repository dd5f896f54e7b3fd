"""The Parquet sink's write path (rows → Arrow segments at each commit → Parquet parts at publish)
against converting the JSON rows at publish, and its exactness: a kill after any commit resumes to
exactly one row per trace, ``aclose`` drops what was written after the last commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.connectors import parquet_segments, parquet_sink
from assay.connectors.parquet_schema import TableBuilder, summary_keys
from assay.connectors.parquet_sink import ParquetSink


def row(i: int) -> dict[str, Any]:
    """Rows of every shape the schema meets: a key that appears late (dynamic keys), results
    with and without their own pass mark, usage, non-string values, errors."""
    results: dict[str, Any] = {
        "a": {"key": "a", "score": (i % 10) / 10, "value": [True, 1, 0.0, "s", False][i % 5], "comment": f"c{i}"},
    }
    if i % 3:
        usage = {"input_tokens": i, "output_tokens": 2 * i, "cost_usd": i / 1000}
        results["b"] = {"key": "b", "score": 0.65, "value": {"n": i}, "metadata": {"usage": usage}, "threshold": 0.6}
    if i >= 70:
        results["z:sub"] = {"key": "z:sub", "score": None, "value": None, "error": "boom"}
    return {
        "trace_id": f"t{i:04d}",
        "run_id": "r",
        "position": {"file": "f.jsonl", "line": i + 1},
        "results": results,
        "identity": {"a": "ida", "b": "idb", "z": "idz"},
    }


SUMMARY = {"evaluators": {"a": {"threshold": 0.7}, "b": {"threshold": 0.6}, "z:sub": {"threshold": 0.5}}}


def expected(rows: list[dict[str, Any]], layout: str) -> pa.Table:
    """What converting the rows at publish gives (the earlier write path)."""
    keys, thresholds = summary_keys(SUMMARY)
    builder = TableBuilder(keys, layout=layout, ds="2026-11-21", thresholds=thresholds)
    builder.add_all(rows)
    return pa.Table.from_batches([builder.batch()])


async def write(sink: ParquetSink, rows: list[dict[str, Any]], *, every: int) -> None:
    for i in range(0, len(rows), every):
        await sink.write_batch([orjson.dumps(r) for r in rows[i : i + every]])
        await sink.flush()


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_the_parts_equal_converting_the_rows_at_publish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    monkeypatch.setattr(parquet_sink, "SEGMENT_ROWS", 8)
    monkeypatch.setattr(parquet_segments, "ROW_GROUP_ROWS", 16)
    rows = [row(i) for i in range(100)]
    out = tmp_path / "o"

    async def go() -> None:
        sink = ParquetSink(str(out) + "/", layout=layout, ds="2026-11-21", max_rows_per_part=40)
        async with sink:
            await write(sink, rows, every=13)
            await sink.publish(SUMMARY, success=True)

    anyio.run(go)
    parts = sorted(out.glob("part-*.parquet"))
    want = expected(rows, layout)
    if layout == "wide":
        assert [p.name for p in parts] == [f"part-00000-0000{i}.parquet" for i in range(3)]
        assert [pq.ParquetFile(p).metadata.num_rows for p in parts] == [40, 40, 20]
        assert [pq.ParquetFile(parts[0]).metadata.row_group(i).num_rows for i in range(3)] == [16, 16, 8]
    got = pa.concat_tables([pq.read_table(p) for p in parts])
    assert got.schema == want.schema
    assert got.equals(want)
    assert not (out / "_staging").exists() and (out / "_SUCCESS").exists()


def test_one_file_target_holds_every_row(tmp_path: Path) -> None:
    rows = [row(i) for i in range(30)]
    target = tmp_path / "out.parquet"

    async def go() -> None:
        async with ParquetSink(str(target), ds="2026-11-21") as sink:
            await write(sink, rows, every=7)
            await sink.publish(SUMMARY, success=True)

    anyio.run(go)
    assert pq.read_table(target).equals(expected(rows, "wide"))
    assert not list(tmp_path.glob(".out.parquet*"))


@pytest.mark.parametrize("kill_after", [0, 1, 3, 6])
def test_a_killed_run_resumes_to_exactly_one_row_per_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill_after: int
) -> None:
    """The first attempt commits ``kill_after`` batches, writes more (a new result key among them)
    and dies without closing (kill -9: temp segments left behind); the resume restores the
    checkpoint's state and writes the rest."""
    monkeypatch.setattr(parquet_sink, "SEGMENT_ROWS", 4)
    rows = [row(i) for i in range(100)]
    every = 10
    out = tmp_path / "o"
    state: Any = None

    async def first() -> None:
        nonlocal state
        sink = ParquetSink(str(out) + "/", ds="2026-11-21")
        await sink.__aenter__()
        state = sink.snapshot()
        for i in range(0, len(rows), every):
            await sink.write_batch([orjson.dumps(r) for r in rows[i : i + every]])
            if i // every < kill_after:
                await sink.flush()
                state = sink.snapshot()
            elif i // every >= 8:
                break  # killed: nothing closed, nothing renamed

    anyio.run(first)
    done = kill_after * every
    assert list((out / "_staging").glob(".*.tmp"))

    async def resume() -> None:
        async with ParquetSink(str(out) + "/", ds="2026-11-21", resume_state=state) as sink:
            await write(sink, rows[done:], every=every)
            await sink.publish(SUMMARY, success=True)

    anyio.run(resume)
    got = pa.concat_tables([pq.read_table(p) for p in sorted(out.glob("part-*.parquet"))])
    assert got.column("trace_id").to_pylist() == [r["trace_id"] for r in rows]
    assert got.equals(expected(rows, "wide"))


def test_aclose_drops_what_follows_the_last_commit(tmp_path: Path) -> None:
    rows = [row(i) for i in range(80)]
    out = tmp_path / "o"

    async def go() -> Any:
        sink = ParquetSink(str(out) + "/")
        async with sink:
            await sink.write_batch([orjson.dumps(r) for r in rows[:20]])
            await sink.flush()
            committed = sink.snapshot()
            await sink.write_batch([orjson.dumps(r) for r in rows[20:]])  # brings z:sub: a new segment
        assert sink.snapshot() == committed
        return committed

    state = anyio.run(go)
    assert sorted(f.name for f in (out / "_staging").iterdir()) == state["segments"]

    async def publish() -> None:
        async with ParquetSink(str(out) + "/", resume_state=state) as sink:
            await sink.publish(SUMMARY, success=True)

    anyio.run(publish)
    assert pq.read_table(out / "part-00000-00000.parquet").column("trace_id").to_pylist() == [
        r["trace_id"] for r in rows[:20]
    ]


def test_a_checkpoint_of_json_staged_rows_asks_for_a_fresh_run(tmp_path: Path) -> None:
    from assay.exceptions import ConnectorError

    state = {"parts": ["part-00000-00000.jsonl"], "seq": 1, "current": None}

    async def go() -> None:
        async with ParquetSink(str(tmp_path / "o") + "/", resume_state=state):
            pass

    with pytest.raises(ConnectorError, match="--fresh"):
        anyio.run(go)
