"""Random lineages over one output (issue 17): whatever sequence of ``kill -9`` (of the parent, or
of the whole process group), SIGTERM, ``--fresh``, completed runs and worker counts 1–3 came
before, the run that finishes leaves exactly one row per trace, one dead letter per bad record,
and ``_SUCCESS`` only ever beside a whole output.

Each case is a seeded random sequence of real ``assay run`` processes over a small corpus scored
by a slow user evaluator (so a stop lands midway), for a directory, a file, an S3 prefix (moto) of
JSON lines or of Parquet parts, and a Kafka source (tansu) writing a directory (its writers read
fixed shares of the partitions; a judged Kafka variant is killed twice at seeded moments).
``ASSAY_LINEAGE_SEEDS`` (cases per output, default 2) and
``ASSAY_LINEAGE_TRACES`` (default 300) make it longer; a failure prints its seed and steps.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.runs import checkpointed_rows, slow_evaluator

SEEDS = int(os.environ.get("ASSAY_LINEAGE_SEEDS", "2"))
N = int(os.environ.get("ASSAY_LINEAGE_TRACES", "300"))
BAD = 3  # malformed lines: one dead letter each
SLOW = slow_evaluator(0.01)
KINDS = ["dir", "file", "s3", "s3_parquet", "kafka"]


@dataclass
class Target:
    """One output kind: the run file's sections, and how to read what a reader would see."""

    root: Path
    sink: dict[str, Any]
    rows: Callable[[], list[dict[str, Any]]]
    dead: Callable[[], list[dict[str, Any]]]
    marker: Callable[[], bool]
    """Whether the output says it is whole (``_SUCCESS``; a file sink: the file exists)."""
    summary: Callable[[], dict[str, Any] | None]
    source: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    fresh_ok: bool = True


def _lines(data: bytes, name: str) -> list[dict[str, Any]]:
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    return [json.loads(x) for x in data.splitlines() if x]


def _dir_rows(d: Path, prefix: str = "part") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in sorted(d.glob(f"{prefix}-*.jsonl*")):
        out += _lines(p.read_bytes(), p.name)
    return out


def _read_json(p: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads(p.read_text()))
    except (OSError, ValueError):
        return None


def _corpus() -> list[bytes]:
    good = [
        json.dumps(
            {"id": f"t{i}", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": f"a{i}"}]}
        ).encode()
        for i in range(N)
    ]
    for k in range(BAD):  # spread through the input
        good.insert((k + 1) * N // (BAD + 1), b"{not json %d" % k)
    return good


def _dir_target(root: Path) -> Target:
    out = root / "out"
    return Target(
        root,
        {"path": "out/", "max_rows_per_part": 50},
        lambda: _dir_rows(out),
        lambda: _dir_rows(out / "_dead_letter", "dead"),
        lambda: (out / "_SUCCESS").exists(),
        lambda: _read_json(out / "_SUMMARY.json"),
    )


def _file_target(root: Path) -> Target:
    f = root / "scores.jsonl.gz"
    dead = root / "scores.dead_letter.jsonl"
    return Target(
        root,
        {"path": "scores.jsonl.gz"},
        lambda: _lines(f.read_bytes(), f.name) if f.exists() else [],
        lambda: _lines(dead.read_bytes(), dead.name) if dead.exists() else [],
        lambda: f.exists() and (_read_json(root / "scores.jsonl.gz._SUMMARY.json") or {}).get("status") == "ok",
        lambda: _read_json(root / "scores.jsonl.gz._SUMMARY.json"),
    )


def _s3_target(root: Path, request: pytest.FixtureRequest, *, parquet: bool = False) -> Target:
    """An S3 prefix of gzip JSON-lines parts, or (``parquet``) of Parquet parts."""
    server = request.getfixturevalue("s3_server")
    client = request.getfixturevalue("client")
    bucket = request.getfixturevalue("bucket")

    def objects(prefix: str) -> list[str]:
        listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
        return sorted(o["Key"] for o in listing)

    def rows(prefix: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for key in objects(prefix):
            data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            if key.endswith(".parquet"):
                import pyarrow as pa
                import pyarrow.parquet as pq

                out += pq.read_table(pa.BufferReader(data), columns=["trace_id"]).to_pylist()
            else:
                out += _lines(data, key)
        return out

    def summary() -> dict[str, Any] | None:
        if "out/_SUMMARY.json" not in objects("out/_SUMMARY.json"):
            return None
        return dict(json.loads(client.get_object(Bucket=bucket, Key="out/_SUMMARY.json")["Body"].read()))

    return Target(
        root,
        {
            "path": f"s3://{bucket}/out/",
            "max_rows_per_part": 50,
            **({"format": "parquet"} if parquet else {"compression": "gzip"}),
        },
        lambda: rows("out/part-"),
        lambda: rows("out/_dead_letter/dead-"),
        lambda: "out/_SUCCESS" in objects("out/_SUCCESS"),
        summary,
        extra={"s3": {"endpoint_url": server.endpoint_url}},
    )


def _kafka_target(root: Path, request: pytest.FixtureRequest, corpus: list[bytes]) -> Target:
    from tests.support.kafka_broker import create_topic, produce

    bootstrap = request.getfixturevalue("bootstrap")
    tag = uuid.uuid4().hex[:8]
    topic = f"lineage-{tag}"

    async def fill() -> None:
        await create_topic(bootstrap, topic, 3)
        await produce(bootstrap, topic, corpus, partitions=[i % 3 for i in range(len(corpus))])

    anyio.run(fill)
    target = _dir_target(root)
    target.source = {
        "type": "kafka",
        "bootstrap_servers": bootstrap,
        "topics": [topic],
        "group_id": f"lineage-{tag}",
        "start": "committed",
        "stop_at": "end",
        "session_timeout_ms": 6000,
    }
    return target


def _cmd(f: Path, workers: int, fresh: bool) -> list[str]:
    extra = ["--fresh"] if fresh else []
    return [
        sys.executable,
        "-m",
        "assay.cli",
        "run",
        str(f),
        "-q",
        "--workers",
        str(workers),
        "--wait-lock",
        "120",
        *extra,
    ]


def _step(f: Path, workers: int, fresh: bool, stop: str, after: int) -> tuple[int, str]:
    """One run: to the end (``stop="none"``), or stopped once ``after`` rows are durable."""
    since = time.time()
    proc = subprocess.Popen(
        _cmd(f, workers, fresh),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=f.parent,
        start_new_session=True,
        text=True,
    )
    if stop != "none":
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if checkpointed_rows(f.parent, since) >= after:
                break
            time.sleep(0.01)
        if proc.poll() is None:
            if stop == "term":
                proc.send_signal(signal.SIGTERM)
            elif stop == "kill":
                proc.kill()
            else:  # kill -9 of every process of the run
                os.killpg(proc.pid, signal.SIGKILL)
    # after a kill -9 of the parent alone, its workers (stopped by its death) may still be
    # finishing: they hold the run lock, and the next step waits for it (--wait-lock)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


def _check_whole(target: Target, trace: list[str]) -> None:
    rows = target.rows()
    ids = [r["trace_id"] for r in rows]
    where = f"after {' → '.join(trace)}"
    assert len(ids) == N, f"{len(ids)} rows for {N} traces ({len(ids) - len(set(ids))} repeated) {where}"
    assert set(ids) == {f"t{i}" for i in range(N)}, where
    dead = target.dead()
    assert len(dead) == BAD, f"{len(dead)} dead letters for {BAD} bad records {where}"
    summary = target.summary()
    assert summary is not None, where
    assert summary["counts"]["scored"] == N and summary["counts"]["dead_letters"] == BAD, (summary["counts"], where)


@pytest.mark.parametrize("seed", range(SEEDS))
@pytest.mark.parametrize("kind", KINDS)
def test_random_lineage_ends_exact(kind: str, seed: int, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    rng = random.Random(f"{kind}-{seed}")
    corpus = _corpus()
    (tmp_path / "slowmod.py").write_text(SLOW)
    if kind == "kafka":
        target = _kafka_target(tmp_path, request, corpus)
    else:
        (tmp_path / "corpus.jsonl").write_bytes(b"\n".join(corpus) + b"\n")
        if kind in ("s3", "s3_parquet"):
            target = _s3_target(tmp_path, request, parquet=kind == "s3_parquet")
        else:
            target = _dir_target(tmp_path) if kind == "dir" else _file_target(tmp_path)
        target.source = {"path": "corpus.jsonl"}
    cfg = {
        "source": target.source,
        "evaluators": [{"name": "python", "params": {"function": "slowmod:slow"}}],
        "sink": target.sink,
        "limits": {"batch_size": 10, "commit_interval_s": 0.2, "grace_period_s": 5, "max_dead_letters": 100},
        **target.extra,
    }
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps(cfg))

    counts = [1, 2, 3]
    trace: list[str] = []
    for _ in range(rng.randint(2, 4)):
        workers = rng.choice(counts)
        fresh = target.fresh_ok and rng.random() < 0.2
        stop = rng.choices(["kill", "group", "term", "none"], weights=[3, 2, 3, 1])[0]
        after = rng.randint(N // 10, N * 8 // 10)
        code, err = _step(f, workers, fresh, stop, after)
        trace.append(f"w{workers}{' fresh' if fresh else ''} {stop}@{after}:{code}")
        assert "Traceback" not in err, f"{err} after {' → '.join(trace)}"
        if target.marker():  # _SUCCESS only ever beside a whole output
            _check_whole(target, trace)
    workers = rng.choice(counts)
    code, err = _step(f, workers, False, "none", 0)
    trace.append(f"w{workers} to the end:{code}")
    assert code == 0, f"exit {code}: {err} after {' → '.join(trace)}"
    assert target.marker(), f"no success marker after {' → '.join(trace)}"
    _check_whole(target, trace)
    out = tmp_path / "out"
    if out.is_dir():  # nothing staged or half-written is left beside the output
        assert not (out / "_staging").exists() and not list(out.glob(".*.tmp")), " → ".join(trace)


KAFKA_KILL_SEEDS = int(os.environ.get("ASSAY_KAFKA_KILL_SEEDS", "3"))
KAFKA_N = int(os.environ.get("ASSAY_KAFKA_KILL_TRACES", "600"))


def _positions(out: Path) -> dict[int, list[int]]:
    """Per partition the offsets the output's rows came from (each row once)."""
    found: dict[int, list[int]] = {}
    for row in _dir_rows(out):
        found.setdefault(row["position"]["partition"], []).append(row["position"]["offset"])
    return found


def _until_checkpointed(proc: subprocess.Popen[str], root: Path, since: float, rows: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and checkpointed_rows(root, since) < rows:
        time.sleep(0.005)


@pytest.mark.parametrize("seed", range(KAFKA_KILL_SEEDS))
def test_kafka_to_directory_two_kills_at_seeded_moments_writes_each_offset_once(
    seed: int, tmp_path: Path, bootstrap: str
) -> None:
    """Issue 26: a judged run (batches evaluated side by side, so they finish out of order) from a
    6-partition topic into a directory, ``kill -9`` at a seeded moment, the rerun killed at another,
    then a run to the end (each with a seeded ``--workers`` 1–3): per partition every offset is
    written exactly once, and the same command again reads nothing and leaves the output byte for
    byte as it was. ``ASSAY_KAFKA_KILL_SEEDS``
    (default 3) and ``ASSAY_KAFKA_KILL_TRACES`` (default 600) make it longer."""
    from assay.testing.judge_server import JudgeServerThread
    from tests.support.kafka_broker import create_topic, produce

    rng = random.Random(f"kafka-kills-{seed}")
    tag = uuid.uuid4().hex[:8]
    topic = f"kills-{tag}"
    values = [
        json.dumps({"id": f"t{i}", "inputs": f"q{i}", "outputs": f"a{i}", "reference_outputs": f"a{i}"}).encode()
        for i in range(KAFKA_N)
    ]

    async def fill() -> None:
        await create_topic(bootstrap, topic, 6)
        await produce(bootstrap, topic, values, partitions=[i % 6 for i in range(KAFKA_N)])

    anyio.run(fill)
    start = rng.choice(["committed", "earliest"])
    out = tmp_path / "out"
    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    with JudgeServerThread(latency=(0.005, 0.12), seed=seed) as server:
        judge = {"provider": "openai", "base_url": f"{server.url}/v1", "model": "m", "max_concurrency": 32}
        cfg = {
            "source": {
                "type": "kafka",
                "bootstrap_servers": bootstrap,
                "topics": [topic],
                "group_id": f"kills-{tag}",
                "start": start,
                "session_timeout_ms": 6000,
            },
            "judges": {"j": judge},
            "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
            "sink": {"path": "out/", "max_rows_per_part": rng.choice([100, 100_000])},
            "limits": {"batch_size": rng.choice([8, 16, 64]), "commit_interval_s": rng.choice([0.1, 0.3, 1.0])},
        }
        f = tmp_path / "run.yaml"
        f.write_text(json.dumps(cfg))
        trace = [f"start {start}, batch {cfg['limits']['batch_size']}"]
        done = 0
        for _ in range(2):
            since = time.time()
            workers = rng.choice([1, 1, 2, 3])
            proc = subprocess.Popen(
                _cmd(f, workers, False),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=tmp_path,
                text=True,
                env=env,
                start_new_session=True,
            )
            done = rng.randint(done, done + KAFKA_N // 3)
            _until_checkpointed(proc, tmp_path, since, done)  # then a seeded moment after that checkpoint
            pause = rng.uniform(0.0, 0.6)
            time.sleep(pause)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the parent and its writers
            _, err = proc.communicate(timeout=120)
            trace.append(f"w{workers} kill after {done} rows +{pause:.2f}s:{proc.returncode}")
            assert "Traceback" not in err, f"{err} after {' → '.join(trace)}"
        workers = rng.choice([1, 2, 3])
        trace.append(f"w{workers} to the end")
        proc = subprocess.Popen(
            _cmd(f, workers, False), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, text=True, env=env
        )
        _, err = proc.communicate(timeout=300)
        where = " → ".join(trace)
        assert proc.returncode == 0, f"exit {proc.returncode}: {err[-3000:]} after {where}"
        found = _positions(out)
        for partition, offsets in sorted(found.items()):
            twice = sorted(o for o in set(offsets) if offsets.count(o) > 1)
            assert not twice, f"partition {partition}: offsets {twice[:20]}… written twice after {where}"
        assert sum(len(v) for v in found.values()) == KAFKA_N, where
        assert sorted(o for v in found.values() for o in v) == sorted(
            o for p in range(6) for o in range(len(range(p, KAFKA_N, 6)))
        ), where
        summary = (out / "_SUMMARY.json").read_bytes()
        assert json.loads(summary)["counts"]["read"] == KAFKA_N, where
        assert (out / "_SUCCESS").exists()

        # the same command again: nothing new, nothing read, nothing rewritten
        before = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
        again = subprocess.run(
            _cmd(f, workers, False), capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
        )
        assert again.returncode == 0, again.stderr[-3000:]
        assert "nothing new" in again.stderr, again.stderr[-3000:]
        assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before, where
        assert not (out / "_staging").exists()


@pytest.mark.parametrize("after", [200, 220, 260])
def test_a_rerun_with_nothing_to_score_killed_while_it_discards_then_more_workers(tmp_path: Path, after: int) -> None:
    """A rerun over a published output finds every pair current and discards what it staged; a
    kill -9 in that moment must not leave a checkpoint naming staged parts already deleted (the
    next run, with more workers, failed with "parts recorded by the checkpoint are missing")."""
    target = _file_target(tmp_path)
    (tmp_path / "slowmod.py").write_text(SLOW)
    (tmp_path / "corpus.jsonl").write_bytes(b"\n".join(_corpus()) + b"\n")
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "evaluators": [{"name": "python", "params": {"function": "slowmod:slow"}}],
        "sink": target.sink,
        "limits": {"batch_size": 10, "commit_interval_s": 0.2, "grace_period_s": 5, "max_dead_letters": 100},
        **target.extra,
    }
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps(cfg))
    assert _step(f, 1, True, "none", 0)[0] == 0
    before = (tmp_path / "scores.jsonl.gz").read_bytes()
    _step(f, 1, False, "group", after)  # killed at some moment of the rerun, its end included
    code, err = _step(f, 3, False, "none", 0)
    assert code == 0, err
    _check_whole(target, [f"rerun killed after {after}"])
    assert (tmp_path / "scores.jsonl.gz").read_bytes() == before  # nothing was missing: nothing rewritten
