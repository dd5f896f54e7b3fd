"""Each regime of a 429 is one function of ``assay.judges.pacing.regimes``; the controller records
which one decided (simulated time: every ``now`` is given)."""

from __future__ import annotations

from assay.judges.pacing import AdaptiveRate, Decision
from assay.judges.pacing.constants import PACE_MARGIN


def sends(ctl: AdaptiveRate, start: float, count: int, every: float) -> float:
    for i in range(count):
        ctl.record_send(start + i * every)
    return start + (count - 1) * every


def test_a_rate_that_is_not_adaptive_only_pauses() -> None:
    ctl = AdaptiveRate(10.0, adaptive=False)
    assert ctl.on_rate_limited(now=5.0, sent_at=5.0, delay=2.0) == 2.0
    assert ctl.last_decision == Decision("not adaptive", 2.0)
    assert ctl.rate == 10.0 * PACE_MARGIN and ctl.blocked_until == 7.0


def test_one_early_request_is_jitter_and_many_refusals_cut_the_rate() -> None:
    ctl = AdaptiveRate(100.0)
    last = sends(ctl, 10.0, 300, 0.01)
    ctl.on_rate_limited(now=last + 0.001, sent_at=last, delay=1.0)
    assert ctl.last_decision is not None and ctl.last_decision.regime == "jitter"
    assert ctl.rate == 100.0 * PACE_MARGIN and ctl.decreases == 0
    now = last
    for _ in range(12):  # refused every other send: the rate is above the limit
        now = sends(ctl, now + 0.01, 2, 0.01)
        ctl.on_rate_limited(now=now + 0.001, sent_at=now, delay=1.0)
        if ctl.decreases:
            break
    assert ctl.last_decision is not None and ctl.last_decision.regime == "crossed/far"
    assert ctl.decreases == 1 and ctl.rate is not None and ctl.rate < 100.0 * PACE_MARGIN


def test_a_refusal_of_a_request_sent_before_the_cut_is_stale() -> None:
    ctl = AdaptiveRate(100.0)
    last = sends(ctl, 10.0, 300, 0.01)
    for i in range(40):  # a burst of refusals: cut once
        ctl.on_rate_limited(now=last + 0.001 * (i + 1), sent_at=last - 0.001 * (40 - i), delay=None)
    assert ctl.decreases >= 1
    rate = ctl.rate
    retry = ctl.on_rate_limited(now=last + 0.1, sent_at=last - 0.5, delay=1.0)
    assert ctl.last_decision is not None and ctl.last_decision.regime == "stale"
    assert ctl.rate == rate and rate is not None and retry == min(1.0, 1.0 / rate)


def test_the_first_sign_of_a_limit_holds_the_rate_being_sent() -> None:
    ctl = AdaptiveRate(None)  # no rpm: unlimited until the server says otherwise
    last = sends(ctl, 10.0, 40, 0.05)  # 20 per second
    ctl.on_rate_limited(now=last + 0.001, sent_at=last, delay=1.0)
    assert ctl.last_decision is not None and ctl.last_decision.regime == "first sign"
    assert ctl.rate is not None and 15.0 < ctl.rate < 25.0
