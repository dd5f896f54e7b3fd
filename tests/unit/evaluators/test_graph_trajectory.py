"""Graph trajectories extracted from real LangGraph threads (a tiny graph with deterministic
nodes, no LLM), scored by strict match and by the LLM judge against the stand-in judge server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from assay.evaluators import (
    GraphTrajectoryJudge,
    aextract_langgraph_trajectory_from_thread,
    agentevals_adapter,
    extract_langgraph_trajectory_from_snapshots,
    extract_langgraph_trajectory_from_thread,
    graph_trajectory_llm_judge,
    graph_trajectory_strict_match,
)
from assay.registry import build_evaluator
from assay.testing.judge_server import JudgeServerThread

langgraph = pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402


def build_graph(*, ask_human: bool = False) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if last.type == "human":
            call = {"name": "get_weather", "args": {"city": "sf"}, "id": "c1"}
            return {"messages": [AIMessage("", tool_calls=[call])]}
        return {"messages": [AIMessage("It's 80 degrees and sunny in SF.")]}

    def tools(state: MessagesState) -> dict[str, Any]:
        if ask_human:
            answer = interrupt("approve the call?")
            return {"messages": [ToolMessage(f"80 and sunny ({answer})", tool_call_id="c1")]}
        return {"messages": [ToolMessage("80 and sunny", tool_call_id="c1")]}

    def route(state: MessagesState) -> str:
        return "tools" if state["messages"][-1].tool_calls else END  # type: ignore[attr-defined,no-any-return]

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


def run_thread(thread_id: str) -> tuple[Any, dict[str, Any]]:
    graph = build_graph()
    config = {"configurable": {"thread_id": thread_id}}
    graph.invoke({"messages": [{"role": "user", "content": "what's the weather in sf?"}]}, config)
    return graph, config


def test_extract_from_thread_and_strict_match() -> None:
    graph, config = run_thread("1")
    extracted = extract_langgraph_trajectory_from_thread(graph, config)
    assert extracted["outputs"]["steps"] == [["__start__", "agent", "tools", "agent"]]
    assert extracted["outputs"]["results"] == [
        {"messages": [{"role": "assistant", "content": "It's 80 degrees and sunny in SF."}]}
    ]
    assert extracted["inputs"] == [
        {"__start__": {"messages": [{"role": "user", "content": "what's the weather in sf?"}]}}
    ]
    reference = {"inputs": [], "results": [], "steps": [["__start__", "agent", "tools", "agent"]]}
    res = graph_trajectory_strict_match(outputs=extracted["outputs"], reference_outputs=reference)
    assert (res["key"], res["score"]) == ("graph_trajectory_strict_match", 1.0)
    swapped = {"inputs": [], "results": [], "steps": [["__start__", "tools", "agent", "agent"]]}
    assert graph_trajectory_strict_match(outputs=extracted["outputs"], reference_outputs=swapped).score == 0.0
    split = {"inputs": [], "results": [], "steps": [["__start__", "agent"], ["tools", "agent"]]}
    assert graph_trajectory_strict_match(outputs=extracted["outputs"], reference_outputs=split).score == 0.0
    # the same from the snapshots, and the async variant
    snaps = list(graph.get_state_history(config))
    assert extract_langgraph_trajectory_from_snapshots(snaps) == extracted
    assert anyio.run(aextract_langgraph_trajectory_from_thread, graph, config) == extracted


def test_two_turns_and_an_interrupt() -> None:
    graph = build_graph(ask_human=True)
    config = {"configurable": {"thread_id": "hitl"}}
    graph.invoke({"messages": [{"role": "user", "content": "weather in sf?"}]}, config)
    graph.invoke(Command(resume="yes"), config)
    out = extract_langgraph_trajectory_from_thread(graph, config)
    assert out["outputs"]["steps"] == [["__start__", "agent", "tools", "__interrupt__"], ["agent"]]
    assert out["outputs"]["results"][0] == {}
    assert out["inputs"][1] == "__resuming__"


def test_registry_and_potato_adapter() -> None:
    t = {"inputs": [], "results": [], "steps": [["a"], ["b"]]}
    ev = build_evaluator("graph_trajectory_strict_match")
    assert ev.evaluate(outputs=t, reference_outputs=t).score == 1.0
    assert agentevals_adapter.is_available()
    assert agentevals_adapter.graph_trajectory_strict_match().evaluate(outputs=t, reference_outputs=t).value is True
    assert ev.evaluate(outputs=t).score is None  # no reference
    assert ev.evaluate(outputs={"steps": "x"}, reference_outputs=t).error


prompts: list[str] = []


def rule(body: dict[str, Any]) -> dict[str, Any]:
    prompts.append(body["messages"][-1]["content"])
    return {"reasoning": "logical and efficient", "score": True}


@pytest.fixture(scope="module")
def judge() -> Iterator[dict[str, Any]]:
    with JudgeServerThread(rule=rule) as server:
        yield {"provider": "openai", "model": "m", "base_url": server.url + "/v1"}


def test_graph_llm_judge_with_and_without_reference(judge: dict[str, Any]) -> None:
    graph, config = run_thread("judge")
    extracted = extract_langgraph_trajectory_from_thread(graph, config)
    evaluator = graph_trajectory_llm_judge(judge=judge)
    res = evaluator(inputs=extracted["inputs"], outputs=extracted["outputs"])
    assert (res["key"], res["score"]) == ("graph_trajectory_accuracy", 1.0)
    assert "<trajectory>\n['__start__', 'agent', 'tools', 'agent']\n</trajectory>" in prompts[-1]
    assert "<input>" in prompts[-1] and "reference_thread" not in prompts[-1]
    reference = {"inputs": ["weather?"], "results": [{}], "steps": [["__start__", "agent", "tools", "agent"]]}
    res = evaluator(inputs={"inputs": extracted["inputs"]}, outputs=extracted["outputs"], reference_outputs=reference)
    assert res.score == 1.0 and "<reference_thread>" in prompts[-1] and "weather?" in prompts[-1]
    # inputs that do not line up with the turns: an error result, never a score
    bad = evaluator(inputs=[], outputs=extracted["outputs"])
    assert bad.score is None and "same length" in (bad.error or "")
    assert isinstance(build_evaluator("graph_trajectory_llm_judge", {"judge": judge}), GraphTrajectoryJudge)
    assert json.dumps(res.to_dict())
