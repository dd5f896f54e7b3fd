"""Agreement between two raters: Cohen's kappa, the confusion matrix, Spearman's rho and the mean
absolute error (used by :mod:`assay.stats.calibration`).

>>> human, judge = ["pass", "pass", "fail", "fail"], ["pass", "fail", "fail", "fail"]
>>> labels, matrix = confusion_matrix(human, judge)
>>> labels, matrix
(['fail', 'pass'], [[2, 0], [1, 1]])
>>> cohen_kappa(human, judge)
0.5
>>> round(spearman([1, 2, 3, 4], [1, 3, 2, 4]), 3)
0.8
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

from assay.stats.paired import average_ranks

__all__ = ["cohen_kappa", "confusion_matrix", "mean_absolute_error", "spearman"]


def _sort_key(x: Any) -> tuple[str, Any]:
    return (type(x).__name__, x)


def confusion_matrix(truth: Sequence[Hashable], predicted: Sequence[Hashable]) -> tuple[list[Any], list[list[int]]]:
    """The labels (sorted) and the matrix: row i is the true label i, column j the predicted j
    (scikit-learn's layout)."""
    labels = sorted(set(truth) | set(predicted), key=_sort_key)
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for t, p in zip(truth, predicted, strict=True):
        matrix[index[t]][index[p]] += 1
    return labels, matrix


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters; None when undefined (no pairs, or chance agreement is 1:
    both raters gave one and the same label to everything)."""
    n = len(a)
    if n == 0:
        return None
    _, matrix = confusion_matrix(a, b)
    observed = sum(matrix[i][i] for i in range(len(matrix))) / n
    rows = [sum(r) / n for r in matrix]
    cols = [sum(r[j] for r in matrix) / n for j in range(len(matrix))]
    expected = sum(r * c for r, c in zip(rows, cols, strict=True))
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def _pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None below two pairs or when one
    side is constant."""
    if len(x) < 2:
        return None
    return _pearson(average_ranks(x)[0], average_ranks(y)[0])


def mean_absolute_error(x: Sequence[float], y: Sequence[float]) -> float | None:
    """The mean of ``|x - y|``; None without pairs."""
    if not x:
        return None
    return math.fsum(abs(a - b) for a, b in zip(x, y, strict=True)) / len(x)
