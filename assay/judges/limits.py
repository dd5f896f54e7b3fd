"""The limits of one judge endpoint, composed in one place (:meth:`Limits.slot`):

1. **concurrency** — how many requests are in flight: ``max_concurrency`` when the user set it (a
   hard cap), else :class:`InFlightCap` follows Little's law, *rate × tail latency × headroom*,
   from the rate being sent and the latency measured, bounded by :data:`AUTO_MAX_CONCURRENCY`;
2. **tokens per minute** — an :class:`aiolimiter.AsyncLimiter` charged with each request's
   estimated tokens; the estimate is corrected from the reported usage on the next acquisition;
3. **the shared pause** — after a 429 nobody sends until the server's reset time
   (``blocked_until``), not only the request that was refused;
4. **requests per second** — an even pacer (one request every ``1/rate`` seconds, no bursts)
   whose rate the :class:`AdaptiveRate` controller moves: multiplicative decrease on 429, quick
   recovery to just below the rate that was refused, then a slow additive probe upwards after
   each quiet period. A run configured 3× above the server's real limit converges in a few
   seconds instead of storming.

The controller and the pacer hold only numbers (monotonic times), so they survive across event
loops; the semaphore and the token limiter are loop-bound and rebuilt when the loop changes (the
library's sync ``evaluate()`` runs a fresh loop per call).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import anyio.lowlevel

from assay.judges.turns import FIRST, TurnQueue

#: The pacer runs at this fraction of the configured rate. A server counting requests in a sliding
#: one-second window refuses an exactly paced client whenever jitter bunches requests together;
#: 2% of headroom absorbs about 20 ms of jitter there, for a small, predictable cost.
PACE_MARGIN = 0.99
#: Each jitter refusal widens the least gap between sends by SPACING_STEP of an interval (up to
#: SPACING_MAX); every send narrows it by SPACING_STEP * SPACING_TARGET, so jitter refusals settle
#: at about SPACING_TARGET of the requests, whatever the timing noise on the way to the server
#: (a refusal costs about RECLAIM_SHARE of a slot, a wider spacing costs every slot).
SPACING_STEP = 0.004
SPACING_MAX = 0.05
SPACING_TARGET = 0.01
#: A refusal whose slot was handed back (see RECLAIM_SHARE) while the last reclaimed slot was
#: accepted costs a tenth of a slot, not a whole one: it widens the gap by only CHEAP_WEIGHT of
#: SPACING_STEP, so such refusals settle at about SPACING_TARGET / CHEAP_WEIGHT of the requests
#: (measured against a strict limiter at 30 req/s: a 0.4 ms margin with 5 % cheap refusals costs
#: 1.9 % of the slots, a 1 ms margin with 1.5 % costs 3.2 %).
CHEAP_WEIGHT = 0.25
#: While refusals are cheap the limiter is a strict one whose reclaimed slots are free: a rate
#: above it is refused about every other request, so up to this share of the sends (in the last
#: ACCEPT_WINDOW_S), or CHEAP_ALLOWED of the last JITTER_RECENT, are still timing jitter.
CHEAP_SHARE = 0.2
CHEAP_ALLOWED = 5
#: Waits shorter than this (seconds) yield to the event loop instead of arming a timer; a sleeping
#: sender plans to wake WAKE_EARLY_S before its slot (the loop's timers fire up to a millisecond
#: late, later when another task holds the loop), and yields from there.
SPIN_S = 0.002
WAKE_EARLY_S = 0.001
#: The last BLOCK_S before a slot (at most BLOCK_SHARE of an interval, so at most that share of a
#: core) the sender waits without yielding: a task that held the loop past the slot made the send
#: late, and against a strict limiter lateness is lost for good (measured at 30 req/s: sends 0.2 ms
#: late on average when yielding to the end, 0.06 ms with this).
BLOCK_S = 0.002
BLOCK_SHARE = 0.06
#: A jitter 429 answered before anything else was sent leaves the server's clock where it was (a
#: strict limiter counts only what it accepts): the next send takes the refused one's slot,
#: RECLAIM_SHARE of an interval after it (but at least RECLAIM_MIN_S, at most RECLAIM_MAX_SHARE
#: of an interval), instead of a whole interval later. A limiter that also counts what it refuses
#: refuses that send too: after RECLAIM_FAILURES such refusals in a row, slots are no longer reclaimed.
RECLAIM_SHARE = 0.1
RECLAIM_MIN_S = 0.003
RECLAIM_MAX_SHARE = 0.5
RECLAIM_FAILURES = 2
#: Sends between two reclaimed slots: JITTER_RECENT at first, RECLAIM_EVERY once a reclaimed slot
#: was accepted (refusals are then cheap, and frequent on purpose: see CHEAP_WEIGHT).
RECLAIM_EVERY = 2
#: A slot of a shared budget reached later than this share of its interval is let go: the next
#: slot is another process's, and sending now would leave less than 1/R before it (the shared
#: stream's margin is 1 - SHARED_PACE_MARGIN of an interval).
SHARED_LATE_SHARE = 0.024
#: The most the pacer wakes ahead of a slot to make up for the event loop's lateness.
MAX_LATENESS_S = 0.005
#: Seconds without a 429 after which the rate is raised one step.
QUIET_S = 0.5
#: For this long after a jitter refusal the rate does not probe past the rate that was refused.
HOLD_S = 10.0
#: Refusals at the configured rate in the first seconds of sending are taken as jitter (connections
#: being opened), unless the server clearly accepts less than we send.
STARTUP_S = 1.5
STARTUP_ALLOWED = 3
#: One episode of refusals never cuts the rate below this fraction of the rate being sent.
MAX_CUT = 0.6
#: Share of refused sends beyond which the accepted count is trusted whatever the cut.
FAR_SHARE = 0.6
#: At most this share of the last JITTER_RECENT sends refused: the rate just crossed the limit.
CROSSED_SHARE = 0.34
#: Multiplicative decrease on a 429 (of the rate actually being sent).
BETA = 0.85
#: The gentler decrease for a 429 that comes after GENTLE_AFTER_S seconds without one.
BETA_GENTLE = 0.95
GENTLE_AFTER_S = 10.0
#: A refusal at this fraction of the configured rate or above is taken as jitter at the limit: the
#: quick recovery returns to the configured rate.
NEAR_CEILING = 0.85
#: Quick recovery target, as a fraction of the rate that was refused.
RECOVER_TO = 0.95
#: Additive probe above the recovery target, as a fraction of the refused rate per quiet period;
#: halved each time the server refuses again at about the same rate (a stable limit), down to
#: PROBE_MIN, so 429s become rarer the longer a run lasts.
PROBE_STEP = 0.02
PROBE_MIN = 0.0025
#: A whole number of seconds up to this long in a 429's hint is taken as coarse (it may stand for a
#: few milliseconds); a longer hint (a per-minute window that ran out) is always followed.
COARSE_MAX_S = 2.0
#: Growth of the rate per quiet period while no limit is known (``rpm`` unset).
SEARCH_GROWTH = 1.3
#: Pause after a 429 that carried no reset hint.
DEFAULT_PAUSE_S = 1.0
#: The rate never drops below this (requests per second).
MIN_RATE = 0.05
#: How far back the send-rate measurement looks.
MEASURE_WINDOW_S = 3.0
#: The measurement needs at least this much history since the last pause.
MEASURE_MIN_S = 1.0
#: The sliding window the client keeps its own sends under (a little over a second, for the
#: jitter between when we send and when the server counts).
WINDOW_S = 1.005
#: How far back accepted/refused sends are remembered, and the least sending time (since the last
#: pause) from which the accepted count is trusted as the server's per-second limit.
ACCEPT_WINDOW_S = 2.0
ACCEPT_MIN_SPAN_S = 0.25
ACCEPT_MIN_SENDS = 4
#: Once the rate has been sent this long since the last cut, what the server accepted is measured
#: from that cut on (a second straddling it mixes the refusals above it with the sends after it).
ACCEPT_SINCE_CUT_S = 0.5
#: The accepted count is taken as the limit only when at least this share of that second's sends
#: was refused (otherwise a slow second, e.g. a pause, would pass for a low limit).
ACCEPT_REFUSED_SHARE = 0.2
#: A 429 is taken for timing jitter (no rate cut) when the refusals of the last ACCEPT_WINDOW_S
#: are at most this share of the sends there (one is always allowed) ...
JITTER_SHARE = 0.05
JITTER_ALLOWED = 3
#: ... and unless JITTER_ALLOWED of them fell among the last JITTER_RECENT sends.
JITTER_RECENT = 12
#: ... unless the server accepted less than this share of the rate being sent (a clear excess).
JITTER_ACCEPTED = 0.9
#: Seconds of token capacity the tokens-per-minute bucket may burst.
TOKEN_BURST_S = 10.0
#: Bounds of the automatic in-flight cap (``max_concurrency`` unset); the upper one is also the
#: size of the connection pool.
AUTO_MAX_CONCURRENCY = 512
AUTO_MIN_CONCURRENCY = 4
#: The automatic cap before any rate is known (it grows, slow-start style, while every slot is busy).
AUTO_START_CONCURRENCY = 32
#: How much the automatic cap grows per answer while every slot is busy and no rate is known
#: (2: the cap triples per round trip, where TCP's slow start doubles it).
SLOW_START_STEP = 3
#: Latency assumed before the first answer (seconds), and the headroom over the measured tail.
ASSUMED_LATENCY_S = 2.0
LATENCY_HEADROOM = 1.5
#: The tail quantile of recent latencies the cap is sized from, and how many are kept.
LATENCY_QUANTILE = 0.9
LATENCY_WINDOW = 256


class InFlightCap:
    """How many requests may be in flight: fixed (``max_concurrency`` set) or Little's law.

    With a known rate the automatic cap is ``rate × p90(latency) × 1.5 + 2`` (bounded by
    AUTO_MIN/AUTO_MAX), recomputed as answers arrive, so a user who sets only ``rpm`` gets that rpm
    whatever the model's latency. With no rate known (no ``rpm``, no 429 yet) it starts at
    AUTO_START_CONCURRENCY and grows by SLOW_START_STEP per answer while every slot is busy (like
    TCP's slow start),
    until the server answers 429 and the rate controller takes over.

    >>> cap = InFlightCap(None)
    >>> for _ in range(50):
    ...     cap.observe(3.0)
    >>> cap.update(rate=100.0, in_flight=0)
    452
    >>> InFlightCap(8).update(rate=100.0, in_flight=0)
    8
    """

    def __init__(self, fixed: int | None) -> None:
        self.fixed = fixed
        self.value = fixed if fixed is not None else AUTO_START_CONCURRENCY
        self._latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self._tail = ASSUMED_LATENCY_S
        self._since = 0

    @property
    def ceiling(self) -> int:
        """The most the cap can ever be (the connection pool's size)."""
        return self.fixed if self.fixed is not None else AUTO_MAX_CONCURRENCY

    def observe(self, latency: float) -> None:
        """One answered request's latency (seconds)."""
        self._latencies.append(latency)
        self._since += 1
        if self._since >= 16 or len(self._latencies) < 16:
            self._since = 0
            ordered = sorted(self._latencies)
            self._tail = ordered[min(len(ordered) - 1, int(LATENCY_QUANTILE * len(ordered)))]

    def update(self, *, rate: float | None, in_flight: int) -> int:
        """Recompute the cap from the allowed ``rate`` (requests/s, None: unknown)."""
        if self.fixed is not None:
            return self.fixed
        if rate is None:
            if in_flight >= self.value:  # every slot busy and no limit in sight: grow
                self.value = min(self.value + SLOW_START_STEP, AUTO_MAX_CONCURRENCY)
        else:
            wanted = math.ceil(rate * self._tail * LATENCY_HEADROOM) + 2
            self.value = max(AUTO_MIN_CONCURRENCY, min(wanted, AUTO_MAX_CONCURRENCY))
        return self.value


def reclaim_delay(rate: float) -> float:
    """How long after a refused send (seconds) its slot is taken again, at ``rate`` requests/s."""
    return min(max(RECLAIM_SHARE / rate, RECLAIM_MIN_S), RECLAIM_MAX_SHARE / rate)


class AdaptiveRate:
    """AIMD controller of one endpoint's request rate, plus the shared "blocked until" time.

    >>> ctl = AdaptiveRate(100.0)  # paced at 99: PACE_MARGIN
    >>> round(ctl.on_rate_limited(now=10.0, sent_at=10.0, delay=1.0), 4)  # one early request
    0.0101
    >>> round(ctl.rate, 2), ctl.jitter_refusals  # is jitter: the rate stays, one slot is skipped
    (99.0, 1)
    """

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
        if not self.adaptive:
            self._pause(now, wait)
            return delay
        if sent_at < self._last_decrease:
            # sent before the last decrease: it says nothing about the current rate, and a coarse
            # hint does not lengthen the pause that decrease chose
            if self._coarse(delay) and self.rate is not None:
                return min(wait, 1.0 / self.rate)
            self._pause(now, wait)
            return delay
        cheap = cheap and reclaim and self._coarse(delay)  # a slot handed back, by one that was free
        if self._isolated(now, accepted, cheap):
            self.jitter_refusals += 1
            if self.rate is None:  # the first sign of a limit: hold the rate we were sending at
                recent = self._recent_rate(now)
                self.rate = None if recent is None else max(MIN_RATE, recent)
                if self.rate is not None:
                    self.refused_at = self.rate
                    self._searching = True
                # nothing known yet: a precise hint is followed; a coarse one ("Retry-After: 1")
                # after a first burst would cost a whole second, so resume at the rate sent so far
                # and search upwards from there
                pause = 1.0 / self.rate if self.rate is not None and self._coarse(delay) else wait
                self._pause(now, pause)
                self._last_change = max(now, self.blocked_until)
                self._last_decrease = now  # the rest of this burst's refusals say nothing new
                return pause
            # One refusal among many accepted sends is timing jitter at the limit (a request that
            # came a few milliseconds early), not a rate above it: keep the rate and stop probing
            # upwards (this is where the limit is). A precise or long hint is followed; a coarse
            # one ("Retry-After: 1", or none) would silence every sender for a whole second, when
            # one pacing interval is what the early request missed.
            short = min(wait, 1.0 / self.rate) if self._coarse(delay) else wait
            if now >= self._first_send + STARTUP_S:  # new connections' jitter is no steady gap
                self.spacing = min(self.spacing + SPACING_STEP * (CHEAP_WEIGHT if cheap else 1.0), SPACING_MAX)
            if reclaim and self._coarse(delay):
                self.reclaimed = True
                short = reclaim_delay(self.rate)
                if self._window and self._window[-1] == sent_at:
                    self._window.pop()  # refused: it holds no place in the server's window
            else:
                self._pause(now, short)
            if not (self._near_ceiling and self.refused_at is not None and self.refused_at > self.rate):
                # (after a cut of jitter at the configured rate, jitter below it does not say the
                # limit is lower: the rate still returns to the configured one)
                self.refused_at = self.rate
            self._probe = PROBE_MIN
            self._hold_until = now + HOLD_S
            self._last_change = max(now, self.blocked_until)
            return short
        self._searching = False
        # A few refusals among many accepted sends, bunched: the rate just crossed the limit (a
        # strict limiter then refuses about every other request). Step back gently from the rate
        # that crossed it. Many refusals: we are far above the limit, back off hard.
        recent = self._recent_share()
        crossed = self.rate is not None and recent <= CROSSED_SHARE
        # (a process sharing a budget sends only its share: that is no rate it was refused at)
        own = None if crossed or (self.shared and self.rate is not None) else self.measured(now)
        sending = [r for r in (self.rate, own) if r is not None]
        if not sending and (recent := self._recent_rate(now)) is not None:
            sending = [recent]
        current = min(sending) if sending else MIN_RATE
        if self.refused_at is not None and abs(current - self.refused_at) <= 0.1 * self.refused_at:
            self._probe = max(self._probe / 2, PROBE_MIN)
        else:
            self._probe = PROBE_STEP
        # A refusal after a long quiet stretch is the slow probe (or jitter) touching the limit:
        # step back gently. Refusals in quick succession mean we are far above it: back off hard.
        quiet = now - (self._last_decrease if self.decreases else self._first_send)
        beta = BETA_GENTLE if quiet > GENTLE_AFTER_S or crossed else BETA
        self.refused_at = current
        self._near_ceiling = (
            self.ceiling is not None
            and self.rate is not None
            and self.rate >= NEAR_CEILING * self.ceiling
            and (accepted is None or accepted >= JITTER_ACCEPTED * self.rate)
        )
        if self._near_ceiling and accepted is not None:
            beta = BETA_GENTLE  # a cluster of early requests at the configured rate, not a wrong rpm
        target = current * beta
        if accepted is not None and accepted * PACE_MARGIN < target:
            # far above the limit: go towards what the server accepted. Not all the way: just
            # above a strict limiter half the requests are refused, so the accepted count can be
            # half the limit; one episode cuts to MAX_CUT at most, and the recovery returns to the
            # accepted rate only when that is what the server really took. When most sends are
            # refused (FAR_SHARE), we are far above any limit and the count is the limit.
            self._near_ceiling = False
            if accepted >= current * MAX_CUT or recent >= FAR_SHARE:
                target = accepted * PACE_MARGIN
                self.refused_at = accepted
            else:  # either half a strict limiter's refusals or far above a bucket: meet halfway
                target = current * MAX_CUT
                self.refused_at = (accepted + current) / 2
        self.rate = max(MIN_RATE, target)
        self.decreases += 1
        # Above the limit, the lower rate is the answer. A precise or long hint is followed; a
        # coarse one ("Retry-After: 1", or none) only once the server accepted nothing in the last
        # second of sending, else a pause of one interval keeps a strict limiter's one-second hint
        # from silencing a run that is merely too fast.
        if self._coarse(delay) and self._accepting(sent_at):
            pause = min(wait, 1.0 / self.rate)
        else:
            pause = wait
        self._pause(now, pause)
        self._last_decrease = now
        self._last_change = max(now, self.blocked_until)
        self._sends.clear()
        return pause if delay is None or pause < delay else delay

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


class Limits:
    """Every limit of one endpoint; ``async with limits.slot(tokens) as sent_at:`` wraps one attempt."""

    def __init__(
        self,
        *,
        max_concurrency: int | None,
        rps: float | None,
        tpm: float | None,
        adaptive: bool = True,
        limit_share: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.control = AdaptiveRate(rps, adaptive=adaptive)
        self.configured_rps = rps
        self.limit_share = limit_share
        """This process's share of a limit the provider announces (0: announcements are ignored)."""
        self._announced: float | None = None
        self.cap = InFlightCap(max_concurrency)
        self._shared: Any = None
        self.max_concurrency = max_concurrency
        self.tpm = tpm
        self.in_flight = 0
        self._clock = clock
        self._due = -math.inf
        """The grid time of the last send."""
        self._pace_lock: TurnQueue | None = None
        self._wake: anyio.Event | None = None
        """Set when a slot is handed back: the sender waiting on the clock looks again at once."""
        self._last_send = -math.inf
        self._prev = (-math.inf, -math.inf)  # the send and grid time before the last send
        self._not_before = -math.inf  # a reclaimed slot: the next send waits at least until then
        self._reclaimed_at = -(2**31)  # the send count of the last reclaimed slot
        self._reclaim_sent = -math.inf  # when the send that took a reclaimed slot went out
        self._reclaim_failures = 0
        """Sends in a reclaimed slot refused too, in a row (the limiter counts its refusals)."""
        self._reclaim_ok = False
        """Whether the last send in a reclaimed slot was answered (not refused): refusals are cheap."""
        self._send_count = 0
        self.shared_skipped = 0
        """Slots of a shared budget let go because they were reached late."""
        self._lateness = 0.0
        """How late the event loop wakes a sleeping sender (moving average, seconds)."""
        self._token_debt = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sem: TurnQueue | None = None
        self._tokens: Any = None  # aiolimiter.AsyncLimiter (imported lazily)

    @property
    def shared(self) -> Any:
        """A :class:`~assay.judges.shared_limit.SharedRate` when the budget is shared via Redis:
        its reserved slots are the send times (this process's pacer then only keeps its own sends
        under the rate and honours pauses)."""
        return self._shared

    @shared.setter
    def shared(self, value: Any) -> None:
        self._shared = value
        self.control.shared = value is not None

    def _bind_loop(self) -> tuple[TurnQueue, Any]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._sem is None:
            self._loop = loop
            self._sem = TurnQueue(self._wanted_cap())
            self._pace_lock = TurnQueue(1)
            self._wake = anyio.Event()
            self._tokens = None
            if self.tpm is not None:
                from aiolimiter import AsyncLimiter

                burst = self.tpm * TOKEN_BURST_S / 60.0
                self._tokens = AsyncLimiter(burst, TOKEN_BURST_S)
        return self._sem, self._tokens

    @asynccontextmanager
    async def slot(self, estimated_tokens: int, priority: int = FIRST) -> AsyncIterator[float]:
        """Wait for a place in flight, token capacity and a send time; yield the send time.
        ``priority``: :data:`~assay.judges.turns.RETRY` goes ahead of first attempts in both lines
        (the in-flight places and the pacer), see :mod:`assay.judges.turns`."""
        sem, tokens = self._bind_loop()
        await sem.acquire(priority)
        try:
            if tokens is not None:
                amount = self._token_amount(estimated_tokens, float(tokens.max_rate))
                if amount > 0:
                    await tokens.acquire(amount)
            sent_at = await self._wait_turn(estimated_tokens, priority)
            self.in_flight += 1
            try:
                yield sent_at
            finally:
                self.in_flight -= 1
        finally:
            sem.release()

    def _wanted_cap(self) -> int:
        return self.cap.update(rate=self.control.current(self._clock()), in_flight=self.in_flight)

    def on_answer(self, latency: float, sent_at: float | None = None) -> None:
        """An answered request (any status but 429): feed its latency to the in-flight cap."""
        if sent_at is not None and sent_at == self._reclaim_sent:
            self._reclaim_failures = 0  # the reclaimed slot was free after all
            self._reclaim_ok = True
        self.cap.observe(latency)
        self._resize()

    def _resize(self) -> None:
        if self._sem is None or self.cap.fixed is not None:
            return
        wanted = self._wanted_cap()
        if wanted != self._sem.total:
            self._sem.total = wanted

    def _token_amount(self, estimated: int, capacity: float) -> float:
        amount = estimated + self._token_debt
        self._token_debt = min(amount, 0.0)  # carry a credit forward, never a debt
        return min(max(amount, 0.0), capacity)

    def settle_tokens(self, estimated: int, actual: int) -> None:
        """Correct the token bucket once the provider reported what the request really used."""
        if self.tpm is not None:
            self._token_debt += actual - estimated

    async def _wait_turn(self, estimated_tokens: int = 0, priority: int = FIRST) -> float:
        """Wait for this request's send time; senders queue one behind the other (FIFO), and only
        the first of them waits on the clock, so a new rate or a pause applies at once (no slots
        reserved ahead at an old rate).

        The send times follow a grid of ``1/rate``, two actual sends are never closer than
        ``min_gap`` (so a late send moves the grid) and the sliding window never holds more than
        the rate allows. Sleeps end early by the loop's usual lateness and the last
        fraction of a millisecond is waited by yielding, so sends land on time; the final check and
        the record happen with no await between them.

        With a budget shared through Redis, the sender whose turn it is then reserves the next
        slot of the shared stream and waits for it just as precisely (one reservation per process
        at a time, so the processes' sends interleave in Redis's order)."""
        control = self.control
        assert self._pace_lock is not None
        async with self._pace_lock.turn(priority):
            while True:
                now = self._clock()
                if now < control.blocked_until:
                    await anyio.sleep(control.blocked_until - now)
                    continue
                rate = control.current(now)
                if rate is None:
                    if self._shared is not None:
                        now = await self._shared_turn(estimated_tokens)
                    control.record_send(now)
                    self._last_send = self._due = now
                    return now
                interval = 1.0 / rate
                due = self._due + interval
                if due < now - interval:
                    due = now  # idle for a while: start a new grid, never a burst to catch up
                due = max(due, self._last_send + control.min_gap(rate), self._not_before)
                wait = max(due - now, control.window_wait(now, rate))
                if wait <= 0:
                    if self._shared is not None:
                        now = await self._shared_turn(estimated_tokens)
                    control.record_send(now)
                    if due == self._not_before:
                        self._reclaim_sent = now
                    self._prev = (self._last_send, self._due)
                    self._last_send = now
                    self._due = due
                    self._send_count += 1
                    return now
                if wait < min(BLOCK_S, BLOCK_SHARE * interval):
                    end = now + wait
                    while self._clock() < end:  # no await: nothing else may take the loop now
                        pass
                    continue
                if wait < SPIN_S:
                    await anyio.lowlevel.checkpoint()  # a timer would oversleep by about a millisecond
                    continue
                planned = now + max(wait - self._lateness - WAKE_EARLY_S, 0.0)
                assert self._wake is not None
                with anyio.move_on_after(planned - now) as timer:
                    await self._wake.wait()
                if timer.cancelled_caught:  # woken by the clock, not by a slot handed back
                    self._lateness = min(0.9 * self._lateness + 0.1 * (self._clock() - planned), MAX_LATENESS_S)

    async def _shared_turn(self, estimated_tokens: int) -> float:
        """Reserve the shared budget's next slot and wait for it (the last moments without
        yielding, as for a local slot); returns the send time.

        A slot this process reached late (the event loop busy with other work when it was due)
        is let go and another reserved: the next slot is another process's, and a strict limiter
        would refuse that send for coming too soon after this one (a refusal costs the slot too,
        plus a retry)."""
        shared = self._shared
        interval = shared.interval or 1.0
        late_by = SHARED_LATE_SHARE * interval
        while True:
            until = await shared.reserve_at(estimated_tokens, self._clock)
            while True:
                now = self._clock()
                wait = until - now
                if wait <= 0:
                    break
                if wait < min(BLOCK_S, BLOCK_SHARE * interval):
                    while self._clock() < until:  # no await: nothing else may take the loop now
                        pass
                    now = self._clock()
                    break
                planned = now + max(wait - self._lateness - WAKE_EARLY_S - BLOCK_S / 2, 0.0)
                await anyio.sleep(planned - now)
                self._lateness = min(0.9 * self._lateness + 0.1 * max(self._clock() - planned, 0.0), MAX_LATENESS_S)
            if now - until <= late_by or shared.interval is None:
                return now
            self.shared_skipped += 1

    def on_rate_limited(self, *, sent_at: float, delay: float | None) -> float | None:
        """A 429 for the request sent at ``sent_at``: returns how long that request should wait
        before it is tried again (the server's hint, or a single pacing interval when the refusal
        was timing jitter: the pacer then gives it the next free slot)."""
        now = self._clock()
        control = self.control
        if sent_at == self._reclaim_sent:
            self._reclaim_failures += 1  # this limiter counts what it refuses: its slot was not free
            self._reclaim_ok = False
        # the refused request was the last one sent, and the slot before it was not reclaimed
        # too (two in a row are no jitter)
        reclaim = (
            self._shared is None  # a shared slot is Redis's: the next one is already someone's
            and sent_at == self._last_send
            and self._send_count - self._reclaimed_at > (RECLAIM_EVERY if self._reclaim_ok else JITTER_RECENT)
            and self._reclaim_failures < RECLAIM_FAILURES
        )
        retry = control.on_rate_limited(now=now, sent_at=sent_at, delay=delay, reclaim=reclaim, cheap=self._reclaim_ok)
        if control.reclaimed and control.rate is not None:
            self._last_send, self._due = self._prev
            self._not_before = sent_at + reclaim_delay(control.rate)
            self._reclaimed_at = self._send_count
            if self._wake is not None:  # the sender asleep until the lost slot's successor
                self._wake.set()
                self._wake = anyio.Event()
        self._resize()
        return retry

    def announce(self, rpm: float) -> None:
        """The provider announced its request limit (per minute) in an answer: pace at this
        process's share of it when that is below the configured rate (or none is configured)."""
        if rpm == self._announced:
            return
        self._announced = rpm
        rps = rpm * self.limit_share / 60.0
        if self.configured_rps is not None:
            rps = min(rps, self.configured_rps)
        if self.control.set_ceiling(rps):
            self._resize()

    def snapshot(self) -> dict[str, Any]:
        control = self.control
        now = self._clock()
        rate = control.current(now)
        return {
            "rate_rpm": None if rate is None else round(rate * 60.0, 2),
            "configured_rpm": None if control.configured is None else round(control.configured * 60.0, 2),
            "rate_decreases": control.decreases,
            "jitter_429s": control.jitter_refusals,
            "shared_slots_skipped": self.shared_skipped,
            "paused_s": round(max(control.blocked_until - now, 0.0), 3),
            "in_flight": self.in_flight,
            "max_in_flight": self.cap.value,
        }
