"""Export rows grouped by trace id with memory bounded by a budget (an external sort): the same
traces as in memory whatever the number of runs, the temporary files closed, memory flat."""

from __future__ import annotations

import contextlib
import os
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from assay.connectors.builtin import FILE
from assay.connectors.path_config import SourceConfig
from assay.connectors.registry import SourceContext
from assay.records import Envelope, Position
from assay.stages.normalize import parse_envelope
from assay.traces.model import Trace
from assay.traces.normalize import NormalizeOptions
from assay.traces.row_groups import FAN_IN, RowGroups
from tests.support.exports import langsmith_export, write_jsonl

Rows = list[tuple[str | None, bytes, Any]]


def _rows(n: int, traces: int, seed: int = 0) -> Rows:
    """``n`` rows of ``traces`` traces in random order, one in 50 without a trace id; tags are
    positions (some of Kafka's kind) or, for a few, other picklable values."""
    r = random.Random(seed)
    out: Rows = []
    for i in range(n):
        tid = None if i % 50 == 7 else f"trace-{r.randrange(traces):05d}-é"
        tag: Any = Position(f"in-{i % 3}.jsonl", i) if i % 5 else Position("topic", None, i % 4, i)
        if i % 97 == 0:
            tag = ("other", i)
        out.append((tid, b'{"row":%d}' % i + b"x" * r.randrange(40), tag))
    return out


def _grouped(rows: Rows, budget: int, *, merge: bool = False) -> tuple[list[tuple[list[Any], list[bytes]]], int]:
    g: RowGroups[Any] = RowGroups(spill_bytes=budget)
    for tid, payload, tag in rows:
        g.add(tid, payload, tag)
        if merge and g.merge_due:
            g.merge()
    runs = g.runs
    out = list(g.drain())
    assert g.traces == len(out)
    return out, runs


def _by_first(groups: list[tuple[list[Any], list[bytes]]]) -> dict[bytes, tuple[list[Any], list[bytes]]]:
    return {payloads[0]: (tags, payloads) for tags, payloads in groups}


def test_thousands_of_runs_give_the_traces_held_in_memory() -> None:
    rows = _rows(6000, 400)
    memory, runs = _grouped(rows, 1 << 30)
    assert runs == 0
    for merge in (False, True):
        spilled, runs = _grouped(rows, 0, merge=merge)  # every row a run of its own
        assert runs == 5999  # the last row stays in memory
        assert _by_first(spilled) == _by_first(memory)  # same traces, same rows in the same order
        assert len(spilled) == len(memory) == 400 + sum(1 for tid, _, _ in rows if tid is None)
    assert memory[0][0][0] is rows[0][2]  # within the budget: first seen first, the tags as given


def test_rows_of_a_trace_spread_over_many_runs_come_in_arrival_order() -> None:
    rows = [(f"t{i % 7}", b"%d" % i, i) for i in range(5000)]
    for budget in (0, 300, 5000):
        groups, runs = _grouped(rows, budget)
        assert runs > FAN_IN
        assert [tags for tags, _ in groups] == [list(range(k, 5000, 7)) for k in range(7)]  # key order


def test_rows_without_a_trace_id_are_traces_of_their_own_and_sort_first() -> None:
    rows: Rows = [("b", b"1", 1), (None, b"2", 2), ("a", b"3", 3), (None, b"4", 4), ("b", b"5", 5)]
    assert [t for t, _ in _grouped(rows, 1 << 20)[0]] == [[1, 5], [2], [3], [4]]  # first seen
    assert [t for t, _ in _grouped(rows, 0)[0]] == [[2], [4], [3], [1, 5]]  # key order


def test_positions_come_back_equal() -> None:
    tags = [Position("a.jsonl", 3), Position("t", None, 2, 10**12), Position("b", None), Position("a.jsonl", -1, 0, 0)]
    groups, _ = _grouped([(str(i), b"x", t) for i, t in enumerate(tags)], 0)
    assert [t for ts, _ in groups for t in ts] == tags


def _temp_fds(where: Path) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/self/fd/{fd}").startswith(str(where))
    return n


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_temporary_files_are_in_the_temp_dir_and_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rows = _rows(3000, 100)

    def filled() -> RowGroups[Any]:
        g: RowGroups[Any] = RowGroups(spill_bytes=2000)
        for tid, payload, tag in rows:
            g.add(tid, payload, tag)
        assert g.spilled and _temp_fds(tmp_path) >= 1
        return g

    list(filled().drain())  # drained: closed
    assert _temp_fds(tmp_path) == 0
    it = filled().drain()
    next(it)
    it.close()  # abandoned mid-drain (cancellation): closed
    assert _temp_fds(tmp_path) == 0
    filled().close()  # never drained
    assert _temp_fds(tmp_path) == 0
    assert not list(tmp_path.iterdir())


def _small_rows(n: int) -> Iterator[tuple[str, bytes, Position]]:
    for i in range(n):
        yield f"{(i * 7919) % (n // 5):08x}", b'{"i":%d,"x":"........"}' % i, Position("export.jsonl", i)


def test_memory_does_not_grow_with_the_rows() -> None:
    """200,000 small rows grouped with a 1 MiB budget: the peak of Python allocations stays within
    a few MB (the budget, the merge's read buffers); held in memory, the same rows take ~60 MB."""
    n = 200_000
    tracemalloc.start()
    try:
        g: RowGroups[Position] = RowGroups(spill_bytes=1 << 20)
        for tid, payload, tag in _small_rows(n):
            g.add(tid, payload, tag)
            if g.merge_due:
                g.merge()
        rows = sum(len(payloads) for _, payloads in g.drain())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rows == n and g.traces == n // 5 and g.runs > 40
    assert peak < 4 << 20, peak


# -- the stage, end to end: an export whose traces are spread over several files ----------------


def _spread(tmp_path: Path, n_traces: int, n_files: int) -> tuple[list[Path], dict[str, Any]]:
    """A LangSmith ``list_runs`` dump whose rows are shuffled over ``n_files`` files (the rows of a
    trace in several of them)."""
    rows, expected = langsmith_export(n_traces, seed=21)
    random.Random(22).shuffle(rows)
    files = [rows[i::n_files] for i in range(n_files)]
    return [write_jsonl(tmp_path / f"runs-{i}.jsonl", f) for i, f in enumerate(files)], expected


async def _read(paths: list[Path], budget: int | None, state: Any = None, ack: int = 0) -> Any:
    extra = {} if budget is None else {"export_memory_bytes": budget}
    config = SourceConfig(path=[str(p) for p in paths], **extra)
    src = FILE.build_source(config, SourceContext(batch_size=7, resume_state=state))
    envs: list[Envelope] = []
    async with src:
        async for batch in src.batches():
            envs.extend(batch)
        await src.ack([e.position for e in envs[:ack]])
        readings = dict(src.readings)  # type: ignore[attr-defined]
    traces: dict[str, list[Any]] = {}
    for env in envs:
        t = parse_envelope(env, NormalizeOptions())
        assert isinstance(t, Trace) and t.id is not None and t.id not in traces
        traces[t.id] = [orjson.loads(env.payload), t.to_dict()]
    return traces, [e.position for e in envs], readings, src.snapshot()


def test_an_export_spread_over_files_is_grouped_the_same_with_a_tiny_budget(tmp_path: Path) -> None:
    paths, expected = _spread(tmp_path, 40, 4)
    memory, _, readings, _ = anyio.run(_read, paths, None)
    assert set(memory) == set(expected)
    assert all(r.endswith("across 4 inputs into 40 traces") for r in readings.values()), readings
    spilled, positions, readings, _ = anyio.run(_read, paths, 2000)
    assert spilled == memory  # the same traces, rows, and canonical traces
    assert list(spilled) == sorted(spilled)  # in trace id order
    assert all("into 40 traces, in trace id order (rows held on disk: " in r for r in readings.values()), readings
    again = anyio.run(_read, paths, 2000)
    assert again[1] == positions  # the same order on every run


def test_a_spilled_export_resumes_exactly(tmp_path: Path) -> None:
    paths, expected = _spread(tmp_path, 30, 3)
    first, _, _, state = anyio.run(_read, paths, 1500, None, 11)
    done = set(list(first)[:11])
    rest, _, _, _ = anyio.run(_read, paths, 1500, state)
    assert set(rest) == set(expected) - done  # acked traces skipped whole, the others whole
    assert all(rest[tid] == first[tid] for tid in rest)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_source_closed_mid_drain_closes_its_temporary_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    (tmp_path / "in").mkdir()
    paths, _ = _spread(tmp_path / "in", 300, 2)
    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))

    async def first_batch() -> int:
        config = SourceConfig(path=[str(p) for p in paths], export_memory_bytes=20_000)
        src = FILE.build_source(config, SourceContext(batch_size=50))
        n = 0
        async with src:
            async for batch in src.batches():
                assert _temp_fds(spill) >= 1  # traces being given out from sorted runs
                n = len(batch)
                break
        assert _temp_fds(spill) == 0  # closed with the source (the source still referenced)
        return n

    assert anyio.run(first_batch) > 0
    assert _temp_fds(spill) == 0


def test_session_mode_groups_an_export_input_the_same_with_a_tiny_budget(tmp_path: Path) -> None:
    """``read_mode: sessions`` groups export rows input by input: the same traces past the budget."""
    rows, expected = langsmith_export(12, seed=23)
    random.Random(24).shuffle(rows)
    path = write_jsonl(tmp_path / "runs.jsonl", rows)

    async def read(budget: int | None) -> tuple[dict[str, Any], str]:
        extra = {} if budget is None else {"export_memory_bytes": budget}
        config = SourceConfig(path=str(path), read_mode="sessions", **extra)
        src = FILE.build_source(config, SourceContext(batch_size=5))
        traces: dict[str, Any] = {}
        async with src:
            async for batch in src.batches():
                for env in batch:
                    t = parse_envelope(env, NormalizeOptions())
                    assert isinstance(t, Trace) and t.id is not None and t.id not in traces
                    traces[t.id] = t.to_dict()
        return traces, src.readings[str(path)]  # type: ignore[attr-defined]

    memory, reading = anyio.run(read, None)
    assert set(memory) == set(expected) and reading.endswith("into 12 traces")
    spilled, reading = anyio.run(read, 1000)
    assert spilled == memory and list(spilled) == sorted(spilled)
    assert reading.startswith(f"{len(rows)} export rows grouped by trace id into 12 traces, in trace id order")
