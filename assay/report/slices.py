"""Slicing a run's results by a field of its traces: ``assay report RESULTS --by metadata.model``.

Result rows hold the trace id, the results and the source ``position``, not the trace's metadata,
so the field is read back from the source records (each source file streamed once, in line order)
and normalized as ``assay run`` read them; ``metadata.x``, ``inputs.x``, ``scenario.x`` or a bare
record field (as prompt variables are looked up). A row whose record cannot be read (a file that
moved, a Kafka offset) falls in the ``(unknown)`` slice. Two streaming passes over the rows;
memory is one short value per row.

>>> from assay.report.slices import slice_by
>>> slices = slice_by("results/dt=2026-11-21", "metadata.model")  # doctest: +SKIP
>>> slices.groups["gpt-4.1-mini"]["correctness"].pass_rate  # doctest: +SKIP
0.91
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from assay.exceptions import AssayError
from assay.report.aggregate import KeyAggregate
from assay.report.build import thresholds_for
from assay.report.load import RunInfo, iter_rows, read_run_info
from assay.report.store import ResultStore, open_decompressed

UNKNOWN = "(unknown)"
MAX_VALUE_CHARS = 80

__all__ = ["UNKNOWN", "Slices", "slice_by"]


@dataclass
class Slices:
    """Per value of the field ``by``: an aggregate per result key, and how many rows it holds."""

    by: str
    groups: dict[str, dict[str, KeyAggregate]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        """Every result key of any slice, sorted."""
        return sorted({k for g in self.groups.values() for k in g})

    def ordered(self) -> list[str]:
        """Slice values, the largest first (``(unknown)`` last)."""
        return sorted(self.groups, key=lambda v: (v == UNKNOWN, -self.rows.get(v, 0), v))


def _position(row: dict[str, Any]) -> tuple[str, int] | None:
    position = row.get("position")
    if isinstance(position, dict):
        file, line = position.get("file") or position.get("key"), position.get("line")
        if isinstance(file, str) and isinstance(line, int):
            return file, line
    return None


def _text(value: Any) -> str:
    if value is None:
        return UNKNOWN
    text = value if isinstance(value, str) else str(value)
    return text[:MAX_VALUE_CHARS] or UNKNOWN


def _read_values(name: str, lines: set[int], path: str) -> dict[int, str]:
    """The field's value of each wanted line of source file ``name``."""
    from assay.connectors.file import iter_lines
    from assay.evaluators.judge_render import lookup
    from assay.records import Envelope, Position
    from assay.report.trajectory import _open_source
    from assay.stages.normalize import parse_envelope
    from assay.traces.model import Trace
    from assay.traces.normalize import NormalizeOptions

    out: dict[int, str] = {}
    raw = _open_source(name)
    if raw is None:
        return out
    last = max(lines)
    options = NormalizeOptions()
    with contextlib.ExitStack() as stack:
        stack.enter_context(raw)
        f = stack.enter_context(open_decompressed(raw, name))
        for i, text in enumerate(iter_lines(f), 1):
            if i in lines:
                trace = parse_envelope(Envelope(text.rstrip(b"\r"), Position(name, i)), options)
                if isinstance(trace, Trace):
                    out[i] = _text(lookup(trace, path))
            if i >= last:
                break
    return out


def slice_by(location: str | ResultStore | RunInfo, path: str) -> Slices:
    """Aggregate the run at ``location`` per value of the trace field ``path``."""
    info = location if isinstance(location, RunInfo) else read_run_info(location)
    wanted: dict[str, set[int]] = defaultdict(set)
    for row in iter_rows(info.store):
        pos = _position(row)
        if pos is not None:
            wanted[pos[0]].add(pos[1])
    values: dict[tuple[str, int], str] = {}
    for name, lines in wanted.items():
        with contextlib.suppress(OSError, AssayError, EOFError, ValueError):
            values.update(((name, line), v) for line, v in _read_values(name, lines, path).items())
    thresholds = info.thresholds()
    slices = Slices(path)
    for row in iter_rows(info.store):
        pos = _position(row)
        group = values.get(pos, UNKNOWN) if pos is not None else UNKNOWN
        slices.rows[group] = slices.rows.get(group, 0) + 1
        keys = slices.groups.setdefault(group, {})
        results = row.get("results")
        if not isinstance(results, dict):
            continue
        for key, result in results.items():
            agg = keys.get(key)
            if agg is None:
                agg = keys[key] = KeyAggregate(key, threshold=thresholds_for(thresholds, key))
            agg.add(result if isinstance(result, dict) else {})
    return slices
