"""Run statistics: counts, per-result-key mean and pass rate, written as ``_SUMMARY.json``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.records import Result


@dataclass(slots=True)
class KeyStats:
    """Aggregates of one result key."""

    threshold: float = 0.5
    count: int = 0
    scored: int = 0
    errors: int = 0
    unscored: int = 0
    total: float = 0.0
    passed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    judge_calls: int = 0
    cached_calls: int = 0

    def add(self, r: Result) -> None:
        self.count += 1
        if r.error is not None:
            self.errors += 1
        elif r.score is None:
            self.unscored += 1
        else:
            self.scored += 1
            self.total += r.score
            if r.score >= self.threshold:
                self.passed += 1
        usage = r.metadata.get("usage") if r.metadata else None
        if isinstance(usage, dict):
            self.input_tokens += int(usage.get("input_tokens", 0) or 0)
            self.output_tokens += int(usage.get("output_tokens", 0) or 0)
            self.cost_usd += float(usage.get("cost_usd", 0.0) or 0.0)
            self.judge_calls += int(usage.get("calls", 0) or 0)
            self.cached_calls += int(usage.get("cached_calls", 0) or 0)

    def merge(self, other: KeyStats) -> None:
        for name in (
            "count",
            "scored",
            "errors",
            "unscored",
            "total",
            "passed",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "judge_calls",
            "cached_calls",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def mean(self) -> float | None:
        return self.total / self.scored if self.scored else None

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "count": self.count,
            "scored": self.scored,
            "errors": self.errors,
            "unscored": self.unscored,
            "mean": None if self.mean is None else round(self.mean, 6),
            "pass_rate": None if self.pass_rate is None else round(self.pass_rate, 6),
            "threshold": self.threshold,
            "sum": self.total,
            "passed": self.passed,
        }
        if self.judge_calls or self.input_tokens:
            d.update(
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                cost_usd=round(self.cost_usd, 8),
                judge_calls=self.judge_calls,
                cached_calls=self.cached_calls,
            )
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KeyStats:
        return cls(
            threshold=d.get("threshold", 0.5),
            count=d["count"],
            scored=d["scored"],
            errors=d["errors"],
            unscored=d.get("unscored", 0),
            total=d.get("sum", 0.0),
            passed=d.get("passed", 0),
            input_tokens=d.get("input_tokens", 0),
            output_tokens=d.get("output_tokens", 0),
            cost_usd=d.get("cost_usd", 0.0),
            judge_calls=d.get("judge_calls", 0),
            cached_calls=d.get("cached_calls", 0),
        )


COUNT_NAMES = (
    "read",
    "scored",
    "dead_letters",
    "parse_errors",
    "normalize_errors",
    "warnings",
    "skipped",
    "abandoned",
    "read_errors",
)


@dataclass
class RunStats:
    """Everything the summary reports; updated by the sink stage only (one writer)."""

    thresholds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_NAMES, 0))
    keys: dict[str, KeyStats] = field(default_factory=dict)

    def threshold_for(self, key: str) -> float:
        t = self.thresholds.get(key)
        if t is None:
            base = key.split(":", 1)[0]
            t = self.thresholds.get(base, 0.5)
        return t

    def add_results(self, results: dict[str, Result]) -> None:
        keys = self.keys
        for key, r in results.items():
            ks = keys.get(key)
            if ks is None:
                ks = keys[key] = KeyStats(threshold=self.threshold_for(key))
            ks.add(r)

    def merge(self, other: RunStats) -> None:
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        for key, ks in other.keys.items():
            if key in self.keys:
                self.keys[key].merge(ks)
            else:
                self.keys[key] = ks

    def dead_letter_ratio(self) -> float:
        read = self.counts["read"]
        return self.counts["dead_letters"] / read if read else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "evaluators": {k: v.to_dict() for k, v in sorted(self.keys.items())},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunStats:
        stats = cls()
        stats.counts.update(d.get("counts", {}))
        stats.keys = {k: KeyStats.from_dict(v) for k, v in d.get("evaluators", {}).items()}
        return stats


def fmt_num(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"
