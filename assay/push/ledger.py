"""The push ledger: what each target was sent, in SQLite in the state dir.

One row per (target, item id) with the outcome (``delivered``, ``already_there``, ``rejected``
and the platform's message). An item is recorded once its answer is read, so a push killed at
any point resends at most the items in flight (the deterministic ids make that harmless) and a
push with nothing new sends nothing. Several pushes may share the file (WAL, short transactions).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from assay.judges.state_file import use_wal

__all__ = ["PushLedger"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pushed (
    target TEXT NOT NULL,
    id TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT,
    trace_id TEXT,
    key TEXT,
    PRIMARY KEY (target, id)
) WITHOUT ROWID
"""


class PushLedger:
    """``<state_dir>/push/ledger.sqlite``."""

    def __init__(self, state_dir: str | Path) -> None:
        path = Path(state_dir) / "push" / "ledger.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        use_wal(self._db)
        self._db.execute(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def known(self, target: str, ids: Sequence[str]) -> dict[str, tuple[str, str | None]]:
        """The recorded outcome of each of ``ids`` that has one: ``id → (status, message)``."""
        out: dict[str, tuple[str, str | None]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT id, status, message FROM pushed WHERE target = ? AND id IN ({marks})"
            for id_, status, message in self._db.execute(sql, (target, *chunk)):
                out[id_] = (status, message)
        return out

    def record(self, target: str, rows: Iterable[tuple[str, str, str | None, str, str]]) -> None:
        """Record outcomes ``(id, status, message, trace_id, key)`` in one transaction."""
        data = [(target, *r) for r in rows]
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                "INSERT OR REPLACE INTO pushed (target, id, status, message, trace_id, key) VALUES (?, ?, ?, ?, ?, ?)",
                data,
            )
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
