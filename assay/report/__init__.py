"""Reports of finished runs, and the other terminal views of the CLI.

* :func:`build_run_report` streams a results location (a directory, an ``s3://`` prefix, or any
  :class:`~assay.report.store.ResultStore` registered with :func:`register_store`) into
  per-key aggregates, the worst traces with their trajectories, and dead letters by reason;
* :func:`compare_runs` puts two runs side by side (deltas, flipped verdicts, regressions first);
* :func:`build_trend` follows each evaluator over several runs (``results/dt=*``);
* :func:`write_html` renders any of them into one self-contained HTML file (plotly, inlined);
* ``print_*`` render the same numbers as terminal tables.

>>> from assay.report import build_run_report, write_html
>>> write_html("report.html", build_run_report("examples/quickstart/out"))  # doctest: +SKIP
"""

from __future__ import annotations

from assay.report.aggregate import DeadLetterAggregate, KeyAggregate, WorstTrace
from assay.report.build import RunReport, build_run_report
from assay.report.catalog import (
    attribute_docs,
    describe_params,
    iter_normalized,
    print_evaluator,
    print_evaluator_list,
    print_normalized,
)
from assay.report.compare import Comparison, Flip, KeyDelta, compare_reports, compare_runs
from assay.report.html import render_html, write_html
from assay.report.load import RunInfo, iter_dead_letters, iter_rows, read_run_info
from assay.report.store import (
    LocalStore,
    ResultStore,
    close_stores,
    expand_locations,
    open_store,
    register_store,
)
from assay.report.terminal import (
    console,
    print_comparison,
    print_dry_run,
    print_run_report,
    print_summary,
    print_trend,
)
from assay.report.trajectory import register_source_opener
from assay.report.trend import Trend, TrendPoint, build_trend

__all__ = [
    "Comparison",
    "DeadLetterAggregate",
    "Flip",
    "KeyAggregate",
    "KeyDelta",
    "LocalStore",
    "ResultStore",
    "RunInfo",
    "RunReport",
    "Trend",
    "TrendPoint",
    "WorstTrace",
    "attribute_docs",
    "build_run_report",
    "build_trend",
    "close_stores",
    "compare_reports",
    "compare_runs",
    "console",
    "describe_params",
    "expand_locations",
    "iter_dead_letters",
    "iter_normalized",
    "iter_rows",
    "open_store",
    "print_comparison",
    "print_dry_run",
    "print_evaluator",
    "print_evaluator_list",
    "print_normalized",
    "print_run_report",
    "print_summary",
    "print_trend",
    "read_run_info",
    "register_source_opener",
    "register_store",
    "render_html",
    "write_html",
]
