"""The columnar forms of the deterministic evaluators: one class per evaluator, found through
:data:`FORMS` (evaluator class → factory; a factory returns None when the evaluator's params
need the object path: arguments compared as subsets, per-tool overrides, a sample).

Every form returns the object path's score, value, ``passed`` and comment for every row the view
does not send back to the object path; the comments are the object path's own sentences (built
per failing row only, so the passing rows cost a few array operations)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from assay.connectors.arrow_arrays import from_numpy, strings, text_scalar
from assay.evaluators.base import BaseEvaluator
from assay.evaluators.columnar import kernels as k
from assay.evaluators.columnar.canon import canonical
from assay.evaluators.columnar.columns import KeyColumns
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


def _describe(side: Side, calls: np.ndarray) -> pa.Array:
    """``describe_call`` of the given flat calls of one side, ``name({sorted args})``, as a string
    array: the arguments' text is made once per distinct argument text of the calls."""
    idx = from_numpy(calls, pa.int64())
    names = side.names.take(idx)
    if not pa.types.is_string(names.type):  # dictionary-encoded, large or view text
        names = names.cast(pa.string())
    if side.args is None:
        return _join([names, "({})"])
    raw = side.args.take(idx)
    raw = raw.cast(pa.string()) if not pa.types.is_string(raw.type) else raw
    enc = pc.dictionary_encode(raw, null_encoding="encode")
    shown = []
    for text in enc.dictionary.to_pylist():
        args = orjson.dumps(parse_args(text)[0], option=orjson.OPT_SORT_KEYS, default=str).decode()
        shown.append(args if len(args) <= 120 else args[:117] + "...")
    return _join([names, "(", strings(shown).take(enc.indices), ")"])


Reasons = list[tuple[np.ndarray, pa.Array]]
"""The failing rows' reasons: (rows, their texts) in groups."""


def _reason_column(n: int, groups: Reasons) -> pa.Array | None:
    """Per row: its reason, null where it has none (None: no row has one)."""
    groups = [(rows, texts) for rows, texts in groups if len(rows)]
    if not groups:
        return None
    where = np.full(n, -1, dtype=np.int64)
    start = 0
    for rows, _ in groups:
        where[rows] = np.arange(start, start + len(rows))
        start += len(rows)
    texts = pa.concat_arrays([t.cast(pa.string()) for _, t in groups])
    return texts.take(from_numpy(where, pa.int64(), mask=where < 0))


def _passed(score: np.ndarray, scored: np.ndarray, threshold: float) -> pa.Array:
    return from_numpy(score >= threshold, mask=~scored)


def _texts(values: list[str | None]) -> pa.Array:
    return strings(values)


def _placeholder(key: str, n: int, threshold: float) -> KeyColumns:
    nulls = pa.nulls(n, pa.float64())
    return KeyColumns(
        key, nulls, pa.nulls(n, pa.bool_()), pa.nulls(n, pa.bool_()), pa.nulls(n, pa.string()), None, threshold
    )


@lru_cache(maxsize=512)
def _lit(text: str) -> pa.Scalar:
    """A constant text as an Arrow scalar (a Python value given to ``pyarrow.compute`` would be
    converted by ``pa.scalar``, which imports pandas: :mod:`assay.connectors.arrow_arrays`)."""
    return text_scalar(text)


def _join(parts: list[Any]) -> pa.Array:
    """Element-wise concatenation of string arrays and constant strings."""
    return pc.binary_join_element_wise(*[_lit(p) if isinstance(p, str) else p for p in parts], _lit(""))


def _num(x: np.ndarray) -> pa.Array:
    return from_numpy(x, pa.int64()).cast(pa.string())


def _count_texts(view: BatchView, side: Side | None) -> pa.Array:
    """Each row's number of calls of one side as text (made once per batch and side; 0 without a
    reference column)."""
    key = ("ncalls text", side is view.out)
    counts = side.row_ncalls if side is not None else np.zeros(view.n, dtype=np.int64)
    text: pa.Array = view.cached(key, lambda: _num(counts))
    return text


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
        ok = np.zeros(n, dtype=bool)
        why: Callable[[], Reasons] = list
        if ref is not None and has_ref.any():
            if self.mode == "strict" and not self.flat:
                ok, why = _strict_messages(view, out, ref, self.exact, has_ref)
            elif self.mode == "strict":
                ok, why = _strict_calls(view, out, ref, self.exact, has_ref)
            elif self.mode == "subsequence":
                ok, why = _subsequence(view, out, ref, self.exact, has_ref)
            else:
                ok, why = _multiset(view, out, ref, self.exact, has_ref, self.mode)
        score = ok.astype(np.float64)
        no_ref = ~has_ref
        head = f"{self.label} match "

        def comment() -> pa.Array:
            summary = _join(
                [
                    pc.if_else(from_numpy(ok), _lit(head + "pass: "), _lit(head + "fail: ")),
                    _count_texts(view, out),
                    " agent tool call(s) vs ",
                    _count_texts(view, ref),
                    " reference",
                ]
            )
            reason = _reason_column(n, why())
            if reason is not None:
                summary = pc.if_else(pc.is_valid(reason), _join([summary, "; ", reason]), summary)
            if no_ref.any():
                summary = pc.if_else(from_numpy(no_ref), _lit("no reference trajectory to compare with"), summary)
            return summary.cast(pa.string())

        return KeyColumns(
            self.key,
            from_numpy(score, mask=no_ref),
            from_numpy(ok, mask=no_ref),
            _passed(score, has_ref, self.threshold),
            comment,
            None,
            self.threshold,
        )


# the modes: (ok per row, the reasons of the failing rows, rendered on demand); what several keys
# of one batch share (codes, equal lists, unmatched calls) is computed once per view


def _same(view: BatchView, out: Side, ref: Side, exact: bool) -> np.ndarray:
    def make() -> np.ndarray:
        oc, rc = view.call_codes(exact)
        return k.same_sequences(oc, out.call_row, out.row_ncalls, rc, ref.call_row, ref.row_ncalls)

    same: np.ndarray = view.cached(("same", exact), make)
    return same


def _counted(view: BatchView, out: Side, ref: Side, exact: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, from the counts of each call code on both sides: whether some reference call has
    no agent call left to pair with (greedy first-fit), whether some agent call has no reference
    call left, and how many pairs there are (the reference calls reproduced)."""

    def make() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        oc, rc = view.call_codes(exact)
        return k.multiset_counts(out.call_row, oc, ref.call_row, rc, out.n)

    found: tuple[np.ndarray, np.ndarray, np.ndarray] = view.cached(("counts", exact), make)
    return found


def _first_miss(view: BatchView, out: Side, ref: Side, exact: bool, rows: np.ndarray, of_reference: bool) -> np.ndarray:
    """For ``rows``: the position of the first call greedy first-fit leaves unmatched (reference
    calls against the agent's when ``of_reference``, else agent calls against the reference's),
    -1 when none (only the failing rows' comments need this)."""
    oc, rc = view.call_codes(exact)
    width = int(max(oc.max(initial=0), rc.max(initial=0))) + 1
    o_idx, o_rows = out.calls_of(rows)
    r_idx, r_rows = ref.calls_of(rows)
    o_keys = k.keys(o_rows, oc[o_idx], width)
    r_keys = k.keys(r_rows, rc[r_idx], width)
    if of_reference:
        first = _first(k.unmatched(o_keys, r_keys), r_idx, ref, out.n)
    else:
        first = _first(k.unmatched(r_keys, o_keys), o_idx, out, out.n)
    found: np.ndarray = first[rows]
    return found


def _multiset(
    view: BatchView, out: Side, ref: Side, exact: bool, has_ref: np.ndarray, mode: str
) -> tuple[np.ndarray, Callable[[], Reasons]]:
    same = _same(view, out, ref, exact)
    todo = has_ref & ~same
    ok = has_ref & same
    if not todo.any():
        return ok, list
    ref_over, out_over, _ = _counted(view, out, ref, exact)
    sup_fail = ref_over if mode in ("superset", "unordered") else np.zeros(out.n, dtype=bool)
    sub_fail = out_over if mode in ("subset", "unordered") else np.zeros(out.n, dtype=bool)
    ok = ok | (todo & ~sup_fail & ~sub_fail)

    def why() -> Reasons:
        rows_sup = np.flatnonzero(todo & sup_fail)
        rows_sub = np.flatnonzero(todo & ~sup_fail & sub_fail)
        pos_sup = _first_miss(view, out, ref, exact, rows_sup, True)
        pos_sub = _first_miss(view, out, ref, exact, rows_sub, False)
        return [
            (
                rows_sup,
                _join(
                    [
                        "reference call ",
                        _num(pos_sup),
                        " ",
                        _describe(ref, ref.row_calls[rows_sup] + pos_sup),
                        " not found among the agent's calls",
                    ]
                ),
            ),
            (
                rows_sub,
                _join(
                    [
                        "agent call ",
                        _num(pos_sub),
                        " ",
                        _describe(out, out.row_calls[rows_sub] + pos_sub),
                        " is not in the reference",
                    ]
                ),
            ),
        ]

    return ok, why


def _strict_calls(
    view: BatchView, out: Side, ref: Side, exact: bool, has_ref: np.ndarray
) -> tuple[np.ndarray, Callable[[], Reasons]]:
    n = out.n
    oc, rc = view.call_codes(exact)
    lens_eq = out.row_ncalls == ref.row_ncalls
    same = _same(view, out, ref, exact)
    ok = has_ref & same  # equal lists: equal lengths, equal calls in order

    def why() -> Reasons:
        short = np.flatnonzero(has_ref & ~lens_eq)
        bad = np.flatnonzero(has_ref & lens_eq & ~same)
        pos = k.first_difference(oc, out.row_calls[:-1], rc, ref.row_calls[:-1], out.row_ncalls, bad, n)[bad]
        return [
            (
                short,
                _join(
                    [
                        _num(out.row_ncalls[short]),
                        " agent tool calls vs ",
                        _num(ref.row_ncalls[short]),
                        " in the reference",
                    ]
                ),
            ),
            (
                bad,
                _join(
                    [
                        "tool call ",
                        _num(pos),
                        ": agent ",
                        _describe(out, out.row_calls[bad] + pos),
                        " vs reference ",
                        _describe(ref, ref.row_calls[bad] + pos),
                    ]
                ),
            ),
        ]

    return ok, why


def _subsequence(
    view: BatchView, out: Side, ref: Side, exact: bool, has_ref: np.ndarray
) -> tuple[np.ndarray, Callable[[], Reasons]]:
    oc, rc = view.call_codes(exact)
    same = _same(view, out, ref, exact)
    j = ref.row_ncalls.copy()  # equal lists: every reference call matched in order
    rest = has_ref & ~same
    if rest.any():
        sel = np.flatnonzero(rest)
        j[sel] = k.subsequence(oc, out.row_calls[sel], out.row_ncalls[sel], rc, ref.row_calls[sel], ref.row_ncalls[sel])
    ok = has_ref & (j == ref.row_ncalls)

    def why() -> Reasons:
        bad = np.flatnonzero(has_ref & ~ok)
        pos = j[bad]
        text = _join(
            [
                "reference call ",
                _num(pos),
                " ",
                _describe(ref, ref.row_calls[bad] + pos),
                " does not appear in order after the earlier matches",
            ]
        )
        return [(bad, text)]

    return ok, why


def _strict_messages(
    view: BatchView, out: Side, ref: Side, exact: bool, has_ref: np.ndarray
) -> tuple[np.ndarray, Callable[[], Reasons]]:
    oc, rc = view.call_codes(exact)
    nm_o, nm_r = out.row_nmsgs, ref.row_nmsgs
    ok = has_ref & (nm_o == nm_r)
    # the message pairs of those rows: the messages of rows of equal length line up one to one
    om = np.flatnonzero(ok[out.msg_row])
    rm = np.flatnonzero(ok[ref.msg_row])
    pair_row = out.msg_row[om]
    ac = out.msg_ncalls[om]
    bc = ref.msg_ncalls[rm]
    role_diff = out.roles[om] != ref.roles[rm]
    miss = np.full(len(om), -1, dtype=np.int64)
    # equal call lists per row and equal call counts per message: every message's calls are equal
    same = _same(view, out, ref, exact)
    pairs = np.flatnonzero((ac == bc) & (ac > 0) & ~role_diff & ~same[pair_row])
    if len(pairs):
        cnt = ac[pairs]
        ctotal = int(cnt.sum())
        cstart = np.cumsum(cnt) - cnt
        cwithin = np.arange(ctotal, dtype=np.int64) - np.repeat(cstart, cnt)
        a_codes = oc[np.repeat(out.msg_calls[om[pairs]], cnt) + cwithin]
        b_codes = rc[np.repeat(ref.msg_calls[rm[pairs]], cnt) + cwithin]
        differ = a_codes != b_codes
        if differ.any():
            # only the messages whose calls differ in order are compared as multisets
            pid = np.repeat(np.arange(len(pairs), dtype=np.int64), cnt)
            dsel = np.isin(pid, np.unique(pid[differ]))
            width = int(max(oc.max(initial=0), rc.max(initial=0))) + 1
            unm = k.unmatched(k.keys(pid[dsel], b_codes[dsel], width), k.keys(pid[dsel], a_codes[dsel], width))
            hit = np.flatnonzero(unm)
            if len(hit):
                owner = pid[dsel][hit]
                uniq, first = np.unique(owner, return_index=True)
                miss[pairs[uniq]] = cwithin[dsel][hit[first]]
    failing = np.flatnonzero(role_diff | (ac != bc) | (miss >= 0))
    fr = pair_row[failing]  # ascending: the first failing message pair of each failing row
    head_of = np.ones(len(fr), dtype=bool)
    np.not_equal(fr[1:], fr[:-1], out=head_of[1:])
    fp = failing[head_of]
    owner_rows = fr[head_of]
    ok[owner_rows] = False

    def why() -> Reasons:
        counts = np.flatnonzero(has_ref & (nm_o != nm_r))
        groups: Reasons = [
            (counts, _join([_num(nm_o[counts]), " messages vs ", _num(nm_r[counts]), " in the reference"]))
        ]
        fa, fb = ac[fp], bc[fp]
        kinds = np.full(len(fp), 5, dtype=np.int8)  # the first reason that holds, in this order:
        kinds[(fa > 0) & (fb > 0) & (fa != fb)] = 4
        kinds[(fa > 0) & (fb == 0)] = 3
        kinds[(fa == 0) & (fb > 0)] = 2
        kinds[role_diff[fp]] = 1
        at = _num(om[fp] - out.row_msgs[owner_rows])
        for kind in (1, 2, 3, 4, 5):
            sel = np.flatnonzero(kinds == kind)
            if not len(sel):
                continue
            rows, p, head = owner_rows[sel], fp[sel], _join(["message ", at.take(from_numpy(sel)), ": "])
            if kind == 1:
                a = strings([repr(out.role_names(int(m))) for m in om[p]])
                b = strings([repr(ref.role_names(int(m))) for m in rm[p]])
                text = _join([head, "role ", a, " vs ", b, " in the reference"])
            elif kind == 2:
                text = _join([head, "agent message has no tool calls, the reference message does"])
            elif kind == 3:
                text = _join([head, "agent message has tool calls, the reference message does not"])
            elif kind == 4:
                text = _join([head, _num(ac[p]), " tool calls vs ", _num(bc[p]), " in the reference"])
            else:
                desc = _describe(out, out.msg_calls[om[p]] + miss[p])
                text = _join([head, "agent call ", desc, " has no match in the reference message"])
            groups.append((rows, text))
        return groups

    return ok, why


def _first(miss: np.ndarray, idx: np.ndarray, side: Side, n: int) -> np.ndarray:
    """Per row: the position within the row of its first missed call (``idx``: the flat calls
    ``miss`` is about), -1 when none."""
    out = np.full(n, -1, dtype=np.int64)
    hit = np.flatnonzero(miss)
    if not len(hit):
        return out
    calls = idx[hit]
    rows = side.rows_of_calls(calls)
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
        has_ref = view.has_ref & ~view.fallback()
        scored = has_ref & (n_ref > 0)
        hits = np.zeros(n, dtype=np.int64)
        if ref is not None and scored.any():
            same = _same(view, out, ref, self.exact)
            hits[same] = n_ref[same]
            todo = has_ref & ~same
            if todo.any():
                hits[todo] = _counted(view, out, ref, self.exact)[2][todo]
        score = hits / np.where(scored, n_ref, 1)
        hits_text, ref_text = _num(hits), _count_texts(view, ref)
        value = _join([hits_text, "/", ref_text])

        def comment() -> pa.Array:
            text = _join(["reproduced ", hits_text, " of ", ref_text, " reference tool calls"])
            none = _lit("no reference tool calls to score against")
            return pc.if_else(from_numpy(scored), text, none).cast(pa.string())

        return KeyColumns(
            self.key,
            from_numpy(score, mask=~scored),
            pc.if_else(from_numpy(scored), value, pa.nulls(1, pa.string())[0]),
            _passed(score, scored, self.threshold),
            comment,
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
        if code is not None and len(out.row_calls) and out.row_calls[-1]:
            oc, _ = view.name_codes()
            hit = oc == code
            if self.expected_args is not None:
                args, _ = view.arg_codes()
                want = view.canon_code(self.expected_args)
                hit &= args == want if want is not None else False
            ok[out.rows_of_calls(np.flatnonzero(hit))] = True
        score = ok.astype(np.float64)
        every = np.ones(n, dtype=bool)
        return KeyColumns(
            self.key,
            from_numpy(score),
            from_numpy(ok),
            _passed(score, every, self.threshold),
            pc.if_else(from_numpy(ok), _lit(self.comments[0]), _lit(self.comments[1])).cast(pa.string()),
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
            from_numpy(sc, mask=~scored),
            from_numpy(np.array([bool(v) for v in value]), mask=np.array([v is None for v in value], dtype=bool)),
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
