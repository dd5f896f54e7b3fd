"""Record → canonical Trace: pick the record's fields, detect the format, normalize.

A record (one JSON value per line) holds the agent's outputs (a trajectory in any known format,
or a plain value) and optionally inputs, a reference, context, scenario fields, metadata and usage.
Where each lives is configurable with dotted paths (:class:`NormalizeOptions`); by default the
common names are tried (``outputs``/``trajectory``; ``reference_outputs``/``reference``/``expected``…),
and a record without an outputs field is itself the trajectory (``{"messages": [...]}``, an OTel
export, a LangSmith run tree, …).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from assay.exceptions import NormalizationError
from assay.traces.base import TraceFormat, get_path
from assay.traces.formats import detection_order, load_format
from assay.traces.model import Trace
from assay.traces.openai import args_defects, reset_args_memo
from assay.traces.openai_format import try_plain

ID_KEYS = ("id", "trace_id", "run_id", "uuid", "session_id")
INPUT_KEYS = ("inputs", "input", "question", "query", "prompt")
OUTPUT_KEYS = ("outputs", "trajectory", "actual")
REFERENCE_KEYS = (
    "reference_outputs",
    "reference",
    "expected",
    "expected_output",
    "expected_outputs",
    "reference_trajectory",
    "expected_trajectory",
    "reference_messages",
)
CONTEXT_KEYS = ("context", "contexts", "retrieved_context", "retrieval_context", "documents")
USAGE_KEYS = ("usage", "metrics", "token_usage")


class NormalizeOptions(BaseModel):
    """Where a record keeps each part (dotted paths; None = try the usual names) and its format.

    The run file's ``normalize:`` section (frozen, unknown keys rejected)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = "auto"
    """Trace format of the outputs (``auto`` detects per record; see ``assay normalize --help``)."""
    reference_format: str = "auto"
    """Trace format of the reference."""
    id: str | None = None
    """Path of the trace id (default: id, trace_id, run_id, uuid, session_id)."""
    inputs: str | None = None
    """Path of the inputs (default: inputs, input, question, query, prompt)."""
    outputs: str | None = None
    """Path of the agent's outputs (default: outputs, trajectory, actual; else the record itself)."""
    reference: str | None = None
    """Path of the reference (default: reference_outputs, reference, expected, …)."""
    context: str | None = None
    """Path of retrieved context (default: context, contexts, retrieved_context, documents)."""
    scenario: str | None = None
    """Path of scenario fields (default: scenario, else the whole record)."""
    metadata: str | None = None
    """Path of metadata (default: metadata)."""
    usage: str | None = None
    """Path of token usage (default: usage, metrics, token_usage)."""


DEFAULT_OPTIONS = NormalizeOptions()


def detect_format(value: Any) -> TraceFormat:
    """The first format whose detector accepts ``value``."""
    for fmt in detection_order():
        if fmt.detect(value):
            return fmt
    raise NormalizationError(f"no known trace format matches this {type(value).__name__}")


def to_trace(value: Any, format: str = "auto") -> Trace:
    """Normalize one outputs (or reference) value into a Trace.

    >>> to_trace([{"role": "assistant", "content": "hi"}]).final_output
    'hi'
    """
    if isinstance(value, Trace):
        return value
    if format == "auto":
        fast = try_plain(value)
        if fast is not None:
            return fast
    fmt = detect_format(value) if format == "auto" else load_format(format)
    trace = fmt.normalize(value)
    if trace.format is None:
        trace.format = fmt.name
    return trace


def _first(record: dict[str, Any], keys: tuple[str, ...]) -> tuple[str | None, Any]:
    for k in keys:
        if k in record:
            return k, record[k]
    return None, None


def _pick(record: dict[str, Any], path: str | None, keys: tuple[str, ...]) -> tuple[str | None, Any]:
    if path is not None:
        return path, get_path(record, path)
    return _first(record, keys)


def normalize_record(record: Any, options: NormalizeOptions = DEFAULT_OPTIONS) -> Trace:
    """Normalize one parsed record into a Trace (raises NormalizationError on a bad shape)."""
    reset_args_memo()
    trace = _normalize_record(record, options)
    ref = trace.reference
    if trace.format in _COUNTED and (ref is None or ref.format in _COUNTED):
        trace.args_defects = args_defects()  # every argument went through parse_args
    return trace


#: Formats whose tool arguments all go through ``parse_args`` (so its defect count is complete).
_COUNTED = frozenset({"openai", "canonical", "value"})


def _normalize_record(record: Any, options: NormalizeOptions) -> Trace:
    if type(record) is list:
        if options.format != "auto":
            return to_trace(record, options.format)
        fast = try_plain(record)
        if fast is not None:
            return fast
        fmt = _trajectory_format(record)
        if fmt is None:
            raise NormalizationError("record is a JSON list but not a list of messages in any known format")
        return fmt.normalize(record)
    if type(record) is not dict:
        raise NormalizationError(f"record is a JSON {type(record).__name__}, expected an object or a list of messages")
    out_key, outputs = _pick(record, options.outputs, OUTPUT_KEYS)
    if out_key is None:
        outputs = record
    elif outputs is None and options.outputs is not None:
        raise NormalizationError(f"record has no value at outputs path {options.outputs!r}")
    elif options.outputs is None and _record_is_trace(record, outputs, options.format):
        outputs = record  # a run tree's own ``outputs`` (LangSmith), not the agent's outputs field
    if options.format == "auto" and type(outputs) in (int, float, bool):
        # no agent answers a bare number: a misplaced field, or a dump that is not traces
        raise NormalizationError(
            f"{out_key or 'outputs'} is a JSON {'boolean' if type(outputs) is bool else 'number'} ({outputs!r}), "
            "expected text, a message, a list of messages or an object (set normalize.format: value to "
            "score bare values)"
        )
    if outputs is record and options.format == "auto" and (fast := try_plain(record)) is not None:
        trace = fast
    elif outputs is record and options.format == "auto":
        fmt = _trajectory_format(record)
        if fmt is None:
            keys = ", ".join(list(record)[:8]) or "none"
            messages = record.get("messages")
            if "messages" in record and type(messages) is not list:
                raise NormalizationError(
                    f"record's messages is {_json_kind(messages)}, expected a list of messages (keys: {keys})"
                )
            if type(messages) is list:
                raise NormalizationError(
                    f"record's messages is not a list of messages in any known format (keys: {keys})"
                )
            raise NormalizationError(f"record has no outputs or trajectory (keys: {keys})")
        trace = fmt.normalize(record)
        if trace.format is None:
            trace.format = fmt.name
    else:
        trace = to_trace(outputs, options.format)

    if options.id is not None:
        tid = get_path(record, options.id)
    else:
        tid = next((record[k] for k in ID_KEYS if k in record), None)
    if tid is not None:
        trace.id = str(tid)

    in_key, inputs = _pick(record, options.inputs, INPUT_KEYS)
    if in_key is not None and trace.input is None and inputs is not outputs:
        trace.input = inputs

    ref_key, ref = _pick(record, options.reference, REFERENCE_KEYS)
    if ref_key is not None and ref is not None:
        try:
            trace.reference = to_trace(ref, options.reference_format)
        except NormalizationError as exc:
            raise NormalizationError(f"reference ({ref_key}): {exc}") from exc

    ctx_key, ctx = _pick(record, options.context, CONTEXT_KEYS)
    if ctx_key is not None and ctx is not None:
        trace.context = ctx
    elif trace.context is None and isinstance(trace.input, dict):
        trace.context = next((trace.input[k] for k in CONTEXT_KEYS if k in trace.input), None)

    if options.scenario is not None:
        scenario = get_path(record, options.scenario)
    else:
        scenario = record.get("scenario")
        if isinstance(scenario, dict):  # the record's own fields (e.g. requirements) stay visible
            scenario = {**{k: v for k, v in record.items() if k != "scenario"}, **scenario}
        else:
            scenario = record
    trace.scenario = scenario if isinstance(scenario, dict) else None

    md = get_path(record, options.metadata) if options.metadata else record.get("metadata")
    if isinstance(md, dict):
        trace.metadata = {**trace.metadata, **md} if trace.metadata else md

    _, usage = _pick(record, options.usage, USAGE_KEYS)
    if isinstance(usage, dict):
        trace.usage = usage
    if not trace.messages and type(outputs) in (dict, list):
        hidden = hidden_trajectory(outputs, out_key if outputs is not record else "")
        if hidden is not None:
            note = (
                f"no messages or tool calls were read ({trace.format} format), but the record holds "
                f"{hidden}; set normalize.format or normalize.outputs"
            )
            trace.warnings = [*(trace.warnings or ()), note]
    return trace


#: Keys under which trace formats keep a trajectory: finding one (non-empty) in a record that
#: gave no messages means the record was probably misread, not that the agent did nothing.
TRAJECTORY_KEYS = frozenset(
    {
        "child_runs",
        "runs",
        "observations",
        "spans",
        "resourceSpans",
        "scopeSpans",
        "messages",
        "tool_calls",
        "intermediate_steps",
        "generations",
        "channel_values",
    }
)


def hidden_trajectory(value: Any, path: str | None = "", *, max_depth: int = 6) -> str | None:
    """Where a value holds a non-empty trajectory-like list or dict (``"'child_runs' at
    outputs.steps.child_runs"``), or None. Depth-first, at most ``max_depth`` levels and the first
    3 items of each list (items of one list share a shape); the path is built only for a hit (a
    plain value is scanned on every record, so this must stay cheap)."""
    steps = _find_hidden(value, max_depth)
    if steps is None:
        return None
    where = ".".join([path, *steps] if path else steps)
    return f"{steps[-1]!r} at {where}"


def _find_hidden(node: Any, depth: int) -> list[str] | None:
    if type(node) is dict:
        if not TRAJECTORY_KEYS.isdisjoint(node):
            for key in TRAJECTORY_KEYS.intersection(node):
                child = node[key]
                if type(child) in (list, dict) and child:
                    return [key]
        if depth:
            for key, child in node.items():
                if type(child) in (dict, list) and child:
                    found = _find_hidden(child, depth - 1)
                    if found is not None:
                        return [str(key), *found]
    elif type(node) is list and depth:
        for i, child in enumerate(node[:3]):
            if type(child) in (dict, list) and child:
                found = _find_hidden(child, depth - 1)
                if found is not None:
                    return [str(i), *found]
    return None


#: Formats whose records carry an ``outputs``-like key of their own (a run's outputs).
_RECORD_FORMATS = ("langsmith", "langfuse", "otel", "gateway", "langgraph")


def _record_is_trace(record: dict[str, Any], outputs: Any, format: str) -> bool:
    """Whether the record itself, not the value under a default outputs key, is the trajectory:
    a specific format claims the record while the value is only a plain answer (or, with a forced
    format, is not of that format). Prefers a specific format over the plain-value fallback."""
    if format != "auto":
        fmt = load_format(format)
        return not fmt.detect(outputs) and fmt.detect(record)
    if type(outputs) is list or (type(outputs) is dict and "messages" in outputs):
        return False  # a trajectory value (the common case): no second look
    return any(load_format(name).detect(record) for name in _RECORD_FORMATS)


def _trajectory_format(record: Any) -> TraceFormat | None:
    """A record with no outputs field must itself be a known trajectory format."""
    for fmt in detection_order():
        if fmt.name != "value" and fmt.detect(record):
            return fmt
    return None


def trace_from_args(
    outputs: Any = None,
    reference_outputs: Any = None,
    inputs: Any = None,
    *,
    context: Any = None,
    scenario: dict[str, Any] | None = None,
    format: str = "auto",
) -> Trace:
    """The Trace an evaluator's ``evaluate(outputs=..., reference_outputs=..., inputs=...)`` scores."""
    trace = to_trace(outputs, format)
    if reference_outputs is not None:
        trace.reference = to_trace(reference_outputs, format)
    if inputs is not None:
        trace.input = inputs
    if context is not None:
        trace.context = context
    elif trace.context is None and isinstance(inputs, dict):
        trace.context = next((inputs[k] for k in CONTEXT_KEYS if k in inputs), None)
    if scenario is not None:
        trace.scenario = scenario
    return trace


def _json_kind(value: Any) -> str:
    """What a value is, as JSON names it (``a JSON string``, ``a JSON object``, …)."""
    if isinstance(value, bytes | bytearray):
        return "binary data that is not UTF-8 text"
    if value is None:
        return "JSON null"
    if type(value) is bool:
        return "a JSON boolean"
    if isinstance(value, int | float):
        return "a JSON number"
    names: dict[type, str] = {str: "a JSON string", dict: "a JSON object", list: "a JSON array"}
    return names.get(type(value), f"a {type(value).__name__}")
