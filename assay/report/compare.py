"""Two runs side by side: per-key deltas and the traces whose verdict flipped, regressions first.

The baseline is streamed once into a compact index (trace id → a slot; per result key one byte
of verdict and one float of score per slot), the current run is streamed once against it, pairing
traces for the paired statistics (:mod:`assay.report.paired`: one float per paired trace and key),
and a last pass over the baseline picks up the comments of the few flipped traces shown. The index
and the pairs are the only parts that grow with the run (about a hundred bytes per trace, plus
nine per key); the flipped traces shown are bounded.

>>> from assay.report import compare_runs
>>> cmp = compare_runs("results/dt=2026-11-22", "results/dt=2026-11-21")  # doctest: +SKIP
>>> [(d.key, d.pass_rate_delta) for d in cmp.deltas][:1]  # doctest: +SKIP
[('correctness', -0.04)]
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from assay.report.aggregate import KeyAggregate, short
from assay.report.build import RunReport, build_run_report
from assay.report.load import RunInfo, iter_rows
from assay.report.paired import PairAccumulator, PairedKey, finalize, identity_changes
from assay.report.store import ResultStore
from assay.report.unpaired import UnpairedKey, compare_unpaired

__all__ = ["Comparison", "Flip", "KeyDelta", "VerdictIndex", "compare_reports", "compare_runs"]

_CODE = {"pass": 80, "fail": 70, "error": 69, "unscored": 85}  # P F E U
_NAME = {v: k for k, v in _CODE.items()}
_MISSING = 45  # "-": no result of this key for this trace
BAD = ("fail", "error")


class VerdictIndex:
    """Trace id → verdict (one byte) and score (one float) per result key; a row visitor for the
    baseline pass. Also gathers the identities (``row.identity``) each key was scored with."""

    def __init__(self) -> None:
        self.keys: dict[str, int] = {}
        self.slots: dict[str, int] = {}
        self.codes: dict[str, bytearray] = {}
        self.scores: dict[str, array[float]] = {}
        self.identities: dict[str, Counter[str]] = {}

    def __call__(self, row: dict[str, Any], verdicts: dict[str, str]) -> None:
        trace_id = str(row.get("trace_id"))
        slot = self.slots.get(trace_id)
        if slot is None:
            slot = self.slots[trace_id] = len(self.slots)
            for codes in self.codes.values():
                codes.append(_MISSING)
            for scores in self.scores.values():
                scores.append(math.nan)
        results = row.get("results") or {}
        for key, verdict in verdicts.items():
            if key not in self.codes:
                self.keys[key] = len(self.keys)
                self.codes[key] = bytearray([_MISSING]) * len(self.slots)
                self.scores[key] = array("d", [math.nan]) * len(self.slots)
            self.codes[key][slot] = _CODE[verdict]
            self.scores[key][slot] = _score(results.get(key))
        note_identities(self.identities, row, verdicts)

    def __contains__(self, trace_id: str) -> bool:
        return trace_id in self.slots

    def __len__(self) -> int:
        return len(self.slots)

    def get(self, trace_id: str, key: str) -> str | None:
        """The baseline verdict of ``key`` for ``trace_id`` (None when absent)."""
        slot, codes = self.slots.get(trace_id), self.codes.get(key)
        if slot is None or codes is None or codes[slot] == _MISSING:
            return None
        return _NAME[codes[slot]]

    def score(self, trace_id: str, key: str) -> float:
        """The baseline score (NaN when absent or not a number)."""
        slot, scores = self.slots.get(trace_id), self.scores.get(key)
        return math.nan if slot is None or scores is None else scores[slot]


def _score(result: Any) -> float:
    score = result.get("score") if isinstance(result, dict) else None
    return float(score) if isinstance(score, int | float) and not isinstance(score, bool) else math.nan


def note_identities(into: dict[str, Counter[str]], row: dict[str, Any], verdicts: dict[str, str]) -> None:
    """Count the identity each result key of ``row`` was scored with (a dynamic ``key:sub`` takes
    its evaluator's, ``key``); rows written before identities existed count nothing."""
    identity = row.get("identity")
    if not isinstance(identity, dict):
        return
    for key in verdicts:
        ident = identity.get(key) or identity.get(key.split(":", 1)[0])
        if isinstance(ident, str):
            counter = into.setdefault(key, Counter())
            if ident in counter or len(counter) < 8:
                counter[ident] += 1


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
    """A row visitor for the current run: counts flips per key against a baseline index, keeps
    the first ``limit`` regressions and ``limit // 2`` improvements, and accumulates the pairs of
    every key for the paired statistics (:mod:`assay.report.paired`)."""

    def __init__(self, baseline: VerdictIndex, limit: int = 40, sample: int = 20) -> None:
        self.baseline = baseline
        self.limit = limit
        self.sample = sample
        self.matched = 0
        self.only_current = 0
        self.only_current_sample: list[str] = []
        self.regressed: Counter[str] = Counter()
        self.improved: Counter[str] = Counter()
        self.regressions: list[Flip] = []
        self.improvements: list[Flip] = []
        self.pairs: dict[str, PairAccumulator] = {}
        self.identities: dict[str, Counter[str]] = {}
        self.seen = bytearray(len(baseline))

    def __call__(self, row: dict[str, Any], verdicts: dict[str, str]) -> None:
        trace_id = str(row.get("trace_id"))
        note_identities(self.identities, row, verdicts)
        slot = self.baseline.slots.get(trace_id)
        if slot is None:
            self.only_current += 1
            if len(self.only_current_sample) < self.sample:
                self.only_current_sample.append(trace_id)
            return
        if self.seen[slot]:
            return  # a trace written twice: compared once
        self.seen[slot] = 1
        self.matched += 1
        results = row.get("results") or {}
        for key, after in verdicts.items():
            before = self.baseline.get(trace_id, key)
            acc = self.pairs.get(key)
            if acc is None:
                acc = self.pairs[key] = PairAccumulator(key)
            if before in ("pass", "fail") and after in ("pass", "fail"):
                acc.add(self.baseline.score(trace_id, key), before == "pass", _score(results.get(key)), after == "pass")
            elif before in ("pass", "fail") and after == "error":
                acc.became_error += 1
            elif before == "error" and after in ("pass", "fail"):
                acc.error_fixed += 1
            if before == "pass" and after in BAD:
                self.regressed[key] += 1
                self._keep(self.regressions, self.limit, trace_id, key, before, after, row)
            elif before in BAD and after == "pass":
                self.improved[key] += 1
                self._keep(self.improvements, self.limit // 2, trace_id, key, before, after, row)

    def only_baseline_sample(self) -> list[str]:
        """The first baseline traces the current run does not have."""
        out: list[str] = []
        for trace_id, slot in self.baseline.slots.items():
            if not self.seen[slot]:
                out.append(trace_id)
                if len(out) >= self.sample:
                    break
        return out

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
    only_current_sample: list[str] = field(default_factory=list)
    """The first trace ids only the current run has (attrition)."""
    only_baseline_sample: list[str] = field(default_factory=list)
    """The first trace ids only the baseline has."""
    paired: list[PairedKey] = field(default_factory=list)
    """Per result key: paired deltas, tests and comparability (:mod:`assay.report.paired`)."""
    unpaired: list[UnpairedKey] = field(default_factory=list)
    """Per result key, when the runs share no trace (or ``unpaired`` was asked): the runs as
    independent samples (:mod:`assay.report.unpaired`)."""
    alpha: float = 0.05
    level: float = 0.95

    @property
    def design(self) -> str:
        """``paired`` (on trace ids) or ``unpaired`` (independent samples)."""
        return "unpaired" if self.unpaired else "paired"

    @property
    def regressions(self) -> int:
        """Verdicts that went from pass to fail or error, all keys together."""
        return sum(d.regressed for d in self.deltas)

    @property
    def tested(self) -> list[PairedKey] | list[UnpairedKey]:
        """The per-key tests of the comparison's design."""
        return self.unpaired if self.unpaired else self.paired

    @property
    def significant_regressions(self) -> list[PairedKey] | list[UnpairedKey]:
        """Keys that got significantly worse (at ``alpha``, Holm-corrected over the keys)."""
        return [k for k in self.tested if k.worse]  # type: ignore[return-value]

    @property
    def not_comparable(self) -> list[PairedKey] | list[UnpairedKey]:
        """Keys the two runs did not score the same way (params, prompt, judge model, threshold)."""
        return [k for k in self.tested if k.changes]  # type: ignore[return-value]


def _regression_order(d: KeyDelta) -> tuple[int, float, int, str]:
    pr = d.pass_rate_delta
    return (0 if pr is not None else 1, pr if pr is not None else 0.0, -d.regressed, d.key)


def compare_reports(
    current: RunReport,
    baseline: RunReport,
    collector: FlipCollector | None = None,
    *,
    alpha: float = 0.05,
    level: float = 0.95,
    unpaired: bool = False,
) -> Comparison:
    """Deltas of two built reports (and the flips and pairs ``collector`` saw while ``current``
    was built); ``alpha`` and ``level`` for the tests and intervals. Runs that share no trace (or
    ``unpaired``) are compared as independent samples (:mod:`assay.report.unpaired`)."""
    cmp = Comparison(current=current, baseline=baseline, alpha=alpha, level=level)
    for key in sorted(set(current.keys) | set(baseline.keys)):
        delta = KeyDelta(key, baseline.keys.get(key), current.keys.get(key))
        if collector is not None:
            delta.regressed, delta.improved = collector.regressed[key], collector.improved[key]
        cmp.deltas.append(delta)
    cmp.deltas.sort(key=_regression_order)
    if collector is not None:
        cmp.flips = collector.regressions + collector.improvements
        cmp.matched, cmp.only_current = collector.matched, collector.only_current
        cmp.only_baseline = len(collector.baseline) - collector.matched
        cmp.only_current_sample = collector.only_current_sample
        cmp.only_baseline_sample = collector.only_baseline_sample()
        _fill_baseline_comments(baseline.info, cmp.flips)
        accs = [collector.pairs.get(key) or PairAccumulator(key) for key in sorted(collector.pairs)]
        cmp.paired = finalize(accs, alpha=alpha, level=level)
        before_t, after_t = baseline.info.thresholds(), current.info.thresholds()
        for pk in cmp.paired:
            pk.changes = identity_changes(
                collector.baseline.identities.get(pk.key, Counter()),
                collector.identities.get(pk.key, Counter()),
                before_t.get(pk.key),
                after_t.get(pk.key),
            )
    if unpaired or cmp.matched == 0:
        cmp.unpaired = compare_unpaired(current, baseline, alpha=alpha, level=level)
        before_t, after_t = baseline.info.thresholds(), current.info.thresholds()
        for uk in cmp.unpaired:
            uk.changes = identity_changes(
                collector.baseline.identities.get(uk.key, Counter()) if collector else Counter(),
                collector.identities.get(uk.key, Counter()) if collector else Counter(),
                before_t.get(uk.key),
                after_t.get(uk.key),
            )
    return cmp


def compare_runs(
    current: str | ResultStore | RunInfo,
    baseline: str | ResultStore | RunInfo,
    *,
    worst: int = 20,
    trajectories: bool = True,
    flips: int = 40,
    alpha: float = 0.05,
    level: float = 0.95,
    unpaired: bool = False,
) -> Comparison:
    """Build both reports and compare them (``flips`` bounds the regressions listed; ``alpha``
    and ``level`` for the tests and intervals; ``unpaired``: as independent samples even when
    they share traces). Memory: the baseline index holds one byte
    and one float per trace and key, the pairs one float per paired trace and key."""
    index = VerdictIndex()
    base = build_run_report(baseline, worst=0, trajectories=False, visitors=(index,))
    collector = FlipCollector(index, flips)
    cur = build_run_report(current, worst=worst, trajectories=trajectories, visitors=(collector,))
    return compare_reports(cur, base, collector, alpha=alpha, level=level, unpaired=unpaired)


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
