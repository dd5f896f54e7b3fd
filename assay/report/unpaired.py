"""Two runs without shared traces (two nights of production traffic), compared per result key as
independent samples (:mod:`assay.stats.unpaired`): the pass rate with the two-proportion z-test
and Newcombe's interval of the difference, the mean score with Welch's t-test and its interval;
Holm's correction over every p-value of the comparison, as for the paired tests. A key got worse
when a corrected p-value is below ``alpha`` and its delta is negative.

A key's sample is its :class:`~assay.stats.Moments` from the run's ``_SUMMARY.json`` (sampling
weights and clusters included), else the counts and sums of the rows read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assay.report.aggregate import KeyAggregate
from assay.report.build import RunReport
from assay.stats import Moments, UnpairedDelta, holm, two_proportion_difference, welch_difference

__all__ = ["MEAN_TEST", "PASS_TEST", "UnpairedKey", "compare_unpaired", "key_moments"]

PASS_TEST = "two-proportion z-test, Newcombe interval"
MEAN_TEST = "Welch t-test"


@dataclass
class UnpairedKey:
    """One result key of two runs compared as independent samples."""

    key: str
    pass_rate_before: float | None = None
    pass_rate_after: float | None = None
    pass_rate_delta: UnpairedDelta | None = None
    p_value_holm: float | None = None
    mean_before: float | None = None
    mean_after: float | None = None
    mean_delta: UnpairedDelta | None = None
    mean_p_value_holm: float | None = None
    changes: list[str] = field(default_factory=list)
    """Why the two runs did not score this key the same way (empty: comparable)."""
    significant: bool = False
    worse: bool = False

    @property
    def n_before(self) -> int:
        d = self.pass_rate_delta or self.mean_delta
        return 0 if d is None else round(d.n_before)

    @property
    def n_after(self) -> int:
        d = self.pass_rate_delta or self.mean_delta
        return 0 if d is None else round(d.n_after)

    def to_dict(self) -> dict[str, Any]:
        def delta(d: UnpairedDelta | None) -> dict[str, Any] | None:
            if d is None:
                return None
            ci = None if d.interval is None else [round(d.interval[0], 6), round(d.interval[1], 6)]
            return {
                "delta": round(d.delta, 6),
                "ci": ci,
                "ci_method": d.interval_method,
                "p_value": d.p_value,
                "test": d.method,
                "n_before": round(d.n_before, 3),
                "n_after": round(d.n_after, 3),
            }

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 6)

        return {
            "key": self.key,
            "pass_rate_before": r(self.pass_rate_before),
            "pass_rate_after": r(self.pass_rate_after),
            "pass_rate_delta": delta(self.pass_rate_delta),
            "p_value_holm": self.p_value_holm,
            "mean_before": r(self.mean_before),
            "mean_after": r(self.mean_after),
            "mean_delta": delta(self.mean_delta),
            "mean_p_value_holm": self.mean_p_value_holm,
            "comparable": not self.changes,
            "changes": self.changes,
            "significant": self.significant,
            "regressed": self.worse,
        }


def key_moments(report: RunReport, key: str) -> Moments | None:
    """The sample of ``key`` in a run: its summary's moments, else the rows' counts and sums."""
    entry = (report.summary.get("evaluators") or {}).get(key)
    if isinstance(entry, dict) and isinstance(entry.get("moments"), dict) and entry["moments"].get("n"):
        return Moments.from_dict(entry["moments"])
    agg: KeyAggregate | None = report.keys.get(key)
    if agg is None or not agg.scored:
        return None
    m = Moments()
    m.n, m.sx, m.sxx, m.sp = agg.scored, agg.total, agg.total_sq, float(agg.passed)
    return m


def compare_unpaired(
    current: RunReport, baseline: RunReport, *, alpha: float = 0.05, level: float = 0.95
) -> list[UnpairedKey]:
    """Every result key of both runs, tested as independent samples, Holm over all p-values."""
    out: list[UnpairedKey] = []
    family: list[tuple[UnpairedKey, str, float]] = []
    for key in sorted(set(current.keys) & set(baseline.keys)):
        uk = UnpairedKey(key)
        out.append(uk)
        before, after = key_moments(baseline, key), key_moments(current, key)
        if before is None or after is None:
            continue
        uk.pass_rate_before, uk.pass_rate_after = before.pass_rate, after.pass_rate
        uk.mean_before, uk.mean_after = before.mean, after.mean
        uk.pass_rate_delta = two_proportion_difference(before, after, level)
        if uk.pass_rate_delta is not None and uk.pass_rate_delta.p_value is not None:
            family.append((uk, "p_value_holm", uk.pass_rate_delta.p_value))
        binary = before.sxx == before.sx and after.sxx == after.sx and not (before.weighted or after.weighted)
        if not binary:  # 0/1 scores: the mean is the pass rate, tested once
            uk.mean_delta = welch_difference(before, after, level)
            if uk.mean_delta is not None and uk.mean_delta.p_value is not None:
                family.append((uk, "mean_p_value_holm", uk.mean_delta.p_value))
    adjusted = holm([p for _, _, p in family])
    for (uk, name, _), adj in zip(family, adjusted, strict=True):
        setattr(uk, name, adj)
        if adj < alpha:
            uk.significant = True
            d = uk.pass_rate_delta if name == "p_value_holm" else uk.mean_delta
            if d is not None and d.delta < 0:
                uk.worse = True
    return out
