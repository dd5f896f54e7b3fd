"""Reading a results location: stores, compressed parts, summaries, partitions."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
import zstandard

from assay.exceptions import ConfigError
from assay.report import LocalStore, expand_locations, iter_dead_letters, iter_rows, open_store, read_run_info
from assay.report.store import register_store
from tests.unit.report.synth import write_run


def test_rows_from_plain_gzip_and_zstd_parts(tmp_path: Path) -> None:
    rows = [{"trace_id": f"t{i}", "results": {}} for i in range(6)]
    lines = [orjson.dumps(r) + b"\n" for r in rows]
    (tmp_path / "part-00000-00000.jsonl").write_bytes(b"".join(lines[:2]) + b"\n")  # a blank line is skipped
    (tmp_path / "part-00001-00000.jsonl.gz").write_bytes(gzip.compress(b"".join(lines[2:4])))
    (tmp_path / "part-00002-00000.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(b"".join(lines[4:])))
    (tmp_path / "notes.jsonl").write_bytes(lines[0])  # not a part
    got = [r["trace_id"] for r in iter_rows(LocalStore(str(tmp_path)))]
    assert got == [f"t{i}" for i in range(6)]


def test_a_broken_row_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "part-00000.jsonl").write_bytes(b'{"trace_id": "a"}\n{oops\n')
    with pytest.raises(ConfigError, match=r"part-00000.jsonl:2"):
        list(iter_rows(LocalStore(str(tmp_path))))


def test_run_info_reads_summary_partition_and_success(tmp_path: Path) -> None:
    loc = tmp_path / "results" / "dt=2026-11-21"
    summary = write_run(loc, 30)
    info = read_run_info(str(loc))
    assert info.summary["run_id"] == summary["run_id"]
    assert info.complete and info.partition == "2026-11-21" and info.label == "2026-11-21"
    assert info.thresholds() == dict.fromkeys(summary["evaluators"], 0.5)
    assert sum(1 for _ in iter_dead_letters(info.store)) == 9
    # the _SUMMARY.json path names the same location
    assert read_run_info(str(loc / "_SUMMARY.json")).location == str(loc)


def test_run_without_summary_is_labelled_by_its_directory(tmp_path: Path) -> None:
    write_run(tmp_path / "nightly", 5, summary=False)
    info = read_run_info(str(tmp_path / "nightly"))
    assert info.summary == {} and not info.complete and info.label == "nightly"


def test_locations_expand_globs_in_order_and_reject_unknown(tmp_path: Path) -> None:
    for day in ("2026-11-22", "2026-11-20", "2026-11-21"):
        (tmp_path / f"dt={day}").mkdir()
    got = expand_locations([str(tmp_path / "dt=*")])
    assert [Path(p).name for p in got] == ["dt=2026-11-20", "dt=2026-11-21", "dt=2026-11-22"]
    with pytest.raises(ConfigError, match="no results directory"):
        expand_locations([str(tmp_path / "nothing-*")])
    with pytest.raises(ConfigError, match="not a results directory"):
        open_store(str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="no reader for gs://"):
        open_store("gs://bucket/results")


def test_a_registered_scheme_reads_through_its_store(tmp_path: Path) -> None:
    write_run(tmp_path / "real", 12)

    class Prefixed(LocalStore):
        """A stand-in remote store: maps mem://NAME to a local directory."""

        def __init__(self, location: str) -> None:
            super().__init__(str(tmp_path / location.removeprefix("mem://")))
            self.location = location

    register_store("mem", Prefixed)
    info = read_run_info("mem://real")
    assert info.location == "mem://real" and info.summary["counts"]["scored"] == 12
    assert sum(1 for _ in iter_rows(info.store)) == 12
