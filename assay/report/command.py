"""``assay report``: what the command does with its arguments (the CLI only parses them)."""

from __future__ import annotations

from pathlib import Path

from assay.report.build import build_run_report
from assay.report.compare import Comparison, compare_runs
from assay.report.load import read_run_info
from assay.report.store import close_stores, expand_locations
from assay.report.terminal import console, print_comparison, print_run_report, print_trend
from assay.report.trend import Trend, build_trend

__all__ = ["report_command"]


def report_command(
    results: list[str],
    *,
    html: Path | None = None,
    compare: str | None = None,
    worst: int = 20,
    quiet: bool = False,
) -> None:
    """Report on one run, or on several (a trend, the newest compared with the one before it);
    ``compare`` names an explicit baseline for the newest run. Prints tables unless ``quiet``;
    writes the HTML report to ``html`` when given. Raises :class:`~assay.exceptions.AssayError`."""
    try:
        _report(results, html=html, compare=compare, worst=worst, quiet=quiet)
    finally:
        close_stores()  # e.g. the S3 client every s3:// location shared


def _report(results: list[str], *, html: Path | None, compare: str | None, worst: int, quiet: bool) -> None:
    infos = sorted((read_run_info(loc) for loc in expand_locations(results)), key=lambda i: i.sort_key)
    current = infos[-1]
    trend: Trend | None = build_trend(infos) if len(infos) > 1 else None
    baseline = compare if compare is not None else (infos[-2] if len(infos) > 1 else None)
    comparison: Comparison | None = None
    if baseline is not None:
        comparison = compare_runs(current, baseline, worst=worst)
        report = comparison.current
    else:
        report = build_run_report(current, worst=worst)
    if not quiet:
        print_run_report(report)
        if comparison is not None:
            print_comparison(comparison)
        if trend is not None:
            print_trend(trend)
    if html is not None:
        from assay.report.html import write_html

        out = write_html(html, report, comparison=comparison, trend=trend)
        console.print(f"HTML report: {out} ({out.stat().st_size / 1e6:.1f} MB)")
