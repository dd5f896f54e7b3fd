"""Framing: JSON lines vs JSON documents, decided from the content; streamed arrays; BOM; errors."""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from assay.connectors.framing import ReadError, detect_format, iter_records, sniff
from assay.exceptions import ConfigError

RECORDS: list[Any] = [{"a": 1, "t": "x"}, {"b": [1, {"c": None}], "u": "é"}, {"c": "line\nbreak"}]


def _records(data: bytes, fmt: str = "auto") -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    for line, payload in iter_records(io.BytesIO(data), "f", fmt):
        out.append((line, payload if isinstance(payload, ReadError) else orjson.loads(payload)))
    return out


FRAMINGS = {
    "jsonl": b"".join(orjson.dumps(r) + b"\n" for r in RECORDS),
    "jsonl_crlf_blank": b"\r\n".join(orjson.dumps(r) for r in RECORDS).replace(b"\r\n", b"\r\n\n", 1),
    "array_pretty": json.dumps(RECORDS, indent=2).encode(),
    "array_one_line": json.dumps(RECORDS).encode(),
    "array_compact_lines": b"[\n" + b",\n".join(orjson.dumps(r) for r in RECORDS) + b"\n]\n",
    "concatenated_pretty": b"\n".join(json.dumps(r, indent=2).encode() for r in RECORDS),
    "concatenated_arrays_pretty": b"".join(json.dumps(part, indent=1).encode() for part in (RECORDS[:1], RECORDS[1:])),
}


@pytest.mark.parametrize("name", sorted(FRAMINGS))
@pytest.mark.parametrize("bom", [False, True])
def test_every_framing_gives_the_records(name: str, bom: bool) -> None:
    data = (b"\xef\xbb\xbf" if bom else b"") + FRAMINGS[name]
    assert [value for _, value in _records(data)] == RECORDS


def test_one_pretty_document_is_one_record_at_line_1() -> None:
    doc = {"id": "trace-1", "observations": [{"type": "GENERATION", "input": {"messages": []}}]}
    data = b"\n\n" + json.dumps(doc, indent=2).encode() + b"\n"
    assert _records(data) == [(3, doc)]
    assert _records(data, "json") == [(3, doc)]


def test_record_lines_are_where_each_record_starts() -> None:
    assert [line for line, _ in _records(FRAMINGS["array_compact_lines"])] == [2, 3, 4]
    assert [line for line, _ in _records(FRAMINGS["jsonl_crlf_blank"])] == [1, 3, 4]
    pretty = FRAMINGS["concatenated_pretty"]
    starts = [i + 1 for i, text in enumerate(pretty.split(b"\n")) if text == b"{"]
    assert [line for line, _ in _records(pretty)] == starts


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b'{"a": 1}\n{"a": 2}\n', "jsonl"),
        (b'{"a": 1}', "jsonl"),
        (b"{\n", "json"),
        (b'  \n\t{\n  "a": 1\n}', "json"),
        (b'{"a": {\n', "json"),
        (b'{"messages": [\n', "json"),
        (b"[\n", "json"),
        (b"[1, 2]", "json"),  # one line holding one array: its elements
        (b"[1, 2]\n[3]\n", "jsonl"),  # several lines of arrays
        (b'{"a": "trunc', "jsonl"),  # a broken first line stays a (dead-letter) line
        (b"not json\n", "jsonl"),
        (b"", "jsonl"),
        (b'\xef\xbb\xbf{\n "a": 1}', "json"),
    ],
)
def test_detect_format_from_first_bytes(head: bytes, kind: str) -> None:
    assert detect_format(head, at_eof=True) == kind


def test_explicit_format_wins_and_unknown_is_a_config_error() -> None:
    data = b'{"a": 1}\n{"a": 2}\n'
    assert [v for _, v in _records(data, "json")] == [{"a": 1}, {"a": 2}]
    assert [v for _, v in _records(b"[1, 2]", "jsonl")] == [[1, 2]]
    with pytest.raises(ConfigError, match="input_format"):
        sniff(io.BytesIO(b""), "yaml")


def test_invalid_utf8_in_an_array_element_is_a_read_error_for_that_element() -> None:
    data = b'[\n {"a": 1},\n {"b": "\xff\xfe"},\n {"c": 3}\n]\n'
    got = _records(data)
    assert got[0] == (2, {"a": 1}) and got[2] == (4, {"c": 3})
    line, err = got[1]
    assert line == 3 and isinstance(err, ReadError) and "f:3" in err.message and "UTF-8" in err.message


def test_invalid_utf8_in_a_json_line_is_left_to_the_parser() -> None:
    data = b'{"a": 1}\n{"b": "\xff"}\n{"c": 3}\n'
    got = list(iter_records(io.BytesIO(data), "f"))
    assert got == [(1, b'{"a": 1}'), (2, b'{"b": "\xff"}'), (3, b'{"c": 3}')]


@pytest.mark.parametrize(
    ("data", "good", "line", "reason"),
    [
        (b'[\n{"a": 1},\n{"a" 2},\n{"a": 3}]', 1, 3, "invalid JSON array element"),
        (b'[\n{"a": 1},\n{"a": 2}', 2, 3, "unterminated JSON array"),
        (b'[\n{"a": 1}\n{"a": 2}]', 1, 3, "expected ',' or ']'"),
        (b'{\n "a": 1\n}\n{\n "a": \n', 1, 4, "invalid JSON document"),
    ],
)
def test_a_broken_document_ends_the_stream_with_one_read_error(data: bytes, good: int, line: int, reason: str) -> None:
    got = _records(data)
    assert all(not isinstance(v, ReadError) for _, v in got[:good])
    assert len(got) == good + 1
    err_line, err = got[-1]
    assert isinstance(err, ReadError) and reason in err.message and err.message.startswith("f:")
    assert err_line == line


class _EndlessArray:
    """A binary stream of one JSON array that never ends, produced on demand (nothing stored)."""

    def __init__(self) -> None:
        self.sent = 0
        self._pending = b"[\n"
        self._i = 0

    def read(self, n: int = -1, /) -> bytes:
        while len(self._pending) < n:
            self._i += 1
            record = {"i": self._i, "messages": [{"role": "user", "content": "x" * 200}]}
            self._pending += orjson.dumps(record, option=orjson.OPT_INDENT_2) + b",\n"
        out, self._pending = self._pending[:n], self._pending[n:]
        self.sent += len(out)
        return out


def _take(it: Iterator[tuple[int, Any]], n: int) -> list[tuple[int, Any]]:
    return [next(it) for _ in range(n)]


def test_a_large_array_is_streamed_element_by_element() -> None:
    stream = _EndlessArray()
    it = iter_records(stream, "endless")
    first = _take(it, 10)
    assert [orjson.loads(p)["i"] for _, p in first] == list(range(1, 11))
    assert stream.sent < 4 << 20  # an endless array: nothing waits for its end
    tracemalloc.start()
    try:
        for _ in range(40_000):  # ~12 MB of JSON, each record dropped once read
            next(it)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stream.sent > 10 << 20
    assert peak < 8 << 20  # bounded by the read-ahead, not by what went through


def test_a_large_single_document_is_read_whole_in_linear_reads() -> None:
    doc = {"spans": [{"i": i, "name": "s" * 50} for i in range(60_000)]}
    data = json.dumps(doc, indent=2).encode()  # ~8 MB, several read-aheads
    reads: list[int] = []

    class Counting(io.BytesIO):
        def read(self, n: int | None = -1, /) -> bytes:
            out = super().read(n)
            reads.append(len(out))
            return out

    got = list(iter_records(Counting(data), "big"))
    assert len(got) == 1 and orjson.loads(got[0][1]) == doc
    assert len(reads) < 20  # read-ahead doubles: a few reads, not one per MiB re-parse
