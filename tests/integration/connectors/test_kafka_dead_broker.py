"""A Kafka broker that dies mid-run: the run ends by itself within about ``connect_timeout_s``
with one ``assay: error:`` line naming the servers (exit 1) and nothing else on stderr, a
``failed`` summary, no ``_SUCCESS`` and no traceback, instead of reconnecting for minutes or
dumping aiokafka's tracebacks (issue 26: a judged run, whose batches are in flight when the broker
goes, printed 89–212 lines of them and no summary; a topic → topic run waited out the producer's
40 s request timeout twice and printed aiokafka's log lines first). ``--verbose`` shows aiokafka's
messages (each once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.kafka_broker import committed, create_topic, produce, tansu_broker
from tests.support.runs import slow_evaluator

pytestmark = pytest.mark.slow
N = 3000


@contextmanager
def _evaluator(kind: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The run file's judges and evaluators: a slow user function, or a stand-in LLM judge."""
    if kind == "python":
        (tmp_path / "slowmod.py").write_text(slow_evaluator(0.01))
        yield {"evaluators": [{"name": "python", "params": {"function": "slowmod:slow"}}]}
        return
    from assay.testing.judge_server import JudgeServerThread

    with JudgeServerThread(latency=(0.05, 0.4), seed=1) as server:
        yield {
            "judges": {"j": {"provider": "openai", "base_url": f"{server.url}/v1", "model": "m", "rpm": 3000}},
            "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}}],
            "limits": {"batch_size": 64, "commit_interval_s": 0.5},
        }


@pytest.mark.parametrize(
    ("kind", "sink", "verbose"),
    [("python", "dir", False), ("judge", "dir", False), ("python", "topic", False), ("judge", "topic", True)],
)
def test_a_broker_killed_mid_run_is_one_error_line_and_a_failed_summary(
    kind: str, sink: str, verbose: bool, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"traces-{tag}", f"nightly-{tag}"
    with _evaluator(kind, tmp_path) as scoring:
        with tansu_broker() as bootstrap:

            async def setup() -> None:
                await create_topic(bootstrap, topic, 6)
                await create_topic(bootstrap, f"scores-{tag}", 6)
                rows = [json.dumps({"id": f"t{i}", "inputs": f"q{i}", "outputs": f"a{i}"}).encode() for i in range(N)]
                await produce(bootstrap, topic, rows, keys=[str(i).encode() for i in range(N)])

            anyio.run(setup)
            run_file = tmp_path / "run.yaml"
            source = {"type": "kafka", "bootstrap_servers": bootstrap, "topics": [topic], "group_id": group}
            run_file.write_text(
                json.dumps(
                    {
                        "source": {**source, "start": "earliest", "stop_at": "end", "connect_timeout_s": 3},
                        "sink": {"path": "out/"}
                        if sink == "dir"
                        else {
                            "type": "kafka",
                            "bootstrap_servers": bootstrap,
                            "topic": f"scores-{tag}",
                            "connect_timeout_s": 3,
                        },
                        "limits": {"commit_interval_s": 0.5},
                        **scoring,
                    }
                )
            )
            proc = subprocess.Popen(
                [sys.executable, "-m", "assay.cli", "run", str(run_file), "--verbose" if verbose else "-q"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
                env={**os.environ, "OPENAI_API_KEY": "sk-test"},
            )
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if sum(v or 0 for v in anyio.run(committed, bootstrap, group, topic).values()) > 200:
                    break
                time.sleep(0.3)
            if proc.poll() is not None:
                pytest.fail(f"the run ended before the broker could be killed: {proc.communicate()[1][-3000:]}")
        # the broker is gone (tansu stopped as its context ended): the run must end by itself, in
        # about connect_timeout_s (3 s; it took 45-80 s when the producer's timeouts decided)
        try:
            _out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
            pytest.fail(f"the run did not end within 30 s of the broker's death; stderr tail:\n{err[-3000:]}")
    assert "Traceback" not in err, err[-5000:]
    assert proc.returncode == 1, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("assay: error:")]
    if verbose:  # aiokafka's own messages, each distinct one once
        client = [line for line in err.splitlines() if " assay.kafka.aiokafka" in line]
        assert client and len(client) == len({line.split(" ", 1)[1] for line in client}), err
    else:
        assert err.splitlines() == errors, err  # the one line, nothing before it
    if sink == "dir":
        assert errors == [f"assay: error: kafka source: cannot reach bootstrap servers {bootstrap} within 3 s"], err
        summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
        assert not (tmp_path / "out" / "_SUCCESS").exists()
    else:  # whichever noticed first, the source or the sink, names the servers
        assert len(errors) == 1 and errors[0].startswith("assay: error: kafka s") and bootstrap in errors[0], err
        (found,) = (tmp_path / ".assay" / "summaries").glob("*/_SUMMARY.json")  # a topic has no directory
        summary = json.loads(found.read_text())
    assert summary["status"] == "failed" and summary["exit_code"] == 1


def test_closing_a_source_whose_broker_died_while_a_fetch_waits_to_retry_raises_nothing() -> None:
    """aiokafka's ``stop()`` re-raises the cancellation of a fetch that failed and waits out its
    retry backoff (the broker went away): that CancelledError escaped the run as a traceback. The
    backoff is made long here so that the close lands in it every time."""
    from assay.connectors.kafka import KafkaSourceConfig
    from assay.connectors.kafka_source import KafkaSource

    tag = uuid.uuid4().hex[:8]
    topic = f"traces-{tag}"

    async def go() -> None:
        broker = tansu_broker()
        bootstrap = broker.__enter__()
        try:
            await create_topic(bootstrap, topic, 2)
            await produce(bootstrap, topic, [b"{}"] * 10, partitions=[i % 2 for i in range(10)])
        except BaseException:
            broker.__exit__(None, None, None)
            raise
        cfg = KafkaSourceConfig(
            bootstrap_servers=bootstrap, topics=[topic], group_id=f"g-{tag}", stop_at="never", connect_timeout_s=3
        )
        source = KafkaSource(cfg, batch_size=100, fixed_share=True)
        with anyio.fail_after(60):
            async with source:
                try:
                    async with aclosing(source.batches()) as batches:
                        await batches.__anext__()
                    consumer = source._consumer
                    assert consumer is not None
                    consumer._fetcher._retry_backoff = 30  # a failed fetch now sleeps through the close
                finally:
                    broker.__exit__(None, None, None)
                await anyio.sleep(1.5)  # the broker is gone: fetches fail and wait to retry
            # closed (the source's ``async with`` ended) without an exception

    anyio.run(go)
