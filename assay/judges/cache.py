"""A content-addressed cache of judge answers in SQLite (``<state_dir>/judge_cache.sqlite``).

The key is the SHA-256 of the provider, the model, the temperature, the seed and the full request
body as sent (messages, schema, every option), so a rerun or a resumed run over the same traces
with the same configuration makes no calls at all, while any change to the prompt or the settings
misses. Only successful answers are stored; errors never are. Entries older than ``ttl_s`` are
ignored (and overwritten by the next answer).

All SQLite work happens on one dedicated thread (one connection, requests queued), so the event
loop never blocks on disk and any number of concurrent tasks may use the cache. WAL mode lets
several worker processes share the file.

>>> import tempfile, anyio, pathlib
>>> async def demo():
...     async with JudgeCache(pathlib.Path(tempfile.mkdtemp()) / "c.sqlite") as cache:
...         key = cache_key("openai", "m", {"messages": []}, temperature=0.0, seed=None)
...         await cache.put(key, {"text": "ok"})
...         return await cache.get(key)
>>> anyio.run(demo)
{'text': 'ok'}
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import orjson

from assay.judges.state_file import corrupt, is_corrupt, use_wal
from assay.resources import AsyncResource

T = TypeVar("T")
#: What a person loses when a damaged cache is moved aside.
CORRUPT_CONSEQUENCE = (
    "answers of finished batches (mode: batch) are downloaded again from the provider, "
    "other judge answers are asked (and paid) again"
)
CACHE_FORMAT = 1
DEFAULT_FILENAME = "judge_cache.sqlite"


def cache_key(
    provider: str, model: str, body: dict[str, Any], *, temperature: float, seed: int | None, sample: int = 0
) -> str:
    """The cache key of a request; ``sample`` > 0 (one of ``samples: k``) keys another answer to
    the same body (sample 0 keeps the key it always had)."""
    material: dict[str, Any] = {
        "v": CACHE_FORMAT,
        "provider": provider,
        "model": model,
        "temperature": temperature,
        "seed": seed,
        "body": body,
    }
    if sample:
        material["sample"] = sample
    return hashlib.sha256(orjson.dumps(material, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()


class JudgeCache(AsyncResource):
    """SQLite-backed answer cache; ``async with`` opens and closes it."""

    def __init__(self, path: Path, *, ttl_s: float | None = None) -> None:
        self.path = Path(path)
        self.ttl_s = ttl_s
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.write_failed: str | None = None  # why writes stopped (the first failure), if they did
        self._conn: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"JudgeCache({str(self.path)!r}, ttl_s={self.ttl_s})"

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            await self.open()  # a pool used without `async with` opens its cache on first use
        assert self._executor is not None
        return await asyncio.wrap_future(self._executor.submit(fn, *args))

    async def open(self) -> None:
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-judge-cache")
        try:
            await self._run(self._open_sync)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    def _open_sync(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30.0)
        try:
            use_wal(conn)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS judge_cache "
                "(key TEXT PRIMARY KEY, created REAL NOT NULL, value BLOB NOT NULL)"
            )
            conn.commit()
        except sqlite3.DatabaseError as exc:
            conn.close()
            if not is_corrupt(exc):
                raise
            raise corrupt("judge cache", self.path, exc, CORRUPT_CONSEQUENCE) from None
        self._conn = conn

    async def aclose(self) -> None:
        executor = self._executor
        if executor is None:
            return
        try:
            await self._run(self._close_sync)
        finally:
            self._executor = None
            executor.shutdown(wait=False)

    def _close_sync(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _guarded(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the cache's thread; a damaged file becomes one error naming it."""
        try:
            return await self._run(fn, *args)
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise
            raise corrupt("judge cache", self.path, exc, CORRUPT_CONSEQUENCE) from None

    async def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer, or None (missing or older than the TTL)."""
        value = await self._guarded(self._get_sync, key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def _get_sync(self, key: str) -> dict[str, Any] | None:
        assert self._conn is not None
        row = self._conn.execute("SELECT created, value FROM judge_cache WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        created, value = row
        if self.ttl_s is not None and created < time.time() - self.ttl_s:
            return None
        loaded = orjson.loads(value)
        return loaded if isinstance(loaded, dict) else None

    async def put(self, key: str, value: dict[str, Any]) -> None:
        """Store an answer. The first write that fails (a full disk: ``database or disk is full``)
        raises ``sqlite3.OperationalError`` naming the cache file, once; the cache then stores
        nothing more in this run (answers are still served from it)."""
        if self.write_failed is not None:
            return
        try:
            await self._run(self._put_sync, key, orjson.dumps(value))
        except sqlite3.Error as exc:
            if self.write_failed is not None:  # a write queued before the first failure: said already
                return
            self.write_failed = str(exc)
            raise sqlite3.OperationalError(
                f"{self.path}: {exc}; no further judge answers are cached in this run"
            ) from exc
        self.writes += 1

    def _put_sync(self, key: str, blob: bytes) -> None:
        assert self._conn is not None
        try:
            self._conn.execute(
                "INSERT OR REPLACE INTO judge_cache (key, created, value) VALUES (?, ?, ?)",
                (key, time.time(), blob),
            )
            self._conn.commit()
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                self._conn.rollback()
            raise

    async def put_many(self, items: list[tuple[str, dict[str, Any]]]) -> None:
        """Store several answers in one transaction (batch results)."""
        blobs = [(key, orjson.dumps(value)) for key, value in items]
        await self._guarded(self._put_many_sync, blobs)
        self.writes += len(blobs)

    def _put_many_sync(self, blobs: list[tuple[str, bytes]]) -> None:
        assert self._conn is not None
        now = time.time()
        self._conn.executemany(
            "INSERT OR REPLACE INTO judge_cache (key, created, value) VALUES (?, ?, ?)",
            [(key, now, blob) for key, blob in blobs],
        )
        self._conn.commit()

    async def count(self) -> int:
        """Entries stored (expired ones included)."""

        def _count() -> int:
            assert self._conn is not None
            return int(self._conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

        return await self._run(_count)
