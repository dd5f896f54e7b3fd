"""Every source: end of stream, order within a partition, resume from acknowledged positions,
acknowledgement in any order, idempotent close, bad records passed on (never dropped)."""

from __future__ import annotations

import random
from collections import defaultdict

import anyio
import orjson

from assay.connectors.base import Source
from assay.records import Envelope
from tests.contract.harness import SourceHarness

RECORDS = [orjson.dumps({"id": f"t{i}", "n": i}) for i in range(50)]


async def _read_all(src: Source) -> list[Envelope]:
    return [env async for batch in src.batches() for env in batch]


def _ids(envs: list[Envelope]) -> list[str]:
    return [orjson.loads(e.payload)["id"] for e in envs if e.payload.startswith(b"{")]


def test_end_of_stream_yields_every_record_once(source_harness: SourceHarness) -> None:
    async def go() -> list[Envelope]:
        async with await source_harness.make(RECORDS, None) as src:
            return await _read_all(src)

    envs = anyio.run(go)
    assert sorted(_ids(envs)) == sorted(f"t{i}" for i in range(50))


def test_order_within_a_partition(source_harness: SourceHarness) -> None:
    async def go() -> list[Envelope]:
        async with await source_harness.make(RECORDS, None) as src:
            return await _read_all(src)

    per: dict[tuple[str, int | None], list[int]] = defaultdict(list)
    for env in anyio.run(go):
        p = env.position
        per[(p.source, p.partition)].append(p.offset if p.offset is not None else p.line or 0)
    assert per
    for seq in per.values():
        assert seq == sorted(seq) and len(set(seq)) == len(seq)


def test_resume_skips_what_was_acknowledged_in_any_order(source_harness: SourceHarness) -> None:
    async def first() -> tuple[object, set[str], set[str]]:
        async with await source_harness.make(RECORDS, None) as src:
            envs = await _read_all(src)
            acked = envs[:30]
            shuffled = list(acked)
            random.Random(7).shuffle(shuffled)
            for i in range(0, len(shuffled), 4):  # out of order, in small calls
                await src.ack([e.position for e in shuffled[i : i + 4]])
            return src.snapshot(), set(_ids(acked)), set(_ids(envs[30:]))

    state, acked, rest = anyio.run(first)

    async def second() -> list[Envelope]:
        async with await source_harness.make(RECORDS, state) as src:
            return await _read_all(src)

    again = set(_ids(anyio.run(second)))
    assert rest <= again  # never loses a record that was not acknowledged
    if source_harness.exact:
        assert not again & acked  # and a ledger never repeats one that was


def test_close_is_idempotent(source_harness: SourceHarness) -> None:
    async def go() -> None:
        src = await source_harness.make(RECORDS, None)
        async with src:
            async for _ in src.batches():
                break
        await src.aclose()
        await src.aclose()

    anyio.run(go)


def test_bad_records_are_passed_on_not_dropped(source_harness: SourceHarness) -> None:
    bad = [*RECORDS[:3], b"{not json", b"\xff\xfe garbage", *RECORDS[3:6]]

    async def go() -> list[Envelope]:
        async with await source_harness.make(bad, None) as src:
            envs = await _read_all(src)
            return envs + [Envelope(b"", pos) for pos, _ in src.read_errors]

    envs = anyio.run(go)
    assert len(envs) == len(bad)


def test_stop_ends_the_stream_early(source_harness: SourceHarness) -> None:
    async def go() -> int:
        n = 0
        async with await source_harness.make(RECORDS, None) as src:
            async for batch in src.batches():
                n += len(batch)
                src.stop()
        return n

    assert anyio.run(go) < len(RECORDS)
