"""``assay run`` from a Kafka topic to Kafka topics against a real broker (tansu on loopback):
every trace scored into the result topic, malformed messages in the dead-letter topic with their
origin, the group's committed offsets at the end; a SIGKILLed run started again misses nothing;
two processes of one group split the work; two ``assignment: manual`` shards split it without a
group join."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.kafka_broker import committed, create_topic, end_offsets, produce, read_topic
from tests.support.runs import checkpointed_rows, slow_evaluator

N = 6000
BAD = 60
SLOW = slow_evaluator(0.0005)

pytestmark = pytest.mark.slow


def _setup(bootstrap: str) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    names = {"in": f"traces-{tag}", "out": f"scores-{tag}", "dlq": f"scores-dlq-{tag}", "group": f"nightly-{tag}"}

    async def go() -> None:
        for t in ("in", "out", "dlq"):
            await create_topic(bootstrap, names[t], 6)
        values = [
            json.dumps({"id": f"t{i}", "outputs": f"a{i}", "reference_outputs": f"a{i}"}).encode() for i in range(N)
        ]
        bad = [b"{not json %d" % i for i in range(BAD)]
        mixed = [v for pair in zip(values[:BAD], bad, strict=True) for v in pair] + values[BAD:]
        await produce(bootstrap, names["in"], mixed, keys=[str(i).encode() for i in range(len(mixed))])

    anyio.run(go)
    return names


def _run_file(tmp_path: Path, bootstrap: str, names: dict[str, str], evaluator: dict[str, Any], **source: Any) -> Path:
    cfg = {
        "source": {
            "type": "kafka",
            "bootstrap_servers": bootstrap,
            "topics": [names["in"]],
            "group_id": names["group"],
            "start": "committed",
            "stop_at": "end",
            **source,
        },
        "evaluators": [evaluator],
        "sink": {"type": "kafka", "bootstrap_servers": bootstrap, "topic": names["out"]},
        "dead_letter": {"type": "kafka", "bootstrap_servers": bootstrap, "topic": names["dlq"]},
        "limits": {"commit_interval_s": 0.5},
    }
    f = tmp_path / "kafka.yaml"
    f.write_text(json.dumps(cfg))
    return f


def _cmd(f: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "assay.cli", "run", str(f), "-q", *extra]


def _result_ids(bootstrap: str, topic: str) -> list[str]:
    msgs = anyio.run(read_topic, bootstrap, topic)
    return [json.loads(m.value)["trace_id"] for m in msgs]


def _at_end(bootstrap: str, names: dict[str, str]) -> bool:
    ends = anyio.run(end_offsets, bootstrap, names["in"])
    done = anyio.run(committed, bootstrap, names["group"], names["in"])
    return all(done.get(p) == end for p, end in ends.items())


def test_topic_to_topic_scores_everything_and_commits_to_the_end(tmp_path: Path, bootstrap: str) -> None:
    names = _setup(bootstrap)
    f = _run_file(tmp_path, bootstrap, names, {"name": "exact_match"})
    proc = subprocess.run(_cmd(f), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ids = _result_ids(bootstrap, names["out"])
    assert sorted(set(ids)) == sorted(f"t{i}" for i in range(N))
    dead = anyio.run(read_topic, bootstrap, names["dlq"])
    assert len(dead) == BAD
    headers = dict(dead[0].headers)
    assert headers["assay.stage"] == b"parse" and headers["assay.source_topic"] == names["in"].encode()
    assert dead[0].value.startswith(b"{not json")
    assert _at_end(bootstrap, names)
    summary_files = list((tmp_path / ".assay" / "summaries").rglob("_SUMMARY.json"))
    assert summary_files
    summary = json.loads(summary_files[0].read_text())
    assert summary["counts"]["scored"] == N and summary["counts"]["dead_letters"] == BAD


def test_sigkill_midway_then_restart_misses_nothing(tmp_path: Path, bootstrap: str) -> None:
    names = _setup(bootstrap)
    (tmp_path / "slowmod.py").write_text(SLOW)
    f = _run_file(tmp_path, bootstrap, names, {"name": "python", "params": {"function": "slowmod:slow"}})
    proc = subprocess.Popen(_cmd(f), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        done = anyio.run(committed, bootstrap, names["group"], names["in"])
        if sum(v or 0 for v in done.values()) > N // 4:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    proc2 = subprocess.run(_cmd(f), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc2.returncode == 0, proc2.stderr
    ids = _result_ids(bootstrap, names["out"])
    assert set(ids) == {f"t{i}" for i in range(N)}  # duplicates allowed (at least once), none missing
    assert _at_end(bootstrap, names)


def test_two_processes_in_one_group_score_everything_together(tmp_path: Path, bootstrap: str) -> None:
    names = _setup(bootstrap)
    (tmp_path / "slowmod.py").write_text(SLOW)
    f = _run_file(tmp_path, bootstrap, names, {"name": "python", "params": {"function": "slowmod:slow"}})
    procs = [
        subprocess.Popen(_cmd(f), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[1][-3000:] for o in outs)
    ids = _result_ids(bootstrap, names["out"])
    assert set(ids) == {f"t{i}" for i in range(N)}
    assert _at_end(bootstrap, names)
    assert not list((tmp_path / ".assay" / "checkpoints").rglob("*.json"))  # each member's was its own


def test_a_second_process_into_one_file_sink_is_refused_while_the_first_runs(tmp_path: Path, bootstrap: str) -> None:
    names = _setup(bootstrap)
    (tmp_path / "slowmod.py").write_text(SLOW)
    f = _run_file(tmp_path, bootstrap, names, {"name": "python", "params": {"function": "slowmod:slow"}})
    cfg = json.loads(f.read_text())
    cfg["sink"] = {"path": str(tmp_path / "out") + "/"}
    f.write_text(json.dumps(cfg))
    first = subprocess.Popen(_cmd(f), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((tmp_path / ".assay" / "locks").glob("*.lock")):
            time.sleep(0.1)
        second = subprocess.run(_cmd(f), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    finally:
        out = first.communicate(timeout=300)
    assert second.returncode == 6, second.stderr  # the files are owned by one process: --shard i/N for more
    assert "already running" in second.stderr
    assert first.returncode == 0, out[1][-3000:]
    rows = [json.loads(line) for p in (tmp_path / "out").glob("part-*.jsonl") for line in p.read_text().splitlines()]
    assert sorted(r["trace_id"] for r in rows) == sorted(f"t{i}" for i in range(N))


def test_manual_assignment_shards_score_everything_once_without_a_group_join(tmp_path: Path, bootstrap: str) -> None:
    names = _setup(bootstrap)
    f = _run_file(tmp_path, bootstrap, names, {"name": "exact_match"}, assignment="manual")
    procs = [
        subprocess.Popen(_cmd(f, "--shard", f"{i}/2"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
        for i in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    ids = _result_ids(bootstrap, names["out"])
    assert sorted(ids) == sorted(f"t{i}" for i in range(N))  # disjoint shards: each trace exactly once
    assert len(anyio.run(read_topic, bootstrap, names["dlq"])) == BAD
    assert _at_end(bootstrap, names)
    # again: everything is committed, so nothing is read twice
    proc = subprocess.run(_cmd(f, "--shard", "0/2"), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(_result_ids(bootstrap, names["out"])) == N


def test_workers_start_consumers_of_one_group_and_leave_no_checkpoint(tmp_path: Path, bootstrap: str) -> None:
    names = _setup(bootstrap)
    (tmp_path / "slowmod.py").write_text(SLOW)
    f = _run_file(tmp_path, bootstrap, names, {"name": "python", "params": {"function": "slowmod:slow"}})
    proc = subprocess.run(_cmd(f, "--workers", "2"), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(_result_ids(bootstrap, names["out"])) == {f"t{i}" for i in range(N)}
    assert len(anyio.run(read_topic, bootstrap, names["dlq"])) == BAD
    assert _at_end(bootstrap, names)
    (summary_file,) = (tmp_path / ".assay" / "summaries").rglob("_SUMMARY.json")
    summary = json.loads(summary_file.read_text())
    assert summary["counts"]["read"] >= N + BAD  # both writers' counts (a rebalance may re-read some)
    assert summary["counts"]["dead_letters"] >= BAD
    # each process kept its own checkpoint while it ran, and a completed run leaves none behind
    assert not list((tmp_path / ".assay" / "checkpoints").rglob("*.json"))


def test_fresh_does_not_rewind_the_group(tmp_path: Path, bootstrap: str) -> None:
    names = _setup(bootstrap)
    f = _run_file(tmp_path, bootstrap, names, {"name": "exact_match"})
    for extra in ((), ("--fresh",)):
        proc = subprocess.run(_cmd(f, *extra), capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    # the second run forgot its local checkpoint only: the group's offsets were at the end already
    assert sorted(_result_ids(bootstrap, names["out"])) == sorted(f"t{i}" for i in range(N))
    assert len(anyio.run(read_topic, bootstrap, names["dlq"])) == BAD
    assert _at_end(bootstrap, names)


def _dir_rows(out: Path) -> list[str]:
    return [
        json.loads(line)["trace_id"] for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()
    ]


def test_kafka_to_directory_killed_twice_is_exact_and_a_rerun_reads_nothing_new(tmp_path: Path, bootstrap: str) -> None:
    """Issue 17: a file output of a Kafka source is exact after kill -9 (the sinks and the offsets
    resume from the same checkpoint), and the same command again leaves the whole output as it was."""
    names = _setup(bootstrap)
    (tmp_path / "slowmod.py").write_text(slow_evaluator(0.002))
    f = _run_file(tmp_path, bootstrap, names, {"name": "python", "params": {"function": "slowmod:slow"}})
    cfg = json.loads(f.read_text())
    cfg["sink"] = {"path": "out/", "max_rows_per_part": 500}
    cfg.pop("dead_letter")
    cfg["limits"] = {"commit_interval_s": 0.2, "max_dead_letters": BAD}
    f.write_text(json.dumps(cfg))
    out = tmp_path / "out"
    for quarter in (1, 2):
        proc = subprocess.Popen(_cmd(f), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            done = anyio.run(committed, bootstrap, names["group"], names["in"])
            if sum(v or 0 for v in done.values()) > quarter * N // 4:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    proc = subprocess.run(_cmd(f), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ids = _dir_rows(out)
    assert len(ids) == N and set(ids) == {f"t{i}" for i in range(N)}
    assert (out / "_SUCCESS").exists()
    summary = (out / "_SUMMARY.json").read_bytes()
    assert json.loads(summary)["counts"]["scored"] == N

    again = subprocess.run(_cmd(f), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "nothing new" in again.stderr
    assert (out / "_SUMMARY.json").read_bytes() == summary and (out / "_SUCCESS").exists()
    assert sorted(_dir_rows(out)) == sorted(ids) and not (out / "_staging").exists()


def test_kafka_to_directory_workers_two_killed_one_stopped_three_to_the_end_is_exact(
    tmp_path: Path, bootstrap: str
) -> None:
    """Issue 17's worker-count sequence over a Kafka source: ``--workers 2`` killed (kill -9 of
    every process), ``--workers 1`` stopped (SIGTERM), ``--workers 3`` to the end. The run's writers
    read fixed shares of the partitions and resume from their checkpoints' offsets, so the output
    holds every trace once, whatever the group had committed; the group ends at the topic's end."""
    names = _setup(bootstrap)
    (tmp_path / "slowmod.py").write_text(slow_evaluator(0.002))
    f = _run_file(tmp_path, bootstrap, names, {"name": "python", "params": {"function": "slowmod:slow"}})
    cfg = json.loads(f.read_text())
    cfg["sink"] = {"path": "out/", "max_rows_per_part": 250}
    cfg.pop("dead_letter")
    cfg["limits"] = {"commit_interval_s": 0.2, "max_dead_letters": BAD, "grace_period_s": 5}
    f.write_text(json.dumps(cfg))
    out = tmp_path / "out"
    for workers, sig, after in (("2", signal.SIGKILL, N // 4), ("1", signal.SIGTERM, N // 2)):
        since = time.time()
        proc = subprocess.Popen(
            _cmd(f, "--workers", workers, "--wait-lock", "60"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and checkpointed_rows(tmp_path, since) < after:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be stopped"
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.send_signal(sig)
        proc.communicate(timeout=120)
        assert not (out / "_SUCCESS").exists()
    proc = subprocess.run(
        _cmd(f, "--workers", "3", "--wait-lock", "60"), capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ids = _dir_rows(out)
    assert len(ids) == N and set(ids) == {f"t{i}" for i in range(N)}, f"{len(ids)} rows, {len(set(ids))} ids"
    dead = [line for p in (out / "_dead_letter").glob("*.jsonl") for line in p.read_text().splitlines()]
    assert len(dead) == BAD
    assert (out / "_SUCCESS").exists()
    assert json.loads((out / "_SUMMARY.json").read_text())["counts"]["scored"] == N
    assert _at_end(bootstrap, names)
