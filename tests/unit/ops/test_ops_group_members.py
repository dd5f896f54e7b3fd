"""Processes of one consumer group running the same run file side by side: which runs scale that way
(Kafka → Kafka only), each keeps a checkpoint of its own (a dead member's is removed), and atomic
JSON writes of several processes into one directory never rename each other's temp file."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from assay.config import RunConfig
from assay.connectors.file_sink import write_json_atomic
from assay.pipeline.outputs import RunPlan
from assay.pipeline.targets import member_key, scales_by_group

KAFKA = {"type": "kafka", "bootstrap_servers": "127.0.0.1:9", "topics": ["t"], "group_id": "g"}
KAFKA_SINK = {"type": "kafka", "bootstrap_servers": "127.0.0.1:9", "topic": "scores"}
KAFKA_DLQ = {"type": "kafka", "bootstrap_servers": "127.0.0.1:9", "topic": "dlq"}


def config(tmp_path: Path, **sections: Any) -> RunConfig:
    data: dict[str, Any] = {
        "source": KAFKA,
        "evaluators": [{"name": "exact_match"}],
        "sink": KAFKA_SINK,
        "dead_letter": KAFKA_DLQ,
        "state_dir": str(tmp_path / ".assay"),
        **sections,
    }
    return RunConfig.model_validate({k: v for k, v in data.items() if v is not None})


def test_only_kafka_to_kafka_in_a_group_scales_by_group(tmp_path: Path) -> None:
    assert scales_by_group(config(tmp_path))
    # a file sink (or the default dead letter on local disk) is owned by one process at a time
    assert not scales_by_group(config(tmp_path, sink={"type": "file", "path": str(tmp_path / "out.jsonl")}))
    assert not scales_by_group(config(tmp_path, dead_letter=None))
    # manual assignment splits the partitions by --shard, not by a group
    assert not scales_by_group(config(tmp_path, source={**KAFKA, "assignment": "manual"}))
    assert not scales_by_group(
        config(tmp_path, source={"type": "file", "path": "x.jsonl"}, sink={"type": "file", "path": "o.jsonl"})
    )


def test_each_member_keeps_its_own_checkpoint_and_a_shard_keeps_the_shared_one(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    plan = RunPlan(cfg)
    assert plan.store.key.endswith(f"/members/{socket.gethostname()}-{os.getpid()}")
    other = RunPlan(config(tmp_path, sink={"type": "file", "path": str(tmp_path / "out.jsonl")}))
    assert "/members/" not in other.store.key
    assert "/members/" not in RunPlan(cfg, (0, 2)).store.key


def test_a_dead_members_checkpoint_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    host = socket.gethostname()
    members = tmp_path / "checkpoints" / "k" / "members"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for pid in (dead.pid, live.pid):
            (members / f"{host}-{pid}").mkdir(parents=True)
            (members / f"{host}-{pid}" / "writer-0.json").write_text("{}")
        (members / f"elsewhere-{dead.pid}").mkdir()  # another host's member: not ours to judge
        key = member_key(tmp_path, "k")
    finally:
        live.kill()
        live.wait()
    assert key == f"k/members/{host}-{os.getpid()}"
    assert sorted(d.name for d in members.iterdir()) == sorted([f"{host}-{live.pid}", f"elsewhere-{dead.pid}"])


def _write_many(path: str, tag: int) -> None:
    for i in range(300):
        write_json_atomic(Path(path), {"tag": tag, "i": i}, indent=False)


def test_processes_writing_one_json_file_atomically_never_collide(tmp_path: Path) -> None:
    target = tmp_path / "state" / "writer-0.json"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(str(target), tag)) for tag in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert orjson.loads(target.read_bytes())["i"] == 299
    assert [f.name for f in target.parent.iterdir()] == ["writer-0.json"]  # no temp file left behind


@pytest.mark.parametrize("indent", [True, False])
def test_atomic_json_is_indented_only_when_asked(tmp_path: Path, indent: bool) -> None:
    write_json_atomic(tmp_path / "a.json", {"a": 1}, indent=indent)
    assert ("\n" in (tmp_path / "a.json").read_text()) is indent
