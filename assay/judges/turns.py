"""Whose turn it is: the waiting line in front of an endpoint's in-flight cap and its pacer.

:class:`TurnQueue` is a semaphore that serves its waiters by priority, then in arrival order. The
endpoint gives retries (a 500, a timeout) and hedges priority :data:`RETRY` and first attempts
:data:`FIRST`: a retry is the last piece of work a batch of traces waits for, so sending it
behind every trace queued since (seconds at a high rate) holds its whole batch for that long,
and the run with it. New sends are not starved: retries are a few percent of the sends.

>>> import anyio
>>> from anyio import wait_all_tasks_blocked
>>> async def demo():
...     gate, order = TurnQueue(1), []
...     async def one(name, priority):
...         await gate.acquire(priority)
...         order.append(name)
...         gate.release()
...     await gate.acquire(FIRST)  # held: the others queue
...     async with anyio.create_task_group() as tg:
...         for name, priority in (("new-1", FIRST), ("retry", RETRY), ("new-2", FIRST)):
...             tg.start_soon(one, name, priority)
...             await wait_all_tasks_blocked()  # queued in this order
...         gate.release()
...     return order
>>> anyio.run(demo)
['retry', 'new-1', 'new-2']
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel

#: Priorities: lower is served first.
RETRY = 0
FIRST = 1


class TurnQueue:
    """A semaphore of ``total`` places whose waiters are served by (priority, arrival)."""

    def __init__(self, total: int) -> None:
        self._total = total
        self.borrowed = 0
        self._waiters: list[tuple[int, int, anyio.Event]] = []
        self._arrivals = itertools.count()

    @property
    def total(self) -> int:
        return self._total

    @total.setter
    def total(self, value: int) -> None:
        self._total = value
        self._grant()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, priority: int = FIRST) -> None:
        """Wait for a place (a cancelled waiter leaves the line, or hands back a place granted)."""
        if self.borrowed < self._total and not self._waiters:
            self.borrowed += 1
            await anyio.lowlevel.checkpoint()
            return
        entry = (priority, next(self._arrivals), anyio.Event())
        heapq.heappush(self._waiters, entry)
        try:
            await entry[2].wait()
        except BaseException:
            if entry[2].is_set():
                self.release()  # granted as the cancellation came: hand it on
            else:
                self._waiters.remove(entry)
                heapq.heapify(self._waiters)
            raise

    @asynccontextmanager
    async def turn(self, priority: int = FIRST) -> AsyncIterator[None]:
        """``async with queue.turn(priority):`` holds a place for the block."""
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()

    def release(self) -> None:
        self.borrowed -= 1
        self._grant()

    def _grant(self) -> None:
        while self._waiters and self.borrowed < self._total:
            _, _, event = heapq.heappop(self._waiters)
            self.borrowed += 1
            event.set()
