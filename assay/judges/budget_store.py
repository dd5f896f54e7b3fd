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
import hashlib
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from assay.exceptions import ConfigError
from assay.judges.state_file import corrupt, is_corrupt, use_wal
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
        self._queue(self._settle_sync, ticket, spent)

    def release(self, ticket: int) -> None:
        """The call of ``ticket`` was not made (or failed): its reservation goes."""
        self._queue(self._release_sync, ticket)

    async def totals(self) -> tuple[float, float, float | None]:
        """The scope's spending, its live reservations and the limit it stopped at (None)."""
        return await self._call(self._totals_sync)

    def seed(self, spent_usd: float, holder: str = "earlier-attempts") -> None:
        """Count ``spent_usd`` in the scope (what earlier attempts of the run spent), as a holder
        that holds nothing (synchronous: before the processes of the scope start)."""
        self._seed_sync(spent_usd, holder)

    # -- on the store's thread (SQLite; RedisBudgetStore overrides these) ----------------------

    def _settle_sync(self, ticket: int, spent: float) -> None:
        def apply(c: sqlite3.Connection) -> None:
            c.execute("DELETE FROM reservations WHERE ticket = ?", (ticket,))
            self._set_spent(c, spent)

        self._write(apply)

    def _release_sync(self, ticket: int) -> None:
        self._write(lambda c: c.execute("DELETE FROM reservations WHERE ticket = ?", (ticket,)))

    def _totals_sync(self) -> tuple[float, float, float | None]:
        return self._write(self._totals)

    def _seed_sync(self, spent_usd: float, holder: str) -> None:
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
        use_wal(conn)
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


# KEYS[1]: the scope's key prefix. ARGV: holder, its "host|pid|started", its spending, amount,
# expected, limit, lease (ms), then the holders found dead on the caller's host. Floats travel as
# text (Redis makes Lua numbers integers). Returns {verdict, ticket, spent, reserved, stopped}.
RESERVE_LUA = """
local p = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holder = ARGV[1]
redis.call('HSET', p .. ':holders', holder, ARGV[2])
redis.call('HSET', p .. ':spent', holder, ARGV[3])
redis.call('HSET', p .. ':seen', holder, now)
local dead = {}
for i = 8, #ARGV do dead[ARGV[i]] = true end
local lease = tonumber(ARGV[7])
local seen = redis.call('HGETALL', p .. ':seen')
for i = 1, #seen, 2 do
  if now - tonumber(seen[i + 1]) > lease then dead[seen[i]] = true end
end
local reserved = 0
local res = redis.call('HGETALL', p .. ':res')
for i = 1, #res, 2 do
  local h, a = string.match(res[i + 1], '^(.*)|([^|]*)$')
  if dead[h] then redis.call('HDEL', p .. ':res', res[i]) else reserved = reserved + tonumber(a) end
end
local spent = 0
for _, v in ipairs(redis.call('HVALS', p .. ':spent')) do spent = spent + tonumber(v) end
local stopped = redis.call('GET', p .. ':stopped')
local amount, expected, limit = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local eps = 1e-12
local verdict, ticket = 'wait', 0
if stopped and limit <= tonumber(stopped) + eps then
  verdict = 'closed'
elseif spent + reserved + amount <= limit + eps or (reserved <= eps and spent + expected <= limit + eps) then
  ticket = redis.call('INCR', p .. ':seq')
  redis.call('HSET', p .. ':res', ticket, holder .. '|' .. ARGV[4])
  reserved = reserved + amount
  verdict = 'ok'
elseif reserved <= eps then
  if not stopped or tonumber(stopped) < limit then redis.call('SET', p .. ':stopped', ARGV[6]) end
  stopped = ARGV[6]
  verdict = 'over'
end
for _, k in ipairs({':holders', ':spent', ':seen', ':res', ':seq', ':stopped'}) do
  redis.call('PEXPIRE', p .. k, 2592000000)
end
return {verdict, ticket, string.format('%.17g', spent), string.format('%.17g', reserved), stopped or ''}
"""

# KEYS[1]: prefix. ARGV: ticket (or '' for none), holder, its spending ('' to leave it).
SETTLE_LUA = """
local p = KEYS[1]
local t = redis.call('TIME')
if ARGV[1] ~= '' then redis.call('HDEL', p .. ':res', ARGV[1]) end
if ARGV[3] ~= '' then redis.call('HSET', p .. ':spent', ARGV[2], ARGV[3]) end
redis.call('HSET', p .. ':seen', ARGV[2], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return 1
"""

# KEYS[1]: prefix. ARGV: holder. Drops every reservation of the holder.
DROP_LUA = """
local p = KEYS[1]
local res = redis.call('HGETALL', p .. ':res')
for i = 1, #res, 2 do
  if string.sub(res[i + 1], 1, #ARGV[1] + 1) == ARGV[1] .. '|' then redis.call('HDEL', p .. ':res', res[i]) end
end
return 1
"""

#: A holder on another machine (whose pid cannot be looked at) that has not spoken to the store for
#: this long is taken for dead, its reservations reclaimed (a judge call takes minutes at most).
REDIS_LEASE_S = 600.0


class RedisBudgetStore(BudgetStore):
    """The same budget scope kept in Redis (``rate_store: redis://…``): the processes may run on
    several machines (a Ray cluster). Each decision is one Lua script, run atomically. A holder's
    reservations are reclaimed when its process is gone (looked at on its own host) or when it has
    not spoken to the store for REDIS_LEASE_S (another host). Keys expire 30 days after the last use.
    Needs the Redis client (``pip install 'assay[redis]'``)."""

    def __init__(self, url: str, scope: str) -> None:
        super().__init__(url, scope)
        self.url = url
        digest = hashlib.sha256(scope.encode()).hexdigest()[:16]
        self.prefix = f"assay:budget:{digest}"
        self._client: Any = None
        self._scripts: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"RedisBudgetStore({self.url!r}, scope={self.scope!r})"

    def _open_sync(self) -> None:
        redis = _require_redis()
        self._client = redis.Redis.from_url(self.url)
        self._scripts = {
            name: self._client.register_script(lua)
            for name, lua in (("reserve", RESERVE_LUA), ("settle", SETTLE_LUA), ("drop", DROP_LUA))
        }

    def _close_sync(self) -> None:
        if self._client is None:
            return
        with contextlib.suppress(Exception):
            self._scripts["drop"](keys=[self.prefix], args=[self.holder])
        self._client.close()
        self._client = None

    def _dead_here(self) -> list[str]:
        """The holders of this host whose process is gone."""
        dead = []
        for holder, info in (self._client.hgetall(f"{self.prefix}:holders") or {}).items():
            host, _, rest = info.decode().partition("|")
            pid, _, started = rest.partition("|")
            name = holder.decode()
            if host == self.host and name != self.holder and pid.isdigit() and not process_alive(int(pid), started):
                dead.append(name)
        return dead

    def _reserve_sync(self, amount: float, expected: float, limit: float, mine: float) -> Grant:
        info = f"{self.host}|{self.pid}|{self._started}"
        args = [self.holder, info, repr(mine), repr(amount), repr(expected), repr(limit), int(REDIS_LEASE_S * 1000)]
        verdict, ticket, spent, reserved, stopped = self._scripts["reserve"](
            keys=[self.prefix], args=[*args, *self._dead_here()]
        )
        stop = stopped.decode() if isinstance(stopped, bytes) else str(stopped)
        word = verdict.decode() if isinstance(verdict, bytes) else str(verdict)
        assert word in ("ok", "wait", "over", "closed"), word
        return Grant(
            cast(Verdict, word),
            int(ticket),
            float(spent),
            float(reserved),
            float(stop) if stop else None,
        )

    def _settle_sync(self, ticket: int, spent: float) -> None:
        self._scripts["settle"](keys=[self.prefix], args=[ticket, self.holder, repr(spent)])

    def _release_sync(self, ticket: int) -> None:
        self._scripts["settle"](keys=[self.prefix], args=[ticket, self.holder, ""])

    def _totals_sync(self) -> tuple[float, float, float | None]:
        spent = sum(float(v) for v in (self._client.hvals(f"{self.prefix}:spent") or []))
        reserved = sum(float(v.rsplit(b"|", 1)[1]) for v in (self._client.hvals(f"{self.prefix}:res") or []))
        stopped = self._client.get(f"{self.prefix}:stopped")
        return spent, reserved, None if stopped is None else float(stopped)

    def _seed_sync(self, spent_usd: float, holder: str) -> None:
        redis = _require_redis()
        client = redis.Redis.from_url(self.url)
        try:
            client.hset(f"{self.prefix}:spent", holder, repr(spent_usd))
            client.pexpire(f"{self.prefix}:spent", 2_592_000_000)
        finally:
            client.close()


def _require_redis() -> Any:
    try:
        import redis
    except ImportError as exc:
        raise ConfigError(
            "a budget shared through rate_store needs the Redis client: pip install 'assay[redis]'"
        ) from exc
    return redis


def open_budget_store(location: str | Path, scope: str) -> BudgetStore:
    """The store of a budget scope: in Redis for a ``redis://`` URL, else SQLite at the path."""
    if isinstance(location, str) and location.startswith(("redis://", "rediss://", "unix://")):
        return RedisBudgetStore(location, scope)
    return BudgetStore(location, scope)
