"""The columnar kernels against plain Python on seeded random lists (both ways of counting)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from assay.evaluators.columnar import kernels as k


def _lists(rng: np.random.Generator, n: int, codes: int) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    lens = rng.integers(0, 6, size=n)
    lists = [rng.integers(0, codes, size=int(m)).tolist() for m in lens]
    groups = np.repeat(np.arange(n, dtype=np.int64), lens)
    flat = np.array([c for lst in lists for c in lst], dtype=np.int64)
    return groups, flat, lists


@pytest.mark.parametrize("codes", [3, 1_000_000_007], ids=["dense-table", "distinct-keys"])
def test_multiset_counts_equal_pythons_counters(codes: int) -> None:
    rng = np.random.default_rng(31)
    n = 2_000
    ag, ac, a_lists = _lists(rng, n, codes if codes < 10 else 4)
    bg, bc, b_lists = _lists(rng, n, codes if codes < 10 else 4)
    if codes > 10:  # codes far apart: (group, code) slots too many for a dense table
        ac, bc = ac * codes, bc * codes
        a_lists = [[c * codes for c in lst] for lst in a_lists]
        b_lists = [[c * codes for c in lst] for lst in b_lists]
    b_over, a_over, pairs = k.multiset_counts(ag, ac, bg, bc, n)
    for i in range(n):
        ca, cb = Counter(a_lists[i]), Counter(b_lists[i])
        assert b_over[i] == any(cb[c] > ca[c] for c in cb), i
        assert a_over[i] == any(ca[c] > cb[c] for c in ca), i
        assert pairs[i] == sum(min(ca[c], cb[c]) for c in cb), i
    assert b_over.any() and a_over.any() and (~b_over & ~a_over).any()


def test_same_sequences_compare_element_by_element() -> None:
    rng = np.random.default_rng(7)
    n = 3_000
    ag, ac, a_lists = _lists(rng, n, 2)
    bg, bc, b_lists = _lists(rng, n, 2)
    a_lens = np.array([len(x) for x in a_lists])
    b_lens = np.array([len(x) for x in b_lists])
    same = k.same_sequences(ac, ag, a_lens, bc, bg, b_lens)
    assert same.tolist() == [a == b for a, b in zip(a_lists, b_lists, strict=True)]
    assert same.any() and not same.all()
