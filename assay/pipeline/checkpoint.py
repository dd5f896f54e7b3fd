"""Checkpoints: what each writer of a run had made durable at its last commit, so that the same
command resumes exactly (see :mod:`assay.pipeline.commit` and :mod:`assay.pipeline.outputs`).

The engine never interprets a source's or a sink's state; it only stores it, and merges the
ledger-shaped source states of several writers when a resume changes ``--workers``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from assay.connectors.file_sink import write_json_atomic
from assay.connectors.ledger import merge


class CheckpointStore:
    """The checkpoints of one run (one sink), one file per writer process.

    ``<state_dir>/checkpoints/<key>/writer-<i>.json`` holds what writer ``i`` had made durable at
    its last commit: the source's resume state, every sink's state, the cumulative stats and judge
    counts. ``carried.json`` keeps the stats of writers of an earlier attempt with more processes,
    whose rows stay in the output (a resume with another ``--workers``). The files are replaced
    atomically (temp file, fsync, rename).
    """

    def __init__(self, state_dir: str | Path, key: str) -> None:
        self.key = key
        self.dir = Path(state_dir) / "checkpoints" / key

    @staticmethod
    def key_for(sink_url: str, scope: str = "") -> str:
        target = sink_url if "://" in sink_url else os.path.abspath(sink_url)
        return hashlib.sha256((target + scope).encode()).hexdigest()[:16]

    def writer_path(self, writer: int) -> Path:
        return self.dir / f"writer-{writer}.json"

    def load(self) -> dict[int, dict[str, Any]]:
        """Every writer's last checkpoint (empty: nothing to resume)."""
        out: dict[int, dict[str, Any]] = {}
        if not self.dir.is_dir():
            return out
        for f in self.dir.glob("writer-*.json"):
            try:
                out[int(f.stem.split("-", 1)[1])] = orjson.loads(f.read_bytes())
            except (ValueError, OSError, orjson.JSONDecodeError):
                continue  # a torn file cannot exist (atomic rename); anything else is not ours
        return out

    def save(self, writer: int, state: dict[str, Any]) -> None:
        write_json_atomic(self.writer_path(writer), state, indent=False)

    def remove_writer(self, writer: int) -> None:
        self.writer_path(writer).unlink(missing_ok=True)

    def carried(self) -> dict[str, Any]:
        try:
            return dict(orjson.loads((self.dir / "carried.json").read_bytes()))
        except (OSError, orjson.JSONDecodeError):
            return {}

    def save_carried(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.dir / "carried.json", data, indent=False)

    def clear(self) -> None:
        """Forget the run (it completed, or ``--fresh``)."""
        if self.dir.is_dir():
            for f in self.dir.iterdir():
                f.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.dir.rmdir()


def merge_ledgers(states: Iterable[Any]) -> Any:
    """The union of several ledger resume states of writers of one run: ``{input: [[first, last],
    …]}`` (files), or ``{"done": {…}, "complete": […]}`` (S3); None when none keeps a ledger."""
    merged: dict[str, list[list[int]]] = {}
    complete: set[str] = set()
    found = nested = False
    for state in states:
        if not isinstance(state, dict):
            continue
        found = True
        if isinstance(state.get("done"), dict):
            nested = True
            complete.update(state.get("complete") or [])
            state = state["done"]
        for source, ivs in state.items():
            merged[source] = merge(merged.get(source, []), [list(iv) for iv in ivs])
    if not found:
        return None
    return {"done": merged, "complete": sorted(complete)} if nested else merged
