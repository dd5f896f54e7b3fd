"""The engine's columnar path: whole record batches scored by columns, written as columns.

Where the source yields Arrow (the Parquet source), the results sink takes columns (the Parquet
sink, wide layout), and every evaluator of the run has a columnar form for the batch's schema
(:mod:`assay.evaluators.columnar`), a batch is never turned into envelopes, traces and
``Result`` objects: it is scored by :meth:`~assay.evaluators.columnar.ColumnarPlan.score`,
written by :meth:`~assay.connectors.parquet_sink.ParquetSink.write_columns`, counted into the
summary from the result columns, and acknowledged as one span of rows. The rows the columns
cannot decide (a defective record, arguments that are not JSON) are scored by the object path and
merged back in row order; a batch whose schema has no columnar form, or holding rows an earlier
attempt completed, goes the object path whole, through the same pipeline. So rows, dead letters,
the summary, gates and ``_SUCCESS`` are the object path's (``tests/integration/test_columnar_run.py``
compares both outputs). ``ASSAY_COLUMNAR=0`` turns the columnar path off.

:func:`make_pipeline` is the one hook: the writer builds its pipeline through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import ObjectSendStream

from assay.connectors.base import Sink, Source
from assay.evaluators.identity import evaluator_identity
from assay.exceptions import AssayError
from assay.pipeline.commit import Committer
from assay.pipeline.ledger import LedgerEvaluate
from assay.pipeline.runner import Pipeline, Processed, RunOptions
from assay.pipeline.summary import MAX_UNSCORED_REASONS, OTHER_REASONS, KeyStats, RunStats
from assay.records import Failure
from assay.stages.evaluate import EvaluateStage


def _parquet_of(source: Source) -> Any:
    """The Parquet source under a source's wrappers (the export assembler), or None."""
    layer: Any = source
    while layer is not None:
        if hasattr(layer, "arrow_batches"):
            return layer
        layer = getattr(layer, "inner", None)
    return None


def columnar_candidate(
    source: Source, evaluate: EvaluateStage, sink: Sink, options: RunOptions, stats: RunStats
) -> bool:
    """Whether a run may score by columns at all (the schema decides per batch). A rerun over a
    published output (the ledger: kept results merged with the pairs left to score) takes the
    object path."""
    if _parquet_of(source) is None or not hasattr(sink, "write_columns"):
        return False  # decided before the columnar package (pyarrow, numpy, pandas) is imported
    from assay.evaluators.columnar import FORMS, columnar_enabled

    if not columnar_enabled():
        return False
    if getattr(sink, "layout", "wide") != "wide" or options.cluster_by or stats.labels is not None:
        return False
    if isinstance(evaluate, LedgerEvaluate):  # a rerun over a published output: its kept pairs are rows
        return False
    evs = evaluate.evaluators
    return bool(evs) and all(type(ev) in FORMS and ev.sampler is None for ev in evs)


def make_pipeline(
    source: Source,
    evaluate: EvaluateStage,
    sink: Sink,
    dead_letter: Sink,
    options: RunOptions,
    *,
    stats: RunStats,
    on_progress: Callable[[RunStats], None] | None = None,
    committer: Committer | None = None,
) -> Pipeline:
    """The writer's pipeline: a :class:`ColumnarPipeline` where the columnar path may apply."""
    cls = ColumnarPipeline if columnar_candidate(source, evaluate, sink, options, stats) else Pipeline
    return cls(source, evaluate, sink, dead_letter, options, stats=stats, on_progress=on_progress, committer=committer)


@dataclass(slots=True)
class ColumnarProcessed:
    """One batch scored by columns (what the sink loop writes and counts): its result rows as
    columns (``results``: a staged struct per key; ``columns``: what the summary counts), and the
    rows the object path scored in between (``fallback_rows``, their dead letters and warnings)."""

    unit: Any
    trace_ids: Any
    positions: Any
    results: dict[str, Any]
    columns: dict[str, Any]
    fallback_rows: list[int] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    warnings: int = 0


@dataclass(slots=True)
class _Merged:
    """A key's merged result columns as the summary reads them."""

    score: Any
    comment: Any
    error: Any


class ColumnarPipeline(Pipeline):
    """The pipeline, reading Arrow batches and scoring each by columns where it can (module docs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parquet = _parquet_of(self.source)
        self._plans: dict[Any, Any] = {}
        self.columnar_batches = 0
        self.object_batches = 0

    #: Batches scored at once: the scoring's array operations release the GIL, so two batches in
    #: worker threads use both cores; the sink loop writes them back in reading order.
    BATCHES_IN_FLIGHT = 2
    #: Rows of the units read and scored by columns (``ParquetSource.arrow_batches``: across the
    #: consecutive row groups of a file).
    UNIT_ROWS = 8_192
    #: Rows of a unit the object path scores at once (a batch whose schema has no columnar form, or
    #: holding rows an earlier attempt completed, is cut into units of this many rows).
    OBJECT_ROWS = 1_024

    async def run(self) -> Any:
        if getattr(self.parquet, "has_exports", False):  # rows assembled into traces: the wrapper's reading
            self._pump = super()._pump  # type: ignore[method-assign]
        else:
            if self.options.workers is None:
                self.options.workers = self.BATCHES_IN_FLIGHT
            self.options.buffer = self._buffer_units(self.options.buffer)
        return await super().run()

    def _buffer_units(self, buffer: int) -> int:
        """The streams' size in units for ``limits.buffer`` (batches of the object path's
        :attr:`OBJECT_ROWS` rows): the same rows waiting, at least one unit, so the memory of a
        run does not grow with the unit (:attr:`UNIT_ROWS`)."""
        return max(1, -(-buffer * self.OBJECT_ROWS // self.UNIT_ROWS))

    async def _sink_loop(self, recv: Any) -> None:
        """Write what the workers send in the order the batches were read (``(seq, processed)``)."""
        waiting: dict[int, Any] = {}
        expected = 0
        async with recv:
            async for item in recv:
                if not isinstance(item, tuple):
                    await self._write(item)
                    continue
                seq, processed = item
                waiting[seq] = processed
                while expected in waiting:  # (a batch dropped while stopping leaves a gap: nothing after it is written)
                    await self._write(waiting.pop(expected))
                    expected += 1
            await self._read_errors()

    def _columnar(self, unit: Any) -> bool:
        """Whether a unit may be scored by columns (no done rows, a schema with a plan)."""
        return unit.done is None and unit.num_rows > 0 and self._plan(unit.batch.schema) is not None

    def _plan(self, schema: Any) -> Any:
        from assay.evaluators.columnar import plan

        key = schema.to_string()
        if key not in self._plans:
            self._plans[key] = plan(self.evaluate.evaluators, schema)
        return self._plans[key]

    async def _pump(self, send: ObjectSendStream[Any]) -> None:
        async with send:
            try:
                with anyio.CancelScope() as self._reading:
                    if self._reading_stopped:
                        self._reading.cancel()
                    seq = 0
                    async for unit in self.parquet.arrow_batches(self.UNIT_ROWS):
                        self.emitted += unit.pending_rows()
                        # the object path's units: as many as its batches were (memory as before)
                        for piece in [unit] if self._columnar(unit) else unit.pieces(self.OBJECT_ROWS):
                            await send.send((seq, piece))
                            seq += 1
                        if self.status != "ok":
                            break
            except AssayError as exc:
                self.source_error = exc

    async def _process(self, batch: Any) -> Any:
        if isinstance(batch, list):
            return await super()._process(batch)
        seq, unit = batch
        return seq, await self._process_unit(unit)

    async def _process_unit(self, unit: Any) -> Any:
        if not self._columnar(unit):
            self.object_batches += 1
            return await super()._process(unit.envelopes())
        scored = await anyio.to_thread.run_sync(self._score, unit)
        if scored is None:  # (rare: ids written as JSON, every row left to the object path)
            self.object_batches += 1
            return [await super()._process(piece.envelopes()) for piece in unit.pieces(self.OBJECT_ROWS)]
        self.columnar_batches += 1
        if scored.fallback_rows:  # those rows by the object path, their results merged in row order
            done = await super()._process(unit.envelopes(scored.fallback_rows))
            scored = await anyio.to_thread.run_sync(self._merge, scored, done)
        return scored

    def _score(self, unit: Any) -> ColumnarProcessed | None:
        """The batch scored by columns, or None when it must go the object path."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from assay.connectors.arrow_arrays import float_scalar, text_scalar
        from assay.connectors.parquet_schema import SEGMENT_RESULT_TYPE

        if unit.done is not None or not unit.num_rows:
            return None
        batch = unit.batch
        plan = self._plan(batch.schema)
        if plan is None:
            return None
        positions = _positions(unit)
        ids = _trace_ids(batch, plan.layout.id_column, positions)
        if ids is None:
            return None
        scores = plan.score(batch)
        fallback = scores.fallback_rows()
        if len(fallback) == batch.num_rows:
            return None
        n = batch.num_rows
        identity = self._identities()
        half = float_scalar(0.5)
        structs: dict[str, Any] = {}
        for key, cols in scores.results.items():
            staged_passed = pc.greater_equal(cols.score, half)  # staged rows: 0.5, settled at publish
            error = cols.error if cols.error is not None else pa.nulls(n, pa.string())
            ident = identity.get(key)
            structs[key] = pa.StructArray.from_arrays(
                [
                    cols.score,
                    cols.value_text(),
                    staged_passed,
                    cols.comment,
                    error,
                    pa.nulls(n, pa.int64()),
                    pa.nulls(n, pa.int64()),
                    pa.nulls(n, pa.float64()),
                    pa.repeat(text_scalar(ident), n),
                    pa.nulls(n, pa.float64()),
                ],
                fields=list(SEGMENT_RESULT_TYPE),
            )
        return ColumnarProcessed(unit, ids, positions, structs, scores.results, fallback)

    def _merge(self, scored: ColumnarProcessed, done: Processed) -> ColumnarProcessed:
        """The columns of the rows scored by columns and the object path's rows of the others
        (converted by the Parquet sink's own converter), in row order; the object path's dead
        letters and warnings kept."""
        import numpy as np
        import pyarrow as pa

        from assay.connectors.arrow_arrays import from_numpy
        from assay.connectors.parquet_schema import TableBuilder, result_columns
        from assay.records import encode_row

        unit = scored.unit
        keys = list(scored.results)
        keep = np.ones(unit.num_rows, dtype=bool)
        keep[scored.fallback_rows] = False
        kept = np.flatnonzero(keep)
        builder = TableBuilder(keys, own_threshold=True)
        converted = result_columns(done.rows) if done.rows else None
        if converted is not None:
            builder.add_columns(converted[0])
        else:
            import orjson

            for row in done.rows:
                builder.add(orjson.loads(encode_row(row)))
        extra = builder.batch()
        extra_rows = np.array([row["position"]["line"] - unit.first - 1 for row in done.rows], dtype=np.int64)
        order = from_numpy(np.argsort(np.concatenate([kept, extra_rows]), kind="stable").astype(np.int64))
        mask = from_numpy(keep)

        def merged(mine: Any, theirs: Any) -> Any:
            return pa.concat_arrays([mine.filter(mask), theirs]).take(order)

        results = {k: merged(scored.results[k], extra.column(k)) for k in keys}
        columns = {k: _Merged(v.field("score"), v.field("comment"), v.field("error")) for k, v in results.items()}
        return ColumnarProcessed(
            unit,
            merged(scored.trace_ids, extra.column("trace_id")),
            merged(scored.positions, extra.column("position")),
            results,
            columns,
            scored.fallback_rows,
            done.failures,
            done.warnings,
        )

    def _identities(self) -> dict[str, str]:
        if self._identity is None:
            self._identity = {ev.key: evaluator_identity(ev) for ev in self.evaluate.evaluators}
        return self._identity

    async def _write(self, p: Any) -> None:
        if isinstance(p, list):  # a unit the object path scored a piece at a time
            for piece in p:
                await super()._write(piece)
            return
        if isinstance(p, Processed):
            await super()._write(p)
            return
        written = len(p.trace_ids)
        await self.sink.write_columns(p.trace_ids, self.options.run_id, p.positions, p.results)  # type: ignore[attr-defined]
        if p.failures:
            await self.dead_letter.write_failures(p.failures)
        stats = self.stats
        stats.counts["read"] += p.unit.num_rows
        stats.counts["scored"] += written
        stats.counts["warnings"] += p.warnings
        for f in p.failures:
            if f.severity == "error":
                stats.add_dead_letter(f)
        for key, cols in p.columns.items():
            add_columns(stats, key, cols)
        await self._read_errors()
        commit = self.committer
        if commit is not None:
            commit.add([p.unit.span()], written)
            await commit.maybe_commit()
        if self.on_progress is not None:
            self.on_progress(stats)


def _trace_ids(batch: Any, column: str | None, positions: Any) -> Any:
    """Each row's trace id as the object path sets it (the id column's text, else the position),
    or None when some id would read differently (JSON text decoded, a type other than text or
    integer): the batch then goes the object path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column is None:
        return positions
    ids = batch.column(column)
    t = ids.type
    if pa.types.is_integer(t):
        text = ids.cast(pa.string())
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        text = ids.cast(pa.string())
        if pc.any(pc.match_substring_regex(text, r"^\s*[\[{]")).as_py():
            return None  # JSON text: the object path decodes it
    elif pa.types.is_null(t):
        return positions
    else:
        return None
    return pc.coalesce(text, positions)


def _positions(unit: Any) -> Any:
    """Each row's position, ``name:line`` (1-based lines)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from assay.connectors.arrow_arrays import from_numpy, text_scalar

    lines = from_numpy(np.arange(unit.first + 1, unit.first + unit.num_rows + 1, dtype=np.int64)).cast(pa.string())
    return pc.binary_join_element_wise(text_scalar(f"{unit.name}:"), lines, text_scalar(""))


def add_columns(stats: RunStats, key: str, cols: Any) -> None:
    """One key's result columns into the run's statistics, exactly as adding each row's
    ``Result`` would (:meth:`KeyStats.add`: the same counts, the same float sums in row order,
    the unscored reasons in the order they first appear)."""
    import numpy as np

    from assay.connectors.arrow_arrays import float_scalar, to_numpy

    ks = stats.keys.get(key)
    if ks is None:
        ks = stats.keys[key] = KeyStats(threshold=stats.threshold_for(key), level=stats.level)
    n = len(cols.score)
    ks.count += n
    errors = 0 if cols.error is None else n - cols.error.null_count
    ks.errors += errors
    scored_mask = to_numpy(cols.score.is_valid()).copy()
    if cols.error is not None:
        scored_mask &= to_numpy(cols.error.is_null())
    unscored = n - errors - int(scored_mask.sum())
    if unscored:
        ks.unscored += unscored
        _unscored_reasons(ks, cols)
    scores = to_numpy(cols.score.fill_null(float_scalar(0.0)), np.float64)[scored_mask]
    if not len(scores):
        return
    passed = scores >= ks.threshold
    ks.scored += len(scores)
    npassed = int(passed.sum())
    ks.total = _running_sum(ks.total, scores)
    ks.passed += npassed
    m = ks.moments
    m.n += len(scores)
    m.sx = _running_sum(m.sx, scores)
    m.sxx = _running_sum(m.sxx, scores * scores)
    m.sp = _running_sum(m.sp, np.ones(npassed, dtype=np.float64))


def _running_sum(start: float, values: Any) -> float:
    """``start`` plus every value (a float64 array), added one by one in order: the floats a loop
    of ``+=`` gives (``np.add.accumulate`` adds sequentially, unlike ``np.sum``'s pairwise sum)."""
    import numpy as np

    if not len(values):
        return start
    acc = np.add.accumulate(np.concatenate([np.array([start], dtype=np.float64), values]))
    return float(acc[-1])


def _unscored_reasons(ks: KeyStats, cols: Any) -> None:
    import pyarrow.compute as pc

    mask = pc.is_null(cols.score)
    if cols.error is not None:
        mask = pc.and_(mask, pc.is_null(cols.error))
    comments = pc.filter(cols.comment, mask).to_pylist()
    reasons = ks.unscored_reasons
    counted: dict[str, int] = {}
    for c in comments:
        r = (c or "no reason given")[:120]
        counted[r] = counted.get(r, 0) + 1
    for reason, k in counted.items():  # in the order they first appear, as row by row
        if reason not in reasons and len(reasons) >= MAX_UNSCORED_REASONS:
            reason = OTHER_REASONS
        reasons[reason] = reasons.get(reason, 0) + k


__all__ = ["ColumnarPipeline", "columnar_candidate", "make_pipeline"]
