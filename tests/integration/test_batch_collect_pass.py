"""A batch run's collect pass is an ordinary pipeline run (the run's source, shards, parse and
evaluate, into sinks that keep nothing) under the engine's signal watcher, and what it ends with
is the verdict's (pending 75, interrupted 130). Against the stand-in batch API over HTTP."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from assay.config import RunConfig, load_run_file
from assay.connectors.base import Source
from assay.judges.batch.ledger import Ledger
from assay.pipeline.batch_run import batch_phase, ledger_path
from assay.pipeline.verdict import STOPPED
from assay.records import Envelope, Position
from assay.testing.batch_server import BatchServerThread
from tests.integration.test_batch_runs import assay, rows, run_file, summary

N = 120
BROKEN = 7
"""The line of the corpus that is not JSON: a dead letter of the score pass, never of a collect pass."""


def corpus(tmp_path: Path) -> list[bytes]:
    lines = [
        json.dumps({"id": f"t{i}", "inputs": f"q {i}", "outputs": f"a {i}", "reference_outputs": f"a {i}"}).encode()
        for i in range(N)
    ]
    lines.insert(BROKEN, b"{not json")
    (tmp_path / "corpus.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return lines


def config_of(tmp_path: Path, url: str) -> RunConfig:
    run = run_file(tmp_path, url, "openai", max_requests=50)
    data = json.loads(run.read_text())
    data["source"] = {"path": str(tmp_path / "corpus.jsonl")}
    data["sink"] = {"path": str(tmp_path / "out")}
    data["state_dir"] = str(tmp_path / ".assay")
    data["limits"] = {"batch_size": 20, "grace_period_s": 30}
    run.write_text(json.dumps(data))
    return load_run_file(run)


class SignalAfterFirstBatch(Source):
    """The corpus's first batch, then SIGINT to this process, then no more input until stopped
    (like stdin with nothing more to read)."""

    def __init__(self, lines: list[bytes], size: int) -> None:
        super().__init__()
        self.lines = lines
        self.size = size
        self.stopped = anyio.Event()
        self.yielded = 0

    async def batches(self) -> AsyncIterator[list[Envelope]]:
        batch = [Envelope(line, Position("corpus.jsonl", i)) for i, line in enumerate(self.lines[: self.size], 1)]
        self.yielded += len(batch)
        yield batch
        os.kill(os.getpid(), signal.SIGINT)
        await self.stopped.wait()

    def stop(self) -> None:
        self.stopped.set()

    async def aclose(self) -> None:
        return None


def test_a_signal_during_the_collect_pass_stops_it_like_a_run_and_the_next_invocation_collects_again(
    tmp_path: Path,
) -> None:
    lines = corpus(tmp_path)
    with BatchServerThread(delay=60.0) as server:
        config = config_of(tmp_path, server.url)
        source = SignalAfterFirstBatch(lines, 20)
        phase = anyio.run(lambda: batch_phase(config, handle_signals=True, source=lambda: source))
        assert phase.config is None and phase.report is not None
        report = phase.report
        assert (report.exit_code, report.status) == (130, "interrupted")
        assert report.summary == {"status": "interrupted", "exit_code": 130, "batches": []}
        assert report.messages[0] == STOPPED["interrupted"][1]
        assert "no batch was cancelled" in report.messages[1]
        assert source.yielded == 20 and source.stopped.is_set()  # the engine stopped its reading
        assert server.stats.batches == 0  # a stopped pass submits nothing
        ledger = Ledger(ledger_path(config))
        try:
            assert ledger.get_meta("collect") == "running"  # the pass did not finish: it is due again
            assert ledger.counts() == {}
        finally:
            ledger.close()
        # nothing of the pass is in the output or the state dir: no row, dead letter, summary, checkpoint
        assert not (tmp_path / "out").exists()
        assert not (tmp_path / ".assay" / "checkpoints").exists()

        # the next invocation reads the whole input again, submits every request and is pending
        phase = anyio.run(lambda: batch_phase(config))
        assert phase.report is not None
        report = phase.report
        assert (report.exit_code, report.status) == (75, "pending")
        assert report.messages[0] == STOPPED["pending"][1]
        assert server.stats.batches == 3 and len(server.stats.submissions) == N  # 50 + 50 + 20
        assert [r["lines"] for r in report.summary["batches"]] == [50, 50, 20]
        ledger = Ledger(ledger_path(config))
        try:
            assert ledger.get_meta("collect") == "done"
        finally:
            ledger.close()
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["_SUMMARY.json"]  # the pending summary
        assert summary(tmp_path / "out")["status"] == "pending"
        assert not (tmp_path / ".assay" / "checkpoints").exists()


def test_the_score_pass_writes_what_the_collect_pass_read_past(tmp_path: Path) -> None:
    """The dead letter the collect pass parsed past is the score pass's, once; every trace a row."""
    corpus(tmp_path)
    with BatchServerThread(delay=0.1) as server:
        run = run_file(tmp_path, server.url, "openai", max_requests=50)
        first = assay("run", str(run), "-q", cwd=tmp_path)
        assert first.returncode == 75, first.stderr
        assert STOPPED["pending"][1] in first.stderr
        out = tmp_path / "out"
        assert sorted(p.name for p in out.iterdir()) == ["_SUMMARY.json"]
        done = assay("run", str(run), "--wait", "-q", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    got = rows(out)
    assert sorted(r["trace_id"] for r in got) == sorted(f"t{i}" for i in range(N))
    s = summary(out)
    assert s["status"] == "ok" and s["counts"]["dead_letters"] == 1 and s["counts"]["scored"] == N
    assert server.stats.batches == 3 and set(server.stats.submissions.values()) == {1}


def test_a_collect_pass_whose_fallback_calls_reach_the_budget_stops_with_exit_5(tmp_path: Path) -> None:
    """Lines that used up their attempts get a real-time call in the collect pass; the budget stops
    that pass as it stops a run: the verdict's exit 5 and words, no traceback, nothing written."""
    corpus(tmp_path)
    with BatchServerThread(delay=0.1, line_error_rate=1.0, seed=5) as server:
        run = run_file(tmp_path, server.url, "openai", max_attempts=1)
        data = json.loads(run.read_text())
        data["limits"] = {"budget_usd": 0.0002, "batch_size": 20}
        run.write_text(json.dumps(data))
        first = assay("run", str(run), "--wait", "-q", cwd=tmp_path)
    assert first.returncode == 5, first.stderr
    assert STOPPED["budget"][1] in first.stderr and "Traceback" not in first.stderr
    assert server.server.judge.stats.requests < N  # the budget stopped the fallback calls
    assert not (tmp_path / "out").exists()
