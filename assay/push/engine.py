"""Pushing one published output to one target: read its rows, skip what the ledger knows, send
the rest in the target's batches through the judges' limiter, record every answer.

* **pacing**: :class:`~assay.push.pacing.Pacer` at the target's ``rpm`` (its published limit by
  default), a token bucket that catches up the slots a late send missed, within the burst the
  platform allows (``burst_s``); the judges' :class:`~assay.judges.limits.Limits` keeps the
  requests in flight at what the observed latency needs;
* **retries**: 429 honours ``Retry-After`` and holds the pacer (its bucket emptied), 5xx,
  408, timeouts and connection errors back off with full jitter up to ``retries`` attempts, then
  the target is *unreachable* (:class:`~assay.exceptions.PushUnreachableError`, exit 1); 401/403
  stops at once (:class:`~assay.exceptions.PushAuthError`, exit 2);
* **outcomes**: each item ends ``delivered``, ``already_there`` or ``rejected`` (a push dead
  letter with the platform's message) in the ledger; items a target cannot address (no trace id,
  no root span id) are ``not_sent``. The counts describe the whole output (ledger included), so a
  second push reports the same numbers and ``sent`` 0.

Rows are read by the caller's iterator (in a worker thread, a chunk at a time): the engine never
sees where the output lives.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from assay.exceptions import PushAuthError, PushUnreachableError
from assay.judges.limits import Limits
from assay.judges.retry import full_jitter, is_retryable_status, retry_delay
from assay.push.base import ItemOutcome, PushItem, PushTarget, SplitBatch, items_of_row
from assay.push.ledger import PushLedger
from assay.push.pacing import Pacer

__all__ = ["TargetReport", "push_target"]

ROWS_PER_CHUNK = 1000
#: Sender tasks per target; how many requests are really in flight is the limiter's cap.
SENDERS = 64
#: How often the answers read are written to the ledger (in one transaction, off the loop).
RECORD_EVERY_S = 0.5
#: 429s a batch may meet before the target counts as unreachable (they slow the pacer, not the budget).
MAX_RATE_LIMITED = 50


@dataclass
class TargetReport:
    """What a push did for one target: the ``push.<name>`` section of ``_SUMMARY.json``."""

    name: str
    delivered: int = 0
    already_there: int = 0
    rejected: int = 0
    not_sent: int = 0
    sent: int = 0
    """Items sent by this push (0 when nothing was new)."""
    requests: int = 0
    rate_limited_429: int = 0
    retries: int = 0
    status: str = "ok"
    """ok | unauthorized | unreachable."""
    error: str | None = None
    not_sent_reasons: Counter[str] = field(default_factory=Counter)
    dead: list[dict[str, Any]] = field(default_factory=list)
    wall_time_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "delivered": self.delivered,
            "already_there": self.already_there,
            "rejected": self.rejected,
            "not_sent": self.not_sent,
            "status": self.status,
            "sent": self.sent,
            "requests": self.requests,
            "rate_limited_429": self.rate_limited_429,
            "retries": self.retries,
            "wall_time_s": round(self.wall_time_s, 3),
        }
        if self.not_sent_reasons:
            out["not_sent_reasons"] = dict(self.not_sent_reasons)
        if self.error:
            out["error"] = self.error
        return out

    def count(self, item: PushItem, status: str, message: str | None) -> None:
        if status == "delivered":
            self.delivered += 1
        elif status == "already_there":
            self.already_there += 1
        else:
            self.rejected += 1
            self.dead.append(
                {
                    "target": self.name,
                    "trace_id": item.trace_id,
                    "key": item.key,
                    "identity": item.identity,
                    "id": str(item.id),
                    "message": message,
                }
            )


class _Sender:
    def __init__(self, target: PushTarget, ledger: PushLedger, report: TargetReport, session: Any) -> None:
        self.target = target
        self.ledger = ledger
        self.report = report
        self.session = session
        self.unrecorded: list[tuple[str, str, str | None, str, str]] = []
        self._writer = anyio.CapacityLimiter(1)
        self.pacer = Pacer(target.rpm, window_s=target.params.burst_s)
        # in flight only: the pacer keeps the rate
        self.limits = Limits(max_concurrency=target.params.max_concurrency, rps=None, tpm=None, adaptive=False)

    async def send(self, items: list[PushItem]) -> None:
        import aiohttp

        target, report = self.target, self.report
        failures = limited = 0
        while True:
            req = target.request(items)
            error: str | None = None
            async with self.limits.slot(0):
                await self.pacer.wait()
                started = time.monotonic()
                report.requests += 1
                try:
                    async with self.session.request(req.method, req.url, headers=dict(req.headers), data=req.body) as r:
                        status, headers, body = r.status, r.headers, await r.read()
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    status, headers, body = 0, {}, b""
                    error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if status in (401, 403):
                raise PushAuthError(f"push {target.describe()}: the key was refused (HTTP {status})")
            if status == 429:
                report.rate_limited_429 += 1
                limited += 1
                if limited > MAX_RATE_LIMITED:
                    raise PushUnreachableError(f"push {target.describe()}: still rate limited after {limited} tries")
                hint = retry_delay(headers)
                wait = self.pacer.on_rate_limited(hint)
                await anyio.sleep(wait if hint is not None else max(wait, full_jitter(limited)))
                continue
            if status == 0 or is_retryable_status(status):
                failures += 1
                if failures > target.params.retries:
                    why = error or f"HTTP {status}"
                    raise PushUnreachableError(
                        f"push {target.describe()}: unreachable after {failures} attempts ({why})"
                    )
                report.retries += 1
                await anyio.sleep(full_jitter(failures))
                continue
            self.limits.on_answer(time.monotonic() - started)
            break
        try:
            outcomes = target.outcomes(items, status, body)
        except SplitBatch:  # halve: a body too large fits, and one refused item is found in log2(n) requests
            half = len(items) // 2
            await self.send(items[:half])
            await self.send(items[half:])
            return
        self.settle(outcomes)

    def settle(self, outcomes: list[ItemOutcome]) -> None:
        self.unrecorded.extend((str(o.item.id), o.status, o.message, o.item.trace_id, o.item.key) for o in outcomes)
        self.report.sent += len(outcomes)
        for o in outcomes:
            self.report.count(o.item, o.status, o.message)

    async def record(self) -> None:
        """Write the answers read so far to the ledger, off the event loop (the pacer's sends must
        not wait for a disk). A kill loses at most the last interval's records: those items are
        sent again and the platform keeps them once (their ids are deterministic).

        Shielded: the periodic writer is cancelled when the push ends, and a cancel that reached it
        between taking the rows and writing them lost them (the next push sent them again)."""
        with anyio.CancelScope(shield=True):
            rows, self.unrecorded = self.unrecorded, []
            if rows:
                await anyio.to_thread.run_sync(self.ledger.record, self.target.ledger_key, rows, limiter=self._writer)

    async def record_every(self, interval: float) -> None:
        while True:
            await anyio.sleep(interval)
            await self.record()


async def _produce(
    target: PushTarget,
    rows: Iterator[Mapping[str, Any]],
    when: dt.datetime,
    ledger: PushLedger,
    report: TargetReport,
    send: ObjectSendStream[list[PushItem]],
) -> None:
    """Read rows a chunk at a time (off the loop), count what needs no request, batch the rest."""

    def chunk() -> list[Mapping[str, Any]]:
        out = []
        for row in rows:
            out.append(row)
            if len(out) >= ROWS_PER_CHUNK:
                break
        return out

    size = target.batch_size
    pending: list[PushItem] = []
    seen: set[str] = set()
    async with send:
        while batch := await anyio.to_thread.run_sync(chunk):
            items: list[PushItem] = []
            for row in batch:
                for item in items_of_row(row, target.params, when):
                    why = target.missing(item)
                    if why is not None:
                        report.not_sent += 1
                        report.not_sent_reasons[why] += 1
                    elif str(item.id) not in seen:  # a trace twice in one output is pushed once
                        seen.add(str(item.id))
                        items.append(item)
            known = ledger.known(target.ledger_key, [str(i.id) for i in items])
            for item in items:
                done = known.get(str(item.id))
                if done is not None:
                    report.count(item, done[0], done[1])
                    continue
                pending.append(item)
                if len(pending) >= size:
                    await send.send(pending)
                    pending = []
        if pending:
            await send.send(pending)


async def push_target(
    target: PushTarget,
    rows: Callable[[], Iterator[Mapping[str, Any]]],
    ledger: PushLedger,
    when: dt.datetime,
    *,
    progress: Callable[[TargetReport], None] | None = None,
    progress_interval_s: float = 30.0,
) -> TargetReport:
    """Push the items of ``rows()`` to ``target``; never raises for the target's own failures
    (they become the report's ``status`` and ``error``). ``progress`` is called every
    ``progress_interval_s`` while the push runs (a long push at a platform's limit)."""
    import aiohttp

    report = TargetReport(target.name)
    started = time.monotonic()
    try:
        target.check_keys()
        timeout = aiohttp.ClientTimeout(total=target.params.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=SENDERS)) as session:
            sender = _Sender(target, ledger, report, session)
            send, recv = anyio.create_memory_object_stream[list[PushItem]](SENDERS * 2)
            try:
                async with anyio.create_task_group() as outer:
                    outer.start_soon(sender.record_every, RECORD_EVERY_S)
                    if progress is not None:
                        outer.start_soon(_report_every, report, progress, progress_interval_s, started)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(_produce, target, rows(), when, ledger, report, send)
                        for _ in range(SENDERS):
                            tg.start_soon(_drain, sender, recv.clone())
                        recv.close()
                    outer.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):  # what was answered is recorded, whatever stopped us
                    await sender.record()
    except* PushAuthError as group:
        report.status, report.error = "unauthorized", str(_leaf(group))
    except* PushUnreachableError as group:
        if report.status == "ok":
            report.status, report.error = "unreachable", str(_leaf(group))
    report.wall_time_s = time.monotonic() - started
    return report


async def _report_every(
    report: TargetReport, progress: Callable[[TargetReport], None], interval: float, started: float
) -> None:
    while True:
        await anyio.sleep(interval)
        report.wall_time_s = time.monotonic() - started
        progress(report)


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _drain(sender: _Sender, recv: ObjectReceiveStream[list[PushItem]]) -> None:
    async with recv:
        async for batch in recv:
            await sender.send(batch)
