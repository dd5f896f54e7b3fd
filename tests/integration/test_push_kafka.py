"""Pushing results written to a Kafka topic (a real broker: tansu on loopback): the run's rows are
read back from the topic after the run completed, only that run's (a topic holds many nights),
each score once on the platforms, a second push sends nothing, and nothing is pushed before the
run's summary says it completed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from assay.testing.langfuse_server import LangfuseServerThread
from assay.testing.otlp_receiver import OtlpReceiverThread
from tests.support.kafka_broker import create_topic, produce, read_topic
from tests.support.push_corpus import write_corpus

KEYS = {"LANGFUSE_PUBLIC_KEY": "pk-lf", "LANGFUSE_SECRET_KEY": "sk-lf"}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **KEYS},
        cwd=cwd,
    )


@pytest.mark.slow
def test_results_on_a_topic_are_pushed_after_the_run_and_only_that_runs(tmp_path: Path, bootstrap: str) -> None:
    tag = uuid.uuid4().hex[:8]
    topic = f"scores-{tag}"
    corpus = write_corpus(tmp_path / "traces.jsonl", 20)
    ids = [t for t, _ in corpus]
    # the topic already holds another night's rows (another run id): they are not this run's to push
    other = [
        json.dumps({"trace_id": f"old-{i}", "run_id": "an-earlier-night", "results": {}}).encode() for i in range(5)
    ]

    async def setup() -> None:
        await create_topic(bootstrap, topic, 3)
        await produce(bootstrap, topic, other, keys=[b"o"] * len(other))

    anyio.run(setup)
    with (
        LangfuseServerThread(public_key="pk-lf", secret_key="sk-lf", traces=ids) as lf,
        OtlpReceiverThread() as ot,
    ):
        cfg = {
            "source": {"path": "traces.jsonl"},
            "evaluators": [{"name": "contains", "params": {"substring": "sunny"}}],
            "sink": {"type": "kafka", "bootstrap_servers": bootstrap, "topic": topic},
            "dead_letter": {"path": "dead.jsonl"},
            "push": [{"type": "langfuse", "host": lf.url, "retries": 2}, {"type": "otel", "endpoint": ot.url}],
        }
        run = tmp_path / "run.yaml"
        run.write_text(json.dumps(cfg))
        # before any run: no completed summary, nothing pushed
        early = cli("push", str(run), "--ds", "2026-11-20", cwd=tmp_path)
        assert early.returncode == 1 and "no summary of a completed run" in early.stderr
        done = cli("run", str(run), "--ds", "2026-11-20", "-q", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert len(anyio.run(read_topic, bootstrap, topic)) == 25  # 5 old + 20 of this night
        summaries = list((tmp_path / ".assay" / "summaries").glob("*/_SUMMARY.json"))
        assert len(summaries) == 1
        section = json.loads(summaries[0].read_text())["push"]
        assert (section["langfuse"]["delivered"], section["otel"]["delivered"]) == (20, 20)
        assert sorted(s["subject"]["id"] for s in lf.server.scores.values()) == sorted(ids)
        assert ot.server.stats.items == 20
        # the same command again: nothing new
        again = cli("push", str(run), "--ds", "2026-11-20", cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        section = json.loads(summaries[0].read_text())["push"]
        assert section["langfuse"]["sent"] == 0 and section["otel"]["sent"] == 0
        assert len(lf.server.scores) == 20 and lf.server.stats.duplicates == 0 and ot.server.stats.items == 20
