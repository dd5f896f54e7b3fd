"""``assay report`` on results in S3 (moto's server on loopback): one run, ``--compare``, a trend
over ``dt=*/`` partitions, trajectories read back from an S3 source; the same numbers as the
same results read from a local directory."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.exceptions import ConfigError, ConnectorError
from assay.report import (
    build_run_report,
    build_trend,
    close_stores,
    compare_runs,
    expand_locations,
    iter_dead_letters,
    iter_rows,
    open_store,
    read_run_info,
)
from tests.support.s3_server import S3Server
from tests.unit.report.synth import write_run, write_source

REPO = Path(__file__).resolve().parents[3]
DAYS = (("2026-11-20", "c"), ("2026-11-21", "a"), ("2026-11-22", "b"))


def upload(client: Any, bucket: str, root: Path, prefix: str) -> None:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            client.put_object(Bucket=bucket, Key=prefix + p.relative_to(root).as_posix(), Body=p.read_bytes())


@pytest.fixture
def endpoint(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Report locations in S3 reach the test server through the standard AWS chain."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    yield s3_server.endpoint_url
    close_stores()


@pytest.fixture
def lake(tmp_path: Path, client: Any, bucket: str, endpoint: str) -> tuple[str, Path]:
    """Three nightly runs under ``s3://<bucket>/scores/dt=*/`` (and the same locally), their
    source records in S3, plus an object that is not a run."""
    src = write_source(tmp_path / "traces.jsonl", 300)
    client.put_object(Bucket=bucket, Key="traces/traces.jsonl", Body=src.read_bytes())
    s3_source = f"s3://{bucket}/traces/traces.jsonl"
    for day, salt in DAYS:
        local = tmp_path / "scores" / f"dt={day}"
        write_run(local, 300, salt=salt, source=s3_source, started_at=f"{day}T02:00:00+00:00")  # type: ignore[arg-type]
        upload(client, bucket, local, f"scores/dt={day}/")
    client.put_object(Bucket=bucket, Key="scores/README.txt", Body=b"not a run")
    return f"s3://{bucket}/scores", tmp_path / "scores"


def test_store_lists_opens_and_reads_like_a_directory(lake: tuple[str, Path]) -> None:
    s3, local = lake
    store = open_store(f"{s3}/dt=2026-11-21/")
    assert store.list("part-*.jsonl") == ["part-00000-00000.jsonl"]
    assert store.list("part-*.jsonl.gz") == ["part-00001-00000.jsonl.gz"]
    assert store.list("_dead_letter/dead-*.jsonl") == ["_dead_letter/dead-00000-00000.jsonl"]
    assert store.list("*.jsonl") == ["part-00000-00000.jsonl"]  # * does not cross /
    assert store.exists("_SUCCESS") and not store.exists("_nothing")
    assert list(iter_rows(store)) == list(iter_rows(open_store(str(local / "dt=2026-11-21"))))
    assert sum(1 for _ in iter_dead_letters(store)) == 9
    info = read_run_info(f"{s3}/dt=2026-11-21/_SUMMARY.json")
    assert info.complete and info.partition == "2026-11-21" and info.summary["counts"]["read"] > 0


def test_report_of_one_run_matches_the_local_report_with_trajectories(lake: tuple[str, Path]) -> None:
    s3, local = lake
    remote = build_run_report(f"{s3}/dt=2026-11-21/", worst=5)
    here = build_run_report(str(local / "dt=2026-11-21"), worst=5)
    assert remote.rows == here.rows == 300
    assert {k: (a.count, a.mean, a.pass_rate) for k, a in remote.keys.items()} == {
        k: (a.count, a.mean, a.pass_rate) for k, a in here.keys.items()
    }
    assert [w.trace_id for w in remote.worst] == [w.trace_id for w in here.worst]
    # the source records are in S3 too: the worst traces come with their trajectories
    assert all(w.trajectory is not None for w in remote.worst)


def test_compare_and_trend_over_partitions(lake: tuple[str, Path]) -> None:
    s3, local = lake
    locations = expand_locations([f"{s3}/dt=*/"])
    assert locations == [f"{s3}/dt={day}/" for day in sorted(d for d, _ in DAYS)]
    trend = build_trend(locations)
    here = build_trend(expand_locations([str(local / "dt=*")]))
    assert trend.labels == here.labels == ["2026-11-20", "2026-11-21", "2026-11-22"]
    assert trend.series("correctness", "pass_rate") == here.series("correctness", "pass_rate")
    cmp_remote = compare_runs(f"{s3}/dt=2026-11-22/", f"{s3}/dt=2026-11-21/", worst=10)
    cmp_local = compare_runs(str(local / "dt=2026-11-22"), str(local / "dt=2026-11-21"), worst=10)
    assert [f.trace_id for f in cmp_remote.flips] == [f.trace_id for f in cmp_local.flips]
    assert cmp_remote.flips  # the salts differ: some verdicts flipped


def test_errors_name_the_location(lake: tuple[str, Path], bucket: str) -> None:
    s3, _ = lake
    with pytest.raises(ConfigError, match="no results location matches"):
        expand_locations([f"{s3}/dt=1999-*/"])
    with pytest.raises(ConnectorError, match="no-such-bucket"):
        read_run_info("s3://no-such-bucket/scores/dt=2026-11-21/")
    assert read_run_info(f"s3://{bucket}/nothing/here/").summary == {}  # an empty prefix: no run there


def test_cli_report_single_compare_and_trend(lake: tuple[str, Path], endpoint: str, tmp_path: Path) -> None:
    s3, _ = lake
    env = {**os.environ, "PYTHONPATH": str(REPO), "AWS_ENDPOINT_URL": endpoint, "COLUMNS": "200"}

    def report(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "assay.cli", "report", *args],
            capture_output=True,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )

    one = report(f"{s3}/dt=2026-11-21/")
    assert one.returncode == 0, one.stderr
    assert "correctness" in one.stdout and "2026-11-21" in one.stdout

    html = tmp_path / "report.html"
    compared = report(f"{s3}/dt=2026-11-22/", "--compare", f"{s3}/dt=2026-11-21/", "--html", str(html))
    assert compared.returncode == 0, compared.stderr
    assert html.stat().st_size > 100_000 and "2026-11-22" in html.read_text()

    trend = report(f"{s3}/dt=*/")
    assert trend.returncode == 0, trend.stderr
    assert all(day[5:] in trend.stdout for day, _ in DAYS)  # the trend labels dates of one year MM-DD

    missing = report(f"{s3}/dt=1999-*/")
    assert missing.returncode == 2 and "no results location matches" in missing.stderr


def test_an_object_read_past_its_end_prints_no_aiohttp_stack_trace(
    client: Any, bucket: str, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Buffered readers read again at the end (every ``read()``/``readline()``): aiohttp logged
    "Multiple access to StreamReader in eof state" with a stack trace after the fifth such read."""
    from assay.connectors.s3_results import S3Reader

    client.put_object(Bucket=bucket, Key="o/lines.txt", Body=b"one\ntwo\n")
    with S3Reader() as reader:
        f = reader.open_object(bucket, "o/lines.txt")
        assert f.read() == b"one\ntwo\n"
        assert [f.read() for _ in range(10)] == [b""] * 10
        assert [f.readline() for _ in range(10)] == [b""] * 10
        f.close()
    assert not [r for r in caplog.records if "StreamReader" in r.getMessage()]
