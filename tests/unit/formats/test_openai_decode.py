"""The typed fast path (``decode_openai_record``) gives exactly the Trace of the general path.

It may decline any record (the general path then decides); whenever it accepts one, its Trace must
equal ``normalize_record``'s, except ``scenario`` (the record's ``scenario`` object or None)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from assay.exceptions import NormalizationError
from assay.records import Envelope, Position
from assay.stages.normalize import RecordParser
from assay.traces.model import Trace
from assay.traces.normalize import NormalizeOptions, normalize_record
from assay.traces.openai_decode import decode_openai_record
from tests.conftest import load_module

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "formats"


def call(name: str, args: Any, cid: str | None = "c1") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def msgs(*calls: dict[str, Any], final: Any = "done") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "go"}]
    if calls:
        out.append({"role": "assistant", "content": None, "tool_calls": list(calls)})
        out.extend({"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls)
    out.append({"role": "assistant", "content": final})
    return out


M = msgs(call("search", '{"q": "x"}'), call("fetch", {"url": "u"}, "c2"))
FC = {"name": "lookup", "arguments": '{"id": 7}'}
LEGACY = [
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": None, "function_call": FC},
    {"role": "function", "name": "lookup", "content": "found"},
    {"role": "assistant", "content": "done"},
]

CASES: list[Any] = [
    {"id": "a", "messages": M, "reference_outputs": M},
    {"messages": M},
    {"trace_id": 7, "outputs": M, "reference": M, "inputs": {"q": 1, "documents": ["d"]}},
    {"outputs": {"messages": M, "final_output": "F", "usage": {"t": 1}, "metadata": {"a": 1}}, "metadata": {"b": 2}},
    {"trajectory": M, "expected": {"messages": M}, "context": "ctx", "usage": {"x": 1}, "metrics": {"y": 1}},
    {"actual": M, "reference_outputs": None, "scenario": {"max_turns": 3}, "question": "q?"},
    {"id": None, "trace_id": "b", "messages": M, "usage": 5, "metrics": {"y": 1}},
    {"messages": M, "final_output": None, "metadata": {}},
    {"messages": M, "final_output": {"answer": 1}, "token_usage": {"n": 2}},
    {"messages": msgs(call("f", "not json")), "reference_outputs": msgs(call("f", "[1, 2]"))},
    {"messages": msgs(call("f", "")), "reference_outputs": msgs(call("f", None))},
    {"messages": msgs(call("f", 3))},
    {"messages": msgs(call("f", "{}", None))},
    {"messages": [{"role": "assistant", "content": [{"type": "text", "text": "hi"}], "name": 3}]},
    {"messages": [{"role": "developer", "content": "x", "name": "n"}, {"role": "assistant", "tool_calls": []}]},
    # legacy function calls and role aliases (the general path's parse_message)
    {"messages": LEGACY, "reference_outputs": LEGACY},
    {"messages": [{"role": "human", "content": "q"}, {"role": "ai", "content": None, "function_call": FC}]},
    {"messages": [{"role": "user", "content": "q", "function_call": FC}]},  # ignored off assistant messages
    {"messages": [{"role": "assistant", "tool_calls": [call("g", "{}")], "function_call": FC}]},
    {"messages": [{"role": "function", "name": "f", "tool_call_id": "x", "content": None}]},
    {"messages": [{"role": "assistant", "function_call": {**FC, "arguments": "oops"}}]},
    {"messages": [{"role": "assistant", "function_call": {**FC, "args": {"a": 1}}}]},
    {"messages": [{"role": "assistant", "function_call": None}]},
    # shapes the fast path must leave to the general path (or decode identically)
    {"messages": [{"role": "function", "name": "f", "content": "x"}]},
    {"messages": [{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}]},
    {"messages": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}]},
    {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]},
    {"messages": [{"role": "user", "content": "x", "sender": "bob"}]},
    {"messages": [{"role": "assistant", "tool_calls": [{"name": "f", "args": {"a": 1}, "id": "x"}]}]},
    {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "", "arguments": "{}"}}]}]},
    {"messages": [{"role": "assistant", "tool_calls": {"not": "a list"}}]},
    {"messages": [{"role": "wizard", "content": "x"}]},
    {"messages": []},
    {"messages": "nope"},
    {"outputs": "plain answer", "reference_outputs": "plain"},
    {"outputs": None},
    {"messages": M, "reference": "Paris"},
    {"outputs": {"role": "assistant", "content": "single message"}},
    {"nothing": "here"},
    [{"role": "user", "content": "a list record"}],
    42,
]


def general(record: Any) -> Trace | Exception:
    try:
        trace = normalize_record(record)
    except (NormalizationError, TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        return exc
    scenario = record.get("scenario") if isinstance(record, dict) else None
    trace.scenario = scenario if isinstance(scenario, dict) else None
    return trace


def check(line: bytes) -> bool:
    """Whether the fast path took the line; asserts it agrees with the general path."""
    fast = decode_openai_record(line)
    if fast is None:
        return False
    assert fast == general(orjson.loads(line)), line[:200]
    return True


def test_hand_written_cases_agree_or_are_declined() -> None:
    taken = [check(orjson.dumps(c)) for c in CASES]
    assert sum(taken) >= 20  # the common shapes do take the fast path
    assert taken[:5] == [True] * 5
    assert taken[15:20] == [True] * 5  # legacy function calls and aliases too


@pytest.mark.parametrize("shape", ["flat", "nested", "mixed"])
def test_generated_corpus_agrees(tmp_path: Path, shape: str) -> None:
    gen = load_module(ROOT / "benchmarks" / "gen_corpus.py", "gen_corpus")
    path = tmp_path / "c.jsonl"
    with gen.open_out(str(path)) as out:
        gen.generate(400, out, seed=11, shape=shape, malformed=0.1)
    lines = [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]
    taken = sum(check(ln) for ln in lines)
    assert taken >= len(lines) * 0.8


def test_format_fixtures_agree_or_are_declined() -> None:
    for f in sorted(FIXTURES.rglob("*.json*")):
        data = f.read_bytes()
        lines = data.split(b"\n") if f.suffix == ".jsonl" else [orjson.dumps(orjson.loads(data))]
        for ln in lines:
            if ln.strip():
                check(ln)


def test_random_mutations_agree_or_are_declined() -> None:
    rng = random.Random(5)
    base = orjson.loads(orjson.dumps(CASES[0]))
    values: list[Any] = [None, "", "x", 1, [], {}, [1], {"a": 1}, "{}", '{"a": 1}', True]
    taken = 0
    for _ in range(1500):
        rec = orjson.loads(orjson.dumps(base))
        for _ in range(rng.randint(1, 3)):
            side = rec[rng.choice(["messages", "reference_outputs"])]
            m = rng.choice(side)
            key = rng.choice(["role", "content", "tool_calls", "name", "tool_call_id", "type", "function_call"])
            if key == "function_call" and rng.random() < 0.5:
                m[key] = rng.choice([FC, {**FC, "arguments": rng.choice(values)}, {"name": rng.choice(values)}])
                continue
            calls = m.get("tool_calls")
            if key == "tool_calls" and isinstance(calls, list) and calls and rng.random() < 0.7:
                tc = rng.choice(calls)
                if not isinstance(tc, dict):
                    continue
                fn = tc.get("function")
                target = fn if isinstance(fn, dict) and rng.random() < 0.7 else tc
                target[rng.choice(["name", "arguments", "id", "function"])] = rng.choice(values)
            else:
                m[key] = rng.choice([*values, "assistant", "tool", "user", "function", "human", "ai"])
        taken += check(orjson.dumps(rec))
    assert 150 < taken < 1350  # both paths exercised


def env(record: Any, line: int = 1) -> Envelope:
    return Envelope(orjson.dumps(record), Position("f.jsonl", line))


def test_record_parser_fast_path_sets_position_id_and_switches_off() -> None:
    parser = RecordParser(projected=True)
    trace = parser(env({"messages": M}, 3))
    assert isinstance(trace, Trace) and trace.id == "f.jsonl:3" and parser.hits == 1
    for i in range(RecordParser.MIN_TRIES):  # an input the fast path never takes
        assert isinstance(parser(env({"outputs": f"answer {i}"})), Trace)
    assert parser.fast is False and parser.misses == RecordParser.MIN_TRIES


def test_record_parser_general_path_when_scenario_is_read_or_options_set() -> None:
    record = {"messages": M, "expected_tools": ["search"]}
    assert RecordParser(projected=False)(env(record)).scenario == record  # type: ignore[union-attr]
    assert RecordParser(projected=True)(env(record)).scenario is None  # type: ignore[union-attr]
    assert RecordParser(NormalizeOptions(outputs="messages"), projected=True).fast is False


def test_the_wire_record_reads_every_key_the_general_path_reads() -> None:
    """A key added to normalize's lists but not to the wire record would be ignored by the fast
    path (e.g. a new reference key): its Trace would differ."""
    from assay.traces import normalize
    from assay.traces.openai_decode import _Record

    keys = {
        *normalize.ID_KEYS,
        *normalize.INPUT_KEYS,
        *normalize.OUTPUT_KEYS,
        *normalize.REFERENCE_KEYS,
        *normalize.CONTEXT_KEYS,
        *normalize.USAGE_KEYS,
        "messages",
        "final_output",
        "scenario",
        "metadata",
    }
    assert keys <= set(_Record.__struct_fields__)
