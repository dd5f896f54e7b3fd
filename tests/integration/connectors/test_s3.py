"""S3 source and sink against a real S3 server (moto's server mode on a loopback port)."""

from __future__ import annotations

import gzip
from typing import Any

import anyio
import orjson
import pytest
import zstandard

from assay.connectors import s3_sink
from assay.connectors.s3 import S3Config, S3Sink, S3Source, parse_s3_url
from assay.exceptions import ConfigError, ConnectorError, InputMissingError
from assay.records import Envelope, Position
from tests.support.s3_server import S3Server


def jsonl(ids: range, prefix: str = "t") -> bytes:
    return b"".join(orjson.dumps({"id": f"{prefix}{i}", "x": i}) + b"\n" for i in ids)


def put(client: Any, bucket: str, key: str, body: bytes) -> None:
    client.put_object(Bucket=bucket, Key=key, Body=body)


def keys(client: Any, bucket: str, prefix: str = "") -> list[str]:
    out = client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for o in out.get("Contents", []))


def get(client: Any, bucket: str, key: str) -> bytes:
    return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())


def read_rows(client: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for k in keys(client, bucket, prefix):
        name = k.rsplit("/", 1)[-1]
        if name.startswith("_") or "/_" in k[len(prefix) :]:
            continue
        data = get(client, bucket, k)
        if k.endswith(".gz"):
            data = gzip.decompress(data)
        elif k.endswith(".zst"):
            data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        rows.extend(orjson.loads(line) for line in data.splitlines() if line)
    return rows


async def read_all(src: S3Source) -> list[Envelope]:
    async with src:
        return [e async for b in src.batches() for e in b]


def ids(envs: list[Envelope]) -> list[str]:
    return [orjson.loads(e.payload)["id"] for e in envs]


# --- listing ---------------------------------------------------------------------------------


def test_url_parsing() -> None:
    assert parse_s3_url("s3://b").key == ""
    assert parse_s3_url("s3://b/a/*.gz").list_prefix == "a/"
    with pytest.raises(ConfigError, match="not an s3"):
        parse_s3_url("/local/path")


def test_prefix_lists_sorted_keys_and_skips_markers(s3: S3Config, client: Any, bucket: str) -> None:
    put(client, bucket, "t/b.jsonl", jsonl(range(2, 4)))
    put(client, bucket, "t/a.jsonl", jsonl(range(2)))
    put(client, bucket, "t/sub/c.jsonl", jsonl(range(4, 5)))
    put(client, bucket, "t/_SUCCESS", b"")
    put(client, bucket, "t/.hidden.jsonl", jsonl(range(9, 10)))
    put(client, bucket, "t/_dead_letter/dead-00000-00000.jsonl", jsonl(range(8, 9)))
    put(client, bucket, "other/z.jsonl", jsonl(range(7, 8)))
    envs = anyio.run(read_all, S3Source(f"s3://{bucket}/t/", s3=s3))
    assert ids(envs) == ["t0", "t1", "t2", "t3", "t4"]
    assert envs[0].position == Position(f"s3://{bucket}/t/a.jsonl", 1)
    assert envs[-1].position == Position(f"s3://{bucket}/t/sub/c.jsonl", 1)


def test_one_object_a_folder_name_and_a_glob(s3: S3Config, client: Any, bucket: str) -> None:
    put(client, bucket, "t/a.jsonl.gz", gzip.compress(jsonl(range(2))))
    put(client, bucket, "t/b.jsonl", jsonl(range(2, 4)))
    put(client, bucket, "t/c.jsonl.gz", gzip.compress(jsonl(range(4, 6))))
    assert ids(anyio.run(read_all, S3Source(f"s3://{bucket}/t/b.jsonl", s3=s3))) == ["t2", "t3"]
    assert len(anyio.run(read_all, S3Source(f"s3://{bucket}/t", s3=s3))) == 6
    globbed = anyio.run(read_all, S3Source(f"s3://{bucket}/t/*.jsonl.gz", s3=s3))
    assert ids(globbed) == ["t0", "t1", "t4", "t5"]


def test_gzip_zstd_plain_and_json_array_objects(s3: S3Config, client: Any, bucket: str) -> None:
    put(client, bucket, "t/1.jsonl.gz", gzip.compress(jsonl(range(3))) + gzip.compress(jsonl(range(3, 4))))
    put(client, bucket, "t/2.jsonl.zst", zstandard.ZstdCompressor().compress(jsonl(range(4, 7))))
    put(client, bucket, "t/3", jsonl(range(7, 8)).replace(b"\n", b"\r\n") + b"\n  \n")  # no suffix (Firehose)
    put(client, bucket, "t/4.json", orjson.dumps([{"id": "t8"}, {"id": "t9"}], option=orjson.OPT_INDENT_2))
    envs = anyio.run(read_all, S3Source(f"s3://{bucket}/t/", s3=s3, batch_size=2))
    assert ids(envs) == [f"t{i}" for i in range(10)]
    assert [e.position.line for e in envs[-2:]] == [2, 5]


def test_large_object_is_streamed_in_order(s3: S3Config, client: Any, bucket: str) -> None:
    put(client, bucket, "t/big.jsonl.gz", gzip.compress(jsonl(range(30_000))))
    put(client, bucket, "t/small.jsonl", jsonl(range(30_000, 30_010)))
    envs = anyio.run(read_all, S3Source(f"s3://{bucket}/t/", s3=s3, max_concurrent_objects=2))
    assert ids(envs) == [f"t{i}" for i in range(30_010)]


def test_shard_by_object_and_size_hint(s3: S3Config, client: Any, bucket: str) -> None:
    for i in range(5):
        put(client, bucket, f"t/{i}.jsonl", jsonl(range(i * 10, i * 10 + 10)))
    seen: list[str] = []
    for i in range(2):
        src = S3Source(f"s3://{bucket}/t/", s3=s3, shard=(i, 2))
        envs = anyio.run(read_all, src)
        assert {e.position.source.rsplit("/", 1)[-1] for e in envs} == {f"{j}.jsonl" for j in range(i, 5, 2)}
        assert src.size_unit == "bytes" and src.size_hint() == sum(
            len(jsonl(range(j * 10, j * 10 + 10))) for j in range(i, 5, 2)
        )
        seen += ids(envs)
    assert sorted(seen) == sorted(f"t{i}" for i in range(50))


def test_endpoint_from_aws_endpoint_url(s3_server: S3Server, client: Any, bucket: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    put(client, bucket, "t/a.jsonl", jsonl(range(3)))
    assert len(anyio.run(read_all, S3Source(f"s3://{bucket}/t/"))) == 3


# --- errors ----------------------------------------------------------------------------------


def test_missing_bucket_and_empty_prefix_name_the_url(s3: S3Config, bucket: str) -> None:
    with pytest.raises(ConnectorError, match="s3://no-such-bucket-x/t/: no such bucket"):
        anyio.run(read_all, S3Source("s3://no-such-bucket-x/t/", s3=s3))
    with pytest.raises(InputMissingError, match=f"s3://{bucket}/nothing/: no objects"):
        anyio.run(read_all, S3Source(f"s3://{bucket}/nothing/", s3=s3))
    with pytest.raises(ConnectorError, match=r"\*\.zst: no objects"):
        anyio.run(read_all, S3Source(f"s3://{bucket}/*.zst", s3=s3))


def test_bad_credentials_name_the_url(s3_server: S3Server, bucket: str, monkeypatch: Any) -> None:
    # moto does not check signatures; a store that does answers 403 the same way as this endpoint
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ConnectorError, match=f"s3://{bucket}/t/"):
        anyio.run(read_all, S3Source(f"s3://{bucket}/t/", s3=S3Config(endpoint_url=s3_server.endpoint_url)))


def test_credential_and_endpoint_errors_name_the_operation_not_a_marker_key(
    s3_server: S3Server, bucket: str, monkeypatch: Any
) -> None:
    """A sink's first call removes an earlier attempt's markers: without credentials (or with an
    endpoint nobody listens on) the error names the output prefix and the S3 operation, not the
    ``_SUCCESS`` key it happened to start with."""

    async def open_sink(s3: S3Config) -> None:
        async with S3Sink(f"s3://{bucket}/out/", s3=s3):
            pass

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ConnectorError) as info:
        anyio.run(open_sink, S3Config(endpoint_url=s3_server.endpoint_url))
    message = str(info.value)
    assert message.startswith(f"s3://{bucket}/out/: no AWS credentials found") and "_SUCCESS" not in message
    assert message.endswith("(S3 DeleteObjects)")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with pytest.raises(ConnectorError, match=r"out/: cannot reach the S3 endpoint: .*127\.0\.0\.1:9.* \(S3 \w+\)$"):
        anyio.run(open_sink, S3Config(endpoint_url="http://127.0.0.1:9"))


def test_truncated_gzip_names_the_key_after_the_rows_before(s3: S3Config, client: Any, bucket: str) -> None:
    whole = gzip.compress(jsonl(range(2000)))
    put(client, bucket, "t/a.jsonl.gz", whole[: len(whole) * 2 // 3])
    got: list[Envelope] = []

    async def main() -> None:
        async with S3Source(f"s3://{bucket}/t/", s3=s3, batch_size=100) as src:
            async for b in src.batches():
                got.extend(b)

    with pytest.raises(ConnectorError, match=f"s3://{bucket}/t/a.jsonl.gz"):
        anyio.run(main)
    assert len(got) > 500
    assert ids(got) == [f"t{i}" for i in range(len(got))]


def test_stop_and_abandoned_iteration_close_cleanly(s3: S3Config, client: Any, bucket: str) -> None:
    for i in range(6):
        put(client, bucket, f"t/{i}.jsonl", jsonl(range(i * 500, i * 500 + 500)))

    async def main() -> int:
        n = 0
        async with S3Source(f"s3://{bucket}/t/", s3=s3, batch_size=10, max_concurrent_objects=3) as src:
            async for b in src.batches():
                n += len(b)
                if n >= 30:
                    src.stop()
        async with S3Source(f"s3://{bucket}/t/", s3=s3, batch_size=10) as src:
            async for _ in src.batches():
                break  # the engine's pump may leave the generator like this
        return n

    assert anyio.run(main) == 30


def test_close_is_idempotent_and_nothing_is_read_before_open(s3: S3Config, client: Any, bucket: str) -> None:
    put(client, bucket, "t/a.jsonl", jsonl(range(3)))

    async def main() -> None:
        src = S3Source(f"s3://{bucket}/t/", s3=s3)
        sink = S3Sink(f"s3://{bucket}/out/", s3=s3)
        assert src.size_hint() is None
        await src.aclose()
        await sink.aclose()
        async with src, sink:
            async for b in src.batches():
                await sink.write_batch([e.payload for e in b])
            await sink.flush()  # close completes nothing that was not flushed
        await src.aclose()
        await sink.aclose()

    anyio.run(main)
    assert keys(client, bucket, "out/") == ["out/part-00000-00000.jsonl"]


# --- resume (source) -------------------------------------------------------------------------


def test_resume_skips_acknowledged_positions_and_done_objects(s3: S3Config, client: Any, bucket: str) -> None:
    for i in range(3):
        put(client, bucket, f"t/{i}.jsonl.gz", gzip.compress(jsonl(range(i * 100, i * 100 + 100))))

    async def first() -> Any:
        async with S3Source(f"s3://{bucket}/t/", s3=s3, batch_size=25) as src:
            envs = [e async for b in src.batches() for e in b]
            # out of order, with a gap: all of object 0, lines 1-50 and 76-100 of object 1
            await src.ack([e.position for e in envs[125:150]])
            await src.ack([e.position for e in envs[:50]])
            await src.ack([e.position for e in envs[100:150]])
            await src.ack([e.position for e in envs[50:100]])
            await src.ack([e.position for e in envs[175:200]])
            return src.snapshot()

    state = anyio.run(first)
    assert state == {
        "done": {f"s3://{bucket}/t/1.jsonl.gz": [[1, 50], [76, 100]]},
        "complete": [f"s3://{bucket}/t/0.jsonl.gz"],
    }
    # a complete object is not fetched again: this one could not even be read now
    put(client, bucket, "t/0.jsonl.gz", b"\x1f\x8bnot gzip at all")
    src = S3Source(f"s3://{bucket}/t/", s3=s3, resume_state=orjson.loads(orjson.dumps(state)))
    rest = anyio.run(read_all, src)
    assert ids(rest) == [f"t{i}" for i in [*range(150, 175), *range(200, 300)]]


# --- sink ------------------------------------------------------------------------------------


async def write_parts(sink: S3Sink, batches: list[list[bytes]], *, flush_each: bool = True) -> None:
    for rows in batches:
        await sink.write_batch(rows)
        if flush_each:
            await sink.flush()


def test_sink_parts_markers_and_dead_letters(s3: S3Config, client: Any, bucket: str) -> None:
    url = f"s3://{bucket}/scores/dt=2026-11-21/"

    async def main() -> tuple[str | None, str | None]:
        async with S3Sink(url, s3=s3, compression="gzip") as sink, S3Sink.dead_letter(url, s3=s3) as dead:
            await write_parts(sink, [[b'{"a":1}', b'{"a":2}'], [b'{"a":3}']])
            await dead.write_batch([b'{"bad":1}'])
            assert keys(client, bucket, "scores/") == [
                "scores/dt=2026-11-21/part-00000-00000.jsonl.gz",
                "scores/dt=2026-11-21/part-00000-00001.jsonl.gz",
            ]  # the dead-letter part is not visible before its flush
            await dead.flush()
            return await sink.publish({"rows": 3}, success=True), await dead.publish({}, success=True)

    where, dead_where = anyio.run(main)
    assert where == f"{url}_SUMMARY.json" and dead_where is None
    assert keys(client, bucket, "scores/") == [
        "scores/dt=2026-11-21/_SUCCESS",
        "scores/dt=2026-11-21/_SUMMARY.json",
        "scores/dt=2026-11-21/_dead_letter/dead-00000-00000.jsonl",
        "scores/dt=2026-11-21/part-00000-00000.jsonl.gz",
        "scores/dt=2026-11-21/part-00000-00001.jsonl.gz",
    ]
    assert [r["a"] for r in read_rows(client, bucket, "scores/")] == [1, 2, 3]
    assert orjson.loads(get(client, bucket, "scores/dt=2026-11-21/_SUMMARY.json")) == {"rows": 3}


def test_failed_run_writes_the_summary_but_no_success(s3: S3Config, client: Any, bucket: str) -> None:
    async def main() -> None:
        async with S3Sink(f"s3://{bucket}/out/", s3=s3, compression="zstd", max_rows_per_part=2) as sink:
            await write_parts(sink, [[b"{}"] * 5], flush_each=False)
            await sink.publish({"status": "failed"}, success=False)

    anyio.run(main)
    assert keys(client, bucket, "out/") == [
        "out/_SUMMARY.json",
        "out/part-00000-00000.jsonl.zst",
        "out/part-00000-00001.jsonl.zst",
        "out/part-00000-00002.jsonl.zst",
    ]
    assert len(read_rows(client, bucket, "out/")) == 5


def test_start_over_removes_success_summary_and_every_shards_parts(s3: S3Config, client: Any, bucket: str) -> None:
    for k in ["_SUCCESS", "_SUMMARY.json", "part-00000-00000.jsonl", "part-00001-00007.jsonl.gz", "keep.txt"]:
        put(client, bucket, f"out/{k}", b"{}\n")
    client.create_multipart_upload(Bucket=bucket, Key="out/part-00000-00009.jsonl")

    async def main() -> None:
        async with S3Sink(f"s3://{bucket}/out/", s3=s3) as sink:
            assert keys(client, bucket, "out/") == ["out/keep.txt"]
            await sink.write_batch([b'{"new":1}'])
            await sink.flush()

    anyio.run(main)
    assert keys(client, bucket, "out/") == ["out/keep.txt", "out/part-00000-00000.jsonl"]
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_multipart_upload_for_a_large_part(s3: S3Config, client: Any, bucket: str, monkeypatch: Any) -> None:
    monkeypatch.setattr(s3_sink, "PART_SIZE", 5 << 20)  # S3's minimum piece: a smaller test
    row = orjson.dumps({"pad": "x" * 1000})
    rows = [row] * 6_500  # ~6.3 MiB: a 5.3 MiB piece, then the rest

    async def main() -> None:
        async with S3Sink(f"s3://{bucket}/big/", s3=s3) as sink:
            for i in range(0, len(rows), 1000):
                await sink.write_batch(rows[i : i + 1000])
            assert client.list_multipart_uploads(Bucket=bucket)["Uploads"][0]["Key"] == "big/part-00000-00000.jsonl"
            assert keys(client, bucket, "big/") == []  # not visible until complete
            await sink.flush()

    anyio.run(main)
    head = client.head_object(Bucket=bucket, Key="big/part-00000-00000.jsonl")
    assert head["ETag"].strip('"').endswith("-2")  # a multipart object of two pieces
    assert get(client, bucket, "big/part-00000-00000.jsonl") == b"\n".join(rows) + b"\n"


def test_upload_file_puts_a_small_file_and_pieces_a_large_one(
    s3: S3Config, client: Any, bucket: str, tmp_path: Any
) -> None:
    from assay.connectors.s3_client import S3Client

    small, large = tmp_path / "small.bin", tmp_path / "large.bin"
    small.write_bytes(b"tiny")
    large.write_bytes(bytes(range(256)) * (11 << 12))  # 11 MiB: pieces of 5, 5 and 1 MiB

    async def main() -> None:
        async with S3Client(s3) as c:
            await c.upload_file(bucket, "u/small.bin", small, piece=5 << 20)
            await c.upload_file(bucket, "u/large.bin", large, piece=5 << 20)
            assert await c.exists(bucket, "u/large.bin") and not await c.exists(bucket, "u/large")

    anyio.run(main)
    assert get(client, bucket, "u/small.bin") == b"tiny"
    assert get(client, bucket, "u/large.bin") == large.read_bytes()
    assert client.head_object(Bucket=bucket, Key="u/large.bin")["ETag"].strip('"').endswith("-3")
    assert not client.list_multipart_uploads(Bucket=bucket).get("Uploads")


def test_a_staged_publish_resumed_after_its_swap_keeps_the_swapped_rows(s3: S3Config, client: Any, bucket: str) -> None:
    """A stop after a staged sink's swap but before the run was forgotten: the resumed publish
    finds the staging area empty, without ``_OPEN``, and does not swap nothing in (which would
    delete the rows swapped in); a staged run that wrote no rows still replaces the output."""
    url = f"s3://{bucket}/dl/"

    async def main() -> None:
        async with S3Sink(url, s3=s3, prefix="dead", markers=False) as old:
            await old.write_batch([b'{"old":1}'])
            await old.publish({}, success=True)
        async with S3Sink(url, s3=s3, prefix="dead", markers=False, staged=True) as new:
            await new.write_batch([b'{"new":1}', b'{"new":2}'])
            await new.publish({}, success=True)
            state = new.snapshot()
        assert read_rows(client, bucket, "dl/") == [{"new": 1}, {"new": 2}]
        async with S3Sink(url, s3=s3, prefix="dead", markers=False, staged=True, resume_state=state) as again:
            await again.publish({}, success=True)
        assert read_rows(client, bucket, "dl/") == [{"new": 1}, {"new": 2}]
        async with S3Sink(url, s3=s3, prefix="dead", markers=False, staged=True) as empty:
            await empty.publish({}, success=True)

    anyio.run(main)
    assert read_rows(client, bucket, "dl/") == [] and keys(client, bucket, "dl/") == []


def test_resume_drops_parts_completed_after_the_snapshot(s3: S3Config, client: Any, bucket: str) -> None:
    url = f"s3://{bucket}/out/"

    async def interrupted() -> Any:
        async with S3Sink(url, s3=s3, shard=1) as sink:
            await write_parts(sink, [[b'{"r":1}'], [b'{"r":2}']])
            state = sink.snapshot()
            await write_parts(sink, [[b'{"r":3}']])  # completed, but the checkpoint never saw it
            await sink.write_batch([b'{"r":4}'])  # never flushed: aclose completes nothing
            return state

    state = anyio.run(interrupted)
    assert state == {"parts": ["out/part-00001-00000.jsonl", "out/part-00001-00001.jsonl"], "seq": 2}
    assert len(keys(client, bucket, "out/")) == 3
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    put(client, bucket, "out/part-00000-00000.jsonl", b'{"r":0}\n')  # another shard's: kept

    async def resumed() -> None:
        async with S3Sink(url, s3=s3, shard=1, resume_state=state) as sink:
            assert keys(client, bucket, "out/") == [
                "out/part-00000-00000.jsonl",
                "out/part-00001-00000.jsonl",
                "out/part-00001-00001.jsonl",
            ]
            await write_parts(sink, [[b'{"r":3}', b'{"r":4}']])
            assert sink.snapshot()["seq"] == 3

    anyio.run(resumed)
    assert sorted(r["r"] for r in read_rows(client, bucket, "out/")) == [0, 1, 2, 3, 4]


def test_sink_rejects_globs_and_object_names() -> None:
    with pytest.raises(ConfigError, match="prefix"):
        S3Sink("s3://b/out/scores.jsonl.gz")
    with pytest.raises(ConfigError, match="glob"):
        S3Sink("s3://b/out/*")


# --- end to end: a small driver that plays the engine ----------------------------------------


class Killed(Exception):
    """The driver stopped as a killed process would: after writing, before its next checkpoint."""


async def drive(
    s3: S3Config, src_url: str, dst_url: str, *, checkpoint: Any = None, kill_after: int | None = None
) -> dict[str, Any]:
    """read batches → write rows → every 2 batches: flush, ack, snapshot → publish. Returns the
    last checkpoint (the engine's own is a file; here it is the return value, or Killed's arg)."""
    state = checkpoint
    src = S3Source(src_url, s3=s3, batch_size=40, resume_state=checkpoint and checkpoint["source"])
    sink = S3Sink(dst_url, s3=s3, compression="gzip", resume_state=checkpoint and checkpoint["sink"])
    dead = S3Sink.dead_letter(dst_url, s3=s3, resume_state=checkpoint and checkpoint["dead"])
    async with src, sink, dead:
        pending: list[Position] = []
        n = 0
        async for batch in src.batches():
            good = [e for e in batch if b"bad" not in e.payload]
            rows = [orjson.dumps({"trace_id": orjson.loads(e.payload)["id"], "pos": str(e.position)}) for e in good]
            await sink.write_batch(rows)
            await dead.write_batch([orjson.dumps({"pos": str(e.position)}) for e in batch if e not in good])
            pending += [e.position for e in batch]
            n += 1
            if n % 2 == 0:
                await sink.flush()
                await dead.flush()
                await src.ack(pending)
                pending = []
                state = {"source": src.snapshot(), "sink": sink.snapshot(), "dead": dead.snapshot()}
            if kill_after is not None and n >= kill_after:
                raise Killed(state)
        await sink.flush()
        await dead.flush()
        await src.ack(pending)
        await sink.publish({"rows": len(sink.parts)}, success=True)
        return {"source": src.snapshot(), "sink": sink.snapshot(), "dead": dead.snapshot()}


@pytest.fixture
def corpus(client: Any, bucket: str) -> str:
    for i in range(5):
        body = b"".join(
            orjson.dumps({"id": f"t{j}", **({"bad": 1} if j % 100 == 7 else {})}) + b"\n"
            for j in range(i * 100, i * 100 + 100)
        )
        put(client, bucket, f"traces/dt=2026-11-21/{i:02d}.jsonl.gz", gzip.compress(body))
    return f"s3://{bucket}/traces/dt=2026-11-21/"


def output(client: Any, bucket: str) -> dict[str, bytes]:
    return {k: get(client, bucket, k) for k in keys(client, bucket, "scores/")}


def test_end_to_end_rerun_gives_identical_keys_and_bytes(s3: S3Config, client: Any, bucket: str, corpus: str) -> None:
    dst = f"s3://{bucket}/scores/dt=2026-11-21/"
    anyio.run(lambda: drive(s3, corpus, dst))
    first = output(client, bucket)
    assert "scores/dt=2026-11-21/_SUCCESS" in first
    rows = read_rows(client, bucket, "scores/")
    assert len(rows) == 495 and len({r["trace_id"] for r in rows}) == 495
    assert len(read_rows(client, bucket, "scores/dt=2026-11-21/_dead_letter/")) == 5
    anyio.run(lambda: drive(s3, corpus, dst))
    assert output(client, bucket) == first


def test_killed_run_leaves_no_success_and_resume_writes_each_row_once(
    s3: S3Config, client: Any, bucket: str, corpus: str
) -> None:
    dst = f"s3://{bucket}/scores/dt=2026-11-21/"
    anyio.run(lambda: drive(s3, corpus, dst))  # an earlier complete run: its _SUCCESS must go
    with pytest.raises(Killed) as killed:
        anyio.run(lambda: drive(s3, corpus, dst, kill_after=7))  # starts over, killed midway
    assert "scores/dt=2026-11-21/_SUCCESS" not in output(client, bucket)
    state = orjson.loads(orjson.dumps(killed.value.args[0]))
    with pytest.raises(Killed) as killed:
        anyio.run(lambda: drive(s3, corpus, dst, checkpoint=state, kill_after=3))  # resumed, killed again
    state = orjson.loads(orjson.dumps(killed.value.args[0]))
    anyio.run(lambda: drive(s3, corpus, dst, checkpoint=state))
    rows = read_rows(client, bucket, "scores/")
    assert sorted(r["trace_id"] for r in rows) == sorted(f"t{i}" for i in range(500) if i % 100 != 7)
    assert len(read_rows(client, bucket, "scores/dt=2026-11-21/_dead_letter/")) == 5
    assert "scores/dt=2026-11-21/_SUCCESS" in output(client, bucket)


# --- the registry's view: the connector, several URLs, the engine's publisher ------------------


def test_connector_builds_from_run_file_sections(s3_server: S3Server, client: Any, bucket: str) -> None:
    from types import SimpleNamespace

    from assay.connectors.s3 import CONNECTOR

    put(client, bucket, "a/1.jsonl", jsonl(range(2)))
    put(client, bucket, "b/2.jsonl.gz", gzip.compress(jsonl(range(2, 4))))
    options = {"endpoint_url": s3_server.endpoint_url}
    src_cfg = SimpleNamespace(paths=[f"s3://{bucket}/a/", f"s3://{bucket}/b/*.gz"], input_format="auto")
    src = CONNECTOR.build_source(src_cfg, SimpleNamespace(batch_size=1, shard=None, resume_state=None, options=options))
    assert ids(anyio.run(read_all, src)) == ["t0", "t1", "t2", "t3"]

    put(client, bucket, "out/part-00003-00000.jsonl.gz", b"")
    sink_cfg = SimpleNamespace(path=f"s3://{bucket}/out", compression="gzip", max_rows_per_part=None)

    def ctx(role: str, shard: int, state: Any, reset_only_shard: bool = False) -> Any:
        return SimpleNamespace(
            role=role, shard=shard, resume_state=state, options=options, reset_only_shard=reset_only_shard
        )

    async def main() -> str | None:
        async with CONNECTOR.build_sink(sink_cfg, ctx("results", 0, None, reset_only_shard=True)) as sink:
            await sink.write_batch([b'{"a":1}'])
            await sink.flush()
        dead_cfg = SimpleNamespace(path=f"s3://{bucket}/out/_dead_letter/")
        async with CONNECTOR.build_sink(dead_cfg, ctx("dead_letter", 0, None)) as dead:
            await dead.write_batch([b'{"bad":1}'])
            await dead.flush()
            await dead.flush()
        empty = {"parts": [], "seq": 0, "current": None}  # the engine's publisher writes no parts
        async with CONNECTOR.build_sink(sink_cfg, ctx("results", 99_999, empty)) as publisher:
            return await publisher.publish({"ok": True}, success=False, summary_name="_SUMMARY.shard-0-of-2.json")

    assert anyio.run(main) == f"s3://{bucket}/out/_SUMMARY.shard-0-of-2.json"
    assert keys(client, bucket, "out/") == [
        "out/_SUMMARY.shard-0-of-2.json",
        "out/_dead_letter/dead-00000-00000.jsonl",
        "out/part-00000-00000.jsonl.gz",
        "out/part-00003-00000.jsonl.gz",  # reset_only_shard: another writer's part stays
    ]


def test_bad_s3_options_name_the_key() -> None:
    from assay.connectors.s3 import s3_config

    with pytest.raises(ConfigError, match=r"s3\.endpoint"):
        s3_config({"endpoint": "http://x"})
