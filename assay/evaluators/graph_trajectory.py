"""Graph trajectories (LangGraph): which nodes ran in each turn of a thread.

A graph trajectory is agentevals' ``GraphTrajectory``: ``{"inputs": [...], "results": [...],
"steps": [[node, …], …]}``, one entry per turn (a turn ends when the graph finishes or is
interrupted). Extract one from a LangGraph thread with
:func:`extract_langgraph_trajectory_from_thread` (or from state snapshots), then score it:

* ``graph_trajectory_strict_match``: the per-turn node lists are equal, order included;
* ``graph_trajectory_llm_judge``: an LLM grades the steps (logical, efficient, equivalent to a
  reference graph trajectory when one is given), key ``graph_trajectory_accuracy``.

In the library face ``outputs``/``reference_outputs`` are graph trajectories and ``inputs`` the
turn inputs (a list, or ``{"inputs": [...]}``). In a run the record's own ``outputs``,
``reference_outputs`` and ``inputs`` fields are read (the record as the scenario).

>>> t = {"inputs": [], "results": [], "steps": [["__start__", "agent", "tools", "agent"]]}
>>> graph_trajectory_strict_match(outputs=t, reference_outputs=t).score
1.0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from assay.evaluators.base import Evaluator, EvaluatorParams
from assay.evaluators.judge_render import PromptText, delimit
from assay.evaluators.llm_judge import CompiledPrompt, LLMJudge, LLMJudgeParams
from assay.exceptions import EvaluatorError
from assay.records import Result
from assay.traces.model import Trace

GRAPH_TRAJECTORY_PROMPT = """You are an expert data labeler grading the internal steps an AI agent \
took to resolve a user's queries.

<Rubric>
  An accurate trajectory:
  - makes logical sense from one step to the next
  - shows clear progress towards resolving the query
  - is reasonably efficient (it need not be perfectly efficient)
  - is semantically equivalent to the reference trajectory, when one is given
</Rubric>

<Instructions>
  Grade the thread below: are the agent's steps logical and reasonably efficient? In a step list,
  "__start__" is the agent's entry point and "__interrupt__" means the agent stopped to wait for
  more data from another source (human in the loop).
</Instructions>

<thread>
{thread}
</thread>

{reference_outputs}
"""


def _trajectory(value: Any, what: str) -> dict[str, Any]:
    if isinstance(value, dict) and "outputs" in value and "steps" not in value and isinstance(value["outputs"], dict):
        value = value["outputs"]  # an extracted {"inputs", "outputs"} pair
    if not isinstance(value, dict) or not isinstance(value.get("steps"), list):
        raise EvaluatorError(f"{what} is not a graph trajectory ({{inputs, results, steps}})")
    return value


def _fields(trace: Trace) -> dict[str, Any]:
    return trace.scenario or {}


class GraphTrajectoryStrictMatch(Evaluator[EvaluatorParams]):
    """The per-turn node lists of the two graph trajectories are equal, order included."""

    name: ClassVar[str] = "graph_trajectory_strict_match"
    description: ClassVar[str] = "LangGraph: the nodes run in each turn equal the reference's (order included)."

    @staticmethod
    def example_trace(outputs: Any, reference_outputs: Any, inputs: Any, kwargs: dict[str, Any]) -> Trace:
        return Trace(scenario={"outputs": outputs, "reference_outputs": reference_outputs, "inputs": inputs})

    def score(self, trace: Trace) -> Result:
        fields = _fields(trace)
        try:
            out = _trajectory(fields.get("outputs"), "outputs")
            if fields.get("reference_outputs") is None:
                return Result(self.key, None, None, "no reference graph trajectory")
            ref = _trajectory(fields.get("reference_outputs"), "reference_outputs")
        except EvaluatorError as exc:
            return Result.from_error(self.key, str(exc))
        a, b = out["steps"], ref["steps"]
        ok = len(a) == len(b) and all(list(x) == list(y) for x, y in zip(a, b, strict=False))
        comment = "steps match" if ok else f"steps {a!r} vs reference {b!r}"
        return Result(self.key, 1.0 if ok else 0.0, ok, comment)


def format_thread(inputs: list[Any], trajectory: dict[str, Any]) -> PromptText:
    """The thread as the judge sees it: per turn its input, node list and result (Python reprs),
    each :func:`delimit`-ed inside its tags."""
    parts = []
    for inp, result, step in zip(inputs, trajectory.get("results") or [], trajectory["steps"], strict=False):
        if inp:
            parts.append(f"\n<input>\n{delimit(str(inp))}\n</input>\n")
        parts.append(f"\n<trajectory>\n{delimit(str(step))}\n</trajectory>\n")
        parts.append(f"\n<result>\n{delimit(str(result))}\n</result>\n")
    return PromptText("".join(parts))


def _turn_inputs(inputs: Any, trajectory: dict[str, Any]) -> list[Any]:
    if isinstance(inputs, dict):
        if "inputs" not in inputs:
            raise EvaluatorError("inputs must be a list or a dict with an 'inputs' key")
        inputs = inputs["inputs"]
    if inputs is None:
        inputs = trajectory.get("inputs")
    if not isinstance(inputs, list):
        raise EvaluatorError("inputs must be a list of turn inputs")
    n_results, n_steps = len(trajectory.get("results") or []), len(trajectory["steps"])
    if len(inputs) != n_results or len(inputs) != n_steps:
        raise EvaluatorError(
            f"inputs ({len(inputs)}), outputs.results ({n_results}) and outputs.steps ({n_steps}) "
            "must have the same length"
        )
    return inputs


class GraphTrajectoryJudgeParams(LLMJudgeParams):
    prompt: str = GRAPH_TRAJECTORY_PROMPT
    """A template with ``{thread}`` and ``{reference_outputs}`` (the default grades logic and
    efficiency, against the reference when given)."""
    feedback_key: str | None = "graph_trajectory_accuracy"
    """Result key."""


class GraphTrajectoryJudge(LLMJudge):
    """LLM judge of a LangGraph thread's steps (agentevals' graph trajectory judge)."""

    name: ClassVar[str] = "graph_trajectory_llm_judge"
    description: ClassVar[str] = (
        "LangGraph: an LLM grades the nodes run per turn (logical, efficient, like a reference when given)."
    )
    Params = GraphTrajectoryJudgeParams
    example: ClassVar[dict[str, Any]] = {"judge": "gpt4o_mini"}
    fallback_key: ClassVar[str] = "graph_trajectory_accuracy"
    trace_variables: ClassVar[frozenset[str]] = frozenset({"thread", "outputs"})

    @staticmethod
    def example_trace(outputs: Any, reference_outputs: Any, inputs: Any, kwargs: dict[str, Any]) -> Trace:
        return Trace(scenario={"outputs": outputs, "reference_outputs": reference_outputs, "inputs": inputs})

    def variable(self, name: str, trace: Trace, compiled: CompiledPrompt) -> str | None:
        fields = _fields(trace)
        if name in ("thread", "outputs"):
            out = _trajectory(fields.get("outputs"), "outputs")
            return format_thread(_turn_inputs(fields.get("inputs"), out), out)
        if name == "reference_outputs":
            raw = fields.get("reference_outputs")
            if not raw:
                return ""
            ref = _trajectory(raw, "reference_outputs")
            thread = format_thread(list(ref.get("inputs") or []), ref)
            return PromptText(
                "\nUse the following trajectory as an example reference when grading:\n"
                f"<reference_thread>\n{thread}\n</reference_thread>\n"
            )
        return super().variable(name, trace, compiled)


def graph_trajectory_strict_match(*, outputs: Any = None, reference_outputs: Any = None, **kwargs: Any) -> Any:
    """agentevals' function: with ``outputs`` the Result; without arguments the evaluator (as
    potato's adapter returns it)."""
    ev = GraphTrajectoryStrictMatch()
    if outputs is None and reference_outputs is None:
        return ev
    return ev.evaluate(outputs=outputs, reference_outputs=reference_outputs)


def graph_trajectory_llm_judge(**params: Any) -> GraphTrajectoryJudge:
    """The graph trajectory LLM judge (agentevals' ``create_graph_trajectory_llm_as_judge``)."""
    return GraphTrajectoryJudge(params)


create_graph_trajectory_llm_as_judge = graph_trajectory_llm_judge


# --------------------------------------------------------------------------- extraction


def _last_message(values: Any) -> Any:
    if isinstance(values, dict) and isinstance(values.get("messages"), list) and values["messages"]:
        last = values["messages"][-1]
        if hasattr(last, "content") and hasattr(last, "type"):  # a LangChain message
            from langchain_core.messages.utils import convert_to_openai_messages

            return {"messages": convert_to_openai_messages([last])}
        return {"messages": [last]}
    return values


def _input_writes(metadata: Any, tasks: list[Any]) -> Any:
    """The input of a turn: the checkpoint's ``writes`` (LangGraph < 0.6), else what the
    ``__start__`` task wrote, in the same ``{"__start__": ...}`` shape."""
    if metadata.get("writes") is not None:
        return metadata["writes"]
    written = {t.name: t.result for t in tasks if t.name == "__start__" and getattr(t, "result", None) is not None}
    return written or None


def extract_langgraph_trajectory_from_snapshots(snapshots: Iterable[Any]) -> dict[str, Any]:
    """``{"inputs": [...], "outputs": GraphTrajectory}`` from LangGraph state snapshots, newest
    first (what ``graph.get_state_history`` yields).

    A turn starts (walking backwards) at each snapshot that is final or interrupted; the names of
    the tasks of the snapshots before it are its steps (``"<subgraph>:"``-prefixed inside a
    subgraph, ``"__interrupt__"`` before an interrupted task); its result is the last message (or
    ``{}`` after an interrupt); its input the input written at its start, or ``"__resuming__"``.
    """
    snaps = list(snapshots)
    inputs: list[Any] = []
    results: list[Any] = []
    steps: list[list[str]] = []
    started = False
    for i, snap in enumerate(snaps):
        tasks = list(snap.tasks or ())
        interrupted = any(t.interrupts for t in tasks)
        if not snap.next or interrupted:
            started = True
            results.append({} if interrupted else _last_message(snap.values))
            steps.append([])
        if not started:
            continue
        if tasks:
            ns = ((snap.config or {}).get("configurable") or {}).get("checkpoint_ns") or ""
            prefix = f"{ns.split(':')[0]}:" if ns and len(ns.split(":")) > 1 else ""
            for task in tasks:
                if task.interrupts:
                    steps[-1].append("__interrupt__")
                steps[-1].append(f"{prefix}{task.name}")
        metadata = snap.metadata or {}
        if metadata.get("source") == "input":
            inputs.append(_input_writes(metadata, tasks))
        elif i + 1 < len(snaps) and any(t.interrupts for t in (snaps[i + 1].tasks or ())):
            inputs.append("__resuming__")
    inputs.reverse()
    results.reverse()
    steps.reverse()
    for s in steps:
        s.reverse()
    return {"inputs": inputs, "outputs": {"inputs": [], "results": results, "steps": steps}}


def _history(graph: Any, config: Any) -> list[Any]:
    out: list[Any] = []
    for snap in graph.get_state_history(config=config):
        for task in snap.tasks or ():
            if task.state and (task.state.get("configurable") or {}).get("checkpoint_ns"):
                out.extend(_history(graph, task.state))
        out.append(snap)
    return out


async def _ahistory(graph: Any, config: Any) -> list[Any]:
    out: list[Any] = []
    async for snap in graph.aget_state_history(config=config):
        for task in snap.tasks or ():
            if task.state and (task.state.get("configurable") or {}).get("checkpoint_ns"):
                out.extend(await _ahistory(graph, task.state))
        out.append(snap)
    return out


def extract_langgraph_trajectory_from_thread(graph: Any, config: Any) -> dict[str, Any]:
    """The graph trajectory of one thread of a compiled LangGraph graph with a checkpointer
    (``config = {"configurable": {"thread_id": ...}}``), subgraphs included."""
    return extract_langgraph_trajectory_from_snapshots(_history(graph, config))


async def aextract_langgraph_trajectory_from_thread(graph: Any, config: Any) -> dict[str, Any]:
    """Async :func:`extract_langgraph_trajectory_from_thread`."""
    return extract_langgraph_trajectory_from_snapshots(await _ahistory(graph, config))


__all__ = [
    "GRAPH_TRAJECTORY_PROMPT",
    "GraphTrajectoryJudge",
    "GraphTrajectoryStrictMatch",
    "aextract_langgraph_trajectory_from_thread",
    "create_graph_trajectory_llm_as_judge",
    "extract_langgraph_trajectory_from_snapshots",
    "extract_langgraph_trajectory_from_thread",
    "format_thread",
    "graph_trajectory_llm_judge",
    "graph_trajectory_strict_match",
]
