"""The durable ledger of a run's batches: SQLite at ``<state_dir>/batches/<run key>.sqlite``.

Two tables. ``lines``: one row per request (``custom_id`` = its judge-cache key) with its body,
estimated tokens, state and attempts; ``batches``: one row per submission with the provider's
batch id, the local input file and the state. A line moves

``queued`` → ``submitted`` (in a batch) → ``done`` (answered: the answer is in the judge cache) or
``retry`` (expired, errored, cancelled: submitted again while ``attempts < max_attempts``) or
``exhausted`` (attempts spent: ``fallback``) or ``invalid`` (the provider rejected the line: an
error result with its message).

**Written before anything is sent**: a submission first records its batch as ``creating`` with its
lines ``submitted`` (one transaction), then creates the batch with the ledger's batch id in the
provider's metadata, then records the provider's id (``open``). A process killed in between leaves
a ``creating`` row, which the next invocation resolves by finding the batch at the provider (or
putting its lines back in the queue when it was never created). Every change is one transaction,
so kill -9 at any moment leaves a consistent ledger.

The bodies of lines stay on disk (not in memory): a night of 10⁷ requests is packed from here.

>>> import tempfile, pathlib
>>> led = Ledger(pathlib.Path(tempfile.mkdtemp()) / "l.sqlite")
>>> led.queue("gpt", [("k1", b'{"model": "m"}', 10)])
1
>>> led.line("k1")["state"]
'queued'
>>> led.close()
"""

from __future__ import annotations

import functools
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import anyio
import anyio.to_thread

from assay.judges.state_file import corrupt, is_corrupt, use_wal

T = TypeVar("T")
P = ParamSpec("P")

#: What a person loses when a damaged ledger is moved aside.
_CORRUPT_CONSEQUENCE = (
    "answers already in the judge cache are reused, but the lines of batches still open at the provider "
    "are submitted (and paid) again"
)


def _guarded(fn: Callable[P, T]) -> Callable[P, T]:
    """A ledger method whose damaged file becomes one error naming it (not a bare DatabaseError)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            ledger = args[0]
            assert isinstance(ledger, Ledger)
            raise corrupt("batch ledger", ledger.path, exc, _CORRUPT_CONSEQUENCE) from None

    return wrapper


QUEUED, SUBMITTED, DONE, RETRY, EXHAUSTED, INVALID = "queued", "submitted", "done", "retry", "exhausted", "invalid"
#: Batch states in the ledger: creating (recorded, maybe not created yet), open (created, not yet
#: collected), collected (its lines are accounted for), refused (the provider would not take it:
#: its lines went back to the queue), cancelled (collected after a cancel).
CREATING, OPEN, COLLECTED, REFUSED = "creating", "open", "collected", "refused"
#: A batch the provider no longer knows (deleted, another workspace or key, a reset), found by a
#: 404 or named by ``assay batches forget``: its unanswered lines were put back to be submitted again.
LOST = "lost"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lines (
    custom_id TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    body BLOB,
    tokens INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    batch TEXT,
    error TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS lines_state ON lines (judge, state);
CREATE INDEX IF NOT EXISTS lines_batch ON lines (batch);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    provider_id TEXT,
    state TEXT NOT NULL,
    provider_state TEXT,
    input_file TEXT,
    lines INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    counts TEXT,
    error TEXT
);
CREATE TABLE IF NOT EXISTS realtime (
    judge TEXT PRIMARY KEY,
    calls INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
"""


class Ledger:
    """The ledger file; sync methods (a lock serializes them), ``call`` runs one off the event loop."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        try:
            use_wal(self._conn, "FULL")
            self._conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            if not is_corrupt(exc):
                raise
            raise corrupt("batch ledger", self.path, exc, _CORRUPT_CONSEQUENCE) from None
        self._lock = threading.Lock()
        self._limiter: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    @_guarded
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread (one at a time), so the loop never waits on disk."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)

    def _tx(self) -> _Tx:
        return _Tx(self)

    # --- lines ---------------------------------------------------------------------------------

    @_guarded
    def line(self, custom_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT custom_id, judge, state, attempts, batch, error FROM lines WHERE custom_id = ?", (custom_id,)
            ).fetchone()
        return dict(row) if row is not None else None

    @_guarded
    def queue(self, judge: str, items: Iterable[tuple[str, bytes, int]]) -> int:
        """Add (custom_id, body, estimated tokens) lines to submit: new ones, and ``done`` ones whose
        answer is no longer in the cache (expired, deleted): how many were queued."""
        with self._tx() as c:
            before = c.total_changes
            c.executemany(
                "INSERT INTO lines (custom_id, judge, body, tokens, state) VALUES (?, ?, ?, ?, 'queued') "
                "ON CONFLICT (custom_id) DO UPDATE SET state = 'queued', body = excluded.body, attempts = 0, "
                "batch = NULL, error = NULL WHERE lines.state = 'done'",
                ((cid, judge, body, tokens) for cid, body, tokens in items),
            )
            return c.total_changes - before

    @_guarded
    def waiting(self, judge: str, max_attempts: int) -> int:
        """Lines of ``judge`` to submit (queued, or to retry with attempts left)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT COUNT(*) FROM lines WHERE judge = ? AND "
                "(state = 'queued' OR (state = 'retry' AND attempts < ?))",
                (judge, max_attempts),
            ).fetchone()
        return int(row[0])

    @_guarded
    def exhaust(self, judge: str, max_attempts: int) -> int:
        """Lines to retry with no attempt left become ``exhausted``; how many."""
        with self._tx() as c:
            cur = c.execute(
                "UPDATE lines SET state = 'exhausted' WHERE judge = ? AND state = 'retry' AND attempts >= ?",
                (judge, max_attempts),
            )
            return cur.rowcount

    def next_lines(
        self, judge: str, max_attempts: int, limit: int, *, page: int = 1000
    ) -> Iterator[tuple[str, bytes, int]]:
        """Up to ``limit`` lines to submit next (queued, or to retry with attempts left), in the
        order they were queued, read ``page`` rows at a time (a batch of 50,000 is never in memory)."""
        after = 0
        given = 0
        while given < limit:
            rows = self._page(judge, after, max_attempts, min(page, limit - given))
            if not rows:
                return
            for r in rows:
                yield r[1], r[2], int(r[3])
            given += len(rows)
            after = int(rows[-1][0])

    @_guarded
    def _page(self, judge: str, after: int, max_attempts: int, n: int) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(
                "SELECT rowid, custom_id, body, tokens FROM lines WHERE judge = ? AND rowid > ? AND "
                "(state = 'queued' OR (state = 'retry' AND attempts < ?)) ORDER BY rowid LIMIT ?",
                (judge, after, max_attempts, n),
            ).fetchall()

    @_guarded
    def mark(self, batch: str, outcomes: Iterable[tuple[str, str, str | None, int, int, float]]) -> None:
        """Record (custom_id, outcome, error, input tokens, output tokens, cost) of lines of ``batch``
        (outcome: done, retry or invalid). Only lines still submitted in that batch change, so
        collecting a batch twice (after a crash) changes nothing."""
        with self._tx() as c:
            c.executemany(
                "UPDATE lines SET state = ?, error = ?, input_tokens = ?, output_tokens = ?, cost_usd = ?, "
                "body = CASE WHEN ? = 'retry' THEN body ELSE NULL END "
                "WHERE custom_id = ? AND batch = ? AND state = 'submitted'",
                ((state, err, tin, tout, cost, state, cid, batch) for cid, state, err, tin, tout, cost in outcomes),
            )

    @_guarded
    def lines_of(self, batch: str) -> list[str]:
        with self._lock:
            rows = self._conn.execute("SELECT custom_id FROM lines WHERE batch = ?", (batch,)).fetchall()
        return [r[0] for r in rows]

    # --- batches -------------------------------------------------------------------------------

    @staticmethod
    def new_batch_id() -> str:
        return "assay-" + uuid.uuid4().hex[:20]

    @_guarded
    def begin_batch(self, batch: str, judge: str, custom_ids: list[str], tokens: int, input_file: str) -> None:
        """Record batch ``batch`` (:meth:`new_batch_id`, it goes into the provider's metadata) as
        about to be created (``creating``; its lines ``submitted``, one more attempt each)."""
        now = time.time()
        with self._tx() as c:
            c.execute(
                "INSERT INTO batches (id, judge, state, input_file, lines, tokens, created, updated) "
                "VALUES (?, ?, 'creating', ?, ?, ?, ?, ?)",
                (batch, judge, input_file, len(custom_ids), tokens, now, now),
            )
            c.executemany(
                "UPDATE lines SET state = 'submitted', batch = ?, attempts = attempts + 1 WHERE custom_id = ?",
                ((batch, cid) for cid in custom_ids),
            )

    @_guarded
    def created(self, batch: str, provider_id: str, provider_state: str) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE batches SET provider_id = ?, state = 'open', provider_state = ?, updated = ? WHERE id = ?",
                (provider_id, provider_state, time.time(), batch),
            )

    @_guarded
    def unsend(self, batch: str, error: str | None = None) -> None:
        """The provider did not take the batch (never created, refused for the enqueued-token quota,
        a 429): its lines go back where they were, the attempt not counted."""
        with self._tx() as c:
            c.execute(
                "UPDATE lines SET state = CASE WHEN attempts > 1 THEN 'retry' ELSE 'queued' END, "
                "attempts = attempts - 1, batch = NULL WHERE batch = ? AND state = 'submitted'",
                (batch,),
            )
            c.execute(
                "UPDATE batches SET state = 'refused', error = ?, updated = ? WHERE id = ?", (error, time.time(), batch)
            )

    @_guarded
    def update_batch(self, batch: str, provider_state: str, counts: str | None, error: str | None = None) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE batches SET provider_state = ?, counts = ?, error = COALESCE(?, error), updated = ? "
                "WHERE id = ?",
                (provider_state, counts, error, time.time(), batch),
            )

    @_guarded
    def collected(self, batch: str, max_attempts: int) -> None:
        """Every line of the batch is accounted for: lines that got no answer at all are retried
        (or exhausted), then the batch is closed."""
        with self._tx() as c:
            c.execute(
                "UPDATE lines SET state = CASE WHEN attempts >= ? THEN 'exhausted' ELSE 'retry' END, "
                "error = COALESCE(error, 'no result for this line in the batch output') "
                "WHERE batch = ? AND state = 'submitted'",
                (max_attempts, batch),
            )
            c.execute(
                "UPDATE lines SET state = 'exhausted' WHERE batch = ? AND state = 'retry' AND attempts >= ?",
                (batch, max_attempts),
            )
            c.execute("UPDATE batches SET state = 'collected', updated = ? WHERE id = ?", (time.time(), batch))

    @_guarded
    def invalidate(self, batch: str, error: str) -> None:
        """The provider rejected the whole batch (validation): its lines are error results with the
        provider's message, not retried blindly."""
        with self._tx() as c:
            c.execute(
                "UPDATE lines SET state = 'invalid', error = ?, body = NULL WHERE batch = ? AND state = 'submitted'",
                (error, batch),
            )
            c.execute(
                "UPDATE batches SET state = 'collected', error = ?, updated = ? WHERE id = ?",
                (error, time.time(), batch),
            )

    @_guarded
    def lose(self, batch: str, max_attempts: int, error: str) -> int:
        """The provider no longer knows ``batch``: it is ``lost``, and its lines without an answer
        go back to be submitted again (their attempt in it counts: ``exhausted`` once attempts are
        spent). Lines already answered keep their answer. How many lines were put back."""
        with self._tx() as c:
            cur = c.execute(
                "UPDATE lines SET state = CASE WHEN attempts >= ? THEN 'exhausted' ELSE 'retry' END, error = ? "
                "WHERE batch = ? AND state = 'submitted'",
                (max_attempts, error, batch),
            )
            c.execute(
                "UPDATE batches SET state = 'lost', error = ?, updated = ? WHERE id = ?", (error, time.time(), batch)
            )
            return cur.rowcount

    @_guarded
    def find_batch(self, batch_id: str) -> dict[str, Any] | None:
        """The batch whose provider id or ledger id is ``batch_id``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT * FROM batches WHERE provider_id = ? OR id = ? ORDER BY created DESC LIMIT 1",
                (batch_id, batch_id),
            ).fetchone()
        return None if row is None else dict(row)

    @_guarded
    def batches(self, *, states: Iterable[str] | None = None, judge: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM batches"
        args: list[Any] = []
        where = []
        if states is not None:
            wanted = list(states)
            where.append(f"state IN ({','.join('?' * len(wanted))})")
            args += wanted
        if judge is not None:
            where.append("judge = ?")
            args.append(judge)
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY created", args).fetchall()
        return [dict(r) for r in rows]

    @_guarded
    def known_provider_ids(self) -> set[str]:
        with self._lock:
            rows = self._conn.execute("SELECT provider_id FROM batches WHERE provider_id IS NOT NULL").fetchall()
        return {r[0] for r in rows}

    @_guarded
    def open_tokens(self, judge: str, *, before: float | None = None) -> int:
        """Estimated tokens of the judge's unfinished batches (against ``max_enqueued_tokens``);
        ``before``: of those created before that time only."""
        with self._lock:
            row = self._conn.execute(
                "SELECT COALESCE(SUM(tokens), 0) FROM batches WHERE judge = ? AND state IN ('creating', 'open') "
                "AND created < ?",
                (judge, before if before is not None else float("inf")),
            ).fetchone()
        return int(row[0])

    # --- accounting ----------------------------------------------------------------------------

    @_guarded
    def counts(self, judge: str | None = None) -> dict[str, int]:
        """Lines per state."""
        sql = "SELECT state, COUNT(*) FROM lines"
        args: tuple[Any, ...] = ()
        if judge is not None:
            sql += " WHERE judge = ?"
            args = (judge,)
        with self._lock:
            rows = self._conn.execute(sql + " GROUP BY state", args).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    @_guarded
    def batch_usage(self) -> dict[str, dict[str, Any]]:
        """Per judge: tokens and cost (at the discount) of every answered batch line."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT judge, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost_usd) FROM lines "
                "WHERE state = 'done' GROUP BY judge"
            ).fetchall()
        return {
            r[0]: {"lines": int(r[1]), "input_tokens": int(r[2]), "output_tokens": int(r[3]), "cost_usd": float(r[4])}
            for r in rows
        }

    @_guarded
    def add_realtime(self, judge: str, calls: int, input_tokens: int, output_tokens: int, cost_usd: float) -> None:
        """Real-time (fallback) spending of a collect pass, kept across invocations."""
        if not calls:
            return
        with self._tx() as c:
            c.execute(
                "INSERT INTO realtime (judge, calls, input_tokens, output_tokens, cost_usd) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(judge) DO UPDATE SET calls = calls + excluded.calls, "
                "input_tokens = input_tokens + excluded.input_tokens, "
                "output_tokens = output_tokens + excluded.output_tokens, cost_usd = cost_usd + excluded.cost_usd",
                (judge, calls, input_tokens, output_tokens, cost_usd),
            )

    @_guarded
    def realtime_usage(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            rows = self._conn.execute("SELECT * FROM realtime").fetchall()
        return {r["judge"]: {k: r[k] for k in ("calls", "input_tokens", "output_tokens", "cost_usd")} for r in rows}

    @_guarded
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT v FROM meta WHERE k = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @_guarded
    def set_meta(self, key: str, value: str | None) -> None:
        with self._tx() as c:
            if value is None:
                c.execute("DELETE FROM meta WHERE k = ?", (key,))
            else:
                c.execute("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)", (key, value))


class _Tx:
    """``with ledger._tx() as conn:``: one IMMEDIATE transaction under the lock."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def __enter__(self) -> sqlite3.Connection:
        self.ledger._lock.acquire()
        try:
            self.ledger._conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.ledger._lock.release()
            raise
        return self.ledger._conn

    def __exit__(self, et: Any, e: Any, tb: Any) -> None:
        try:
            self.ledger._conn.execute("COMMIT" if et is None else "ROLLBACK")
        finally:
            self.ledger._lock.release()
