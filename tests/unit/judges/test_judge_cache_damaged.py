"""A judge cache file that is not a database any more: one error naming it, never a bare
``sqlite3.DatabaseError`` and never a silent miss that pays again."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import anyio
import pytest

from assay.judges.cache import JudgeCache
from assay.judges.state_file import CorruptStateFile


def test_garbage_over_the_cache_fails_its_opening_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "judge_cache.sqlite"
    path.write_bytes(os.urandom(8192))

    async def go() -> None:
        async with JudgeCache(path):
            pass

    with pytest.raises(CorruptStateFile, match=r"judge cache .*judge_cache\.sqlite is damaged .*mv .*\.corrupt"):
        anyio.run(go)


def test_a_damaged_page_fails_the_read_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "judge_cache.sqlite"

    async def fill() -> None:
        async with JudgeCache(path) as cache:
            await cache.put_many([(f"k{i}", {"text": "x" * 200}) for i in range(500)])

    anyio.run(fill)
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    size = path.stat().st_size
    with path.open("r+b") as f:  # the header and the schema page stay, the table's pages do not
        f.seek(8192)
        f.write(os.urandom(size - 8192))

    async def read() -> None:
        async with JudgeCache(path) as cache:
            for i in range(500):
                await cache.get(f"k{i}")

    with pytest.raises(CorruptStateFile, match=str(path)):
        anyio.run(read)
