"""The Parquet source: rows as records, the columnar fast path equal to the general one, sharding
by (file, row group), resume by (file, row), detection by suffix and magic, and a plain nested
table scored with no configuration."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from assay.config import build_config
from assay.connectors.builtin import FILE
from assay.connectors.exports import AssembleExports
from assay.connectors.parquet_rows import batch_records, parquet_files
from assay.connectors.parquet_source import ParquetSource
from assay.connectors.registry import SourceContext
from assay.records import Envelope, Failure
from assay.stages.normalize import RecordParser, parse_envelope
from assay.traces.model import Trace
from assay.traces.normalize import DEFAULT_OPTIONS
from assay.traces.openai_decode import decode_openai_record
from tests.conftest import agent_messages

FN = pa.struct([("name", pa.string()), ("arguments", pa.string())])
CALL = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", FN)])
MSG = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(CALL)),
        ("tool_call_id", pa.string()),
        ("name", pa.string()),
    ]
)
SCHEMA = pa.schema([("id", pa.string()), ("messages", pa.list_(MSG)), ("reference", pa.list_(MSG))])


def rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    tools = ["search", "get_order", "send_email"]
    out = []
    for i in range(n):
        calls = [(rnd.choice(tools), {"q": rnd.randint(0, 3)}) for _ in range(rnd.randint(0, 3))]
        ref = list(calls)
        if calls and rnd.random() < 0.4:
            ref = ref[:-1]
        out.append({"id": f"t{i}", "messages": agent_messages(*calls), "reference": agent_messages(*ref)})
    return out


def write(path: Path, records: list[dict[str, Any]], row_group_size: int = 10, schema: pa.Schema = SCHEMA) -> Path:
    pq.write_table(pa.Table.from_pylist(records, schema), path, row_group_size=row_group_size)
    return path


async def read_all(src: ParquetSource) -> list[Envelope]:
    async with src:
        return [e async for b in src.batches() for e in b]


def ids(envs: list[Envelope]) -> list[str]:
    return [e.record.as_dict()["id"] for e in envs]


def test_rows_in_order_with_positions_file_and_row(tmp_path: Path) -> None:
    f = write(tmp_path / "a.parquet", rows(25))
    envs = anyio.run(read_all, ParquetSource([str(f)], batch_size=7))
    assert ids(envs) == [f"t{i}" for i in range(25)]
    assert [e.position.line for e in envs] == list(range(1, 26))
    assert {e.position.source for e in envs} == {str(f)}


def test_fast_path_equals_the_general_path_and_the_json_line(tmp_path: Path) -> None:
    recs = rows(60, seed=3)
    recs[5]["messages"][1]["content"] = None
    recs[7]["messages"][1]["role"] = "ai"  # an alias: the fast path declines, the general path reads it
    recs[9]["reference"] = None
    recs[11]["messages"][2:2] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "x", "arguments": "[1]"}}],
        }
    ]
    f = write(tmp_path / "a.parquet", recs)
    envs = anyio.run(read_all, ParquetSource([str(f)]))
    parser = RecordParser(DEFAULT_OPTIONS, projected=True)
    fast_hits = 0
    for env in envs:
        fast = env.record.trace()
        general = parse_envelope(env, DEFAULT_OPTIONS)
        line = decode_openai_record(orjson.dumps(env.record.as_dict()))
        assert not isinstance(general, Failure)
        general.scenario = None  # the general path keeps the whole record there; the fast paths never
        if fast is not None:
            fast_hits += 1
            assert fast == general == line
        parsed = parser(env)
        assert isinstance(parsed, Trace)
        parsed.scenario = None
        assert parsed == general
    assert fast_hits == 59  # every row but the role alias


def test_shards_split_by_file_and_row_group_and_cover_every_row_once(tmp_path: Path) -> None:
    write(tmp_path / "a.parquet", rows(35), row_group_size=10)  # 4 row groups
    write(tmp_path / "b.parquet", rows(12, seed=1), row_group_size=5)  # 3 row groups
    seen: list[tuple[str, int]] = []
    per_shard = []
    for i in range(3):
        envs = anyio.run(read_all, ParquetSource([str(tmp_path)], shard=(i, 3)))
        per_shard.append(len(envs))
        seen += [(e.position.source, e.position.line or 0) for e in envs]
    assert len(seen) == len(set(seen)) == 47
    assert all(n > 0 for n in per_shard)


def test_resume_skips_acknowledged_rows_and_whole_row_groups(tmp_path: Path) -> None:
    f = write(tmp_path / "a.parquet", rows(40), row_group_size=10)

    async def first() -> Any:
        src = ParquetSource([str(f)], batch_size=8)
        async with src:
            envs = [e async for b in src.batches() for e in b]
            done = envs[:12] + envs[25:27]
            random.Random(1).shuffle(done)
            await src.ack([e.position for e in done])
            return src.snapshot()

    state = anyio.run(first)
    assert state == {str(f): [[1, 12], [26, 27]]}
    src = ParquetSource([str(f)], resume_state=json.loads(json.dumps(state)))
    envs = anyio.run(read_all, src)
    assert ids(envs) == [f"t{i}" for i in range(12, 40) if i not in (25, 26)]
    assert src.size_done() == 40


async def read_units(src: ParquetSource, rows: int) -> list[Any]:
    async with src:
        return [u async for u in src.arrow_batches(rows)]


def test_arrow_batches_span_consecutive_row_groups(tmp_path: Path) -> None:
    """The columnar engine's units: ``rows`` rows at a time across the row groups of a file (row
    groups of 10 make units of 16), each unit's rows the file's rows ``first + 1 ..``."""
    write(tmp_path / "a.parquet", rows(35), row_group_size=10)
    write(tmp_path / "b.parquet", rows(12, seed=1), row_group_size=5)
    units = anyio.run(read_units, ParquetSource([str(tmp_path)]), 16)
    assert [(u.name.rsplit("/", 1)[1], u.first, u.num_rows) for u in units] == [
        ("a.parquet", 0, 16),
        ("a.parquet", 16, 16),
        ("a.parquet", 32, 3),
        ("b.parquet", 0, 12),
    ]
    assert units[0].batch.column("id").to_pylist() == [f"t{i}" for i in range(16)]
    assert units[1].span().line == 17 and units[1].span().last == 32
    assert all(u.done is None for u in units)


def test_arrow_batches_of_a_shard_never_join_row_groups_of_another(tmp_path: Path) -> None:
    """A shard's row groups are every n-th: a unit spans only row groups that follow each other
    in the file, so the rows of every unit are the file's consecutive rows and every row of the
    input is in exactly one shard's units."""
    write(tmp_path / "a.parquet", rows(35), row_group_size=10)
    seen: list[int] = []
    for i in range(2):
        for u in anyio.run(read_units, ParquetSource([str(tmp_path)], shard=(i, 2)), 64):
            got = u.batch.column("id").to_pylist()
            assert got == [f"t{r}" for r in range(u.first, u.first + u.num_rows)]
            assert u.num_rows <= 10
            seen += range(u.first, u.first + u.num_rows)
    assert sorted(seen) == list(range(35))


def test_arrow_batches_after_a_resume_skip_done_row_groups_and_mark_touched_units(tmp_path: Path) -> None:
    f = write(tmp_path / "a.parquet", rows(40), row_group_size=10)
    state = {str(f): [[1, 12], [15, 16]]}
    units = anyio.run(read_units, ParquetSource([str(f)], resume_state=state), 16)
    # rows 1-10 (a whole row group) are not read; 11-12 and 15-16 are in the unit that says so
    assert [(u.first, u.num_rows) for u in units] == [(10, 16), (26, 14)]
    assert units[0].done is not None and units[1].done is None
    assert units[0].pending_rows() == 12
    envs = units[0].envelopes()
    assert [e.position.line for e in envs] == [13, 14, *range(17, 27)]
    assert ids(envs) == [f"t{i}" for i in (12, 13, *range(16, 26))]


def test_a_unit_cut_into_pieces_and_some_of_its_rows_as_envelopes(tmp_path: Path) -> None:
    f = write(tmp_path / "a.parquet", rows(35), row_group_size=10)
    (unit,) = anyio.run(read_units, ParquetSource([str(f)]), 64)
    pieces = unit.pieces(16)
    assert [(p.first, p.num_rows) for p in pieces] == [(0, 16), (16, 16), (32, 3)]
    assert pieces[2].batch.column("id").to_pylist() == ["t32", "t33", "t34"]
    some = unit.envelopes([3, 17, 34])
    assert [e.position.line for e in some] == [4, 18, 35]
    assert ids(some) == ["t3", "t17", "t34"]
    whole = unit.envelopes()
    assert [e.record.as_dict() for e in some] == [whole[i].record.as_dict() for i in (3, 17, 34)]


def test_detection_by_suffix_magic_and_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    write(tmp_path / "d" / "x.parquet", rows(3))
    (tmp_path / "d" / "_SUCCESS").touch()
    (tmp_path / "d" / "_SUMMARY.json").write_text("{}")
    write(tmp_path / "nosuffix", rows(2))
    (tmp_path / "t.jsonl").write_text("{}\n")
    assert parquet_files([str(tmp_path / "d")]) == [str(tmp_path / "d" / "x.parquet")]
    assert parquet_files([str(tmp_path / "nosuffix")]) == [str(tmp_path / "nosuffix")]
    assert parquet_files([str(tmp_path / "t.jsonl")]) is None
    cfg = build_config(
        {"source": {"path": str(tmp_path / "nosuffix")}, "evaluators": ["exact_match"], "sink": {"path": "o/"}}
    )
    src = FILE.build_source(cfg.source, SourceContext())
    assert isinstance(src, AssembleExports) and isinstance(src.inner, ParquetSource)  # exports grouped by trace id
    cfg = build_config(
        {"source": {"path": str(tmp_path / "t.jsonl")}, "evaluators": ["exact_match"], "sink": {"path": "o/"}}
    )
    src = FILE.build_source(cfg.source, SourceContext())
    assert isinstance(src, AssembleExports) and not isinstance(src.inner, ParquetSource)


def test_json_text_columns_are_decoded_and_nested_structs_read_as_dicts(tmp_path: Path) -> None:
    table = pa.table(
        {
            "trace_id": ["r1"],
            "inputs": ['{"question": "2+2?"}'],
            "outputs": ['{"messages": [{"role": "assistant", "content": "4"}]}'],
            "note": ["[not json"],
            "tags": [[{"k": "a", "v": None}]],
        }
    )
    pq.write_table(table, tmp_path / "x.parquet")
    rec = batch_records(pq.read_table(tmp_path / "x.parquet"))[0]
    assert rec["inputs"] == {"question": "2+2?"}
    assert rec["outputs"]["messages"][0]["content"] == "4"
    assert rec["note"] == "[not json"
    assert rec["tags"] == [{"k": "a", "v": None}]
    env = anyio.run(read_all, ParquetSource([str(tmp_path / "x.parquet")]))[0]
    trace = parse_envelope(env, DEFAULT_OPTIONS)
    assert isinstance(trace, Trace) and trace.id == "r1" and trace.final_output == "4"


def test_a_plain_nested_table_scores_with_no_configuration(tmp_path: Path) -> None:
    from assay.pipeline.run import execute

    recs = rows(30, seed=5)
    write(tmp_path / "traces.parquet", recs)
    (tmp_path / "traces.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = {}
    for name in ("traces.parquet", "traces.jsonl"):
        cfg = build_config(
            {
                "source": {"path": str(tmp_path / name)},
                "evaluators": ["trajectory_match:mode=strict"],
                "sink": {"path": str(tmp_path / f"{name}.out.jsonl")},
                "state_dir": str(tmp_path / ".assay"),
            }
        )
        report = anyio.run(lambda cfg=cfg: execute(cfg))
        assert report.exit_code in (0, 3), report.summary
        got = [json.loads(line) for line in (tmp_path / f"{name}.out.jsonl").read_text().splitlines()]
        out[name] = {r["trace_id"]: r["results"]["trajectory_strict_match"]["score"] for r in got}
    assert len(out["traces.parquet"]) == 30
    assert out["traces.parquet"] == out["traces.jsonl"]
    assert 0 < sum(out["traces.parquet"].values()) < 30


def test_a_bad_row_becomes_a_dead_letter_with_the_row_as_json(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"id": ["ok", "bad"], "messages": ['[{"role": "user", "content": "x"}]', "[1, 2]"]}),
        tmp_path / "x.parquet",
    )
    envs = anyio.run(read_all, ParquetSource([str(tmp_path / "x.parquet")]))
    bad = parse_envelope(envs[1], DEFAULT_OPTIONS)
    assert isinstance(bad, Failure)
    assert json.loads(bad.payload)["id"] == "bad"


def test_without_text_readers_the_content_columns_stay_unread(tmp_path: Path) -> None:
    recs = rows(30, seed=9)
    f = write(tmp_path / "a.parquet", recs)
    full = anyio.run(read_all, ParquetSource([str(f)]))
    lean = anyio.run(read_all, ParquetSource([str(f)], skip_text=True))
    assert "content" not in str(lean[0].record.rows.batch.schema.field("messages").type)
    for a, b in zip(full, lean, strict=True):
        ta, tb = a.record.trace(), b.record.trace()
        assert ta is not None and tb is not None
        assert [(m.role, m.tool_calls, m.tool_call_id) for m in ta.messages] == [
            (m.role, m.tool_calls, m.tool_call_id) for m in tb.messages
        ]
        assert {m.content for m in tb.messages} == {""}
    # the engine asks for it only when no evaluator of the run reads text
    cfg = build_config({"source": {"path": str(f)}, "evaluators": ["exact_match"], "sink": {"path": "o/"}})
    src = FILE.build_source(cfg.source, SourceContext(reads_text=False))
    assert getattr(src, "inner", src).skip_text is True


def test_trajectory_match_is_the_evaluator_that_reads_no_text() -> None:
    from assay.registry import build_evaluator

    assert build_evaluator("trajectory_match", {}).reads_text is False
    assert build_evaluator("exact_match", {}).reads_text is True
