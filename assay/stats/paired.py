"""Tests for two runs scored on the same traces: McNemar, Wilcoxon, a paired interval, Holm.

>>> mcnemar_exact(12, 3)  # 12 traces went pass -> fail, 3 fail -> pass
0.03515625
>>> holm([0.01, 0.04, 0.03])
[0.03, 0.06, 0.06]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from assay.stats.distributions import binom_cdf, normal_cdf
from assay.stats.intervals import Interval, bootstrap_mean_interval, t_interval

__all__ = ["PairedDelta", "average_ranks", "holm", "mcnemar_exact", "paired_delta", "wilcoxon_signed_rank"]

#: Up to this many pairs a delta's interval is a seeded bootstrap; above it, Student's t (the
#: bootstrap costs resamples x n draws, and at that size the two agree).
BOOTSTRAP_MAX_N = 200


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact two-sided test of ``b`` discordant pairs one way against ``c`` the other
    (``2 * P(X <= min(b, c))``, X ~ Binomial(b + c, 1/2), capped at 1); 1.0 without discordance."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binom_cdf(min(b, c), n, 0.5))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (same order as given)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def average_ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Average ranks (1-based, ties share their mean rank) and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _wilcoxon_exact_sf(n: int, stat: int) -> tuple[float, float]:
    """P(T <= stat) and P(T >= stat) for the signed-rank statistic of n pairs without ties."""
    top = n * (n + 1) // 2
    counts = [0] * (top + 1)
    counts[0] = 1
    for k in range(1, n + 1):
        for s in range(top, k - 1, -1):
            counts[s] += counts[s - k]
    total = 2**n
    below = sum(counts[: stat + 1])
    above = sum(counts[stat:])
    return below / total, above / total


def _wilcoxon_permutation(ranks: Sequence[float], observed: float) -> float:
    """Two-sided p of the signed-rank statistic over every sign assignment (few pairs, with ties)."""
    gamma = abs(observed) * 100 * 2.220446049250313e-16  # scipy's tolerance for equal statistics
    m = len(ranks)
    ge = le = 0
    for mask in range(1 << m):
        stat = math.fsum(r for i, r in enumerate(ranks) if mask >> i & 1)
        ge += stat >= observed - gamma
        le += stat <= observed + gamma
    return min(1.0, 2.0 * min(ge, le) / (1 << m))


def wilcoxon_signed_rank(differences: Sequence[float]) -> float:
    """The two-sided p-value of Wilcoxon's signed-rank test (zeros dropped), as
    ``scipy.stats.wilcoxon`` computes it by default: exact up to 50 pairs without ties or zeros;
    with ties or zeros, exact over every sign assignment up to 13 pairs, else the normal
    approximation with the tie correction and no continuity correction. 1.0 when every
    difference is zero."""
    d = [x for x in differences if x != 0]
    n = len(d)
    if n == 0:
        return 1.0
    ranks, ties = average_ranks([abs(x) for x in d])
    r_plus = math.fsum(r for r, x in zip(ranks, d, strict=True) if x > 0)
    clean = all(t == 1 for t in ties) and len(d) == len(differences)
    if n <= 50 and clean:
        below, above = _wilcoxon_exact_sf(n, round(r_plus))
        return min(1.0, 2.0 * min(below, above))
    if len(differences) <= 13:
        return _wilcoxon_permutation(ranks, r_plus)
    mean = n * (n + 1) / 4.0
    var = (n * (n + 1) * (2 * n + 1) - sum(t**3 - t for t in ties) / 2.0) / 24.0
    if var <= 0:
        return 1.0
    z = (r_plus - mean) / math.sqrt(var)
    return min(1.0, 2.0 * normal_cdf(-abs(z)))


@dataclass(frozen=True, slots=True)
class PairedDelta:
    """The mean of paired differences (after - before) and its interval."""

    n: int
    delta: float
    interval: Interval | None
    method: str
    """``bootstrap`` (seeded BCa) or ``t``."""


def paired_delta(
    differences: Sequence[float], level: float = 0.95, *, seed: int = 0, bootstrap_max_n: int = BOOTSTRAP_MAX_N
) -> PairedDelta | None:
    """The mean difference and its interval: a seeded paired bootstrap up to ``bootstrap_max_n``
    pairs, Student's t above (and whenever all differences are equal, where both are a point)."""
    n = len(differences)
    if n == 0:
        return None
    mean = math.fsum(differences) / n
    if n < 2:
        return PairedDelta(n, mean, None, "t")
    if n <= bootstrap_max_n and min(differences) != max(differences):
        return PairedDelta(n, mean, bootstrap_mean_interval(differences, level, seed=seed), "bootstrap")
    var = math.fsum((x - mean) ** 2 for x in differences) / (n - 1)
    return PairedDelta(n, mean, t_interval(mean, var / n, n - 1, level), "t")
