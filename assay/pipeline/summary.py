"""Run statistics: counts, per-result-key mean and pass rate with their confidence intervals,
written as ``_SUMMARY.json``. The intervals come from :class:`assay.stats.Moments`, whose sums merge
across writers, attempts and shards like the counts do. Per-judge statistics of several parts
(attempts, writers, shards) combine in one way: :func:`merge_judge_stats`."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.records import Failure, Result
from assay.stats import CalibrationPairs, Moments, sample_weight
from assay.stats.labels import Labels

#: Distinct reasons for unscored results a :class:`KeyStats` keeps.
MAX_UNSCORED_REASONS = 5
OTHER_REASONS = "(other reasons)"


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
    level: float = 0.95
    moments: Moments = field(default_factory=Moments)
    swap_checked: int = 0
    """Pairwise verdicts asked in both orders (``swap: true``) ..."""
    swap_consistent: int = 0
    """... and those whose two orders agreed."""
    calibration: CalibrationPairs | None = None
    """The human labels of this key's labelled traces with the judge's results (``calibration.labels``)."""
    unscored_reasons: dict[str, int] = field(default_factory=dict)
    """Why results were not scored (their comment: ``no reference output to compare with``), the
    :data:`MAX_UNSCORED_REASONS` first kept, the others under ``(other reasons)``."""

    def add(self, r: Result, cluster: str | None = None) -> None:
        """One result (``cluster``: its trace's cluster id when the run clusters, see ``stats.cluster_by``)."""
        self.count += 1
        if r.error is not None:
            self.errors += 1
        elif r.score is None:
            self.unscored += 1
            reason = (r.comment or "no reason given")[:120]
            reasons = self.unscored_reasons
            if reason not in reasons and len(reasons) >= MAX_UNSCORED_REASONS:
                reason = OTHER_REASONS
            reasons[reason] = reasons.get(reason, 0) + 1
        else:
            score = r.score
            self.scored += 1
            self.total += score
            passed = score >= self.threshold
            if passed:
                self.passed += 1
            md = r.metadata
            self.moments.add(score, passed, sample_weight(md) if md and "sample_weight" in md else 1.0, cluster)
        md = r.metadata
        if not md:
            return
        swap = md.get("swap")
        if isinstance(swap, dict):
            self._add_swap(swap)
        usage = md.get("usage")
        if isinstance(usage, dict):
            self.input_tokens += int(usage.get("input_tokens", 0) or 0)
            self.output_tokens += int(usage.get("output_tokens", 0) or 0)
            self.cost_usd += float(usage.get("cost_usd", 0.0) or 0.0)
            self.judge_calls += int(usage.get("calls", 0) or 0)
            self.cached_calls += int(usage.get("cached_calls", 0) or 0)

    def _add_swap(self, swap: Mapping[str, Any]) -> None:
        consistent = swap.get("consistent")
        if isinstance(consistent, bool):
            self.swap_checked += 1
            self.swap_consistent += consistent
        elif isinstance(consistent, int) and isinstance(swap.get("checked"), int):  # a jury's verdicts
            self.swap_checked += int(swap["checked"])
            self.swap_consistent += consistent

    @property
    def position_consistency(self) -> float | None:
        """The share of pairwise verdicts whose two orders agreed (None without ``swap``)."""
        return self.swap_consistent / self.swap_checked if self.swap_checked else None

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
            "swap_checked",
            "swap_consistent",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.moments.merge(other.moments)
        for reason, n in other.unscored_reasons.items():
            if reason not in self.unscored_reasons and len(self.unscored_reasons) >= MAX_UNSCORED_REASONS:
                reason = OTHER_REASONS
            self.unscored_reasons[reason] = self.unscored_reasons.get(reason, 0) + n
        if other.calibration is not None:
            if self.calibration is None:
                self.calibration = CalibrationPairs(other.calibration.key, other.calibration.threshold)
            self.calibration.extend(other.calibration)

    def add_label(self, key: str, label: Any, r: Result) -> None:
        """A labelled trace: its human label beside this result (for ``kappa``)."""
        if self.calibration is None:
            self.calibration = CalibrationPairs(key, self.threshold)
        self.calibration.add(label, r.to_dict())

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa of this key's results against the human labels (None without labels)."""
        return None if self.calibration is None else self.calibration.kappa

    @property
    def mean(self) -> float | None:
        """The mean score (weighted by ``sample_weight`` when results carry one)."""
        if self.moments.n:
            return self.moments.mean
        return self.total / self.scored if self.scored else None

    @property
    def pass_rate(self) -> float | None:
        """The share of passing scored results (weighted like :attr:`mean`)."""
        if self.moments.n:
            return self.moments.pass_rate
        return self.passed / self.scored if self.scored else None

    @property
    def mean_ci(self) -> tuple[float, float] | None:
        """The confidence interval of :attr:`mean` at :attr:`level` (None below two results)."""
        return self.moments.mean_interval(self.level)

    @property
    def pass_rate_ci(self) -> tuple[float, float] | None:
        """Wilson's interval of :attr:`pass_rate` at :attr:`level`."""
        return self.moments.pass_rate_interval(self.level)

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
            "n": self.moments.n,
            "mean_ci": _rounded(self.mean_ci),
            "pass_rate_ci": _rounded(self.pass_rate_ci),
            "ci_level": self.level,
        }
        m = self.moments
        if m.weighted or m.clusters:
            n_eff = m.effective_n()
            d["n_effective"] = None if n_eff is None else round(n_eff, 3)
            d["weighted"] = m.weighted
            if m.clusters:
                d["clusters"] = len(m.clusters)
        d["moments"] = m.to_dict()
        if self.unscored_reasons:
            d["unscored_reasons"] = dict(sorted(self.unscored_reasons.items(), key=lambda t: (-t[1], t[0])))
        if self.swap_checked:
            d.update(
                position_consistency=round(self.swap_consistent / self.swap_checked, 6),
                swap_checked=self.swap_checked,
                swap_consistent=self.swap_consistent,
            )
        if self.calibration is not None:
            cal = self.calibration.report()
            d["kappa"] = cal["kappa"]
            d["calibration"] = {
                **{k: cal[k] for k in ("n", "agreement", "base_rate", "judge_rate", "judge_errors")},
                "pairs": self.calibration.to_dict(),
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
            level=float(d.get("ci_level", 0.95)),
            moments=Moments.from_dict(d.get("moments") or {}),
            calibration=_calibration_from(d),
            swap_checked=int(d.get("swap_checked", 0)),
            swap_consistent=int(d.get("swap_consistent", 0)),
            unscored_reasons={str(r): n for r, n in (d.get("unscored_reasons") or {}).items() if isinstance(n, int)},
        )

    def top_unscored_reason(self) -> str | None:
        """The most common reason results of this key were not scored (None when all were)."""
        named = sorted((-n, r) for r, n in self.unscored_reasons.items() if r != OTHER_REASONS)
        return named[0][1] if named else None


def _calibration_from(d: Mapping[str, Any]) -> CalibrationPairs | None:
    cal = d.get("calibration")
    if not isinstance(cal, Mapping) or not isinstance(cal.get("pairs"), Mapping):
        return None
    return CalibrationPairs.from_dict(str(d.get("key", "")), cal["pairs"])


def _rounded(interval: tuple[float, float] | None) -> list[float] | None:
    return None if interval is None else [round(interval[0], 6), round(interval[1], 6)]


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


#: Distinct dead-letter reasons a :class:`RunStats` keeps (the rest are counted together).
MAX_REASONS = 20


def dead_letter_reason(failure: Failure) -> str:
    """A dead letter's reason: its error without the record's position (which every record has
    its own of), at most 300 characters, so that records that failed alike count together."""
    text = failure.message
    source = failure.position.source
    if source and text.startswith(source):
        text = _POSITION_TAIL.sub("", text[len(source) :], count=1)
    return text if len(text) <= 300 else text[:299] + "…"


#: What follows a source's name in a position as messages write it (``:12``, ``[3]@40``), and ``: ``.
_POSITION_TAIL = re.compile(r"^(?::\d+|\[\d+\]@\d+)*: ")


@dataclass
class RunStats:
    """Everything the summary reports; updated by the sink stage only (one writer)."""

    thresholds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_NAMES, 0))
    keys: dict[str, KeyStats] = field(default_factory=dict)
    level: float = 0.95
    """Confidence level of the intervals (``stats.ci_level``)."""
    labels: Labels | None = None
    """Human labels by trace id and key (``calibration.labels``): labelled traces feed ``kappa``."""
    dead_letter_reasons: dict[str, int] = field(default_factory=dict)
    """Dead letters by reason (their error without the position), the :data:`MAX_REASONS` most
    common kept: what the verdict says records lacked when they fail the run."""

    def threshold_for(self, key: str) -> float:
        t = self.thresholds.get(key)
        if t is None:
            base = key.split(":", 1)[0]
            t = self.thresholds.get(base, 0.5)
        return t

    def add_results(self, results: dict[str, Result], cluster: str | None = None, trace_id: str | None = None) -> None:
        """The results of one trace (``cluster``: its cluster id, when the run clusters;
        ``trace_id``: to find its human labels, when the run has some)."""
        keys = self.keys
        labelled = self.labels.get(trace_id) if self.labels and trace_id is not None else None
        for key, r in results.items():
            ks = keys.get(key)
            if ks is None:
                ks = keys[key] = KeyStats(threshold=self.threshold_for(key), level=self.level)
            ks.add(r, cluster)
            if labelled is not None and key in labelled:
                ks.add_label(key, labelled[key], r)

    def add_dead_letter(self, failure: Failure) -> None:
        """Count an error :class:`~assay.records.Failure` (a record not scored): the dead letters,
        by stage, and by reason."""
        counts = self.counts
        counts["dead_letters"] += 1
        if failure.stage == "parse":
            counts["parse_errors"] += 1
        elif failure.stage == "normalize":
            counts["normalize_errors"] += 1
        elif failure.stage == "read":
            counts["read_errors"] += 1
        reason = dead_letter_reason(failure)
        reasons = self.dead_letter_reasons
        if reason in reasons or len(reasons) < MAX_REASONS:
            reasons[reason] = reasons.get(reason, 0) + 1
        else:
            reasons[OTHER_REASONS] = reasons.get(OTHER_REASONS, 0) + 1

    def top_dead_letter_reason(self) -> tuple[str, int] | None:
        """The most common dead-letter reason and its count (None when none was recorded)."""
        named = sorted((-n, r) for r, n in self.dead_letter_reasons.items() if r != OTHER_REASONS)
        return (named[0][1], -named[0][0]) if named else None

    def merge(self, other: RunStats) -> None:
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        if other.dead_letter_reasons:
            reasons = self.dead_letter_reasons
            for r, n in other.dead_letter_reasons.items():
                reasons[r] = reasons.get(r, 0) + n
            if len(reasons) > MAX_REASONS:
                other_n = reasons.pop(OTHER_REASONS, 0)
                kept = sorted(reasons.items(), key=lambda t: (-t[1], t[0]))
                self.dead_letter_reasons = dict(kept[: MAX_REASONS - 1])
                self.dead_letter_reasons[OTHER_REASONS] = other_n + sum(n for _, n in kept[MAX_REASONS - 1 :])
        for key, ks in other.keys.items():
            if key in self.keys:
                self.keys[key].merge(ks)
            else:
                self.keys[key] = ks

    def dead_letter_ratio(self) -> float:
        """Dead letters over the records read (input the source could not split into records,
        ``read_errors``, counts as read too)."""
        read = self.records_seen()
        return self.counts["dead_letters"] / read if read else 0.0

    def records_seen(self) -> int:
        """Records read, and pieces of input that could not be read as records."""
        return self.counts.get("read", 0) + self.counts.get("read_errors", 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": dict(self.counts),
            "evaluators": {k: v.to_dict() for k, v in sorted(self.keys.items())},
            "dead_letter_reasons": dict(sorted(self.dead_letter_reasons.items(), key=lambda t: (-t[1], t[0]))),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunStats:
        stats = cls()
        stats.counts.update(d.get("counts", {}))
        reasons = d.get("dead_letter_reasons")
        if isinstance(reasons, Mapping):
            stats.dead_letter_reasons = {str(r): int(n) for r, n in reasons.items() if isinstance(n, int)}
        stats.keys = {k: KeyStats.from_dict(v) for k, v in d.get("evaluators", {}).items()}
        return stats


JUDGE_GAUGES = frozenset({"rate_rpm", "configured_rpm", "in_flight", "max_in_flight", "paused_s"})
"""Per-judge values of one moment, not counts: processes running side by side add up (each had its
share of the run's limit); a later attempt replaces an earlier one (its limit is the one in force)."""

JUDGE_PERCENTILES = frozenset({"latency_p50_s", "latency_p99_s"})
"""Cannot be combined from parts: the largest part's value is kept (an upper bound)."""


def merge_judge_stats(
    parts: Iterable[Mapping[str, Mapping[str, Any]]], *, side_by_side: bool
) -> dict[str, dict[str, Any]]:
    """Per-judge statistics of several parts combined: every count (requests, errors, tokens,
    cost, …, and any count a judge adds later) is summed; gauges (:data:`JUDGE_GAUGES`) are summed
    over parts that ran ``side_by_side`` (the writers of one attempt, the shards of one run) and
    taken from the last part otherwise (successive attempts, in order); latency percentiles keep
    the largest value; text (provider, model) the first.

    >>> a = {"gpt": {"requests": 10, "errors": 1, "configured_rpm": 500.0, "latency_p99_s": 0.4}}
    >>> b = {"gpt": {"requests": 5, "errors": 0, "configured_rpm": 500.0, "latency_p99_s": 0.2}}
    >>> merge_judge_stats([a, b], side_by_side=False)["gpt"]
    {'requests': 15, 'errors': 1, 'configured_rpm': 500.0, 'latency_p99_s': 0.4}
    >>> merge_judge_stats([a, b], side_by_side=True)["gpt"]["configured_rpm"]
    1000.0
    """
    out: dict[str, dict[str, Any]] = {}
    for judges in parts:
        for name, part in judges.items():
            acc = out.get(name)
            if acc is None:
                out[name] = dict(part)
                continue
            for k, v in part.items():
                cur = acc.get(k)
                if k in JUDGE_PERCENTILES:
                    acc[k] = v if cur is None else cur if v is None else max(cur, v)
                elif k in JUDGE_GAUGES:
                    if not side_by_side:
                        acc[k] = v
                    elif isinstance(v, int | float) and isinstance(cur, int | float):
                        acc[k] = cur + v
                    elif cur is None:
                        acc[k] = v
                elif isinstance(v, bool) or not isinstance(v, int | float):
                    acc.setdefault(k, v)
                else:
                    acc[k] = (cur if isinstance(cur, int | float) and not isinstance(cur, bool) else 0) + v
            if isinstance(acc.get("cost_usd"), float):
                acc["cost_usd"] = round(acc["cost_usd"], 8)
    return out


def judge_totals(judges: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The ``totals`` block of a summary: every judge's counts added up."""
    js = list(judges.values())

    def total(key: str) -> int:
        return sum(int(j.get(key) or 0) for j in js)

    return {
        "requests": total("requests"),
        "rate_limited_429": total("http_429"),
        "server_errors_5xx": total("http_5xx"),
        "timeouts": total("timeouts"),
        "cached": total("cached"),
        "retries": total("retries"),
        "errors": total("errors"),
        "abandoned": total("abandoned"),
        "input_tokens": total("input_tokens"),
        "output_tokens": total("output_tokens"),
        "cost_usd": round(sum(float(j.get("cost_usd") or 0.0) for j in js), 8),
    }


def fmt_num(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"
