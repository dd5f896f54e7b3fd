"""Normalize stage: raw envelope → canonical Trace, or a Failure naming the position and reason."""

from __future__ import annotations

import orjson

from assay.exceptions import NormalizationError
from assay.records import Envelope, Failure
from assay.traces.model import Trace
from assay.traces.normalize import NormalizeOptions, normalize_record

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
