"""Trace exports built as the tools write them, independently of :mod:`tests.support.exports`.

* LangSmith runs are *recorded by the real SDKs*: an agent calling a ``wrap_openai`` client (its
  HTTP answered by an ``httpx.MockTransport``) with ``@traceable`` tools, and a LangChain agent (a
  chat model answering ``AIMessage`` s with ``tool_calls``, ``@tool`` tools invoked with the model's
  tool calls) traced with the inputs ``LangChainTracer`` records. Each run becomes a row of the bulk
  export's "Run data format" (:data:`LANGSMITH_SCHEMA`: ``timestamp[us, tz=UTC]`` times, JSON-text
  ``inputs`` / ``outputs`` / ``extra`` / ``events`` as the SDK serializes them, ``list<string>`` tags,
  token counts and costs, ``session_id``, ``status``, ``error``).
* Langfuse rows follow the blob-storage export field reference: ``observations_v2/`` enriched rows
  (root ``parent_observation_id`` an empty string, ``usage_details`` / ``cost_details`` maps, trace
  fields copied in) and the legacy ``traces/`` + ``observations/`` pair (null parents).

Writers shuffle the rows *across* several Parquet files of small row groups: a trace's rows are
in any of them. Each builder returns ``(rows, expected)``, ``expected[trace_id]`` holding the tool
calls ``[(name, args), ...]`` in order, the task and the final answer.
"""

# ruff: noqa: B023 - each trace's helpers are called only within its own loop iteration
from __future__ import annotations

import json
import random
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

Calls = list[tuple[str, dict[str, Any]]]
_ARGS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "get_weather": lambda r: {"city": r.choice(["Paris", "Oslo", "Lima"])},
    "search_docs": lambda r: {"query": r.choice(["refund policy", "api limits"]), "top_k": r.randint(1, 4)},
    "lookup_order": lambda r: {"order_id": f"ord_{r.randint(1000, 9999)}"},
}


def _steps(r: random.Random) -> list[Calls]:
    """One to two model turns, each calling one or two tools."""
    return [
        [(name, _ARGS[name](r)) for name in r.sample(sorted(_ARGS), r.randint(1, 2))] for _ in range(r.randint(1, 2))
    ]


def _tool_result(name: str, args: dict[str, Any]) -> str:
    return f"{name} -> {json.dumps(args, sort_keys=True)}"


def get_weather(city: str) -> str:
    """The weather in a city."""
    return _tool_result("get_weather", {"city": city})


def search_docs(query: str, top_k: int = 3) -> str:
    """Search the documentation."""
    return _tool_result("search_docs", {"query": query, "top_k": top_k})


def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return _tool_result("lookup_order", {"order_id": order_id})


_TOOLS: dict[str, Callable[..., str]] = {
    "get_weather": get_weather,
    "search_docs": search_docs,
    "lookup_order": lookup_order,
}


# -- LangSmith, recorded by the SDKs -----------------------------------------------------------


def _completion(i: int, content: str | None, calls: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """A chat.completion body as the OpenAI API returns it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for cid, n, a in calls
        ]
    return {
        "id": f"chatcmpl-{i}",
        "object": "chat.completion",
        "created": 1764000000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": 50 + i, "completion_tokens": 10 + i, "total_tokens": 60 + 2 * i},
    }


def _openai_agent_run(t: int, steps: list[Calls], answer: str) -> Any:
    """A ``@traceable`` agent calling a ``wrap_openai`` client and ``@traceable(run_type="tool")``
    tools; the root RunTree as the SDK recorded it."""
    import httpx
    import openai
    from langsmith import Client, traceable, tracing_context

    with warnings.catch_warnings():  # langsmith.wrappers imports a deprecated module of its own
        warnings.simplefilter("ignore", DeprecationWarning)
        from langsmith.wrappers import wrap_openai

    script = iter(
        [_completion(i, None, [(f"call_{t}_{i}_{j}", n, a) for j, (n, a) in enumerate(s)]) for i, s in enumerate(steps)]
        + [_completion(len(steps), answer, [])]
    )
    http = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, json=next(script))))
    client = wrap_openai(openai.OpenAI(api_key="sk-test", base_url="http://model.invalid/v1", http_client=http))
    tools = {n: traceable(run_type="tool", name=n)(f) for n, f in _TOOLS.items()}
    specs = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in _ARGS]

    @traceable(name="support_agent")
    def agent(question: str) -> str | None:
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": question},
        ]
        while True:
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=[dict(m) for m in msgs], tools=specs)
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content
            msgs.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                out = tools[call.function.name](**json.loads(call.function.arguments))
                msgs.append({"role": "tool", "tool_call_id": call.id, "content": out})

    got: dict[str, Any] = {}
    offline = Client(api_key="test", api_url="http://127.0.0.1:1", auto_batch_tracing=False)
    with tracing_context(enabled="local", client=offline, project_name="support-prod"):
        agent(f"question {t}?", langsmith_extra={"on_end": lambda rt: got.setdefault("root", rt), "tags": ["prod"]})
    return got["root"]


def _langchain_agent_run(t: int, steps: list[Calls], answer: str) -> Any:
    """A LangChain agent loop (a chat model's AIMessages with ``tool_calls``, ``@tool`` tools
    invoked with them) under a chain, recorded with the inputs ``LangChainTracer`` records."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tools import StructuredTool
    from langchain_core.tracers.langchain import LangChainTracer
    from langchain_core.tracers.run_collector import RunCollectorCallbackHandler

    class Recorder(RunCollectorCallbackHandler):  # chat inputs as LangChainTracer records them
        on_chat_model_start = LangChainTracer.on_chat_model_start

        def _get_run_kwargs(self, parent_run_id: Any, extra: dict[str, Any]) -> dict[str, Any]:
            return {"extra": extra}

    replies = [
        AIMessage(
            content="",
            tool_calls=[{"name": n, "args": a, "id": f"call_{t}_{i}_{j}"} for j, (n, a) in enumerate(s)],
            usage_metadata={"input_tokens": 50 + i, "output_tokens": 10 + i, "total_tokens": 60 + 2 * i},
        )
        for i, s in enumerate(steps)
    ] + [AIMessage(content=answer)]
    model = GenericFakeChatModel(messages=iter(replies))
    tools = {n: StructuredTool.from_function(f) for n, f in _TOOLS.items()}

    def loop(inputs: dict[str, Any]) -> dict[str, Any]:
        msgs: list[BaseMessage] = [SystemMessage("You are a support agent."), HumanMessage(inputs["input"])]
        while True:
            reply = model.invoke(msgs)
            msgs.append(reply)
            if not isinstance(reply, AIMessage) or not reply.tool_calls:
                return {"output": reply.content}
            for call in reply.tool_calls:
                msgs.append(tools[call["name"]].invoke({**call, "type": "tool_call"}))

    recorder = Recorder()
    RunnableLambda(loop).invoke({"input": f"question {t}?"}, config={"callbacks": [recorder], "run_name": "agent"})
    return recorder.traced_runs[0]


def _runs(root: Any) -> Iterator[Any]:
    stack = [root]
    while stack:
        run = stack.pop()
        stack.extend(run.child_runs or [])
        yield run


def _run_row(run: Any, session_id: str) -> dict[str, Any]:
    """One bulk-export row of a recorded run (JSON text as the SDK serializes it)."""
    from langsmith._internal._serde import dumps_json

    def text(v: Any) -> str | None:
        return None if v is None else dumps_json(v).decode()

    outputs = run.outputs or {}
    usage = outputs.get("usage_metadata") if run.run_type == "llm" else None
    if run.run_type == "llm" and not usage:
        gens = outputs.get("generations") or [[{}]]
        usage = ((gens[0][0].get("message") or {}).get("kwargs") or {}).get("usage_metadata")
    costed = bool(usage)
    usage = usage or {}
    return {
        "id": str(run.id),
        "name": run.name,
        "run_type": run.run_type,
        "start_time": run.start_time.astimezone(UTC),
        "end_time": run.end_time.astimezone(UTC) if run.end_time else None,
        "inputs": text(run.inputs),
        "outputs": text(run.outputs),
        "extra": text(run.extra or {}),
        "events": text(run.events or []),
        "error": run.error,
        "tags": list(run.tags or []),
        "trace_id": str(run.trace_id),
        "dotted_order": run.dotted_order,
        "parent_run_id": str(run.parent_run_id) if run.parent_run_id else None,
        "is_root": run.parent_run_id is None,
        "status": "error" if run.error else "success",
        "prompt_tokens": usage.get("input_tokens", 0),
        "completion_tokens": usage.get("output_tokens", 0),
        "total_tokens": usage.get("total_tokens", 0),
        "prompt_cost": 1e-5 if costed else None,
        "completion_cost": 2e-5 if costed else None,
        "total_cost": 3e-5 if costed else None,
        "first_token_time": None,
        "session_id": session_id,
        "reference_example_id": None,
        "tenant_id": "7a1e0f52-0000-4000-8000-000000000001",
    }


def langsmith_sdk_export(n_traces: int, *, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Rows of ``n_traces`` agent runs recorded by the SDKs: even traces OpenAI-wrapped, odd ones
    LangChain (module docs)."""
    r = random.Random(seed)
    rows: list[dict[str, Any]] = []
    expected: dict[str, dict[str, Any]] = {}
    for t in range(n_traces):
        steps, answer = _steps(r), f"answer {t}."
        root = (_openai_agent_run if t % 2 == 0 else _langchain_agent_run)(t, steps, answer)
        rows.extend(_run_row(run, "c0ffee00-0000-4000-8000-00000000beef") for run in _runs(root))
        calls = [c for s in steps for c in s]
        expected[str(root.trace_id)] = {"calls": calls, "final": answer, "input": f"question {t}?"}
    return rows, expected


def langsmith_schema() -> Any:
    """The Arrow schema of a LangSmith bulk export's run rows."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    text = pa.string()
    return pa.schema(
        [
            *(("id", text), ("name", text), ("run_type", text), ("start_time", ts), ("end_time", ts)),
            *(("inputs", text), ("outputs", text), ("extra", text), ("events", text), ("error", text)),
            *(("tags", pa.list_(text)), ("trace_id", text), ("dotted_order", text), ("parent_run_id", text)),
            *(("is_root", pa.bool_()), ("status", text)),
            *((k, pa.int64()) for k in ("prompt_tokens", "completion_tokens", "total_tokens")),
            *((k, pa.float64()) for k in ("prompt_cost", "completion_cost", "total_cost")),
            *(("first_token_time", ts), ("session_id", text), ("reference_example_id", text), ("tenant_id", text)),
        ]
    )


def list_runs_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as a ``list_runs`` dump writes them: ``langsmith.schemas.Run(...).model_dump_json()``."""
    from langsmith.schemas import Run

    lines = []
    for row in rows:
        d = {k: v for k, v in row.items() if k not in ("is_root", "tenant_id")}
        for k in ("inputs", "outputs", "extra", "events"):
            d[k] = None if d[k] is None else json.loads(d[k])
        lines.append(Run(**{**d, "inputs": d["inputs"] or {}}).model_dump_json())
    return lines


# -- Langfuse, as the blob-storage export documents it -----------------------------------------

_T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


def langfuse_blob_export(
    n_traces: int, *, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(observations, traces, expected)``: observation rows with the enriched (v2) trace columns
    (:func:`legacy_observations` strips them), and the legacy ``traces/`` rows."""
    r = random.Random(seed)
    observations: list[dict[str, Any]] = []
    traces: list[dict[str, Any]] = []
    expected: dict[str, dict[str, Any]] = {}
    for t in range(n_traces):
        trace_id, root_id = f"{r.getrandbits(128):032x}", f"{r.getrandbits(64):016x}"
        clock = [_T0 + timedelta(minutes=t)]

        def tick() -> datetime:
            clock[0] += timedelta(milliseconds=r.randint(3, 400))
            return clock[0]

        question, answer, wrapped = f"question {t}?", f"answer {t}.", t % 2 == 1
        trace = {"user_id": f"user-{t}", "session_id": f"sess-{t // 2}", "trace_name": "support-agent"}
        rows: list[dict[str, Any]] = []

        def obs(kind: str, name: str, start: datetime, end: datetime | None, inp: Any, out: Any, **kw: Any) -> str:
            oid = root_id if kind == "AGENT" else f"{r.getrandbits(64):016x}"
            rows.append(
                {
                    "id": oid,
                    "trace_id": trace_id,
                    "project_id": "cm-proj-1",
                    "environment": "production",
                    "type": kind,
                    "parent_observation_id": "" if kind == "AGENT" else root_id,
                    "start_time": start,
                    "end_time": end,
                    "name": name,
                    "metadata": json.dumps(kw.get("metadata", {})),
                    "level": "DEFAULT",
                    "status_message": "",
                    "version": "",
                    "input": inp,
                    "output": out,
                    "provided_model_name": kw.get("model", ""),
                    "usage_details": kw.get("usage", {}),
                    "cost_details": {k: v / 1e5 for k, v in kw.get("usage", {}).items()},
                    "total_cost": kw.get("usage", {}).get("total", 0) / 1e5,
                    "latency": (end - start).total_seconds() if end else None,
                    "created_at": start,
                    "updated_at": end or start,
                    "tool_call_names": kw.get("tool_call_names", []),
                    **trace,
                    "tags": ["prod", "support"],
                    "release": "v1.2",
                    "bookmarked": False,
                    "public": False,
                }
            )
            return oid

        start = clock[0]
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": question},
        ]
        steps = _steps(r)
        for i, step in enumerate(steps):
            calls = [
                {"id": f"call_{t}_{i}_{j}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for j, (n, a) in enumerate(step)
            ]
            out = {"role": "assistant", "content": None, "tool_calls": calls}
            inp = {"messages": list(msgs), "tools": [{"type": "function"}]} if wrapped else list(msgs)
            usage = {"input": 50, "output": 10, "total": 60}
            names = [n for n, _ in step]
            kw = {"usage": usage, "model": "gpt-4o-mini", "tool_call_names": names}
            obs("GENERATION", "OpenAI-generation", tick(), tick(), json.dumps(inp), json.dumps(out), **kw)
            msgs.append(out)
            for call, (n, a) in zip(calls, step, strict=True):
                result = _tool_result(n, a)
                tool_in = json.dumps({"args": [], "kwargs": a} if wrapped else a)
                obs("TOOL", n, tick(), tick(), tool_in, json.dumps(result) if wrapped else result)
                msgs.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        inp = {"messages": list(msgs)} if wrapped else list(msgs)
        final = json.dumps({"role": "assistant", "content": answer})
        usage = {"input": 80, "output": 12, "total": 92}
        obs("GENERATION", "OpenAI-generation", tick(), tick(), json.dumps(inp), final, usage=usage, model="gpt-4o-mini")
        obs("EVENT", "guardrail-check", tick(), None, "", json.dumps({"ok": True}))
        end = tick()
        obs("AGENT", "support-agent", start, end, json.dumps({"args": [question], "kwargs": {}}), json.dumps(answer))
        observations.extend(rows)
        traces.append(
            {
                "id": trace_id,
                "timestamp": start,
                "name": "support-agent",
                "environment": "production",
                "project_id": "cm-proj-1",
                "metadata": json.dumps({"tenant": "acme"}),
                "user_id": trace["user_id"],
                "session_id": trace["session_id"],
                "release": "v1.2",
                "version": None,
                "public": False,
                "bookmarked": False,
                "tags": ["prod", "support"],
                "input": json.dumps({"args": [question], "kwargs": {}}),
                "output": json.dumps(answer),
                "created_at": start,
                "updated_at": end,
            }
        )
        expected[trace_id] = {"calls": [c for s in steps for c in s], "final": answer, "input": question}
    return observations, traces, expected


_V2_ONLY = ("user_id", "session_id", "trace_name", "tags", "release", "bookmarked", "public")


def legacy_observations(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The legacy ``observations/`` rows: no trace columns, null root parents."""
    return [
        {
            **{k: v for k, v in o.items() if k not in _V2_ONLY},
            "parent_observation_id": o["parent_observation_id"] or None,
        }
        for o in rows
    ]


def langfuse_schema(kind: str) -> Any:
    """Arrow schema of ``observations_v2`` / ``observations`` / ``traces`` rows."""
    import pyarrow as pa

    ms, text = pa.timestamp("ms", tz="UTC"), pa.string()
    if kind == "traces":
        fields = [("id", text), ("timestamp", ms), ("name", text), ("environment", text), ("project_id", text)]
        fields += [(k, text) for k in ("metadata", "user_id", "session_id", "release", "version")]
        fields += [("public", pa.bool_()), ("bookmarked", pa.bool_()), ("tags", pa.list_(text))]
        fields += [("input", text), ("output", text), ("created_at", ms), ("updated_at", ms)]
        return pa.schema(fields)
    fields = [(k, text) for k in ("id", "trace_id", "project_id", "environment", "type", "parent_observation_id")]
    fields += [("start_time", ms), ("end_time", ms)]
    fields += [(k, text) for k in ("name", "metadata", "level", "status_message", "version", "input", "output")]
    fields += [("provided_model_name", text), ("usage_details", pa.map_(text, pa.int64()))]
    fields += [("cost_details", pa.map_(text, pa.float64())), ("total_cost", pa.float64()), ("latency", pa.float64())]
    fields += [("created_at", ms), ("updated_at", ms), ("tool_call_names", pa.list_(text))]
    if kind == "observations_v2":
        fields += [(k, text) for k in ("user_id", "session_id", "trace_name")]
        fields += [("tags", pa.list_(text)), ("release", text), ("bookmarked", pa.bool_()), ("public", pa.bool_())]
    return pa.schema(fields)


# -- writers -----------------------------------------------------------------------------------


def write_shuffled_parquet(
    folder: Path, rows: list[dict[str, Any]], schema: Any, *, files: int = 3, seed: int = 0, row_group_size: int = 4
) -> list[Path]:
    """The rows shuffled, then dealt over ``files`` Parquet files (a trace's rows in any of them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = list(rows)
    random.Random(seed).shuffle(rows)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(files):
        path = folder / f"2026-11-21T{9 + k:02d}:00:00.000Z.parquet"
        pq.write_table(pa.Table.from_pylist(rows[k::files], schema=schema), path, row_group_size=row_group_size)
        paths.append(path)
    return paths


def shuffled(rows: list[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    out = list(rows)
    random.Random(seed).shuffle(out)
    return out


def _handler_message(m: Any) -> dict[str, Any]:
    """A LangChain message as Langfuse's LangChain ``CallbackHandler`` records it
    (``_convert_message_to_dict``: a role dict, an AI message's LangChain ``tool_calls`` as they
    are, ``additional_kwargs`` when not empty)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    if isinstance(m, HumanMessage):
        d: dict[str, Any] = {"role": "user", "content": m.content}
    elif isinstance(m, AIMessage):
        d = {"role": "assistant", "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = m.tool_calls
    elif isinstance(m, SystemMessage):
        d = {"role": "system", "content": m.content}
    elif isinstance(m, ToolMessage):
        d = {"role": "tool", "content": m.content, "tool_call_id": m.tool_call_id}
    else:
        raise ValueError(m)
    if m.additional_kwargs:
        d["additional_kwargs"] = m.additional_kwargs
    return d


def langfuse_langchain_export(
    n_traces: int, *, seed: int = 0
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Enriched (v2) observation rows of LangGraph agents traced by Langfuse's LangChain
    ``CallbackHandler``: a ``LangGraph`` root SPAN, GENERATIONs whose input is the handler's
    message dicts followed by the bound tools' definitions (``{"role": "tool", "content": <tool
    schema>}``, as the handler appends them) and whose output is the AI message dict with LangChain
    ``tool_calls``; TOOL observations with ``str(tool_input)`` as input and the ``ToolMessage`` as
    output."""
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    definitions = [convert_to_openai_tool(f) for f in _TOOLS.values()]
    r = random.Random(seed)
    rows: list[dict[str, Any]] = []
    expected: dict[str, dict[str, Any]] = {}
    for t in range(n_traces):
        trace_id, root_id = f"{r.getrandbits(128):032x}", f"{r.getrandbits(64):016x}"
        clock = [_T0 + timedelta(minutes=t)]

        def tick() -> datetime:
            clock[0] += timedelta(milliseconds=r.randint(3, 400))
            return clock[0]

        def row(kind: str, name: str, start: datetime, inp: Any, out: Any, oid: str | None = None, **kw: Any) -> None:
            end = tick()
            rows.append(
                {
                    "id": oid or f"{r.getrandbits(64):016x}",
                    "trace_id": trace_id,
                    "project_id": "cm-proj-1",
                    "environment": "default",
                    "type": kind,
                    "parent_observation_id": "" if oid == root_id else root_id,
                    "start_time": start,
                    "end_time": end,
                    "name": name,
                    "metadata": json.dumps({"langgraph_node": name}),
                    "level": "DEFAULT",
                    "status_message": "",
                    "version": "",
                    "input": json.dumps(inp, default=str),
                    "output": json.dumps(out, default=str),
                    "provided_model_name": kw.get("model", ""),
                    "usage_details": kw.get("usage", {}),
                    "cost_details": {},
                    "total_cost": 0.0,
                    "latency": (end - start).total_seconds(),
                    "created_at": start,
                    "updated_at": end,
                    "tool_call_names": [],
                    "user_id": "",
                    "session_id": "",
                    "trace_name": "LangGraph",
                    "tags": [],
                    "release": "",
                    "bookmarked": False,
                    "public": False,
                }
            )

        start = tick()
        question, answer = f"question {t}?", f"answer {t}."
        msgs: list[BaseMessage] = [SystemMessage("You are a support agent."), HumanMessage(question)]
        steps = _steps(r)
        for i, step in enumerate(steps):
            ai = AIMessage(
                "", tool_calls=[{"name": n, "args": a, "id": f"call_{t}_{i}_{j}"} for j, (n, a) in enumerate(step)]
            )
            prompt = [_handler_message(m) for m in msgs] + [{"role": "tool", "content": d} for d in definitions]
            usage = {"input": 50, "output": 10, "total": 60}
            row("GENERATION", "ChatOpenAI", tick(), prompt, _handler_message(ai), model="gpt-4o-mini", usage=usage)
            msgs.append(ai)
            for call in ai.tool_calls:
                result = ToolMessage(_TOOLS[call["name"]](**call["args"]), tool_call_id=call["id"], name=call["name"])
                row("TOOL", call["name"], tick(), str(call["args"]), result.model_dump())
                msgs.append(result)
        prompt = [_handler_message(m) for m in msgs] + [{"role": "tool", "content": d} for d in definitions]
        final = AIMessage(answer)
        usage = {"total": 9}
        row("GENERATION", "ChatOpenAI", tick(), prompt, _handler_message(final), model="gpt-4o-mini", usage=usage)
        msgs.append(final)
        state = {"messages": [m.model_dump() for m in msgs]}
        row("SPAN", "LangGraph", start, {"messages": [["user", question]]}, state, oid=root_id)
        expected[trace_id] = {"calls": [c for s in steps for c in s], "final": answer, "input": question}
    return rows, expected
