"""A mergeable accumulator of one result key's scores: the sufficient statistics of its intervals.

A run's summary is built from streamed rows, in several writers, shards and resumed attempts, so
the statistics must be small and mergeable: :class:`Moments` keeps sums (of weights, weighted
scores and passes, and of their squares), plus one small record per cluster when the traces are
clustered (``stats.cluster_by``). Merging two accumulators adds their sums, so shards and a merge
give the same intervals as one run.

Estimates and their variance (one formula covers the four cases):

* the estimate is the weighted mean ``Σ w·x / Σ w`` (weights from ``metadata.sample_weight`` of a
  sampled evaluator's results; 1 when absent, which gives the plain mean);
* its variance is the linearized (sandwich) variance ``G/(G-1) · Σ_g (Σ_{i∈g} w_i (x_i - μ))² / (Σ w)²``
  over clusters g; without clusters each trace is its own cluster, and with unit weights that is
  exactly ``s²/n``;
* the mean's interval is Student's t with ``G - 1`` degrees of freedom (n - 1 without clusters);
* the pass rate's interval is Wilson's; weighted or clustered, Wilson's on the effective sample
  size ``p(1-p)/Var(p)`` (Kish's design-effect adjustment), so it stays inside [0, 1].

>>> m = Moments()
>>> for x in (1.0, 0.0, 1.0, 1.0):
...     m.add(x, x >= 0.5)
>>> m.mean, [round(v, 4) for v in m.pass_rate_interval()]
(0.75, [0.3006, 0.9544])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.stats.intervals import Interval, t_interval, wilson_interval

__all__ = ["Moments", "sample_weight"]

_FIELDS = ("n", "sx", "sxx", "sp", "nw", "w_w", "wx_w", "wp_w", "w2_w", "w2x_w", "w2x2_w", "w2p_w")
_TOTALS = ("w", "wx", "wp", "w2", "w2x", "w2x2", "w2p")


def sample_weight(metadata: Mapping[str, Any] | None) -> float:
    """The weight of one result: ``metadata.sample_weight`` (an inverse sampling probability),
    1.0 when absent or not a positive finite number."""
    if not metadata:
        return 1.0
    w = metadata.get("sample_weight")
    if isinstance(w, int | float) and not isinstance(w, bool) and math.isfinite(w) and w > 0:
        return float(w)
    return 1.0


@dataclass(slots=True)
class Moments:
    """Sums of one key's scored results (see the module docstring); ``clusters``: cluster id →
    ``[n, Σw, Σw·x, Σw·pass]`` when the run clusters its traces.

    Results of weight 1 (every result of an unsampled evaluator) only add to ``sx``, ``sxx`` and
    ``sp`` (the hot path: four additions); other weights add to the ``_w`` sums. :attr:`w`,
    :attr:`wx`, … are the totals over both."""

    n: int = 0
    sx: float = 0.0
    sxx: float = 0.0
    sp: float = 0.0
    nw: int = 0
    w_w: float = 0.0
    wx_w: float = 0.0
    wp_w: float = 0.0
    w2_w: float = 0.0
    w2x_w: float = 0.0
    w2x2_w: float = 0.0
    w2p_w: float = 0.0
    clusters: dict[str, list[float]] | None = field(default=None)
    _between: list[float] = field(default_factory=lambda: [0.0] * 5, repr=False, compare=False)
    """Σ over clusters of Σw², (Σw·x)², Σw·x·Σw, (Σw·pass)², Σw·pass·Σw: kept up to date as
    clusters change, so an interval costs O(1) however many clusters (the metrics observer asks
    for one after every batch)."""

    def add(self, x: float, passed: bool, weight: float = 1.0, cluster: str | None = None) -> None:
        """One scored result: its score, whether it passed, its weight and its cluster id."""
        self.n += 1
        if weight == 1.0:
            self.sx += x
            self.sxx += x * x
            if passed:
                self.sp += 1.0
        else:
            w, p = weight, (1.0 if passed else 0.0)
            w2 = w * w
            self.nw += 1
            self.w_w += w
            self.wx_w += w * x
            self.wp_w += w * p
            self.w2_w += w2
            self.w2x_w += w2 * x
            self.w2x2_w += w2 * x * x
            self.w2p_w += w2 * p
        if cluster is not None:
            self._add_to_cluster(cluster, [1.0, weight, weight * x, weight if passed else 0.0])

    def _add_to_cluster(self, cluster: str, sums: list[float]) -> None:
        if self.clusters is None:
            self.clusters = {}
        c = self.clusters.get(cluster)
        if c is None:
            c = self.clusters[cluster] = [0.0, 0.0, 0.0, 0.0]
        else:
            self._count(c, -1.0)
        for i in range(4):
            c[i] += sums[i]
        self._count(c, 1.0)

    def merge(self, other: Moments) -> None:
        """Add another accumulator's sums (another writer, shard or attempt)."""
        for name in _FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.clusters:
            for cid, c in other.clusters.items():
                self._add_to_cluster(cid, c)

    @property
    def weighted(self) -> bool:
        """Whether some result had a weight other than 1."""
        return self.nw > 0

    @property
    def _unit(self) -> float:
        return float(self.n - self.nw)

    @property
    def w(self) -> float:
        """Σw."""
        return self._unit + self.w_w

    @property
    def wx(self) -> float:
        """Σw·x."""
        return self.sx + self.wx_w

    @property
    def wp(self) -> float:
        """Σw·pass."""
        return self.sp + self.wp_w

    @property
    def w2(self) -> float:
        """Σw²."""
        return self._unit + self.w2_w

    @property
    def w2x(self) -> float:
        """Σw²·x."""
        return self.sx + self.w2x_w

    @property
    def w2x2(self) -> float:
        """Σw²·x²."""
        return self.sxx + self.w2x2_w

    @property
    def w2p(self) -> float:
        """Σw²·pass."""
        return self.sp + self.w2p_w

    def _count(self, c: list[float], sign: float) -> None:
        """Add (sign 1) or take out (-1) one cluster's share of the between-cluster sums."""
        _, w, wx, wp = c
        b = self._between
        b[0] += sign * w * w
        b[1] += sign * wx * wx
        b[2] += sign * wx * w
        b[3] += sign * wp * wp
        b[4] += sign * wp * w

    @property
    def mean(self) -> float | None:
        """The (weighted) mean score."""
        return self.wx / self.w if self.w > 0 else None

    @property
    def pass_rate(self) -> float | None:
        """The (weighted) share of passing results."""
        return self.wp / self.w if self.w > 0 else None

    @property
    def clustered(self) -> bool:
        return bool(self.clusters)

    @property
    def weights_vary(self) -> bool:
        """Whether the weights differ (equal weights, such as one sampling rate, estimate exactly
        as no weights do): ``n·Σw² > (Σw)²`` beyond rounding."""
        return self.weighted and self.n * self.w2 - self.w * self.w > 1e-9 * self.w * self.w

    def _variance(self, mu: float, which: int) -> tuple[float, float] | None:
        """Variance of the estimate and its degrees of freedom; ``which`` 2: scores, 3: passes."""
        if self.w <= 0:
            return None
        if self.clusters:
            g = len(self.clusters)
            if g < 2:
                return None
            b = self._between
            sq, cross = (b[1], b[2]) if which == 2 else (b[3], b[4])  # Σ_g (s_g - μ w_g)², expanded
            ss = max(sq - 2.0 * mu * cross + mu * mu * b[0], 0.0)
            return g / (g - 1) * ss / (self.w * self.w), float(g - 1)
        if self.n < 2:
            return None
        if which == 2:
            ss = self.w2x2 - 2.0 * mu * self.w2x + mu * mu * self.w2
        else:  # a pass is 0 or 1, so its square is itself
            ss = self.w2p - 2.0 * mu * self.w2p + mu * mu * self.w2
        n = self.n
        return n / (n - 1) * max(ss, 0.0) / (self.w * self.w), float(n - 1)

    def mean_variance(self) -> tuple[float, float] | None:
        """The variance of :attr:`mean` and its degrees of freedom (those of :meth:`mean_interval`);
        None below two results (or two clusters)."""
        mu = self.mean
        return None if mu is None else self._variance(mu, 2)

    def mean_interval(self, level: float = 0.95) -> Interval | None:
        """The interval of the mean (t; see the module docstring); None below two results (or
        two clusters)."""
        mu = self.mean
        v = None if mu is None else self._variance(mu, 2)
        if mu is None or v is None:
            return None
        return t_interval(mu, v[0], v[1], level)

    def effective_n(self) -> float | None:
        """The sample size a simple random sample would need for the pass rate's precision."""
        p = self.pass_rate
        if p is None:
            return None
        if not (self.weights_vary or self.clusters):  # equal weights: the plain sample size
            return float(self.n)
        v = self._variance(p, 3)
        if v is None or v[0] <= 0.0:  # all pass or all fail: no variance to scale by; Kish's n
            return self.w * self.w / self.w2 if self.w2 > 0 else None
        return p * (1.0 - p) / v[0]

    def pass_rate_interval(self, level: float = 0.95) -> Interval | None:
        """Wilson's interval of the pass rate (on the effective sample size when weighted or
        clustered); None without results."""
        p, n_eff = self.pass_rate, self.effective_n()
        if p is None or n_eff is None or n_eff <= 0:
            return None
        return wilson_interval(p * n_eff, n_eff, level)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {name: getattr(self, name) for name in _FIELDS[:4]}
        if self.nw:
            d.update({name: getattr(self, name) for name in _FIELDS[4:]})
        if self.clusters:
            d["clusters"] = self.clusters
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Moments:
        m = cls()
        if "sx" not in d and "w" in d:  # totals only (an earlier format): all of it as weighted sums
            m.n = m.nw = int(d.get("n", 0))
            for total in _TOTALS:
                setattr(m, f"{total}_w", float(d.get(total, 0.0)))
        else:
            for name in _FIELDS:
                value = d.get(name, 0)
                setattr(m, name, int(value) if name in ("n", "nw") else float(value))
        clusters = d.get("clusters")
        if isinstance(clusters, Mapping) and clusters:
            m.clusters = {str(k): [float(x) for x in v] for k, v in clusters.items()}
            for c in m.clusters.values():
                m._count(c, 1.0)
        return m
