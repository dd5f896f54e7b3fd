"""The adaptive rate controller of one endpoint: its state (:class:`~assay.judges.pacing.state.RateState`)
plus the entry point of a 429, which goes to the regime :func:`~assay.judges.pacing.regimes.decide` picks."""

from __future__ import annotations

from assay.judges.pacing.constants import ACCEPT_WINDOW_S, DEFAULT_PAUSE_S
from assay.judges.pacing.regimes import Decision, Refusal, decide
from assay.judges.pacing.state import RateState


class AdaptiveRate(RateState):
    """AIMD controller of one endpoint's request rate, plus the shared "blocked until" time.

    >>> ctl = AdaptiveRate(100.0)  # paced at 99: PACE_MARGIN
    >>> round(ctl.on_rate_limited(now=10.0, sent_at=10.0, delay=1.0), 4)  # one early request
    0.0101
    >>> round(ctl.rate, 2), ctl.jitter_refusals  # is jitter: the rate stays, one slot is skipped
    (99.0, 1)
    >>> ctl.last_decision.regime
    'jitter'
    """

    last_decision: Decision | None = None
    """The regime of the last 429 and what it decided (for logs and tests)."""

    def on_rate_limited(
        self, *, now: float, sent_at: float, delay: float | None, reclaim: bool = False, cheap: bool = False
    ) -> float | None:
        """A 429: pause every sender until the reset, and lower the rate once per episode, unless
        the refusal was timing jitter at the limit. Returns how long the refused request waits
        before it is tried again. ``reclaim``: nothing was sent since the refused request, so a
        jitter refusal with a coarse hint pauses no one (the pacer hands its slot to the next send);
        :attr:`reclaimed` says whether it did. ``cheap``: the last slot handed back was accepted,
        so a reclaimed refusal costs a fraction of a slot (see CHEAP_WEIGHT)."""
        self.reclaimed = False
        accepted = self.accepted_rate(sent_at)
        self._refused.append(sent_at)
        kept = min(now - ACCEPT_WINDOW_S, self._history[0]) if self._history else now - ACCEPT_WINDOW_S
        while self._refused and self._refused[0] < kept:
            self._refused.popleft()
        wait = DEFAULT_PAUSE_S if delay is None else delay
        refusal = Refusal(
            now=now, sent_at=sent_at, delay=delay, wait=wait, accepted=accepted, reclaim=reclaim, cheap=cheap
        )
        self.last_decision = decide(self, refusal)
        return self.last_decision.retry
