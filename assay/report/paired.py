"""The paired statistics of two runs on the same traces: per result key, the change in pass rate
and mean score with intervals, McNemar's exact test, Wilcoxon's signed-rank test, Holm's correction
over the keys, and whether the two runs scored the key the same way.

Pairs are the traces scored (pass or fail, not an error) in both runs. A key's pass/fail change is
tested with McNemar's exact test on its discordant pairs (``p_value``); a key with continuous scores
also gets Wilcoxon's signed-rank test on the score differences (``mean_p_value``). Holm's
correction runs over every p-value of the comparison (``*_holm``), so "some key got worse" keeps
the family-wise error rate at ``alpha``. A key regressed when a corrected p-value is below ``alpha``
and its delta is negative.

>>> acc = PairAccumulator("acc")
>>> for before, after in [(1.0, 0.0)] * 12 + [(0.0, 1.0)] * 2 + [(1.0, 1.0)] * 30:
...     acc.add(before, before >= 0.5, after, after >= 0.5)
>>> [(k.regressed, k.improved, round(k.p_value, 4), k.worse) for k in finalize([acc], alpha=0.05)]
[(12, 2, 0.0129, True)]
"""

from __future__ import annotations

import math
import zlib
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from assay.evaluators.identity import IDENTITY_PARTS, parse_identity
from assay.stats import PairedDelta, holm, mcnemar_exact, paired_delta, wilcoxon_signed_rank

__all__ = ["PairAccumulator", "PairedKey", "finalize", "identity_changes"]


class PairAccumulator:
    """The pairs of one result key, streamed: counts, and one float per pair for the scores."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.n = 0
        self.both_pass = 0
        self.regressed = 0  # pass -> fail
        self.improved = 0  # fail -> pass
        self.sum_before = 0.0
        self.sum_after = 0.0
        self.diffs = array("d")
        self.binary = True
        self.became_error = 0
        self.error_fixed = 0

    def add(self, before: float, passed_before: bool, after: float, passed_after: bool) -> None:
        """One trace scored in both runs."""
        self.n += 1
        self.sum_before += before
        self.sum_after += after
        self.diffs.append(after - before)
        if self.binary and (before not in (0.0, 1.0) or after not in (0.0, 1.0)):
            self.binary = False
        if passed_before and passed_after:
            self.both_pass += 1
        elif passed_before:
            self.regressed += 1
        elif passed_after:
            self.improved += 1

    def pass_differences(self) -> list[float]:
        """The per-pair change of the pass indicator (-1, 0, +1)."""
        same = self.n - self.regressed - self.improved
        return [-1.0] * self.regressed + [1.0] * self.improved + [0.0] * same


@dataclass
class PairedKey:
    """One result key compared on paired traces."""

    key: str
    n: int
    pass_rate_before: float | None = None
    pass_rate_after: float | None = None
    pass_rate_delta: PairedDelta | None = None
    regressed: int = 0
    improved: int = 0
    p_value: float | None = None
    p_value_holm: float | None = None
    mean_before: float | None = None
    mean_after: float | None = None
    mean_delta: PairedDelta | None = None
    mean_p_value: float | None = None
    mean_p_value_holm: float | None = None
    became_error: int = 0
    error_fixed: int = 0
    changes: list[str] = field(default_factory=list)
    """Why the two runs did not score this key the same way (empty: comparable)."""
    significant: bool = False
    """A corrected p-value is below alpha."""
    worse: bool = False
    """Significant, and the pass rate or the mean went down."""

    @property
    def comparable(self) -> bool:
        return not self.changes

    @property
    def regressed_significantly(self) -> bool:
        return self.worse

    def to_dict(self) -> dict[str, Any]:
        def delta(d: PairedDelta | None) -> dict[str, Any] | None:
            if d is None:
                return None
            ci = None if d.interval is None else [round(d.interval[0], 6), round(d.interval[1], 6)]
            return {"delta": round(d.delta, 6), "ci": ci, "method": d.method}

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 6)

        return {
            "key": self.key,
            "n": self.n,
            "pass_rate_before": r(self.pass_rate_before),
            "pass_rate_after": r(self.pass_rate_after),
            "pass_rate_delta": delta(self.pass_rate_delta),
            "pass_to_fail": self.regressed,
            "fail_to_pass": self.improved,
            "p_value": self.p_value,
            "p_value_holm": self.p_value_holm,
            "mean_before": r(self.mean_before),
            "mean_after": r(self.mean_after),
            "mean_delta": delta(self.mean_delta),
            "mean_p_value": self.mean_p_value,
            "mean_p_value_holm": self.mean_p_value_holm,
            "became_error": self.became_error,
            "error_fixed": self.error_fixed,
            "comparable": self.comparable,
            "changes": self.changes,
            "significant": self.significant,
            "regressed": self.worse,
        }


def _seed(key: str) -> int:
    return zlib.crc32(key.encode())


def finalize(accs: list[PairAccumulator], *, alpha: float = 0.05, level: float = 0.95) -> list[PairedKey]:
    """Tests and intervals of every key, with Holm's correction over all of them."""
    out: list[PairedKey] = []
    family: list[tuple[PairedKey, str, float]] = []
    for acc in accs:
        pk = PairedKey(acc.key, acc.n, became_error=acc.became_error, error_fixed=acc.error_fixed)
        out.append(pk)
        if acc.n == 0:
            continue
        n = acc.n
        pk.regressed, pk.improved = acc.regressed, acc.improved
        pk.pass_rate_before = (acc.both_pass + acc.regressed) / n
        pk.pass_rate_after = (acc.both_pass + acc.improved) / n
        pk.pass_rate_delta = paired_delta(acc.pass_differences(), level, seed=_seed(acc.key))
        pk.p_value = mcnemar_exact(acc.regressed, acc.improved)
        family.append((pk, "p_value", pk.p_value))
        pk.mean_before, pk.mean_after = acc.sum_before / n, acc.sum_after / n
        pk.mean_delta = paired_delta(acc.diffs, level, seed=_seed(acc.key) + 1)
        if not acc.binary:
            pk.mean_p_value = wilcoxon_signed_rank(acc.diffs)
            family.append((pk, "mean_p_value", pk.mean_p_value))
    adjusted = holm([p for _, _, p in family])
    for (pk, name, _), adj in zip(family, adjusted, strict=True):
        setattr(pk, f"{name}_holm", adj)
        if adj < alpha:
            pk.significant = True
            d = pk.pass_rate_delta if name == "p_value" else pk.mean_delta
            if d is not None and d.delta < 0:
                pk.worse = True
    return out


def identity_changes(
    before: Counter[str], after: Counter[str], threshold_before: float | None, threshold_after: float | None
) -> list[str]:
    """What differs between how two runs scored a key: the identities their rows carry and the
    thresholds their summaries state (empty when nothing did)."""
    changes: list[str] = []
    if (
        threshold_before is not None
        and threshold_after is not None
        and not math.isclose(threshold_before, threshold_after)
    ):
        changes.append(f"threshold {threshold_before:g} -> {threshold_after:g}")
    if not before or not after or set(before) == set(after):
        return changes
    b = {part: {parse_identity(i)[part] for i in before} for part in IDENTITY_PARTS}
    a = {part: {parse_identity(i)[part] for i in after} for part in IDENTITY_PARTS}
    for part in IDENTITY_PARTS:
        if b[part] != a[part]:
            shown = ", ".join(sorted(str(x) for x in b[part])), ", ".join(sorted(str(x) for x in a[part]))
            label = part.replace("_", " ")
            changes.append(f"{label} changed ({shown[0]} -> {shown[1]})" if part != "params" else "params changed")
    return changes or ["identity changed"]
