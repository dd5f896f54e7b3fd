"""The Parquet sink: parts or one file with the JSON sink's markers, the documented schema (wide and
long), DuckDB means equal to the JSON sink's, exact resume from the staged parts, and a failed
rerun that leaves the last whole output's rows in place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import duckdb
import orjson
import pyarrow.parquet as pq
import pytest

from assay.config import build_config
from assay.connectors.parquet_schema import RESULT_FIELDS
from assay.connectors.parquet_sink import ParquetSink, read_parquet_rows
from assay.pipeline.run import execute
from tests.conftest import agent_messages

N = 40


def corpus(tmp_path: Path, n: int = N) -> Path:
    lines = []
    for i in range(n):
        calls = [("search", {"q": i % 3})] + ([("get_order", {"id": i})] if i % 4 else [])
        ref = calls if i % 5 else calls[:1]
        lines.append(
            json.dumps(
                {
                    "id": f"t{i}",
                    "messages": agent_messages(*calls, final=f"a{i % 2}"),
                    "reference_outputs": {"messages": agent_messages(*ref, final="a0")},
                }
            )
        )
    f = tmp_path / "traces.jsonl"
    f.write_text("\n".join(lines) + "\n")
    return f


def run(tmp_path: Path, sink: dict[str, Any], *, ds: str | None = "2026-11-21", source: Path | None = None) -> Any:
    cfg = build_config(
        {
            "source": {"path": str(source or corpus(tmp_path))},
            "evaluators": ["trajectory_match:mode=unordered", "exact_match"],
            "sink": sink,
            "state_dir": str(tmp_path / ".assay"),
            "limits": {"batch_size": 7},
        },
        ds=ds,
    )
    return anyio.run(lambda: execute(cfg))


def test_directory_of_parts_with_markers_and_the_documented_schema(tmp_path: Path) -> None:
    out = tmp_path / "scores" / "dt=2026-11-21"
    report = run(tmp_path, {"path": str(out) + "/", "format": "parquet", "max_rows_per_part": 15})
    assert report.exit_code == 0
    parts = sorted(p.name for p in out.glob("part-*.parquet"))
    assert parts == ["part-00000-00000.parquet", "part-00000-00001.parquet", "part-00000-00002.parquet"]
    assert (out / "_SUCCESS").exists() and (out / "_SUMMARY.json").exists()
    assert not (out / "_staging").exists()
    assert list((out / "_dead_letter").glob("dead-*.jsonl")) or not (out / "_dead_letter").exists()
    schema = pq.read_schema(out / parts[0])
    assert schema.names == [
        *("trace_id", "run_id", "ds", "position", "platform"),
        *("exact_match", "trajectory_unordered_match"),
    ]
    assert [f.name for f in schema.field("platform").type] == ["trace_id", "root_id", "session_id"]
    assert [f.name for f in schema.field("exact_match").type] == [name for name, _ in RESULT_FIELDS]
    meta = pq.ParquetFile(out / parts[0]).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    rows = duckdb.sql(f"select trace_id, ds, position from '{out}/part-*.parquet' order by position").fetchall()
    assert len(rows) == N and {r[1] for r in rows} == {"2026-11-21"}
    assert rows[0][2].endswith("traces.jsonl:1")


def test_duckdb_means_equal_the_json_sinks(tmp_path: Path) -> None:
    src = corpus(tmp_path)
    run(tmp_path, {"path": str(tmp_path / "json") + "/"}, source=src)
    run(tmp_path, {"path": str(tmp_path / "pq") + "/", "format": "parquet"}, source=src)
    json_rows = [
        orjson.loads(line) for p in (tmp_path / "json").glob("part-*.jsonl") for line in p.read_bytes().splitlines()
    ]
    for key in ("trajectory_unordered_match", "exact_match"):
        want = sum(r["results"][key]["score"] for r in json_rows) / len(json_rows)
        got = duckdb.sql(f"select avg({key}.score) from '{tmp_path}/pq/part-*.parquet'").fetchall()[0]
        assert got is not None and got[0] == pytest.approx(want)
        passed = duckdb.sql(f"select avg({key}.passed::int) from '{tmp_path}/pq/part-*.parquet'").fetchall()[0]
        summary = json.loads((tmp_path / "pq" / "_SUMMARY.json").read_text())
        assert passed is not None and passed[0] == pytest.approx(summary["evaluators"][key]["pass_rate"])
    assert 0 < want < 1
    # each result's identity survives the columnar schema (assay compare reads it)
    back = {r["trace_id"]: r for p in sorted((tmp_path / "pq").glob("part-*.parquet")) for r in read_parquet_rows(p)}
    for r in json_rows[:5]:
        assert back[r["trace_id"]]["identity"] == r["identity"]
        assert back[r["trace_id"]]["results"]["exact_match"]["score"] == r["results"]["exact_match"]["score"]


def test_one_file_with_its_summary_beside_it_and_the_long_layout(tmp_path: Path) -> None:
    target = tmp_path / "out.parquet"
    assert run(tmp_path, {"path": str(target), "layout": "long"}).exit_code == 0
    assert (tmp_path / "out.parquet._SUMMARY.json").exists()
    assert not list(tmp_path.glob(".out.parquet*"))
    t = pq.read_table(target)
    assert t.num_rows == 2 * N
    assert t.schema.names == [
        *("trace_id", "run_id", "ds", "position", "platform", "key"),
        *(n for n, _ in RESULT_FIELDS),
    ]
    assert sorted(set(t.column("key").to_pylist())) == ["exact_match", "trajectory_unordered_match"]
    back = list(read_parquet_rows(target))  # read back as one row per trace with both keys
    assert len(back) == N and all(set(r["results"]) == {"exact_match", "trajectory_unordered_match"} for r in back)


def test_resume_drops_rows_written_after_the_commit(tmp_path: Path) -> None:
    out = tmp_path / "o"

    def row(i: int) -> bytes:
        return orjson.dumps(
            {
                "trace_id": f"t{i}",
                "run_id": "r",
                "position": {"file": "f", "line": i},
                "results": {"k": {"key": "k", "score": 1.0, "value": True}},
            }
        )

    async def first() -> Any:
        sink = ParquetSink(str(out) + "/")
        async with sink:
            await sink.write_batch([row(i) for i in range(5)])
            await sink.flush()
            state = sink.snapshot()
            await sink.write_batch([row(i) for i in range(5, 9)])  # never committed (a kill)
        return state

    state = anyio.run(first)

    async def resume() -> None:
        sink = ParquetSink(str(out) + "/", resume_state=state)
        async with sink:
            await sink.write_batch([row(i) for i in range(5, 10)])
            await sink.flush()
        publisher = ParquetSink(str(out) + "/", resume_state={"parts": [], "seq": 0, "current": None}, shard=99_999)
        async with publisher:
            summary = {"evaluators": {"k": {"threshold": 0.5}}}
            await publisher.publish(summary, success=True)

    anyio.run(resume)
    ids = [r["trace_id"] for r in read_parquet_rows(out / "part-00000-00000.parquet")]
    assert ids == [f"t{i}" for i in range(10)]


def test_a_failed_rerun_leaves_the_last_whole_output_rows(tmp_path: Path) -> None:
    out = tmp_path / "o"
    src = corpus(tmp_path)
    assert run(tmp_path, {"path": str(out) + "/", "format": "parquet"}, source=src).exit_code == 0
    before = duckdb.sql(f"select count(*) from '{out}/part-*.parquet'").fetchall()[0]
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00truncated")
    report = run(tmp_path, {"path": str(out) + "/", "format": "parquet"}, source=bad)
    assert report.exit_code != 0
    assert not (out / "_SUCCESS").exists()
    assert duckdb.sql(f"select count(*) from '{out}/part-*.parquet'").fetchall()[0] == before


def test_run_id_is_stable_for_a_run_file_and_day_and_the_invocation_is_in_the_summary(tmp_path: Path) -> None:
    src = corpus(tmp_path)
    seen = []
    for ds in ("2026-11-21", "2026-11-21", "2026-11-22"):
        out = tmp_path / "o"
        run(tmp_path, {"path": str(out) + "/", "format": "parquet"}, source=src, ds=ds)
        ids = duckdb.sql(f"select distinct run_id from '{out}/part-*.parquet'").fetchall()
        summary = json.loads((out / "_SUMMARY.json").read_text())
        assert ids == [(summary["run_id"],)]
        seen.append((summary["run_id"], summary["invocation_id"]))
    assert seen[0][0] == seen[1][0] != seen[2][0]
    assert all(inv for _, inv in seen)


def staged_rows() -> list[dict[str, Any]]:
    """Engine rows of every shape the conversion reads differently."""
    out: list[dict[str, Any]] = []
    for i in range(50):
        res: dict[str, Any] = {"key": "k", "score": [1.0, 0.0, 1, None, 0.25, 0.6, 0.3][i % 7], "comment": f"c{i} ✓"}
        res["value"] = [True, False, "yes", 3, {"a": [1]}, None][i % 6]
        if i % 7 == 0:
            res["threshold"] = 0.3
        if i % 11 == 0:
            res["error"] = "boom"
        if i in (0, 13):  # usage, and (below) a missing result, only in the first row group
            res["metadata"] = {"usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5}}
        row: dict[str, Any] = {
            "trace_id": f"t{i}" if i % 17 else i,
            "run_id": "r",
            "position": {"file": "a.jsonl", "line": i + 1} if i % 9 else {"topic": "t", "partition": 0, "offset": i},
            "results": {"k": res} if i != 5 else {},
            "identity": {"k": "id-k"} if i % 3 else {"k": {"evaluator": "x"}},
        }
        out.append(row)
    return out


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_the_column_by_column_conversion_equals_the_row_by_row_one(tmp_path: Path, layout: str) -> None:
    from assay.connectors.parquet_schema import TableBuilder
    from assay.connectors.parquet_sink import fill_builder

    rows = staged_rows()
    part = tmp_path / "part.jsonl"
    part.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    by_row = TableBuilder(["k"], layout=layout, ds="2026-11-21", thresholds={"k": 0.6})
    by_row.add_all(rows)
    expected = by_row.batch().to_pylist()
    by_column = TableBuilder(["k"], layout=layout, ds="2026-11-21", thresholds={"k": 0.6})
    batches = [by_column.batch().to_pylist() for _ in fill_builder(by_column, part, row_group_rows=16)]
    batches.append(by_column.batch().to_pylist())
    assert [len(b) for b in batches[:-1]] == [16] * (len(batches) - 1)  # row groups cut where they should be
    assert [r for b in batches for r in b] == expected


def test_columns_are_built_as_pa_array_builds_them_without_importing_pandas(tmp_path: Path) -> None:
    import subprocess
    import sys

    import pyarrow as pa

    from assay.connectors.parquet_schema import column

    samples: list[tuple[pa.DataType, list[Any]]] = [
        (pa.bool_(), [True, False, None]),
        (pa.float64(), [0.5, None, 1.0, -2.25]),
        (pa.int64(), [1, None, 2**40, -3]),
        (pa.string(), ["a", None, "ü✓", ""]),
    ]
    for t, pool in samples:
        for n in (0, 1, 7, 8, 9, 64, 65, 300):
            for values in ([pool[i % len(pool)] for i in range(n)], [v for v in pool if v is not None] * n, [None] * n):
                got = column(values, t)
                got.validate(full=True)
                assert got.type == t and got.to_pylist() == values
    # a run that publishes Parquet never pays for pandas (pyarrow's pa.array imports it)
    code = (
        "import sys, pathlib\n"
        "from assay.connectors.parquet_schema import TableBuilder\n"
        "b = TableBuilder(['k'])\n"
        "b.add({'trace_id': 't', 'results': {'k': {'score': 1.0, 'value': True}}})\n"
        "import pyarrow as pa, pyarrow.parquet as pq\n"
        f"pq.write_table(pa.Table.from_batches([b.batch()]), {str(tmp_path / 'x.parquet')!r})\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class _Label(str):
    """Text that JSON reads back as a plain ``str``."""


def _platform(i: int) -> dict[str, Any]:
    """A row's platform ids as the engine sets them: LangSmith's three, OTel's two, Langfuse's one."""
    full = {"trace_id": f"pt{i}", "root_id": f"root{i}", "session_id": "proj"}
    return dict(list(full.items())[: 1 + i % 3])


def engine_rows(n: int = 60) -> list[dict[str, Any]]:
    """Result rows as the engine builds them (``Result`` objects, nothing encoded yet)."""
    from assay.records import Result

    out: list[dict[str, Any]] = []
    for i in range(n):
        res = Result("k", [1.0, 0.0, 1, None, 0.25, 0.6][i % 6], [True, False, "yes", 3, None][i % 5], f"c{i} ✓")
        res.threshold = 0.3 if i % 7 == 0 else None
        res.error = "boom" if i % 11 == 0 else None
        if i % 13 == 0:
            res.metadata = {"usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5}, "tools": ["a"]}
        elif i % 13 == 1:
            res.metadata = {"usage": {"input_tokens": 10}}
        results = {"k": res} if i != 5 else {}
        if i % 4 == 0:
            results["j:sub"] = Result("j:sub", 0.5, 0.5, None, {"mode": "x"})
        position = {"file": "a.jsonl", "line": i + 1} if i % 9 else {"topic": "t", "partition": 0, "offset": i}
        out.append(
            {
                "trace_id": f"t{i}" if i % 17 else i,
                "run_id": "r",
                "position": position,
                "results": results,
                "identity": {"k": "id-k", "j": "id-j"} if i % 19 else None,
                **({"warnings": ["w"]} if i % 8 == 0 else {}),
                **({"platform": _platform(i)} if i % 3 else {}),
            }
        )
    return out


ODD: list[tuple[str, Any]] = [  # values that JSON changes, and (last) one it keeps
    ("score", float("nan")),
    ("score", float("inf")),
    ("value", {2, 1}),
    ("value", ("a", 1)),
    ("value", b"x"),
    ("value", _Label("x")),
    ("comment", _Label("y")),
    ("value", object()),
    ("metadata", {"usage": "lots"}),
    ("metadata", {"usage": {"input_tokens": float("nan")}}),
    ("metadata", None),
]


def _odd(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same rows, with the values of :data:`ODD` (a NaN reads back as null, a set as a list,
    bytes and objects as text, a str subclass as str, usage that is not an object)."""
    import copy

    rows = copy.deepcopy(rows)
    for row, (field, value) in zip(rows[1::5], ODD, strict=False):
        setattr(row["results"]["k"], field, value)
    return rows


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_engine_rows_give_the_columns_of_their_json(layout: str) -> None:
    """The fast path of the Parquet sink (rows as built) against their JSON (``write_batch``):
    the same columns, and no fast path where JSON would change a value."""
    from assay.connectors.parquet_schema import TableBuilder, decode_staged, result_columns
    from assay.records import encode_row

    def built(rows: list[dict[str, Any]], as_objects: bool) -> list[dict[str, Any]]:
        builder = TableBuilder(["j:sub", "k", "z"], layout=layout, ds="d", thresholds={"k": 0.6}, own_threshold=True)
        if as_objects:
            columns = result_columns(rows)
            assert columns is not None
            builder.add_columns(columns[0])
        else:
            staged = decode_staged(b"\n".join(encode_row(r) for r in rows))
            assert staged is not None
            builder.add_staged_rows(staged)
        return list(builder.batch().to_pylist())

    rows = engine_rows()
    assert (result_columns(rows) or [None, None])[1] == {"k", "j:sub"}
    assert built(rows, True) == built(rows, False)
    for field, value in ODD:
        (row,) = _odd(engine_rows(1))
        setattr(row["results"]["k"], field, value)
        if value is None:  # null stays null
            assert built([row], True) == built([row], False)
        else:
            assert result_columns([row]) is None, (field, value)
    assert result_columns([encode_row(rows[0])]) is None  # JSON lines are not engine rows
    assert result_columns([{**rows[1], "position": {"file": "a", "line": 2**64}}]) is None
    assert result_columns([{**rows[1], "identity": {"k": {"evaluator": "x"}}}]) is None


@pytest.mark.parametrize("odd", [False, True])
def test_the_sink_writes_engine_rows_as_it_writes_their_json(tmp_path: Path, odd: bool) -> None:
    from assay.records import encode_row

    rows = _odd(engine_rows()) if odd else engine_rows()
    summary = {"evaluators": {"k": {"threshold": 0.6}, "j:sub": {}}}

    async def write(path: Path, as_objects: bool) -> None:
        async with ParquetSink(str(path) + "/", ds="2026-11-21") as sink:
            for i in range(0, len(rows), 7):
                chunk = rows[i : i + 7]
                if as_objects:
                    await sink.write_results(chunk)
                else:
                    await sink.write_batch([encode_row(r) for r in chunk])
                if i % 21 == 0:
                    await sink.flush()
            await sink.publish(summary, success=True)

    def published(path: Path) -> list[dict[str, Any]]:
        return [r for p in sorted(path.glob("part-*.parquet")) for r in pq.read_table(p).to_pylist()]

    anyio.run(write, tmp_path / "objects", True)
    anyio.run(write, tmp_path / "json", False)
    by_objects = published(tmp_path / "objects")
    assert len(by_objects) == len(rows)
    assert by_objects == published(tmp_path / "json")


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_platform_ids_are_a_column_and_read_back(tmp_path: Path, layout: str) -> None:
    """A row's ``platform`` (what ``push:`` puts a score on) is the ``platform`` struct column;
    rows read from no platform's format hold a null there; the readers give it back as it was."""
    from assay.records import encode_row

    rows = engine_rows(30)

    async def write(path: Path, as_objects: bool) -> None:
        async with ParquetSink(str(path) + "/", ds="2026-11-21", layout=layout) as sink:
            if as_objects:
                await sink.write_results(rows)
            else:
                await sink.write_batch([encode_row(r) for r in rows])
            await sink.flush()
            await sink.publish({"evaluators": {"k": {}, "j:sub": {}}}, success=True)

    for as_objects in (True, False):
        out = tmp_path / f"o{as_objects}"
        anyio.run(write, out, as_objects)
        back = {str(r["trace_id"]): r for p in sorted(out.glob("part-*.parquet")) for r in read_parquet_rows(p)}
        for r in rows:
            if layout == "long" and not r["results"]:
                continue  # the long layout has a row per result: none for a trace without results
            got = back[str(r["trace_id"])]
            assert got.get("platform") == r.get("platform"), r["trace_id"]
        ids = duckdb.sql(f"select platform.root_id from '{out}/part-*.parquet' where trace_id = 't4'").fetchall()
        assert {x[0] for x in ids} == {"root4"}
