"""Merging the shards' part files into one output file (``--workers N`` with a file sink)."""

from __future__ import annotations

import gzip
import os
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


def test_concat_keeps_shard_order_and_moves_the_first_part(tmp_path: Path) -> None:
    contents = [b'{"a": 1}\n' * 1000, b'{"b": 2}\n' * 3000, b"", b'{"c": 3}\n']
    ps = parts(tmp_path, contents)
    target = tmp_path / "out" / "results.jsonl"
    shard._concat(ps, target)
    assert target.read_bytes() == b"".join(contents)
    assert not ps[0].exists()  # renamed into place, not copied
    assert not list(target.parent.glob(".*.tmp"))


def test_concat_of_gzip_parts_is_one_valid_stream(tmp_path: Path) -> None:
    ps = parts(tmp_path, [gzip.compress(b"x\n" * 10), gzip.compress(b"y\n" * 5)])
    target = tmp_path / "out.jsonl.gz"
    shard._concat(ps, target)
    assert gzip.decompress(target.read_bytes()) == b"x\n" * 10 + b"y\n" * 5


def test_concat_without_rename_or_kernel_copy_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_replace = os.replace

    def replace(src: object, dst: object) -> None:
        if "scratch" in str(src):
            raise OSError(18, "Invalid cross-device link")
        real_replace(src, dst)  # type: ignore[arg-type]

    def no_copy_file_range(*args: object) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(shard.os, "replace", replace)
    monkeypatch.setattr(shard.os, "copy_file_range", no_copy_file_range)
    contents = [b"first\n" * 100, b"second\n" * 100]
    ps = parts(tmp_path, contents)
    target = tmp_path / "out.jsonl"
    shard._concat(ps, target)
    assert target.read_bytes() == b"".join(contents)
    assert ps[0].exists()  # copied, not moved


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
