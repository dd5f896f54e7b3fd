"""Two independent samples: two runs over different traces (two nights of production traffic share
no trace id), compared per result key without pairing.

* **Pass rates**: the two-proportion z-test (pooled variance under the null; the same p-value as
  a chi-square test of the 2x2 table without continuity correction) and Newcombe's hybrid score
  interval of the difference (from the two Wilson intervals; it keeps its coverage near 0 and 1).
* **Mean scores**: Welch's t-test (unequal variances, Welch–Satterthwaite degrees of freedom) and
  its t interval of the difference.

Both take a key's :class:`~assay.stats.moments.Moments` (what every summary stores). With
sampling weights or clusters, the estimates' own variances (those of the summary's intervals) are
used: the pass rates on their effective sample sizes, the means with the sandwich variance and its
degrees of freedom; without them these are the textbook tests.

>>> from assay.stats import Moments
>>> before, after = Moments(), Moments()
>>> for i in range(200):
...     before.add(1.0 if i % 10 < 8 else 0.0, i % 10 < 8)
...     after.add(1.0 if i % 10 < 6 else 0.0, i % 10 < 6)
>>> d = two_proportion_difference(before, after)
>>> round(d.delta, 2), d.p_value < 0.001, d.method
(-0.2, True, 'two-proportion z-test')
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from assay.stats.distributions import normal_cdf, t_cdf, t_ppf
from assay.stats.intervals import Interval, wilson_interval
from assay.stats.moments import Moments

__all__ = ["UnpairedDelta", "newcombe_interval", "two_proportion_difference", "welch_difference"]

TWO_PROPORTION = "two-proportion z-test"
WELCH = "Welch t-test"


@dataclass(frozen=True, slots=True)
class UnpairedDelta:
    """``after - before`` of one statistic of two independent samples, its interval and test."""

    n_before: float
    n_after: float
    delta: float
    interval: Interval | None
    p_value: float | None
    method: str
    """The test: ``two-proportion z-test`` or ``Welch t-test``."""
    interval_method: str
    """``Newcombe`` (pass rates) or ``Welch t`` (means)."""


def newcombe_interval(x1: float, n1: float, x2: float, n2: float, level: float = 0.95) -> Interval:
    """Newcombe's hybrid score interval of ``x2/n2 - x1/n1`` (method 10 of Newcombe 1998)."""
    p1, p2 = x1 / n1, x2 / n2
    l1, u1 = wilson_interval(x1, n1, level)
    l2, u2 = wilson_interval(x2, n2, level)
    d = p2 - p1
    return (d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2), d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2))


def _pass_sample(m: Moments) -> tuple[float, float] | None:
    """Passes and sample size: the counts, or the weighted pass rate on its effective sample size."""
    p, n = m.pass_rate, m.effective_n()
    if p is None or n is None or n <= 0:
        return None
    return p * n, n


def two_proportion_difference(before: Moments, after: Moments, level: float = 0.95) -> UnpairedDelta | None:
    """The change of the pass rate between two independent samples: the pooled two-proportion
    z-test and Newcombe's interval (None when a sample is empty)."""
    a, b = _pass_sample(before), _pass_sample(after)
    if a is None or b is None:
        return None
    (x1, n1), (x2, n2) = a, b
    delta = x2 / n2 - x1 / n1
    pooled = (x1 + x2) / (n1 + n2)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2))
    if se > 0:
        p_value: float | None = min(1.0, 2.0 * normal_cdf(-abs(delta) / se))
    else:  # every trace of both samples passed (or failed): nothing differs
        p_value = 1.0
    interval = newcombe_interval(x1, n1, x2, n2, level)
    return UnpairedDelta(n1, n2, delta, interval, p_value, TWO_PROPORTION, "Newcombe")


def welch_difference(before: Moments, after: Moments, level: float = 0.95) -> UnpairedDelta | None:
    """The change of the mean score between two independent samples: Welch's t-test and interval
    (None when a sample has no mean; no test when a sample has fewer than two scores)."""
    m1, m2 = before.mean, after.mean
    if m1 is None or m2 is None:
        return None
    delta = m2 - m1
    v1, v2 = before.mean_variance(), after.mean_variance()
    if v1 is None or v2 is None:
        return UnpairedDelta(before.n, after.n, delta, None, None, WELCH, "Welch t")
    (s1, df1), (s2, df2) = v1, v2
    var = s1 + s2
    if var <= 0:  # both samples constant
        return UnpairedDelta(before.n, after.n, delta, (delta, delta), 1.0 if delta == 0 else 0.0, WELCH, "Welch t")
    df = var * var / ((s1 * s1 / df1 if s1 else 0.0) + (s2 * s2 / df2 if s2 else 0.0))
    se = math.sqrt(var)
    p_value = min(1.0, 2.0 * t_cdf(-abs(delta) / se, df))
    half = t_ppf(0.5 + level / 2.0, df) * se
    return UnpairedDelta(before.n, after.n, delta, (delta - half, delta + half), p_value, WELCH, "Welch t")
