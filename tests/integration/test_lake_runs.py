"""Delta Lake and Parquet runs end to end, through the real CLI: a day replaced by one commit, a
rerun and a killed run (kill -9) leave exactly one row per trace in that day and the other days
intact, a new evaluator adds a column, and the same against an S3 server (moto); Parquet in and
out on S3 and locally with --workers."""

from __future__ import annotations

import json
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
from deltalake import DeltaTable

from tests.support.lake import N, traces, write_parquet
from tests.support.runs import checkpointed_rows, slow_evaluator
from tests.support.s3_server import S3Server


def run_file(tmp_path: Path, sink: dict[str, Any], *, evaluators: list[Any] | None = None, **extra: Any) -> Path:
    cfg = {
        "source": {"path": "in/{{ ds }}/traces.parquet"},
        "evaluators": evaluators or ["trajectory_match:mode=unordered"],
        "sink": sink,
        "limits": {"batch_size": 10, "commit_interval_s": 0.2},
        **extra,
    }
    f = tmp_path / "nightly.yaml"
    f.write_text(json.dumps(cfg))
    return f


def cmd(f: Path, ds: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "assay.cli", "run", str(f), "--ds", ds, "-q", *extra]


def run(f: Path, ds: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd(f, ds, *extra), capture_output=True, text=True, timeout=300, cwd=f.parent)


def query(table: Any, sql: str) -> list[tuple[Any, ...]]:
    """DuckDB over the Delta table's current version (as table ``t``)."""
    con = duckdb.connect()
    con.register("t", table.to_pyarrow_table())
    rows: list[tuple[Any, ...]] = con.sql(sql).fetchall()
    return rows


def day_counts(table: Any) -> dict[str, tuple[int, int]]:
    """ds → (rows, distinct trace ids)."""
    return {ds: (n, d) for ds, n, d in query(table, "select ds, count(*), count(distinct trace_id) from t group by ds")}


@pytest.fixture
def days(tmp_path: Path) -> Path:
    for day in ("2026-11-21", "2026-11-22"):
        write_parquet(tmp_path / "in" / day / "traces.parquet", traces(day=day[-2:]))
    return tmp_path


def test_delta_days_replaced_by_one_commit_each_rerun_exact_other_days_intact(days: Path) -> None:
    f = run_file(days, {"type": "delta", "path": "lake/scores"})
    for day in ("2026-11-21", "2026-11-22"):
        assert run(f, day).returncode == 0
    table = days / "lake" / "scores"
    assert day_counts(DeltaTable(str(table))) == {"2026-11-21": (N, N), "2026-11-22": (N, N)}
    # a rerun of one day, with one more evaluator: that day replaced, a column added, the other day kept
    f = run_file(
        days, {"type": "delta", "path": "lake/scores"}, evaluators=["trajectory_match:mode=unordered", "exact_match"]
    )
    assert run(f, "2026-11-21").returncode == 0
    dt = DeltaTable(str(table))
    assert day_counts(dt) == {"2026-11-21": (N, N), "2026-11-22": (N, N)}
    assert "exact_match" in dt.schema().to_arrow().names
    ops = [h["operation"] for h in dt.history()]
    assert len(ops) == 3 and set(ops) == {"WRITE"}
    summary = json.loads((table / "_summaries" / "ds=2026-11-21" / "_SUMMARY.json").read_text())
    assert summary["counts"]["scored"] == N and summary["status"] == "ok"
    assert (table / "_summaries" / "ds=2026-11-21" / "_SUCCESS").exists()
    means = query(dt, "select avg(trajectory_unordered_match.score) from t where ds = '2026-11-21'")[0][0]
    assert means == pytest.approx(summary["evaluators"]["trajectory_unordered_match"]["mean"])
    run_ids = query(dt, "select ds, count(distinct run_id) from t group by ds")
    assert all(n == 1 for _, n in run_ids)


def test_delta_killed_run_commits_nothing_and_resumes_into_its_own_day(days: Path) -> None:
    (days / "slowmod.py").write_text(slow_evaluator(0.01))
    f = run_file(
        days,
        {"type": "delta", "path": "lake/scores"},
        evaluators=[{"name": "python", "params": {"function": "slowmod:slow"}}],
    )
    assert run(f, "2026-11-22").returncode == 0
    table = days / "lake" / "scores"
    before = DeltaTable(str(table)).version()
    since = time.time()
    proc = subprocess.Popen(cmd(f, "2026-11-21"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=days)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and checkpointed_rows(days, since) < 60:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert DeltaTable(str(table)).version() == before  # nothing committed
    assert day_counts(DeltaTable(str(table))) == {"2026-11-22": (N, N)}
    # the other day runs in between: its own checkpoint, not the killed day's
    assert run(f, "2026-11-22").returncode == 0
    assert day_counts(DeltaTable(str(table))) == {"2026-11-22": (N, N)}
    proc2 = run(f, "2026-11-21")
    assert proc2.returncode == 0, proc2.stderr
    assert day_counts(DeltaTable(str(table))) == {"2026-11-21": (N, N), "2026-11-22": (N, N)}
    summary = json.loads((table / "_summaries" / "ds=2026-11-21" / "_SUMMARY.json").read_text())
    assert summary["counts"]["scored"] == N


def test_parquet_to_parquet_killed_then_resumed_is_exact(days: Path) -> None:
    (days / "slowmod.py").write_text(slow_evaluator(0.01))
    f = run_file(
        days,
        {"path": "scores/dt={{ ds }}/", "format": "parquet", "max_rows_per_part": 70},
        evaluators=[{"name": "python", "params": {"function": "slowmod:slow"}}],
    )
    since = time.time()
    proc = subprocess.Popen(cmd(f, "2026-11-21"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=days)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and checkpointed_rows(days, since) < 80:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    out = days / "scores" / "dt=2026-11-21"
    assert not (out / "_SUCCESS").exists()
    done = run(f, "2026-11-21")
    assert done.returncode == 0, done.stderr
    rows = duckdb.sql(
        f"select count(*), count(distinct trace_id), count(distinct position) from '{out}/part-*.parquet'"
    )
    assert rows.fetchall()[0] == (N, N, N)
    assert (out / "_SUCCESS").exists() and not (out / "_staging").exists()
    sizes = [pq.ParquetFile(p).metadata.num_rows for p in sorted(out.glob("part-*.parquet"))]
    assert sizes == [70] * (N // 70) + ([N % 70] if N % 70 else [])  # cut as before the kill


def test_parquet_in_and_out_with_two_workers(days: Path) -> None:
    f = run_file(days, {"path": "scores/dt={{ ds }}/", "format": "parquet"})
    assert run(f, "2026-11-21", "--workers", "2").returncode == 0
    out = days / "scores" / "dt=2026-11-21"
    rows = duckdb.sql(f"select count(*), count(distinct trace_id) from '{out}/part-*.parquet'").fetchall()[0]
    assert rows == (N, N)
    assert len(list(out.glob("part-*.parquet"))) == 2 and (out / "_SUCCESS").exists()


@pytest.fixture(scope="module")
def moto() -> Any:
    server = S3Server(process=True).start()
    try:
        yield server
    finally:
        server.stop()


def test_s3_parquet_source_and_delta_table_against_moto(tmp_path: Path, moto: S3Server) -> None:
    client = moto.client()
    client.create_bucket(Bucket="lake")
    for day in ("2026-11-21", "2026-11-22"):
        local = tmp_path / f"{day}.parquet"
        write_parquet(local, traces(day=day[-2:]))
        for part in range(2):  # two objects per day under a prefix, plus a marker the reader skips
            rows = pq.read_table(local).slice(part * (N // 2), N // 2)
            sink = pa.BufferOutputStream()
            pq.write_table(rows, sink, row_group_size=40)
            client.put_object(
                Bucket="lake", Key=f"traces/ds={day}/part-{part}.parquet", Body=sink.getvalue().to_pybytes()
            )
        client.put_object(Bucket="lake", Key=f"traces/ds={day}/_SUCCESS", Body=b"")
    cfg = {
        "source": {"path": "s3://lake/traces/ds={{ ds }}/", "input_format": "parquet"},
        "evaluators": ["trajectory_match:mode=unordered"],
        "sink": {"type": "delta", "path": "s3://lake/scores"},
        "s3": {"endpoint_url": moto.endpoint_url},
        "limits": {"batch_size": 25},
    }
    f = tmp_path / "s3.yaml"
    f.write_text(json.dumps(cfg))
    for day in ("2026-11-21", "2026-11-22", "2026-11-21"):
        proc = run(f, day)
        assert proc.returncode == 0, proc.stderr
    opts = {
        "AWS_ENDPOINT_URL": moto.endpoint_url,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    dt = DeltaTable("s3://lake/scores", storage_options=opts)
    assert day_counts(dt) == {"2026-11-21": (N, N), "2026-11-22": (N, N)}
    body = client.get_object(Bucket="lake", Key="scores/_summaries/ds=2026-11-21/_SUMMARY.json")["Body"].read()
    assert json.loads(body)["counts"]["scored"] == N
    client.head_object(Bucket="lake", Key="scores/_summaries/ds=2026-11-21/_SUCCESS")


def test_an_s3_prefix_of_parquet_objects_is_detected_without_input_format(tmp_path: Path, moto: S3Server) -> None:
    import anyio

    from assay.connectors.parquet_detect import s3_holds_parquet
    from assay.connectors.s3_client import S3Config

    client = moto.client()
    client.create_bucket(Bucket="detect")
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(traces(40)), sink, row_group_size=10)
    client.put_object(Bucket="detect", Key="pq/part-0.parquet", Body=sink.getvalue().to_pybytes())
    client.put_object(Bucket="detect", Key="pq/_SUCCESS", Body=b"")
    client.put_object(Bucket="detect", Key="raw/blob-0", Body=sink.getvalue().to_pybytes())
    client.put_object(Bucket="detect", Key="js/t.jsonl", Body=b'{"id": "a"}\n')
    opts = S3Config(endpoint_url=moto.endpoint_url)
    assert anyio.run(s3_holds_parquet, ["s3://detect/pq/"], opts) is True
    assert anyio.run(s3_holds_parquet, ["s3://detect/raw/"], opts) is True  # no suffix: the PAR1 magic
    assert anyio.run(s3_holds_parquet, ["s3://detect/js/"], opts) is False
    cfg = {
        "source": {"path": "s3://detect/pq/"},
        "evaluators": ["trajectory_match:mode=unordered"],
        "sink": {"path": "out/", "format": "parquet"},
        "s3": {"endpoint_url": moto.endpoint_url},
    }
    f = tmp_path / "detect.yaml"
    f.write_text(json.dumps(cfg))
    proc = subprocess.run(
        [sys.executable, "-m", "assay.cli", "run", str(f), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    got = duckdb.sql(f"select count(distinct trace_id) from '{tmp_path}/out/part-*.parquet'").fetchall()
    assert got == [(40,)]


def test_an_export_shuffled_across_files_scored_by_two_workers_into_parquet_and_json(tmp_path: Path) -> None:
    """A LangSmith bulk export recorded by the SDKs, its runs shuffled across files: `assay run
    --workers 2` scores each trace once, and DuckDB over the Parquet parts gives the JSON sink's
    per-key means."""
    pytest.importorskip("langsmith")
    pytest.importorskip("langchain_core")
    from tests.support.sdk_exports import langsmith_schema, langsmith_sdk_export, write_shuffled_parquet

    rows, expected = langsmith_sdk_export(6, seed=12)
    write_shuffled_parquet(tmp_path / "export", rows, langsmith_schema(), files=3, seed=13)
    evaluators = ["tool_use:expected_tool=get_weather", "max_turns:max_turns=2"]
    for sink in ({"path": "pq/", "format": "parquet"}, {"path": "js/"}):
        f = run_file(tmp_path, sink, evaluators=evaluators)
        f.write_text(f.read_text().replace("in/{{ ds }}/traces.parquet", "export"))
        proc = run(f, "2026-11-21", "--workers", "2")
        assert proc.returncode == 0, proc.stderr
    js = [json.loads(line) for p in (tmp_path / "js").glob("part-*.jsonl") for line in p.read_text().splitlines()]
    assert sorted(r["trace_id"] for r in js) == sorted(expected)
    parts = f"{tmp_path / 'pq'}/part-*.parquet"
    assert duckdb.sql(f"select count(*), count(distinct trace_id) from '{parts}'").fetchall()[0] == (6, 6)
    for key in ("tool_use:get_weather", "max_turns"):
        scores = [r["results"][key]["score"] for r in js]
        (mean,) = duckdb.sql(f"select avg(\"{key}\".score) from '{parts}'").fetchall()[0]
        assert mean == pytest.approx(sum(scores) / len(scores))
    assert 0 < sum(r["results"]["tool_use:get_weather"]["score"] for r in js) < 6  # the scores tell traces apart


def test_delta_shards_then_merge_publish_the_day_in_one_commit(days: Path) -> None:
    """Two `--shard i/2` runs stage their rows beside the table (no commit), `assay merge
    --run-file` commits the day once; the same merge again commits nothing more."""
    f = run_file(days, {"type": "delta", "path": "lake/scores"}, gates={"trajectory_unordered_match": {"min_mean": 0}})
    assert run(f, "2026-11-22").returncode == 0  # another day, already in the table
    table = days / "lake" / "scores"
    before = DeltaTable(str(table)).version()
    for i in range(2):
        proc = run(f, "2026-11-21", "--shard", f"{i}/2")
        assert proc.returncode == 0, proc.stderr
        assert DeltaTable(str(table)).version() == before  # a shard alone never commits
    summaries = table / "_summaries" / "ds=2026-11-21"
    assert not (summaries / "_SUCCESS").exists()
    merge = [sys.executable, "-m", "assay.cli", "merge", "--run-file", str(f), "--ds", "2026-11-21", "-q"]
    proc = subprocess.run(merge, capture_output=True, text=True, timeout=300, cwd=days)
    assert proc.returncode == 0, proc.stderr
    dt = DeltaTable(str(table))
    assert dt.version() == before + 1  # one commit for the day
    assert day_counts(dt) == {"2026-11-21": (N, N), "2026-11-22": (N, N)}
    summary = json.loads((summaries / "_SUMMARY.json").read_text())
    assert summary["counts"]["scored"] == N and summary["status"] == "ok"
    assert summary["delta"]["version"] == before + 1
    assert (summaries / "_SUCCESS").exists()
    assert not (table / "_staging" / "ds=2026-11-21").exists()
    means = query(dt, "select avg(trajectory_unordered_match.score) from t where ds = '2026-11-21'")[0][0]
    assert means == pytest.approx(summary["evaluators"]["trajectory_unordered_match"]["mean"])
    proc = subprocess.run(merge, capture_output=True, text=True, timeout=300, cwd=days)
    assert proc.returncode == 0, proc.stderr
    assert DeltaTable(str(table)).version() == before + 1
    assert day_counts(DeltaTable(str(table)))["2026-11-21"] == (N, N)


def test_delta_shards_then_merge_on_s3_against_moto(tmp_path: Path, moto: S3Server) -> None:
    """The shards and the merge share only the table's bucket (each shard its own state dir)."""
    client = moto.client()
    client.create_bucket(Bucket="shards")
    write_parquet(tmp_path / "in" / "2026-11-21" / "traces.parquet", traces(day="21"))
    cfg = {
        "source": {"path": "in/{{ ds }}/traces.parquet"},
        "evaluators": ["trajectory_match:mode=unordered"],
        "sink": {"type": "delta", "path": "s3://shards/scores"},
        "s3": {"endpoint_url": moto.endpoint_url},
        "limits": {"batch_size": 25},
    }
    f = tmp_path / "s3.yaml"
    f.write_text(json.dumps(cfg))
    for i in range(2):
        proc = run(f, "2026-11-21", "--shard", f"{i}/2", "--set", f"state_dir=.state-{i}")
        assert proc.returncode == 0, proc.stderr
    merge = [sys.executable, "-m", "assay.cli", "merge", "--run-file", str(f), "--ds", "2026-11-21", "-q"]
    proc = subprocess.run(merge, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    opts = {
        "AWS_ENDPOINT_URL": moto.endpoint_url,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    dt = DeltaTable("s3://shards/scores", storage_options=opts)
    assert dt.version() == 0 and day_counts(dt) == {"2026-11-21": (N, N)}
    client.head_object(Bucket="shards", Key="scores/_summaries/ds=2026-11-21/_SUCCESS")
    assert client.list_objects_v2(Bucket="shards", Prefix="scores/_staging/").get("KeyCount") == 0
