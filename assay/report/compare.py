"""Two runs side by side: per-key deltas and the traces whose verdict flipped, regressions first.

The baseline is streamed once into a compact index (trace id → one byte per result key), the
current run is streamed once against it, and a last pass over the baseline picks up the comments
of the few flipped traces shown. The index is the only part that grows with the run (about a
hundred bytes per trace); the flipped traces shown are bounded.

>>> from assay.report import compare_runs
>>> cmp = compare_runs("results/dt=2026-11-22", "results/dt=2026-11-21")  # doctest: +SKIP
>>> [(d.key, d.pass_rate_delta) for d in cmp.deltas][:1]  # doctest: +SKIP
[('correctness', -0.04)]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from assay.report.aggregate import KeyAggregate, short
from assay.report.build import RunReport, build_run_report
from assay.report.load import RunInfo, iter_rows
from assay.report.store import ResultStore

__all__ = ["Comparison", "Flip", "KeyDelta", "VerdictIndex", "compare_reports", "compare_runs"]

_CODE = {"pass": 80, "fail": 70, "error": 69, "unscored": 85}  # P F E U
_NAME = {v: k for k, v in _CODE.items()}
_MISSING = 45  # "-"
BAD = ("fail", "error")


class VerdictIndex:
    """Trace id → verdict per result key, one byte each; a row visitor for the baseline pass."""

    def __init__(self) -> None:
        self.keys: dict[str, int] = {}
        self.verdicts: dict[str, bytes] = {}

    def __call__(self, row: dict[str, Any], verdicts: dict[str, str]) -> None:
        codes = bytearray()
        for key, verdict in verdicts.items():
            i = self.keys.setdefault(key, len(self.keys))
            if i >= len(codes):
                codes.extend(b"-" * (i + 1 - len(codes)))
            codes[i] = _CODE[verdict]
        self.verdicts[str(row.get("trace_id"))] = bytes(codes)

    def get(self, trace_id: str, key: str) -> str | None:
        """The baseline verdict of ``key`` for ``trace_id`` (None when absent)."""
        codes, i = self.verdicts.get(trace_id), self.keys.get(key)
        if codes is None or i is None or i >= len(codes) or codes[i] == _MISSING:
            return None
        return _NAME[codes[i]]


@dataclass
class Flip:
    """A trace whose verdict on one result key changed between the runs."""

    trace_id: str
    key: str
    before: str
    after: str
    score_after: Any = None
    comment_after: str = ""
    score_before: Any = None
    comment_before: str = ""

    @property
    def regression(self) -> bool:
        """It passed before and does not now."""
        return self.before == "pass" and self.after in BAD


class FlipCollector:
    """A row visitor for the current run: counts flips per key against a baseline index and keeps
    the first ``limit`` regressions and ``limit // 2`` improvements."""

    def __init__(self, baseline: VerdictIndex, limit: int = 40) -> None:
        self.baseline = baseline
        self.limit = limit
        self.matched = 0
        self.only_current = 0
        self.regressed: Counter[str] = Counter()
        self.improved: Counter[str] = Counter()
        self.regressions: list[Flip] = []
        self.improvements: list[Flip] = []

    def __call__(self, row: dict[str, Any], verdicts: dict[str, str]) -> None:
        trace_id = str(row.get("trace_id"))
        if trace_id not in self.baseline.verdicts:
            self.only_current += 1
            return
        self.matched += 1
        for key, after in verdicts.items():
            before = self.baseline.get(trace_id, key)
            if before == "pass" and after in BAD:
                self.regressed[key] += 1
                self._keep(self.regressions, self.limit, trace_id, key, before, after, row)
            elif before in BAD and after == "pass":
                self.improved[key] += 1
                self._keep(self.improvements, self.limit // 2, trace_id, key, before, after, row)

    @staticmethod
    def _keep(out: list[Flip], limit: int, trace_id: str, key: str, before: str, after: str, row: Any) -> None:
        if len(out) < limit:
            r = row["results"][key]
            comment = r.get("error") or r.get("comment") or ""
            out.append(Flip(trace_id, key, before, after, r.get("score"), short(comment, 600)))


@dataclass
class KeyDelta:
    """One result key in both runs."""

    key: str
    baseline: KeyAggregate | None
    current: KeyAggregate | None
    regressed: int = 0
    improved: int = 0

    def _delta(self, metric: str) -> float | None:
        if self.baseline is None or self.current is None:
            return None
        a, b = getattr(self.baseline, metric), getattr(self.current, metric)
        return None if a is None or b is None else float(b - a)

    @property
    def mean_delta(self) -> float | None:
        """Current mean minus baseline mean."""
        return self._delta("mean")

    @property
    def pass_rate_delta(self) -> float | None:
        """Current pass rate minus baseline pass rate."""
        return self._delta("pass_rate")

    @property
    def error_rate_delta(self) -> float | None:
        """Current error rate minus baseline error rate."""
        return self._delta("error_rate")


@dataclass
class Comparison:
    """The current run against a baseline."""

    current: RunReport
    baseline: RunReport
    deltas: list[KeyDelta] = field(default_factory=list)
    flips: list[Flip] = field(default_factory=list)
    matched: int = 0
    only_current: int = 0
    only_baseline: int = 0

    @property
    def regressions(self) -> int:
        """Verdicts that went from pass to fail or error, all keys together."""
        return sum(d.regressed for d in self.deltas)


def _regression_order(d: KeyDelta) -> tuple[int, float, int, str]:
    pr = d.pass_rate_delta
    return (0 if pr is not None else 1, pr if pr is not None else 0.0, -d.regressed, d.key)


def compare_reports(current: RunReport, baseline: RunReport, collector: FlipCollector | None = None) -> Comparison:
    """Deltas of two built reports (and the flips ``collector`` saw while ``current`` was built)."""
    cmp = Comparison(current=current, baseline=baseline)
    for key in sorted(set(current.keys) | set(baseline.keys)):
        delta = KeyDelta(key, baseline.keys.get(key), current.keys.get(key))
        if collector is not None:
            delta.regressed, delta.improved = collector.regressed[key], collector.improved[key]
        cmp.deltas.append(delta)
    cmp.deltas.sort(key=_regression_order)
    if collector is not None:
        cmp.flips = collector.regressions + collector.improvements
        cmp.matched, cmp.only_current = collector.matched, collector.only_current
        cmp.only_baseline = len(collector.baseline.verdicts) - collector.matched
        _fill_baseline_comments(baseline.info, cmp.flips)
    return cmp


def compare_runs(
    current: str | ResultStore | RunInfo,
    baseline: str | ResultStore | RunInfo,
    *,
    worst: int = 20,
    trajectories: bool = True,
    flips: int = 40,
) -> Comparison:
    """Build both reports and compare them (``flips`` bounds the regressions listed)."""
    index = VerdictIndex()
    base = build_run_report(baseline, worst=0, trajectories=False, visitors=(index,))
    collector = FlipCollector(index, flips)
    cur = build_run_report(current, worst=worst, trajectories=trajectories, visitors=(collector,))
    return compare_reports(cur, base, collector)


def _fill_baseline_comments(baseline: RunInfo, flips: list[Flip]) -> None:
    wanted: dict[str, list[Flip]] = {}
    for f in flips:
        wanted.setdefault(f.trace_id, []).append(f)
    if not wanted:
        return
    for row in iter_rows(baseline.store):
        found = wanted.pop(str(row.get("trace_id")), None)
        for f in found or ():
            r = (row.get("results") or {}).get(f.key) or {}
            f.score_before = r.get("score")
            f.comment_before = short(r.get("error") or r.get("comment") or "", 600)
        if not wanted:
            break
