"""The async-resource shape every connector, judge endpoint and cache has: no I/O in ``__init__``;
``async with`` calls :meth:`open`, then :meth:`aclose` on the way out."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncResource:
    """``async with resource:`` opens and closes it."""

    async def open(self) -> None:
        """Acquire connections, files, sessions."""

    async def aclose(self) -> None:
        """Release them (idempotent)."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
