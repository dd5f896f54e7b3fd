"""A Kafka broker that dies mid-run: the run ends by itself with a ConnectorError naming the
servers (exit 1) within about ``connect_timeout_s``, instead of reconnecting for minutes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import anyio
import pytest

from tests.support.kafka_broker import committed, create_topic, produce, tansu_broker
from tests.support.runs import slow_evaluator

pytestmark = pytest.mark.slow
N = 3000


def test_a_broker_killed_mid_run_is_a_connector_error(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"traces-{tag}", f"nightly-{tag}"
    (tmp_path / "slowmod.py").write_text(slow_evaluator(0.01))
    with tansu_broker() as bootstrap:

        async def setup() -> None:
            await create_topic(bootstrap, topic, 3)
            rows = [json.dumps({"id": f"t{i}", "outputs": f"a{i}"}).encode() for i in range(N)]
            await produce(bootstrap, topic, rows, keys=[str(i).encode() for i in range(N)])

        anyio.run(setup)
        run_file = tmp_path / "run.yaml"
        source = {"type": "kafka", "bootstrap_servers": bootstrap, "topics": [topic], "group_id": group}
        run_file.write_text(
            json.dumps(
                {
                    "source": {**source, "start": "earliest", "stop_at": "end", "connect_timeout_s": 3},
                    "evaluators": [{"name": "python", "params": {"function": "slowmod:slow"}}],
                    "sink": {"path": "out/"},
                    "limits": {"commit_interval_s": 0.5},
                }
            )
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "assay.cli", "run", str(run_file), "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if sum(v or 0 for v in anyio.run(committed, bootstrap, group, topic).values()) > 200:
                break
            time.sleep(0.3)
        assert proc.poll() is None, "the run ended before the broker could be killed"
    # the broker is gone (tansu stopped with the context): the run must end by itself
    try:
        _out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        pytest.fail(f"the run hung after the broker died; stderr tail:\n{err[-3000:]}")
    assert proc.returncode == 1, err[-3000:]
    assert f"kafka source: cannot reach bootstrap servers {bootstrap}" in err
    assert len(err.splitlines()) < 20, err  # aiokafka's reconnect messages: each distinct one once
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["status"] == "failed" and summary["exit_code"] == 1
    assert not (tmp_path / "out" / "_SUCCESS").exists()
