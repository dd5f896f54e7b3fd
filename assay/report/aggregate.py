"""Aggregates of a run built in one streaming pass: per result key, the worst traces, dead letters.

Each aggregate takes rows one at a time (``add``) and keeps only counters, a fixed-size score
histogram and bounded samples, so memory does not grow with the number of rows.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["BINS", "DeadLetterAggregate", "KeyAggregate", "WorstTrace", "WorstTraces", "short", "verdict_of"]

BINS = 20
"""Score histogram bins over [0, 1]."""
MAX_ERROR_MESSAGES = 8
COMMENT_CHARS = 1200


def short(text: Any, limit: int) -> str:
    """``text`` as a string of at most ``limit`` characters (an ellipsis marks a cut)."""
    s = text if isinstance(text, str) else orjson.dumps(text, default=str).decode()
    return s if len(s) <= limit else s[: limit - 1] + "…"


def verdict_of(result: dict[str, Any], threshold: float) -> str:
    """``pass``, ``fail``, ``error`` or ``unscored`` for one result of a row."""
    if result.get("error"):
        return "error"
    score = result.get("score")
    if not isinstance(score, int | float):
        return "unscored"
    return "pass" if score >= threshold else "fail"


def _bounded_count(counter: Counter[str], item: str, limit: int) -> None:
    if item in counter or len(counter) < limit:
        counter[item] += 1
    else:
        counter["(other)"] += 1


@dataclass
class KeyAggregate:
    """Counts, mean, pass rate, score histogram, error messages and judge usage of one result key."""

    key: str
    threshold: float = 0.5
    count: int = 0
    scored: int = 0
    errors: int = 0
    unscored: int = 0
    passed: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    """The sum of the squared scores (for Welch's test of two runs without shared traces)."""
    bins: list[int] = field(default_factory=lambda: [0] * BINS)
    error_messages: Counter[str] = field(default_factory=Counter)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, result: dict[str, Any]) -> str:
        """Count one result; returns its verdict."""
        self.count += 1
        verdict = verdict_of(result, self.threshold)
        if verdict == "error":
            self.errors += 1
            _bounded_count(self.error_messages, short(result["error"], 160), MAX_ERROR_MESSAGES)
        elif verdict == "unscored":
            self.unscored += 1
        else:
            score = float(result["score"])
            self.scored += 1
            self.total += score
            self.total_sq += score * score
            self.passed += verdict == "pass"
            self.bins[min(BINS - 1, max(0, int(score * BINS)))] += 1
        meta = result.get("metadata")
        usage = meta.get("usage") if isinstance(meta, dict) else None
        if isinstance(usage, dict):
            self.input_tokens += int(usage.get("input_tokens") or 0)
            self.output_tokens += int(usage.get("output_tokens") or 0)
            self.cost_usd += float(usage.get("cost_usd") or 0.0)
        return verdict

    @property
    def mean(self) -> float | None:
        """Mean score of the scored results."""
        return self.total / self.scored if self.scored else None

    @property
    def pass_rate(self) -> float | None:
        """Share of scored results at or above the threshold."""
        return self.passed / self.scored if self.scored else None

    @property
    def error_rate(self) -> float | None:
        """Share of results that are errors."""
        return self.errors / self.count if self.count else None

    @classmethod
    def from_summary(cls, key: str, d: dict[str, Any]) -> KeyAggregate:
        """The aggregate a ``_SUMMARY.json`` entry describes (no histogram): for trends and
        for locations whose rows are not readable."""
        return cls(
            key=key,
            threshold=float(d.get("threshold", 0.5)),
            count=int(d.get("count", 0)),
            scored=int(d.get("scored", 0)),
            errors=int(d.get("errors", 0)),
            unscored=int(d.get("unscored", 0)),
            passed=int(d.get("passed", round((d.get("pass_rate") or 0) * d.get("scored", 0)))),
            total=float(d.get("sum", (d.get("mean") or 0) * d.get("scored", 0))),
            input_tokens=int(d.get("input_tokens", 0)),
            output_tokens=int(d.get("output_tokens", 0)),
            cost_usd=float(d.get("cost_usd", 0.0)),
        )


@dataclass
class WorstTrace:
    """One of the worst traces: its results (comments kept) and, when readable, its trajectory."""

    trace_id: str
    position: Any
    failed: int
    mean: float | None
    results: dict[str, dict[str, Any]]
    trajectory: dict[str, Any] | None = None


def _trim_result(result: dict[str, Any], verdict: str) -> dict[str, Any]:
    meta = result.get("metadata")
    return {
        "score": result.get("score"),
        "value": short(result.get("value"), 200) if result.get("value") is not None else None,
        "comment": short(result.get("comment") or "", COMMENT_CHARS),
        "error": short(result["error"], 600) if result.get("error") else None,
        "metadata": short(meta, 400) if meta else None,
        "verdict": verdict,
    }


class WorstTraces:
    """The ``limit`` worst rows: most failed or errored results first, then lowest mean score."""

    def __init__(self, limit: int = 20) -> None:
        self.limit = limit
        self._heap: list[tuple[tuple[int, float], int, dict[str, Any], dict[str, str]]] = []
        self._seq = itertools.count()

    def add(self, row: dict[str, Any], verdicts: dict[str, str]) -> None:
        """Consider one row whose results got ``verdicts``."""
        if self.limit <= 0:
            return
        failed = sum(v in ("fail", "error") for v in verdicts.values())
        if not failed:
            return
        scores = [r.get("score") for r in row["results"].values() if isinstance(r.get("score"), int | float)]
        mean = sum(scores) / len(scores) if scores else 0.0
        badness = (failed, -mean)
        item = (badness, -next(self._seq), row, verdicts)  # earlier rows win ties
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, item)
        elif item[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, item)

    def result(self) -> list[WorstTrace]:
        """The kept rows, worst first."""
        out = []
        for (failed, neg_mean), _, row, verdicts in sorted(self._heap, key=lambda t: t[:2], reverse=True):
            results = {k: _trim_result(r, verdicts.get(k, "unscored")) for k, r in row["results"].items()}
            out.append(WorstTrace(str(row.get("trace_id")), row.get("position"), failed, -neg_mean, results))
        return out


@dataclass
class DeadLetterGroup:
    """Dead letters of one (stage, error type): how many, and the first one's message and place."""

    stage: str
    error_type: str
    count: int = 0
    example: str = ""
    where: str = ""


class DeadLetterAggregate:
    """Dead letters grouped by reason (stage and error type), plus the first few as samples."""

    MAX_GROUPS = 50

    def __init__(self, samples: int = 10) -> None:
        self.total = 0
        self.severity: Counter[str] = Counter()
        self.groups: dict[tuple[str, str], DeadLetterGroup] = {}
        self.samples: list[dict[str, Any]] = []
        self._max_samples = samples

    def add(self, record: dict[str, Any]) -> None:
        """Count one dead-letter record."""
        self.total += 1
        self.severity[str(record.get("severity") or "error")] += 1
        key = (str(record.get("stage") or "?"), str(record.get("error_type") or "?"))
        if key not in self.groups and len(self.groups) >= self.MAX_GROUPS:
            key = ("(other)", "(other)")
        group = self.groups.get(key)
        line = record.get("line")
        where = f"{record.get('file') or record.get('key') or ''}{'' if line is None else f':{line}'}"
        if group is None:
            group = self.groups[key] = DeadLetterGroup(*key, example=short(record.get("error") or "", 300), where=where)
        group.count += 1
        if len(self.samples) < self._max_samples:
            self.samples.append(
                {
                    "stage": key[0],
                    "error_type": key[1],
                    "where": where,
                    "error": short(record.get("error") or "", 400),
                    "raw": short(record.get("raw") or "", 400),
                }
            )

    def by_reason(self) -> list[DeadLetterGroup]:
        """Groups, largest first."""
        return sorted(self.groups.values(), key=lambda g: (-g.count, g.stage, g.error_type))
