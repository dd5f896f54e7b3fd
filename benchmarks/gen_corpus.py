"""Deterministic generator of OpenAI-format agent traces with reference trajectories.

Every record is an agent run: a system prompt, a user request, several assistant turns with one to
three ``tool_calls`` each (JSON-string arguments with nested objects and lists), the tool results
(JSON content) and a final answer, about 7 KB per line. Each record also carries a reference
trajectory derived from the agent's by one controlled *variant* (identical, calls reordered, an
extra or missing call, different or extra arguments, messages split or merged, …), so that every
trajectory mode × args mode combination sees both passes and failures. The variant is recorded in
``metadata.variant``.

Two record shapes (``--shape``):

* ``flat``:   ``{"id", "messages": [...], "reference_outputs": [...], "metadata"}``
* ``nested``: ``{"id", "inputs", "outputs": {"messages": [...]}, "reference_outputs": {"messages": [...]},
  "metadata"}``

``--malformed FRACTION`` replaces that fraction of lines by defects (not JSON, wrong shapes,
unknown roles, unparsable tool arguments); ``--manifest PATH`` writes which line holds which defect.

    python benchmarks/gen_corpus.py --n 100000 -o benchmarks/data/corpus.jsonl.zst
    python benchmarks/gen_corpus.py --n 1000 --shape nested --malformed 0.05 -o bad.jsonl --manifest bad.json

Same ``--seed`` and options give byte-identical output; record ``i`` depends only on the seed and
``i`` (see :func:`make_record`).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import orjson

Msg = dict[str, Any]

# --------------------------------------------------------------------------------------------
# vocabulary

CITIES = [
    ("Paris", "FR"),
    ("Berlin", "DE"),
    ("Lisbon", "PT"),
    ("Osaka", "JP"),
    ("Toronto", "CA"),
    ("Nairobi", "KE"),
    ("Lima", "PE"),
    ("Oslo", "NO"),
    ("Austin", "US"),
    ("Pune", "IN"),
]
TOPICS = [
    "refund policy for damaged goods",
    "quarterly revenue by region",
    "flaky integration test",
    "onboarding checklist",
    "GDPR data export request",
    "latency regression in checkout",
    "supplier contract renewal",
    "customer churn last month",
    "kubernetes node pressure",
    "duplicate invoices",
    "password reset emails bouncing",
    "inventory shortfall in warehouse 3",
]
WORDS = [
    "agent",
    "policy",
    "order",
    "invoice",
    "customer",
    "ticket",
    "latency",
    "region",
    "warehouse",
    "shipment",
    "priority",
    "escalation",
    "report",
    "summary",
    "dataset",
    "metric",
    "threshold",
    "budget",
    "forecast",
    "anomaly",
    "review",
    "release",
    "deploy",
    "rollback",
    "incident",
    "owner",
    "deadline",
    "contract",
    "vendor",
    "account",
    "balance",
    "refund",
    "credit",
]
PEOPLE = ["ana", "bo", "chen", "dara", "eli", "fatima", "gus", "hana", "ivan", "jun", "kofi", "lea"]
SYSTEM_SENTENCES = [
    "You are a meticulous operations assistant working for a mid-sized e-commerce company.",
    "Always verify facts with the available tools before answering; never invent order numbers.",
    "When a request is ambiguous, pick the most likely interpretation and state the assumption.",
    "Use the search tool for public information and the SQL tool for internal figures.",
    "Never reveal credentials, internal hostnames or personal data of other customers.",
    "Prefer a single tool call that returns everything needed over many small ones.",
    "Monetary amounts are in euros unless the customer states otherwise; round to cents.",
    "Escalate to a human by creating a ticket when a refund exceeds 500 euros.",
    "Answer in the language of the user, concisely, with a short summary first.",
    "Dates are ISO 8601 in UTC. Weeks start on Monday. Fiscal year starts in February.",
    "Tool results may be stale by up to fifteen minutes; say so when it matters.",
    "If a tool fails, retry once with corrected arguments, then explain the failure.",
    "Keep an audit trail: mention every ticket, email or refund you created.",
    "Do not send emails to external domains without explicit confirmation from the user.",
    "Summaries should be at most five bullet points, each under twenty words.",
    "For weather questions use metric units unless the user is in the United States.",
]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _date(rng: random.Random) -> str:
    return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


# --------------------------------------------------------------------------------------------
# tools: each builds (args, result) for one call


def _search(rng: random.Random) -> tuple[dict[str, Any], Any]:
    args: dict[str, Any] = {
        "query": f"{rng.choice(TOPICS)} {_words(rng, 2)}",
        "limit": rng.choice([3, 5, 10]),
    }
    if rng.random() < 0.6:
        args["filters"] = {"lang": rng.choice(["en", "de", "fr"]), "since": _date(rng)}
    hits = [
        {
            "title": _words(rng, 5),
            "url": f"https://docs.example.com/{rng.randrange(10**6)}",
            "snippet": _words(rng, 18),
        }
        for _ in range(args["limit"] if args["limit"] < 5 else 4)
    ]
    return args, {"hits": hits, "total": rng.randint(4, 900)}


def _weather(rng: random.Random) -> tuple[dict[str, Any], Any]:
    city, country = rng.choice(CITIES)
    args = {"location": {"city": city, "country": country}, "units": rng.choice(["metric", "imperial"])}
    days = [
        {
            "date": _date(rng),
            "high": round(rng.uniform(-5, 35), 1),
            "low": round(rng.uniform(-10, 20), 1),
            "sky": rng.choice(["sun", "rain", "cloud", "snow"]),
        }
        for _ in range(4)
    ]
    return args, {"location": args["location"], "forecast": days}


def _sql(rng: random.Random) -> tuple[dict[str, Any], Any]:
    table = rng.choice(["orders", "invoices", "tickets", "shipments"])
    args = {
        "query": f"SELECT region, SUM(amount) FROM {table} WHERE created_at >= ? AND status = ? GROUP BY region",
        "params": [_date(rng), rng.choice(["open", "paid", "late"])],
        "timeout_s": rng.choice([5, 10, 30]),
    }
    rows = [
        [rng.choice(["emea", "apac", "amer", "latam"]), round(rng.uniform(100, 99999), 2)]
        for _ in range(rng.randint(3, 8))
    ]
    return args, {"columns": ["region", "sum"], "rows": rows, "elapsed_ms": rng.randint(3, 900)}


def _order(rng: random.Random) -> tuple[dict[str, Any], Any]:
    oid = f"ORD-{rng.randrange(10**7):07d}"
    args: dict[str, Any] = {"order_id": oid}
    if rng.random() < 0.5:
        args["include"] = rng.sample(["items", "payments", "shipping", "notes"], k=2)
    items = [
        {
            "sku": f"SKU{rng.randrange(10**5)}",
            "qty": rng.randint(1, 4),
            "price": round(rng.uniform(3, 300), 2),
        }
        for _ in range(rng.randint(1, 4))
    ]
    return args, {
        "order_id": oid,
        "status": rng.choice(["shipped", "delivered", "damaged"]),
        "items": items,
        "customer": {"id": rng.randrange(10**6), "tier": rng.choice(["gold", "basic"])},
    }


def _refund(rng: random.Random) -> tuple[dict[str, Any], Any]:
    args = {
        "order_id": f"ORD-{rng.randrange(10**7):07d}",
        "amount": round(rng.uniform(5, 800), 2),
        "reason": rng.choice(["damaged", "late", "wrong item"]),
    }
    return args, {
        "refund_id": f"RF{rng.randrange(10**8)}",
        "state": rng.choice(["approved", "pending_review"]),
        "amount": args["amount"],
    }


def _ticket(rng: random.Random) -> tuple[dict[str, Any], Any]:
    args = {
        "title": _words(rng, 6),
        "priority": rng.choice(["low", "medium", "high"]),
        "labels": rng.sample(["billing", "bug", "vip", "refund", "infra", "data"], k=rng.randint(1, 3)),
        "assignee": {"id": rng.randrange(1000), "name": rng.choice(PEOPLE)},
    }
    return args, {
        "ticket": f"TCK-{rng.randrange(10**5)}",
        "url": f"https://tickets.example.com/{rng.randrange(10**5)}",
        "created": _date(rng),
    }


def _email(rng: random.Random) -> tuple[dict[str, Any], Any]:
    args = {
        "to": [f"{p}@example.com" for p in rng.sample(PEOPLE, k=rng.randint(1, 3))],
        "subject": _words(rng, 5),
        "body": _words(rng, 40),
    }
    if rng.random() < 0.3:
        args["cc"] = [f"{rng.choice(PEOPLE)}@example.com"]
    return args, {"message_id": f"<{rng.randrange(10**9)}@mail.example.com>", "queued": True}


def _calendar(rng: random.Random) -> tuple[dict[str, Any], Any]:
    day = _date(rng)
    args = {
        "event": {
            "title": _words(rng, 4),
            "start": f"{day}T{rng.randint(8, 16):02d}:00:00Z",
            "end": f"{day}T{rng.randint(17, 19):02d}:00:00Z",
            "attendees": [
                {"email": f"{p}@example.com", "optional": rng.random() < 0.3} for p in rng.sample(PEOPLE, k=3)
            ],
        },
        "notify": rng.random() < 0.5,
    }
    return args, {"event_id": f"EV{rng.randrange(10**6)}", "conflicts": []}


def _http(rng: random.Random) -> tuple[dict[str, Any], Any]:
    args = {
        "url": f"https://api.example.com/v2/{rng.choice(WORDS)}/{rng.randrange(10**4)}",
        "headers": {"Accept": "application/json", "X-Trace": str(rng.randrange(10**9))},
    }
    return args, {"status": 200, "body": {"data": [_words(rng, 6) for _ in range(5)], "next": None}}


TOOLS: dict[str, Callable[[random.Random], tuple[dict[str, Any], Any]]] = {
    "search_web": _search,
    "get_weather": _weather,
    "sql_query": _sql,
    "get_order": _order,
    "issue_refund": _refund,
    "create_ticket": _ticket,
    "send_email": _email,
    "create_event": _calendar,
    "http_get": _http,
}
TOOL_NAMES = list(TOOLS)

# --------------------------------------------------------------------------------------------
# the agent trajectory


def _call_id(rng: random.Random) -> str:
    return "call_" + "".join(
        rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789") for _ in range(22)
    )


def _dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()


def agent_messages(rng: random.Random) -> list[Msg]:
    """system, user, 2–4 assistant turns of 1–3 tool calls (each followed by its results), final answer."""
    system = " ".join(rng.sample(SYSTEM_SENTENCES, k=rng.randint(9, 13)))
    msgs: list[Msg] = [
        {"role": "system", "content": system},
        {
            "role": "user",
            "content": f"Please look into the {rng.choice(TOPICS)} for {rng.choice(CITIES)[0]}. {_words(rng, 25)}.",
        },
    ]
    for _ in range(rng.randint(2, 4)):
        calls = []
        results = []
        for _ in range(rng.choices([1, 2, 3], weights=[4, 4, 2])[0]):
            name = rng.choice(TOOL_NAMES)
            args, result = TOOLS[name](rng)
            cid = _call_id(rng)
            calls.append({"id": cid, "type": "function", "function": {"name": name, "arguments": _dumps(args)}})
            results.append({"role": "tool", "tool_call_id": cid, "content": _dumps(result)})
        content = f"Checking {_words(rng, 6)}." if rng.random() < 0.3 else None
        msgs.append({"role": "assistant", "content": content, "tool_calls": calls})
        msgs.extend(results)
    msgs.append({"role": "assistant", "content": f"Summary: {_words(rng, 60)}."})
    return msgs


# --------------------------------------------------------------------------------------------
# reference variants: each takes the agent's messages and returns (agent, reference)


def _assistant_with_calls(msgs: list[Msg]) -> list[int]:
    return [i for i, m in enumerate(msgs) if m["role"] == "assistant" and m.get("tool_calls")]


def _short_reference(msgs: list[Msg]) -> list[Msg]:
    """The reference keeps the structure but not the bulky texts (content is never compared)."""
    out: list[Msg] = []
    for m in msgs:
        m = copy.deepcopy(m)
        if m["role"] == "system":
            m["content"] = "You are an operations assistant."
        elif m["role"] == "tool":
            m["content"] = '{"ok": true}'
        elif m["role"] == "assistant" and not m.get("tool_calls"):
            m["content"] = "Expected final answer."
        out.append(m)
    return out


def _args_of(call: dict[str, Any]) -> dict[str, Any]:
    a = call["function"]["arguments"]
    return orjson.loads(a) if isinstance(a, str) else a


def _set_args(call: dict[str, Any], args: dict[str, Any]) -> None:
    call["function"]["arguments"] = _dumps(args)


def _tool_messages_for(msgs: list[Msg], idx: int) -> list[Msg]:
    n = len(msgs[idx]["tool_calls"])
    return msgs[idx + 1 : idx + 1 + n]


def v_same(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    return True


def v_args_reformatted(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """Same args, different JSON text (key order, whitespace) or dict arguments in the reference."""
    for i in _assistant_with_calls(r):
        for call in r[i]["tool_calls"]:
            args = _args_of(call)
            if rng.random() < 0.5:
                call["function"]["arguments"] = args  # dict arguments
            else:
                call["function"]["arguments"] = orjson.dumps(
                    dict(reversed(list(args.items()))), option=orjson.OPT_INDENT_2
                ).decode()
    return True


def v_reorder_within(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    for i in _assistant_with_calls(r):
        calls = r[i]["tool_calls"]
        if len(calls) > 1 and len({c["function"]["name"] for c in calls}) > 1:
            calls.reverse()
            return True
    return False


def v_reorder_across(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    idx = _assistant_with_calls(r)
    if len(idx) < 2:
        return False
    i, j = idx[0], idx[1]
    ci, cj = r[i]["tool_calls"], r[j]["tool_calls"]
    if len(ci) != len(cj) or [c["function"]["name"] for c in ci] == [c["function"]["name"] for c in cj]:
        return False
    r[i]["tool_calls"], r[j]["tool_calls"] = cj, ci
    return True


def v_extra_call(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The agent made one call the reference does not have (drop it from the reference)."""
    idx = [i for i in _assistant_with_calls(r) if len(r[i]["tool_calls"]) > 1]
    if not idx:
        return False
    i = rng.choice(idx)
    k = rng.randrange(len(r[i]["tool_calls"]))
    del r[i]["tool_calls"][k]
    del r[i + 1 + k]
    return True


def v_missing_call(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The reference expects one more call in some assistant message."""
    i = rng.choice(_assistant_with_calls(r))
    name = rng.choice(TOOL_NAMES)
    args, _ = TOOLS[name](rng)
    cid = _call_id(rng)
    n = len(r[i]["tool_calls"])
    r[i]["tool_calls"].append({"id": cid, "type": "function", "function": {"name": name, "arguments": _dumps(args)}})
    r.insert(i + 1 + n, {"role": "tool", "tool_call_id": cid, "content": '{"ok": true}'})
    return True


def v_missing_turn(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The reference has a whole extra tool turn (copied from an existing one, so names repeat)."""
    i = rng.choice(_assistant_with_calls(r))
    block = copy.deepcopy([r[i], *_tool_messages_for(r, i)])
    at = len(r) - 1
    r[at:at] = block
    return True


def v_different_args(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    i = rng.choice(_assistant_with_calls(r))
    call = rng.choice(r[i]["tool_calls"])
    args = _args_of(call)
    key = rng.choice(sorted(args))
    args[key] = {"changed": _words(rng, 2)} if isinstance(args[key], dict) else f"other {_words(rng, 1)}"
    _set_args(call, args)
    return True


def v_agent_extra_key(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The agent passed an extra top-level argument: args superset passes, subset/exact fail."""
    i = rng.choice(_assistant_with_calls(a))
    call = rng.choice(a[i]["tool_calls"])
    args = _args_of(call)
    args["trace_note"] = _words(rng, 3)
    _set_args(call, args)
    return True


def v_agent_missing_key(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The agent left out an argument the reference has: args subset passes, superset/exact fail."""
    candidates = [
        (i, k) for i in _assistant_with_calls(a) for k, c in enumerate(a[i]["tool_calls"]) if len(_args_of(c)) > 1
    ]
    if not candidates:
        return False
    i, k = rng.choice(candidates)
    call = a[i]["tool_calls"][k]
    args = _args_of(call)
    del args[rng.choice(sorted(args))]
    _set_args(call, args)
    return True


def v_extra_nested_key(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """An extra key inside a nested argument object: top-level subset/superset see a different value."""
    for i in _assistant_with_calls(a):
        for call in a[i]["tool_calls"]:
            args = _args_of(call)
            nested = [k for k, v in args.items() if isinstance(v, dict)]
            if nested:
                args[rng.choice(nested)]["extra"] = True
                _set_args(call, args)
                return True
    return False


def v_numeric_equivalent(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """Integers written as floats in the reference (1 == 1.0 in every library)."""
    for i in _assistant_with_calls(r):
        for call in r[i]["tool_calls"]:
            args = _args_of(call)
            ints = [k for k, v in args.items() if type(v) is int and not isinstance(v, bool)]
            if ints:
                for k in ints:
                    args[k] = float(args[k])
                _set_args(call, args)
                return True
    return False


def v_renamed_tool(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    i = rng.choice(_assistant_with_calls(r))
    call = rng.choice(r[i]["tool_calls"])
    call["function"]["name"] = rng.choice([n for n in TOOL_NAMES if n != call["function"]["name"]])
    return True


def v_split_message(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The reference makes the calls of one multi-call message in separate assistant messages."""
    idx = [i for i in _assistant_with_calls(r) if len(r[i]["tool_calls"]) > 1]
    if not idx:
        return False
    i = idx[0]
    calls = r[i]["tool_calls"]
    tools = _tool_messages_for(r, i)
    block: list[Msg] = []
    for c, t in zip(calls, tools, strict=True):
        block.append({"role": "assistant", "content": None, "tool_calls": [c]})
        block.append(t)
    r[i : i + 1 + len(calls)] = block
    return True


def v_merged_messages(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The reference makes the calls of two consecutive tool turns in one assistant message."""
    idx = _assistant_with_calls(r)
    if len(idx) < 2:
        return False
    i, j = idx[0], idx[1]
    first, second = r[i], r[j]
    merged = {"role": "assistant", "content": None, "tool_calls": first["tool_calls"] + second["tool_calls"]}
    tools = _tool_messages_for(r, i) + _tool_messages_for(r, j)
    end = j + 1 + len(second["tool_calls"])
    r[i:end] = [merged, *tools]
    return True


def v_calls_only_reference(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The reference lists only the assistant tool-call messages (no system/user/tool/final)."""
    r[:] = [r[i] for i in _assistant_with_calls(r)]
    return True


def v_duplicate_call(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The agent repeated one call (same name and args) in the same message."""
    i = rng.choice(_assistant_with_calls(a))
    call = copy.deepcopy(a[i]["tool_calls"][0])
    call["id"] = _call_id(rng)
    n = len(a[i]["tool_calls"])
    a[i]["tool_calls"].append(call)
    a.insert(i + 1 + n, {"role": "tool", "tool_call_id": call["id"], "content": '{"cached": true}'})
    return True


def v_greedy_trap(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """Two calls of one tool whose args nest (x ⊂ x+y) in opposite orders: greedy pairing fails."""
    i = _assistant_with_calls(r)[0]
    x = {"query": _words(rng, 3)}
    xy = {**x, "limit": 5}

    def mk(args: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": _call_id(rng),
            "type": "function",
            "function": {"name": "search_web", "arguments": _dumps(args)},
        }

    r[i]["tool_calls"] = [mk(x), mk(xy)]
    a[i]["tool_calls"] = [mk(xy), mk(x)]
    for msgs in (a, r):  # replace the old tool results by one per new call
        j = i + 1
        while j < len(msgs) and msgs[j]["role"] == "tool":
            j += 1
        msgs[i + 1 : j] = [
            {"role": "tool", "tool_call_id": c["id"], "content": '{"hits": []}'} for c in msgs[i]["tool_calls"]
        ]
    return True


def v_empty_reference(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    r[:] = [m for m in r if m["role"] in ("system", "user")] + [{"role": "assistant", "content": "No tools needed."}]
    return True


def v_agent_no_tools(rng: random.Random, a: list[Msg], r: list[Msg]) -> bool:
    """The agent answered straight away."""
    a[:] = [a[0], a[1], {"role": "assistant", "content": f"I cannot help with {_words(rng, 3)}."}]
    return True


#: variant name -> (weight, function). ``same`` dominates, as in production corpora.
VARIANTS: dict[str, tuple[int, Callable[[random.Random, list[Msg], list[Msg]], bool]]] = {
    "same": (20, v_same),
    "args_reformatted": (6, v_args_reformatted),
    "reorder_within_message": (6, v_reorder_within),
    "reorder_across_messages": (6, v_reorder_across),
    "extra_call": (6, v_extra_call),
    "missing_call": (6, v_missing_call),
    "missing_turn": (3, v_missing_turn),
    "different_args": (6, v_different_args),
    "agent_extra_key": (6, v_agent_extra_key),
    "agent_missing_key": (6, v_agent_missing_key),
    "extra_nested_key": (4, v_extra_nested_key),
    "numeric_equivalent": (3, v_numeric_equivalent),
    "renamed_tool": (4, v_renamed_tool),
    "split_message": (5, v_split_message),
    "merged_messages": (4, v_merged_messages),
    "calls_only_reference": (4, v_calls_only_reference),
    "duplicate_call": (3, v_duplicate_call),
    "greedy_trap": (2, v_greedy_trap),
    "empty_reference": (1, v_empty_reference),
    "agent_no_tools": (1, v_agent_no_tools),
}
_VARIANT_NAMES = list(VARIANTS)
_VARIANT_WEIGHTS = [w for w, _ in VARIANTS.values()]


def make_pair(rng: random.Random, variant: str | None = None) -> tuple[list[Msg], list[Msg], str]:
    """(agent messages, reference messages, variant actually applied)."""
    agent = agent_messages(rng)
    ref = _short_reference(agent)
    name = variant or rng.choices(_VARIANT_NAMES, weights=_VARIANT_WEIGHTS)[0]
    if not VARIANTS[name][1](rng, agent, ref):
        name = "same"  # the trajectory had no room for this variant; agent and reference stay equal
        ref = _short_reference(agent)
    return agent, ref, name


def record_rng(seed: int, i: int) -> random.Random:
    return random.Random(seed * 1_000_003 + i)


def make_record(seed: int, i: int, shape: str = "flat", variant: str | None = None) -> dict[str, Any]:
    """Record ``i`` of the corpus for ``seed`` (independent of every other record)."""
    rng = record_rng(seed, i)
    agent, ref, name = make_pair(rng, variant)
    rid = f"trace-{seed}-{i:08d}"
    meta = {"variant": name, "model": rng.choice(["gpt-4o-mini", "gpt-4.1", "o4-mini"]), "seq": i}
    if shape == "flat":
        return {"id": rid, "messages": agent, "reference_outputs": ref, "metadata": meta}
    return {
        "id": rid,
        "inputs": {"messages": agent[:2]},
        "outputs": {"messages": agent},
        "reference_outputs": {"messages": ref},
        "metadata": meta,
    }


# --------------------------------------------------------------------------------------------
# malformed lines

MALFORMED_KINDS = (
    "not_json",
    "truncated_json",
    "wrong_shape",
    "messages_not_list",
    "unknown_role",
    "bad_tool_args",
)


def malformed_line(rng: random.Random, good: dict[str, Any], shape: str) -> tuple[bytes, str]:
    kind = rng.choice(MALFORMED_KINDS)
    if kind == "not_json":
        return b"this is not json " + _words(rng, 5).encode(), kind
    if kind == "truncated_json":
        raw = orjson.dumps(good)
        return raw[: rng.randint(10, len(raw) - 10)], kind
    if kind == "wrong_shape":
        return orjson.dumps(rng.choice([[1, 2, 3], "just a string", 42, None, {"foo": "bar"}])), kind
    msgs = good["messages"] if shape == "flat" else good["outputs"]["messages"]
    if kind == "messages_not_list":
        if shape == "flat":
            good["messages"] = {"role": "user"}
        else:
            good["outputs"]["messages"] = "not a list"
        return orjson.dumps(good), kind
    if kind == "unknown_role":
        rng.choice(msgs[1:])["role"] = rng.choice(["robot", "narrator", "Assistant "])
        return orjson.dumps(good), kind
    calls = (
        next(m["tool_calls"] for m in msgs if m.get("tool_calls")) if any(m.get("tool_calls") for m in msgs) else None
    )
    if calls is None:
        return b"{", "truncated_json"
    calls[0]["function"]["arguments"] = '{"query": "unterminated'
    return orjson.dumps(good), kind


# --------------------------------------------------------------------------------------------
# output


@contextmanager
def open_out(path: str) -> Iterator[IO[bytes]]:
    if path == "-":
        yield sys.stdout.buffer
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".gz":  # mtime=0 and no file name: byte-identical output for the same options
        with open(p, "wb") as raw, gzip.GzipFile("", "wb", 5, raw, mtime=0) as f:
            yield f  # type: ignore[misc]
    elif p.suffix == ".zst":
        import zstandard

        with open(p, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as zf:
            yield zf  # type: ignore[misc]
    else:
        with open(p, "wb") as f:
            yield f


def generate(
    n: int,
    out: IO[bytes],
    *,
    seed: int = 0,
    shape: str = "flat",
    malformed: float = 0.0,
    start: int = 0,
) -> dict[str, Any]:
    """Write ``n`` lines; returns a manifest (counts per variant, malformed lines and their kinds)."""
    variants: Counter[str] = Counter()
    bad: dict[str, list[int]] = {}
    mrng = random.Random(seed ^ 0x5EED)
    buf: list[bytes] = []
    for i in range(start, start + n):
        shp = shape if shape != "mixed" else ("flat" if i % 2 == 0 else "nested")
        rec = make_record(seed, i, shp)
        if malformed and mrng.random() < malformed:
            line, kind = malformed_line(mrng, rec, shp)
            bad.setdefault(kind, []).append(i - start + 1)
        else:
            variants[rec["metadata"]["variant"]] += 1
            line = orjson.dumps(rec)
        buf.append(line)
        if len(buf) >= 1000:
            out.write(b"\n".join(buf) + b"\n")
            buf.clear()
    if buf:
        out.write(b"\n".join(buf) + b"\n")
    return {
        "n": n,
        "seed": seed,
        "shape": shape,
        "good": sum(variants.values()),
        "variants": dict(sorted(variants.items())),
        "malformed": {k: len(v) for k, v in sorted(bad.items())},
        "malformed_lines": dict(sorted(bad.items())),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=1000, help="number of lines (default 1000)")
    ap.add_argument("-o", "--output", default="-", help="path (.jsonl, .jsonl.gz, .jsonl.zst) or - for stdout")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", choices=["flat", "nested", "mixed"], default="flat")
    ap.add_argument("--malformed", type=float, default=0.0, help="fraction of defective lines (0..1)")
    ap.add_argument("--manifest", help="write a JSON manifest (variants, malformed kinds and line numbers)")
    args = ap.parse_args(argv)
    with open_out(args.output) as out:
        manifest = generate(args.n, out, seed=args.seed, shape=args.shape, malformed=args.malformed)
    if args.manifest:
        Path(args.manifest).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    summary = {k: v for k, v in manifest.items() if k != "malformed_lines"}
    print(orjson.dumps(summary).decode(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
