"""One run's report: the summary, the per-key aggregates, the worst traces and the dead letters.

>>> from assay.report import build_run_report
>>> report = build_run_report("examples/quickstart/out")  # doctest: +SKIP
>>> report.keys["tool_call_accuracy"].pass_rate  # doctest: +SKIP
0.976
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from assay.report.aggregate import DeadLetterAggregate, KeyAggregate, WorstTrace, WorstTraces
from assay.report.load import RunInfo, iter_dead_letters, iter_rows, read_run_info
from assay.report.store import ResultStore
from assay.report.trajectory import attach_trajectories

__all__ = ["RowVisitor", "RunReport", "build_run_report"]

RowVisitor = Callable[[dict[str, Any], dict[str, str]], None]
"""Called with each row and its verdicts per result key (``pass``/``fail``/``error``/``unscored``)."""


@dataclass
class RunReport:
    """Everything the report shows about one run."""

    info: RunInfo
    keys: dict[str, KeyAggregate] = field(default_factory=dict)
    rows: int = 0
    rows_with_warnings: int = 0
    warnings: Counter[str] = field(default_factory=Counter)
    worst: list[WorstTrace] = field(default_factory=list)
    dead: DeadLetterAggregate = field(default_factory=DeadLetterAggregate)
    from_rows: bool = True
    """False when no rows were readable and the numbers come from ``_SUMMARY.json`` alone."""

    @property
    def summary(self) -> dict[str, Any]:
        """The run's ``_SUMMARY.json`` (empty when absent)."""
        return self.info.summary

    @property
    def judges(self) -> dict[str, dict[str, Any]]:
        """Per judge endpoint statistics from the summary."""
        judges = self.summary.get("judges") or {}
        return {k: v for k, v in judges.items() if isinstance(v, dict)}

    @property
    def counts(self) -> dict[str, int]:
        """Run counts: the summary's, with ``scored`` and ``dead_letters`` from what was read when
        there is no summary."""
        counts = dict(self.summary.get("counts") or {})
        counts.setdefault("scored", self.rows)
        counts.setdefault("dead_letters", self.dead.total)
        counts.setdefault("read", self.rows + self.dead.total)
        return counts


def build_run_report(
    location: str | ResultStore | RunInfo,
    *,
    worst: int = 20,
    trajectories: bool = True,
    visitors: tuple[RowVisitor, ...] = (),
    rows: bool = True,
) -> RunReport:
    """Read a results location in one streaming pass and aggregate it.

    ``worst`` bounds the worst-traces list; ``trajectories`` reads their trajectories back from
    the source records named by their positions; each of ``visitors`` sees every row with its
    verdicts (used by comparisons); ``rows=False`` reads only the summary (trends)."""
    info = location if isinstance(location, RunInfo) else read_run_info(location)
    report = RunReport(info=info)
    thresholds = info.thresholds()
    worst_traces = WorstTraces(worst)
    keys = report.keys
    if rows:
        for row in iter_rows(info.store):
            report.rows += 1
            results = row.get("results")
            if not isinstance(results, dict):
                continue
            verdicts: dict[str, str] = {}
            for key, result in results.items():
                agg = keys.get(key)
                if agg is None:
                    agg = keys[key] = KeyAggregate(key, threshold=thresholds_for(thresholds, key))
                verdicts[key] = agg.add(result if isinstance(result, dict) else {})
            warnings = row.get("warnings")
            if warnings:
                report.rows_with_warnings += 1
                for w in warnings:
                    text = w if isinstance(w, str) else str(w.get("code") or w.get("message") or w)
                    report.warnings[text.rsplit(": ", 1)[-1][:100]] += 1
            worst_traces.add(row, verdicts)
            for visit in visitors:
                visit(row, verdicts)
        for record in iter_dead_letters(info.store):
            report.dead.add(record)
    if not report.rows:
        report.from_rows = False
        evaluators = info.summary.get("evaluators") or {}
        report.keys = {k: KeyAggregate.from_summary(k, v) for k, v in sorted(evaluators.items())}
    else:
        report.keys = dict(sorted(keys.items()))
    report.worst = worst_traces.result()
    if trajectories and report.worst:
        attach_trajectories(report.worst)
    return report


def thresholds_for(thresholds: dict[str, float], key: str) -> float:
    """The threshold of ``key``, or of its base name (``tool_use:get_weather`` → ``tool_use``), else 0.5."""
    return thresholds.get(key, thresholds.get(key.split(":", 1)[0], 0.5))
