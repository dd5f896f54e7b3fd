"""The few distribution functions the intervals and tests need, in pure Python.

Normal quantiles come from :class:`statistics.NormalDist`; Student's t and the binomial tail come
from the regularized incomplete beta function (a continued fraction, accurate to about 1e-13), so
importing assay never imports scipy.

>>> round(t_ppf(0.975, 10), 4), round(normal_ppf(0.975), 4)
(2.2281, 1.96)
>>> round(binom_cdf(3, 20, 0.5), 6)
0.001288
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["betainc", "binom_cdf", "normal_cdf", "normal_ppf", "t_cdf", "t_pdf", "t_ppf"]

_STD = NormalDist()
_EPS = 1e-15
_TINY = 1e-300


def normal_ppf(p: float) -> float:
    """The standard normal quantile."""
    return _STD.inv_cdf(p)


def normal_cdf(x: float) -> float:
    """The standard normal distribution function."""
    return _STD.cdf(x)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function with ``df`` degrees of freedom."""
    if math.isinf(df):
        return normal_cdf(t)
    t2 = t * t
    if t2 < df:  # near the centre: the central mass directly (no 1 - tail cancellation)
        half = 0.5 * betainc(0.5, df / 2.0, t2 / (df + t2))
        return 0.5 + half if t > 0 else 0.5 - half
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t2))
    return 1.0 - tail if t > 0 else tail


def t_pdf(t: float, df: float) -> float:
    """Student's t density."""
    ln = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(ln - (df + 1) / 2 * math.log1p(t * t / df))


def _cornish_fisher(z: float, df: float) -> float:
    """The t quantile from the normal one (Cornish-Fisher expansion; exact to O(df^-5))."""
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def t_ppf(p: float, df: float) -> float:
    """Student's t quantile: Newton's method on :func:`t_cdf` from the Cornish-Fisher start
    (a few steps), bisection when Newton leaves its bracket (very few degrees of freedom)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_ppf: p must be in (0, 1), got {p}")
    if df > 1e7:
        return normal_ppf(p)
    if p < 0.5:
        return -t_ppf(1.0 - p, df)
    if p == 0.5:
        return 0.0
    t = _cornish_fisher(normal_ppf(p), df)
    if df >= 2000 and p <= 0.9995:  # the expansion alone is exact to ~1e-10 there (and ~100x faster)
        return t
    t = max(t, 1e-12)
    lo, hi = 0.0, math.inf
    for _ in range(60):
        err = t_cdf(t, df) - p
        if err < 0:
            lo = t
        else:
            hi = t
        step = err / t_pdf(t, df)
        nxt = t - step
        if not lo < nxt < hi:  # Newton overshot: bisect the bracket (or widen it)
            nxt = (lo + hi) / 2 if math.isfinite(hi) else 2 * t
        if abs(nxt - t) <= 1e-12 * max(1.0, abs(t)):
            return nxt
        t = nxt
    return t


def binom_cdf(k: int, n: int, p: float = 0.5) -> float:
    """P(X <= k) for X ~ Binomial(n, p): exact sums up to n = 2000, the incomplete beta above."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if n <= 2000 and p == 0.5:
        total = sum(math.comb(n, i) for i in range(k + 1))
        return float(total / 2**n)
    return betainc(n - k, k + 1, 1.0 - p)
