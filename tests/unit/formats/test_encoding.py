"""Invalid UTF-8 and byte-order marks: a bad record is a dead letter on every parse path, never a crash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from assay.records import Envelope, Failure, Position
from assay.stages.normalize import RecordParser, parse_envelope
from assay.traces.model import Trace
from assay.traces.normalize import DEFAULT_OPTIONS
from assay.traces.openai_decode import decode_openai_record

ROOT = Path(__file__).resolve().parents[3]
BOM = b"\xef\xbb\xbf"


def record(i: int) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
    msgs = [
        {"role": "user", "content": f"task {i}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "done"},
    ]
    return {"id": f"t{i}", "outputs": msgs, "reference_outputs": msgs}


def bad_utf8(i: int) -> bytes:
    return orjson.dumps(record(i)).replace(b'"done"', b'"do\xffne"', 1)


def test_fast_decoder_declines_invalid_utf8_instead_of_raising() -> None:
    assert decode_openai_record(bad_utf8(1)) is None
    assert decode_openai_record(BOM + orjson.dumps(record(1))) is None  # the general path strips it


@pytest.mark.parametrize("projected", [True, False])
def test_invalid_utf8_is_a_parse_failure_with_position_and_byte(projected: bool) -> None:
    parse = RecordParser(projected=projected)
    out = parse(Envelope(bad_utf8(3), Position("in.jsonl", 3)))
    assert isinstance(out, Failure)
    assert out.stage == "parse" and out.error_type == "UnicodeDecodeError"
    assert out.message.startswith("in.jsonl:3: invalid UTF-8 at byte ") and "0xff" in out.message
    ok = parse(Envelope(orjson.dumps(record(4)), Position("in.jsonl", 4)))
    assert isinstance(ok, Trace) and ok.id == "t4"


@pytest.mark.parametrize("projected", [True, False])
def test_a_bom_before_the_record_is_ignored(projected: bool) -> None:
    payload = BOM + orjson.dumps(record(1))
    out = RecordParser(projected=projected)(Envelope(payload, Position("in.jsonl", 1)))
    assert isinstance(out, Trace) and out.id == "t1" and [c.name for c in out.tool_calls()] == ["search"]
    mv = parse_envelope(Envelope(memoryview(payload), Position("in.jsonl", 1)), DEFAULT_OPTIONS)
    assert isinstance(mv, Trace)


def test_bom_then_invalid_json_is_still_named() -> None:
    out = parse_envelope(Envelope(BOM + b"{not json", Position("in.jsonl", 1)), DEFAULT_OPTIONS)
    assert isinstance(out, Failure) and out.error_type == "JSONDecodeError" and "invalid JSON" in out.message


def test_score_cli_dead_letters_a_bad_byte_and_goes_on(tmp_path: Path) -> None:
    lines = [orjson.dumps(record(i)) for i in range(5)]
    lines[0] = BOM + lines[0]
    lines[2] = bad_utf8(2)
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "assay.cli", "score", str(src), "-e", "trajectory_match:mode=strict", "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        timeout=100,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    rows = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert sorted(r["trace_id"] for r in rows) == ["t0", "t1", "t3", "t4"]
    dead = [orjson.loads(x) for x in (tmp_path / "out.dead_letter.jsonl").read_bytes().splitlines()]
    assert len(dead) == 1 and dead[0]["line"] == 3 and dead[0]["error_type"] == "UnicodeDecodeError"
