"""Confidence intervals: Wilson for pass rates, Student's t and a seeded bootstrap for means.

>>> [round(x, 4) for x in wilson_interval(45, 50)]
[0.7864, 0.9565]
>>> [round(x, 4) for x in t_interval(0.8, 0.04 / 30, 29)]
[0.7253, 0.8747]
>>> lo, hi = bootstrap_mean_interval([0.1, 0.4, 0.5, 0.9, 1.0], seed=1)
>>> lo < 0.58 < hi
True
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Literal

from assay.stats.distributions import normal_cdf, normal_ppf, t_ppf

__all__ = ["bootstrap_mean_interval", "percentile", "t_interval", "wilson_interval"]

Interval = tuple[float, float]


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    return normal_ppf(1.0 - (1.0 - level) / 2.0)


def wilson_interval(successes: float, n: float, level: float = 0.95) -> Interval:
    """The Wilson score interval of a proportion, without continuity correction.

    ``n`` may be an effective sample size (not an integer) and ``successes`` then ``p * n``: that
    is how weighted and clustered pass rates get their interval (see :mod:`assay.stats.moments`).
    """
    if n <= 0:
        raise ValueError("wilson_interval: n must be positive")
    z = _z(level)
    p = successes / n
    z2n = z * z / n
    center = (p + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * math.sqrt(max(p * (1.0 - p), 0.0) / n + z2n / (4.0 * n))
    return max(0.0, center - half), min(1.0, center + half)


def t_interval(mean: float, variance_of_mean: float, df: float, level: float = 0.95) -> Interval:
    """``mean ± t(df) * sqrt(variance_of_mean)``: the variance is of the estimate (s²/n for a
    plain mean), ``df`` its degrees of freedom (n - 1; clusters - 1 for a clustered mean)."""
    if df <= 0:
        raise ValueError("t_interval: needs at least one degree of freedom")
    half = t_ppf(1.0 - (1.0 - level) / 2.0, df) * math.sqrt(max(variance_of_mean, 0.0))
    return mean - half, mean + half


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of sorted values, interpolated linearly (numpy's default)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_mean_interval(
    values: Sequence[float],
    level: float = 0.95,
    *,
    resamples: int = 9999,
    seed: int = 0,
    method: Literal["bca", "percentile"] = "bca",
) -> Interval:
    """A bootstrap interval of the mean of ``values`` (seeded: the same data and seed give the
    same interval; 9,999 resamples by default, as scipy). ``bca`` (bias-corrected and
    accelerated, the default of ``scipy.stats.bootstrap``) or ``percentile``. Costs
    ``resamples * len(values)`` draws: use it on small samples and :func:`t_interval` on large
    ones."""
    n = len(values)
    if n < 2:
        raise ValueError("bootstrap_mean_interval: needs at least two values")
    rng = random.Random(seed)
    data = list(values)
    means = sorted(math.fsum(rng.choices(data, k=n)) / n for _ in range(resamples))
    alpha = (1.0 - level) / 2.0
    if method == "percentile":
        return percentile(means, alpha), percentile(means, 1.0 - alpha)
    mean = math.fsum(data) / n
    below = sum(m < mean for m in means) + sum(m <= mean for m in means)
    share = below / (2.0 * resamples)
    if share <= 0.0 or share >= 1.0:  # the bootstrap distribution lies on one side: no correction possible
        return percentile(means, alpha), percentile(means, 1.0 - alpha)
    z0 = normal_ppf(share)
    # jackknife acceleration: leave-one-out means differ from the mean by (x_i - mean) / (n - 1)
    dev = [x - mean for x in data]
    num = math.fsum(d**3 for d in dev)
    den = 6.0 * math.fsum(d * d for d in dev) ** 1.5
    accel = num / den if den > 0 else 0.0
    bounds = []
    for a in (alpha, 1.0 - alpha):
        za = normal_ppf(a)
        bounds.append(normal_cdf(z0 + (z0 + za) / (1.0 - accel * (z0 + za))))
    return percentile(means, bounds[0]), percentile(means, bounds[1])
