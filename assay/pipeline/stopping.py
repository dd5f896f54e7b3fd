"""Stopping a run: the first SIGTERM/SIGINT (or a flag a signal handler set) stops reading, and
in-flight work gets ``limits.grace_period_s`` to drain: the run ends as soon as it has drained (a
source still waiting for input is not waited for), or when the grace period is over (what is still
in flight is abandoned and redone on resume). A second signal abandons in-flight work at once.

What a signal stops is a :class:`Stoppable`: a run's :class:`~assay.pipeline.runner.Pipeline`, or
the rounds of a batch run (:mod:`assay.pipeline.batch_run`), whose collect pass is a pipeline and
whose wait for batches has nothing in flight (it ends at once).
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from typing import Protocol

import anyio

DRAIN_POLL_S = 0.05
"""How often a stopping run looks whether anything is still in flight."""


class Stoppable(Protocol):
    """What a signal stops (:class:`~assay.pipeline.runner.Pipeline` is one)."""

    stop_deadline: float | None
    """``time.monotonic()`` when in-flight work is abandoned, once a signal stops it."""

    @property
    def in_flight(self) -> int | None:
        """Records taken from the source and not yet written; None while nothing is read (a
        batch run waiting for its batches): a stop then ends it at once, with nothing to say."""
        ...

    def stop(self, status: str) -> None:
        """Stop reading (``status``: why, e.g. ``interrupted``); in-flight work drains."""
        ...

    def stop_reading_now(self) -> None:
        """Stop waiting for the source: nothing is in flight."""
        ...


async def watch_signals(pipeline: Stoppable, grace_s: float, cancel: anyio.CancelScope) -> None:
    """SIGTERM/SIGINT: the first stops the run (:func:`stop`), the second abandons it at once."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as tg:
            received = 0
            async for _ in signals:
                received += 1
                if received == 1:
                    tg.start_soon(stop, pipeline, grace_s, cancel)
                else:
                    abandon(pipeline, cancel)
                    tg.cancel_scope.cancel()
                    return


async def watch_flag(
    requested: Callable[[], bool | float | str],
    pipeline: Stoppable,
    grace_s: float,
    cancel: anyio.CancelScope,
    abandon_requested: Callable[[], bool] = lambda: False,
) -> None:
    """The same as :func:`watch_signals` for a process whose own signal handler sets flags (a
    shard worker: its handler stays installed for the life of the process, so a repeated signal
    never meets the default action). A float from ``requested`` is a shorter grace period (a
    worker whose parent died stops at once instead of running beside a restarted run); a string is
    the reason of a stop no signal asked for (another worker failed); ``abandon_requested`` is the
    second signal."""
    # polled: the flags are set by a signal handler, which must not touch the event loop
    while not (flag := requested()):  # noqa: ASYNC110
        await anyio.sleep(0.1)
    grace = min(grace_s, flag) if isinstance(flag, float) else grace_s
    why = flag if isinstance(flag, str) else None
    async with anyio.create_task_group() as tg:
        tg.start_soon(stop, pipeline, grace, cancel, why)
        while not abandon_requested():  # noqa: ASYNC110
            await anyio.sleep(0.1)
        abandon(pipeline, cancel)
        tg.cancel_scope.cancel()


async def stop(pipeline: Stoppable, grace_s: float, cancel: anyio.CancelScope, why: str | None = None) -> None:
    """Stop reading; in-flight work has ``grace_s`` to drain before it is cancelled. Once nothing
    is in flight the source is not waited for: the stages drain and the run ends (the writer
    then cancels this watcher). ``why``: the reason of a stop no signal asked for (the message
    then promises nothing about a second signal)."""
    pipeline.stop("interrupted")
    pipeline.stop_deadline = time.monotonic() + grace_s  # the progress display counts it down
    busy = pipeline.in_flight
    if busy is None:  # nothing is read: nothing to drain
        pipeline.stop_reading_now()
        return
    print(stopping_message(busy, grace_s, why), file=sys.stderr, flush=True)
    with anyio.move_on_after(grace_s):
        # polled: the count moves with every batch the sink writes; no event is worth that cost
        while (pipeline.in_flight or 0) > 0:  # noqa: ASYNC110
            await anyio.sleep(DRAIN_POLL_S)
        pipeline.stop_reading_now()
        await anyio.sleep_forever()
    cancel.cancel()


def stopping_message(in_flight: int, grace_s: float, why: str | None = None) -> str:
    """What a stopping run says: after a signal, that a second one abandons the in-flight work;
    after a stop no signal asked for, why it stops.

    >>> stopping_message(3, 30, "another worker failed").split(";")[0]
    'assay: stopping (another worker failed): reading no more'
    >>> "second signal" in stopping_message(3, 30, "another worker failed"), "second signal" in stopping_message(3, 30)
    (False, True)
    """
    head = "assay: stopping" if why is None else f"assay: stopping ({why})"
    tail = "; a second signal abandons them now)" if why is None else ")"
    return (
        f"{head}: reading no more; finishing {in_flight:,} in-flight records"
        f" (grace period {grace_s:g} s, then they are abandoned and redone on resume{tail}"
    )


def abandon(pipeline: Stoppable, cancel: anyio.CancelScope) -> None:
    """A second signal: cancel in-flight work now (its records are redone on resume)."""
    print(
        f"assay: stopping now: abandoning {pipeline.in_flight or 0:,} in-flight records (redone on resume)",
        file=sys.stderr,
        flush=True,
    )
    cancel.cancel()


__all__ = ["Stoppable", "abandon", "stop", "stopping_message", "watch_flag", "watch_signals"]
