from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import anyio
import pytest
import zstandard

from assay.connectors.file import FileSource, expand_paths
from assay.exceptions import InputMissingError


async def _read(paths: list[str], **kw: object) -> tuple[list[tuple[str, int | None, bytes]], FileSource]:
    out = []
    async with FileSource(paths, **kw) as src:  # type: ignore[arg-type]
        async for batch in src.batches():
            out.extend((e.position.source, e.position.line, e.payload) for e in batch)
    return out, src


def test_jsonl_plain_gz_zst_give_same_records_and_line_numbers(tmp_path: Path) -> None:
    body = b'{"a": 1}\n\n   \n{"a": 2}\r\n{"a": 3}'  # blank lines skipped, CRLF stripped, no final newline
    (tmp_path / "x.jsonl").write_bytes(body)
    (tmp_path / "y.jsonl.gz").write_bytes(gzip.compress(body))
    (tmp_path / "z.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(body))
    for name in ("x.jsonl", "y.jsonl.gz", "z.jsonl.zst"):
        recs, _ = anyio.run(_read, [str(tmp_path / name)])
        assert [(line, payload) for _, line, payload in recs] == [
            (1, b'{"a": 1}'),
            (4, b'{"a": 2}'),
            (5, b'{"a": 3}'),
        ]


def test_json_array_file_streams_elements_with_lines(tmp_path: Path) -> None:
    f = tmp_path / "arr.json"
    f.write_text('[\n  {"a": 1},\n  {"a": [1,\n 2]},\n  "s", 12\n]\n')
    recs, src = anyio.run(_read, [str(f)])
    assert [(line, json.loads(p)) for _, line, p in recs] == [
        (2, {"a": 1}),
        (3, {"a": [1, 2]}),
        (5, "s"),
        (5, 12),
    ]
    assert src.read_errors == []


def test_json_array_syntax_error_is_a_read_error_not_a_crash(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text('[{"a": 1}, {"a": }]')
    recs, src = anyio.run(_read, [str(f)])
    assert [json.loads(p) for _, _, p in recs] == [{"a": 1}]
    assert len(src.read_errors) == 1 and "bad.json" in src.read_errors[0][1]


def test_directories_and_globs_sorted(tmp_path: Path) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    for name in ("d/b.jsonl", "d/a.jsonl", "d/sub/c.jsonl.gz", "d/_SUMMARY.json", "d/notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert [Path(p).name for p in expand_paths([str(tmp_path / "d")])] == ["a.jsonl", "b.jsonl", "c.jsonl.gz"]
    assert [Path(p).name for p in expand_paths([str(tmp_path / "d" / "*.jsonl")])] == ["a.jsonl", "b.jsonl"]
    with pytest.raises(InputMissingError, match="no files match"):
        expand_paths([str(tmp_path / "nothing*.jsonl")])
    with pytest.raises(InputMissingError, match="no such file"):
        expand_paths([str(tmp_path / "missing.jsonl")])


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeStdin:
        buffer = io.BytesIO(b'{"a": 1}\n{"a": 2}\n')

    monkeypatch.setattr("sys.stdin", FakeStdin())
    recs, _ = anyio.run(_read, ["-"])
    assert [(s, line) for s, line, _ in recs] == [("<stdin>", 1), ("<stdin>", 2)]


@pytest.mark.parametrize("name", ["x.jsonl", "x.jsonl.gz"])  # byte ranges / running index
@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("pad", [1, 100])  # short lines (chunked newline count) and long lines (memory map)
def test_shards_are_disjoint_and_complete(tmp_path: Path, name: str, n: int, pad: int) -> None:
    body = "".join(
        ("\n" if i % 4 == 0 else "") + f'{{"i": {i}, "pad": "{"x" * (i * 7 % 50) * pad}"}}\n' for i in range(40)
    )
    f = tmp_path / name
    f.write_bytes(gzip.compress(body.encode()) if name.endswith(".gz") else body.encode())
    whole, _ = anyio.run(_read, [str(f)])
    seen = []
    for i in range(n):
        recs, _ = anyio.run(lambda i=i: _read([str(f)], shard=(i, n)))
        seen.extend((line, payload) for _, line, payload in recs)
    assert sorted(seen) == sorted((line, payload) for _, line, payload in whole)
    assert len(whole) == 40


def test_batches_bounded_by_batch_size(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    f.write_text("".join("{}\n" for _ in range(10)))

    async def sizes() -> list[int]:
        async with FileSource([str(f)], batch_size=4) as src:
            return [len(b) async for b in src.batches()]

    assert anyio.run(sizes) == [4, 4, 2]


def test_lines_longer_than_the_read_buffer_and_readers_without_readinto(tmp_path: Path) -> None:
    from assay.connectors.file import CHUNK, iter_lines

    big = b'{"a": "' + b"x" * (3 * CHUNK) + b'"}'
    body = b'{"a": 1}\n' + big + b"\r\n\n" + b'{"a": 2}\n' * 3 + big
    (tmp_path / "x.jsonl").write_bytes(body)
    (tmp_path / "y.jsonl.gz").write_bytes(gzip.compress(body))
    (tmp_path / "z.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(body))
    expected = [(1, b'{"a": 1}'), (2, big), (4, b'{"a": 2}'), (5, b'{"a": 2}'), (6, b'{"a": 2}'), (7, big)]
    for name in ("x.jsonl", "y.jsonl.gz", "z.jsonl.zst"):
        recs, _ = anyio.run(_read, [str(tmp_path / name)])
        assert [(line, payload) for _, line, payload in recs] == expected
    for n in (2, 3):  # byte-range shards read with a length-limited reader
        got = []
        for i in range(n):
            recs, _ = anyio.run(lambda i=i, n=n: _read([str(tmp_path / "x.jsonl")], shard=(i, n)))
            got.extend((line, payload) for _, line, payload in recs)
        assert sorted(got) == expected

    class ReadOnly:  # a stream with read() only takes the split path
        def __init__(self, data: bytes) -> None:
            self.f = io.BytesIO(data)

        def read(self, n: int) -> bytes:
            return self.f.read(n)

    assert list(iter_lines(ReadOnly(body))) == list(iter_lines(io.BytesIO(body))) == body.split(b"\n")


def test_a_staged_directory_swap_cut_short_is_finished_by_settle(tmp_path: Path) -> None:
    """Issue 17: a staged output swaps in at publish; a stop in the middle of the swap (after
    ``_SWAP.json``, some parts moved, the marker gone) is finished by the next run's ``settle``."""
    from assay.connectors.file_sink import STAGING, SWAP, LocalSink

    out = tmp_path / "out"

    async def go() -> None:
        async with LocalSink(str(out) + "/", max_rows_per_part=2) as old:
            await old.write_batch([b'{"old":%d}' % i for i in range(5)])
            await old.publish({"status": "ok"}, success=True)
        assert await LocalSink(str(out) + "/").whole()
        async with LocalSink(str(out) + "/", max_rows_per_part=2, staged=True) as new:
            await new.write_batch([b'{"new":%d}' % i for i in range(3)])
            await new.flush()
        staging = out / STAGING
        names = sorted(p.name for p in staging.glob("part-*"))
        assert len(names) == 2 and len(list(out.glob("part-*"))) == 3  # the old output is untouched
        (staging / SWAP).write_text(json.dumps(names))  # the publish began: marker withdrawn, one moved
        (out / "_SUCCESS").unlink()
        (staging / names[0]).replace(out / names[0])
        publisher = LocalSink(str(out) + "/", shard=99_999, resume_state={"parts": [], "seq": 0}, staged=True)
        async with publisher as again:
            assert await again.settle()

    anyio.run(go)
    assert not (out / STAGING).exists() and not (out / "_SUCCESS").exists()
    got = [json.loads(x) for p in sorted(out.glob("part-*")) for x in p.read_text().splitlines()]
    assert got == [{"new": 0}, {"new": 1}, {"new": 2}]


def test_a_staged_publish_resumed_after_its_swap_keeps_the_swapped_rows(tmp_path: Path) -> None:
    """A stop after a staged directory's swap but before the run was forgotten: the resumed
    publish finds the staging area gone (no ``_OPEN``) and swaps nothing in, which would delete the
    rows swapped in; a staged run that wrote no rows still replaces the output."""
    from assay.connectors.file_sink import STAGING, LocalSink

    out = tmp_path / "out"

    def rows() -> list[dict[str, int]]:
        return [json.loads(x) for p in sorted(out.glob("part-*")) for x in p.read_text().splitlines()]

    async def go() -> None:
        async with LocalSink(str(out) + "/") as old:
            await old.write_batch([b'{"old":1}'])
            await old.publish({"status": "ok"}, success=True)
        async with LocalSink(str(out) + "/", staged=True) as new:
            await new.write_batch([b'{"new":1}', b'{"new":2}'])
            await new.publish({"status": "ok"}, success=True)
            state = new.snapshot()
        assert rows() == [{"new": 1}, {"new": 2}] and not (out / STAGING).exists()
        async with LocalSink(str(out) + "/", staged=True, resume_state=state) as again:
            await again.publish({"status": "ok"}, success=True)
        assert rows() == [{"new": 1}, {"new": 2}] and not (out / STAGING).exists()
        async with LocalSink(str(out) + "/", staged=True) as empty:
            await empty.publish({"status": "ok"}, success=True)

    anyio.run(go)
    assert rows() == [] and (out / "_SUCCESS").exists()


def test_an_atomic_json_write_removes_what_killed_writers_of_that_file_left(tmp_path: Path) -> None:
    """A process killed (kill -9) while it wrote ``_SUMMARY.json`` left ``._SUMMARY.json.PID.tmp``:
    the next write of that file removes it; a live process's temp file and other files' stay."""
    import os
    import subprocess
    import sys

    from assay.connectors.file_sink import write_json_atomic

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"._SUMMARY.json.{int(dead.stdout)}.tmp"
    live = tmp_path / f"._SUMMARY.json.{os.getppid()}.tmp"
    other = tmp_path / f".writer-0.json.{int(dead.stdout)}.tmp"
    for f in (stale, live, other):
        f.write_text("{")
    write_json_atomic(tmp_path / "_SUMMARY.json", {"status": "ok"})
    assert json.loads((tmp_path / "_SUMMARY.json").read_text()) == {"status": "ok"}
    assert not stale.exists() and live.exists() and other.exists()
