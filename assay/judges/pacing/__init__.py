"""Pacing: the limits of one judge endpoint, composed in one place (:meth:`Limits.slot`):

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

The package, bottom up: :mod:`~assay.judges.pacing.constants` (every number with the reason for
its value), :mod:`~assay.judges.pacing.capacity` (:class:`InFlightCap`),
:mod:`~assay.judges.pacing.state` (what the controller knows and measures),
:mod:`~assay.judges.pacing.regimes` (what a 429 means: not adaptive, stale, first sign, jitter,
crossed/far, one function each, each returning a :class:`~assay.judges.pacing.regimes.Decision`),
:mod:`~assay.judges.pacing.controller` (:class:`AdaptiveRate`, which routes a 429 to its regime) and
:mod:`~assay.judges.pacing.limits` (:class:`Limits`, the pacer that composes them).
"""

from assay.judges.pacing.capacity import InFlightCap
from assay.judges.pacing.controller import AdaptiveRate
from assay.judges.pacing.limits import Limits
from assay.judges.pacing.regimes import Decision, Refusal, reclaim_delay

__all__ = ["AdaptiveRate", "Decision", "InFlightCap", "Limits", "Refusal", "reclaim_delay"]
