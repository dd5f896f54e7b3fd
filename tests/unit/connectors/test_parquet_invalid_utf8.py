"""A Parquet row whose text is not UTF-8 (a writer that put raw bytes into a ``string`` column) is
a dead letter naming its file, row and column, as a JSON line with invalid UTF-8 is; the other
rows of the file are scored, by the general path and the columnar fast path alike, and in a
multi-row export (LangSmith runs) too. Binary columns holding UTF-8 text are read as text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from tests.support.exports import langsmith_export, write_parquet

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

GOOD = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
BAD_ROW = 3  # 1-based, as positions count


def _strings(values: list[bytes], large: bool = False) -> Any:
    """A ``string`` array built from raw bytes, unchecked (as a careless writer makes one)."""
    if large:
        return pa.array(values, pa.large_binary()).view(pa.large_string())
    return pa.array(values, pa.binary()).view(pa.string())


def _json_column(large: bool = False) -> Any:
    text = json.dumps(GOOD).encode()
    values = [text] * 5
    values[BAD_ROW - 1] = text[:20] + b"\xff\xfe" + text[20:]
    return _strings(values, large)


def _nested_column() -> Any:
    contents = [m["content"].encode() for _ in range(5) for m in GOOD]
    contents[2 * (BAD_ROW - 1) + 1] = b"hel\xc3lo"  # the assistant's answer: a truncated sequence
    messages = pa.StructArray.from_arrays(
        [pa.array([m["role"] for _ in range(5) for m in GOOD]), _strings(contents)], ["role", "content"]
    )
    return pa.ListArray.from_arrays(pa.array(range(0, 11, 2), pa.int32()), messages)


def _score(
    tmp_path: Path, data: Path, evaluator: str = "regex_match:pattern=hello"
) -> tuple[Any, list[Any], list[Any]]:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["score", str(data), "-e", evaluator, "-o", str(out), "-q"])
    rows = [json.loads(line) for p in out.glob("part-*") for line in p.read_text().splitlines()]
    dead_dir = out / "_dead_letter"
    dead = (
        [json.loads(line) for p in dead_dir.iterdir() for line in p.read_text().splitlines()]
        if dead_dir.exists()
        else []
    )
    return res, rows, dead


@pytest.mark.parametrize("column", ["json-text", "large-json-text", "nested-messages"])
def test_a_row_with_invalid_utf8_is_a_dead_letter_naming_file_row_and_column(tmp_path: Path, column: str) -> None:
    messages = _nested_column() if column == "nested-messages" else _json_column(large=column.startswith("large"))
    data = tmp_path / "traces.parquet"
    pq.write_table(pa.table({"id": [f"t{i}" for i in range(1, 6)], "messages": messages}), data)
    res, rows, dead = _score(tmp_path, data)
    assert res.exit_code == 0, res.output
    assert sorted(r["trace_id"] for r in rows) == ["t1", "t2", "t4", "t5"]
    assert all(r["results"]["regex_match"]["score"] == 1.0 for r in rows)
    assert len(dead) == 1, dead
    d = dead[0]
    assert (d["file"], d["line"], d["stage"], d["error_type"]) == (str(data), BAD_ROW, "parse", "UnicodeDecodeError")
    assert d["error"].startswith(f"{data}:{BAD_ROW}: column 'messages': invalid UTF-8 at byte "), d["error"]
    assert '"id":"t3"' in d["raw"]  # the row is kept, its bad bytes replaced


def test_a_binary_column_of_utf8_json_is_read_as_text_and_other_bytes_named(tmp_path: Path) -> None:
    text = json.dumps(GOOD).encode()
    values = [text] * 5
    values[BAD_ROW - 1] = b"\xff" + text
    data = tmp_path / "traces.parquet"
    pq.write_table(pa.table({"id": [f"t{i}" for i in range(1, 6)], "messages": pa.array(values, pa.binary())}), data)
    res, rows, dead = _score(tmp_path, data)
    assert res.exit_code == 0, res.output
    assert sorted(r["trace_id"] for r in rows) == ["t1", "t2", "t4", "t5"]
    assert [(d["line"], d["stage"]) for d in dead] == [(BAD_ROW, "normalize")]
    assert "messages is binary data that is not UTF-8 text" in dead[0]["error"]


def test_an_export_row_with_invalid_utf8_is_a_dead_letter_and_the_other_traces_are_scored(tmp_path: Path) -> None:
    rows, expected = langsmith_export(6, seed=5)
    data = write_parquet(tmp_path / "runs.parquet", rows, row_group_size=1000)
    table = pq.read_table(data)
    inputs = [v.encode() for v in table.column("inputs").to_pylist()]
    bad = next(i for i, r in enumerate(rows) if r["run_type"] == "tool")
    inputs[bad] = b"\xe2\x82" + inputs[bad]
    i = table.schema.get_field_index("inputs")
    pq.write_table(table.set_column(i, "inputs", _strings(inputs)), data)
    res, scored, dead = _score(tmp_path, data, "max_turns:max_turns=5")
    assert res.exit_code == 0, res.output
    assert sorted(r["trace_id"] for r in scored) == sorted(expected)
    assert [(d["line"], d["error_type"]) for d in dead] == [(bad + 1, "UnicodeDecodeError")]
    assert f"{data}:{bad + 1}: column 'inputs': invalid UTF-8 at byte 0 (0xe2)" in dead[0]["error"]
