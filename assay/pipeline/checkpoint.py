"""Checkpoint ledger: which positions of a stopped run are already written, so a resumed run skips them.

A run that stops early (budget reached, SIGTERM) after flushing its sinks records the completed
positions per source file as line intervals in ``<state_dir>/checkpoints/<run key>.json``. The next
run with the same sink resumes: the source skips those positions and the sinks append. A run that
completes removes its ledger (a rerun then redoes everything; the judge cache makes that cheap).
``--fresh`` ignores and removes an existing ledger.
"""

from __future__ import annotations

import bisect
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from assay.records import Position


def _intervals(lines: Iterable[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def _merge(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    merged: list[list[int]] = []
    for s, e in sorted(a + b):
        if merged and s <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


class Ledger:
    """Completed positions per source, persisted as JSON."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[str, list[list[int]]] = {}
        self.extra: dict[str, Any] = {}
        self._starts: dict[str, list[int]] = {}

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
        self.done = {k: [list(iv) for iv in v] for k, v in data.get("done", {}).items()}
        self.extra = data.get("extra", {})
        self._starts = {k: [iv[0] for iv in v] for k, v in self.done.items()}
        return True

    @property
    def completed(self) -> int:
        return sum(e - s + 1 for ivs in self.done.values() for s, e in ivs)

    def is_done(self, source: str, line: int) -> bool:
        ivs = self.done.get(source)
        if not ivs:
            return False
        i = bisect.bisect_right(self._starts[source], line) - 1
        return i >= 0 and ivs[i][0] <= line <= ivs[i][1]

    def add(self, positions: Iterable[Position]) -> None:
        per: dict[str, list[int]] = {}
        for p in positions:
            if p.line is not None:
                per.setdefault(p.source, []).append(p.line)
        for source, lines in per.items():
            self.done[source] = _merge(self.done.get(source, []), _intervals(lines))
            self._starts[source] = [iv[0] for iv in self.done[source]]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps({"done": self.done, "extra": self.extra}))
        os.replace(tmp, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
