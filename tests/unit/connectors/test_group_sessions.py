"""GroupSessions over any source: sessions across batches, ack expansion, resume; the ledger and
the ListSource double on the new contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import orjson

from assay.connectors.file_source import FileSource
from assay.connectors.ledger import LineLedger, position_key
from assay.connectors.sessions import GroupSessions
from assay.records import Position
from assay.testing import ListSource


def row(sid: str, n: int, parent: str | None = None) -> dict[str, Any]:
    return {"type": "user", "sessionId": sid, "uuid": f"{sid}{n}", "parentUuid": parent, "n": n}


ROWS = [row("a", 1), row("a", 2, "a1"), row("a", 3, "a2"), row("b", 1), row("b", 2, "b1"), row("c", 1)]


async def _groups(src: GroupSessions) -> list[tuple[int | None, list[int]]]:
    out = []
    async with src:
        async for batch in src.batches():
            out.extend((e.position.line, [r["n"] for r in orjson.loads(e.payload)]) for e in batch)
    return out


def test_sessions_are_cut_across_inner_batches() -> None:
    for batch_size in (1, 2, 4, 100):
        got = anyio.run(_groups, GroupSessions(ListSource(ROWS, batch_size=batch_size)))
        assert got == [(1, [1, 2, 3]), (4, [1, 2]), (6, [1])], batch_size


def test_acking_a_session_acks_every_member_to_the_inner_source() -> None:
    inner = ListSource([*ROWS[:3], b"not json", *ROWS[3:]], batch_size=2)

    async def run() -> tuple[list[int | None], Any, list[tuple[Position, str]]]:
        async with GroupSessions(inner) as src:
            positions = [e.position async for batch in src.batches() for e in batch]
            errors = list(src.read_errors)
            # the engine acks out of order, read errors included
            await src.ack([positions[2], *(p for p, _ in errors), positions[0]])
            return [p.line for p in positions], src.snapshot(), errors

    lines, snapshot, errors = anyio.run(run)
    assert lines == [1, 5, 7]
    assert [(p.line, "invalid JSON" in msg) for p, msg in errors] == [(4, True)]
    assert sorted(p.line for p in inner.acked if p.line is not None) == [1, 2, 3, 4, 7]
    assert snapshot == {"<list>": [[1, 4], [7, 7]]}
    # resume: the inner source skips acknowledged rows; the remaining session comes back whole
    again = anyio.run(_groups, GroupSessions(ListSource([*ROWS[:3], b"not json", *ROWS[3:]], resume_state=snapshot)))
    assert again == [(5, [1, 2])]


def test_a_session_never_spans_two_files_and_shards_split_by_session(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:2]))
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(r) + "\n" for r in [row("a", 9, "a2"), *ROWS[3:]]))
    whole = anyio.run(_groups, GroupSessions(FileSource([str(a), str(b)])))
    assert whole == [(1, [1, 2]), (1, [9]), (2, [1, 2]), (4, [1])]
    shards = [anyio.run(_groups, GroupSessions(FileSource([str(a), str(b)]), shard=(i, 2))) for i in range(2)]
    assert len(shards[0]) + len(shards[1]) == 4 and sorted(shards[0] + shards[1]) == sorted(whole)


def test_file_source_read_mode_sessions_still_works(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in ROWS))

    async def run() -> tuple[list[int | None], Any]:
        async with FileSource([str(f)], read_mode="sessions") as src:
            positions = [e.position async for batch in src.batches() for e in batch]
            await src.ack(positions[:1])
            return [p.line for p in positions], src.snapshot()

    assert anyio.run(run) == ([1, 4, 6], {str(f): [[1, 3]]})


def test_ledger_round_trip_and_keys() -> None:
    led = LineLedger()
    led.add([Position("f", 5), Position("f", 3), Position("f", 4), Position("g", 1, offset=9), Position("k", None)])
    assert led.to_json() == {"f": [[3, 5]], "g": [[9, 9]]}
    back = LineLedger.from_json(json.loads(json.dumps(led.to_json())))
    assert back.to_json() == led.to_json() and back.completed == 4
    assert back.is_done("f", 4) and not back.is_done("f", 6) and not back.is_done("h", 1)
    check = back.checker("f")
    assert check is not None and [check(n) for n in range(1, 8)] == [False, False, True, True, True, False, False]
    assert back.checker("h") is None
    assert position_key(Position("g", 1, offset=9)) == 9 and position_key(Position("f", 2)) == 2


def test_list_source_snapshot_and_resume() -> None:
    async def run(state: Any) -> tuple[list[int | None], Any]:
        async with ListSource(range(6), batch_size=4, resume_state=state) as src:
            seen = [e.position async for batch in src.batches() for e in batch]
            await src.ack(seen[::2])
            return [p.line for p in seen], src.snapshot()

    lines, state = anyio.run(run, None)
    assert lines == [1, 2, 3, 4, 5, 6] and state == {"<list>": [[1, 1], [3, 3], [5, 5]]}
    lines, state = anyio.run(run, state)
    assert lines == [2, 4, 6] and state == {"<list>": [[1, 3], [5, 6]]}


def test_rows_of_different_trace_ids_are_never_one_session() -> None:
    """A LangSmith run dump without parent links shares one ``session_id`` (the project) across
    traces: sessions are still cut wherever the trace id changes, in any batch size."""
    rows = [
        {"id": f"r{t}{i}", "trace_id": f"t{t}", "session_id": "project", "run_type": "chain", "inputs": {}, "n": i}
        for t in range(3)
        for i in range(3)
    ]
    for batch_size in (1, 2, 4, 100):
        got = anyio.run(_groups, GroupSessions(ListSource(rows, batch_size=batch_size)))
        assert got == [(1, [0, 1, 2]), (4, [0, 1, 2]), (7, [0, 1, 2])], batch_size
    # rows without a trace id keep the session rules (one session id: one session)
    plain = [{k: v for k, v in r.items() if k != "trace_id"} for r in rows]
    assert [len(g) for _, g in anyio.run(_groups, GroupSessions(ListSource(plain, batch_size=2)))] == [9]
