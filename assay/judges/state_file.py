"""A SQLite state file (the batch ledger, the judge cache) that is not a database any more.

Garbage over the file, a truncated copy, a disk that lost pages: SQLite answers
``file is not a database`` or ``database disk image is malformed`` with no path. Those two become
:class:`CorruptStateFile`, one line naming the file and what to do (exit 2: a retry cannot help,
a person moves the file aside).

>>> import sqlite3
>>> is_corrupt(sqlite3.DatabaseError("file is not a database"))
True
>>> is_corrupt(sqlite3.OperationalError("database is locked"))
False
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from assay.exceptions import ConfigError

#: SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes).
_CORRUPT_CODES = frozenset({11, 26})


class CorruptStateFile(ConfigError):
    """A state file of the run is not a readable SQLite database."""


def is_corrupt(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file itself is damaged (not locked, not full)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _CORRUPT_CODES:
        return True
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


def corrupt(what: str, path: Path, exc: BaseException, consequence: str) -> CorruptStateFile:
    """The one-line error of a damaged state file: which file, what SQLite said, what to do."""
    return CorruptStateFile(
        f"{what} {path} is damaged ({exc}): move it aside (mv {path} {path}.corrupt) and run the same "
        f"command again; {consequence}"
    )


def use_wal(conn: sqlite3.Connection, synchronous: str = "NORMAL", patience_s: float = 30.0) -> None:
    """Put ``conn``'s file in WAL mode (and set ``synchronous``). Switching the journal mode takes
    a lock that SQLite's busy timeout does not wait for: processes opening one new state file at
    the same moment (``--workers N``, Ray actors) saw "database is locked". That is retried here for
    up to ``patience_s``; any other error is raised at once."""
    deadline = time.monotonic() + patience_s
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() >= deadline:
                raise
            time.sleep(delay)
            delay = min(2 * delay, 0.25)
    conn.execute(f"PRAGMA synchronous={synchronous}")
