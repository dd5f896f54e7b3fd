"""Multiset and sequence comparisons of integer codes, many short lists at once (numpy).

Lists are flat code arrays with a group id per element (a row, or a message pair), ascending;
equality of codes is the matcher, an equivalence, so the greedy first-fit pairing of the object
path (``trajectory.cover``) leaves a call of ``b`` unpaired exactly when earlier calls of ``b``
with the same code already used up the equal calls of ``a``: its rank among the equal calls of
``b`` (0, 1, …, in order) is at least their count in ``a``. Every duplicate counts; nothing
here drops one (unlike set operations).
"""

from __future__ import annotations

import numpy as np


def keys(groups: np.ndarray, codes: np.ndarray, width: int) -> np.ndarray:
    """One int64 per (group, code)."""
    out: np.ndarray = groups * np.int64(width) + codes
    return out


#: Above this many (group, code) slots (and four per element) the counts are taken over the
#: distinct keys (a sort) instead of a dense ``bincount`` table (two int64 tables of that size).
DENSE_SLOTS = 1 << 21


def multiset_counts(
    a_groups: np.ndarray, a_codes: np.ndarray, b_groups: np.ndarray, b_codes: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per group (``0 <= group < n``), comparing the multisets of codes of ``a`` and ``b``: whether
    some code occurs more often in ``b`` than in ``a`` (a ``b`` element greedy first-fit leaves
    unmatched), the same with ``a`` and ``b`` swapped, and how many pairs greedy first-fit makes
    (the sum over codes of the smaller count). Counts per (group, code) by ``bincount`` over a
    dense table when it is small, else over the distinct keys; no loop per group."""
    width = int(max(a_codes.max(initial=0), b_codes.max(initial=0))) + 1
    a_keys = keys(a_groups, a_codes, width)
    b_keys = keys(b_groups, b_codes, width)
    slots = n * width
    if slots <= max(DENSE_SLOTS, 4 * (len(a_keys) + len(b_keys))):
        ca = np.bincount(a_keys, minlength=slots)
        cb = np.bincount(b_keys, minlength=slots)
        present = np.flatnonzero(ca | cb)
        ca, cb = ca[present], cb[present]
    else:
        present, inverse = np.unique(np.concatenate([a_keys, b_keys]), return_inverse=True)
        inverse = inverse.reshape(-1)
        ca = np.bincount(inverse[: len(a_keys)], minlength=len(present))
        cb = np.bincount(inverse[len(a_keys) :], minlength=len(present))
    group = present // width
    b_over = np.zeros(n, dtype=bool)
    b_over[group[cb > ca]] = True
    a_over = np.zeros(n, dtype=bool)
    a_over[group[ca > cb]] = True
    pairs = np.bincount(group, weights=np.minimum(ca, cb), minlength=n).astype(np.int64)
    return b_over, a_over, pairs


def unmatched(a_keys: np.ndarray, b_keys: np.ndarray) -> np.ndarray:
    """For each element of ``b``: whether greedy first-fit leaves it without an equal partner in
    ``a`` (same group and code), the elements of ``b`` taken in order."""
    if not len(b_keys):
        return np.zeros(0, dtype=bool)
    sorted_a = np.sort(a_keys, kind="stable")
    count_a = np.searchsorted(sorted_a, b_keys, side="right") - np.searchsorted(sorted_a, b_keys, side="left")
    order = np.argsort(b_keys, kind="stable")
    sorted_b = b_keys[order]
    starts = np.empty(len(sorted_b), dtype=bool)
    starts[0] = True
    np.not_equal(sorted_b[1:], sorted_b[:-1], out=starts[1:])
    first = np.maximum.accumulate(np.where(starts, np.arange(len(sorted_b)), 0))
    rank = np.empty(len(b_keys), dtype=np.int64)
    rank[order] = np.arange(len(sorted_b)) - first
    missed: np.ndarray = rank >= count_a
    return missed


def first_per_group(flags: np.ndarray, groups: np.ndarray, group_starts: np.ndarray, n: int) -> np.ndarray:
    """Per group: the position (within its group) of its first flagged element, -1 when none."""
    out = np.full(n, -1, dtype=np.int64)
    hit = np.flatnonzero(flags)
    if not len(hit):
        return out
    g = groups[hit]
    uniq, idx = np.unique(g, return_index=True)
    out[uniq] = hit[idx] - group_starts[uniq]
    return out


def same_sequences(
    a_codes: np.ndarray,
    a_groups: np.ndarray,
    a_lens: np.ndarray,
    b_codes: np.ndarray,
    b_groups: np.ndarray,
    b_lens: np.ndarray,
) -> np.ndarray:
    """Per group: whether the two lists are equal element by element (same length). ``a_groups``
    and ``b_groups``: each element's group (ascending; every element of a group contiguous)."""
    eq: np.ndarray = a_lens == b_lens
    if not len(a_codes) or not len(b_codes):
        return eq
    # the elements of the groups of equal length line up one to one, in order
    a_sel = eq[a_groups]
    b_sel = eq[b_groups]
    diff = a_codes[a_sel] != b_codes[b_sel]
    if diff.any():
        eq = eq.copy()
        eq[a_groups[a_sel][diff]] = False
    return eq


def first_difference(
    a_codes: np.ndarray,
    a_starts: np.ndarray,
    b_codes: np.ndarray,
    b_starts: np.ndarray,
    lens: np.ndarray,
    rows: np.ndarray,
    n: int,
) -> np.ndarray:
    """For ``rows`` (lists of equal length ``lens[rows]``): the first position where the two
    lists differ, -1 when they are equal; -1 for the other rows."""
    out = np.full(n, -1, dtype=np.int64)
    if not len(rows):
        return out
    ln = lens[rows]
    total = int(ln.sum())
    if not total:
        return out
    group_start = np.cumsum(ln) - ln
    within = np.arange(total, dtype=np.int64) - np.repeat(group_start, ln)
    ai = np.repeat(a_starts[rows], ln) + within
    bi = np.repeat(b_starts[rows], ln) + within
    diff = a_codes[ai] != b_codes[bi]
    hit = np.flatnonzero(diff)
    if len(hit):
        owner = np.repeat(np.arange(len(rows)), ln)[hit]
        uniq, idx = np.unique(owner, return_index=True)
        out[rows[uniq]] = within[hit[idx]]
    return out


def subsequence(
    out_codes: np.ndarray,
    out_starts: np.ndarray,
    out_lens: np.ndarray,
    ref_codes: np.ndarray,
    ref_starts: np.ndarray,
    ref_lens: np.ndarray,
) -> np.ndarray:
    """Per row: how many reference calls the greedy in-order scan matched (``_subsequence``'s j)."""
    n = len(out_lens)
    j = np.zeros(n, dtype=np.int64)
    active = np.flatnonzero((out_lens > 0) & (ref_lens > 0))
    t = 0
    while len(active):
        active = active[(out_lens[active] > t) & (j[active] < ref_lens[active])]
        if not len(active):
            break
        a = out_codes[out_starts[active] + t]
        r = ref_codes[ref_starts[active] + j[active]]
        j[active[a == r]] += 1
        t += 1
    return j
