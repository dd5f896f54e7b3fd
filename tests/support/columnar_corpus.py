"""A seeded generator of OpenAI message tables for the columnar scorer's differential tests.

:func:`universe` builds ``size`` distinct rows (``id``, ``messages``, ``reference``) whose
references are mutations of the agent's messages, chosen so that every trajectory mode sees
passes and failures: duplicated calls, calls moved within and across messages, dropped, added and
renamed calls, arguments rewritten with another key order, other whitespace, ``1.0`` for ``1`` or
``true`` for ``1``, null and empty tool-call lists, unicode and case-different names, very long
lists, null references, and a few rows only the object path reads (an empty or null message list,
an unknown role, a call without a name, arguments that are not a JSON object). :func:`spread`
repeats the universe's rows in a seeded random order up to any number of rows (Arrow ``take``:
10⁶ rows in well under a second), so the object path scores each distinct row once and the
comparison is vectorised.
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pyarrow as pa

NAMES = ["search", "get_order", "refund", "Search", "é_outil", "工具", "🔧fix", "a", "a ", "x" * 40, "notify"]
ARGS: list[Any] = [
    {},
    {"q": "shoes"},
    {"q": "shoes", "limit": 10},
    {"id": 1},
    {"id": 1.0},
    {"id": True},
    {"id": "1"},
    {"id": 2.5},
    {"nested": {"b": [1, 2.5, None], "a": {"z": False, "y": "é"}}},
    {"u": "ünïcode ✓", "n": -0.0},
    {"list": [3, 2, 1]},
    {"list": [1, 2, 3]},
]
DEFECTS = ["not json", "[1, 2]", "42", '{"a": ', '"text"']

_FN = pa.struct([("name", pa.string()), ("arguments", pa.string())])
_CALL = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", _FN)])
MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.list_(_CALL)),
    ]
)
SCHEMA = pa.schema([("id", pa.string()), ("messages", pa.list_(MESSAGE)), ("reference", pa.list_(MESSAGE))])


def _args_text(rng: random.Random, value: dict[str, Any]) -> str | None:
    """One JSON text of ``value``: keys in a random order, one of three spacings."""
    roll = rng.random()
    if not value and roll < 0.2:
        return None if roll < 0.1 else ""
    items = list(value.items())
    rng.shuffle(items)
    seps = rng.choice([(",", ":"), (", ", ": "), (" , ", " : ")])
    return json.dumps(dict(items), separators=seps, ensure_ascii=rng.random() < 0.5)


def _call(rng: random.Random, defects: bool) -> dict[str, Any]:
    name: str | None = rng.choice(NAMES)
    if defects and rng.random() < 0.01:
        name = rng.choice(["", None])
    if defects and rng.random() < 0.01:
        args: str | None = rng.choice(DEFECTS)
    else:
        args = _args_text(rng, rng.choice(ARGS))
    return {"id": f"c{rng.randrange(10**6)}", "type": "function", "function": {"name": name, "arguments": args}}


def _messages(rng: random.Random, defects: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "hi", "tool_calls": None}]
    turns = rng.choice([0, 1, 1, 2, 2, 3, 4])
    if rng.random() < 0.01:
        turns = rng.randrange(20, 80)  # a long trajectory
    for _ in range(turns):
        if rng.random() < 0.05:
            out.append({"role": "system", "content": "note", "tool_calls": None})
        n_calls = rng.choice([0, 1, 1, 1, 2, 3])
        if rng.random() < 0.01:
            n_calls = rng.randrange(30, 120)  # a long list of calls in one message
        calls: list[dict[str, Any]] | None = [_call(rng, defects) for _ in range(n_calls)]
        if not calls:
            calls = rng.choice([None, []])
        out.append({"role": "assistant", "content": rng.choice([None, "", "ok"]), "tool_calls": calls})
        if calls:
            for _ in calls[: rng.randrange(0, len(calls) + 1)]:
                out.append({"role": "tool", "content": "{}", "tool_calls": None})
    if defects and rng.random() < 0.01:
        out[rng.randrange(len(out))]["role"] = rng.choice(["bot", "human", "ai", None])
    return out


def _flat(msgs: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(i, j) for i, m in enumerate(msgs) for j in range(len(m["tool_calls"] or []))]


def _mutate(rng: random.Random, agent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ref = json.loads(json.dumps(agent))
    calls = _flat(ref)
    kind = rng.choice(
        [
            "same",
            "same",
            "same",
            "reorder_within",
            "reorder_across",
            "drop_call",
            "add_call",
            "duplicate",
            "rename",
            "reformat_args",
            "equal_numbers",
            "change_args",
            "drop_message",
            "split",
            "merge",
            "role",
            "empty_calls",
            "random",
        ]
    )
    if kind == "random":
        return _messages(rng, False)
    if kind == "reorder_within":
        for m in ref:
            if m["tool_calls"]:
                rng.shuffle(m["tool_calls"])
    elif kind == "reorder_across" and len(calls) > 1:
        (i, a), (j, b) = rng.sample(calls, 2)
        ref[i]["tool_calls"][a], ref[j]["tool_calls"][b] = ref[j]["tool_calls"][b], ref[i]["tool_calls"][a]
    elif kind == "drop_call" and calls:
        i, a = rng.choice(calls)
        del ref[i]["tool_calls"][a]
    elif kind in ("add_call", "duplicate"):
        holders = [m for m in ref if m["role"] == "assistant"] or ref
        m = rng.choice(holders)
        new = _call(rng, False) if kind == "add_call" or not calls else json.loads(json.dumps(_pick(ref, calls, rng)))
        m["tool_calls"] = [*(m["tool_calls"] or []), new]
        m["tool_calls"].insert(rng.randrange(len(m["tool_calls"])), m["tool_calls"].pop())
    elif kind == "rename" and calls:
        _pick(ref, calls, rng)["function"]["name"] = rng.choice(NAMES)
    elif kind in ("reformat_args", "equal_numbers") and calls:
        for i, a in calls:
            fn = ref[i]["tool_calls"][a]["function"]
            raw = fn["arguments"]
            try:
                value = json.loads(raw) if raw else {}
            except ValueError:
                continue
            if kind == "equal_numbers" and isinstance(value, dict):
                value = {k: (float(v) if type(v) is int else 1 if v is True else v) for k, v in value.items()}
            if isinstance(value, dict):
                fn["arguments"] = _args_text(rng, value)
    elif kind == "change_args" and calls:
        _pick(ref, calls, rng)["function"]["arguments"] = _args_text(rng, rng.choice(ARGS))
    elif kind == "drop_message" and len(ref) > 1:
        del ref[rng.randrange(len(ref))]
    elif kind == "split" and calls:
        i, _ = rng.choice(calls)
        tc = ref[i]["tool_calls"]
        if len(tc) > 1:
            ref[i]["tool_calls"] = tc[:1]
            ref.insert(i + 1, {"role": "assistant", "content": None, "tool_calls": tc[1:]})
    elif kind == "merge":
        idx = [i for i, m in enumerate(ref) if m["tool_calls"]]
        if len(idx) > 1:
            a, b = idx[0], idx[1]
            ref[a]["tool_calls"] = ref[a]["tool_calls"] + ref[b]["tool_calls"]
            del ref[b]
    elif kind == "role" and len(ref) > 1:
        ref[rng.randrange(len(ref))]["role"] = rng.choice(["user", "assistant", "tool", "system", "developer"])
    elif kind == "empty_calls":
        for m in ref:
            if m["tool_calls"] == []:
                m["tool_calls"] = None
            elif m["tool_calls"] is None and m["role"] == "assistant":
                m["tool_calls"] = []
    return ref


def _pick(ref: list[dict[str, Any]], calls: list[tuple[int, int]], rng: random.Random) -> dict[str, Any]:
    i, a = rng.choice(calls)
    call: dict[str, Any] = ref[i]["tool_calls"][a]
    return call


def universe(size: int, seed: int = 0, *, defects: bool = True) -> pa.RecordBatch:
    """``size`` generated rows (see the module docstring), as one record batch; ``defects=False``:
    without the rows only the object path reads (defective calls, roles, empty message lists)."""
    rng = random.Random(seed)
    rows = []
    for i in range(size):
        agent = _messages(rng, defects=defects)
        roll = rng.random()
        if roll < 0.04:
            ref: list[dict[str, Any]] | None = None  # no reference
        elif roll < 0.045 and defects:
            ref = []  # an empty reference list: the object path's general reading
        else:
            ref = _mutate(rng, agent)
        if rng.random() < 0.004 and defects:
            agent = rng.choice([[], None])  # type: ignore[arg-type]
        rows.append({"id": f"t{i}-{rng.choice(NAMES)}", "messages": agent, "reference": ref})
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def spread(batch: pa.RecordBatch, rows: int, seed: int = 1) -> np.ndarray:
    """``rows`` indices into ``batch`` in a seeded random order (every row of it used)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, batch.num_rows, size=rows, dtype=np.int64)
    idx[: min(rows, batch.num_rows)] = np.arange(min(rows, batch.num_rows))
    rng.shuffle(idx)
    return idx
