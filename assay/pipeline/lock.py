"""A run lock: two invocations of the same run (run file, ``--ds``, shard) never overlap.

cron starts ``assay run nightly.yaml --ds …`` at a fixed time whether or not last night's run is
still going; an Airflow retry can start while a zombie attempt still writes. :class:`RunLock`
takes an exclusive ``fcntl.flock`` on a lock file in the run's state dir and writes the holder's
pid, host and start time into it (for the message the second invocation prints).

* The kernel releases a flock when its process dies, however it dies (kill -9 included), so a
  crashed run never blocks the next one: a lock file left behind by a killed run is simply taken
  over, and the takeover is reported (:attr:`RunLock.stale`).
* The file is removed on release. A process that opened the file just before it was removed
  would lock an orphaned inode, so after locking, the holder checks that the path still names the
  file it locked, and starts over when it does not.

Usage::

    with RunLock(".assay", RunLock.key_for("nightly.yaml", "2026-11-21", None), wait_s=0):
        ...  # RunLockedError (exit code 6) when another run holds it

flock is advisory and local to one machine (and unreliable on some network filesystems): runs of
the same shard on two machines are kept apart by the scheduler, not by this lock.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import orjson

from assay.exceptions import RunLockedError
from assay.paths import safe_join

_POLL_S = 0.2


class RunLock:
    """An exclusive, process-death-safe lock on one run (see the module docstring).

    ``wait_s``: 0 fails at once when the lock is held; a number waits up to that many seconds;
    ``None`` waits as long as it takes.
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        key: str,
        *,
        wait_s: float | None = 0.0,
        on_wait: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.key = key
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        self.path = safe_join(Path(state_dir), "locks", f"run-{digest}.lock")
        self.wait_s = wait_s
        self.on_wait = on_wait
        self.stale: dict[str, Any] | None = None
        """The holder recorded in a lock file left behind by a run that died (after acquire)."""
        self._fd: int | None = None

    @staticmethod
    def key_for(run_file: str | os.PathLike[str], ds: str | None, shard: tuple[int, int] | None) -> str:
        """The lock key of ``assay run RUN_FILE --ds DS [--shard i/N]``: shards of one run don't
        exclude each other (Airflow runs them side by side); the same shard twice does."""
        where = os.path.realpath(run_file)
        return f"{where}|ds={ds or '-'}|shard={'-' if shard is None else f'{shard[0]}/{shard[1]}'}"

    def holder(self) -> dict[str, Any] | None:
        """What the current (or last) holder wrote into the lock file, if anything readable."""
        try:
            data = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def acquire(self) -> None:
        """Take the lock, waiting up to ``wait_s``; raise :class:`RunLockedError` when it stays held."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = None if self.wait_s is None else time.monotonic() + self.wait_s
        told = False
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                holder = self.holder()
                if deadline is not None and time.monotonic() >= deadline:
                    raise RunLockedError(self._busy_message(holder)) from None
                if not told and self.on_wait is not None:
                    self.on_wait(holder or {})
                    told = True
                # flock has no timeout; a short poll keeps --wait-lock bounded and interruptible
                time.sleep(_POLL_S)
                continue
            if not self._still_ours(fd):
                os.close(fd)  # the file was removed (and maybe recreated) between open and flock
                continue
            self._fd = fd
            self._take_over(fd)
            return

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(fd)

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def _still_ours(self, fd: int) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)

    def _take_over(self, fd: int) -> None:
        old = os.read(fd, 65536)
        if old.strip():
            # a holder that released normally removes the file: content means it died holding it
            try:
                data = orjson.loads(old)
            except orjson.JSONDecodeError:
                data = {"unreadable": old[:200].decode(errors="replace")}
            self.stale = data if isinstance(data, dict) else {"unreadable": str(data)[:200]}
        me = {
            "key": self.key,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(me) + b"\n", 0)
        os.fsync(fd)

    def _busy_message(self, holder: dict[str, Any] | None) -> str:
        who = (
            f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('started_at')}"
            if holder
            else "another process"
        )
        waited = "" if not self.wait_s else f" (waited {self.wait_s:g} s)"
        return (
            f"this run is already running: {who}{waited}; lock file {self.path}. "
            "Pass --wait-lock SECONDS to wait for it to finish."
        )
