"""Realistic LangSmith bulk exports and Langfuse blob-storage exports, built for tests.

Each builder returns ``(rows, expected)``: the export's rows (as the export writes them: ``inputs``
/ ``outputs`` / ``input`` / ``output`` as JSON text, timestamps as datetimes) and, per trace id,
the tool calls the assembled trace must hold: ``[(name, args), ...]`` in order, plus the final
answer. Writers put the rows into shuffled Parquet files (pyarrow), JSON lines or a JSON array.
"""

# ruff: noqa: B023 - each trace's helpers are called only within its own loop iteration
from __future__ import annotations

import json
import random
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

T0 = datetime(2026, 11, 20, 10, 0, 0, tzinfo=UTC)
TOOLS = [
    ("get_weather", lambda r: {"city": r.choice(["Paris", "Oslo", "Lima"]), "unit": "celsius"}),
    ("search_docs", lambda r: {"query": r.choice(["refund policy", "api limits"]), "top_k": r.randint(1, 5)}),
    ("lookup_order", lambda r: {"order_id": f"ord_{r.randint(1000, 9999)}"}),
]


def _uuid(r: random.Random) -> str:
    return str(uuid.UUID(int=r.getrandbits(128), version=4))


def _dotted(parts: Sequence[tuple[datetime, str]]) -> str:
    return ".".join(f"{t.strftime('%Y%m%dT%H%M%S%f')}Z{i}" for t, i in parts)


def _calls(r: random.Random, n: int) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for _ in range(n):
        name, args = r.choice(TOOLS)
        out.append((name, args(r)))
    return out


# -- LangSmith ----------------------------------------------------------------------------------


def langsmith_export(
    n_traces: int, *, seed: int = 0, style: str = "openai", orphan_tool: bool = False
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Run rows of ``n_traces`` agent traces: root chain → llm (tool calls) → tool runs → llm
    (answer). ``style``: ``openai`` (``inputs.messages`` + ``outputs.choices``) or ``langchain``
    (dumpd messages, ``generations``, ToolMessage outputs carrying ``tool_call_id``).
    ``orphan_tool``: each trace also runs a tool no llm run called (it must become a call)."""
    r = random.Random(seed)
    rows: list[dict[str, Any]] = []
    expected: dict[str, dict[str, Any]] = {}
    for t in range(n_traces):
        trace_id = _uuid(r)
        start = T0 + timedelta(minutes=t)
        question = f"question {t}?"
        answer = f"answer {t}."
        calls = _calls(r, r.randint(1, 3))
        call_ids = [f"call_{r.getrandbits(40):x}" for _ in calls]
        clock = [start]

        def tick() -> datetime:
            clock[0] += timedelta(milliseconds=r.randint(5, 900))
            return clock[0]

        def run(
            rid: str,
            name: str,
            run_type: str,
            inputs: Any,
            outputs: Any,
            parent: tuple[str, str] | None,
            began: datetime,
            **extra: Any,
        ) -> dict[str, Any]:
            return {
                "id": rid,
                "name": name,
                "run_type": run_type,
                "start_time": began,
                "end_time": tick(),
                "inputs": json.dumps(inputs),
                "outputs": json.dumps(outputs),
                "extra": json.dumps({"metadata": {"ls_provider": "openai"}}),
                "error": None,
                "events": json.dumps([{"name": "start", "time": began.isoformat()}]),
                "tags": ["prod"],
                "trace_id": trace_id,
                "dotted_order": parent[1] + "." + _dotted([(began, rid)]) if parent else _dotted([(began, rid)]),
                "parent_run_id": parent[0] if parent else None,
                "status": "success",
                "session_id": "5a1e0b8e-0000-4000-8000-000000000001",
                "prompt_tokens": extra.get("prompt_tokens"),
                "completion_tokens": extra.get("completion_tokens"),
                "total_tokens": extra.get("total_tokens"),
            }

        root_id = trace_id
        root_start = start
        root_dotted = _dotted([(root_start, root_id)])
        system = "You are a support agent."
        history: list[Any]
        if style == "openai":
            history = [{"role": "system", "content": system}, {"role": "user", "content": question}]
            call_msg = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                    for cid, (n, a) in zip(call_ids, calls, strict=True)
                ],
            }
            out1 = {"choices": [{"index": 0, "message": call_msg, "finish_reason": "tool_calls"}]}
            inputs1: Any = {"messages": list(history), "model": "gpt-4o-mini"}
        else:
            history = [_lc("SystemMessage", system), _lc("HumanMessage", question)]
            call_msg = _lc(
                "AIMessage",
                "",
                tool_calls=[
                    {"name": n, "args": a, "id": cid, "type": "tool_call"}
                    for cid, (n, a) in zip(call_ids, calls, strict=True)
                ],
            )
            out1 = {"generations": [[{"text": "", "message": call_msg, "type": "ChatGeneration"}]]}
            inputs1 = {"messages": [list(history)]}
        kids: list[dict[str, Any]] = []
        t1 = tick()
        llm1 = _uuid(r)
        kids.append(
            run(
                llm1,
                "ChatOpenAI",
                "llm",
                inputs1,
                out1,
                (root_id, root_dotted),
                t1,
                prompt_tokens=120,
                completion_tokens=30,
                total_tokens=150,
            )
        )
        history.append(call_msg)
        for cid, (name, args) in zip(call_ids, calls, strict=True):
            result = f"{name} result {r.randint(0, 99)}"
            t2 = tick()
            tid = _uuid(r)
            if style == "openai":
                outputs: Any = {"output": result}
                history.append({"role": "tool", "tool_call_id": cid, "content": result})
            else:
                tool_msg = _lc("ToolMessage", result, tool_call_id=cid, name=name)
                outputs = {"output": tool_msg}
                history.append(tool_msg)
            kids.append(
                run(
                    tid,
                    name,
                    "tool",
                    {"input": json.dumps(args)} if style == "langchain" else args,
                    outputs,
                    (root_id, root_dotted),
                    t2,
                )
            )
        expected_calls = list(calls)
        if orphan_tool:
            t3 = tick()
            args = {"note": f"audit {t}"}
            kids.append(run(_uuid(r), "audit_log", "tool", args, {"output": "ok"}, (root_id, root_dotted), t3))
            expected_calls.append(("audit_log", args))
        t4 = tick()
        if style == "openai":
            out2: Any = {"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]}
            inputs2: Any = {"messages": list(history)}
        else:
            out2 = {"generations": [[{"text": answer, "message": _lc("AIMessage", answer)}]]}
            inputs2 = {"messages": [list(history)]}
        kids.append(
            run(
                _uuid(r),
                "ChatOpenAI",
                "llm",
                inputs2,
                out2,
                (root_id, root_dotted),
                t4,
                prompt_tokens=300,
                completion_tokens=12,
                total_tokens=312,
            )
        )
        root = run(root_id, "support_agent", "chain", {"input": question}, {"output": answer}, None, root_start)
        rows.append(root)
        rows.extend(kids)
        expected[trace_id] = {"calls": expected_calls, "final": answer, "input": question, "tokens": 462}
    return rows, expected


def _lc(cls: str, content: str, **kwargs: Any) -> dict[str, Any]:
    kind = {"SystemMessage": "system", "HumanMessage": "human", "AIMessage": "ai", "ToolMessage": "tool"}[cls]
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", cls],
        "kwargs": {"content": content, "type": kind, **kwargs},
    }


# -- Langfuse -----------------------------------------------------------------------------------


def langfuse_export(n_traces: int, *, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Enriched observation rows (``observations_v2``) of ``n_traces`` agent traces: AGENT root →
    GENERATION (tool calls) → TOOL observations → GENERATION (answer), plus an EVENT and a SPAN."""
    r = random.Random(seed)
    rows: list[dict[str, Any]] = []
    expected: dict[str, dict[str, Any]] = {}
    for t in range(n_traces):
        trace_id = f"{r.getrandbits(128):032x}"
        clock = [T0 + timedelta(minutes=t)]

        def tick() -> datetime:
            clock[0] += timedelta(milliseconds=r.randint(5, 900))
            return clock[0]

        question, answer = f"question {t}?", f"answer {t}."
        calls = _calls(r, r.randint(1, 3))

        def obs(kind: str, name: str, parent: str | None, inp: Any, out: Any, **more: Any) -> dict[str, Any]:
            began = tick()
            return {
                "id": f"{r.getrandbits(64):016x}",
                "trace_id": trace_id,
                "project_id": "proj-1",
                "type": kind,
                "parent_observation_id": parent,
                "name": name,
                "start_time": began,
                "end_time": began + timedelta(milliseconds=r.randint(1, 400)),
                "input": None if inp is None else json.dumps(inp),
                "output": None if out is None else json.dumps(out),
                "metadata": json.dumps({"env": "prod"}),
                "level": "DEFAULT",
                "status_message": None,
                "provided_model_name": more.get("model"),
                "usage_details": more.get("usage"),
                "total_cost": more.get("cost"),
                "trace_name": "support-agent",
                "user_id": f"user-{t % 3}",
                "session_id": f"sess-{t}",
                "tags": ["prod"],
                "release": "v1.2.0",
            }

        agent = obs("AGENT", "support-agent", None, {"question": question}, {"answer": answer})
        msgs: list[Any] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}]
        call_msg = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"call_{i}_{t}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for i, (n, a) in enumerate(calls)
            ],
        }
        gen1 = obs(
            "GENERATION",
            "llm",
            agent["id"],
            msgs,
            call_msg,
            model="gpt-4o",
            usage={"input": 100, "output": 20, "total": 120},
            cost=0.001,
        )
        group = [agent, gen1]
        msgs = [*msgs, call_msg]
        for i, (name, args) in enumerate(calls):
            result = {"ok": True, "value": f"{name}-{i}"}
            group.append(obs("TOOL", name, agent["id"], args, result))
            msgs.append({"role": "tool", "tool_call_id": f"call_{i}_{t}", "content": json.dumps(result)})
        group.append(obs("EVENT", "retrieved", agent["id"], None, {"n": 2}))
        group.append(obs("SPAN", "postprocess", agent["id"], {"x": 1}, {"y": 2}))
        group.append(
            obs(
                "GENERATION",
                "llm",
                agent["id"],
                msgs,
                {"role": "assistant", "content": answer},
                model="gpt-4o",
                usage={"input": 200, "output": 10, "total": 210},
                cost=0.002,
            )
        )
        rows.extend(group)
        expected[trace_id] = {"calls": calls, "final": answer, "input": question, "tokens": 330}
    return rows, expected


#: Columns of the enriched export that the legacy ``observations/`` rows do not have.
ENRICHED = ("trace_name", "user_id", "session_id", "tags", "release")


def langfuse_legacy_export(
    n_traces: int, *, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The legacy ``traces/`` + ``observations/`` pair of ``n_traces`` agent traces:
    ``(trace_rows, observation_rows, expected)``. Observation rows are :func:`langfuse_export`'s
    without the enriched trace columns; each trace row has the columns of Langfuse's ``traces``
    export (``id``, ``timestamp``, ``name``, ``environment``, ``project_id``, ``metadata``,
    ``user_id``, ``session_id``, ``release``, ``version``, ``public``, ``bookmarked``, ``tags``,
    ``input``, ``output``, ``created_at``, ``updated_at``). ``expected`` adds the trace fields,
    which only the trace rows hold (its input differs from the root observation's)."""
    rows, expected = langfuse_export(n_traces, seed=seed)
    observations = [{k: v for k, v in row.items() if k not in ENRICHED} for row in rows]
    traces: list[dict[str, Any]] = []
    for t, (tid, want) in enumerate(expected.items()):
        first = min(row["start_time"] for row in rows if row["trace_id"] == tid)
        question = f"trace-level question {t}?"
        traces.append(
            {
                "id": tid,
                "timestamp": first,
                "name": f"legacy-agent-{t % 2}",
                "environment": "production",
                "project_id": "proj-1",
                "metadata": json.dumps({"tenant": f"t{t}"}),
                "user_id": f"legacy-user-{t}",
                "session_id": f"legacy-sess-{t}",
                "release": "v0.9",
                "version": None,
                "public": False,
                "bookmarked": t == 0,
                "tags": ["legacy", f"n{t}"],
                "input": json.dumps(question),
                "output": json.dumps({"answer": want["final"]}),
                "created_at": first,
                "updated_at": first + timedelta(seconds=5),
            }
        )
        want.update(
            input=question,
            name=f"legacy-agent-{t % 2}",
            userId=f"legacy-user-{t}",
            sessionId=f"legacy-sess-{t}",
            tags=["legacy", f"n{t}"],
            trace_metadata={"tenant": f"t{t}"},
        )
    return traces, observations, expected


# -- writers ------------------------------------------------------------------------------------


def shuffled_files(rows: list[dict[str, Any]], n_files: int, seed: int = 0) -> list[list[dict[str, Any]]]:
    """The rows of each trace kept in one file (as exports do), the rows in every file shuffled."""
    r = random.Random(seed)
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_trace.setdefault(row["trace_id"], []).append(row)
    files: list[list[dict[str, Any]]] = [[] for _ in range(n_files)]
    for i, trace_rows in enumerate(by_trace.values()):
        files[i % n_files].extend(trace_rows)
    for f in files:
        r.shuffle(f)
    return files


def write_parquet(path: Path, rows: list[dict[str, Any]], *, row_group_size: int = 7) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    return path


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def write_json_array(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    return path


def traces_by_id(envs: Sequence[Any]) -> dict[str, Any]:
    """The canonical traces of grouped export records, by trace id; each id read once."""
    from assay.stages.normalize import parse_envelope
    from assay.traces.model import Trace
    from assay.traces.normalize import NormalizeOptions

    traces: dict[str, Any] = {}
    for env in envs:
        t = parse_envelope(env, NormalizeOptions())
        assert isinstance(t, Trace), t
        assert t.id is not None and t.id not in traces, f"trace {t.id} read twice"
        traces[t.id] = t
    return traces
