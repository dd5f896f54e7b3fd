"""What one 429 means, one function per regime; each changes the controller's state for its regime
and returns a :class:`Decision` (how long the refused request waits before it is tried again).

:func:`decide` picks the regime, in this order:

* **not adaptive** (``adaptive: false``): pause as the server says, change nothing else;
* **stale**: the request was sent before the last decrease, so it says nothing about the rate now;
* **first sign** of a limit while no rate is known: hold the rate that was being sent and search up;
* **jitter** at the limit: one early request among many accepted ones; keep the rate, widen the
  spacing a little, and hand the refused slot back when nothing was sent since;
* **crossed / far**: the rate is above the limit: step back gently when it has just crossed it,
  towards what the server accepted when it is far above.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from assay.judges.pacing.constants import (
    BETA,
    BETA_GENTLE,
    CHEAP_WEIGHT,
    CROSSED_SHARE,
    FAR_SHARE,
    GENTLE_AFTER_S,
    HOLD_S,
    JITTER_ACCEPTED,
    MAX_CUT,
    MIN_RATE,
    NEAR_CEILING,
    PACE_MARGIN,
    PROBE_MIN,
    PROBE_STEP,
    RECLAIM_MAX_SHARE,
    RECLAIM_MIN_S,
    RECLAIM_SHARE,
    SPACING_MAX,
    SPACING_STEP,
    STARTUP_S,
)
from assay.judges.pacing.state import RateState

Regime = Literal["not adaptive", "stale", "first sign", "jitter", "crossed/far"]


@dataclass(frozen=True)
class Refusal:
    """One 429, as the controller sees it."""

    now: float
    sent_at: float
    delay: float | None
    """The server's hint (seconds), None without one."""
    wait: float
    """The pause the refusal asks for: the hint, or DEFAULT_PAUSE_S without one."""
    accepted: float | None
    """What the server accepted in the second before the refused request (requests/s), when known."""
    reclaim: bool
    """Nothing was sent since the refused request: its slot may be handed back to the pacer."""
    cheap: bool
    """The last slot handed back was accepted: a reclaimed refusal costs a fraction of a slot."""


@dataclass(frozen=True)
class Decision:
    """The regime a 429 fell in and how long the refused request waits (None: no hint to follow)."""

    regime: Regime
    retry: float | None


def reclaim_delay(rate: float) -> float:
    """How long after a refused send (seconds) its slot is taken again, at ``rate`` requests/s."""
    return min(max(RECLAIM_SHARE / rate, RECLAIM_MIN_S), RECLAIM_MAX_SHARE / rate)


def decide(ctl: RateState, refusal: Refusal) -> Decision:
    """The regime of this 429 (see the module docstring), applied to ``ctl``."""
    if not ctl.adaptive:
        return not_adaptive(ctl, refusal)
    if refusal.sent_at < ctl._last_decrease:
        return stale(ctl, refusal)
    # a slot handed back, by one that was free
    refusal = replace(refusal, cheap=refusal.cheap and refusal.reclaim and ctl._coarse(refusal.delay))
    if ctl._isolated(refusal.now, refusal.accepted, refusal.cheap):
        ctl.jitter_refusals += 1
        if ctl.rate is None:
            return first_sign(ctl, refusal)
        return jitter(ctl, refusal, ctl.rate)
    return crossed_or_far(ctl, refusal)


def not_adaptive(ctl: RateState, r: Refusal) -> Decision:
    """The rate is fixed: everyone pauses as the server says."""
    ctl._pause(r.now, r.wait)
    return Decision("not adaptive", r.delay)


def stale(ctl: RateState, r: Refusal) -> Decision:
    """Sent before the last decrease: it says nothing about the current rate, and a coarse hint
    does not lengthen the pause that decrease chose."""
    if ctl._coarse(r.delay) and ctl.rate is not None:
        return Decision("stale", min(r.wait, 1.0 / ctl.rate))
    ctl._pause(r.now, r.wait)
    return Decision("stale", r.delay)


def first_sign(ctl: RateState, r: Refusal) -> Decision:
    """The first sign of a limit while no rate is known: hold the rate we were sending at."""
    now = r.now
    recent = ctl._recent_rate(now)
    ctl.rate = None if recent is None else max(MIN_RATE, recent)
    if ctl.rate is not None:
        ctl.refused_at = ctl.rate
        ctl._searching = True
    # nothing known yet: a precise hint is followed; a coarse one ("Retry-After: 1")
    # after a first burst would cost a whole second, so resume at the rate sent so far
    # and search upwards from there
    pause = 1.0 / ctl.rate if ctl.rate is not None and ctl._coarse(r.delay) else r.wait
    ctl._pause(now, pause)
    ctl._last_change = max(now, ctl.blocked_until)
    ctl._last_decrease = now  # the rest of this burst's refusals say nothing new
    return Decision("first sign", pause)


def jitter(ctl: RateState, r: Refusal, rate: float) -> Decision:
    """One refusal among many accepted sends at ``rate`` (the rate being sent)."""
    now = r.now
    # One refusal among many accepted sends is timing jitter at the limit (a request that
    # came a few milliseconds early), not a rate above it: keep the rate and stop probing
    # upwards (this is where the limit is). A precise or long hint is followed; a coarse
    # one ("Retry-After: 1", or none) would silence every sender for a whole second, when
    # one pacing interval is what the early request missed.
    short = min(r.wait, 1.0 / rate) if ctl._coarse(r.delay) else r.wait
    if now >= ctl._first_send + STARTUP_S:  # new connections' jitter is no steady gap
        ctl.spacing = min(ctl.spacing + SPACING_STEP * (CHEAP_WEIGHT if r.cheap else 1.0), SPACING_MAX)
    if r.reclaim and ctl._coarse(r.delay):
        ctl.reclaimed = True
        short = reclaim_delay(rate)
        if ctl._window and ctl._window[-1] == r.sent_at:
            ctl._window.pop()  # refused: it holds no place in the server's window
    else:
        ctl._pause(now, short)
    if not (ctl._near_ceiling and ctl.refused_at is not None and ctl.refused_at > rate):
        # (after a cut of jitter at the configured rate, jitter below it does not say the
        # limit is lower: the rate still returns to the configured one)
        ctl.refused_at = rate
    ctl._probe = PROBE_MIN
    ctl._hold_until = now + HOLD_S
    ctl._last_change = max(now, ctl.blocked_until)
    return Decision("jitter", short)


def crossed_or_far(ctl: RateState, r: Refusal) -> Decision:
    """The rate is above the limit: cut it once per episode (gently when it just crossed the limit,
    towards what the server accepted when far above), and pause."""
    now, accepted, delay, wait = r.now, r.accepted, r.delay, r.wait
    ctl._searching = False
    # A few refusals among many accepted sends, bunched: the rate just crossed the limit (a
    # strict limiter then refuses about every other request). Step back gently from the rate
    # that crossed it. Many refusals: we are far above the limit, back off hard.
    recent: float | None  # the refused share; reused below for a rough rate when no rate is known
    recent = ctl._recent_share()
    crossed = ctl.rate is not None and recent <= CROSSED_SHARE
    # (a process sharing a budget sends only its share: that is no rate it was refused at)
    own = None if crossed or (ctl.shared and ctl.rate is not None) else ctl.measured(now)
    sending = [s for s in (ctl.rate, own) if s is not None]
    if not sending and (recent := ctl._recent_rate(now)) is not None:
        sending = [recent]
    current = min(sending) if sending else MIN_RATE
    if ctl.refused_at is not None and abs(current - ctl.refused_at) <= 0.1 * ctl.refused_at:
        ctl._probe = max(ctl._probe / 2, PROBE_MIN)
    else:
        ctl._probe = PROBE_STEP
    # A refusal after a long quiet stretch is the slow probe (or jitter) touching the limit:
    # step back gently. Refusals in quick succession mean we are far above it: back off hard.
    quiet = now - (ctl._last_decrease if ctl.decreases else ctl._first_send)
    beta = BETA_GENTLE if quiet > GENTLE_AFTER_S or crossed else BETA
    ctl.refused_at = current
    ctl._near_ceiling = (
        ctl.ceiling is not None
        and ctl.rate is not None
        and ctl.rate >= NEAR_CEILING * ctl.ceiling
        and (accepted is None or accepted >= JITTER_ACCEPTED * ctl.rate)
    )
    if ctl._near_ceiling and accepted is not None:
        beta = BETA_GENTLE  # a cluster of early requests at the configured rate, not a wrong rpm
    target = current * beta
    if accepted is not None and accepted * PACE_MARGIN < target:
        # far above the limit: go towards what the server accepted. Not all the way: just
        # above a strict limiter half the requests are refused, so the accepted count can be
        # half the limit; one episode cuts to MAX_CUT at most, and the recovery returns to the
        # accepted rate only when that is what the server really took. When most sends are
        # refused (FAR_SHARE), we are far above any limit and the count is the limit.
        ctl._near_ceiling = False
        if accepted >= current * MAX_CUT or recent >= FAR_SHARE:
            target = accepted * PACE_MARGIN
            ctl.refused_at = accepted
        else:  # either half a strict limiter's refusals or far above a bucket: meet halfway
            target = current * MAX_CUT
            ctl.refused_at = (accepted + current) / 2
    ctl.rate = max(MIN_RATE, target)
    ctl.decreases += 1
    # Above the limit, the lower rate is the answer. A precise or long hint is followed; a
    # coarse one ("Retry-After: 1", or none) only once the server accepted nothing in the last
    # second of sending, else a pause of one interval keeps a strict limiter's one-second hint
    # from silencing a run that is merely too fast.
    if ctl._coarse(delay) and ctl._accepting(r.sent_at):
        pause = min(wait, 1.0 / ctl.rate)
    else:
        pause = wait
    ctl._pause(now, pause)
    ctl._last_decrease = now
    ctl._last_change = max(now, ctl.blocked_until)
    ctl._sends.clear()
    return Decision("crossed/far", pause if delay is None or pause < delay else delay)
