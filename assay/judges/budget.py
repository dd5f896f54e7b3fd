"""The run's judge budget: every endpoint of a pool charges the same :class:`Budget`.

>>> b = Budget(0.01)
>>> b.charge(0.02)
>>> b.check("gpt")
Traceback (most recent call last):
...
assay.exceptions.BudgetExceeded: judge budget of $0.0100 reached (spent $0.0200); not calling judge 'gpt'
"""

from __future__ import annotations

from assay.exceptions import BudgetExceeded


class Budget:
    """Dollars spent on judge calls so far, and the limit (None: unlimited).

    The check happens before a call is sent; calls already in flight finish and are charged, so
    the final spend can exceed the limit by at most the cost of the calls in flight.
    """

    __slots__ = ("limit_usd", "reserved_usd", "spent_usd")

    def __init__(self, limit_usd: float | None = None) -> None:
        self.limit_usd = limit_usd
        self.spent_usd = 0.0
        self.reserved_usd = 0.0

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

    def reserve(self, judge: str, estimate_usd: float) -> float:
        """Check the limit counting the estimated cost of calls in flight, then reserve this call's
        estimate (so a burst of concurrent calls cannot all pass the check at once). Returns the
        amount reserved, to pass to :meth:`charge` or :meth:`release`."""
        if self.limit_usd is not None and self.spent_usd + self.reserved_usd >= self.limit_usd:
            raise BudgetExceeded(
                f"judge budget of ${self.limit_usd:.4f} reached (spent ${self.spent_usd:.4f}, "
                f"${self.reserved_usd:.4f} in flight); not calling judge {judge!r}"
            )
        self.reserved_usd += estimate_usd
        return estimate_usd

    def release(self, reserved_usd: float) -> None:
        self.reserved_usd = max(0.0, self.reserved_usd - reserved_usd)

    def charge(self, cost_usd: float, reserved_usd: float = 0.0) -> None:
        self.release(reserved_usd)
        self.spent_usd += cost_usd
