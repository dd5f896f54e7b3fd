"""Exports that hold one trace in many rows (LangSmith runs, Langfuse observations), shuffled over
several files, read into exactly one trace per trace id with the right tool calls and arguments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from assay.connectors.base import Source
from assay.connectors.builtin import FILE
from assay.connectors.exports import AssembleExports
from assay.connectors.file_source import FileSource
from assay.connectors.path_config import SourceConfig
from assay.connectors.registry import SourceContext
from assay.records import Envelope
from assay.stages.normalize import parse_envelope
from assay.traces.exports import RowGroups, export_columns, export_row_kind, row_trace_id
from assay.traces.model import Trace
from assay.traces.normalize import NormalizeOptions
from tests.support.exports import (
    langfuse_export,
    langfuse_legacy_export,
    langsmith_export,
    shuffled_files,
    traces_by_id,
    write_json_array,
    write_jsonl,
    write_parquet,
)

pytest.importorskip("pyarrow")


async def _read(src: Source, ack: bool = False) -> list[Envelope]:
    out: list[Envelope] = []
    async with src:
        async for batch in src.batches():
            out.extend(batch)
            if ack:
                await src.ack([e.position for e in batch])
        assert not src.read_errors
    return out


def _traces(envs: list[Envelope]) -> dict[str, Trace]:
    return traces_by_id(envs)


def _check(traces: dict[str, Trace], expected: dict[str, dict[str, Any]], fmt: str) -> None:
    assert set(traces) == set(expected)
    for tid, want in expected.items():
        t = traces[tid]
        assert t.format == fmt
        calls = t.tool_calls()
        assert [(c.name, c.args) for c in calls] == [(n, a) for n, a in want["calls"]], tid
        results = t.tool_results()
        assert all(c.id in results for c in calls), "every call has its result"
        assert t.final_output == want["final"]
        assert t.input == want["input"]
        assert t.usage is not None and t.usage["total_tokens"] == want["tokens"]
        assert t.metadata["duration_s"] > 0 and t.metadata["spans"]


def _compress(path: Path, how: str) -> Path:
    data = path.read_bytes()
    path.unlink()
    if how == "gzip":
        import gzip

        out = path.with_suffix(".jsonl.gz")
        out.write_bytes(gzip.compress(data))
    else:
        zstandard = pytest.importorskip("zstandard")
        out = path.with_suffix(".jsonl.zst")
        out.write_bytes(zstandard.ZstdCompressor().compress(data))
    return out


def _source(paths: list[Path], **kw: Any) -> Source:
    config = SourceConfig(path=[str(p) for p in paths], **kw)
    return FILE.build_source(config, SourceContext(batch_size=8))


@pytest.mark.parametrize("style", ["openai", "langchain"])
def test_langsmith_bulk_export_parquet_shuffled_over_files(tmp_path: Path, style: str) -> None:
    rows, expected = langsmith_export(9, seed=3, style=style, orphan_tool=style == "openai")
    paths = [write_parquet(tmp_path / f"runs-{i}.parquet", f) for i, f in enumerate(shuffled_files(rows, 3))]
    envs = anyio.run(_read, _source(paths))
    assert len(envs) == 9
    _check(_traces(envs), expected, "langsmith")


def test_langsmith_list_runs_jsonl_and_json_array(tmp_path: Path) -> None:
    rows, expected = langsmith_export(6, seed=4, style="langchain")
    files = shuffled_files(rows, 2, seed=1)
    jsonl = write_jsonl(tmp_path / "runs.jsonl", files[0])
    array = write_json_array(tmp_path / "runs.json", files[1])
    traces = _traces(anyio.run(_read, _source([jsonl, array])))
    _check(traces, expected, "langsmith")


def test_langsmith_sdk_run_objects_dumped_as_json_lines(tmp_path: Path) -> None:
    """A list_runs dump as the SDK writes it: ``Run.model_dump(mode="json")`` per line (inputs and
    outputs as objects, ``child_runs: null``, every Run field)."""
    schemas = pytest.importorskip("langsmith.schemas")
    rows, expected = langsmith_export(5, seed=13, style="langchain")
    runs = []
    for row in shuffled_files(rows, 1, seed=3)[0]:
        fields = {k: orjson.loads(v) if k in ("inputs", "outputs", "extra", "events") else v for k, v in row.items()}
        fields.pop("status", None)
        run = schemas.Run(**{k: v for k, v in fields.items() if v is not None})
        runs.append(run.model_dump(mode="json"))
    assert all("child_runs" in r and r["child_runs"] is None for r in runs)
    path = write_jsonl(tmp_path / "list_runs.jsonl", runs)
    _check(_traces(anyio.run(_read, _source([path]))), expected, "langsmith")


def test_langfuse_observations_v2_parquet_and_jsonl(tmp_path: Path) -> None:
    rows, expected = langfuse_export(8, seed=5)
    files = shuffled_files(rows, 3, seed=2)
    paths = [write_parquet(tmp_path / f"obs-{i}.parquet", f) for i, f in enumerate(files)]
    traces = _traces(anyio.run(_read, _source(paths)))
    _check(traces, expected, "langfuse")
    t = next(iter(traces.values()))
    assert t.metadata["userId"].startswith("user-") and t.metadata["name"] == "support-agent"
    jsonl = [write_jsonl(tmp_path / f"obs-{i}.jsonl", f) for i, f in enumerate(files)]
    assert _traces(anyio.run(_read, _source(jsonl))).keys() == traces.keys()


def test_sharded_parquet_export_reads_each_trace_whole_in_one_shard(tmp_path: Path) -> None:
    rows, expected = langfuse_export(10, seed=9)
    for i, f in enumerate(shuffled_files(rows, 3)):
        write_parquet(tmp_path / f"obs-{i}.parquet", f)
    got: dict[str, Trace] = {}
    for shard in range(2):
        src = FILE.build_source(SourceConfig(path=str(tmp_path)), SourceContext(batch_size=4, shard=(shard, 2)))
        for tid, t in _traces(anyio.run(_read, src)).items():
            assert tid not in got
            got[tid] = t
    _check(got, expected, "langfuse")


def test_rows_spill_to_disk_and_read_the_same(tmp_path: Path) -> None:
    rows, expected = langsmith_export(5, seed=6)
    path = write_jsonl(tmp_path / "runs.jsonl", shuffled_files(rows, 1)[0])
    src = AssembleExports(FileSource([str(path)], batch_size=3), spill_bytes=0)
    envs = anyio.run(_read, src)
    assert "rows held on disk" in src.readings[str(path)]
    _check(_traces(envs), expected, "langsmith")


def test_traces_of_a_large_input_are_given_out_a_chunk_at_a_time(tmp_path: Path) -> None:
    from assay.connectors.sessions import DRAIN_CHUNK

    rows, _ = langsmith_export(DRAIN_CHUNK + 44, seed=12)
    path = write_jsonl(tmp_path / "runs.jsonl", shuffled_files(rows, 1)[0])

    async def sizes() -> list[int]:
        async with AssembleExports(FileSource([str(path)], batch_size=1000), spill_bytes=1 << 16) as src:
            return [len(b) async for b in src.batches()]

    assert anyio.run(sizes) == [DRAIN_CHUNK, 44]


def test_row_groups_keep_first_seen_order_in_memory_and_key_order_on_disk() -> None:
    """Within the budget, the traces in the order each was first seen; rows sorted on disk, in
    trace id order (rows without a trace id first); a trace's rows always in arrival order."""
    for budget, want in ((0, [[2], [6], [0, 3], [1, 5], [4]]), (1 << 20, [[0, 3], [1, 5], [2], [4], [6]])):
        g: RowGroups[int] = RowGroups(spill_bytes=budget)
        for n, tid in enumerate(["x", "y", None, "x", "z", "y", None]):
            g.add(tid, b"%d" % n, n)
        assert [tags for tags, _ in g.drain()] == want
        assert g.traces == 5 and g.spilled == (budget == 0)


def test_ack_of_a_trace_acks_its_rows_and_resume_skips_whole_traces(tmp_path: Path) -> None:
    rows, expected = langsmith_export(4, seed=7)
    path = write_jsonl(tmp_path / "runs.jsonl", shuffled_files(rows, 1)[0])

    async def first_two() -> Any:
        inner = FileSource([str(path)], batch_size=100)
        async with AssembleExports(inner) as src:
            envs = [e async for b in src.batches() for e in b]
            await src.ack([e.position for e in envs[:2]])
            done = {orjson.loads(e.payload)[0]["trace_id"] for e in envs[:2]}
            return inner.snapshot(), done, sum(len(orjson.loads(e.payload)) for e in envs[:2])

    state, done, n_rows = anyio.run(first_two)
    assert sum(b - a + 1 for a, b in next(iter(state.values()))) == n_rows
    rest = _traces(anyio.run(_read, AssembleExports(FileSource([str(path)], resume_state=state))))
    assert set(rest) == set(expected) - done
    _check(rest, {k: v for k, v in expected.items() if k in rest}, "langsmith")


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
def test_sharded_run_reads_each_export_trace_whole_in_one_shard(tmp_path: Path, compression: str) -> None:
    rows, expected = langsmith_export(8, seed=8)
    paths = [write_jsonl(tmp_path / f"runs-{i}.jsonl", f) for i, f in enumerate(shuffled_files(rows, 3))]
    if compression != "none":
        paths = [_compress(p, compression) for p in paths]
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(f'{{"id": "p{i}", "outputs": "x"}}\n' for i in range(10)))
    seen: list[str] = []
    for shard in range(2):
        config = SourceConfig(path=[str(p) for p in [*paths, plain]])
        src = FILE.build_source(config, SourceContext(batch_size=4, shard=(shard, 2)))
        seen.extend(t for t in _traces(anyio.run(_read, src)))
    assert sorted(seen) == sorted([*expected, *(f"p{i}" for i in range(10))])


def test_plain_inputs_pass_through_untouched(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text('{"id": "1", "output": "a"}\n{"id": "2", "output": "b"}\n')
    envs = anyio.run(_read, _source([path]))
    assert [(e.position.line, e.payload) for e in envs] == [
        (1, b'{"id": "1", "output": "a"}'),
        (2, b'{"id": "2", "output": "b"}'),
    ]


def test_export_row_kind() -> None:
    rows, _ = langsmith_export(1)
    obs, _ = langfuse_export(1)
    assert export_row_kind(rows[0]) == "langsmith" and export_row_kind(obs[0]) == "langfuse"
    tree = {**rows[0], "child_runs": [rows[1]]}
    assert export_row_kind(tree) is None  # a run tree is a whole trace already
    assert export_row_kind({**rows[0], "child_runs": None}) == "langsmith"  # list_runs dumps
    assert export_row_kind({"type": "SPAN", "observations": []}) is None
    assert export_row_kind({"run_type": "llm", "inputs": {}}) is None  # a lone run, no trace id


def test_normalize_command_reads_a_parquet_export_as_traces(tmp_path: Path) -> None:
    from assay.report import iter_normalized

    rows, expected = langsmith_export(3, seed=10)
    path = write_parquet(tmp_path / "runs.parquet", shuffled_files(rows, 1)[0])
    items = list(iter_normalized(str(path), limit=0))
    assert {item["trace"]["id"] for item in items} == set(expected)
    assert all(item["reading"] == f"{len(rows)} LangSmith run rows grouped by trace id into 3 traces" for item in items)
    assert all(set(item) == {"position", "reading", "format", "trace"} for item in items)


def test_langfuse_app_root_with_a_physical_parent_gives_the_input() -> None:
    from assay.traces.langfuse import normalize

    rows, expected = langfuse_export(1, seed=14)
    tid = next(iter(expected))
    rows = [dict(r) for r in rows]
    rows[0].update(  # the AGENT row: an app root under its caller's span
        parent_observation_id="span-of-the-caller", is_root_observation=True, input='{"question": "the app task"}'
    )
    rows = [{**r, "start_time": str(r["start_time"]), "end_time": str(r["end_time"])} for r in rows]
    trace = normalize(rows)
    assert trace.id == tid and trace.input == "the app task"
    assert [(c.name, c.args) for c in trace.tool_calls()] == expected[tid]["calls"]


# -- the legacy Langfuse traces/ + observations/ pair -------------------------------------------


def _check_legacy(traces: dict[str, Trace], expected: dict[str, dict[str, Any]]) -> None:
    _check(traces, expected, "langfuse")
    for tid, want in expected.items():
        meta = traces[tid].metadata
        got = {k: meta.get(k) for k in ("name", "userId", "sessionId", "tags", "trace_metadata")}
        assert got == {k: want[k] for k in got}, tid


def _legacy_files(tmp_path: Path, fmt: str, n: int = 9, seed: int = 31) -> tuple[list[Path], dict[str, Any]]:
    """An export window as Langfuse writes it: ``traces/`` and ``observations/`` folders, a trace's
    rows in one file of each (the rows of each file shuffled)."""
    trace_rows, obs_rows, expected = langfuse_legacy_export(n, seed=seed)
    write = write_parquet if fmt == "parquet" else write_jsonl
    ext = "parquet" if fmt == "parquet" else "jsonl"
    paths = []
    for folder, rows, files in (("traces", trace_rows, 2), ("observations", obs_rows, 3)):
        (tmp_path / folder).mkdir()
        keyed = [{**r, "trace_id": r["id"]} if folder == "traces" else r for r in rows]
        for i, part in enumerate(shuffled_files(keyed, files, seed=seed + files)):
            part = [{k: v for k, v in r.items() if k != "trace_id"} if folder == "traces" else r for r in part]
            paths.append(write(tmp_path / folder / f"2026-11-24-{i}.{ext}", part))
    return paths, expected


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_legacy_langfuse_traces_and_observations_folders_are_one_trace_each(tmp_path: Path, fmt: str) -> None:
    """One source over both folders of one export window (a directory, a glob, or the two folders):
    one trace per trace id, its fields from the traces/ row, its tool calls from the observations."""
    _, expected = _legacy_files(tmp_path, fmt)
    for path in (tmp_path, tmp_path / f"*/*.{fmt if fmt == 'parquet' else 'jsonl'}"):
        _check_legacy(_traces(anyio.run(_read, _source([path]))), expected)
    src = _source([tmp_path / "traces", tmp_path / "observations"])
    _check_legacy(_traces(anyio.run(_read, src)), expected)
    assert isinstance(src, AssembleExports)
    assert all("across 5 inputs" in r for r in src.readings.values()) and len(src.readings) == 5


def test_legacy_langfuse_trace_and_observation_rows_in_one_file(tmp_path: Path) -> None:
    import random

    trace_rows, obs_rows, expected = langfuse_legacy_export(6, seed=32)
    rows = [*trace_rows, *obs_rows]
    random.Random(3).shuffle(rows)
    for first in ("trace", "observation"):  # which kind of row opens the file does not matter
        rows.sort(key=lambda r: ("timestamp" in r) != (first == "trace"))
        path = write_jsonl(tmp_path / f"mixed-{first}.jsonl", rows)
        _check_legacy(_traces(anyio.run(_read, _source([path]))), expected)


def test_legacy_langfuse_pair_spilled_to_disk_and_resumed(tmp_path: Path) -> None:
    paths, expected = _legacy_files(tmp_path, "jsonl", n=6, seed=33)
    names = [str(p) for p in sorted(paths)]
    src = AssembleExports(FileSource(names, batch_size=5), spill_bytes=0)
    _check_legacy(_traces(anyio.run(_read, src)), expected)
    assert all("rows held on disk" in src.readings[n] for n in names)

    async def first_two() -> Any:
        inner = FileSource(names, batch_size=100)
        async with AssembleExports(inner) as s:
            envs = [e async for b in s.batches() for e in b]
            await s.ack([e.position for e in envs[:2]])
            return inner.snapshot(), {parse_envelope(e, NormalizeOptions()).id for e in envs[:2]}  # type: ignore[union-attr]

    state, done = anyio.run(first_two)
    rest = _traces(anyio.run(_read, AssembleExports(FileSource(names, resume_state=state))))
    assert set(rest) == set(expected) - done
    _check_legacy(rest, {k: v for k, v in expected.items() if k in rest})


def test_legacy_langfuse_rows_are_recognised() -> None:
    trace_rows, obs_rows, _ = langfuse_legacy_export(1)
    v2, _ = langfuse_export(1)
    assert export_row_kind(trace_rows[0]) == "langfuse" and row_trace_id(trace_rows[0]) == trace_rows[0]["id"]
    assert all(export_columns(list(row)) for row in (trace_rows[0], obs_rows[0], v2[0]))
    plain = {"id": "x", "timestamp": "2026-11-24T00:00:00Z", "input": "hi", "output": "yo"}
    assert export_row_kind(plain) is None and not export_columns(list(plain))  # not a Langfuse trace row


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_sharded_legacy_langfuse_pair_keeps_each_trace_whole_in_one_shard(tmp_path: Path, fmt: str) -> None:
    """Every shard reads the pair's files and keeps the traces whose id hashes to it: each trace
    once, with its traces/ row, whatever the shard count."""
    _, expected = _legacy_files(tmp_path, fmt, n=12, seed=34)
    plain = tmp_path / "plain.jsonl"
    if fmt == "jsonl":  # other inputs of the source are still sharded as before
        plain.write_text("".join(f'{{"id": "p{i}", "outputs": "x"}}\n' for i in range(5)))
    for n in (2, 3):
        got: dict[str, Trace] = {}
        for shard in range(n):
            src = FILE.build_source(SourceConfig(path=str(tmp_path)), SourceContext(batch_size=4, shard=(shard, n)))
            part = _traces(anyio.run(_read, src))
            assert not set(part) & set(got), "a trace read by two shards"
            got.update(part)
        extra = {f"p{i}" for i in range(5)} if fmt == "jsonl" else set()
        assert set(got) == set(expected) | extra
        _check_legacy({k: v for k, v in got.items() if k in expected}, expected)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_sharded_legacy_langfuse_pair_resumes_by_shard(tmp_path: Path, fmt: str) -> None:
    """A shard acknowledges only its own traces' rows: resumed from its checkpoint it reads nothing
    again, and the other shard, resumed from that checkpoint, still reads all of its traces whole."""
    _, expected = _legacy_files(tmp_path, fmt, n=10, seed=35)

    def build(shard: int, state: Any = None) -> Source:
        ctx = SourceContext(batch_size=4, shard=(shard, 2), resume_state=state)
        return FILE.build_source(SourceConfig(path=str(tmp_path)), ctx)

    async def read_acked(src: Source) -> tuple[list[Envelope], Any]:
        envs = await _read(src, ack=True)
        return envs, src.snapshot()

    first, state = anyio.run(read_acked, build(0))
    assert first and anyio.run(_read, build(0, state)) == []
    rest = _traces(anyio.run(_read, build(1, state)))
    assert set(rest) | set(_traces(first)) == set(expected) and not set(rest) & set(_traces(first))
    _check_legacy(rest, {k: v for k, v in expected.items() if k in rest})
