"""The connectors every contract test runs against: each a harness (see ``harness.py``)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from assay.connectors.base import Sink, Source
from assay.connectors.file import FileSource
from assay.connectors.file_sink import LocalSink
from assay.testing import ListSink, ListSource
from tests.contract.harness import SinkHarness, SourceHarness, read_parts


def _file_source(tmp_path: Path) -> SourceHarness:
    async def make(records: list[bytes], resume_state: Any) -> Source:
        f = tmp_path / "in.jsonl"
        if not f.exists():
            f.write_bytes(b"\n".join(records) + b"\n")
        return FileSource([str(f)], batch_size=7, resume_state=resume_state)

    return SourceHarness("file", make)


def _dir_sink(tmp_path: Path, compression: str) -> SinkHarness:
    out = tmp_path / f"out-{compression}"

    async def make(resume_state: Any) -> Sink:
        return LocalSink(str(out) + "/", compression=compression, max_rows_per_part=5, resume_state=resume_state)

    async def read() -> list[bytes]:
        return read_parts(out)

    return SinkHarness(f"dir-{compression}", make, read)


def _file_sink(tmp_path: Path) -> SinkHarness:
    target = tmp_path / "out.jsonl.gz"

    async def make(resume_state: Any) -> Sink:
        return LocalSink(str(target), resume_state=resume_state)

    async def read() -> list[bytes]:
        import gzip

        if not target.exists():
            return []
        return [x for x in gzip.decompress(target.read_bytes()).split(b"\n") if x]

    return SinkHarness("file-gzip", make, read)


def _list_sink() -> SinkHarness:
    holder: dict[str, ListSink] = {}

    async def make(resume_state: Any) -> Sink:
        old = holder.get("sink")
        sink = ListSink()
        if resume_state is not None and old is not None:  # a restart keeps what was durable
            sink.rows = old.rows[: resume_state["rows"]]
            sink.durable = len(sink.rows)
        holder["sink"] = sink
        return sink

    async def read() -> list[bytes]:
        return list(holder["sink"].rows)

    return SinkHarness("list", make, read, extra={"close_discards": False})


def _list_source() -> SourceHarness:
    async def make(records: list[bytes], resume_state: Any) -> Source:
        return ListSource(records, batch_size=7, resume_state=resume_state)

    return SourceHarness("list", make)


def _s3_source(request: pytest.FixtureRequest) -> SourceHarness:
    from assay.connectors.s3 import S3Source

    s3 = request.getfixturevalue("s3")
    client = request.getfixturevalue("client")
    bucket = request.getfixturevalue("bucket")

    async def make(records: list[bytes], resume_state: Any) -> Source:
        half = len(records) // 2
        for i, chunk in enumerate((records[:half], records[half:])):  # two objects, one gzipped
            body = b"\n".join(chunk) + b"\n"
            client.put_object(
                Bucket=bucket, Key=f"in/{i}.jsonl" + (".gz" if i else ""), Body=gzip.compress(body) if i else body
            )
        return S3Source(f"s3://{bucket}/in/", s3=s3, batch_size=7, resume_state=resume_state)

    return SourceHarness("s3", make)


def _s3_sink(request: pytest.FixtureRequest) -> SinkHarness:
    from assay.connectors.s3 import S3Sink

    s3 = request.getfixturevalue("s3")
    client = request.getfixturevalue("client")
    bucket = request.getfixturevalue("bucket")

    async def make(resume_state: Any) -> Sink:
        return S3Sink(f"s3://{bucket}/out/", s3=s3, max_rows_per_part=5, resume_state=resume_state, compression="gzip")

    async def read() -> list[bytes]:
        listing = client.list_objects_v2(Bucket=bucket, Prefix="out/part-").get("Contents", [])
        out: list[bytes] = []
        for obj in sorted(listing, key=lambda o: o["Key"]):
            data = gzip.decompress(client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
            out += [x for x in data.split(b"\n") if x]
        return out

    return SinkHarness("s3", make, read)


def _kafka_source(request: pytest.FixtureRequest) -> SourceHarness:
    """One topic of 3 partitions and one consumer group per test: a resumed source is a new
    consumer of the group (its committed offsets are the resume state)."""
    import uuid

    from assay.connectors.kafka import KafkaSourceConfig
    from assay.connectors.kafka_source import KafkaSource
    from tests.support.kafka_broker import create_topic, produce

    bootstrap = request.getfixturevalue("bootstrap")
    tag = uuid.uuid4().hex[:8]
    topic, group = f"contract-{tag}", f"contract-{tag}"
    made: list[bool] = []

    async def make(records: list[bytes], resume_state: Any) -> Source:
        if not made:
            await create_topic(bootstrap, topic, 3)
            await produce(bootstrap, topic, records, partitions=[i % 3 for i in range(len(records))])
            made.append(True)
        cfg = KafkaSourceConfig(
            bootstrap_servers=bootstrap, topics=[topic], group_id=group, session_timeout_ms=6000, stop_at="end"
        )
        return KafkaSource(cfg, batch_size=7, resume_state=resume_state)

    return SourceHarness("kafka", make, exact=False, partitioned=True)


def _kafka_sink(request: pytest.FixtureRequest) -> SinkHarness:
    import uuid

    from assay.connectors.kafka import KafkaSinkConfig
    from assay.connectors.kafka_sink import KafkaSink
    from tests.support.kafka_broker import create_topic, read_topic

    bootstrap = request.getfixturevalue("bootstrap")
    topic = f"contract-out-{uuid.uuid4().hex[:8]}"
    made: list[bool] = []

    async def make(resume_state: Any) -> Sink:
        if not made:
            await create_topic(bootstrap, topic, 1)  # one partition: the order of the rows is kept
            made.append(True)
        return KafkaSink(KafkaSinkConfig(bootstrap_servers=bootstrap, topic=topic))

    async def read() -> list[bytes]:
        return [m.value for m in await read_topic(bootstrap, topic)]

    return SinkHarness("kafka", make, read, exact=False, extra={"start_over": False})


SOURCES = ["file", "list", "s3", "kafka"]
SINKS = ["dir-none", "dir-gzip", "dir-zstd", "file-gzip", "list", "s3", "kafka"]


@pytest.fixture(params=SOURCES)
def source_harness(request: pytest.FixtureRequest, tmp_path: Path) -> SourceHarness:
    name = request.param
    if name == "s3":
        return _s3_source(request)
    if name == "kafka":
        return _kafka_source(request)
    return {"file": _file_source, "list": lambda _: _list_source()}[name](tmp_path)


@pytest.fixture(params=SINKS)
def sink_harness(request: pytest.FixtureRequest, tmp_path: Path) -> SinkHarness:
    name = request.param
    if name.startswith("dir-"):
        return _dir_sink(tmp_path, name.split("-", 1)[1])
    if name == "file-gzip":
        return _file_sink(tmp_path)
    if name == "s3":
        return _s3_sink(request)
    if name == "kafka":
        return _kafka_sink(request)
    return _list_sink()
