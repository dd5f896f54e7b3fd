"""The pacing's numbers, each with the reason for its value (see :mod:`assay.judges.pacing`).

Measured figures quoted here come from ``benchmarks/`` (strict limiters at 30 req/s on a loaded machine).
"""

from __future__ import annotations

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
