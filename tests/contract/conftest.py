"""The connectors every contract test runs against: each a harness (see ``harness.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.connectors.base import Sink, Source
from assay.connectors.file import FileSource
from assay.connectors.file_sink import LocalSink
from assay.testing import ListSink
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

    return SinkHarness("list", make, read)


SOURCES = ["file"]
SINKS = ["dir-none", "dir-gzip", "dir-zstd", "file-gzip", "list"]


@pytest.fixture(params=SOURCES)
def source_harness(request: pytest.FixtureRequest, tmp_path: Path) -> SourceHarness:
    return {"file": _file_source}[request.param](tmp_path)


@pytest.fixture(params=SINKS)
def sink_harness(request: pytest.FixtureRequest, tmp_path: Path) -> SinkHarness:
    name = request.param
    if name.startswith("dir-"):
        return _dir_sink(tmp_path, name.split("-", 1)[1])
    if name == "file-gzip":
        return _file_sink(tmp_path)
    return _list_sink()
