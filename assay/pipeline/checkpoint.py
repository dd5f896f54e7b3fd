"""Checkpoint ledger: which positions of a stopped run are already written, so a resumed run skips them.

A run that stops early (budget reached, SIGTERM) after flushing its sinks records the completed
positions per source file as line intervals in ``<state_dir>/checkpoints/<run key>.json``. The next
run with the same sink resumes: the source skips those positions and the sinks append. A run that
completes removes its ledger (a rerun then redoes everything; the judge cache makes that cheap).
``--fresh`` ignores and removes an existing ledger.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from assay.connectors.ledger import LineLedger
from assay.records import Position


class Ledger:
    """Completed positions per source, persisted as JSON."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines = LineLedger()
        self.extra: dict[str, Any] = {}

    @property
    def done(self) -> dict[str, list[list[int]]]:
        return self.lines.done

    @classmethod
    def for_run(cls, state_dir: str | Path, sink_path: str) -> Ledger:
        key = hashlib.sha256(os.path.abspath(sink_path).encode()).hexdigest()[:16]
        return cls(Path(state_dir) / "checkpoints" / f"{key}.json")

    def load(self) -> bool:
        """Load an existing ledger; False when there is none."""
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return False
        self.lines = LineLedger.from_json(data.get("done", {}))
        self.extra = data.get("extra", {})
        return True

    @property
    def completed(self) -> int:
        return self.lines.completed

    def is_done(self, source: str, line: int) -> bool:
        return self.lines.is_done(source, line)

    def add(self, positions: Iterable[Position]) -> None:
        self.lines.add(positions)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps({"done": self.done, "extra": self.extra}))
        os.replace(tmp, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
