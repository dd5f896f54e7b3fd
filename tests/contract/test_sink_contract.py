"""Every sink: rows in order after publish, durable at flush and exactly restored after a crash,
start over removes earlier outputs, idempotent close, dead letters with position and reason, and
the engine acknowledges a position only after the sinks made its row durable."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import orjson
import pytest

from assay.connectors.base import Sink
from assay.evaluators.heuristic import ExactMatch
from assay.pipeline.commit import Committer
from assay.pipeline.runner import Pipeline, RunOptions
from assay.records import Failure, Position
from assay.stages.evaluate import EvaluateStage
from assay.testing import ListSink, ListSource
from tests.contract.harness import SinkHarness

ROWS = [orjson.dumps({"trace_id": f"t{i}", "i": i}) for i in range(23)]


async def _publish(sink: Sink) -> None:
    await sink.flush()
    await sink.publish({"status": "ok"}, success=True)


def test_rows_in_order_after_publish(sink_harness: SinkHarness) -> None:
    async def go() -> list[bytes]:
        async with await sink_harness.make(None) as sink:
            for i in range(0, len(ROWS), 4):
                await sink.write_batch(ROWS[i : i + 4], [f"t{j}" for j in range(i, min(i + 4, len(ROWS)))])
            await _publish(sink)
        return await sink_harness.read()

    assert anyio.run(go) == ROWS


def test_a_crash_after_flush_keeps_exactly_the_flushed_rows(sink_harness: SinkHarness) -> None:
    async def go() -> list[bytes]:
        sink = await sink_harness.make(None)
        await sink.open()
        await sink.write_batch(ROWS[:12])
        await sink.flush()
        state = sink.snapshot()
        await sink.write_batch(ROWS[12:17])  # never flushed: the process dies here (no close)
        async with await sink_harness.make(orjson.loads(orjson.dumps(state))) as again:
            await again.write_batch(ROWS[12:])
            await _publish(again)
        return await sink_harness.read()

    got = anyio.run(go)
    if sink_harness.exact:
        assert got == ROWS
    else:
        assert set(ROWS) <= set(got)


def test_close_discards_rows_written_after_the_last_flush(sink_harness: SinkHarness) -> None:
    """A run that fails (or stops) between commits closes its sinks without a flush: what they
    hold after the last flush must not become visible, and a resume from the snapshot taken after
    close publishes exactly the flushed rows."""
    if not sink_harness.exact or not sink_harness.extra.get("close_discards", True):
        pytest.skip(f"{sink_harness.name}: keeps what was written")

    async def go() -> tuple[list[bytes], list[bytes]]:
        sink = await sink_harness.make(None)
        async with sink:
            await sink.write_batch(ROWS[:12])
            await sink.flush()
            await sink.write_batch(ROWS[12:17])  # the run fails here: never flushed
        seen = await sink_harness.read()
        async with await sink_harness.make(orjson.loads(orjson.dumps(sink.snapshot()))) as again:
            await _publish(again)
        return seen, await sink_harness.read()

    seen, published = anyio.run(go)
    assert not set(seen) & set(ROWS[12:17])
    assert published == ROWS[:12]


def test_start_over_removes_earlier_outputs(sink_harness: SinkHarness) -> None:
    if not sink_harness.extra.get("start_over", True):
        pytest.skip(f"{sink_harness.name}: a topic is append-only (reruns are at-least-once)")

    async def go() -> list[bytes]:
        async with await sink_harness.make(None) as sink:
            await sink.write_batch(ROWS)
            await _publish(sink)
        async with await sink_harness.make(None) as sink:
            await sink.write_batch(ROWS[:3])
            await _publish(sink)
        return await sink_harness.read()

    assert anyio.run(go) == ROWS[:3]


def test_close_is_idempotent(sink_harness: SinkHarness) -> None:
    async def go() -> None:
        sink = await sink_harness.make(None)
        async with sink:
            await sink.write_batch(ROWS[:2])
        await sink.aclose()
        await sink.aclose()

    anyio.run(go)


def test_dead_letters_keep_position_and_reason(sink_harness: SinkHarness) -> None:
    failure = Failure(b"{not json", Position("in.jsonl", 7), "parse", "JSONDecodeError", "in.jsonl:7: bad")

    async def go() -> list[bytes]:
        async with await sink_harness.make(None) as sink:
            await sink.write_failures([failure])
            await _publish(sink)
        return await sink_harness.read()

    rows = anyio.run(go)
    assert len(rows) == 1
    if sink_harness.name == "kafka":  # the original bytes; the reason travels in headers
        assert rows[0] == b"{not json"
        return
    d = orjson.loads(rows[0])
    assert d["line"] == 7 and d["stage"] == "parse" and "bad" in d["error"] and d["raw"] == "{not json"


class _Recording(Sink):
    """Wraps a sink and logs flushes, so the test can see what the source was told and when."""

    def __init__(self, inner: Sink, log: list[Any]) -> None:
        self.inner, self.log = inner, log
        self.written = 0

    async def open(self) -> None:
        await self.inner.open()

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        await self.inner.write_batch(rows, keys)
        self.written += len(rows)

    async def flush(self) -> None:
        await self.inner.flush()
        self.log.append(("flush", self.written))

    def snapshot(self) -> Any:
        return self.inner.snapshot()

    async def aclose(self) -> None:
        await self.inner.aclose()


class _AckLog(ListSource):
    def __init__(self, items: list[Any], log: list[Any]) -> None:
        super().__init__(items, batch_size=5)
        self.log = log

    async def ack(self, positions: Sequence[Position]) -> None:
        await super().ack(positions)
        self.log.append(("ack", len(self.acked)))


@pytest.mark.parametrize("interval", [0.0, 3600.0])
def test_the_engine_acknowledges_only_what_is_durable(sink_harness: SinkHarness, interval: float) -> None:
    items = [{"id": f"t{i}", "outputs": "a", "reference_outputs": "a"} for i in range(40)]
    log: list[Any] = []

    async def go() -> None:
        sink = _Recording(await sink_harness.make(None), log)
        source = _AckLog(items, log)
        dead = ListSink()
        commit = Committer(
            source, {"results": sink, "dead": dead}, store=None, writer=0, state=dict, interval_s=interval
        )
        pipe = Pipeline(source, EvaluateStage([ExactMatch()]), sink, dead, RunOptions(batch_size=5), committer=commit)
        async with sink:
            await pipe.run()
            await commit.commit()

    anyio.run(go)
    assert [e for e in log if e[0] == "ack"][-1] == ("ack", 40)
    durable = 0
    for kind, n in log:
        if kind == "flush":
            durable = n
        else:
            assert n <= durable, f"acknowledged {n} positions with {durable} rows durable"
