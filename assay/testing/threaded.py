"""Stand-in servers (judge, batch API): :class:`LoopbackServer`, the aiohttp serving both share,
and :class:`ServerThread`, one on a background thread with its own event loop for sync tests,
benchmarks and the CLI: ``with JudgeServerThread() as s: s.url``."""

from __future__ import annotations

import asyncio
import socket
import threading
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

from aiohttp import web

from assay.resources import AsyncResource


class LoopbackServer(AsyncResource):
    """An aiohttp application served on ``host:port`` (port 0: a free one, known after
    :meth:`serve`); ``async with`` starts and stops it; subclasses build the app in ``start``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def open(self) -> None:
        await self.start()

    async def aclose(self) -> None:
        await self.stop()

    async def start(self) -> None:
        raise NotImplementedError

    async def serve(self, app: web.Application) -> None:
        """Serve ``app`` (no access log, no signal handlers of its own)."""
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5.0)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        await web.SockSite(runner, sock, backlog=1024).start()
        self._runner = runner

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


S = TypeVar("S")
"""The server: an async context manager (``async with``) that serves at its ``url``."""


class ServerThread(Generic[S]):
    """Runs ``server_class(**kwargs)`` on a daemon thread until the block (or :meth:`stop`) ends."""

    server_class: ClassVar[type[Any]]
    label: ClassVar[str] = "server"

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._server: S | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def server(self) -> S:
        if self._server is None:
            raise RuntimeError(f"the {self.label} server is not running")
        return self._server

    @property
    def url(self) -> str:
        return str(cast(Any, self.server).url)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=f"assay-{self.label}-server", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._error is not None:
            raise self._error
        if self._server is None:
            raise RuntimeError(f"the {self.label} server did not start within 30 s")

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with self.server_class(**self._kwargs) as server:
            self._server = server
            self._ready.set()
            await self._stop.wait()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._thread = None


def parse_range(text: str) -> float | tuple[float, float]:
    """A CLI value of seconds, or a range ``LOW-HIGH``.

    >>> parse_range("0.5"), parse_range("1-4")
    (0.5, (1.0, 4.0))
    """
    if "-" in text.strip("-"):
        low, high = text.split("-", 1)
        return float(low), float(high)
    return float(text)


__all__ = ["ServerThread", "parse_range"]
