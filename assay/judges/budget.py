"""The run's judge budget: every endpoint of a pool charges the same :class:`Budget`.

A call goes out only when it fits: the dollars spent, plus what is held for the calls in flight,
plus what this call holds stay within the limit. What a call holds is a *safe* amount, meant to be
at least what it will really cost: a judge's estimate times the largest ratio of real to estimated
cost its calls have shown (plus a margin), and, until the judge has answered
:data:`CALIBRATION_CALLS` times, :data:`UNCALIBRATED_FACTOR` times its estimate (or the ceiling
the caller knows, e.g. from ``max_tokens``, when that is lower). So 64 calls in flight cannot
together cross the limit, whatever their size. When the safe amount no longer fits and nothing
is in flight, the last calls go out one at a time while their *expected* cost (the estimate times
the judge's mean ratio of real to estimated cost) fits: the run stops within one call's cost of
the limit — at most one call's overrun past it, and never more than one typical call short of it.
When not even that fits, the budget is spent: :class:`~assay.exceptions.BudgetExceeded`.

Several processes spending one budget (``--workers N``, the actors of a Ray job) attach the same
:class:`~assay.judges.budget_store.BudgetStore` scope: the same rule is then decided over every
process's spending and reservations in one SQLite transaction, so the run as a whole stops within
one call's cost of the limit (each process keeps its own calibration).

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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from assay.exceptions import BudgetExceeded

if TYPE_CHECKING:
    from assay.judges.budget_store import BudgetStore

_EPSILON = 1e-12

#: A judge's calls hold this many times their estimate until it has answered CALIBRATION_CALLS
#: times (the estimate assumes a typical answer; a judge that writes ten times as much is rare).
UNCALIBRATED_FACTOR = 10.0
#: Answers of a judge after which its largest real-to-estimated ratio decides what a call holds.
CALIBRATION_CALLS = 8
#: What a calibrated call holds beyond its estimate times the largest ratio seen so far.
SAFETY_MARGIN = 1.25
#: With a shared store, a call that must wait for others' calls asks again after this long (the
#: calls of this process wake it at once; another process's finishing cannot).
STORE_POLL_S = 0.05


class Reservation(float):
    """The dollars held for one call in flight (a float, as :meth:`Budget.charge` takes it), with
    the judge and its uncalibrated estimate, from which the judge's calibration learns."""

    judge: str
    estimate_usd: float
    ticket: int

    def __new__(cls, amount: float, judge: str, estimate_usd: float, ticket: int = 0) -> Reservation:
        held = super().__new__(cls, amount)
        held.judge = judge
        held.estimate_usd = estimate_usd
        held.ticket = ticket  # its row in a shared store (0: none)
        return held


@dataclass(slots=True)
class _Calibration:
    """What one judge's finished calls cost against their estimates."""

    calls: int = 0
    estimated: float = 0.0
    real: float = 0.0
    max_ratio: float = 0.0


class Budget:
    """Dollars spent on judge calls so far, held for calls in flight, and the limit (None:
    unlimited). ``store``: the scope shared with the run's other processes (see the module docs);
    ``spent_usd`` and ``reserved_usd`` stay this process's."""

    __slots__ = (
        "_changed",
        "_charged",
        "_closed",
        "_costs",
        "_polling",
        "limit_usd",
        "reserved_usd",
        "spent_usd",
        "store",
    )

    def __init__(self, limit_usd: float | None = None, *, store: BudgetStore | None = None) -> None:
        self.limit_usd = limit_usd
        self.store = store if limit_usd is not None else None
        self._closed = False
        self.spent_usd = 0.0
        self._charged = 0.0  # what this Budget's calls cost (the store's row of this process)
        self._polling = False  # a waiting call of this process asks the shared store again
        self.reserved_usd = 0.0
        self._costs: dict[str, _Calibration] = {}
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

    def close(self) -> None:
        """An earlier attempt of the run stopped at this limit: no call is sent (BudgetExceeded)."""
        self._closed = True

    def calibrated(self, judge: str, estimate_usd: float) -> float:
        """``estimate_usd`` scaled by what ``judge``'s calls really cost against their estimates
        (the mean ratio): what the call is expected to cost."""
        cal = self._costs.get(judge)
        return estimate_usd * (cal.real / cal.estimated) if cal is not None and cal.estimated > 0 else estimate_usd

    def safe(self, judge: str, estimate_usd: float, ceiling_usd: float | None = None) -> float:
        """What a call of ``judge`` estimated at ``estimate_usd`` holds while in flight: an amount
        it should not exceed (see the module docstring). ``ceiling_usd``: a bound the caller
        knows (the output capped by ``max_tokens``), used until the judge is calibrated."""
        cal = self._costs.get(judge)
        expected = self.calibrated(judge, estimate_usd)
        if cal is None or cal.calls < CALIBRATION_CALLS:
            prior = estimate_usd * UNCALIBRATED_FACTOR
            if ceiling_usd is not None:
                prior = min(prior, ceiling_usd)
            seen = estimate_usd * cal.max_ratio * SAFETY_MARGIN if cal is not None else 0.0
            return max(prior, seen, expected)
        return max(estimate_usd * cal.max_ratio * SAFETY_MARGIN, expected)

    async def acquire(self, judge: str, estimate_usd: float, ceiling_usd: float | None = None) -> Reservation:
        """Hold this call's safe amount once it fits within the limit, waiting for calls in flight
        when they are what is in the way; with nothing in flight, the call goes out alone when its
        expected cost fits; BudgetExceeded when not even that fits. Pass the result to
        :meth:`charge` or :meth:`release`."""
        if self._closed:
            raise BudgetExceeded(
                f"judge budget of ${self.limit_usd:.4f} was already spent (${self.spent_usd:.4f}) by an earlier "
                f"attempt of this run; not calling judge {judge!r}"
            )
        if self.store is not None:
            return await self._acquire_shared(self.store, judge, estimate_usd, ceiling_usd)
        while True:
            # the calls that finished meanwhile teach both amounts
            amount = self.safe(judge, estimate_usd, ceiling_usd)
            if self.limit_usd is None or self.spent_usd + self.reserved_usd + amount <= self.limit_usd + _EPSILON:
                break
            if self.reserved_usd <= _EPSILON:
                expected = self.calibrated(judge, estimate_usd)
                if self.spent_usd + expected <= self.limit_usd + _EPSILON:
                    break  # the last calls, one at a time: at most one call's overrun
                raise BudgetExceeded(
                    f"judge budget of ${self.limit_usd:.4f} reached: spent ${self.spent_usd:.4f}, and the next call "
                    f"to judge {judge!r} (about ${expected:.4f}) would cross it"
                )
            await self._wait_for_change()
        self.reserved_usd += amount
        return Reservation(amount, judge, estimate_usd)

    async def _acquire_shared(
        self, store: BudgetStore, judge: str, estimate_usd: float, ceiling_usd: float | None
    ) -> Reservation:
        """:meth:`acquire` decided in the shared store, over every process of the scope. Of the
        calls of this process that wait, one asks the store again every STORE_POLL_S (the others
        wait for a change here: a call of this process finishing, or that one seeing room, or
        the budget spent); 64 waiting calls do not ask 64 times."""
        assert self.limit_usd is not None
        while True:
            amount = self.safe(judge, estimate_usd, ceiling_usd)
            expected = self.calibrated(judge, estimate_usd)
            grant = await store.reserve(amount, expected, limit=self.limit_usd, spent=self._charged)
            if grant.verdict != "wait":
                self._notify()  # room, or the end: the other waiting calls ask again
            if grant.verdict == "ok":
                self.reserved_usd += amount
                return Reservation(amount, judge, estimate_usd, grant.ticket)
            if grant.verdict == "closed":
                raise BudgetExceeded(
                    f"judge budget of ${self.limit_usd:.4f} was already spent (${grant.spent_usd:.4f}) by this run's "
                    f"processes; not calling judge {judge!r}"
                )
            if grant.verdict == "over":
                raise BudgetExceeded(
                    f"judge budget of ${self.limit_usd:.4f} reached: this run's processes spent "
                    f"${grant.spent_usd:.4f}, and the next call to judge {judge!r} (about ${expected:.4f}) "
                    "would cross it"
                )
            if self._polling:
                await self._wait_for_change()
                continue
            self._polling = True
            try:
                with anyio.move_on_after(STORE_POLL_S):
                    await self._wait_for_change()
            except BaseException:
                self._notify()  # another waiting call takes over the asking
                raise
            finally:
                self._polling = False

    def release(self, reserved_usd: float) -> None:
        """A held call that was not made (or failed): its amount is free again."""
        if self.store is not None and isinstance(reserved_usd, Reservation) and reserved_usd.ticket:
            self.store.release(reserved_usd.ticket)
        self._release_local(reserved_usd)

    def _release_local(self, reserved_usd: float) -> None:
        self.reserved_usd = max(0.0, self.reserved_usd - reserved_usd)
        if self.reserved_usd < _EPSILON:
            self.reserved_usd = 0.0
        self._notify()

    def charge(self, cost_usd: float, reserved_usd: float = 0.0) -> None:
        """A call finished and cost ``cost_usd``; what was held for it is released."""
        if isinstance(reserved_usd, Reservation) and reserved_usd.estimate_usd > 0:
            cal = self._costs.setdefault(reserved_usd.judge, _Calibration())
            cal.calls += 1
            cal.estimated += reserved_usd.estimate_usd
            cal.real += cost_usd
            cal.max_ratio = max(cal.max_ratio, cost_usd / reserved_usd.estimate_usd)
        self.spent_usd += cost_usd
        self._charged += cost_usd
        if self.store is not None and isinstance(reserved_usd, Reservation) and reserved_usd.ticket:
            self.store.settle(reserved_usd.ticket, self._charged)
        self._release_local(reserved_usd)

    async def _wait_for_change(self) -> None:
        token = anyio.lowlevel.current_token()
        if self._changed is None or self._changed[0] != token:
            self._changed = (token, anyio.Event())
        await self._changed[1].wait()

    def _notify(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed[1].set()
