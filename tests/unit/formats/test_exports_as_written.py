"""Exports built as the tools write them (:mod:`tests.support.sdk_exports`: LangSmith runs recorded by
the SDKs, Langfuse rows as its field reference documents them), their rows shuffled *across*
several Parquet files: read as they are, exactly one trace per trace id with the right calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.connectors.builtin import FILE
from assay.connectors.path_config import SourceConfig
from assay.connectors.registry import SourceContext
from assay.records import Envelope
from assay.traces.model import Trace

pytest.importorskip("pyarrow")
pytest.importorskip("langsmith")
pytest.importorskip("langchain_core")
pytest.importorskip("openai")

from tests.support.exports import traces_by_id
from tests.support.sdk_exports import (
    langfuse_blob_export,
    langfuse_langchain_export,
    langfuse_schema,
    langsmith_schema,
    langsmith_sdk_export,
    legacy_observations,
    list_runs_lines,
    shuffled,
    write_shuffled_parquet,
)


@pytest.fixture(scope="module")
def langsmith_runs() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    return langsmith_sdk_export(4, seed=1)


@pytest.fixture(scope="module")
def langfuse_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    return langfuse_blob_export(4, seed=2)


def _read(paths: list[Path], shard: tuple[int, int] | None = None) -> dict[str, Trace]:
    async def read() -> list[Envelope]:
        config = SourceConfig(path=[str(p) for p in paths])
        out: list[Envelope] = []
        async with FILE.build_source(config, SourceContext(batch_size=5, shard=shard)) as src:
            async for batch in src.batches():
                out.extend(batch)
            assert not src.read_errors
        return out

    return traces_by_id(anyio.run(read))


def _check(traces: dict[str, Trace], expected: dict[str, dict[str, Any]], fmt: str) -> None:
    assert set(traces) == set(expected)
    for tid, want in expected.items():
        t = traces[tid]
        assert t.format == fmt and not t.warnings, (tid, t.warnings)
        calls = t.tool_calls()
        assert [(c.name, c.args) for c in calls] == [tuple(c) for c in want["calls"]], tid
        results = t.tool_results()
        assert all(c.id in results for c in calls) and len(results) == len(calls), "each call has its one result"
        assert (t.input, t.final_output) == (want["input"], want["final"])
        assert t.usage is not None and t.usage["total_tokens"] > 0


def test_langsmith_bulk_export_shuffled_across_files_is_one_trace_per_trace_id(
    tmp_path: Path, langsmith_runs: Any
) -> None:
    rows, expected = langsmith_runs
    paths = write_shuffled_parquet(tmp_path / "runs", rows, langsmith_schema(), seed=3)
    traces = _read(paths)
    _check(traces, expected, "langsmith")
    assert {t.metadata["session_id"] for t in traces.values()} == {rows[0]["session_id"]}


def test_langsmith_list_runs_dump_and_json_array(tmp_path: Path, langsmith_runs: Any) -> None:
    rows, expected = langsmith_runs
    lines = list_runs_lines(shuffled(rows, seed=4))
    jsonl, array = tmp_path / "runs.jsonl", tmp_path / "runs.json"
    jsonl.write_text("\n".join(lines) + "\n")
    array.write_text(json.dumps([json.loads(line) for line in lines]))
    _check(_read([jsonl]), expected, "langsmith")
    _check(_read([array]), expected, "langsmith")


@pytest.mark.parametrize("shards", [2, 3])
def test_sharded_reads_keep_each_trace_whole_in_one_shard(tmp_path: Path, langsmith_runs: Any, shards: int) -> None:
    rows, expected = langsmith_runs
    paths = write_shuffled_parquet(tmp_path / "runs", rows, langsmith_schema(), seed=5)
    jsonl = tmp_path / "more" / "runs.jsonl"
    jsonl.parent.mkdir()
    jsonl.write_text("\n".join(list_runs_lines(shuffled(rows, seed=6))) + "\n")
    for inputs in (paths, [jsonl]):
        got: dict[str, Trace] = {}
        for i in range(shards):
            part = _read(inputs, shard=(i, shards))
            assert not set(part) & set(got), "a trace read by two shards"
            got.update(part)
        _check(got, expected, "langsmith")


def test_langfuse_observations_v2_shuffled_across_files(tmp_path: Path, langfuse_rows: Any) -> None:
    observations, _, expected = langfuse_rows
    paths = write_shuffled_parquet(tmp_path / "observations_v2", observations, langfuse_schema("observations_v2"))
    traces = _read(paths)
    _check(traces, expected, "langfuse")
    assert all(t.metadata["name"] == "support-agent" and t.metadata["userId"] for t in traces.values())


def test_langfuse_v2_rows_without_input_or_output(tmp_path: Path, langfuse_rows: Any) -> None:
    """The enriched export writes an empty string for an input or output that was not set (an
    OTel root span): the task is then the first user message, not an empty string."""
    observations, _, expected = langfuse_rows
    rows = [{**o, "input": "", "output": ""} if o["type"] == "AGENT" else o for o in observations]
    paths = write_shuffled_parquet(tmp_path / "observations_v2", rows, langfuse_schema("observations_v2"), seed=14)
    _check(_read(paths), expected, "langfuse")


def test_langfuse_langchain_handler_generations_and_tool_messages(tmp_path: Path) -> None:
    """Langfuse's LangChain handler appends the bound tools' schemas to each generation's input as
    ``{"role": "tool", "content": <schema>}`` and records a tool's ToolMessage as its output: the
    trace holds no schema as a message, and each result is the tool's text, paired by call id."""
    rows, expected = langfuse_langchain_export(4, seed=3)
    paths = write_shuffled_parquet(tmp_path / "observations_v2", rows, langfuse_schema("observations_v2"), seed=11)
    traces = _read(paths)
    _check(traces, expected, "langfuse")
    for t in traces.values():
        assert [m.role for m in t.messages[:2]] == ["system", "user"]
        assert all(m.tool_call_id for m in t.messages if m.role == "tool"), "a tool schema read as a message"
        calls = {c.id: c for c in t.tool_calls()}
        for m in t.messages:
            if m.role == "tool":
                call = calls[m.tool_call_id]
                assert m.content == f"{call.name} -> {json.dumps(call.args, sort_keys=True)}"


def test_langfuse_legacy_pair_and_both_modes_in_one_folder(tmp_path: Path, langfuse_rows: Any) -> None:
    """The legacy pair joins on trace id; with the "legacy and enriched" mode the folder holds each
    observation twice (observations/ and observations_v2/): still each call once."""
    observations, trace_rows, expected = langfuse_rows
    legacy = legacy_observations(observations)
    write_shuffled_parquet(tmp_path / "observations", legacy, langfuse_schema("observations"), seed=7)
    write_shuffled_parquet(tmp_path / "traces", trace_rows, langfuse_schema("traces"), files=2, seed=8)
    traces = _read([tmp_path])
    _check(traces, expected, "langfuse")
    assert all(t.metadata["tags"] == ["prod", "support"] for t in traces.values())
    write_shuffled_parquet(tmp_path / "observations_v2", observations, langfuse_schema("observations_v2"), seed=9)
    _check(_read([tmp_path]), expected, "langfuse")


def test_a_langfuse_project_folder_with_its_scores_and_manifest(tmp_path: Path, langfuse_rows: Any) -> None:
    """The export's folder as Langfuse writes it ({project}/observations_v2/, scores/, manifests/):
    its scores are not read as traces (they were dead letters), its manifest is not an input."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from assay.traces.exports import is_langfuse_score_row

    observations, _, expected = langfuse_rows
    write_shuffled_parquet(tmp_path / "observations_v2", observations, langfuse_schema("observations_v2"), seed=12)
    (tmp_path / "scores").mkdir()
    (tmp_path / "manifests").mkdir()
    when = observations[0]["start_time"]
    score = {"id": "s1", "timestamp": when, "project_id": "cm-proj-1", "environment": "production"}
    score |= {"trace_id": next(iter(expected)), "observation_id": None, "session_id": None, "dataset_run_id": None}
    score |= {"name": "helpfulness", "value": 1.0, "source": "API", "comment": None, "data_type": "NUMERIC"}
    score |= {"string_value": None, "created_at": when, "updated_at": when}
    pq.write_table(pa.Table.from_pylist([score, {**score, "id": "s2"}]), tmp_path / "scores" / "2026-11-21.parquet")
    (tmp_path / "manifests" / "2026-11-21.json").write_text(json.dumps({"files": ["observations_v2/…"]}))
    _check(_read([tmp_path]), expected, "langfuse")
    assert is_langfuse_score_row(json.loads(json.dumps(score, default=str)))
    assert not is_langfuse_score_row(observations[0])


def test_normalize_says_how_a_parquet_input_was_read(tmp_path: Path, langsmith_runs: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from assay.report import iter_normalized

    rows, expected = langsmith_runs
    write_shuffled_parquet(tmp_path / "runs", rows, langsmith_schema(), seed=10)
    items = list(iter_normalized(str(tmp_path / "runs"), limit=0))
    assert {i["trace"]["id"] for i in items} == set(expected)
    want = f"{len(rows)} LangSmith run rows grouped by trace id across 3 inputs into {len(expected)} traces"
    assert {i["reading"] for i in items} == {want}
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"id": ["a"], "messages": [[{"role": "user", "content": "hi"}]]}), plain)
    assert [i["reading"] for i in iter_normalized(str(plain), limit=0)] == ["Parquet: one record per row"]
