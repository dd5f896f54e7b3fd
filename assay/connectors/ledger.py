"""The completed-positions ledger of a file or object source: per input, the records whose rows are
durable, as closed intervals of record keys.

A record's key within its input is its line (JSON lines), or, where several records can share a
line (the elements of a one-line JSON array), its ordinal, carried in ``Position.offset`` (see
:func:`position_key`). Acknowledgements arrive in any order; intervals merge as they touch, so a
finished file is one interval whatever the order.

>>> from assay.records import Position
>>> led = LineLedger()
>>> led.add([Position("a.jsonl", 3), Position("a.jsonl", 1), Position("a.jsonl", 2), Position("a.jsonl", 7)])
>>> led.to_json()
{'a.jsonl': [[1, 3], [7, 7]]}
>>> LineLedger.from_json(led.to_json()).is_done("a.jsonl", 2), led.completed
(True, 4)
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from assay.exceptions import ConfigError
from assay.records import Position


def position_key(p: Position) -> int | None:
    """The ledger key of a file/object position: its ordinal when set (``offset``), else its line."""
    return p.offset if p.offset is not None else p.line


def intervals(keys: Iterable[int]) -> list[list[int]]:
    """Sorted closed intervals covering ``keys``: ``[1, 2, 3, 7]`` → ``[[1, 3], [7, 7]]``."""
    out: list[list[int]] = []
    for n in sorted(set(keys)):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def merge(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    """The union of two interval lists, touching intervals joined."""
    merged: list[list[int]] = []
    for s, e in sorted(a + b):
        if merged and s <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


class LineLedger:
    """Completed record keys per input (file path, object key), as interval lists."""

    def __init__(self, done: Mapping[str, list[list[int]]] | None = None) -> None:
        self.done: dict[str, list[list[int]]] = {}
        self._starts: dict[str, list[int]] = {}
        for source, ivs in (done or {}).items():
            self.done[source] = merge([], [[int(s), int(e)] for s, e in ivs])
            self._starts[source] = [iv[0] for iv in self.done[source]]

    @classmethod
    def from_json(cls, data: Any) -> LineLedger:
        """A ledger from what :meth:`to_json` returned (None: an empty one)."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError(f"resume state: expected {{input: [[start, end], ...]}}, got {type(data).__name__}")
        return cls(data)

    def to_json(self) -> dict[str, list[list[int]]]:
        """``{input: [[start, end], ...]}`` (a copy, JSON-able)."""
        return {k: [list(iv) for iv in v] for k, v in self.done.items()}

    @property
    def completed(self) -> int:
        """How many record keys are covered."""
        return sum(e - s + 1 for ivs in self.done.values() for s, e in ivs)

    def __bool__(self) -> bool:
        return bool(self.done)

    def is_done(self, source: str, key: int) -> bool:
        """Whether ``key`` of ``source`` is covered."""
        ivs = self.done.get(source)
        if not ivs:
            return False
        i = bisect.bisect_right(self._starts[source], key) - 1
        return i >= 0 and ivs[i][0] <= key <= ivs[i][1]

    def checker(self, source: str) -> Callable[[int], bool] | None:
        """A fast ``is_done`` for one input read in increasing key order; None when nothing of it
        is done (the reading loop then checks nothing)."""
        ivs = self.done.get(source)
        if not ivs:
            return None
        starts = self._starts[source]

        def done(key: int) -> bool:
            i = bisect.bisect_right(starts, key) - 1
            return i >= 0 and key <= ivs[i][1]

        return done

    def add_keys(self, source: str, keys: Iterable[int]) -> None:
        """Mark keys of one input done."""
        self.done[source] = merge(self.done.get(source, []), intervals(keys))
        self._starts[source] = [iv[0] for iv in self.done[source]]

    def add(self, positions: Iterable[Position]) -> None:
        """Mark positions done (any order; positions without a key are ignored)."""
        per: dict[str, list[int]] = {}
        for p in positions:
            key = position_key(p)
            if key is not None:
                per.setdefault(p.source, []).append(key)
        for source, keys in per.items():
            self.add_keys(source, keys)


def merge_ledger_states(states: Iterable[Any]) -> Any:
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


__all__ = ["LineLedger", "intervals", "merge", "merge_ledger_states", "position_key"]
