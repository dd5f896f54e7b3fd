"""Canonical traces and the normalizers that read every supported input format into them."""

from assay.traces.base import TraceFormat, get_path
from assay.traces.formats import detection_order, load_format
from assay.traces.model import Message, ToolCall, Trace, content_text
from assay.traces.normalize import (
    NormalizeOptions,
    detect_format,
    normalize_record,
    to_trace,
    trace_from_args,
)
from assay.traces.openai import parse_args

__all__ = [
    "Message",
    "NormalizeOptions",
    "ToolCall",
    "Trace",
    "TraceFormat",
    "content_text",
    "detect_format",
    "detection_order",
    "get_path",
    "load_format",
    "normalize_record",
    "parse_args",
    "to_trace",
    "trace_from_args",
]
