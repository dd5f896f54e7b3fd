"""LangSmith run trees → canonical trace.

Reads a nested run tree (a root run with ``child_runs``), a flat list of runs linked by
``parent_run_id`` (``{"runs": [...]}`` too), as exported by the LangSmith SDK/API. Runs are
visited depth first in execution order (``dotted_order``, else ``start_time``):

* ``llm`` runs: the first one's input messages (system prompt, task) open the trajectory, later
  ones add only new tool results / user turns; their outputs (``generations``, chat completions,
  message dicts) give assistant messages with tool calls;
* ``tool`` runs: a tool result answering the pending call (by ``tool_call_id`` when the output
  is a ToolMessage, else by tool name); a tool run with no recorded call adds the call too
  (name = run name, args = run inputs). Runs nested inside a tool run (a sub-agent) are skipped;
* ``chain``/other runs are containers; the root's inputs give ``input`` (the task) and its
  outputs the final answer when no assistant text was recorded.
"""

from __future__ import annotations

from typing import Any

from assay.exceptions import NormalizationError
from assay.traces.assemble import (
    TraceBuilder,
    add_usage,
    answer_of,
    cycle_text,
    parent_cycles,
    task_of,
    usage_of,
)
from assay.traces.base import TraceFormat
from assay.traces.exports import decode_json_text, latest_by_id
from assay.traces.llm_io import input_messages, output_messages, output_usage, tool_message_output
from assay.traces.model import Trace
from assay.traces.timing import Timings, time_key


def _is_run(value: Any) -> bool:
    return type(value) is dict and "run_type" in value and ("inputs" in value or "child_runs" in value)


def _runs_of(value: Any) -> Any:
    if type(value) is dict and type(value.get("runs")) is list:
        return value["runs"]
    return value


def detect(value: Any) -> bool:
    value = _runs_of(value)
    if type(value) is list:
        return bool(value) and _is_run(value[0])
    return _is_run(value)


class _Tree:
    """Runs by id with their children in execution order."""

    def __init__(self, value: Any):
        runs = _runs_of(value)
        self.children: dict[int, list[dict[str, Any]]] = {}
        if type(runs) is dict:
            self.roots = [runs]
            self._nest(runs, 0)
        elif type(runs) is list:
            self.roots = self._link(latest_by_id([_decoded(run) for run in runs], "end_time"))  # a run once
        else:
            raise NormalizationError(f"langsmith: expected a run or a list of runs, got {type(runs).__name__}")
        if not self.roots:
            raise NormalizationError("langsmith: no runs")
        self.roots.sort(key=_order)

    def _nest(self, run: Any, depth: int) -> None:
        if type(run) is not dict or "run_type" not in run:
            raise NormalizationError("langsmith: a run must be an object with 'run_type'")
        if depth > 200:
            raise NormalizationError("langsmith: run tree is nested too deeply")
        kids = run.get("child_runs") or []
        if type(kids) is not list:
            raise NormalizationError(f"langsmith: run {run.get('name')!r}: 'child_runs' is not a list")
        for kid in kids:
            self._nest(kid, depth + 1)
        self.children[id(run)] = sorted(kids, key=_order)

    def _link(self, runs: list[Any]) -> list[dict[str, Any]]:
        by_id: dict[Any, dict[str, Any]] = {}
        for i, run in enumerate(runs):
            if type(run) is not dict or "run_type" not in run:
                raise NormalizationError(f"langsmith: run {i} is not an object with 'run_type'")
            by_id[run.get("id", i)] = run
        parents = {key: _parent_key(run) for key, run in by_id.items()}
        cycles = parent_cycles(parents)
        if cycles:
            raise NormalizationError(
                f"langsmith: the runs' parent_run_id links form a cycle, not a tree: {cycle_text(cycles)} "
                "(these runs and any below them are reachable from no root run); fix the export's parent_run_id"
            )
        roots: list[dict[str, Any]] = []
        for run in runs:
            parent = by_id.get(_parent_key(run))
            if parent is None:
                roots.append(run)
            else:
                self.children.setdefault(id(parent), []).append(run)
            if run.get("child_runs"):
                self._nest(run, 0)
        for kids in self.children.values():
            kids.sort(key=_order)
        return roots

    def every_run(self) -> list[dict[str, Any]]:
        """Every run of the tree, parents before children."""
        out: list[dict[str, Any]] = []
        stack = list(reversed(self.roots))
        while stack:
            run = stack.pop()
            out.append(run)
            stack.extend(reversed(self.children.get(id(run), [])))
        return out

    def walk(self) -> list[dict[str, Any]]:
        """llm and tool runs in execution order; nothing below a tool run."""
        out: list[dict[str, Any]] = []
        stack = list(reversed(self.roots))
        while stack:
            run = stack.pop()
            kind = run.get("run_type")
            if kind in ("llm", "tool"):
                out.append(run)
                if kind == "tool":
                    continue
            stack.extend(reversed(self.children.get(id(run), [])))
        return out


#: Run fields that exports (the bulk export's Parquet, ``list_runs`` dumps) store as JSON text.
_JSON_TEXT_FIELDS = ("inputs", "outputs", "extra", "events")


def _parent_key(run: dict[str, Any]) -> Any:
    """A run's ``parent_run_id`` as a key of the runs by id (None: no parent, or not an id)."""
    parent = run.get("parent_run_id")
    return parent if isinstance(parent, str | int) and not isinstance(parent, bool) else None


def _decoded(run: Any) -> Any:
    """A run whose JSON-text fields are decoded (a copy; the run itself when there are none)."""
    if type(run) is not dict or not any(type(run.get(k)) is str for k in _JSON_TEXT_FIELDS):
        return run
    return {**run, **{k: decode_json_text(run[k]) for k in _JSON_TEXT_FIELDS if type(run.get(k)) is str}}


def _order(run: dict[str, Any]) -> tuple[Any, ...]:
    dotted = run.get("dotted_order")
    if isinstance(dotted, str):
        return (0, dotted, 0.0)
    t = time_key(run.get("start_time"))
    return (1, "", t if t is not None else float("inf"))


def _tool_output(outputs: Any) -> tuple[Any, str | None, bool]:
    """A tool run's outputs → (content, tool_call_id, is_error)."""
    return tool_message_output(outputs.get("output", outputs) if type(outputs) is dict else outputs)


def _tool_args(inputs: Any) -> Any:
    if type(inputs) is dict and set(inputs) == {"input"}:
        return inputs["input"]
    return inputs


def _add_llm(builder: TraceBuilder, run: dict[str, Any], where: str) -> dict[str, int] | None:
    builder.add_llm_input(input_messages(run.get("inputs"), f"{where} inputs"))
    outputs = run.get("outputs")
    if run.get("error") and not outputs:
        builder.warnings.append(f"{where} failed: {str(run['error'])[:200]}")
    builder.add_all(output_messages(outputs, f"{where} outputs"))
    usage = output_usage(outputs)
    if usage is None and "prompt_tokens" in run:
        usage = usage_of(run.get("prompt_tokens"), run.get("completion_tokens"), run.get("total_tokens"))
    return usage


def _split_warnings(value: Any, tree: _Tree) -> list[str]:
    """What says the input was cut into the wrong traces: a child run read alone (a run-per-line
    dump read one line per trace), or runs of several traces read as one."""
    notes = []
    runs = _runs_of(value)
    if type(runs) is dict and not runs.get("child_runs"):
        tid, rid = runs.get("trace_id"), runs.get("id")
        if tid is not None and rid is not None and str(tid) != str(rid):
            notes.append(
                f"a {runs.get('run_type')} run of trace {tid} was read alone, not with its trace: the input looks "
                "like a run-per-line dump, and each of its runs is scored as a trace of its own; give the runs of "
                "a trace together (a run tree, {'runs': [...]}, or rows with parent_run_id or dotted_order)"
            )
    traces = {str(r["trace_id"]) for r in tree.roots if r.get("trace_id") is not None}
    if len(traces) > 1:
        notes.append(
            f"runs of {len(traces)} different traces ({', '.join(sorted(traces)[:3])}…) were read as one trace"
        )
    return notes


def normalize(value: Any) -> Trace:
    tree = _Tree(value)
    root = tree.roots[0]
    builder = TraceBuilder()
    builder.warnings.extend(_split_warnings(value, tree))
    task = task_of(root.get("inputs"))
    usage: dict[str, int] | None = None
    for run in tree.walk():
        where = f"run {run.get('name')!r}"
        if run["run_type"] == "llm":
            if task is not None and not builder.messages and not input_messages(run.get("inputs")):
                builder.add_llm_input(input_messages(task))
            usage = add_usage(usage, _add_llm(builder, run, where))
            continue
        name = run.get("name")
        content, call_id, failed = _tool_output(run.get("outputs"))
        if run.get("error"):
            content, failed = run["error"], True
        builder.tool_result(
            content,
            call_id=call_id,
            name=name if isinstance(name, str) else None,
            args=_tool_args(run.get("inputs")),
            is_error=failed,
        )
    final = None
    if not any(m.role == "assistant" and m.text for m in builder.messages):
        final = answer_of(root.get("outputs"))
    metadata: dict[str, Any] = {}
    for key, field in (("name", "name"), ("session_name", "session_name"), ("session_id", "session_id")):
        if isinstance(root.get(field), str):
            metadata[key] = root[field]
    trace = builder.build(
        "langsmith",
        id=root.get("trace_id") or root.get("id"),
        input=task,
        final_output=final,
        usage=usage,
        metadata=metadata,
    )
    return _timings(tree).apply(trace)


_SPAN_TYPE: dict[Any, str] = {"llm": "llm", "tool": "tool", "chain": "chain"}


def _timings(tree: _Tree) -> Timings:
    timings = Timings()
    for run in tree.every_run():
        kind = _SPAN_TYPE.get(run.get("run_type"), "other")
        timings.add(run.get("name"), kind, run.get("start_time"), run.get("end_time"))
    return timings


FORMAT = TraceFormat(
    name="langsmith",
    description="LangSmith run trees (nested child_runs or flat runs with parent_run_id)",
    detect=detect,
    normalize=normalize,
)
