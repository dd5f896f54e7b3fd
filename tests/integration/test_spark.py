"""The Spark integration scores as ``assay run`` does: a local Spark (``local[2]``, one session for
the module) reads a Delta table's current Parquet files (as ``deltalake`` lists them: Spark's Delta
reader needs the delta-spark jars) and scores them on its executors with
:mod:`assay.integrations.spark`: the same values as ``assay run`` on the same files, a judge whose
rate budget two executors share through Redis, dead letters and gates with ``assay run``'s exit
codes, and a day of a Delta table written through the Delta sink."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.testing.judge_server import JudgeServerThread
from tests.conftest import agent_messages
from tests.support.redis_server import RedisServer

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")

ROOT = Path(__file__).resolve().parents[2]
N = 30

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    import shutil

    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (.ci/run installs default-jre-headless)")
    from pyspark.sql import SparkSession

    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    session = (
        SparkSession.builder.master("local[2]")
        .appName("assay-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.executorEnv.PYTHONPATH", str(ROOT))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def _rows(bad: int = 0, *, native: bool = False) -> list[dict[str, Any]]:
    """N traces: a third whose reference asks for one call more; ``bad`` more rows that are no
    trace. Messages as JSON text, or (``native``) as Arrow lists of message structs."""
    encode: Any = (lambda m: m) if native else json.dumps
    rows: list[dict[str, Any]] = []
    for i in range(N):
        calls = [("search", {"q": f"q{i}"}), ("fetch", {"id": str(i)})]
        ref = calls if i % 3 else [*calls, ("submit", {"id": str(i)})]
        rows.append(
            {
                "id": f"t{i}",
                "messages": encode(agent_messages(*calls, final=f"answer {i}")),
                "reference": encode(agent_messages(*ref, final=f"answer {i}")),
            }
        )
    rows.extend({"id": f"bad{j}", "messages": "not a trace", "reference": None} for j in range(bad))
    return rows


def _delta_table(path: Path, rows: list[dict[str, Any]]) -> list[str]:
    """A Delta table of ``rows`` (two commits: the second's rows replace nothing) → its current files."""
    half = len(rows) // 2
    deltalake.write_deltalake(str(path), pa.Table.from_pylist(rows[:half]))
    deltalake.write_deltalake(str(path), pa.Table.from_pylist(rows[half:]), mode="append")
    return [str(u) for u in deltalake.DeltaTable(str(path)).file_uris()]


def _assay_run(run_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", "run", str(run_file), "-q", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _write_run_file(tmp_path: Path, name: str, cfg: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


TRAJECTORY = [
    {"name": "trajectory_match", "params": {"mode": "strict"}},
    {"name": "trajectory_match", "params": {"mode": "unordered"}},
    {"name": "tool_call_accuracy"},
]


def test_a_delta_table_scores_the_same_on_spark_as_with_assay_run(tmp_path: Path, spark: Any) -> None:
    """Messages as Arrow lists of structs: the executors score by columns (the rows the columns
    leave to the object path, an empty message list and a missing reference, included)."""
    from assay.integrations.spark import run, score

    rows = _rows(native=True)
    rows[4]["messages"] = []
    rows[7]["reference"] = None
    files = _delta_table(tmp_path / "traces", rows)
    assert len(files) == 2
    local = [f.removeprefix("file://") for f in files]
    expected: dict[str, dict[str, Any]] = {}
    for n, f in enumerate(local):  # assay run over each current file of the table
        cfg = {
            "source": {"path": f},
            "evaluators": TRAJECTORY,
            "sink": {"path": str(tmp_path / f"cli{n}") + "/"},
            "state_dir": str(tmp_path / "state"),
        }
        proc = _assay_run(_write_run_file(tmp_path, f"cli{n}.yaml", cfg))
        assert proc.returncode == 0, proc.stderr
        for part in (tmp_path / f"cli{n}").glob("part-*.jsonl"):
            for row in map(json.loads, part.read_text().splitlines()):
                expected[row["trace_id"]] = {k: (r["score"], r["value"]) for k, r in row["results"].items()}
    assert N - 1 <= len(expected) <= N  # (an empty message list may be a dead letter)
    strict_passes = sum(1 for v in expected.values() if v["trajectory_strict_match"][0] == 1.0)
    assert 0 < strict_passes < len(expected)

    df = spark.read.parquet(*files).repartition(2)
    cfg = {
        "source": {"path": "spark"},
        "evaluators": TRAJECTORY,
        "sink": {"path": str(tmp_path / "spark_out") + "/"},
        "state_dir": str(tmp_path / "state"),
    }
    keys = ["trajectory_strict_match", "trajectory_unordered_match", "tool_call_accuracy"]
    scored = score(df, config=cfg, ds="2026-11-24").collect()
    assert len(scored) == N and sum(r["read_error"] is None for r in scored) == len(expected)
    assert {r["ds"] for r in scored} == {"2026-11-24"}
    got = {r["trace_id"]: {k: (r[k]["score"], r[k]["passed"]) for k in keys} for r in scored if r["trace_id"]}
    assert {t: {k: s for k, (s, _) in v.items()} for t, v in got.items()} == {
        t: {k: s for k, (s, _) in v.items()} for t, v in expected.items()
    }
    assert sum(1 for v in got.values() if v["trajectory_strict_match"][1]) == strict_passes

    # the whole run: rows through the run file's sink, the summary published, exit 0
    report = run(df, _write_run_file(tmp_path, "spark.yaml", cfg))
    assert report.exit_code == 0, report.messages
    rows = [
        row
        for part in (tmp_path / "spark_out").glob("part-*.jsonl")
        for row in map(json.loads, part.read_text().splitlines())
    ]
    assert {
        row["trace_id"]: {k: (r["score"], r["value"]) for k, r in row["results"].items()} for row in rows
    } == expected
    summary = json.loads((tmp_path / "spark_out" / "_SUMMARY.json").read_text())
    assert summary["counts"]["read"] == N and summary["counts"]["scored"] == len(expected)
    assert summary["evaluators"]["trajectory_strict_match"]["passed"] == strict_passes
    assert (tmp_path / "spark_out" / "_SUCCESS").exists()

    # into a Parquet sink, the rows the columns decide go as columns (the engine's columnar path)
    clean = df.where("id not in ('t4', 't7')")  # (the rows the columns leave to the object path)
    cfg["sink"] = {"path": str(tmp_path / "spark_parquet") + "/", "format": "parquet"}
    report = run(clean, _write_run_file(tmp_path, "parquet.yaml", cfg))
    assert report.exit_code == 0
    assert report.summary["spark"] == {"batches_by_columns": 2, "batches_by_objects": 0, "partitions": 2}
    cfg["sink"] = {"path": str(tmp_path / "spark_jsonl") + "/"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASSAY_COLUMNAR", "0")  # (the driver's choice; the executors follow it)
        report = run(clean, _write_run_file(tmp_path, "jsonl.yaml", cfg))
    assert report.exit_code == 0 and report.summary["spark"]["batches_by_columns"] == 0
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(tmp_path / "spark_parquet").to_pylist()
    by_columns = {r["trace_id"]: {k: (r[k]["score"], r[k]["value"]) for k in keys} for r in table}
    assert len(by_columns) == N - 2
    assert by_columns == {
        t: {k: (s, _text(v)) for k, (s, v) in res.items()} for t, res in expected.items() if t in by_columns
    }
    a = json.loads((tmp_path / "spark_parquet" / "_SUMMARY.json").read_text())
    b = json.loads((tmp_path / "spark_jsonl" / "_SUMMARY.json").read_text())
    assert a["counts"] == b["counts"] and a["evaluators"] == b["evaluators"]  # the summary of either path


def _text(value: Any) -> str | None:
    """A result's value as the Parquet sink writes it (text; JSON for anything else)."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def test_score_ships_back_only_what_varies_and_spark_adds_the_rest(tmp_path: Path, spark: Any) -> None:
    """``score``'s ``mapInArrow`` returns each result's fields without the constants (``run_id``,
    ``ds``, a deterministic evaluator's identity, tokens and cost), Spark puts them back: the
    DataFrame has the Parquet sink's schema and ``read_error``, and every value is the one
    ``BatchScorer.columns`` gives the same rows (rows that are no trace: a null struct per key).
    ``comments=False``: every comment null, nothing else different."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from assay.connectors.parquet_schema import result_schema
    from assay.integrations.arrow_scoring import BatchScorer, run_config
    from assay.integrations.spark import score

    rows = _rows(bad=3, native=True)
    rows = [r if not r["id"].startswith("bad") else {**r, "messages": None} for r in rows]  # (no trace)
    table = pa.Table.from_pylist(rows)
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(table, tmp_path / "t.parquet")
    cfg = {
        "source": {"path": "spark"},
        "evaluators": TRAJECTORY,
        "sink": {"path": str(tmp_path / "out") + "/"},
        "state_dir": str(tmp_path / "state"),
    }
    df = spark.read.parquet(str(tmp_path / "t.parquet")).coalesce(1)
    keys = ["trajectory_strict_match", "trajectory_unordered_match", "tool_call_accuracy"]
    arrow = result_schema(keys, "wide").append(pa.field("read_error", pa.string()))
    scored = score(df, config=cfg, ds="2026-11-24")
    assert scored.schema == from_arrow_schema(arrow)
    got = sorted((r.asDict(recursive=True) for r in scored.collect()), key=lambda r: r["position"])

    scorer = BatchScorer(run_config(None, cfg, ds="2026-11-24"))
    local = scorer.columns(table.combine_chunks().to_batches()[0], "partition-0", ds="2026-11-24")
    want = sorted(local.to_pylist(), key=lambda r: r["position"])
    assert len(got) == len(want) == N + 3
    assert got == want
    unread = [r for r in got if r["read_error"] is not None]
    assert len(unread) == 3 and all(r[k] is None for r in unread for k in keys)
    assert all(r["run_id"] == scorer.run_id and r["ds"] == "2026-11-24" for r in got)

    bare = sorted(
        (r.asDict(recursive=True) for r in score(df, config=cfg, ds="2026-11-24", comments=False).collect()),
        key=lambda r: r["position"],
    )
    for a, b in zip(bare, got, strict=True):
        for key in keys:
            if b[key] is None:
                assert a[key] is None
                continue
            assert a[key]["comment"] is None and b[key]["comment"]
            assert {**a[key], "comment": None} == {**b[key], "comment": None}
        assert {k: v for k, v in a.items() if k not in keys} == {k: v for k, v in b.items() if k not in keys}


def test_dead_letters_and_a_failed_gate_exit_as_assay_run_does(tmp_path: Path, spark: Any) -> None:
    from assay.integrations.spark import run

    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.Table.from_pylist(_rows(bad=2)), tmp_path / "traces.parquet")
    cfg = {
        "source": {"path": str(tmp_path / "traces.parquet")},
        "normalize": {"reference": "reference"},
        "evaluators": [{"name": "trajectory_match", "params": {"mode": "strict"}}],
        "gates": {"trajectory_strict_match": {"min_pass_rate": 0.9}},
        "sink": {"path": str(tmp_path / "cli") + "/"},
        "state_dir": str(tmp_path / "state"),
    }
    proc = _assay_run(_write_run_file(tmp_path, "cli.yaml", cfg))
    cfg["sink"] = {"path": str(tmp_path / "spark") + "/"}
    report = run(spark.read.parquet(str(tmp_path / "traces.parquet")), _write_run_file(tmp_path, "spark.yaml", cfg))
    assert proc.returncode == report.exit_code == 3  # the gate failed: 2/3 pass
    cli = json.loads((tmp_path / "cli" / "_SUMMARY.json").read_text())
    ours = json.loads((tmp_path / "spark" / "_SUMMARY.json").read_text())
    assert ours["counts"] == cli["counts"]
    assert ours["counts"]["dead_letters"] == 2 and ours["counts"]["scored"] == N
    assert ours["gates"] == cli["gates"] and ours["status"] == cli["status"] == "gate_failed"
    assert ours["dead_letter_reasons"] == cli["dead_letter_reasons"]
    for key in ("mean", "pass_rate", "passed", "mean_ci"):
        assert ours["evaluators"]["trajectory_strict_match"][key] == cli["evaluators"]["trajectory_strict_match"][key]
    dead = [
        json.loads(line)
        for p in (tmp_path / "spark" / "_dead_letter").glob("*.jsonl")
        for line in p.read_text().splitlines()
    ]
    assert len(dead) == 2 and all("messages is a JSON string" in d["error"] for d in dead)
    # the output is whole (a failed gate is a verdict on it): _SUCCESS beside both
    assert (tmp_path / "spark" / "_SUCCESS").exists() and (tmp_path / "cli" / "_SUCCESS").exists()
    assert any("trajectory_strict_match" in m for m in report.messages)


def test_executors_share_one_judge_budget_through_redis(tmp_path: Path, spark: Any, redis_server: RedisServer) -> None:
    """Two executors, each configured with 80 % of what the judge accepts in any one second: alone
    each would send that much (together 160 %); through the shared Redis budget they send it
    together, and the judge refuses none."""
    import redis

    from assay.integrations.spark import run

    store = redis_server.url.rsplit("/", 1)[0] + "/6"
    client = redis.Redis.from_url(store)
    client.flushdb()
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.Table.from_pylist(_rows()), tmp_path / "traces.parquet")
    with JudgeServerThread(latency=(0.01, 0.03), rps=10, limit_kind="window", retry_after_ms=False) as server:
        cfg = {
            "source": {"path": "spark"},
            "judges": {"j": {"provider": "openai", "base_url": f"{server.url}/v1", "model": "m", "rpm": 480}},
            "rate_store": store,
            "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
            "sink": {"path": str(tmp_path / "out") + "/"},
            "state_dir": str(tmp_path / "state"),
        }
        df = spark.read.parquet(str(tmp_path / "traces.parquet")).repartition(2)
        report = run(df, _write_run_file(tmp_path, "run.yaml", cfg), use_cache=False)
        stats = server.stats
    assert report.exit_code == 0, report.messages
    rows = [json.loads(line) for p in (tmp_path / "out").glob("part-*.jsonl") for line in p.read_text().splitlines()]
    assert len(rows) == N and all(r["results"]["correctness"]["score"] is not None for r in rows)
    assert stats.rate_limited == 0, stats.to_dict()  # never above the budget in any one second
    assert stats.requests == N  # one call per trace, none repeated
    assert client.dbsize() > 0  # the budget lived in the shared store
    # the summary adds up both executors' judge counts
    assert report.summary["spark"]["partitions"] == 2
    assert report.summary["totals"]["requests"] == N and report.summary["totals"]["rate_limited_429"] == 0


def test_a_day_of_a_delta_table_through_the_delta_sink(tmp_path: Path, spark: Any) -> None:
    from assay.integrations.spark import run

    files = _delta_table(tmp_path / "traces", _rows(bad=1))
    df = spark.read.parquet(*files)
    table = tmp_path / "scores"
    cfg = {
        "source": {"path": "spark"},
        "normalize": {"reference": "reference"},
        "evaluators": [{"name": "trajectory_match", "params": {"mode": "strict"}}],
        "sink": {"type": "delta", "path": str(table)},
        "state_dir": str(tmp_path / "state"),
    }
    run_file = _write_run_file(tmp_path, "run.yaml", cfg)
    for day in ("2026-11-23", "2026-11-24", "2026-11-24"):  # the second run of a day replaces it
        report = run(df, run_file, ds=day)
        assert report.exit_code == 0, report.messages
    scores = deltalake.DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    by_day: dict[str, list[str]] = {}
    for r in scores:
        by_day.setdefault(r["ds"], []).append(r["trace_id"])
    assert {d: len(ids) for d, ids in by_day.items()} == {"2026-11-23": N, "2026-11-24": N}
    assert sorted(by_day["2026-11-24"]) == sorted(f"t{i}" for i in range(N))
    assert report.summary["counts"]["dead_letters"] == 1


def test_batch_judges_are_submitted_and_collected_from_the_driver(tmp_path: Path, spark: Any) -> None:
    """A judge with ``mode: batch``: the driver reads the DataFrame, submits the batches and
    collects them through the ledger (exit 75 while they are pending, as ``assay run``); the
    executors then find every answer in the judge cache: no real-time call reaches the provider."""
    from assay.integrations.spark import run
    from assay.testing.batch_server import BatchServerThread

    pq = pytest.importorskip("pyarrow.parquet")
    records = [{"id": f"t{i}", "inputs": f"question {i}", "outputs": f"answer {i}"} for i in range(N)]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "traces.parquet")
    df = spark.read.parquet(str(tmp_path / "traces.parquet")).repartition(2)
    with BatchServerThread(delay=0.5) as server:
        cfg = {
            "source": {"path": "spark"},
            "judges": {
                "gpt": {
                    "provider": "openai",
                    "base_url": f"{server.url}/v1",
                    "model": "judge-1",
                    "mode": "batch",
                    "batch": {"max_requests": 20, "poll_interval_s": 0.2},
                }
            },
            "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "gpt"}}],
            "sink": {"path": str(tmp_path / "out") + "/"},
            "state_dir": str(tmp_path / "state"),
        }
        run_file = _write_run_file(tmp_path, "run.yaml", cfg)
        first = run(df, run_file)
        assert first.exit_code == 75 and "pending" in first.messages[0]
        assert not (tmp_path / "out" / "_SUCCESS").exists()
        done = run(df, run_file, wait=True)
        stats = server.stats
        realtime = server.server.judge.stats.requests
    assert done.exit_code == 0, done.messages
    assert len(stats.submissions) == N and set(stats.submissions.values()) == {1}  # each line once
    assert stats.batches == 2  # 30 lines, 20 a batch
    assert realtime == 0  # no executor called the provider
    rows = [json.loads(line) for p in (tmp_path / "out").glob("part-*.jsonl") for line in p.read_text().splitlines()]
    assert sorted(r["trace_id"] for r in rows) == sorted(f"t{i}" for i in range(N))
    assert all(r["results"]["correctness"]["score"] in (0.0, 1.0) for r in rows)
    assert done.summary["totals"]["batch"]["lines"] == N
