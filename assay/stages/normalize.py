"""Normalize stage: raw envelope → canonical Trace, or a Failure naming the position and reason."""

from __future__ import annotations

from typing import Any

import orjson

from assay.exceptions import NormalizationError
from assay.records import Envelope, Failure
from assay.traces.model import Trace
from assay.traces.normalize import DEFAULT_OPTIONS, NormalizeOptions, normalize_record
from assay.traces.openai_decode import decode_openai_record

_loads = orjson.loads
_BOM = b"\xef\xbb\xbf"


def _decode_error(payload: bytes | memoryview, exc: orjson.JSONDecodeError) -> tuple[Any, str | None]:
    """A record orjson rejected: retry without a UTF-8 byte-order mark, else say what is wrong.

    Runs only on the failure path, so well-formed records pay nothing for it."""
    raw = bytes(payload)
    if raw.startswith(_BOM):
        try:
            return _loads(raw[3:]), None
        except orjson.JSONDecodeError as inner:
            exc, raw = inner, raw[3:]
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return None, f"invalid UTF-8 at byte {bad.start} (0x{raw[bad.start]:02x}): {bad.reason}"
    return None, f"invalid JSON: {exc}"


def parse_envelope(env: Envelope, options: NormalizeOptions) -> Trace | Failure:
    """Parse and normalize one envelope; never raises for bad data.

    A UTF-8 byte-order mark before the record is ignored; invalid UTF-8 or JSON is a ``parse``
    Failure naming the position and the reason."""
    if env.record is not None:  # decoded by the source (Parquet rows)
        bad = getattr(env.record, "decode_error", None)
        if bad is not None and (reason := bad()) is not None:  # a string column holding bytes not UTF-8
            return Failure(env.raw(), env.position, "parse", "UnicodeDecodeError", f"{env.position}: {reason}")
        record = env.record.as_dict() if hasattr(env.record, "as_dict") else env.record
    else:
        try:
            record = _loads(env.payload)
        except orjson.JSONDecodeError as exc:
            record, reason = _decode_error(env.payload, exc)
            if reason is not None:
                kind = "UnicodeDecodeError" if reason.startswith("invalid UTF-8") else "JSONDecodeError"
                return Failure(env.payload, env.position, "parse", kind, f"{env.position}: {reason}")
    try:
        trace = normalize_record(record, options)
    except NormalizationError as exc:
        return Failure(env.raw(), env.position, "normalize", "NormalizationError", f"{env.position}: {exc}")
    except (
        TypeError,
        ValueError,
        KeyError,
        AttributeError,
        IndexError,
    ) as exc:  # a shape no normalizer foresaw
        return Failure(
            env.raw(),
            env.position,
            "normalize",
            type(exc).__name__,
            f"{env.position}: unexpected record shape: {exc}",
        )
    if trace.id is None:
        trace.id = str(env.position)
    return trace


class RecordParser:
    """``parse_envelope`` for one pipeline, with the typed fast path for OpenAI records.

    ``projected``: no evaluator of the run reads scenario fields, so a record may be decoded into
    only the fields a trace is built from (``assay.traces.openai_decode``; default normalize options
    only). Records that path does not take go the general way; if most records of the input are
    such, the fast path turns itself off (it would only cost a failed decode per record).
    """

    MIN_TRIES = 64

    def __init__(self, options: NormalizeOptions = DEFAULT_OPTIONS, *, projected: bool = False) -> None:
        self.options = options
        self.fast = projected and options == DEFAULT_OPTIONS
        self.hits = 0
        self.misses = 0

    def __call__(self, env: Envelope) -> Trace | Failure:
        if env.record is not None:
            if self.fast and hasattr(env.record, "trace"):
                trace: Trace | None = env.record.trace()  # a source's own fast path (Parquet columns)
                if trace is not None:
                    if trace.id is None:
                        trace.id = str(env.position)
                    return trace
            return parse_envelope(env, self.options)
        if self.fast:
            trace = decode_openai_record(env.payload)
            if trace is not None:
                self.hits += 1
                if trace.id is None:
                    trace.id = str(env.position)
                return trace
            self.misses += 1
            if self.misses >= self.MIN_TRIES and self.misses > self.hits:
                self.fast = False
        return parse_envelope(env, self.options)


def trace_warnings(trace: Trace) -> list[str] | None:
    """What is worth reporting about a trace that was scored anyway, or None.

    Tool calls whose arguments were not a JSON object (kept raw, flagged), and the normalizer's
    warnings (``trace.warnings``): e.g. a record that gave no messages and no tool calls while it
    holds nested runs, observations, spans or messages somewhere (probably misread, not a quiet 0),
    a failed LLM run, spans of several traces read as one. The engine counts these and writes a
    warning row to the dead letter.
    """
    if trace.args_defects == 0:  # counted while normalizing: nothing to look for
        return trace.warnings or None
    warnings: list[str] | None = list(trace.warnings) if trace.warnings else None
    for side, t in (("agent", trace), ("reference", trace.reference)):
        if t is None:
            continue
        for i, m in enumerate(t.messages):
            if not m.tool_calls:
                continue
            for tc in m.tool_calls:
                if tc.args_error is not None:
                    if warnings is None:
                        warnings = []
                    warnings.append(f"{side} message {i} tool call {tc.name!r}: {tc.args_error}")
    return warnings


#: The former name (it reported only tool-argument defects).
tool_argument_warnings = trace_warnings


def warning_failure(env: Envelope, trace: Trace, warnings: list[str]) -> Failure:
    """The warning row for the dead letter of a record scored with ``warnings`` (from
    :func:`trace_warnings`): ``InvalidToolArguments`` when only arguments were defective, else
    ``TraceWarning``."""
    only_args = not trace.warnings
    kind = "InvalidToolArguments" if only_args else "TraceWarning"
    note = " (record scored with the raw arguments)" if only_args else " (record scored as read)"
    return Failure(
        env.raw(), env.position, "normalize", kind, f"{env.position}: {'; '.join(warnings)}{note}", "warning"
    )
