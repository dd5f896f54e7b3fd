"""What the rate controller knows: the rate, the last refused rate and the recent sends and
refusals (monotonic times only, so it survives across event loops), and the measurements over them.

:class:`RateState` holds the numbers and answers questions about them (the allowed rate now, what
the server accepted, whether a refusal looks like timing jitter); what a 429 changes is decided in
:mod:`assay.judges.pacing.regimes`, one function per regime, and :class:`~assay.judges.pacing.controller.AdaptiveRate`
routes each 429 to its regime.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Literal

from assay.judges.pacing.constants import (
    ACCEPT_MIN_SENDS,
    ACCEPT_MIN_SPAN_S,
    ACCEPT_REFUSED_SHARE,
    ACCEPT_SINCE_CUT_S,
    ACCEPT_WINDOW_S,
    CHEAP_ALLOWED,
    CHEAP_SHARE,
    COARSE_MAX_S,
    FAR_SHARE,
    JITTER_ACCEPTED,
    JITTER_ALLOWED,
    JITTER_RECENT,
    JITTER_SHARE,
    MEASURE_MIN_S,
    MEASURE_WINDOW_S,
    PACE_MARGIN,
    PROBE_STEP,
    QUIET_S,
    RECOVER_TO,
    SEARCH_GROWTH,
    SPACING_MAX,
    SPACING_STEP,
    SPACING_TARGET,
    STARTUP_ALLOWED,
    STARTUP_S,
    WINDOW_S,
)


class RateState:
    """The state of one endpoint's rate controller and the measurements over it."""

    def __init__(self, ceiling: float | None, *, adaptive: bool = True) -> None:
        self.configured = ceiling
        """The configured rate (requests/s)."""
        ceiling = None if ceiling is None else ceiling * PACE_MARGIN
        self.ceiling = ceiling
        """The pacing ceiling (requests/s): the configured rate less PACE_MARGIN."""
        self.rate = ceiling
        """The rate currently allowed (None: unlimited)."""
        self.adaptive = adaptive
        self.shared = False
        """The rate is one process's part of a budget shared with others (``shared_limit``): what
        this process sends is its share, not the rate, so jitter is judged against the former."""
        self.blocked_until = 0.0
        self.generation = 0
        """Bumped on every new pause: pacer reservations made before it are void."""
        self.refused_at: float | None = None
        """The last rate the server refused (the AIMD "w_max")."""
        self.decreases = 0
        self.jitter_refusals = 0
        self.reclaimed = False
        """Whether the last 429 handed its slot back to the pacer (see :meth:`on_rate_limited`)."""
        self._near_ceiling = False
        self.spacing = 0.0
        """Extra gap between sends (a fraction of the interval) learned from jitter refusals."""
        self._searching = False
        """No rate configured and no limit found yet: the rate grows by SEARCH_GROWTH per quiet period."""
        self._probe = PROBE_STEP
        self._last_change = time.monotonic()
        self._last_decrease = -math.inf
        self._sends: deque[float] = deque()
        self._first_send = math.inf
        self._hold_until = -math.inf
        self._resumed_at = -math.inf
        """When the last real pause ended (accepted-rate measurements start after it)."""
        self._history: deque[float] = deque()
        """Send times of the last ACCEPT_WINDOW_S seconds (not cleared by a decrease)."""
        self._window: deque[float] = deque()
        """Sends the server may have counted (a reclaimed refusal is taken out), for the window."""
        self._refused: deque[float] = deque()
        """Send times of the requests refused with a 429 in that window."""

    def set_ceiling(self, rps: float) -> bool:
        """A new configured rate (the limit the provider announced); returns whether it changed.
        A rate searching for an unknown limit, or above the new one, goes straight to it; a rate
        below it after a cut recovers towards it as usual."""
        if rps == self.configured:
            return False
        self.configured = rps
        self.ceiling = rps * PACE_MARGIN
        if self.rate is None or self._searching or self.rate > self.ceiling or self.refused_at is None:
            self.rate = self.ceiling
        self._searching = False
        return True

    def current(self, now: float) -> float | None:
        """The allowed rate at ``now``, raised lazily by one step per elapsed quiet period."""
        if self.rate is None or self.refused_at is None:
            return self.rate
        steps = int((now - self._last_change) / QUIET_S)
        if steps > 0:
            self._last_change += steps * QUIET_S
            before = self.rate
            for _ in range(min(steps, 200)):
                self.rate = self._raised(self.rate, self.refused_at)
            if not self._searching and now < self._hold_until:
                # refused lately at refused_at: that is where the limit is, do not probe past it
                self.rate = min(self.rate, max(before, self.refused_at))
            if self.ceiling is not None:
                self.rate = min(self.rate, self.ceiling)
        return self.rate

    def _raised(self, rate: float, refused: float) -> float:
        if self._searching:
            # no limit configured and none found yet (only jitter-like refusals of a first burst):
            # look for it quickly, like TCP's slow start
            return rate * SEARCH_GROWTH
        target = RECOVER_TO * refused
        if self.ceiling is not None and self._near_ceiling:
            # refused at about the configured rate: timing jitter against a strict limiter, not a
            # wrong configuration. Return to the configured rate quickly instead of creeping.
            target = self.ceiling
        if rate < target:
            return rate + max(0.5 * (target - rate), self._probe * refused)
        if rate < 1.2 * refused:
            return rate + self._probe * refused
        return rate * 1.1  # far above the last refusal: the limit was lifted, find it quickly

    def record_send(self, now: float) -> None:
        if self.spacing > 0.0:
            self.spacing = max(0.0, self.spacing - SPACING_STEP * SPACING_TARGET)
        if self._first_send == math.inf:
            self._first_send = now
        self._sends.append(now)
        while self._sends and self._sends[0] < now - MEASURE_WINDOW_S:
            self._sends.popleft()
        self._history.append(now)
        # at least the last JITTER_RECENT sends stay, however slow the rate: at 1.5 req/s two
        # seconds hold three sends, too few to tell jitter from a rate above the limit
        while len(self._history) > JITTER_RECENT and self._history[0] < now - ACCEPT_WINDOW_S:
            self._history.popleft()
        self._window.append(now)
        while self._window and self._window[0] < now - 2 * WINDOW_S:
            self._window.popleft()

    def window_wait(self, now: float, rate: float) -> float:
        """Seconds to wait so that no window of WINDOW_S holds more sends than the rate allows.

        The pacer spaces sends evenly, but a late wake-up (the event loop busy with other work)
        bunches the next ones; a server counting requests in a sliding one-second window refuses
        the bunch. This keeps the count itself under the limit. A rate that is no whole number per
        second (rpm 450, a shard's share of 1800) is no sliding one-second count: the window is
        stretched so that it holds the whole number of sends the rate allows (7.5/s: 7 sends in
        0.93 s), instead of rounding the rate down to 7 per second."""
        per_s = rate / PACE_MARGIN  # the configured rate
        limit = max(1, math.floor(per_s + 1e-9))
        history = self._window
        if len(history) < limit:
            return 0.0
        oldest = history[-limit]  # the limit-th most recent send
        span = WINDOW_S if limit >= per_s - 1e-9 else WINDOW_S * limit / per_s
        return max(0.0, oldest + span - now)

    def accepted_rate(self, sent_at: float) -> float | None:
        """What the server accepted in the second before a refused request: "R requests per
        second" limits refuse the request after the R-th in a second, so this count is the limit
        itself (a token bucket's burst makes it an overestimate, which only makes the cut milder).
        Paused time inside that second counts as sending nothing, as it does for the server.
        None when too little was sent to tell."""
        # Only time we spent sending counts: a second that held one of our own pauses says how
        # long we waited, not what the server accepts.
        start = max(sent_at - 1.0, self._first_send, self._resumed_at)
        if sent_at - start < ACCEPT_MIN_SPAN_S or sent_at - self._first_send < 1.0:
            return None  # the first second (new connections, jittery) is no measure
        if start < self._last_decrease and sent_at - self._last_decrease >= ACCEPT_SINCE_CUT_S:
            # A second that straddles a cut mixes the refusals above it with the sends after it:
            # when enough was sent since the cut, that alone is the measure.
            since = self._accepted_between(self._last_decrease, sent_at)
            if since is not False:
                return since
        accepted = self._accepted_between(start, sent_at)
        return None if accepted is False else accepted

    def _accepted_between(self, start: float, sent_at: float) -> float | Literal[False] | None:
        """Accepted requests per second between ``start`` and ``sent_at``; None when few were
        refused (not far above the limit: the count is no measure of it), False when too few were
        sent to tell."""
        sent = sum(1 for t in self._history if start <= t < sent_at)
        if sent < ACCEPT_MIN_SENDS:
            return False
        refused = sum(1 for t in self._refused if start <= t < sent_at)
        if refused < ACCEPT_REFUSED_SHARE * sent:
            return None
        return max(sent - refused, 1) / (sent_at - start)

    def _isolated(self, now: float, accepted: float | None, cheap: bool = False) -> bool:
        """Whether this 429 is timing jitter at the limit rather than a rate above it: the server
        accepted (in the second before) about what we are sending, and the refusals of the last
        ACCEPT_WINDOW_S are rare (at most JITTER_SHARE of the sends, one always allowed). A rate
        above a limit shows as far fewer accepted than sent, or as frequent refusals (against a
        strict limiter, about every other request)."""
        if self.shared:
            # A shared budget's slots are spaced in Redis at the configured rate, and this process
            # sends only its share of them (what it sends and what it is refused says little about
            # the limit): a refusal is timing jitter unless most of its recent sends were refused.
            return len(self._history) < JITTER_RECENT or self._recent_share() < FAR_SHARE
        sending = self.rate if self.rate is not None else self.measured(now)
        if accepted is not None and sending is not None and accepted < JITTER_ACCEPTED * sending:
            return False
        if (
            self.configured is not None
            and self.rate == self.ceiling
            and self._first_send <= now < self._first_send + STARTUP_S
            and len(self._refused) <= STARTUP_ALLOWED
        ):
            return True  # new connections make the first requests' arrival times jittery
        if self.spacing >= SPACING_MAX:
            return False  # the widest spacing did not stop the refusals: the rate is too high
        if len(self._history) >= JITTER_RECENT:
            # refusals bunched among the last few sends: above a strict limiter (which then
            # refuses about every other request), however few they are over two seconds
            recent = self._history[-JITTER_RECENT]
            if sum(1 for t in self._refused if t >= recent) >= (CHEAP_ALLOWED if cheap else JITTER_ALLOWED):
                return False
        start = now - ACCEPT_WINDOW_S
        refused = sum(1 for t in self._refused if t >= start)
        sent = sum(1 for t in self._history if t >= start)
        return refused <= max(JITTER_ALLOWED, (CHEAP_SHARE if cheap else JITTER_SHARE) * sent)

    def _recent_rate(self, now: float) -> float | None:
        """Sends per second over the last second (a rough rate when nothing better is known)."""
        measured = self.measured(now)
        if measured is not None:
            return measured
        sent = sum(1 for t in self._history if t >= now - 1.0)
        return float(sent) if sent else None

    def measured(self, now: float) -> float | None:
        """Requests per second actually sent since the last pause (None without enough data)."""
        if len(self._sends) < 2 or now - self._sends[0] < MEASURE_MIN_S:
            return None  # too short to say; the configured rate stands
        return (len(self._sends) - 1) / (self._sends[-1] - self._sends[0])

    def min_gap(self, rate: float) -> float:
        """The least time between two actual sends at ``rate``: one interval (a sender woken late
        does not catch up on the pacer's grid: two sends exactly 1/R apart are refused by a strict
        limiter half the time), widened by ``spacing`` after jitter refusals (which narrows again
        with every send)."""
        return (1.0 + self.spacing) / rate

    @staticmethod
    def _coarse(delay: float | None) -> bool:
        """Whether a hint says nothing precise: none at all, or a small whole number of seconds
        (``Retry-After: 1`` is what a limiter sends when the real wait is a few milliseconds)."""
        return delay is None or (1.0 <= delay <= COARSE_MAX_S and delay == int(delay))

    def _pause(self, now: float, seconds: float) -> None:
        until = now + seconds
        if until > self.blocked_until:
            self.blocked_until = until
            self.generation += 1
        if seconds > ACCEPT_MIN_SPAN_S / 2:  # a real pause, not a skipped slot
            self._resumed_at = max(self._resumed_at, until)

    def _recent_share(self) -> float:
        """The share of the last JITTER_RECENT sends that were refused."""
        if len(self._history) < JITTER_RECENT:
            return 1.0
        first = self._history[-JITTER_RECENT]
        return sum(1 for t in self._refused if t >= first) / JITTER_RECENT

    def _refused_share(self, sent_at: float) -> float:
        """The share of our sends refused in the last second of sending before ``sent_at`` (1.0
        when too few were sent to tell)."""
        start = max(sent_at - 1.0, self._resumed_at)
        sent = sum(1 for t in self._history if start <= t <= sent_at)
        if sent < ACCEPT_MIN_SENDS:
            return 1.0
        return sum(1 for t in self._refused if start <= t <= sent_at) / sent

    def _accepting(self, sent_at: float) -> bool:
        """Whether the server accepted any of our sends in the second before ``sent_at`` (sends
        not refused count as accepted: a 429 comes back at once)."""
        start = sent_at - 1.0
        sent = sum(1 for t in self._history if start <= t < sent_at)
        refused = sum(1 for t in self._refused if start <= t < sent_at)
        return sent > refused
