"""One judge budget for every process of a run: reservations in SQLite (``<state_dir>/budget.sqlite``).

A :class:`~assay.judges.budget.Budget` alone decides within one process. The writers of
``--workers N`` and the actors of a Ray job are several processes spending one
``limits.budget_usd``; each attaches a :class:`BudgetStore` of the same *scope* (one attempt of
a sharded run, or one Ray run id), and every decision is made in the store, in one
``BEGIN IMMEDIATE`` transaction over everyone's numbers:

* **reserve** — a call's safe amount is held when the scope's spending, plus every holder's
  reservations, plus it, stay within the limit; with nothing held anywhere, the call goes alone
  when its expected cost fits (the single-process rule, now across processes): the run stops
  within one call's cost of the limit whatever the number of processes. Otherwise the caller
  waits (its own calls, or another process's, will finish) or, with nothing held, the budget is
  spent: that limit is recorded as the scope's stop, and a holder that later asks under the same
  (or a lower) limit is refused at once — a Ray job run again under the same cap sends nothing;
* **settle** — a finished call's reservation is dropped and the holder's spending is set;
* **release** — a call that was not made gives its reservation back.

Each process is a *holder* (its host, pid and the pid's start time): the reservations of a
holder whose process is gone (killed, crashed) are reclaimed by the next transaction on that host,
so a crash never keeps part of the budget held; what it spent stays spent. SQLite needs one
machine (WAL uses shared memory): processes of other machines need a budget of their own
(``--shard`` divides it). Spending of earlier attempts enters a scope as :meth:`BudgetStore.seed`.

All SQLite work runs on one thread per store, in order: a settle queued before a reserve is
counted by it, and the event loop never waits on the file's lock.

>>> import tempfile, pathlib, anyio
>>> async def demo():
...     path = pathlib.Path(tempfile.mkdtemp()) / "budget.sqlite"
...     async with BudgetStore(path, "run-1") as a, BudgetStore(path, "run-1") as b:
...         first = await a.reserve(0.6, 0.5, limit=1.0, spent=0.0)
...         second = await b.reserve(0.6, 0.5, limit=1.0, spent=0.0)  # a's 0.6 is held: b waits
...         a.settle(first.ticket, 0.5)  # queued on a's thread: a's next call runs after it
...         _ = await a.totals()
...         third = await b.reserve(0.6, 0.5, limit=1.0, spent=0.0)  # nothing held: it goes alone
...         return first.verdict, second.verdict, third.verdict, round(third.spent_usd, 2)
>>> anyio.run(demo)
('ok', 'wait', 'ok', 0.5)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from assay.judges.state_file import corrupt, is_corrupt
from assay.resources import AsyncResource

T = TypeVar("T")
DEFAULT_FILENAME = "budget.sqlite"
#: Rows of scopes idle this long are removed when a store opens (a scope is one attempt or one Ray run).
IDLE_SCOPE_S = 30 * 86400.0
#: What a person loses when a damaged store is moved aside.
CORRUPT_CONSEQUENCE = "the run's processes start counting the budget again from the checkpoints' spending"
_EPSILON = 1e-12

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS holders (scope TEXT NOT NULL, holder TEXT NOT NULL, host TEXT NOT NULL, "
    "pid INTEGER NOT NULL, started TEXT NOT NULL, spent REAL NOT NULL, updated REAL NOT NULL, "
    "PRIMARY KEY (scope, holder))",
    "CREATE TABLE IF NOT EXISTS reservations (ticket INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL, "
    "holder TEXT NOT NULL, amount REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS reservations_scope ON reservations (scope, holder)",
    "CREATE TABLE IF NOT EXISTS scopes (scope TEXT PRIMARY KEY, stopped_at REAL, updated REAL NOT NULL)",
)

Verdict = Literal["ok", "wait", "over", "closed"]


@dataclass(frozen=True, slots=True)
class Grant:
    """A reserve's answer: ``ok`` (held: ``ticket``), ``wait`` (others hold what is in the way),
    ``over`` (nothing is held and the call's expected cost does not fit), ``closed`` (the scope
    stopped at this limit before); with the scope's spending and reservations at that moment."""

    verdict: Verdict
    ticket: int
    spent_usd: float
    reserved_usd: float
    stopped_at: float | None = None


def process_started(pid: int) -> str:
    """When process ``pid`` started (Linux: its start time in clock ticks; elsewhere ``""``), so a
    reused pid is not taken for the holder that had it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return ""
    return stat.rsplit(b")", 1)[-1].split()[19].decode()


def process_alive(pid: int, started: str) -> bool:
    """Whether process ``pid`` (started at ``started``, see :func:`process_started`) still runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if started and os.path.exists(f"/proc/{pid}"):
        return process_started(pid) == started
    return True


class BudgetStore(AsyncResource):
    """One process's handle on a budget scope shared through SQLite; ``async with`` opens it.

    ``reserve`` is awaited; ``settle`` and ``release`` are queued on the store's thread (they run
    before any later reserve) so a finished call never waits on the file."""

    def __init__(self, path: Path | str, scope: str) -> None:
        self.path = Path(path)
        self.scope = scope
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.holder = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:12]}"
        self.failure: BaseException | None = None
        """The first queued settle/release that failed (raised by the next reserve)."""
        self._started = process_started(self.pid)
        self._conn: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"BudgetStore({str(self.path)!r}, scope={self.scope!r})"

    # -- lifecycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-budget")
        try:
            await self._call(self._open_sync)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    async def aclose(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            await asyncio.wrap_future(executor.submit(self._close_sync))
        finally:
            executor.shutdown(wait=False)

    def _open_sync(self) -> None:
        self._conn = connect(self.path)

    def _close_sync(self) -> None:
        """This holder's reservations go (a call still held here was not made), then the file."""
        if self._conn is None:
            return
        with contextlib.suppress(sqlite3.Error):
            self._write(lambda c: c.execute("DELETE FROM reservations WHERE scope = ? AND holder = ?", self._me()))
        self._conn.close()
        self._conn = None

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            await self.open()
        assert self._executor is not None
        try:
            return await asyncio.wrap_future(self._executor.submit(fn, *args))
        except sqlite3.DatabaseError as exc:
            if is_corrupt(exc):
                raise corrupt("budget store", self.path, exc, CORRUPT_CONSEQUENCE) from None
            raise

    def _queue(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._executor is None:  # closed: its reservations were dropped at close
            return
        future: Future[Any] = self._executor.submit(fn, *args)
        future.add_done_callback(self._note_failure)

    def _note_failure(self, future: Future[Any]) -> None:
        exc = future.exception()
        if exc is not None and self.failure is None:
            self.failure = exc

    # -- the three operations ------------------------------------------------------------------

    async def reserve(self, amount: float, expected: float, *, limit: float, spent: float) -> Grant:
        """Hold ``amount`` for a call expected to cost ``expected`` under ``limit``; ``spent``:
        what this holder has spent so far (its row is set to it)."""
        if self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure
        if self._executor is None:
            await self.open()
        assert self._executor is not None
        future = self._executor.submit(self._reserve_sync, amount, expected, limit, spent)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:  # the reservation may be made all the same: give it back
            future.add_done_callback(self._release_unclaimed)
            raise
        except sqlite3.DatabaseError as exc:
            if is_corrupt(exc):
                raise corrupt("budget store", self.path, exc, CORRUPT_CONSEQUENCE) from None
            raise

    def _release_unclaimed(self, future: Future[Grant]) -> None:
        if not future.cancelled() and future.exception() is None and future.result().verdict == "ok":
            self.release(future.result().ticket)

    def settle(self, ticket: int, spent: float) -> None:
        """The call of ``ticket`` finished: its reservation goes and this holder has spent ``spent``."""

        def apply(c: sqlite3.Connection) -> None:
            c.execute("DELETE FROM reservations WHERE ticket = ?", (ticket,))
            self._set_spent(c, spent)

        self._queue(self._write, apply)

    def release(self, ticket: int) -> None:
        """The call of ``ticket`` was not made (or failed): its reservation goes."""
        self._queue(self._write, lambda c: c.execute("DELETE FROM reservations WHERE ticket = ?", (ticket,)))

    async def totals(self) -> tuple[float, float, float | None]:
        """The scope's spending, its live reservations and the limit it stopped at (None)."""
        return await self._call(self._write, self._totals)

    def seed(self, spent_usd: float, holder: str = "earlier-attempts") -> None:
        """Count ``spent_usd`` in the scope (what earlier attempts of the run spent), as a holder
        that holds nothing (synchronous: before the processes of the scope start)."""
        conn = connect(self.path)
        try:
            with conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(
                    "INSERT OR REPLACE INTO holders VALUES (?, ?, '', 0, '', ?, ?)",
                    (self.scope, holder, spent_usd, time.time()),
                )
        finally:
            conn.close()

    # -- on the store's thread ------------------------------------------------------------------

    def _me(self) -> tuple[str, str]:
        return (self.scope, self.holder)

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in one ``BEGIN IMMEDIATE`` transaction (every process's decisions are serial)."""
        conn = self._conn
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            out = fn(conn)
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.rollback()
            raise
        conn.commit()
        return out

    def _set_spent(self, c: sqlite3.Connection, spent: float) -> None:
        c.execute(
            "INSERT INTO holders VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope, holder) "
            "DO UPDATE SET spent = excluded.spent, updated = excluded.updated",
            (self.scope, self.holder, self.host, self.pid, self._started, spent, time.time()),
        )

    def _reclaim(self, c: sqlite3.Connection) -> None:
        """Drop the reservations of this host's holders whose process is gone."""
        rows = c.execute(
            "SELECT DISTINCT h.holder, h.pid, h.started FROM reservations r JOIN holders h "
            "ON h.scope = r.scope AND h.holder = r.holder WHERE r.scope = ? AND h.host = ? AND h.holder != ?",
            (self.scope, self.host, self.holder),
        ).fetchall()
        for holder, pid, started in rows:
            if not process_alive(int(pid), str(started)):
                c.execute("DELETE FROM reservations WHERE scope = ? AND holder = ?", (self.scope, holder))

    def _totals(self, c: sqlite3.Connection) -> tuple[float, float, float | None]:
        self._reclaim(c)
        spent = c.execute("SELECT COALESCE(SUM(spent), 0) FROM holders WHERE scope = ?", (self.scope,)).fetchone()[0]
        held = c.execute("SELECT COALESCE(SUM(amount), 0) FROM reservations WHERE scope = ?", (self.scope,))
        reserved = held.fetchone()[0]
        row = c.execute("SELECT stopped_at FROM scopes WHERE scope = ?", (self.scope,)).fetchone()
        return float(spent), float(reserved), None if row is None or row[0] is None else float(row[0])

    def _reserve_sync(self, amount: float, expected: float, limit: float, mine: float) -> Grant:
        def decide(c: sqlite3.Connection) -> Grant:
            self._set_spent(c, mine)
            spent, reserved, stopped = self._totals(c)
            if stopped is not None and limit <= stopped + _EPSILON:
                return Grant("closed", 0, spent, reserved, stopped)
            fits = spent + reserved + amount <= limit + _EPSILON
            alone = reserved <= _EPSILON and spent + expected <= limit + _EPSILON
            if fits or alone:
                cur = c.execute(
                    "INSERT INTO reservations (scope, holder, amount) VALUES (?, ?, ?)", (*self._me(), amount)
                )
                return Grant("ok", int(cur.lastrowid or 0), spent, reserved + amount, stopped)
            if reserved > _EPSILON:
                return Grant("wait", 0, spent, reserved, stopped)
            c.execute(
                "INSERT INTO scopes VALUES (?, ?, ?) ON CONFLICT (scope) DO UPDATE SET "
                "stopped_at = MAX(COALESCE(stopped_at, 0), excluded.stopped_at), updated = excluded.updated",
                (self.scope, limit, time.time()),
            )
            return Grant("over", 0, spent, reserved, limit)

        return self._write(decide)


def connect(path: Path) -> sqlite3.Connection:
    """The store's file, created with its tables (WAL; scopes idle for IDLE_SCOPE_S removed);
    a damaged file is one error naming it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            conn.execute(statement)
        cutoff = time.time() - IDLE_SCOPE_S
        stale = [
            r[0] for r in conn.execute("SELECT scope FROM holders GROUP BY scope HAVING MAX(updated) < ?", (cutoff,))
        ]
        for scope in stale:
            for table in ("holders", "reservations", "scopes"):
                conn.execute(f"DELETE FROM {table} WHERE scope = ?", (scope,))
    except sqlite3.DatabaseError as exc:
        conn.close()
        if is_corrupt(exc):
            raise corrupt("budget store", path, exc, CORRUPT_CONSEQUENCE) from None
        raise
    return conn
