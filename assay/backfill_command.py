"""``assay backfill RUNFILE --from D --to D``: every day of a range scored at the price of what is
missing (``docs/backfill.md``).

1. **Preview** (nothing is spent): per day, what its published output already holds (the ledger,
   :mod:`assay.pipeline.ledger`), what is left to score per key, the judge calls after sampling,
   their tokens and cost at the real-time and at the batch price, and the rows a shrunken input
   drops (:func:`assay.pipeline.backfill.plan_day`). ``--dry-run`` stops there (``--json``: as
   JSON); ``--max-cost-usd`` refuses to start above it.
2. **Days**: a day with nothing left is not run (its verdict is taken again from its summary under
   the run file's gates); the others run ``assay run RUNFILE --ds D`` (same locks, checkpoints,
   batch rounds, push), ``--parallel-days`` at a time, each with the run file's workers. A kill
   of this process stops the days it started (they save their checkpoints); the same command
   then continues: published days are not redone, a half-scored day resumes.
3. **Verdict**: ``_BACKFILL.json`` beside the days' summaries (each day's status, pairs kept,
   scored and dropped, calls, cost) and the exit code of the worst day (75 while a batch judge's
   batches are pending: run the same command again to collect them).
"""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import orjson

from assay.config import RunConfig, load_run_file
from assay.exceptions import EXIT_BUDGET, EXIT_INFRA, EXIT_LOCKED, EXIT_PENDING, AssayError, ConfigError
from assay.pipeline.backfill import (
    DayPlan,
    backfill_location,
    day_verdict_from_summary,
    days_between,
    plan_day,
    shared_ledger_path,
    worst,
    write_backfill,
)
from assay.pipeline.batch_run import has_batch_judges, shared_batch_phase
from assay.pipeline.ledger import published_summary

__all__ = ["BackfillOptions", "backfill", "preview", "print_preview"]

_STATUS_OF_EXIT = {0: "ok", 3: "gate_failed", 4: "dead_letters", 5: "budget", 75: "pending", 130: "interrupted"}


@dataclass
class BackfillOptions:
    """What the command line says."""

    run_file: Path
    start: str
    end: str
    parallel_days: int = 1
    dry_run: bool = False
    as_json: bool = False
    max_cost_usd: float | None = None
    sets: list[str] = field(default_factory=list)
    quiet: bool = False
    echo: Callable[[str], None] = print


def _configs(opts: BackfillOptions) -> list[RunConfig]:
    return [load_run_file(opts.run_file, ds=d, sets=opts.sets) for d in days_between(opts.start, opts.end)]


async def preview(configs: Sequence[RunConfig], origin: str, parallel: int) -> list[DayPlan]:
    """Every day's plan, ``parallel`` days at a time."""
    plans: list[DayPlan | None] = [None] * len(configs)
    limiter = anyio.CapacityLimiter(max(1, parallel))

    async def one(i: int) -> None:
        async with limiter:
            plans[i] = await plan_day(configs[i], origin)

    async with anyio.create_task_group() as tg:
        for i in range(len(configs)):
            tg.start_soon(one, i)
    return [p for p in plans if p is not None]


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("traces", "kept", "to_score", "stale", "dropped", "calls", "input_tokens", "output_tokens")
    out: dict[str, Any] = {k: sum(int(r.get(k, 0)) for r in rows) for k in keys}
    for k in ("cost_usd", "realtime_cost_usd", "batch_cost_usd"):
        out[k] = round(sum(float(r.get(k, 0.0)) for r in rows), 6)
    per_key: dict[str, dict[str, int]] = {}
    for r in rows:
        for key, c in r.get("per_key", {}).items():
            acc = per_key.setdefault(key, {"kept": 0, "to_score": 0, "stale": 0, "calls": 0})
            for k in ("kept", "to_score", "stale"):
                acc[k] += int(c.get(k, 0))
            acc["calls"] += int(r.get("calls_per_key", {}).get(key, 0))
    out["per_key"] = per_key
    out["days"] = len(rows)
    out["days_done"] = sum(1 for r in rows if r.get("nothing_to_do"))
    return out


def print_preview(rows: list[dict[str, Any]], totals: dict[str, Any], echo: Callable[[str], None]) -> None:
    """The preview as a table: a line per day, then the total and the pairs per key."""
    head = f"{'day':<10} {'traces':>8} {'kept':>9} {'to score':>9} {'stale':>7} {'dropped':>8} {'calls':>8}"
    head += f" {'tokens':>11} {'cost $':>10} {'batch $':>10}  state"
    echo(head)
    for r in rows:
        state = "done" if r["nothing_to_do"] else ("to do" if r["published"] else "new")
        echo(
            f"{r['ds']:<10} {r['traces']:>8,} {r['kept']:>9,} {r['to_score']:>9,} {r['stale']:>7,}"
            f" {r['dropped']:>8,} {r['calls']:>8,} {r['input_tokens'] + r['output_tokens']:>11,}"
            f" {r['realtime_cost_usd']:>10.4f} {r['batch_cost_usd']:>10.4f}  {state}"
        )
    t = totals
    echo(
        f"{'total':<10} {t['traces']:>8,} {t['kept']:>9,} {t['to_score']:>9,} {t['stale']:>7,}"
        f" {t['dropped']:>8,} {t['calls']:>8,} {t['input_tokens'] + t['output_tokens']:>11,}"
        f" {t['realtime_cost_usd']:>10.4f} {t['batch_cost_usd']:>10.4f}  {t['days_done']} of {t['days']} days done"
    )
    for key, c in t["per_key"].items():
        to_score, stale = c["to_score"], c["stale"]
        echo(f"  {key}: {to_score:,} pairs to score ({stale:,} stale), {c['kept']:,} kept, {c['calls']:,} calls")


def _preview_rows(plans: list[DayPlan]) -> list[dict[str, Any]]:
    return [{**p.to_dict(), "nothing_to_do": p.nothing_to_do} for p in plans]


# --- running the days ------------------------------------------------------------------------


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the day's ``assay run`` gets SIGTERM when the backfill dies (even by kill -9): it
    stops gracefully and saves its checkpoint, so the same command resumes it."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


@dataclass
class _Day:
    plan: DayPlan
    config: RunConfig
    state: str = "pending"  # pending | running | finished
    result: dict[str, Any] = field(default_factory=dict)


class _Progress:
    """Days done / running / pending and traces per second on stderr: one line rewritten about once
    a second on a terminal, else a timestamped line every 30 seconds (cron, Airflow logs)."""

    def __init__(self, days: list[_Day], enabled: bool) -> None:
        self.days = days
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.every = 1.0 if self.tty else 30.0
        self.started = time.monotonic()
        self.last = self.started

    def line(self) -> str:
        done = [d for d in self.days if d.state == "finished"]
        running = sum(1 for d in self.days if d.state == "running")
        pending = sum(1 for d in self.days if d.state == "pending")
        traces = sum(d.plan.pairs.traces for d in done if d.result.get("ran"))
        rate = traces / max(time.monotonic() - self.started, 1e-9)
        return f"backfill: {len(done)} done · {running} running · {pending} pending · {rate:,.0f} traces/s"

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < self.every):
            return
        self.last = now
        if self.tty:
            print(f"\r{self.line()}", end="\n" if force else "", file=sys.stderr, flush=True)
        else:
            stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            print(f"{stamp} {self.line()}", file=sys.stderr, flush=True)


async def _run_day(day: _Day, argv: list[str], cwd: Path) -> None:
    day.state = "running"
    started = time.perf_counter()

    def run() -> tuple[int, str]:
        # stderr into a file, not a pipe: a day outliving a killed backfill never writes to a closed pipe
        with tempfile.TemporaryFile() as err:
            proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=_die_with_parent)
            err.seek(0)
            return proc.returncode, err.read().decode("utf-8", "replace")

    code, stderr = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    summary = await anyio.to_thread.run_sync(published_summary, day.config) or {}
    unchanged = "nothing to score" in stderr
    status = _STATUS_OF_EXIT.get(code, "failed")
    if code == EXIT_LOCKED:
        status = "failed"
    totals = summary.get("totals") or {}
    pairs = summary.get("pairs") or {}
    if unchanged or summary.get("run_id") is None or code not in (0, 3, 4):
        pairs = {"kept": day.plan.pairs.to_dict()["kept"], "scored": 0, "dropped": 0} if unchanged else pairs
    errors = [ln.removeprefix("assay: error: ") for ln in stderr.splitlines() if "error:" in ln]
    day.result = {
        "ds": day.plan.ds,
        "status": status,
        "exit_code": code if code >= 0 else EXIT_INFRA,
        "ran": True,
        "pairs": {k: int(pairs.get(k, 0)) for k in ("kept", "scored", "dropped")},
        "calls": int(totals.get("requests", 0)) if not unchanged else 0,
        "cost_usd": float(totals.get("cost_usd", 0.0) or 0.0) if not unchanged else 0.0,
        "wall_time_s": round(time.perf_counter() - started, 3),
        **({"error": errors[-1]} if errors and code not in (0, 3, 4, 75) else {}),
    }
    day.state = "finished"


def _done_day(day: _Day) -> None:
    """A day whose output holds every pair current: not run; its verdict under today's gates."""
    verdict = day_verdict_from_summary(day.config)
    day.result = {
        "ds": day.plan.ds,
        "status": verdict["status"],
        "exit_code": verdict["exit_code"],
        "ran": False,
        "pairs": {"kept": day.plan.pairs.to_dict()["kept"], "scored": 0, "dropped": 0},
        "calls": 0,
        "cost_usd": 0.0,
        "messages": verdict["messages"],
    }
    day.state = "finished"


def _pending_day(day: _Day) -> None:
    """A day whose pairs wait in the backfill's shared batches: not run yet (exit 75)."""
    day.result = {
        "ds": day.plan.ds,
        "status": "pending",
        "exit_code": EXIT_PENDING,
        "ran": False,
        "pairs": {"kept": 0, "scored": 0, "dropped": 0},
        "calls": 0,
        "cost_usd": 0.0,
    }
    day.state = "finished"


async def _run_days(days: list[_Day], opts: BackfillOptions, record: Callable[[], None]) -> None:
    limiter = anyio.CapacityLimiter(max(1, opts.parallel_days))
    progress = _Progress(days, enabled=not opts.quiet)
    run_file = opts.run_file.resolve()
    sets = [a for s in opts.sets for a in ("--set", s)]

    async def one(day: _Day) -> None:
        async with limiter:
            argv = [sys.executable, "-m", "assay.cli", "run", str(run_file), "--ds", day.plan.ds, "-q", *sets]
            await _run_day(day, argv, Path.cwd())
            record()

    async def ticker() -> None:
        while True:
            progress.tick()
            await anyio.sleep(0.5)

    async with anyio.create_task_group() as outer:
        outer.start_soon(ticker)
        async with anyio.create_task_group() as tg:
            for day in days:
                if day.plan.nothing_to_do:
                    _done_day(day)
                    continue
                tg.start_soon(one, day)
        record()
        progress.tick(force=True)
        outer.cancel_scope.cancel()


def backfill(opts: BackfillOptions) -> int:
    """Preview, then (unless ``dry_run``) score every day; the exit code."""
    origin = str(opts.run_file)
    configs = _configs(opts)
    fs, where = backfill_location(configs)
    plans = anyio.run(preview, configs, origin, opts.parallel_days)
    rows = _preview_rows(plans)
    totals = _totals(rows)
    refused = opts.max_cost_usd is not None and totals["cost_usd"] > opts.max_cost_usd
    if opts.as_json:
        opts.echo(orjson.dumps({"days": rows, "total": totals}, option=orjson.OPT_INDENT_2).decode())
    elif not opts.quiet or opts.dry_run:
        print_preview(rows, totals, opts.echo)
    if opts.dry_run:
        return 0
    if refused:
        raise _Refused(
            f"the backfill would cost ${totals['cost_usd']:.4f} (estimated), above --max-cost-usd"
            f" {opts.max_cost_usd}: nothing was started"
        )
    days = [_Day(plan, cfg) for plan, cfg in zip(plans, configs, strict=True)]
    started_at = dt.datetime.now(dt.UTC).isoformat()
    batches_ready = True
    if has_batch_judges(configs[0]):  # the days' missing pairs in shared provider batches first
        todo = [d.config for d in days if not d.plan.nothing_to_do]
        path = shared_ledger_path(configs[0], str(opts.run_file), opts.start, opts.end)
        batches_ready = anyio.run(lambda: shared_batch_phase(todo, path, origin=origin))

    def record() -> None:
        finished = [d.result for d in days if d.state == "finished"]
        status, code = worst(finished)
        data = {
            "run_file": str(opts.run_file),
            "from": opts.start,
            "to": opts.end,
            "started_at": started_at,
            "finished_at": dt.datetime.now(dt.UTC).isoformat(),
            "preview": totals,
            "days": [d.result or {"ds": d.plan.ds, "status": d.state} for d in days],
            "totals": {
                "days": len(days),
                "finished": len(finished),
                "kept": sum(r["pairs"]["kept"] for r in finished),
                "scored": sum(r["pairs"]["scored"] for r in finished),
                "dropped": sum(r["pairs"]["dropped"] for r in finished),
                "calls": sum(r["calls"] for r in finished),
                "cost_usd": round(sum(r["cost_usd"] for r in finished), 6),
            },
            "status": status if len(finished) == len(days) else "running",
            "exit_code": code,
        }
        write_backfill(fs, data)

    try:
        if batches_ready:
            anyio.run(_run_days, days, opts, record)
        else:
            for d in days:
                if d.plan.nothing_to_do:
                    _done_day(d)
                else:
                    _pending_day(d)
            record()
    finally:
        close = getattr(fs, "close", None)
        if close is not None:
            close()
    status, code = worst([d.result for d in days])
    if not opts.quiet:
        for d in days:
            r = d.result
            if r["status"] != "ok":
                extra = f": {r['error']}" if r.get("error") else ""
                print(f"assay: {r['ds']}: {r['status']} (exit {r['exit_code']}){extra}", file=sys.stderr)
        print(f"assay: backfill {status}: {where}/_BACKFILL.json", file=sys.stderr)
    return code


class _Refused(AssayError):
    exit_code = EXIT_BUDGET


def check_parallel(n: int) -> int:
    if n < 1:
        raise ConfigError("--parallel-days: at least 1")
    return n
