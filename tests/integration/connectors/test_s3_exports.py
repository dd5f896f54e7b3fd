"""Exports on S3 (a real S3 server: moto), as they land there: a LangSmith list_runs dump as
gzipped JSON lines and a Langfuse observations_v2 export as Parquet, rows shuffled over several
objects; read through the S3 connector into one trace per trace id, sharded too."""

from __future__ import annotations

import gzip
import io
from typing import Any

import anyio
import orjson
import pytest

from assay.connectors.path_config import SourceConfig
from assay.connectors.registry import SourceContext
from assay.connectors.s3 import CONNECTOR
from assay.records import Envelope
from assay.stages.normalize import parse_envelope
from assay.traces.model import Trace
from assay.traces.normalize import NormalizeOptions
from tests.support.exports import langfuse_export, langfuse_legacy_export, langsmith_export, shuffled_files
from tests.support.s3_server import S3Server


async def _read(src: Any) -> list[Envelope]:
    async with src:
        envs = [e async for b in src.batches() for e in b]
        assert not src.read_errors
    return envs


def _calls(envs: list[Envelope]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for env in envs:
        t = parse_envelope(env, NormalizeOptions())
        assert isinstance(t, Trace) and t.id is not None and t.id not in out, t
        out[t.id] = [(c.name, c.args) for c in t.tool_calls()]
    return out


def _read_all(url: str, server: S3Server, shards: int, **source: Any) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    got: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for i in range(shards):
        ctx = SourceContext(
            batch_size=7, shard=(i, shards) if shards > 1 else None, options={"endpoint_url": server.endpoint_url}
        )
        part = _calls(anyio.run(_read, CONNECTOR.build_source(SourceConfig(path=url, **source), ctx)))
        assert not set(part) & set(got), "a trace read by two shards"
        got.update(part)
    return got


@pytest.mark.parametrize("shards", [1, 2])
def test_langsmith_runs_jsonl_gz_objects(client: Any, bucket: str, s3_server: S3Server, shards: int) -> None:
    rows, expected = langsmith_export(10, seed=11, orphan_tool=True)
    for i, part in enumerate(shuffled_files(rows, 3, seed=4)):
        body = gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in part))
        client.put_object(Bucket=bucket, Key=f"runs/dt=2026-11-24/part-{i}.jsonl.gz", Body=body)
    got = _read_all(f"s3://{bucket}/runs/dt=2026-11-24/", s3_server, shards)
    assert got == {tid: want["calls"] for tid, want in expected.items()}


@pytest.mark.parametrize(("shards", "whole_chunks"), [(1, True), (2, True), (1, False)])
def test_langfuse_observations_v2_parquet_objects(
    client: Any, bucket: str, s3_server: S3Server, shards: int, whole_chunks: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    if not whole_chunks:  # row groups above the limit: read a buffer at a time per column, not whole
        monkeypatch.setattr("assay.connectors.parquet_rows.REMOTE_WHOLE_CHUNKS", 0)

    rows, expected = langfuse_export(9, seed=12)
    for i, part in enumerate(shuffled_files(rows, 3, seed=5)):
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(part), buf, row_group_size=5)
        client.put_object(Bucket=bucket, Key=f"observations_v2/2026/11/24/part-{i}.parquet", Body=buf.getvalue())
    # an s3:// prefix is read as Parquet when told so (docs/lake.md)
    got = _read_all(f"s3://{bucket}/observations_v2/", s3_server, shards, input_format="parquet")
    assert got == {tid: want["calls"] for tid, want in expected.items()}


@pytest.mark.parametrize("suffix", ["", ".parquet"])
def test_parquet_exports_under_a_bare_prefix_are_read_as_is(
    client: Any, bucket: str, s3_server: S3Server, suffix: str
) -> None:
    """A LangSmith bulk export and a Langfuse observations_v2 export in Parquet under a bare
    ``s3://`` prefix, no ``input_format``: Parquet by the keys' suffix or, with none (as some
    exporters write), by the ``PAR1`` magic of the first object (a ranged GET)."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    runs, want_runs = langsmith_export(8, seed=21, orphan_tool=True)
    observations, want_obs = langfuse_export(7, seed=22)
    for folder, rows in (("langsmith", runs), ("langfuse", observations)):
        for i, part in enumerate(shuffled_files(rows, 3, seed=6)):
            buf = io.BytesIO()
            pq.write_table(pa.Table.from_pylist(part), buf, row_group_size=4)
            key = f"{folder}/export/2026-11-24/{i:05d}{suffix}"
            client.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())
        client.put_object(Bucket=bucket, Key=f"{folder}/export/_SUCCESS", Body=b"")
    for folder, want in (("langsmith", want_runs), ("langfuse", want_obs)):
        for shards in (1, 2):
            got = _read_all(f"s3://{bucket}/{folder}/export/", s3_server, shards)
            assert got == {tid: w["calls"] for tid, w in want.items()}, (folder, shards)


@pytest.mark.parametrize(("fmt", "shards"), [("parquet", 1), ("parquet", 2), ("jsonl.gz", 1)])
def test_legacy_langfuse_traces_and_observations_under_one_prefix(
    client: Any, bucket: str, s3_server: S3Server, fmt: str, shards: int
) -> None:
    """The legacy pair as Langfuse writes it (``traces/`` and ``observations/`` under one export
    prefix): one trace per trace id, its input from the traces/ row; Parquet sharded too (JSON
    objects are sharded by object: docs/formats.md)."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    trace_rows, obs_rows, expected = langfuse_legacy_export(9, seed=23)
    for folder, rows in (("traces", trace_rows), ("observations", obs_rows)):
        keyed = [{"trace_id": r["id"], **r} if folder == "traces" else r for r in rows]
        for i, part in enumerate(shuffled_files(keyed, 2, seed=7)):
            part = [{k: v for k, v in r.items() if k != "trace_id"} if folder == "traces" else r for r in part]
            if fmt == "parquet":
                buf = io.BytesIO()
                pq.write_table(pa.Table.from_pylist(part), buf, row_group_size=4)
                body = buf.getvalue()
            else:
                body = gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in part))
            client.put_object(Bucket=bucket, Key=f"lf/{folder}/2026-11-24-{i}.{fmt}", Body=body)
    got: dict[str, Trace] = {}
    for i in range(shards):
        ctx = SourceContext(
            batch_size=5, shard=(i, shards) if shards > 1 else None, options={"endpoint_url": s3_server.endpoint_url}
        )
        envs = anyio.run(_read, CONNECTOR.build_source(SourceConfig(path=f"s3://{bucket}/lf/"), ctx))
        for env in envs:
            t = parse_envelope(env, NormalizeOptions())
            assert isinstance(t, Trace) and t.id is not None and t.id not in got, t
            got[t.id] = t
    assert {tid: [(c.name, c.args) for c in t.tool_calls()] for tid, t in got.items()} == {
        tid: w["calls"] for tid, w in expected.items()
    }
    assert all(got[tid].input == w["input"] and got[tid].metadata["tags"] == w["tags"] for tid, w in expected.items())


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_sdk_recorded_runs_shuffled_across_objects(client: Any, bucket: str, s3_server: S3Server, fmt: str) -> None:
    """Runs recorded by the SDKs, shuffled *across* objects (a trace's runs in several of them):
    one trace per trace id, unsharded from JSON lines, and sharded too from Parquet (every shard
    reads the export's objects and keeps its traces)."""
    pytest.importorskip("langsmith")
    pytest.importorskip("langchain_core")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from tests.support.sdk_exports import langsmith_schema, langsmith_sdk_export, list_runs_lines, shuffled

    rows, expected = langsmith_sdk_export(4, seed=21)
    rows = shuffled(rows, seed=22)
    for i in range(3):
        part = rows[i::3]
        if fmt == "jsonl":
            body = gzip.compress("".join(line + "\n" for line in list_runs_lines(part)).encode())
            key = f"sdk/{fmt}/part-{i}.jsonl.gz"
        else:
            buf = io.BytesIO()
            pq.write_table(pa.Table.from_pylist(part, schema=langsmith_schema()), buf, row_group_size=4)
            body, key = buf.getvalue(), f"sdk/{fmt}/part-{i}.parquet"
        client.put_object(Bucket=bucket, Key=key, Body=body)
    want = {tid: [tuple(c) for c in e["calls"]] for tid, e in expected.items()}
    for shards in (1,) if fmt == "jsonl" else (1, 2):
        assert _read_all(f"s3://{bucket}/sdk/{fmt}/", s3_server, shards) == want
