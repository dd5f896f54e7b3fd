"""``assay calibrate RESULTS LABELS``: each labelled result key of a run against human labels.

The run's rows are streamed once: labelled traces become pairs (human label, judge result); with
``correct`` every scored result of a labelled key adds to the judge's sums for the
prediction-powered estimate (a trace written several times counts each time); with ``samples``
the verdicts of repeated samples of a trace (its result's ``metadata.samples``, or the same trace
id written several times) give the self-consistency rate. Memory: the labels, the pairs, and the
sample verdicts of at most :data:`MAX_SAMPLED_TRACES` traces.

>>> from assay.report.calibrate import calibrate
>>> report = calibrate("results/dt=2026-11-22", "labels.csv", correct=True)  # doctest: +SKIP
>>> report["keys"]["correctness"]["kappa"]  # doctest: +SKIP
0.71
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import orjson

from assay.report.build import thresholds_for
from assay.report.load import iter_rows, read_run_info
from assay.report.store import close_stores
from assay.stats.calibration import CalibrationPairs, human_label, ppi_from_moments, self_consistency
from assay.stats.labels import Labels, load_labels

__all__ = ["MAX_SAMPLED_TRACES", "calibrate", "calibrate_command"]

MAX_SAMPLED_TRACES = 200_000


def _sample_verdicts(result: Mapping[str, Any], threshold: float) -> list[str]:
    """The verdicts of a result's own samples (``metadata.samples``: scores or result dicts)."""
    samples = (result.get("metadata") or {}).get("samples")
    if not isinstance(samples, list):
        return []
    out = []
    for s in samples:
        score = s.get("score") if isinstance(s, Mapping) else s
        if isinstance(score, int | float) and not isinstance(score, bool):
            out.append("pass" if score >= threshold else "fail")
        elif isinstance(score, str):
            out.append(human_label(score, threshold)[0])
    return out


def _verdict(result: Mapping[str, Any], threshold: float) -> str | None:
    if result.get("error"):
        return None
    score = result.get("score")
    if isinstance(score, int | float) and not isinstance(score, bool):
        return "pass" if score >= threshold else "fail"
    return None if result.get("value") is None else str(result.get("value"))


def calibrate(
    results: str,
    labels: str | Labels,
    *,
    samples: int | None = None,
    correct: bool = False,
    level: float = 0.95,
) -> dict[str, Any]:
    """The calibration report of every result key named in ``labels`` (a path or loaded labels)."""
    table = load_labels(labels) if isinstance(labels, str) else labels
    info = read_run_info(results)
    thresholds = info.thresholds()
    keys = sorted({k for per_trace in table.values() for k in per_trace})
    pairs = {k: CalibrationPairs(k, threshold=thresholds_for(thresholds, k)) for k in keys}
    seen: set[tuple[str, str]] = set()
    sums = {k: [0, 0.0, 0.0] for k in keys}
    sampled: dict[str, dict[str, list[str]]] = {k: {} for k in keys}
    for row in iter_rows(info.store):
        trace_id = str(row.get("trace_id"))
        row_results = row.get("results")
        if not isinstance(row_results, dict):
            continue
        mine = table.get(trace_id)
        for key in keys:
            result = row_results.get(key)
            if not isinstance(result, dict):
                continue
            threshold = pairs[key].threshold
            if mine is not None and key in mine and (trace_id, key) not in seen:
                pairs[key].add(mine[key], result)
                seen.add((trace_id, key))
            score = result.get("score")
            if correct and isinstance(score, int | float) and not isinstance(score, bool) and not result.get("error"):
                s = sums[key]
                s[0] += 1
                s[1] += float(score)
                s[2] += float(score) ** 2
            if samples:
                by_trace = sampled[key]
                verdicts = _sample_verdicts(result, threshold)
                if not verdicts and (v := _verdict(result, threshold)) is not None:
                    verdicts = [v]
                if trace_id in by_trace:
                    by_trace[trace_id].extend(verdicts)
                elif len(by_trace) < MAX_SAMPLED_TRACES:
                    by_trace[trace_id] = verdicts
    labelled_traces = set(table)
    found = {t for t, _ in seen}
    out: dict[str, Any] = {
        "results": info.location,
        "labels": labels if isinstance(labels, str) else None,
        "labelled_traces": len(labelled_traces),
        "missing_traces": len(labelled_traces - found),
        "keys": {},
    }
    for key in keys:
        rep = pairs[key].report()
        if samples:
            verdict_lists = [v[:samples] for v in sampled[key].values() if len(v) >= samples]
            rep["self_consistency"] = {"samples": samples, **self_consistency(verdict_lists)}
        if correct:
            n, total, sq = sums[key]
            rep["corrected"] = ppi_from_moments(int(n), total, sq, pairs[key].residuals(), level)
        out["keys"][key] = rep
    return out


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def print_calibration(report: Mapping[str, Any]) -> None:
    """The report as terminal tables."""
    from rich.markup import escape
    from rich.table import Table

    from assay.report.terminal import console, plain, safe

    console.print(
        f"[bold]calibrate[/bold] {escape(safe(report['results']))} against "
        f"{escape(safe(report.get('labels') or 'labels'))}: "
        f"{report['labelled_traces']:,} labelled traces, {report['missing_traces']:,} not in the run"
    )
    table = Table(title="judge vs human labels", title_justify="left")
    cols = ("result key", "n", "agreement", "kappa", "base rate", "judge rate", "spearman", "MAE")
    for col in (*cols, "self-consistency", "corrected mean [CI]"):
        table.add_column(col, justify="left" if col == "result key" else "right", no_wrap=col == "result key")
    for key, r in report["keys"].items():
        sc = (r.get("self_consistency") or {}).get("rate")
        corr = r.get("corrected")
        corr_text = "-" if not corr else f"{corr['estimate']:.3f} [{corr['ci'][0]:.3f}, {corr['ci'][1]:.3f}]"
        table.add_row(
            plain(key),
            f"{r['n']:,}",
            _fmt(r.get("agreement")),
            _fmt(r.get("kappa")),
            _fmt(r.get("base_rate")),
            _fmt(r.get("judge_rate")),
            _fmt(r.get("spearman")),
            _fmt(r.get("mae")),
            _fmt(sc),
            corr_text,
        )
    console.print(table)
    for key, r in report["keys"].items():
        conf = r.get("confusion")
        if not conf:
            continue
        ct = Table(title=plain(f"{key}: confusion (rows: human, columns: judge)"), title_justify="left")
        ct.add_column("human \\ judge")
        for label in conf["labels"]:
            ct.add_column(plain(label), justify="right")
        for label, counts in zip(conf["labels"], conf["matrix"], strict=True):
            ct.add_row(plain(label), *(f"{c:,}" for c in counts))
        console.print(ct)


def calibrate_command(
    results: str,
    labels: str,
    *,
    json_out: bool = False,
    samples: int | None = None,
    correct: bool = False,
    min_kappa: float | None = None,
) -> int:
    """Print the calibration report (``json_out``: one JSON object on stdout, nothing else) and
    return the exit code: 3 when ``min_kappa`` is given and a key's kappa is below it (or undefined)."""
    try:
        report = calibrate(results, labels, samples=samples, correct=correct)
    finally:
        close_stores()
    failed = []
    if min_kappa is not None:
        for key, r in report["keys"].items():
            kappa = r.get("kappa")
            if kappa is None or kappa < min_kappa:
                failed.append(f"{key}: kappa {_fmt(kappa)} < min_kappa {min_kappa:g}")
    report["messages"] = failed
    report["exit_code"] = 3 if failed else 0
    if json_out:
        sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
    else:
        print_calibration(report)
        for m in failed:
            print(f"assay: {m}", file=sys.stderr)
    return int(report["exit_code"])
