"""OTel ``ConsoleSpanExporter`` output (one pretty-printed JSON document per span, concatenated, in
the order spans end) read in session mode: the spans of each trace become one trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.connectors.file import FileSource
from assay.stages.normalize import parse_envelope
from assay.traces.model import Trace
from assay.traces.normalize import NormalizeOptions
from assay.traces.span_groups import SpanGrouper, is_span_row, span_trace_id

RESOURCE = {"attributes": {"service.name": "weather-agent", "telemetry.sdk.language": "python"}, "schema_url": ""}


def span(
    trace: str,
    span_id: str,
    parent: str | None,
    name: str,
    start: str,
    end: str,
    attributes: dict[str, Any],
    kind: str = "SpanKind.INTERNAL",
) -> dict[str, Any]:
    """A span as ``ReadableSpan.to_json()`` writes it."""
    return {
        "name": name,
        "context": {"trace_id": f"0x{trace}", "span_id": f"0x{span_id}", "trace_state": "[]"},
        "kind": kind,
        "parent_id": None if parent is None else f"0x{parent}",
        "start_time": f"2026-11-24T10:00:{start}Z",
        "end_time": f"2026-11-24T10:00:{end}Z",
        "status": {"status_code": "UNSET"},
        "attributes": attributes,
        "events": [],
        "links": [],
        "resource": RESOURCE,
    }


def chat(trace: str, sid: str, root: str, start: str, end: str, inp: list[Any], out: list[Any]) -> dict[str, Any]:
    return span(
        trace,
        sid,
        root,
        "chat gpt-4o",
        start,
        end,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 30,
            "gen_ai.input.messages": json.dumps(inp),
            "gen_ai.output.messages": json.dumps(out),
        },
        kind="SpanKind.CLIENT",
    )


def tool_span(
    trace: str, sid: str, root: str, start: str, end: str, name: str, cid: str, args: Any, result: str
) -> dict[str, Any]:
    return span(
        trace,
        sid,
        root,
        f"execute_tool {name}",
        start,
        end,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": cid,
            "gen_ai.tool.call.arguments": json.dumps(args),
            "gen_ai.tool.call.result": result,
        },
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def calls(*pairs: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in pairs],
    }


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}


def response(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": cid, "response": text}]}


A, B = "5b8aa5a2d2c872e8321cf37308d69df2", "9c1f0e2d3b4a59687766554433221100"
RA, RB = "aaaa000000000001", "bbbb000000000001"


def console_spans() -> list[dict[str, Any]]:
    """Two agent runs at once, in export (end-time) order: children before their root, the two
    traces interleaved."""
    qa, qb = user("Weather in Paris, then book a table?"), user("Convert 20 EUR to USD")
    a_call1 = calls(("call_w", "get_weather", {"city": "Paris"}))
    a_call2 = calls(("call_b", "book_table", {"city": "Paris", "time": "19:00"}))
    b_call = calls(("call_fx", "convert", {"amount": 20, "from": "EUR", "to": "USD"}))
    return [
        chat(A, "aaaa000000000002", RA, "01.000", "01.900", [qa], [a_call1]),
        tool_span(
            A, "aaaa000000000003", RA, "02.000", "02.400", "get_weather", "call_w", {"city": "Paris"}, "18C, sunny"
        ),
        chat(B, "bbbb000000000002", RB, "02.100", "02.800", [qb], [b_call]),
        chat(A, "aaaa000000000004", RA, "02.500", "03.100", [qa, a_call1, response("call_w", "18C, sunny")], [a_call2]),
        tool_span(B, "bbbb000000000003", RB, "02.900", "03.200", "convert", "call_fx", {"amount": 20}, "21.6 USD"),
        tool_span(A, "aaaa000000000005", RA, "03.200", "03.500", "book_table", "call_b", {"city": "Paris"}, "booked"),
        chat(
            B,
            "bbbb000000000004",
            RB,
            "03.300",
            "03.900",
            [qb, b_call, response("call_fx", "21.6 USD")],
            [answer("20 EUR is 21.6 USD.")],
        ),
        span(B, RB, None, "invoke_agent fx", "02.000", "04.000", {"gen_ai.operation.name": "invoke_agent"}),
        chat(A, "aaaa000000000006", RA, "03.600", "04.200", [qa], [answer("Sunny, 18C; table booked for 19:00.")]),
        span(A, RA, None, "invoke_agent concierge", "00.900", "04.300", {"gen_ai.operation.name": "invoke_agent"}),
    ]


def write_console_export(path: Path, spans: list[dict[str, Any]]) -> None:
    """What ``ConsoleSpanExporter`` writes: ``span.to_json()`` (indent 4) and a newline per span."""
    path.write_text("".join(json.dumps(s, indent=4) + "\n" for s in spans))


def read(path: Path, read_mode: str) -> list[Any]:
    """Each record as normalized: a Trace, or the Failure."""

    async def main() -> list[Any]:
        async with FileSource([str(path)], batch_size=3, read_mode=read_mode) as src:
            return [parse_envelope(env, NormalizeOptions()) async for batch in src.batches() for env in batch]

    return anyio.run(main)


def tool_names(t: Trace) -> list[str]:
    return [c.name for m in t.messages for c in m.tool_calls or ()]


def test_console_export_spans_become_one_trace_each(tmp_path: Path) -> None:
    path = tmp_path / "spans.json"
    write_console_export(path, console_spans())
    alone = read(path, "records")  # records mode: each span is a trace of its own, with a warning
    assert len(alone) == 10
    assert all(any("session mode" in w for w in t.warnings or ()) for t in alone if isinstance(t, Trace))
    assert sum(not isinstance(t, Trace) for t in alone) == 2  # the root spans alone carry no gen_ai messages

    traces = read(path, "sessions")
    assert len(traces) == 2 and all(isinstance(t, Trace) and not t.warnings for t in traces)
    fx, concierge = traces  # fx's root ends first
    assert {t.format for t in traces} == {"otel"}
    assert tool_names(concierge) == ["get_weather", "book_table"]
    assert [m.role for m in concierge.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert concierge.final_output == "Sunny, 18C; table booked for 19:00."
    assert [m.content for m in concierge.messages if m.role == "tool"] == ["18C, sunny", "booked"]
    assert tool_names(fx) == ["convert"] and fx.final_output == "20 EUR is 21.6 USD."
    assert concierge.usage is not None and concierge.usage["input_tokens"] == 360


def test_scored_end_to_end_with_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "spans.json"
    write_console_export(path, console_spans())
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(
        app,
        [
            "score",
            str(path),
            "--read-mode",
            "sessions",
            "-e",
            "tool_use:expected_tool=book_table",
            "-o",
            str(out),
            "-q",
        ],
    )
    assert res.exit_code in (0, 1), res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["results"]["tool_use:book_table"]["score"] for r in rows) == [0.0, 1.0]


def test_grouper_rules() -> None:
    spans = console_spans()
    assert all(is_span_row(s) for s in spans) and span_trace_id(spans[0]) == A
    g: SpanGrouper[int] = SpanGrouper()
    groups = [grp for i, s in enumerate(spans) for grp in g.add(s, i)] + g.flush()
    assert [[i for _, i in grp] for grp in groups] == [[2, 4, 6, 7], [0, 1, 3, 5, 8, 9]]

    # root first (a start-ordered dump): the trace stays open while its spans keep coming
    g = SpanGrouper()
    ordered = [spans[9], spans[0], spans[1], spans[7], spans[2]]
    groups = [grp for i, s in enumerate(ordered) for grp in g.add(s, i)] + g.flush()
    assert [[i for _, i in grp] for grp in groups] == [[0, 1, 2], [3, 4]]

    # the window: beyond max_open traces the least recently extended one is emitted as it is
    g = SpanGrouper(max_open=1)
    assert [[i for _, i in grp] for grp in g.add(spans[2], 2)] == []
    assert [[i for _, i in grp] for grp in g.add(spans[0], 0)] == [[2]]
    # a span without a trace id is a trace of its own
    assert g.add({"name": "x", "attributes": {}}, 9) == [[({"name": "x", "attributes": {}}, 9)]]
    with pytest.raises(ValueError, match="max_open"):
        SpanGrouper(max_open=0)


def test_a_trace_never_spans_two_files(tmp_path: Path) -> None:
    spans = console_spans()
    write_console_export(tmp_path / "a.json", spans[:3])
    write_console_export(tmp_path / "b.json", spans[3:])

    async def main() -> list[int]:
        async with FileSource([str(tmp_path / "a.json"), str(tmp_path / "b.json")], read_mode="sessions") as src:
            return [len(json.loads(e.payload)) async for b in src.batches() for e in b]

    assert sorted(anyio.run(main)) == [1, 2, 3, 4]
