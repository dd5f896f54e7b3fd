"""Reading a results location: its summary, its result rows and its dead letters, streamed.

Rows are read one line at a time from each part (decompressed by suffix) and handed to the
caller as parsed dicts, so a report of a run of any size holds one row at a time; everything the
report keeps is an aggregate or a bounded sample.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from assay.connectors.file import iter_lines
from assay.connectors.layout import DEAD_LETTER, DEAD_PREFIX, ROW_PATTERNS, SUCCESS, SUMMARY
from assay.exceptions import ConfigError
from assay.report.store import ResultStore, open_decompressed, open_store

__all__ = ["RunInfo", "iter_dead_letters", "iter_rows", "read_run_info"]

DEAD_PATTERNS = tuple(f"{DEAD_LETTER}/{DEAD_PREFIX}-*{ext}" for ext in (".jsonl", ".jsonl.gz", ".jsonl.zst"))
_DT = re.compile(r"(?:^|/)(?:dt|ds)=([^/]+)/*$")


@dataclass
class RunInfo:
    """Who a run is: its location, its ``_SUMMARY.json`` (empty when absent) and where it sorts."""

    location: str
    store: ResultStore
    summary: dict[str, Any] = field(default_factory=dict)
    complete: bool = False
    """``_SUCCESS`` is present."""

    @property
    def partition(self) -> str | None:
        """The ``dt=`` (or Delta ``ds=``) partition named by the location, if any."""
        m = _DT.search(self.location.rstrip("/") + "/")
        return m.group(1) if m else None

    @property
    def started_at(self) -> str | None:
        """The run's start time (ISO 8601) from its summary."""
        value = self.summary.get("started_at")
        return value if isinstance(value, str) else None

    @property
    def label(self) -> str:
        """A short name for tables and chart axes: the partition, else the start time, else the location."""
        if self.partition:
            return self.partition
        if self.started_at:
            with contextlib.suppress(ValueError):
                return dt.datetime.fromisoformat(self.started_at).strftime("%Y-%m-%d %H:%M")
        return self.location.rstrip("/").rsplit("/", 1)[-1] or self.location

    @property
    def sort_key(self) -> tuple[str, str]:
        """Runs order by ``dt=`` partition, then by start time."""
        return (self.partition or "", self.started_at or "")

    def thresholds(self) -> dict[str, float]:
        """Pass thresholds per result key, as the run used them."""
        evaluators = self.summary.get("evaluators") or {}
        return {k: float(v.get("threshold", 0.5)) for k, v in evaluators.items() if isinstance(v, dict)}


def read_run_info(location: str | ResultStore) -> RunInfo:
    """Open ``location`` (a directory, a registered ``scheme://`` location, or a ``_SUMMARY.json``
    path whose directory is the location) and read its summary."""
    if isinstance(location, str):
        loc = location
        if loc.endswith(SUMMARY):
            loc = loc[: -len(SUMMARY)].rstrip("/") or "."
        store = open_store(loc)
    else:
        store = location
    info = RunInfo(location=store.location, store=store)
    if store.exists(SUMMARY):
        with store.open(SUMMARY) as f:
            try:
                summary = orjson.loads(f.read())
            except orjson.JSONDecodeError as exc:
                raise ConfigError(f"report: {store.location}/{SUMMARY} is not JSON: {exc}") from exc
        if isinstance(summary, dict):
            info.summary = summary
    info.complete = store.exists(SUCCESS)
    return info


def _iter_json_lines(store: ResultStore, patterns: tuple[str, ...]) -> Iterator[tuple[str, int, Any]]:
    names = sorted({n for p in patterns for n in store.list(p)})
    for name in names:
        if name.endswith(".parquet"):  # a Parquet part (extra assay[lake]): rows in the JSON shape
            from assay.report.lake import iter_parquet_part

            with store.open(name) as raw:
                yield from ((name, i, row) for i, row in enumerate(iter_parquet_part(raw), 1))
            continue
        with contextlib.ExitStack() as stack:
            raw = stack.enter_context(store.open(name))
            f = stack.enter_context(open_decompressed(raw, name))
            for i, line in enumerate(iter_lines(f), 1):
                if not line or line.isspace():
                    continue
                try:
                    yield name, i, orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise ConfigError(f"report: {store.location}/{name}:{i}: not a JSON line: {exc}") from exc


def iter_rows(store: ResultStore) -> Iterator[dict[str, Any]]:
    """The result rows of a location, one at a time, part by part in name order (JSON lines or
    Parquet parts; a store with rows of its own, a Delta day, gives them itself)."""
    own = getattr(store, "iter_rows", None)
    if own is not None:
        yield from own()
        return
    for _, _, row in _iter_json_lines(store, ROW_PATTERNS):
        if isinstance(row, dict):
            yield row


def iter_dead_letters(store: ResultStore) -> Iterator[dict[str, Any]]:
    """The dead-letter records of a location, one at a time."""
    for _, _, row in _iter_json_lines(store, DEAD_PATTERNS):
        if isinstance(row, dict):
            yield row
