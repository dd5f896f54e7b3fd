"""``assay run`` to Parquet on S3 (moto on loopback), through the real CLI: the parts, names and
schema of a local Parquet output for the same input (a prefix and one ``.parquet`` object, wide and
long), the JSON sink's means, dead letters as JSON lines under ``_dead_letter/``, ``assay report``
over the prefix; a seeded lineage of kill -9, ``--fresh`` and ``--workers`` 1-3 that ends with
exactly one row per trace and ``_SUCCESS``, with ``_SUCCESS`` never beside anything else on the
way; a kill while the parts are uploaded; ``--shard`` runs on two machines; a full state dir."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.disk import small_tmpfs
from tests.support.lake import N, traces
from tests.support.runs import checkpointed_rows, slow_evaluator
from tests.support.s3_server import S3Server

DS = "2026-11-21"
BAD_LINES = 2
EVALUATORS = ["trajectory_match:mode=unordered", "exact_match"]
FREE_KB = 40  # the staged rows of the first commits fit, not all of them


def corpus(root: Path) -> None:
    """N traces as JSON lines, and BAD_LINES lines that are no JSON (dead letters)."""
    lines = [json.dumps(t) for t in traces()]
    lines[10:10] = ["not json {"] * BAD_LINES
    (root / "in").mkdir(exist_ok=True)
    (root / "in" / "traces.jsonl").write_text("\n".join(lines) + "\n")


def run_file(root: Path, server: S3Server, sink: dict[str, Any], name: str, **extra: Any) -> Path:
    cfg = {
        "run_id": "nightly",  # the same run id for every sink compared
        "source": {"path": "in/traces.jsonl"},
        "evaluators": EVALUATORS,
        "sink": sink,
        "s3": {"endpoint_url": server.endpoint_url},
        "limits": {"batch_size": 10, "commit_interval_s": 0.2},
        **extra,
    }
    f = root / f"{name}.yaml"
    f.write_text(json.dumps(cfg))
    return f


def cmd(f: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "assay.cli", "run", str(f), "--ds", DS, "-q", *extra]


def run(f: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd(f, *extra), capture_output=True, text=True, timeout=300, cwd=f.parent)


def keys(client: Any, bucket: str, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def body(client: Any, bucket: str, key: str) -> bytes:
    data: bytes = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return data


def table(client: Any, bucket: str, key: str) -> pa.Table:
    return pq.read_table(pa.BufferReader(body(client, bucket, key)))


def parts(client: Any, bucket: str, prefix: str) -> dict[str, pa.Table]:
    """The Parquet parts directly under ``prefix``, by name."""
    names = [k for k in keys(client, bucket, prefix + "part-") if "/" not in k[len(prefix) :]]
    return {k[len(prefix) :]: table(client, bucket, k) for k in names}


def comparable(t: pa.Table) -> pa.Table:
    """A table as compared across sinks: sorted by trace and key (the run id is the same)."""
    order = [("trace_id", "ascending")] + ([("key", "ascending")] if "key" in t.column_names else [])
    return t.sort_by(order)


def json_rows(client: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    out = []
    for k in keys(client, bucket, prefix + "part-"):
        out += [json.loads(line) for line in body(client, bucket, k).splitlines() if line]
    return out


@pytest.mark.parametrize("layout", ["wide", "long"])
def test_parquet_on_s3_is_the_local_output_with_the_json_sinks_means(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str, layout: str
) -> None:
    corpus(tmp_path)
    parquet = {"format": "parquet", "layout": layout, "max_rows_per_part": 70}
    runs = {
        "s3_dir": {"path": f"s3://{bucket}/scores/dt={{{{ ds }}}}/", **parquet},
        "local_dir": {"path": "local/dt={{ ds }}/", **parquet},
        "s3_file": {"path": f"s3://{bucket}/files/{{{{ ds }}}}.parquet", "layout": layout},
        "local_file": {"path": "files/{{ ds }}.parquet", "layout": layout},
        "s3_json": {"path": f"s3://{bucket}/json/dt={{{{ ds }}}}/"},
    }
    for name, sink in runs.items():
        proc = run(run_file(tmp_path, s3_server, sink, name))
        assert proc.returncode == 0, (name, proc.stderr)

    # a prefix: the local output's part names, schema and rows; _SUMMARY.json, then _SUCCESS
    prefix = f"scores/dt={DS}/"
    local = tmp_path / "local" / f"dt={DS}"
    remote = parts(client, bucket, prefix)
    names = sorted(p.name for p in local.glob("part-*.parquet"))
    rows_out = N * (len(EVALUATORS) if layout == "long" else 1)
    assert sorted(remote) == names == [f"part-00000-{i:05d}.parquet" for i in range(-(-rows_out // 70))]
    for name in names:
        here = pq.read_table(local / name)
        assert remote[name].schema == here.schema
        assert comparable(remote[name]).equals(comparable(here))
    listing = keys(client, bucket, prefix)
    assert f"{prefix}_SUCCESS" in listing and f"{prefix}_SUMMARY.json" in listing
    assert not [k for k in listing if "_staging" in k]
    summary = json.loads(body(client, bucket, f"{prefix}_SUMMARY.json"))
    assert summary["status"] == "ok" and summary["counts"]["scored"] == N
    assert summary["counts"]["dead_letters"] == BAD_LINES
    dead = keys(client, bucket, f"{prefix}_dead_letter/")
    assert dead == [f"{prefix}_dead_letter/dead-00000-00000.jsonl"]
    assert [json.loads(x)["stage"] for x in body(client, bucket, dead[0]).splitlines()] == ["parse"] * BAD_LINES

    report = subprocess.run(
        [sys.executable, "-m", "assay.cli", "report", f"s3://{bucket}/{prefix}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AWS_ENDPOINT_URL": s3_server.endpoint_url},
    )
    assert report.returncode == 0, report.stderr  # it reads the parts (long rows joined: one per trace)
    assert f"rows {N} " in report.stdout

    # one object: the local file's schema and rows; its summary beside it, no _SUCCESS
    single = table(client, bucket, f"files/{DS}.parquet")
    here = pq.read_table(tmp_path / "files" / f"{DS}.parquet")
    assert single.schema == here.schema and comparable(single).equals(comparable(here))
    beside = keys(client, bucket, "files/")
    assert f"files/{DS}.parquet._SUMMARY.json" in beside and not [k for k in beside if k.endswith("_SUCCESS")]
    assert keys(client, bucket, f"files/_dead_letter/{DS}/") == [f"files/_dead_letter/{DS}/dead-00000-00000.jsonl"]
    assert not list((tmp_path / ".assay" / "lake").glob("*/*"))  # the local staging is gone

    # one row per trace, and the JSON sink's (and the summary's) means
    con = duckdb.connect()
    con.register("t", pa.concat_tables(remote.values()))
    con.register("f", single)
    if layout == "wide":
        sql = "select count(*), count(distinct trace_id), avg({k}.score), avg({k}.passed::int) from {t}"
    else:
        sql = "select count(*), count(distinct trace_id), avg(score), avg(passed::int) from {t} where key = '{k}'"
    rows = json_rows(client, bucket, f"json/dt={DS}/")
    assert len(rows) == N
    for key in ("trajectory_unordered_match", "exact_match"):
        scores = [r["results"][key]["score"] for r in rows]
        mean = sum(scores) / len(scores)
        for t in ("t", "f"):
            n, distinct, got, passed = con.sql(sql.format(k=key, t=t)).fetchall()[0]
            assert (n, distinct) == (N, N)
            assert got == pytest.approx(mean)
            assert got == pytest.approx(summary["evaluators"][key]["mean"], abs=1e-6)  # the summary rounds
            assert passed == pytest.approx(summary["evaluators"][key]["pass_rate"], abs=1e-6)


def whole_or_not(client: Any, bucket: str, prefix: str) -> bool:
    """``_SUCCESS`` only beside a whole output: exactly one row per trace and an ok summary."""
    if f"{prefix}_SUCCESS" not in keys(client, bucket, prefix + "_SUCCESS"):
        return False
    ids = [i for t in parts(client, bucket, prefix).values() for i in t.column("trace_id").to_pylist()]
    assert sorted(ids) == sorted(t["id"] for t in traces()), f"{len(ids)} rows beside _SUCCESS"
    summary = json.loads(body(client, bucket, f"{prefix}_SUMMARY.json"))
    assert summary["status"] == "ok" and summary["counts"]["scored"] == N
    dead = keys(client, bucket, f"{prefix}_dead_letter/dead-")
    assert sum(len(body(client, bucket, k).splitlines()) for k in dead) == BAD_LINES
    return True


def kill(f: Path, after_rows: int, *extra: str) -> None:
    """Start the run, kill -9 it once ``after_rows`` rows are durable (or it ended), wait."""
    since = time.time()
    proc = subprocess.Popen(cmd(f, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=f.parent)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and checkpointed_rows(f.parent, since) < after_rows:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)


def test_killed_fresh_and_workers_lineage_ends_with_one_row_per_trace(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str
) -> None:
    """Two rounds of three runs in a row, each with a worker count from a seeded shuffle of 1-3:
    killed, killed, completed. The second round starts over (``--fresh``) beside the whole output
    of the first: killed runs leave that output as it was; the first round's kills leave no
    ``_SUCCESS``."""
    corpus(tmp_path)
    (tmp_path / "slowmod.py").write_text(slow_evaluator(0.01))
    sink = {"path": f"s3://{bucket}/scores/dt={{{{ ds }}}}/", "format": "parquet", "max_rows_per_part": 40}
    f = run_file(
        tmp_path, s3_server, sink, "lineage", evaluators=[{"name": "python", "params": {"function": "slowmod:slow"}}]
    )
    prefix = f"scores/dt={DS}/"
    rng = random.Random(20261121)
    for round_ in range(2):
        first, second, last = rng.sample(["1", "2", "3"], 3)
        fresh = ("--fresh",) if round_ else ()
        kill(f, rng.randrange(40, N // 2), "--workers", first, "--wait-lock", "60", *fresh)
        assert whole_or_not(client, bucket, prefix) == bool(round_)  # no _SUCCESS, or the earlier whole output
        kill(f, rng.randrange(N // 2, N), "--workers", second, "--wait-lock", "60")
        whole_or_not(client, bucket, prefix)  # killed late it may have published, or be publishing
        proc = run(f, "--workers", last, "--wait-lock", "60")
        assert proc.returncode == 0, proc.stderr
        assert whole_or_not(client, bucket, prefix)
        assert not [k for k in keys(client, bucket, prefix) if "_staging" in k]
        assert not list((tmp_path / ".assay" / "lake").glob("*/*"))


def test_a_run_killed_while_publishing_leaves_no_success_and_its_resume_publishes_exactly(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str
) -> None:
    corpus(tmp_path)
    sink = {"path": f"s3://{bucket}/scores/dt={{{{ ds }}}}/", "format": "parquet", "max_rows_per_part": 2}
    f = run_file(tmp_path, s3_server, sink, "publish")
    assert run(f).returncode == 0
    prefix = f"scores/dt={DS}/"
    assert whole_or_not(client, bucket, prefix) and len(parts(client, bucket, prefix)) == N // 2
    # one row per part now (the run starts over): killed once its parts are being uploaded
    one = ("--set", "sink.max_rows_per_part=1")
    proc = subprocess.Popen(cmd(f, *one), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    newer = f"{prefix}part-00000-{N // 2:05d}.parquet"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not keys(client, bucket, newer):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and keys(client, bucket, newer)  # it was uploading
    assert not whole_or_not(client, bucket, prefix)
    done = run(f, *one)  # the resume: nothing left to read, the same output published again
    assert done.returncode == 0, done.stderr
    assert whole_or_not(client, bucket, prefix)
    assert sorted(parts(client, bucket, prefix)) == [f"part-00000-{i:05d}.parquet" for i in range(N)]


def test_shards_on_two_machines_each_replace_their_own_parts(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str
) -> None:
    """``--shard i/N`` runs with their own state dirs (two machines): each uploads its shard's parts
    and summary, and leaves the other shard's parts; no ``_SUCCESS`` (``assay merge`` decides)."""
    corpus(tmp_path)
    sink = {"path": f"s3://{bucket}/scores/dt={{{{ ds }}}}/", "format": "parquet"}
    f = run_file(tmp_path, s3_server, sink, "shards")
    for i in range(2):
        for _ in range(2):  # a rerun of a shard replaces only its own parts
            proc = run(f, "--shard", f"{i}/2", "--set", f"state_dir=machine{i}")
            assert proc.returncode == 0, proc.stderr
    prefix = f"scores/dt={DS}/"
    got = parts(client, bucket, prefix)
    assert sorted(got) == ["part-00000-00000.parquet", "part-00001-00000.parquet"]
    ids = [i for t in got.values() for i in t.column("trace_id").to_pylist()]
    assert sorted(ids) == sorted(t["id"] for t in traces())
    listing = keys(client, bucket, prefix)
    assert f"{prefix}_SUMMARY.shard-0-of-2.json" in listing and f"{prefix}_SUMMARY.shard-1-of-2.json" in listing
    assert f"{prefix}_SUCCESS" not in listing


def test_a_full_state_dir_fails_clearly_changes_nothing_on_s3_and_the_rerun_is_exact(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str
) -> None:
    """The rows are staged under ``state_dir``: when it fills up the run fails (exit 1, the path and
    "no space left on device"), S3 holds no part and no ``_SUCCESS``; with room again, the same
    command ends whole."""
    corpus(tmp_path)
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * ((1 << 20) - (FREE_KB << 10)))
        sink = {"path": f"s3://{bucket}/scores/dt={{{{ ds }}}}/", "format": "parquet"}
        f = run_file(tmp_path, s3_server, sink, "full", state_dir=str(disk / "state"))
        proc = run(f)
        assert proc.returncode == 1, proc.stderr
        assert "no space left on device" in proc.stderr and str(disk) in proc.stderr and "Traceback" not in proc.stderr
        prefix = f"scores/dt={DS}/"
        assert not parts(client, bucket, prefix) and not whole_or_not(client, bucket, prefix)
        filler.unlink()
        done = run(f)
        assert done.returncode == 0, done.stderr
        assert whole_or_not(client, bucket, prefix)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_score_to_one_parquet_object_with_aws_endpoint_url(
    tmp_path: Path, s3_server: S3Server, client: Any, bucket: str, workers: str
) -> None:
    """No ``s3:`` block: ``AWS_ENDPOINT_URL`` finds the store; a ``.parquet`` key is one object."""
    corpus(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "assay.cli", "score", "in/traces.jsonl", "-e", "exact_match",
         "-o", f"s3://{bucket}/adhoc/scores.parquet", "-q", "--workers", workers],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
        env={**os.environ, "AWS_ENDPOINT_URL": s3_server.endpoint_url},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = table(client, bucket, "adhoc/scores.parquet")
    assert got.num_rows == N == len(set(got.column("trace_id").to_pylist()))
    assert "exact_match" in got.column_names
    assert keys(client, bucket, "adhoc/_dead_letter/scores/")  # the bad lines, as JSON lines
    assert "adhoc/scores.parquet._SUMMARY.json" in keys(client, bucket, "adhoc/")
