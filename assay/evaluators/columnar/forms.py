"""The columnar forms of the deterministic evaluators: one class per evaluator, found through
:data:`FORMS` (evaluator class → factory; a factory returns None when the evaluator's params
need the object path: arguments compared as subsets, per-tool overrides, a sample).

Every form returns the object path's score, value, ``passed`` and comment for every row the view
does not send back to the object path; the comments are the object path's own sentences (built
per failing row only, so the passing rows cost a few array operations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from assay.evaluators.base import BaseEvaluator
from assay.evaluators.columnar import kernels as k
from assay.evaluators.columnar.api import KeyColumns
from assay.evaluators.columnar.canon import canonical
from assay.evaluators.columnar.view import ARGS, TEXT, BatchView, Layout, Side
from assay.evaluators.heuristic import Contains, ExactMatch, JsonValid, RegexMatch
from assay.evaluators.tool_use import ToolCallAccuracy, ToolUse
from assay.evaluators.trajectory import TrajectoryMatch
from assay.records import Result
from assay.traces.model import Trace
from assay.traces.openai import parse_args


class Form(Protocol):
    """A columnar form: its result key, what it reads, and the scoring of a batch view."""

    key: str
    needs: set[str]

    def score(self, view: BatchView) -> KeyColumns: ...


# -- helpers ------------------------------------------------------------------------------------


def _describe(side: Side, calls: list[int]) -> list[str]:
    """``describe_call`` of the given flat calls of one side: ``name({sorted args})``."""
    if not calls:
        return []
    idx = pa.array(calls, pa.int64())
    names = side.names.take(idx).to_pylist()
    raws = side.args.take(idx).to_pylist() if side.args is not None else [None] * len(calls)
    out = []
    for name, raw in zip(names, raws, strict=True):
        args = orjson.dumps(parse_args(raw)[0], option=orjson.OPT_SORT_KEYS, default=str).decode()
        if len(args) > 120:
            args = args[:117] + "..."
        out.append(f"{name}({args})")
    return out


def _passed(score: np.ndarray, scored: np.ndarray, threshold: float) -> pa.Array:
    return pa.array(score >= threshold, pa.bool_(), mask=~scored)


def _texts(values: list[str | None]) -> pa.Array:
    return pa.array(values, pa.string())


def _placeholder(key: str, n: int, threshold: float) -> KeyColumns:
    nulls = pa.nulls(n, pa.float64())
    return KeyColumns(
        key, nulls, pa.nulls(n, pa.bool_()), pa.nulls(n, pa.bool_()), pa.nulls(n, pa.string()), None, threshold
    )


def _join(parts: list[Any]) -> pa.Array:
    """Element-wise concatenation of string arrays and constant strings."""
    return pc.binary_join_element_wise(*parts, "")


def _num(x: np.ndarray) -> pa.Array:
    return pa.array(x, pa.int64()).cast(pa.string())


# -- trajectory_match ---------------------------------------------------------------------------


class TrajectoryForm:
    """``trajectory_match`` with ``ignore`` or ``exact`` argument matching, every mode."""

    def __init__(self, ev: TrajectoryMatch) -> None:
        p = ev.params
        self.key = ev.key
        self.threshold = ev.threshold
        self.mode = p.mode
        self.exact = p.tool_args_match_mode == "exact"
        self.flat = p.strict_scope == "tool_calls"
        self.label = ev._label
        self.needs: set[str] = {ARGS} if self.exact else set()

    def score(self, view: BatchView) -> KeyColumns:
        n = view.n
        if view.declined is not None or view.out is None:
            return _placeholder(self.key, n, self.threshold)
        out = view.out
        ref = view.ref
        has_ref = view.has_ref & ~view.fallback()
        oc, rc = view.call_codes(self.exact)
        n_out = out.row_ncalls
        n_ref = ref.row_ncalls if ref is not None else np.zeros(n, dtype=np.int64)
        ok = np.zeros(n, dtype=bool)
        why: dict[int, str] = {}
        if ref is not None and has_ref.any():
            if self.mode == "strict" and not self.flat:
                ok, why = self._strict_messages(view, out, ref, oc, rc, has_ref)
            elif self.mode == "strict":
                ok, why = self._strict_calls(out, ref, oc, rc, has_ref)
            elif self.mode == "subsequence":
                ok, why = self._subsequence(out, ref, oc, rc, has_ref)
            else:
                ok, why = self._multiset(out, ref, oc, rc, has_ref)
        score = ok.astype(np.float64)
        head = f"{self.label} match "
        summary = _join(
            [
                pc.if_else(pa.array(ok), head + "pass: ", head + "fail: "),
                _num(n_out),
                " agent tool call(s) vs ",
                _num(n_ref),
                " reference",
            ]
        )
        if why:
            rows = sorted(why)
            mask = np.zeros(n, dtype=bool)
            mask[rows] = True
            texts = summary.take(pa.array(rows)).to_pylist()
            filled = [f"{s}; {why[r]}" for s, r in zip(texts, rows, strict=True)]
            full: list[str | None] = [None] * n
            for r, t in zip(rows, filled, strict=True):
                full[r] = t
            summary = pc.if_else(pa.array(mask), _texts(full), summary)
        no_ref = ~has_ref
        if no_ref.any():
            summary = pc.if_else(pa.array(no_ref), "no reference trajectory to compare with", summary)
        return KeyColumns(
            self.key,
            pa.array(score, pa.float64(), mask=no_ref),
            pa.array(ok, pa.bool_(), mask=no_ref),
            _passed(score, has_ref, self.threshold),
            summary.cast(pa.string()),
            None,
            self.threshold,
        )

    # the modes: (ok per row, the reason of each failing row)

    def _multiset(
        self, out: Side, ref: Side, oc: np.ndarray, rc: np.ndarray, has_ref: np.ndarray
    ) -> tuple[np.ndarray, dict[int, str]]:
        n = out.n
        width = int(max(oc.max(initial=0), rc.max(initial=0))) + 1
        same = k.same_sequences(oc, out.row_calls[:-1], out.row_ncalls, rc, ref.row_calls[:-1], ref.row_ncalls)
        todo = has_ref & ~same
        ok = has_ref & same
        if not todo.any():
            return ok, {}
        # only the rows whose lists differ go through the multiset comparison
        o_sel = todo[out.call_row]
        r_sel = todo[ref.call_row]
        o_idx = np.flatnonzero(o_sel)
        r_idx = np.flatnonzero(r_sel)
        o_keys = k.keys(out.call_row[o_idx], oc[o_idx], width)
        r_keys = k.keys(ref.call_row[r_idx], rc[r_idx], width)
        sup_miss = np.full(n, -1, dtype=np.int64)  # first reference call without an agent call
        sub_miss = np.full(n, -1, dtype=np.int64)  # first agent call without a reference call
        if self.mode in ("superset", "unordered"):
            miss = k.unmatched(o_keys, r_keys)
            sup_miss = _first(miss, r_idx, ref, n)
        if self.mode in ("subset", "unordered"):
            miss = k.unmatched(r_keys, o_keys)
            sub_miss = _first(miss, o_idx, out, n)
        fail = (sup_miss >= 0) | (sub_miss >= 0)
        ok |= todo & ~fail
        why: dict[int, str] = {}
        rows_sup = np.flatnonzero(todo & (sup_miss >= 0))
        rows_sub = np.flatnonzero(todo & (sup_miss < 0) & (sub_miss >= 0))
        if len(rows_sup):
            pos = sup_miss[rows_sup]
            descs = _describe(ref, (ref.row_calls[rows_sup] + pos).tolist())
            for r, i, d in zip(rows_sup.tolist(), pos.tolist(), descs, strict=True):
                why[r] = f"reference call {i} {d} not found among the agent's calls"
        if len(rows_sub):
            pos = sub_miss[rows_sub]
            descs = _describe(out, (out.row_calls[rows_sub] + pos).tolist())
            for r, i, d in zip(rows_sub.tolist(), pos.tolist(), descs, strict=True):
                why[r] = f"agent call {i} {d} is not in the reference"
        return ok, why

    def _strict_calls(
        self, out: Side, ref: Side, oc: np.ndarray, rc: np.ndarray, has_ref: np.ndarray
    ) -> tuple[np.ndarray, dict[int, str]]:
        n = out.n
        lens_eq = out.row_ncalls == ref.row_ncalls
        rows = np.flatnonzero(has_ref & lens_eq)
        first = k.first_difference(oc, out.row_calls[:-1], rc, ref.row_calls[:-1], out.row_ncalls, rows, n)
        ok = has_ref & lens_eq & (first < 0)
        why: dict[int, str] = {}
        for r in np.flatnonzero(has_ref & ~lens_eq).tolist():
            why[r] = f"{out.row_ncalls[r]} agent tool calls vs {ref.row_ncalls[r]} in the reference"
        bad = np.flatnonzero(has_ref & lens_eq & (first >= 0))
        if len(bad):
            pos = first[bad]
            a = _describe(out, (out.row_calls[bad] + pos).tolist())
            b = _describe(ref, (ref.row_calls[bad] + pos).tolist())
            for r, i, da, db in zip(bad.tolist(), pos.tolist(), a, b, strict=True):
                why[r] = f"tool call {i}: agent {da} vs reference {db}"
        return ok, why

    def _subsequence(
        self, out: Side, ref: Side, oc: np.ndarray, rc: np.ndarray, has_ref: np.ndarray
    ) -> tuple[np.ndarray, dict[int, str]]:
        j = k.subsequence(oc, out.row_calls[:-1], out.row_ncalls, rc, ref.row_calls[:-1], ref.row_ncalls)
        ok = has_ref & (j == ref.row_ncalls)
        bad = np.flatnonzero(has_ref & ~ok)
        why: dict[int, str] = {}
        if len(bad):
            pos = j[bad]
            descs = _describe(ref, (ref.row_calls[bad] + pos).tolist())
            for r, i, d in zip(bad.tolist(), pos.tolist(), descs, strict=True):
                why[r] = f"reference call {i} {d} does not appear in order after the earlier matches"
        return ok, why

    def _strict_messages(
        self, view: BatchView, out: Side, ref: Side, oc: np.ndarray, rc: np.ndarray, has_ref: np.ndarray
    ) -> tuple[np.ndarray, dict[int, str]]:
        nm_o, nm_r = out.row_nmsgs, ref.row_nmsgs
        why: dict[int, str] = {}
        for r in np.flatnonzero(has_ref & (nm_o != nm_r)).tolist():
            why[r] = f"{nm_o[r]} messages vs {nm_r[r]} in the reference"
        rows = np.flatnonzero(has_ref & (nm_o == nm_r) & (nm_o > 0))
        ok = has_ref & (nm_o == nm_r)
        if not len(rows):
            return ok, why
        lens = nm_o[rows]
        total = int(lens.sum())
        group_start = np.cumsum(lens) - lens
        within = np.arange(total, dtype=np.int64) - np.repeat(group_start, lens)
        om = np.repeat(out.row_msgs[rows], lens) + within
        rm = np.repeat(ref.row_msgs[rows], lens) + within
        pair_row = np.repeat(rows, lens)
        ac = out.msg_ncalls[om]
        bc = ref.msg_ncalls[rm]
        role_diff = out.roles[om] != ref.roles[rm]
        reason = np.zeros(total, dtype=np.int8)
        miss = np.full(total, -1, dtype=np.int64)
        both = (ac == bc) & (ac > 0) & ~role_diff
        pairs = np.flatnonzero(both)
        if len(pairs):
            cnt = ac[pairs]
            ctotal = int(cnt.sum())
            cstart = np.cumsum(cnt) - cnt
            cwithin = np.arange(ctotal, dtype=np.int64) - np.repeat(cstart, cnt)
            a_idx = np.repeat(out.msg_calls[om[pairs]], cnt) + cwithin
            b_idx = np.repeat(ref.msg_calls[rm[pairs]], cnt) + cwithin
            a_codes, b_codes = oc[a_idx], rc[b_idx]
            differ = a_codes != b_codes
            pid = np.repeat(np.arange(len(pairs), dtype=np.int64), cnt)
            if differ.any():
                # only the pairs whose calls differ in order are compared as multisets
                dpairs = np.unique(pid[differ])
                dsel = np.isin(pid, dpairs)
                width = int(max(oc.max(initial=0), rc.max(initial=0))) + 1
                agent_keys = k.keys(pid[dsel], a_codes[dsel], width)
                ref_keys = k.keys(pid[dsel], b_codes[dsel], width)
                unm = k.unmatched(ref_keys, agent_keys)
                hit = np.flatnonzero(unm)
                if len(hit):
                    owner = pid[dsel][hit]
                    uniq, first = np.unique(owner, return_index=True)
                    miss[pairs[uniq]] = cwithin[dsel][hit[first]]
        reason[miss >= 0] = 5
        reason[(ac > 0) & (bc > 0) & (ac != bc)] = 4
        reason[(ac > 0) & (bc == 0)] = 3
        reason[(ac == 0) & (bc > 0)] = 2
        reason[role_diff] = 1
        failing = np.flatnonzero(reason > 0)
        if not len(failing):
            return ok, why
        owner_rows, first = np.unique(pair_row[failing], return_index=True)
        fp = failing[first]  # the first failing pair of each failing row
        ok[owner_rows] = False
        i_of = within[fp]
        call5 = [int(out.msg_calls[om[p]] + miss[p]) for p in fp.tolist() if reason[p] == 5]
        descs = iter(_describe(out, call5))
        for r, p, i in zip(owner_rows.tolist(), fp.tolist(), i_of.tolist(), strict=True):
            kind = reason[p]
            if kind == 1:
                a, b = out.role_names(int(om[p])), ref.role_names(int(rm[p]))
                why[r] = f"message {i}: role {a!r} vs {b!r} in the reference"
            elif kind == 2:
                why[r] = f"message {i}: agent message has no tool calls, the reference message does"
            elif kind == 3:
                why[r] = f"message {i}: agent message has tool calls, the reference message does not"
            elif kind == 4:
                why[r] = f"message {i}: {ac[p]} tool calls vs {bc[p]} in the reference"
            else:
                why[r] = f"message {i}: agent call {next(descs)} has no match in the reference message"
        return ok, why


def _first(miss: np.ndarray, idx: np.ndarray, side: Side, n: int) -> np.ndarray:
    """Per row: the position within the row of its first missed call (``idx``: the flat calls
    ``miss`` is about), -1 when none."""
    out = np.full(n, -1, dtype=np.int64)
    hit = np.flatnonzero(miss)
    if not len(hit):
        return out
    calls = idx[hit]
    rows = side.call_row[calls]
    uniq, first = np.unique(rows, return_index=True)
    out[uniq] = calls[first] - side.row_calls[uniq]
    return out


# -- tool_call_accuracy -------------------------------------------------------------------------


class AccuracyForm:
    """``tool_call_accuracy`` with ``exact`` or ``ignore`` arguments: reference calls reproduced."""

    def __init__(self, ev: ToolCallAccuracy) -> None:
        self.key = ev.key
        self.threshold = ev.threshold
        self.exact = ev.params.args_match_mode == "exact"
        self.needs: set[str] = {ARGS} if self.exact else set()

    def score(self, view: BatchView) -> KeyColumns:
        n = view.n
        if view.declined is not None or view.out is None:
            return _placeholder(self.key, n, self.threshold)
        out, ref = view.out, view.ref
        n_ref = ref.row_ncalls if ref is not None else np.zeros(n, dtype=np.int64)
        scored = view.has_ref & (n_ref > 0) & ~view.fallback()
        hits = np.zeros(n, dtype=np.int64)
        if ref is not None and scored.any():
            oc, rc = view.call_codes(self.exact)
            width = int(max(oc.max(initial=0), rc.max(initial=0))) + 1
            same = k.same_sequences(oc, out.row_calls[:-1], out.row_ncalls, rc, ref.row_calls[:-1], ref.row_ncalls)
            hits[same] = n_ref[same]
            todo = scored & ~same
            if todo.any():
                o_idx = np.flatnonzero(todo[out.call_row])
                r_idx = np.flatnonzero(todo[ref.call_row])
                miss = k.unmatched(
                    k.keys(out.call_row[o_idx], oc[o_idx], width), k.keys(ref.call_row[r_idx], rc[r_idx], width)
                )
                matched = np.bincount(ref.call_row[r_idx][~miss], minlength=n)
                hits[todo] = matched[todo]
        denom = np.where(scored, n_ref, 1)
        score = hits / denom
        h, d = _num(hits), _num(n_ref)
        value = _join([h, "/", d])
        comment = _join(["reproduced ", h, " of ", d, " reference tool calls"])
        comment = pc.if_else(pa.array(scored), comment, "no reference tool calls to score against")
        return KeyColumns(
            self.key,
            pa.array(score, pa.float64(), mask=~scored),
            pc.if_else(pa.array(scored), value, pa.scalar(None, pa.string())),
            _passed(score, scored, self.threshold),
            comment.cast(pa.string()),
            None,
            self.threshold,
        )


# -- tool_use -----------------------------------------------------------------------------------


class ToolUseForm:
    """``tool_use``: any agent call of the expected name (and the expected arguments, exactly)."""

    def __init__(self, ev: ToolUse, expected_args: bytes | None) -> None:
        p = ev.params
        self.key = ev.key
        self.threshold = ev.threshold
        self.tool = p.expected_tool
        self.expected_args = expected_args
        self.needs: set[str] = {ARGS} if expected_args is not None else set()
        with_args = " with expected args" if p.expected_args else ""
        self.comments = (
            f"tool {p.expected_tool!r} called{with_args}",
            f"tool {p.expected_tool!r} not called{with_args}",
        )

    def score(self, view: BatchView) -> KeyColumns:
        n = view.n
        if view.declined is not None or view.out is None:
            return _placeholder(self.key, n, self.threshold)
        out = view.out
        ok = np.zeros(n, dtype=bool)
        code = view.code_of_name(self.tool)
        if code is not None and len(out.call_row):
            oc, _ = view.name_codes()
            hit = oc == code
            if self.expected_args is not None:
                args, _ = view.arg_codes()
                want = view.canon_code(self.expected_args)
                hit &= args == want if want is not None else False
            ok[out.call_row[hit]] = True
        score = ok.astype(np.float64)
        every = np.ones(n, dtype=bool)
        return KeyColumns(
            self.key,
            pa.array(score, pa.float64()),
            pa.array(ok, pa.bool_()),
            _passed(score, every, self.threshold),
            pc.if_else(pa.array(ok), self.comments[0], self.comments[1]).cast(pa.string()),
            None,
            self.threshold,
        )


# -- text checks --------------------------------------------------------------------------------


class TextForm:
    """``exact_match``, ``contains``, ``regex_match``, ``json_valid`` over the output text and the
    reference text, read from their columns; each row is judged by the evaluator's own rule on
    those two values (no trace is built from the messages)."""

    def __init__(self, ev: BaseEvaluator[Any]) -> None:
        self.ev = ev
        self.key = ev.key
        self.threshold = ev.threshold
        self.needs: set[str] = {TEXT}
        self.uses_reference = type(ev) in (ExactMatch, Contains)

    def score(self, view: BatchView) -> KeyColumns:
        n = view.n
        if view.declined is not None or view.out is None:
            return _placeholder(self.key, n, self.threshold)
        outs = view.output_texts()
        refs = view.reference_texts() if self.uses_reference else [None] * n
        has_ref = view.has_ref.tolist()
        skip = view.fallback().tolist()
        score: list[float | None] = []
        value: list[Any] = []
        comment: list[str | None] = []
        error: list[str | None] = []
        ev = self.ev
        for i in range(n):
            if skip[i]:
                score.append(None)
                value.append(None)
                comment.append(None)
                error.append(None)
                continue
            ref = Trace(final_output=refs[i], format="openai") if has_ref[i] else None
            trace = Trace(final_output=outs[i], reference=ref, format="openai")
            try:
                r = ev.score_trace(trace)[0]
            except Exception as exc:  # as the evaluate stage does: an error result, not a stop
                r = Result.from_error(ev.key, exc)
            score.append(r.score)
            value.append(r.value)
            comment.append(r.comment)
            error.append(r.error)
        sc = np.array([s if s is not None else np.nan for s in score], dtype=np.float64)
        scored = np.array([s is not None for s in score], dtype=bool)
        return KeyColumns(
            self.key,
            pa.array(sc, pa.float64(), mask=~scored),
            pa.array(value, pa.bool_()),
            _passed(np.nan_to_num(sc), scored, self.threshold),
            _texts(comment),
            _texts(error) if any(e is not None for e in error) else None,
            self.threshold,
        )


# -- the table ----------------------------------------------------------------------------------


def _trajectory(ev: Any, layout: Layout) -> Form | None:
    p = ev.params
    if p.tool_args_match_mode not in ("exact", "ignore") or p.tool_args_match_overrides:
        return None
    return TrajectoryForm(ev)


def _accuracy(ev: Any, layout: Layout) -> Form | None:
    p = ev.params
    if p.args_match_mode not in ("exact", "ignore") or p.tool_args_match_overrides:
        return None
    return AccuracyForm(ev)


def _tool_use(ev: Any, layout: Layout) -> Form | None:
    p = ev.params
    if not p.expected_args or p.args_match_mode == "ignore":
        return ToolUseForm(ev, None)
    if p.args_match_mode != "exact":
        return None
    try:
        return ToolUseForm(ev, canonical(p.expected_args))
    except (TypeError, orjson.JSONEncodeError):
        return None


def _text(ev: Any, layout: Layout) -> Form | None:
    return TextForm(ev)


FORMS: dict[type, Callable[[Any, Layout], Form | None]] = {
    TrajectoryMatch: _trajectory,
    ToolCallAccuracy: _accuracy,
    ToolUse: _tool_use,
    ExactMatch: _text,
    Contains: _text,
    RegexMatch: _text,
    JsonValid: _text,
}
"""Evaluator class (exactly: a subclass may score differently) → its columnar form's factory."""


def form_for(ev: BaseEvaluator[Any], layout: Layout) -> Form | None:
    """The columnar form of one evaluator for a layout, or None (the object path scores it)."""
    if getattr(ev, "sampler", None) is not None or ev.is_async:
        return None
    factory = FORMS.get(type(ev))
    return None if factory is None else factory(ev, layout)
