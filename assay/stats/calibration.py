"""A judge against human labels, per result key: agreement, Cohen's kappa beside the base rate,
the confusion matrix, Spearman and MAE for numeric labels, self-consistency of repeated samples,
and the prediction-powered estimate of the mean.

Labels are read as people write them: ``pass``/``fail`` (also true/false, yes/no, 1/0, correct/
incorrect), a number (a score: pass when at least the key's threshold), or any other text (a
category, compared with the result's ``value``).

>>> pairs = CalibrationPairs("correctness", threshold=0.5)
>>> for human, score in [("pass", 1.0), ("pass", 1.0), ("fail", 0.0), ("fail", 1.0)]:
...     pairs.add(human, {"score": score})
>>> r = pairs.report()
>>> r["agreement"], r["kappa"], r["base_rate"]
(0.75, 0.5, 0.5)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.stats.agreement import cohen_kappa, confusion_matrix, mean_absolute_error, spearman
from assay.stats.intervals import t_interval

__all__ = ["CalibrationPairs", "human_label", "ppi_from_moments", "self_consistency"]

_PASS = frozenset({"pass", "passed", "true", "yes", "y", "1", "correct", "good"})
_FAIL = frozenset({"fail", "failed", "false", "no", "n", "0", "incorrect", "bad"})


def human_label(label: Any, threshold: float = 0.5) -> tuple[str, float | None]:
    """A human label as (``pass``/``fail`` or a category, its numeric value if any)."""
    if isinstance(label, bool):
        return ("pass" if label else "fail"), float(label)
    if isinstance(label, int | float):
        x = float(label)
        return ("pass" if x >= threshold else "fail"), x
    text = str(label).strip()
    low = text.lower()
    if low in _PASS:
        return "pass", 1.0
    if low in _FAIL:
        return "fail", 0.0
    try:
        x = float(text)
    except ValueError:
        return text, None
    return ("pass" if x >= threshold else "fail"), x


def _judge(result: Mapping[str, Any], threshold: float, categorical: bool) -> tuple[str | None, float | None]:
    if result.get("error"):
        return None, None
    score = result.get("score")
    number = float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None
    if categorical:
        value = result.get("value")
        return (None if value is None else str(value)), number
    if number is None:
        return None, None
    return ("pass" if number >= threshold else "fail"), number


@dataclass
class CalibrationPairs:
    """The labelled traces of one result key: the human's label and the judge's result each."""

    key: str
    threshold: float = 0.5
    human: list[str] = field(default_factory=list)
    judge: list[str] = field(default_factory=list)
    human_scores: list[float | None] = field(default_factory=list)
    judge_scores: list[float | None] = field(default_factory=list)
    errors: int = 0
    """Labelled traces the judge did not score (an error, no score)."""

    def add(self, label: Any, result: Mapping[str, Any]) -> None:
        """One labelled trace: its human label and the judge's result dict (``score``, ``value``, ``error``)."""
        h, hx = human_label(label, self.threshold)
        categorical = hx is None
        j, jx = _judge(result, self.threshold, categorical)
        if j is None:
            self.errors += 1
            return
        self.human.append(h)
        self.judge.append(j)
        self.human_scores.append(hx)
        self.judge_scores.append(jx)

    def extend(self, other: CalibrationPairs) -> None:
        self.human += other.human
        self.judge += other.judge
        self.human_scores += other.human_scores
        self.judge_scores += other.judge_scores
        self.errors += other.errors

    @property
    def kappa(self) -> float | None:
        """Cohen's kappa of the judge against the human labels (None: undefined or no pairs)."""
        return cohen_kappa(self.human, self.judge)

    def to_dict(self) -> dict[str, Any]:
        """The pairs as plain data (a summary keeps them so shards merge)."""
        return {
            "threshold": self.threshold,
            "human": self.human,
            "judge": self.judge,
            "human_scores": self.human_scores,
            "judge_scores": self.judge_scores,
            "errors": self.errors,
        }

    @classmethod
    def from_dict(cls, key: str, d: Mapping[str, Any]) -> CalibrationPairs:
        return cls(
            key,
            float(d.get("threshold", 0.5)),
            [str(x) for x in d.get("human", [])],
            [str(x) for x in d.get("judge", [])],
            list(d.get("human_scores", [])),
            list(d.get("judge_scores", [])),
            int(d.get("errors", 0)),
        )

    def report(self) -> dict[str, Any]:
        """Agreement, kappa, base rates, the confusion matrix (rows: human, columns: judge), and
        Spearman / MAE when both sides are numeric and the human labels are not all 0/1."""
        n = len(self.human)
        out: dict[str, Any] = {"key": self.key, "n": n, "judge_errors": self.errors, "threshold": self.threshold}
        if n == 0:
            return {**out, "agreement": None, "kappa": None, "base_rate": None, "judge_rate": None, "confusion": None}
        labels, matrix = confusion_matrix(self.human, self.judge)
        binary = set(labels) <= {"pass", "fail"}
        if binary:
            base, judged = self.human.count("pass") / n, self.judge.count("pass") / n
        else:  # categories: the share of the most common human label (what always guessing it scores)
            top = Counter(self.human).most_common(1)[0][0]
            base, judged = self.human.count(top) / n, self.judge.count(top) / n
        out.update(
            agreement=sum(h == j for h, j in zip(self.human, self.judge, strict=True)) / n,
            kappa=self.kappa,
            base_rate=base,
            judge_rate=judged,
            confusion={"labels": labels, "matrix": matrix},
        )
        numeric = [
            (h, j) for h, j in zip(self.human_scores, self.judge_scores, strict=True) if h is not None and j is not None
        ]
        if numeric and any(h not in (0.0, 1.0) for h, _ in numeric):
            hs, js = [h for h, _ in numeric], [j for _, j in numeric]
            out.update(spearman=spearman(hs, js), mae=mean_absolute_error(hs, js))
        return out

    def residuals(self) -> list[float]:
        """Human minus judge on the labelled traces with numbers on both sides (for PPI)."""
        return [
            h - j for h, j in zip(self.human_scores, self.judge_scores, strict=True) if h is not None and j is not None
        ]


def ppi_from_moments(
    judge_n: int, judge_sum: float, judge_sum_sq: float, residuals: Sequence[float], level: float = 0.95
) -> dict[str, Any] | None:
    """The prediction-powered estimate of the mean (Angelopoulos et al. 2023): the judge's mean
    over its N traces plus the mean human-minus-judge residual over the n labelled ones, with the
    interval ``± t(n-1) · sqrt(var(judge)/N + var(residual)/n)``; the judge side from its sums, so
    the N traces are streamed. None below two traces on either side."""
    n = len(residuals)
    if judge_n < 2 or n < 2:
        return None
    judge_mean = judge_sum / judge_n
    var_j = max(judge_sum_sq - judge_n * judge_mean * judge_mean, 0.0) / (judge_n - 1)
    rect = math.fsum(residuals) / n
    var_r = math.fsum((r - rect) ** 2 for r in residuals) / (n - 1)
    estimate = judge_mean + rect
    lo, hi = t_interval(estimate, var_j / judge_n + var_r / n, n - 1, level)
    return {
        "estimate": estimate,
        "ci": [lo, hi],
        "ci_level": level,
        "judge_mean": judge_mean,
        "rectifier": rect,
        "n_judged": judge_n,
        "n_labelled": n,
    }


def self_consistency(samples: Sequence[Sequence[str]]) -> dict[str, Any]:
    """How often a judge asked k times per trace agrees with itself: ``rate`` is the share of traces
    whose k verdicts are all the same, ``pairwise`` the share of agreeing pairs of samples."""
    traces = [s for s in samples if len(s) >= 2]
    if not traces:
        return {"traces": 0, "rate": None, "pairwise": None}
    unanimous = sum(len(set(s)) == 1 for s in traces)
    agree = total = 0
    for s in traces:
        counts = Counter(s)
        agree += sum(c * (c - 1) // 2 for c in counts.values())
        total += len(s) * (len(s) - 1) // 2
    return {"traces": len(traces), "rate": unanimous / len(traces), "pairwise": agree / total}
