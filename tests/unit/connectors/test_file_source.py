"""FileSource on the connector contract: framing × compression × (file, stdin), resume ledger,
sharding, size hint and faults."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import zstandard

from assay.connectors.file import FileSource as ReExported
from assay.connectors.file_source import FileSource
from assay.exceptions import ConnectorError
from assay.records import Position

RECORDS: list[Any] = [{"id": f"t{i}", "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(7)]
FRAMINGS = {
    "jsonl": b"".join(orjson.dumps(r) + b"\n" for r in RECORDS),
    "array": json.dumps(RECORDS, indent=2).encode(),
    "array_one_line": json.dumps(RECORDS).encode(),
    "documents": b"\n".join(json.dumps(r, indent=2).encode() for r in RECORDS) + b"\n",
}
BOM = b"\xef\xbb\xbf"
COMPRESSIONS = {
    "none": lambda b: b,
    "gzip": gzip.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
}


async def _read(src: FileSource) -> tuple[list[tuple[Position, Any]], list[tuple[Position, str]]]:
    out: list[tuple[Position, Any]] = []
    errors: list[tuple[Position, str]] = []
    async with src:
        async for batch in src.batches():
            out.extend((e.position, orjson.loads(e.payload)) for e in batch)
            errors.extend(src.read_errors)
            src.read_errors.clear()
    errors.extend(src.read_errors)
    return out, errors


def read(paths: list[str], **kw: Any) -> tuple[list[tuple[Position, Any]], list[tuple[Position, str]]]:
    return anyio.run(_read, FileSource(paths, **kw))


STDIN_SCRIPT = """
import sys, anyio, orjson
from assay.connectors.file_source import FileSource
async def main():
    out = []
    async with FileSource(["-"], batch_size=3) as src:
        async for batch in src.batches():
            out.extend([e.position.source, e.position.line, orjson.loads(e.payload)] for e in batch)
    sys.stdout.buffer.write(orjson.dumps(out))
anyio.run(main)
"""


def read_stdin(data: bytes) -> list[Any]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.run([sys.executable, "-c", STDIN_SCRIPT], input=data, capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return list(orjson.loads(proc.stdout))


@pytest.mark.parametrize("framing", sorted(FRAMINGS))
@pytest.mark.parametrize("compression", sorted(COMPRESSIONS))
@pytest.mark.parametrize("bom", [False, True])
def test_every_framing_and_compression_from_a_file_without_suffix(
    tmp_path: Path, framing: str, compression: str, bom: bool
) -> None:
    f = tmp_path / "export"  # no suffix: content decides both compression and framing
    f.write_bytes(COMPRESSIONS[compression]((BOM if bom else b"") + FRAMINGS[framing]))
    got, errors = read([str(f)])
    assert [value for _, value in got] == RECORDS and errors == []
    assert all(p.source == str(f) and p.line for p, _ in got)


@pytest.mark.parametrize("framing", sorted(FRAMINGS))
@pytest.mark.parametrize("compression", sorted(COMPRESSIONS))
def test_every_framing_and_compression_on_stdin(framing: str, compression: str) -> None:
    got = read_stdin(COMPRESSIONS[compression](BOM + FRAMINGS[framing]))
    assert [value for _, _, value in got] == RECORDS
    assert {source for source, _, _ in got} == {"<stdin>"}


def test_from_assay_connectors_file_still_imports_file_source() -> None:
    assert ReExported is FileSource


def test_ack_snapshot_resume_round_trip(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    a.write_bytes(FRAMINGS["jsonl"])
    b = tmp_path / "b.json"
    b.write_bytes(FRAMINGS["array_one_line"])  # seven records on one line: keyed by ordinal

    async def first_run() -> Any:
        async with FileSource([str(a), str(b)], batch_size=2) as src:
            seen = [e.position async for batch in src.batches() for e in batch]
            # acknowledge every other record, out of order
            await src.ack(list(reversed(seen[::2])))
            return json.loads(json.dumps(src.snapshot()))  # JSON-able

    state = anyio.run(first_run)
    assert state == {str(a): [[1, 1], [3, 3], [5, 5], [7, 7]], str(b): [[2, 2], [4, 4], [6, 6]]}
    got, _ = read([str(a), str(b)], resume_state=state)
    assert [v for _, v in got] == [RECORDS[i] for i in (1, 3, 5)] + [RECORDS[i] for i in (0, 2, 4, 6)]

    async def second_run() -> Any:
        async with FileSource([str(a), str(b)], resume_state=state) as src:
            await src.ack([e.position async for batch in src.batches() for e in batch])
            return src.snapshot()

    assert anyio.run(second_run) == {str(a): [[1, 7]], str(b): [[1, 7]]}
    assert read([str(a), str(b)], resume_state={str(a): [[1, 7]], str(b): [[1, 7]]})[0] == []


def test_read_errors_are_positions_skipped_on_resume(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_bytes(b'[\n{"a": 1},\n{"b": "\xff"},\n{"c": 3}\n]\n')
    got, errors = read([str(f)])
    assert [v for _, v in got] == [{"a": 1}, {"c": 3}]
    [(pos, msg)] = errors
    assert (pos.source, pos.line, pos.offset) == (str(f), 3, 2) and f"{f}:3" in msg
    _, errors = read([str(f)], resume_state={str(f): [[2, 2]]})
    assert errors == []


def _shard_union(paths: list[str], n: int) -> list[tuple[str, int | None]]:
    seen: list[tuple[str, int | None]] = []
    for i in range(n):
        got, _ = read(paths, shard=(i, n))
        seen.extend((p.source, p.line) for p, _ in got)
    return seen


def test_shards_cover_every_record_exactly_once(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    lines = [orjson.dumps({"i": i, "pad": "x" * (i % 300)}) for i in range(3000)]
    big.write_bytes(BOM + b"\n".join(lines) + b"\n")
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(FRAMINGS["jsonl"]))
    arr = tmp_path / "d.json"
    arr.write_bytes(FRAMINGS["array"])
    paths = [str(big), str(gz), str(arr)]
    whole = [(p.source, p.line) for p, _ in read(paths)[0]]
    for n in (2, 3):
        assert sorted(_shard_union(paths, n), key=str) == sorted(whole, key=str)
    first, _ = read([str(big)], shard=(0, 3))
    assert orjson.loads(lines[0]) == first[0][1]  # the BOM is dropped in the first byte range


def test_size_hint_is_input_bytes(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b'{"a": 1}\n')
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b'{"a": 2}\n'))

    async def hint() -> tuple[int | None, str]:
        async with FileSource([str(tmp_path)]) as src:
            return src.size_hint(), src.size_unit

    size = sum(f.stat().st_size for f in tmp_path.iterdir())
    assert anyio.run(hint) == (size, "bytes")


# -- faults (issue 8 §1c) --------------------------------------------------------------------


async def _read_until_fault(src: FileSource) -> tuple[list[Position], BaseException | None]:
    seen: list[Position] = []
    try:
        async with src:
            async for batch in src.batches():
                seen.extend(e.position for e in batch)
    except ConnectorError as exc:
        return seen, exc
    return seen, None


def test_truncated_gzip_yields_what_came_before_then_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "a.jsonl"
    good.write_bytes(FRAMINGS["jsonl"])
    lines = b"".join(orjson.dumps({"i": i, "pad": os.urandom(40).hex()}) + b"\n" for i in range(20_000))
    data = gzip.compress(lines)
    cut = tmp_path / "b.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    seen, exc = anyio.run(_read_until_fault, FileSource([str(good), str(cut)], batch_size=1000))
    assert isinstance(exc, ConnectorError)
    assert str(cut) in str(exc) and "truncated gzip" in str(exc)
    assert [p.line for p in seen if p.source == str(good)] == list(range(1, 8))
    from_cut = [p.line for p in seen if p.source == str(cut)]
    assert from_cut == list(range(1, len(from_cut) + 1)) and len(from_cut) > 5_000


def test_a_zst_that_is_not_zstd_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl.zst"
    f.write_bytes(FRAMINGS["jsonl"])
    seen, exc = anyio.run(_read_until_fault, FileSource([str(f)]))
    assert seen == [] and isinstance(exc, ConnectorError)
    assert str(exc) == f"{f}: not zstd data (the name ends in a zstd suffix)"


def test_a_file_that_disappears_mid_run_names_the_file(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    a.write_bytes(FRAMINGS["jsonl"])
    b = tmp_path / "b.jsonl"
    b.write_bytes(FRAMINGS["jsonl"])

    async def run() -> tuple[list[Position], BaseException | None]:
        seen: list[Position] = []
        try:
            async with FileSource([str(tmp_path)], batch_size=7) as src:
                async for batch in src.batches():
                    seen.extend(e.position for e in batch)
                    b.unlink(missing_ok=True)  # gone after the run listed it
        except ConnectorError as exc:
            return seen, exc
        return seen, None

    seen, exc = anyio.run(run)
    assert [p.source for p in seen] == [str(a)] * 7
    assert isinstance(exc, ConnectorError) and str(b) in str(exc) and "disappeared" in str(exc)


def test_cli_reports_a_truncated_gzip_as_an_assay_error(tmp_path: Path) -> None:
    lines = b"".join(orjson.dumps({"messages": [{"role": "user", "content": str(i)}]}) + b"\n" for i in range(3000))
    data = gzip.compress(lines)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[: len(data) // 2])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.run(
        [sys.executable, "-m", "assay.cli", "normalize", "--json", "-n", "0", str(cut)],
        capture_output=True,
        env=env,
        timeout=60,
    )
    err = proc.stderr.decode()
    assert proc.returncode != 0 and "Traceback" not in err
    assert str(cut) in err and "truncated gzip" in err
