"""Merging the shards' part files into one output file (``--workers N`` with a file sink)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from assay.pipeline import shard


def parts(tmp_path: Path, contents: list[bytes]) -> list[Path]:
    out = []
    for i, data in enumerate(contents):
        p = tmp_path / "scratch" / f"rows-{i}" / f"part-{i:05d}-00000.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        out.append(p)
    return out


def test_concat_keeps_shard_order_and_leaves_the_parts(tmp_path: Path) -> None:
    contents = [b'{"a": 1}\n' * 1000, b'{"b": 2}\n' * 3000, b"", b'{"c": 3}\n']
    ps = parts(tmp_path, contents)
    target = tmp_path / "out" / "results.jsonl"
    target.parent.mkdir()
    target.write_bytes(b"an older file\n")
    shard._concat(ps, target)
    assert target.read_bytes() == b"".join(contents)  # replaced
    assert all(p.exists() for p in ps)  # the only copy until the output is whole
    assert not list(target.parent.glob(".*.tmp"))
    more = parts(tmp_path / "again", [b'{"d": 4}\n'])
    shard._concat(more, target, append=True)  # a resumed run
    assert target.read_bytes() == b"".join(contents) + b'{"d": 4}\n'


def test_concat_of_gzip_parts_is_one_valid_stream(tmp_path: Path) -> None:
    ps = parts(tmp_path, [gzip.compress(b"x\n" * 10), gzip.compress(b"y\n" * 5)])
    target = tmp_path / "out.jsonl.gz"
    shard._concat(ps, target)
    assert gzip.decompress(target.read_bytes()) == b"x\n" * 10 + b"y\n" * 5


def test_concat_without_kernel_copy_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_copy_file_range(*args: object) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(shard.os, "copy_file_range", no_copy_file_range)
    contents = [b"first\n" * 100, b"second\n" * 100]
    ps = parts(tmp_path, contents)
    target = tmp_path / "out.jsonl"
    shard._concat(ps, target)
    assert target.read_bytes() == b"".join(contents)


def test_directory_placement_on_resume_takes_the_next_part_numbers(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "part-00000-00000.jsonl").write_bytes(b"old 0\n")
    (target / "part-00001-00000.jsonl").write_bytes(b"old 1\n")
    ps = parts(tmp_path, [b"new 0\n", b"new 1\n"])
    shard._place(ps, str(target) + "/", append=True)
    got = {p.name: p.read_bytes() for p in target.iterdir()}
    assert got == {
        "part-00000-00000.jsonl": b"old 0\n",
        "part-00001-00000.jsonl": b"old 1\n",
        "part-00000-00001.jsonl": b"new 0\n",
        "part-00001-00001.jsonl": b"new 1\n",
    }


def test_concat_of_nothing_is_an_empty_file(tmp_path: Path) -> None:
    target = tmp_path / "empty.jsonl"
    shard._concat([], target)
    assert target.read_bytes() == b""


def test_sharded_run_reports_the_workers_summed_progress(tmp_path: Path) -> None:
    import io
    import json

    from assay.config import RunConfig
    from assay.pipeline.progress import Progress
    from tests.conftest import agent_messages

    msgs = agent_messages(("search", {"q": 1}))
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"t{i}", "messages": msgs, "reference_outputs": msgs}) + "\n" for i in range(3000))
    )
    config = RunConfig.model_validate(
        {
            "source": {"path": str(corpus)},
            "evaluators": ["trajectory_match"],
            "sink": {"path": str(tmp_path / "out.jsonl")},
            "state_dir": str(tmp_path / "state"),
            "limits": {"batch_size": 50},
        }
    )
    stream = io.StringIO()
    progress = Progress(stream=stream, interval_s=0.0)
    report = shard.execute_sharded(config, origin="test", workers=2, progress=progress)
    assert report.exit_code == 0 and report.summary["counts"]["scored"] == 3000
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3000
    reads = [
        int(line.split()[2].replace(",", ""))
        for line in stream.getvalue().splitlines()
        if line.startswith("assay: read")
    ]
    assert reads and reads == sorted(reads) and max(reads) <= 3000
