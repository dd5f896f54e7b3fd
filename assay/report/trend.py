"""Each evaluator over the nights: one point per run, ordered by ``dt=`` partition, then start time.

A run's point comes from its ``_SUMMARY.json`` (cheap for a month of nights); a location without
a summary is aggregated from its rows.

>>> from assay.report import build_trend
>>> trend = build_trend(["results/dt=2026-11-21", "results/dt=2026-11-22"])  # doctest: +SKIP
>>> trend.series("correctness", "pass_rate")  # doctest: +SKIP
[0.52, 0.49]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.report.aggregate import KeyAggregate
from assay.report.build import build_run_report
from assay.report.load import RunInfo, read_run_info
from assay.report.store import ResultStore

__all__ = ["Trend", "TrendPoint", "build_trend", "night_status", "short_labels"]


@dataclass
class TrendPoint:
    """One run of the trend."""

    info: RunInfo
    keys: dict[str, KeyAggregate]
    counts: dict[str, int]

    @property
    def label(self) -> str:
        """The run's partition or start time."""
        return self.info.label

    @property
    def totals(self) -> dict[str, Any]:
        """Judge totals from the summary (requests, 429s, tokens, cost)."""
        return dict(self.info.summary.get("totals") or {})

    @property
    def status(self) -> str:
        """The run's status: its summary's (``ok``, ``gate_failed``, ``failed`` …), ``incomplete``
        for an output without ``_SUCCESS`` whose summary says nothing else."""
        return night_status(self.info)

    @property
    def whole(self) -> bool:
        """Whether the night's numbers stand: its output holds every row (``_SUCCESS``), or it has
        no summary at all to say otherwise (an output of another tool: its rows are its numbers)."""
        return self.info.complete or not self.info.summary


def night_status(info: RunInfo) -> str:
    """A results location's status for a person: the summary's, else whether it is complete."""
    if not info.summary:
        return "ok" if info.complete else "no summary"
    status = info.summary.get("status")
    if isinstance(status, str) and status:
        return status if info.complete or status not in ("ok", "gate_failed", "dead_letters") else "incomplete"
    return "ok" if info.complete else "incomplete"


def short_labels(labels: Sequence[str]) -> list[str]:
    """Labels as short as they can be and stay distinct: ``2026-11-21`` → ``11-21`` when every
    label is a date of one year."""
    import re

    if labels and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", x) for x in labels) and len({x[:4] for x in labels}) == 1:
        return [x[5:] for x in labels]
    return list(labels)


@dataclass
class Trend:
    """Runs in order, with the union of their result keys."""

    points: list[TrendPoint] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        """Every result key some run has, sorted."""
        return sorted({k for p in self.points for k in p.keys})

    @property
    def labels(self) -> list[str]:
        """The runs' labels, in order."""
        return [p.label for p in self.points]

    @property
    def statuses(self) -> list[str]:
        """Each run's status (see :func:`night_status`)."""
        return [p.status for p in self.points]

    def series(self, key: str, metric: str) -> list[float | None]:
        """``metric`` (``mean``, ``pass_rate``, ``error_rate``) of ``key`` per run (None where absent
        or where the night's output is not whole: a failed night is a gap, never a zero)."""
        out: list[float | None] = []
        for p in self.points:
            agg = p.keys.get(key) if p.whole else None
            out.append(None if agg is None else getattr(agg, metric))
        return out

    def count_series(self, name: str) -> list[int]:
        """A run count (``read``, ``dead_letters``…) per run."""
        return [int(p.counts.get(name, 0) or 0) for p in self.points]

    def cost_series(self) -> list[float]:
        """Judge cost (USD) per run."""
        return [float(p.totals.get("cost_usd", 0.0) or 0.0) for p in self.points]


def build_trend(locations: Sequence[str | ResultStore | RunInfo]) -> Trend:
    """The trend of the runs at ``locations`` (in any order; sorted here)."""
    infos = [loc if isinstance(loc, RunInfo) else read_run_info(loc) for loc in locations]
    trend = Trend()
    for info in sorted(infos, key=lambda i: i.sort_key):
        evaluators = info.summary.get("evaluators")
        if isinstance(evaluators, dict) and evaluators:
            keys = {k: KeyAggregate.from_summary(k, v) for k, v in sorted(evaluators.items())}
            counts = dict(info.summary.get("counts") or {})
        else:
            report = build_run_report(info, worst=0, trajectories=False)
            keys, counts = report.keys, report.counts
        trend.points.append(TrendPoint(info, keys, counts))
    return trend
