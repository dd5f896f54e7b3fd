"""Normalize stage: raw envelope → canonical Trace, or a Failure naming the position and reason."""

from __future__ import annotations

import orjson

from assay.exceptions import NormalizationError
from assay.records import Envelope, Failure
from assay.traces.model import Trace
from assay.traces.normalize import DEFAULT_OPTIONS, NormalizeOptions, normalize_record
from assay.traces.openai_decode import decode_openai_record

_loads = orjson.loads


def parse_envelope(env: Envelope, options: NormalizeOptions) -> Trace | Failure:
    """Parse and normalize one envelope; never raises for bad data."""
    try:
        record = _loads(env.payload)
    except orjson.JSONDecodeError as exc:
        return Failure(env.payload, env.position, "parse", "JSONDecodeError", f"{env.position}: invalid JSON: {exc}")
    try:
        trace = normalize_record(record, options)
    except NormalizationError as exc:
        return Failure(env.payload, env.position, "normalize", "NormalizationError", f"{env.position}: {exc}")
    except (
        TypeError,
        ValueError,
        KeyError,
        AttributeError,
        IndexError,
    ) as exc:  # a shape no normalizer foresaw
        return Failure(
            env.payload,
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


def tool_argument_warnings(trace: Trace) -> list[str] | None:
    """Describe tool calls whose arguments were not a JSON object (kept raw, flagged)."""
    if trace.args_defects == 0:  # counted while normalizing: nothing to look for
        return None
    warnings: list[str] | None = None
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
