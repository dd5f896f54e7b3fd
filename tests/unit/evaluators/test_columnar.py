"""The columnar scorer's API: which plans exist, what they read, and the forms not covered by the
differential test (dictionary-encoded names, text checks, batches only the object path reads)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.connectors.parquet_traces import BatchRows, columnar_plan
from assay.evaluators import (
    Contains,
    EditDistance,
    ExactMatch,
    JsonValid,
    RegexMatch,
    ToolCallAccuracy,
    ToolUse,
    TrajectoryMatch,
)
from assay.evaluators.base import BaseEvaluator
from assay.evaluators.columnar import columnar_enabled, plan
from assay.stages.normalize import trace_warnings
from tests.support.columnar_corpus import MESSAGE, universe
from tests.unit.evaluators.test_columnar_diff import object_trace


def _object(batch: pa.RecordBatch, ev: BaseEvaluator[Any]) -> list[tuple[Any, ...] | None]:
    """Each row's result as the engine's object path gives it (None: a dead letter or a warning)."""
    rows = BatchRows(batch, columnar_plan(batch.schema))
    out: list[tuple[Any, ...] | None] = []
    for i in range(batch.num_rows):
        t = object_trace(rows, i)
        if t is None or trace_warnings(t):
            out.append(None)
            continue
        r = ev.score_trace(t)[0]
        out.append((r.score, r.value, r.passed, r.comment, r.error))
    return out


def _columnar(batch: pa.RecordBatch, ev: BaseEvaluator[Any]) -> list[tuple[Any, ...] | None]:
    p = plan([ev], batch.schema)
    assert p is not None
    s = p.score(batch)
    c = s.results[ev.key]
    fb = set(s.fallback_rows())
    error = c.error.to_pylist() if c.error is not None else [None] * batch.num_rows
    cols = [c.score.to_pylist(), c.value.to_pylist(), c.passed.to_pylist(), c.comment.to_pylist(), error]
    return [None if i in fb else tuple(col[i] for col in cols) for i in range(batch.num_rows)]


def _same(columnar: list[tuple[Any, ...] | None], obj: list[tuple[Any, ...] | None]) -> None:
    """Equal results wherever the columns decided; every object-path dead letter or warning row
    sent back to the object path; nearly every row decided."""
    assert all(c is None for c, o in zip(columnar, obj, strict=True) if o is None)
    pairs = [(c, o) for c, o in zip(columnar, obj, strict=True) if c is not None]
    assert [c for c, _ in pairs] == [o for _, o in pairs]
    assert len(pairs) >= 0.9 * len([o for o in obj if o is not None])


def test_plan_is_none_where_a_form_is_missing_and_partial_leaves_it_to_the_object_path() -> None:
    schema = universe(5).schema
    tm = TrajectoryMatch(mode="unordered", tool_args_match_mode="ignore")
    assert plan([tm], schema) is not None
    for ev in (
        TrajectoryMatch(mode="unordered", tool_args_match_mode="subset"),
        TrajectoryMatch(mode="unordered", tool_args_match_overrides={"search": "ignore"}),
        ToolCallAccuracy(args_match_mode="superset"),
        ToolUse(expected_tool="x", expected_args={"a": 1}),  # subset of arguments: parsed
        EditDistance(),
    ):
        assert plan([tm, ev], schema) is None, ev
        p = plan([tm, ev], schema, partial=True)
        assert p is not None and p.keys == [tm.key] and p.object_evaluators == [ev]
    assert plan([tm], pa.schema([("outputs", pa.string())])) is None  # not an OpenAI message table
    assert plan([tm], pa.schema([*schema, ("scenario", pa.string())])) is None  # scenario calls count


def test_a_sampled_evaluator_has_no_columnar_form() -> None:
    from assay.sampling import Sampler, SampleSpec

    ev = TrajectoryMatch(mode="strict")
    ev.sampler = Sampler(SampleSpec(rate=0.5), ev.key)
    assert plan([ev], universe(3).schema) is None


def test_plan_reads_only_the_columns_and_leaves_its_forms_need(tmp_path: Any) -> None:
    batch = universe(20)
    pq.write_table(pa.Table.from_batches([batch]), tmp_path / "t.parquet")
    pf = pq.ParquetFile(tmp_path / "t.parquet")
    name_level = plan([TrajectoryMatch(mode="strict", tool_args_match_mode="ignore")], batch.schema)
    assert name_level is not None
    assert name_level.columns == ["id", "messages", "reference"]
    leaves = name_level.parquet_columns(pf.schema)
    assert "messages.list.element.tool_calls.list.element.function.name" in leaves
    assert not any(leaf.endswith((".arguments", ".content", ".id", ".type")) for leaf in leaves if leaf != "id")
    exact = plan([ToolCallAccuracy(), JsonValid()], batch.schema)
    assert exact is not None
    leaves = exact.parquet_columns(pf.schema)
    assert "reference.list.element.tool_calls.list.element.function.arguments" in leaves
    assert "messages.list.element.content" in leaves
    # a table read with only those leaves scores the same (rows with defective arguments too:
    # unread arguments are no defect; comments then show calls without their arguments)
    small = pf.read(columns=name_level.parquet_columns(pf.schema)).combine_chunks().to_batches()[0]
    ev = TrajectoryMatch(mode="strict", tool_args_match_mode="ignore")
    full, read = _columnar(batch, ev), _columnar(small, ev)
    assert [r[:3] for r in full if r is not None] == [r[:3] for r, f in zip(read, full, strict=True) if f is not None]
    _same(_columnar(small, ev), _object(small, ev))


def test_dictionary_encoded_tool_names_score_the_same() -> None:
    batch = universe(600, seed=3)
    fn = pa.struct([("name", pa.dictionary(pa.int32(), pa.string())), ("arguments", pa.string())])
    call = pa.struct([("id", pa.string()), ("type", pa.string()), ("function", fn)])
    msg = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(call))])
    encoded = pa.RecordBatch.from_arrays(
        [batch.column(0), batch.column(1).cast(pa.list_(msg)), batch.column(2).cast(pa.list_(msg))],
        names=batch.schema.names,
    )
    assert pa.types.is_dictionary(
        encoded.column(1).type.value_type.field("tool_calls").type.value_type.field("function").type.field("name").type
    )
    for ev in (
        TrajectoryMatch(mode="strict", tool_args_match_mode="ignore"),
        TrajectoryMatch(mode="unordered", tool_args_match_mode="exact"),
        ToolCallAccuracy(args_match_mode="ignore"),
        ToolUse(expected_tool="search"),
    ):
        assert _columnar(encoded, ev) == _columnar(batch, ev), ev.key
        _same(_columnar(batch, ev), _object(batch, ev))


def test_a_batch_with_a_null_message_goes_to_the_object_path_whole() -> None:
    good = [{"role": "user", "content": "hi", "tool_calls": None}]
    messages = pa.array([good, [None], good], pa.list_(MESSAGE))
    batch = pa.record_batch({"messages": messages, "reference": pa.array([good, good, good], pa.list_(MESSAGE))})
    p = plan([TrajectoryMatch(mode="strict")], batch.schema)
    assert p is not None
    assert p.score(batch).fallback_rows() == [0, 1, 2]


def _text_batch(with_final: bool) -> pa.RecordBatch:
    rng = np.random.default_rng(5)
    texts = [
        '{"a": 1}',
        '```json\n{"a": 1}\n```',
        "not json",
        "",
        "  Refund issued for ORDER #42 ",
        "refund",
        None,
        "NaN",
        "[1, 2]",
        "ß straße",
    ]
    n = 300
    out_msgs, ref_msgs, finals = [], [], []
    for _ in range(n):
        a, b = rng.choice(len(texts), 2)
        out_msgs.append(
            [
                {"role": "user", "content": "q", "tool_calls": None},
                {"role": "assistant", "content": texts[a], "tool_calls": None},
            ]
        )
        roll = rng.random()  # no reference, an empty one (the value []), or a reference text
        ref_msgs.append(
            None
            if roll < 0.1
            else []
            if roll < 0.2
            else [{"role": "assistant", "content": texts[b], "tool_calls": None}]
        )
        finals.append(texts[int(rng.integers(len(texts)))] if rng.random() < 0.8 else None)
    cols: dict[str, Any] = {
        "messages": pa.array(out_msgs, pa.list_(MESSAGE)),
        "reference": pa.array(ref_msgs, pa.list_(MESSAGE)),
    }
    if with_final:
        cols["final_output"] = pa.array(finals, pa.string())
    return pa.record_batch(cols)


@pytest.mark.parametrize("with_final", [True, False])
@pytest.mark.parametrize(
    "ev",
    [
        ExactMatch(),
        ExactMatch(case_sensitive=False, type_strict=True),
        Contains(),
        Contains(substring=["refund", "order"], mode="any"),
        RegexMatch(pattern=r"#\d+", flags="i"),
        RegexMatch(pattern="refund", match="fullmatch", negate=True),
        JsonValid(),
        JsonValid(strip_code_fence=True),
    ],
    ids=lambda ev: f"{ev.key}:{sorted(ev.params.model_dump(exclude_defaults=True).items())}",
)
def test_text_checks_equal_the_object_path(ev: BaseEvaluator[Any], with_final: bool) -> None:
    batch = _text_batch(with_final)
    _same(_columnar(batch, ev), _object(batch, ev))


def test_the_switch_and_that_import_assay_loads_no_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_COLUMNAR", "0")
    assert not columnar_enabled()
    monkeypatch.setenv("ASSAY_COLUMNAR", "1")
    assert columnar_enabled()
    code = "import sys, assay, assay.evaluators, assay.pipeline.columnar_run; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_large_list_and_large_string_columns_score_the_same() -> None:
    batch = universe(300, seed=9)

    def large(t: pa.DataType) -> pa.DataType:
        if pa.types.is_list(t):
            return pa.large_list(large(t.value_type))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, large(f.type)) for f in t])
        return pa.large_string() if pa.types.is_string(t) else t

    wide = pa.RecordBatch.from_arrays([c.cast(large(c.type)) for c in batch.columns], names=batch.schema.names)
    evs: list[BaseEvaluator[Any]] = [
        TrajectoryMatch(mode="strict", key="strict"),
        TrajectoryMatch(mode="unordered", tool_args_match_mode="ignore", key="unordered"),
        TrajectoryMatch(mode="subsequence", key="subsequence"),
        ToolCallAccuracy(),
        ToolUse(expected_tool="get_order", expected_args={"id": 1}, args_match_mode="exact"),
        JsonValid(),
    ]
    p, q = plan(evs, batch.schema), plan(evs, wide.schema)
    assert p is not None and q is not None
    a, b = p.score(batch), q.score(wide)
    assert a.fallback_rows() == b.fallback_rows()
    for key in a.results:
        x, y = a.results[key], b.results[key]
        assert x.score.equals(y.score) and x.value.equals(y.value) and x.passed.equals(y.passed), key
        assert x.comment.cast(pa.string()).equals(y.comment.cast(pa.string())), key
