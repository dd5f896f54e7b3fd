"""``assay run`` and ``assay score`` from S3 to S3 against a real S3 server (moto on loopback):
20 gzip objects under a dated prefix, ``_SUCCESS`` last, identical keys on a rerun, no
``_SUCCESS`` after a killed run, and an exact output after the resume."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import checkpointed_rows, slow_evaluator
from tests.support.s3_server import S3Server

N_OBJECTS = 20
PER_OBJECT = 40
SLOW = slow_evaluator(0.01)


def _upload(client: Any, bucket: str) -> None:
    for o in range(N_OBJECTS):
        lines = [
            json.dumps({"id": f"t{o}-{i}", "outputs": f"a{i}", "reference_outputs": f"a{i}"}) for i in range(PER_OBJECT)
        ]
        body = gzip.compress(("\n".join(lines) + "\n").encode())
        client.put_object(Bucket=bucket, Key=f"traces/dt=2026-11-21/part-{o:03d}.jsonl.gz", Body=body)


def _run_file(tmp_path: Path, server: S3Server, bucket: str, evaluator: dict[str, Any], **sink: Any) -> Path:
    cfg = {
        "run_id": "nightly",
        "source": {"path": f"s3://{bucket}/traces/dt={{{{ ds }}}}/"},
        "evaluators": [evaluator],
        "sink": {"path": f"s3://{bucket}/scores/dt={{{{ ds }}}}/", "compression": "gzip", **sink},
        "s3": {"endpoint_url": server.endpoint_url},
        "limits": {"batch_size": 10, "commit_interval_s": 0.2},
    }
    f = tmp_path / "nightly.yaml"
    f.write_text(json.dumps(cfg))
    return f


def _objects(client: Any, bucket: str, prefix: str) -> dict[str, dict[str, Any]]:
    listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"]: o for o in listing}


def _rows(client: Any, bucket: str) -> list[dict[str, Any]]:
    out = []
    for key in sorted(_objects(client, bucket, "scores/dt=2026-11-21/part-")):
        data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        data = gzip.decompress(data) if key.endswith(".gz") else data
        out += [json.loads(x) for x in data.splitlines() if x]
    return out


def _cli(f: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "assay.cli", "run", str(f), "--ds", "2026-11-21", "-q", *args]


def test_s3_to_s3_run_success_last_and_the_same_rows_on_a_rerun(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str
) -> None:
    _upload(client, bucket)
    f = _run_file(tmp_path, s3_server, bucket, {"name": "exact_match"})
    proc = subprocess.run(_cli(f), capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = _objects(client, bucket, "scores/dt=2026-11-21/")
    assert "scores/dt=2026-11-21/_SUCCESS" in first and "scores/dt=2026-11-21/_SUMMARY.json" in first
    parts = [k for k in first if "/part-" in k]
    assert parts and all(
        first[k]["LastModified"] <= first["scores/dt=2026-11-21/_SUCCESS"]["LastModified"] for k in parts
    )
    rows = _rows(client, bucket)
    assert len(rows) == N_OBJECTS * PER_OBJECT == len({r["trace_id"] for r in rows})

    proc = subprocess.run(_cli(f), capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    again = _objects(client, bucket, "scores/dt=2026-11-21/")
    # the same rows under deterministic keys (a part ends at each commit: how many depends on timing)
    keys = sorted(k for k in again if "/part-" in k)
    assert keys == [f"scores/dt=2026-11-21/part-00000-{i:05d}.jsonl.gz" for i in range(len(keys))]
    key = json.dumps
    assert sorted(map(key, _rows(client, bucket))) == sorted(map(key, rows))
    summary = json.loads(client.get_object(Bucket=bucket, Key="scores/dt=2026-11-21/_SUMMARY.json")["Body"].read())
    assert summary["status"] == "ok" and summary["counts"]["scored"] == N_OBJECTS * PER_OBJECT


def test_s3_run_killed_midway_leaves_no_success_and_resumes_exactly(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str
) -> None:
    _upload(client, bucket)
    (tmp_path / "slowmod.py").write_text(SLOW)
    evaluator = {"name": "python", "params": {"function": "slowmod:slow"}}
    f = _run_file(tmp_path, s3_server, bucket, evaluator, max_rows_per_part=100)
    assert subprocess.run(_cli(f), capture_output=True, timeout=180, cwd=tmp_path).returncode == 0
    whole = sorted(json.dumps(r) for r in _rows(client, bucket))
    proc = subprocess.Popen(_cli(f, "--fresh"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and checkpointed_rows(tmp_path) < 200:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    # a start-over beside a whole output stages its parts: that output stays, _SUCCESS and all
    assert "scores/dt=2026-11-21/_SUCCESS" in _objects(client, bucket, "scores/")
    assert sorted(json.dumps(r) for r in _rows(client, bucket)) == whole
    assert _objects(client, bucket, "scores/dt=2026-11-21/_staging/part-")
    proc2 = subprocess.run(_cli(f), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc2.returncode == 0, proc2.stderr
    rows = _rows(client, bucket)
    assert len(rows) == N_OBJECTS * PER_OBJECT == len({r["trace_id"] for r in rows})
    assert "scores/dt=2026-11-21/_SUCCESS" in _objects(client, bucket, "scores/")
    assert not _objects(client, bucket, "scores/dt=2026-11-21/_staging/")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_score_s3_to_s3_with_aws_endpoint_url(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str, workers: str
) -> None:
    _upload(client, bucket)
    env = {**os.environ, "AWS_ENDPOINT_URL": s3_server.endpoint_url}
    proc = subprocess.run(
        [sys.executable, "-m", "assay.cli", "score", f"s3://{bucket}/traces/dt=2026-11-21/*.jsonl.gz",
         "-e", "exact_match", "-o", f"s3://{bucket}/scores/dt=2026-11-21/", "-q", "--workers", workers],
        capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = _rows(client, bucket)
    assert len(rows) == N_OBJECTS * PER_OBJECT == len({r["trace_id"] for r in rows})
    assert "scores/dt=2026-11-21/_SUCCESS" in _objects(client, bucket, "scores/")


def test_s3_progress_is_durable_every_commit_interval(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str
) -> None:
    """Issue 17: without max_rows_per_part the S3 sink still commits every commit_interval_s (a
    small part object per commit), so a kill -9 keeps what was committed and the resume is exact."""
    _upload(client, bucket)
    (tmp_path / "slowmod.py").write_text(SLOW)
    f = _run_file(tmp_path, s3_server, bucket, {"name": "python", "params": {"function": "slowmod:slow"}})
    since = time.time()
    proc = subprocess.Popen(_cli(f), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and checkpointed_rows(tmp_path, since) < 200:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    kept = _rows(client, bucket)
    assert len(kept) >= 200 and len(kept) == len({r["trace_id"] for r in kept})
    assert "scores/dt=2026-11-21/_SUCCESS" not in _objects(client, bucket, "scores/")
    proc2 = subprocess.run(_cli(f), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc2.returncode == 0, proc2.stderr
    rows = _rows(client, bucket)
    assert len(rows) == N_OBJECTS * PER_OBJECT == len({r["trace_id"] for r in rows})
    assert {r["trace_id"] for r in kept} <= {r["trace_id"] for r in rows}


def test_shards_on_two_machines_write_to_s3_and_merge_reads_the_prefix(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str
) -> None:
    """``--shard i/2`` runs with their own state dirs (two machines) write their parts and shard
    summaries under one S3 prefix; ``assay merge --run-file`` merges them there: one
    ``_SUMMARY.json``, the gate applied once, ``_SUCCESS`` only when every shard is whole."""
    _upload(client, bucket)
    f = _run_file(tmp_path, s3_server, bucket, {"name": "exact_match"})
    prefix = "scores/dt=2026-11-21/"

    def merge() -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "assay.cli", "merge", "--run-file", str(f), "--ds", "2026-11-21", "-q"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path)

    for i in (0, 1):
        if i == 1:  # one shard alone: not whole, no _SUCCESS
            half = merge()
            assert half.returncode == 1 and "shards without a summary: 1/2" in half.stderr, half.stderr
            assert f"{prefix}_SUCCESS" not in _objects(client, bucket, prefix)
        shard = _cli(f, "--shard", f"{i}/2", "--set", f"state_dir={tmp_path / f'machine-{i}'}")
        proc = subprocess.run(shard, capture_output=True, text=True, timeout=180, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    objects = _objects(client, bucket, prefix)
    assert {f"{prefix}_SUMMARY.shard-0-of-2.json", f"{prefix}_SUMMARY.shard-1-of-2.json"} <= set(objects)
    done = merge()
    assert done.returncode == 0, done.stderr
    objects = _objects(client, bucket, prefix)
    assert f"{prefix}_SUCCESS" in objects
    summary = json.loads(client.get_object(Bucket=bucket, Key=f"{prefix}_SUMMARY.json")["Body"].read())
    assert summary["status"] == "ok" and summary["shards"]["present"] == [0, 1]
    assert summary["counts"]["scored"] == N_OBJECTS * PER_OBJECT
    rows = _rows(client, bucket)
    assert sorted(r["trace_id"] for r in rows) == sorted({r["trace_id"] for r in rows})
    assert len(rows) == N_OBJECTS * PER_OBJECT
