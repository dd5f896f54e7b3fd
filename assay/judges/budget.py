"""The run's judge budget: every endpoint of a pool charges the same :class:`Budget`.

A call goes out only when it fits: the dollars spent, plus the calls in flight, plus this call's
estimate stay within the limit. When it does not fit because of calls in flight, it waits for
them to finish (their real cost is usually below the estimate); when it does not fit with
nothing in flight, the budget is spent: :class:`~assay.exceptions.BudgetExceeded`. Estimates are
calibrated per judge by what its calls really cost (the ratio of real to estimated cost so far),
so the run stops when the *next* call would cross the limit — not far before it, and not after.

>>> import anyio
>>> async def demo():
...     b = Budget(0.10)
...     calls = 0
...     while True:
...         try:
...             held = await b.acquire("gpt", 0.03)  # estimated 0.03, really costs 0.01
...         except BudgetExceeded:
...             return calls, round(b.spent_usd, 4)
...         b.charge(0.01, held)
...         calls += 1
>>> anyio.run(demo)
(10, 0.1)
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel

from assay.exceptions import BudgetExceeded

_EPSILON = 1e-12


class Reservation(float):
    """The dollars held for one call in flight (a float, as :meth:`Budget.charge` takes it), with
    the judge and its uncalibrated estimate, from which the judge's calibration learns."""

    judge: str
    estimate_usd: float

    def __new__(cls, amount: float, judge: str, estimate_usd: float) -> Reservation:
        held = super().__new__(cls, amount)
        held.judge = judge
        held.estimate_usd = estimate_usd
        return held


class Budget:
    """Dollars spent on judge calls so far, held for calls in flight, and the limit (None:
    unlimited)."""

    __slots__ = ("_changed", "_costs", "limit_usd", "reserved_usd", "spent_usd")

    def __init__(self, limit_usd: float | None = None) -> None:
        self.limit_usd = limit_usd
        self.spent_usd = 0.0
        self.reserved_usd = 0.0
        self._costs: dict[str, list[float]] = {}  # judge -> [estimated, real] of its finished calls
        self._changed: tuple[Any, anyio.Event] | None = None  # (event loop token, event)

    def __repr__(self) -> str:
        return f"Budget(limit_usd={self.limit_usd}, spent_usd={self.spent_usd:.6f})"

    @property
    def exhausted(self) -> bool:
        return self.limit_usd is not None and self.spent_usd >= self.limit_usd

    def check(self, judge: str) -> None:
        """Raise BudgetExceeded when the limit is reached."""
        if self.exhausted:
            raise BudgetExceeded(
                f"judge budget of ${self.limit_usd:.4f} reached (spent ${self.spent_usd:.4f}); "
                f"not calling judge {judge!r}"
            )

    def calibrated(self, judge: str, estimate_usd: float) -> float:
        """``estimate_usd`` scaled by what ``judge``'s calls really cost against their estimates."""
        estimated, real = self._costs.get(judge, (0.0, 0.0))
        return estimate_usd * (real / estimated) if estimated > 0 else estimate_usd

    async def acquire(self, judge: str, estimate_usd: float) -> Reservation:
        """Hold this call's (calibrated) estimate once it fits within the limit, waiting for calls
        in flight when they are what is in the way; BudgetExceeded when it cannot fit even with
        nothing in flight. Pass the result to :meth:`charge` or :meth:`release`."""
        while True:
            amount = self.calibrated(judge, estimate_usd)  # the calls that finished meanwhile teach it
            if self.limit_usd is None or self.spent_usd + self.reserved_usd + amount <= self.limit_usd + _EPSILON:
                break
            if self.reserved_usd <= _EPSILON:
                raise BudgetExceeded(
                    f"judge budget of ${self.limit_usd:.4f} reached: spent ${self.spent_usd:.4f}, and the next call "
                    f"to judge {judge!r} (about ${amount:.4f}) would cross it"
                )
            await self._wait_for_change()
        self.reserved_usd += amount
        return Reservation(amount, judge, estimate_usd)

    def release(self, reserved_usd: float) -> None:
        """A held call that was not made (or failed): its amount is free again."""
        self.reserved_usd = max(0.0, self.reserved_usd - reserved_usd)
        if self.reserved_usd < _EPSILON:
            self.reserved_usd = 0.0
        self._notify()

    def charge(self, cost_usd: float, reserved_usd: float = 0.0) -> None:
        """A call finished and cost ``cost_usd``; what was held for it is released."""
        if isinstance(reserved_usd, Reservation):
            sums = self._costs.setdefault(reserved_usd.judge, [0.0, 0.0])
            sums[0] += reserved_usd.estimate_usd
            sums[1] += cost_usd
        self.spent_usd += cost_usd
        self.release(reserved_usd)

    async def _wait_for_change(self) -> None:
        token = anyio.lowlevel.current_token()
        if self._changed is None or self._changed[0] != token:
            self._changed = (token, anyio.Event())
        await self._changed[1].wait()

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed[1].set()
