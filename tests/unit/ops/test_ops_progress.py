"""The progress display: the timestamped line without a terminal, the ETA, judges, stopping; the
gauges a running pipeline hands it (queue depths, input size). Fake clocks, no wall-clock waits."""

from __future__ import annotations

import doctest
import gzip
import io
import re
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

import assay.pipeline.progress as progress_module
from assay.connectors.base import Sink
from assay.connectors.file_source import FileSource
from assay.evaluators import TrajectoryMatch
from assay.observability.logs import ObservedProgress
from assay.pipeline import Pipeline, RunOptions
from assay.pipeline.progress import Gauges, JudgeGauge, Progress, WindowRate, eta_s, gauges_of
from assay.pipeline.summary import RunStats
from assay.stages import EvaluateStage
from assay.testing import ListSink, ListSource

T0 = 1_795_000_000.0  # 2026-11-18T11:06:40Z


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def stats(read: int, scored: int | None = None, failed: int = 0) -> RunStats:
    s = RunStats()
    s.counts["read"] = read
    s.counts["scored"] = read - failed if scored is None else scored
    s.counts["dead_letters"] = failed
    return s


def plain(clock: Clock, interval_s: float = 30.0) -> tuple[Progress, io.StringIO]:
    out = io.StringIO()
    p = Progress(stream=out, interval_s=interval_s, clock=clock, wall=lambda: T0 + clock.t - 100.0, tty=False)
    return p, out


def test_doctests() -> None:
    assert doctest.testmod(progress_module).failed == 0


def test_no_terminal_prints_a_timestamped_line_every_interval() -> None:
    clock = Clock()
    p, out = plain(clock, interval_s=30)
    with p:
        for second in range(1, 91):  # 90 s at 10 records/s, an update every second
            clock.t += 1
            p.update(stats(10 * second))
    lines = out.getvalue().splitlines()
    assert len(lines) == 3  # at 30, 60 and 90 s: not on every update
    assert lines[0].startswith("2026-11-18T11:07:10Z assay: read 300  scored 300  dead letters 0 | 10 rec/s")
    assert lines[2].startswith("2026-11-18T11:08:10Z assay: read 900 ")


def test_eta_from_bytes_read_of_the_known_size() -> None:
    clock = Clock()
    p, out = plain(clock, interval_s=10)
    total = 1_000_000
    for second in range(31):  # 1 kB/s of a 1 MB input, 10 records/s
        p.tick(Gauges(size_total=total, size_done=1000 * second, size_unit="bytes", taken=10 * second))
        p.update(stats(10 * second))
        clock.t += 1
    assert p.fraction() == pytest.approx(0.03)
    assert p.eta_s() == pytest.approx(970.0)
    last = out.getvalue().splitlines()[-1]
    assert "| 10 rec/s | 3% of 1.0 MB, ETA 16m10s" in last


def test_eta_counts_records_in_flight_as_not_done() -> None:
    """The source reads ahead of the workers: 200 of the 1,000 records taken are still in flight."""
    clock = Clock()
    p, _ = plain(clock)
    p.tick(Gauges(size_total=10_000, size_done=0, size_unit="bytes"))
    p.tick(Gauges(size_total=10_000, size_done=5_000, size_unit="bytes", taken=1_000, in_flight=200))
    assert p.fraction() == pytest.approx(0.4)  # 5,000 bytes read less 200 records at 5 bytes each


def test_eta_in_records_and_unknown_without_a_size() -> None:
    clock = Clock()
    p, _ = plain(clock)
    p.tick(Gauges(size_total=500, size_done=0))
    clock.t += 10
    p.tick(Gauges(size_total=500, size_done=100, taken=100))
    assert p.eta_s() == pytest.approx(40.0)
    assert "20% of 500 records, ETA 40s" in p.line()
    q, _ = plain(clock)
    q.tick(Gauges())
    assert q.eta_s() is None and "ETA" not in q.line() and "%" not in q.line()


def test_rates_follow_the_last_minute() -> None:
    r = WindowRate(window_s=60)
    for t in range(121):
        r.add(float(t), 100.0 * t if t <= 60 else 6000.0 + 10.0 * (t - 60))  # 100/s, then 10/s
    assert r.per_s() == pytest.approx(10.0)
    assert eta_s(1000, 400, 10.0) == 60.0


def test_judges_in_flight_and_current_rate() -> None:
    clock = Clock()
    p, _ = plain(clock)
    for second in range(61):  # 2 requests/s = 120 req/min, against an adaptive limit of 150
        p.tick(Gauges(judges={"gpt": JudgeGauge(in_flight=7, requests=2 * second, limit_rpm=150.0)}))
        clock.t += 1
    assert p.judge_rpm("gpt") == pytest.approx(120.0)
    assert "judge gpt: 7 in flight, 120 req/min (limit 150)" in p.line()


def test_stopping_says_what_it_is_doing() -> None:
    clock = Clock()
    p, _ = plain(clock)
    p.tick(Gauges(in_flight=512, grace_left_s=23.4, queues={"evaluate": (0, 4), "sink": (2, 4)}))
    line = p.line()
    assert "stopping: finishing 512 in-flight records, grace 23s left" in line
    assert "queued evaluate 0/4, sink 2/4" in line


def test_disabled_prints_nothing_and_json_events_instead_of_lines() -> None:
    clock = Clock()
    p = Progress(enabled=False, stream=io.StringIO(), clock=clock, interval_s=1)
    clock.t += 5
    p.update(stats(5))
    assert p.stream.getvalue() == ""  # type: ignore[attr-defined]
    seen: list[Gauges] = []
    o = ObservedProgress(events=False, interval_s=1, stream=io.StringIO(), clock=clock, gauge_observers=[seen.append])
    o.tick(Gauges(size_total=10))
    assert seen == [Gauges(size_total=10)]


class _Blocked(Sink):
    """A sink that takes nothing until released: the streams in front of it fill up."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.rows = 0

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        await self.release.wait()
        self.rows += len(rows)

    async def aclose(self) -> None:
        pass


GOOD = {"id": "t", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}


def test_gauges_of_a_running_pipeline_show_full_queues_and_the_input() -> None:
    anyio.run(_gauges_of_a_running_pipeline)


async def _gauges_of_a_running_pipeline() -> None:
    sink = _Blocked()
    source = ListSource([GOOD] * 400, batch_size=10)
    pipe = Pipeline(source, EvaluateStage([TrajectoryMatch()]), sink, ListSink(), RunOptions(buffer=3, workers=2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(pipe.run)
        with anyio.fail_after(10):
            while gauges_of(pipe).queues.get("evaluate", (0, 0))[0] < 3:  # noqa: ASYNC110 (a sampled gauge)
                await anyio.sleep(0.01)
        g = gauges_of(pipe)
        assert g.queues == {"evaluate": (3, 3), "sink": (3, 3)}
        assert g.size_total == 400 and g.size_unit == "records"
        # taken: 3 batches queued for the workers, one held by each of the 2 workers, 3 queued for
        # the sink, one in the sink, one in the pump waiting to send
        assert g.size_done == pipe.emitted == g.taken and 90 <= g.taken <= 120
        assert g.in_flight == g.taken
        sink.release.set()
    assert sink.rows == 400
    done = gauges_of(pipe)
    assert done.queues == {"evaluate": (0, 3), "sink": (0, 3)} and done.in_flight == 0


def test_cli_style_line_has_no_terminal_codes() -> None:
    clock = Clock()
    p, out = plain(clock, interval_s=1)
    clock.t += 1
    p.update(stats(3))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ assay: read 3 .*\n", out.getvalue())


class _Pool:
    """What ``gauges_of`` reads of a judge pool: ``JudgePool.stats()``."""

    def stats(self) -> dict[str, dict[str, object]]:
        return {"gpt": {"requests": 40, "in_flight": 6, "rate_rpm": 90.0}, "local": {"requests": 3, "in_flight": 0}}


def test_gauges_of_read_the_judge_pool() -> None:
    pipe = Pipeline(ListSource([GOOD] * 5), EvaluateStage([TrajectoryMatch()]), ListSink(), ListSink())
    g = gauges_of(pipe, _Pool())
    assert g.judges == {"gpt": JudgeGauge(6, 40, 90.0), "local": JudgeGauge(0, 3, None)}
    assert g.grace_left_s is None
    pipe.stop_deadline = 130.0
    assert gauges_of(pipe, now=100.0).grace_left_s == 30.0


def _read_all(src: FileSource) -> int:
    async def main() -> int:
        async with src:
            return sum([len(b) async for b in src.batches()])

    return anyio.run(main)


@pytest.mark.parametrize("compressed", [False, True])
def test_file_shards_report_shares_that_add_up_to_the_input(tmp_path: Path, compressed: bool) -> None:
    """Byte-range shards (plain JSON lines) and round-robin shards (gzip) alike: each shard's
    size_hint and size_done are its share, and the shards' shares add up to the input's size."""
    data = b"".join(b'{"id": "t%d", "messages": []}\n' % i for i in range(2000))
    path = tmp_path / ("in.jsonl.gz" if compressed else "in.jsonl")
    path.write_bytes(gzip.compress(data) if compressed else data)
    size = path.stat().st_size
    shards = [FileSource([str(path)], shard=(i, 3), batch_size=50) for i in range(3)]
    assert sum(_read_all(s) for s in shards) == 2000
    assert sum(s.size_done() or 0 for s in shards) == pytest.approx(size, abs=3)
    assert sum(s.size_hint() or 0 for s in shards) == pytest.approx(size, abs=3)
    whole = FileSource([str(path)], batch_size=50)
    assert whole.size_done() is None  # not opened: the size is not known yet
    _read_all(whole)
    assert whole.size_done() == whole.size_hint() == size


def test_workers_gauges_add_up_once_every_worker_knows() -> None:
    from assay.pipeline.shard import _COUNTS, _SLOTS, _SharedCounts, _sum_gauges

    counters = [0] * (2 * _SLOTS)
    a, b = _SharedCounts(counters, 0), _SharedCounts(counters, 1)
    assert _sum_gauges(counters, 2).size_total is None
    a.tick(Gauges(size_total=600, size_done=150, size_unit="bytes", in_flight=10, taken=40))
    assert _sum_gauges(counters, 2).size_total is None  # worker 1 has not published yet
    b.tick(Gauges(size_total=400, size_done=100, size_unit="bytes", in_flight=5, taken=30))
    assert _sum_gauges(counters, 2) == Gauges(1000, 250, "bytes", 15, 70)
    a.update(stats(40))
    assert counters[: len(_COUNTS)] == [40, 40, 0]


def test_json_logs_get_progress_events_with_the_eta_judges_and_queues() -> None:
    import json

    from assay.observability import setup_logging

    out = io.StringIO()
    setup_logging("json", run_id="r1", stream=out)
    clock = Clock()
    p = ObservedProgress(events=True, interval_s=10, clock=clock, stream=io.StringIO())
    for second in range(21):
        judges = {"gpt": JudgeGauge(in_flight=3, requests=second, limit_rpm=60.0)}
        p.update(stats(10 * second))
        p.tick(
            Gauges(size_total=1000, size_done=10 * second, taken=10 * second, judges=judges, queues={"sink": (1, 4)})
        )
        clock.t += 1
    assert p.stream.getvalue() == ""  # type: ignore[attr-defined]  # no plain lines beside JSON
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["progress", "progress"]
    last = events[-1]
    assert last["size_total"] == 1000 and last["size_done"] == 200 and last["size_unit"] == "records"
    assert last["eta_s"] == pytest.approx(80.0) and last["records_per_s"] == pytest.approx(10.0)
    assert last["judges"] == {"gpt": {"in_flight": 3, "rpm": 60.0, "limit_rpm": 60.0}}
    assert last["queues"] == {"sink": 1} and last["run_id"] == "r1"
    assert "ETA 1m20s" in last["message"]


def test_with_a_sampler_lines_come_even_when_no_batch_ends() -> None:
    """A judge that stalls finishes no batch: the sampler's ticks still print the line on time."""
    clock = Clock()
    p, out = plain(clock, interval_s=30)
    assert p.sample_every_s == 1.0 and plain(clock, interval_s=0.5)[0].sample_every_s == 0.25
    p.update(stats(100))
    for _ in range(61):
        p.tick(Gauges(judges={"gpt": JudgeGauge(in_flight=32, requests=500)}))
        clock.t += 1
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and all("read 100 " in ln and "judge gpt: 32 in flight, 0 req/min" in ln for ln in lines)
