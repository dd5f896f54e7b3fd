"""What the Ray and Spark integrations share: a run file's evaluators over Arrow batches of trace
rows, on a worker that is not ``assay run`` (a Ray actor, a Spark executor's Python worker).

:class:`BatchScorer` reads each row as ``assay run`` reads a row of a Parquet table (the Parquet
source's row → trace code, the same ``normalize`` paths, JSON-text columns decoded) and scores the
traces through the engine's own batch step (:class:`assay.pipeline.runner.Pipeline`): the result
rows, dead letters, warnings and abandoned traces of a batch are exactly the ones the engine would
hand its sinks (a :class:`~assay.pipeline.runner.Processed`). Async evaluators (judges) run on an
event loop in a thread of the worker, with the run's judge pool open between batches.

:func:`score_table` turns a processed batch into the score columns both integrations return: the
Parquet sink's schema (``trace_id``, ``run_id``, ``ds``, ``position``, one struct per result key)
plus ``read_error``, one row per input row in input order.

**The columnar path.** When every evaluator of the run has a columnar form for the batch's schema
(:func:`assay.evaluators.columnar.plan`; the run's ``normalize`` section is the default, as for
the Parquet source's fast path, and ``ASSAY_COLUMNAR`` is not ``0``), :meth:`BatchScorer.columns`
scores the batch by columns: no trace object is built, and only the rows the columns cannot
decide as the object path would (``ColumnarScores.fallback``, a row without an id) go through the
object path, batched, their score rows put back in place. Otherwise (another schema, an evaluator
without a columnar form, a judge) the whole batch takes the object path.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import pyarrow as pa

from assay.config import RunConfig, build_config, load_run_file, stable_run_id
from assay.connectors.base import Sink, Source
from assay.connectors.parquet_schema import PLATFORM_TYPE, RESULT_TYPE, TableBuilder
from assay.connectors.parquet_traces import BatchRows, Row, columnar_plan
from assay.evaluators.identity import evaluator_identity
from assay.exceptions import BudgetExceeded
from assay.pipeline.assembly import build_evaluators
from assay.pipeline.runner import Pipeline, Processed, RunOptions
from assay.records import Envelope, Failure, Position, Result
from assay.stages.evaluate import EvaluateStage, PartialBatch
from assay.traces.normalize import DEFAULT_OPTIONS


def run_config(
    run_file: str | Path | None,
    config: Mapping[str, Any] | RunConfig | None,
    *,
    ds: str | None = None,
    sets: Sequence[str] | None = None,
    who: str = "assay",
) -> RunConfig:
    """The run file (``run_file``), or a run file's contents (``config``: a dict or a
    :class:`RunConfig`), validated as ``assay run --ds … --set …`` validates it."""
    if (run_file is None) == (config is None):
        raise ValueError(f"{who}: pass run_file or config (one of them)")
    if run_file is not None:
        return load_run_file(run_file, ds=ds, sets=list(sets) if sets else None)
    if isinstance(config, RunConfig):
        return config
    return build_config(dict(config or {}), ds=ds, sets=list(sets) if sets else None)


def default_run_id(config: RunConfig) -> str:
    """The ``run_id`` column: the run file's, else the stable id ``assay run`` gives the run."""
    return str(config.run_id) if config.run_id else stable_run_id(config)


class _Detached(Source):
    """The source of a :class:`Pipeline` used for its batch step only: nothing to read or stop."""

    def batches(self) -> Any:  # pragma: no cover - never read
        raise RuntimeError("a detached pipeline reads nothing")


class BatchScorer:
    """A run's evaluators over Arrow batches (see the module docs). ``run_id``: the rows'
    ``run_id`` (default: :func:`default_run_id`); ``use_cache``: answer from and store into the
    run's judge cache."""

    def __init__(
        self,
        config: RunConfig,
        *,
        run_id: str | None = None,
        use_cache: bool = True,
        scope: str = "ray",
        cut_as_errors: bool = True,
    ) -> None:
        self.config = config
        self.run_id = run_id or default_run_id(config)
        self.use_cache = use_cache
        self.scope = scope
        """Which integration: the judge budget is shared under ``<scope>:<run_id>``."""
        self.evaluators = build_evaluators(config)
        self.stage = (
            _CutAsErrors(self.evaluators, config.limits.budget_usd) if cut_as_errors else EvaluateStage(self.evaluators)
        )
        options = RunOptions(
            batch_size=config.limits.batch_size,
            normalize=config.normalize,
            run_id=self.run_id,
            cluster_by=config.stats.cluster_by,
        )
        nowhere = cast(Sink, None)  # the batch step writes nothing
        self.pipeline = Pipeline(_Detached(), self.stage, nowhere, nowhere, options)
        self.thresholds: dict[str, float] = {ev.key: ev.threshold for ev in self.evaluators}
        self._loop: contextlib.ExitStack | None = None
        self._portal: Any = None
        self.pool: Any = None
        self.partitions = 0
        """Partitions (Spark) this scorer finished."""
        self.uid = uuid.uuid4().hex
        """Which scorer (of which worker process) reports its judge counts."""
        self._plans: dict[pa.Schema, Any] = {}

    @property
    def keys(self) -> list[str]:
        """The result keys the evaluators declare (one per evaluator)."""
        return [ev.key for ev in self.evaluators]

    # -- the event loop that holds the judges (async evaluators only) --------------------------

    def _start(self) -> None:
        from anyio.from_thread import start_blocking_portal

        stack = contextlib.ExitStack()
        self._portal = stack.enter_context(start_blocking_portal())
        if self.config.judges:
            from assay.judges.pool import JudgePool

            pool = JudgePool.from_config(
                self.config.judges,
                state_dir=Path(self.config.state_dir),
                use_cache=self.use_cache,
                budget_usd=self.config.limits.budget_usd,
                budget_scope=f"{self.scope}:{self.run_id}",  # one budget for every worker of the job (and its reruns)
                budget_store=self.config.rate_store,
            )
            self.pool = stack.enter_context(self._portal.wrap_async_context_manager(pool))
            for ev in self.evaluators:
                ev.use_judges(self.pool)
        self._loop = stack

    def judge_stats(self) -> dict[str, Any]:
        """The judges' counts so far (requests, tokens, cost, …; empty without judges)."""
        return dict(self.pool.stats()) if self.pool is not None else {}

    @property
    def status(self) -> str:
        """``ok``, or ``budget`` once the judge budget stopped a batch short."""
        return self.pipeline.status

    def close(self) -> None:
        """Close the judges and stop the event loop (also on garbage collection)."""
        loop, self._loop = self._loop, None
        self.pool = None
        if loop is not None:
            loop.close()

    def __del__(self) -> None:
        if self._loop is None:  # nothing to close (at exit, a module's globals may be gone already)
            return
        with contextlib.suppress(Exception):
            self.close()

    async def _process(self, envelopes: list[Envelope]) -> Processed:
        return await self.pipeline._process(envelopes)

    # -- one batch ------------------------------------------------------------------------------

    def process(
        self, batch: pa.RecordBatch, name: str, first: int = 0, lines: Sequence[int] | None = None
    ) -> Processed:
        """Score one batch of trace rows (positions ``name:first+1`` …, or ``name:line`` for each
        of ``lines``) as the engine's batch step does: result rows, dead letters, warnings."""
        rows = BatchRows(batch, columnar_plan(batch.schema))
        at = range(first + 1, first + batch.num_rows + 1) if lines is None else lines
        envelopes = [Envelope(b"", Position(name, line), record=Row(rows, i)) for i, line in enumerate(at)]
        if self.stage.streaming:
            return self.pipeline._process_streaming(envelopes)
        if self._loop is None:
            self._start()
        out: Processed = self._portal.call(self._process, envelopes)
        return out

    # -- the columnar path ---------------------------------------------------------------------

    @cached_property
    def may_use_columns(self) -> bool:
        """Whether this run may score by columns at all (see the module docs)."""
        from assay.evaluators.columnar import columnar_enabled

        return columnar_enabled() and self.config.normalize == DEFAULT_OPTIONS and not self.stage.reads_scenario

    def columnar_plan(self, schema: pa.Schema) -> Any:
        """The columnar plan of the run's evaluators for ``schema`` (None: the object path)."""
        if not self.may_use_columns:
            return None
        if schema not in self._plans:
            from assay.evaluators.columnar import plan

            self._plans[schema] = plan(self.evaluators, schema)
        return self._plans[schema]

    def read_columns(self, schema: pa.Schema) -> list[str] | None:
        """The top-level columns the columnar plan reads (None: every column, for the object path)."""
        p = self.columnar_plan(schema)
        return None if p is None else list(p.columns)

    @cached_property
    def identities(self) -> dict[str, str]:
        return {ev.key: evaluator_identity(ev) for ev in self.evaluators}

    def columns(
        self, batch: pa.RecordBatch, name: str, *, first: int = 0, ds: str | None = None, comments: bool = True
    ) -> pa.Table:
        """The score columns of one batch (:func:`score_table`'s, for the evaluators' keys): by
        columns where the run has a columnar plan for the batch's schema, else by the object path.
        ``comments=False``: every ``comment`` null (the columnar path does not build them)."""
        table = self._columns(batch, name, first, ds, comments)
        return table if comments else _without_comments(table, self.keys)

    def _columns(self, batch: pa.RecordBatch, name: str, first: int, ds: str | None, comments: bool) -> pa.Table:
        p = self.columnar_plan(batch.schema)
        if p is None:
            processed = self.process(batch, name, first)
            self.observe(processed)
            return score_table(
                processed, self.keys, run_id=self.run_id, ds=ds, thresholds=self.thresholds, extra_keys=False
            )
        import numpy as np
        import pyarrow.compute as pc

        n = batch.num_rows
        ids = _trace_ids(batch, p.layout.id_column)
        if ids is None:  # ids the object path reads otherwise (JSON text, another type): every row
            processed = self.process(batch, name, first)
            self.observe(processed)
            return score_table(
                processed, self.keys, run_id=self.run_id, ds=ds, thresholds=self.thresholds, extra_keys=False
            )
        scores = p.score(batch)
        # a row without an id (its trace id is its position) or whose id is JSON text: the object path
        fallback = np.asarray(ids.is_null(), dtype=bool) | _json_text(ids)
        if scores.fallback is not None:
            fallback |= scores.fallback.to_numpy(zero_copy_only=False)
        lines = pa.array(np.arange(first + 1, first + n + 1), pa.int64())
        position = pc.binary_join_element_wise(pa.scalar(name), lines.cast(pa.string()), ":")
        cols: dict[str, pa.Array] = {
            "trace_id": ids,
            "run_id": pa.array([self.run_id] * n, pa.string()),
            "ds": pa.array([ds] * n, pa.string()),
            "position": position,
            "platform": pa.nulls(n, PLATFORM_TYPE),  # a trace read by columns is in no platform's format
        }
        for key in self.keys:
            kc = scores.results[key]
            none_i = pa.nulls(n, pa.int64())
            fields = [
                kc.score,
                kc.value_text(),
                kc.passed,
                kc.comment if comments else pa.nulls(n, pa.string()),
                kc.error if kc.error is not None else pa.nulls(n, pa.string()),
            ]
            fields += [none_i, none_i, pa.nulls(n, pa.float64()), pa.array([self.identities.get(key)] * n, pa.string())]
            cols[key] = pa.StructArray.from_arrays(fields, fields=list(RESULT_TYPE))
        cols["read_error"] = pa.nulls(n, pa.string())
        table = pa.table(cols)
        if not fallback.any():
            return table
        redo = np.flatnonzero(fallback)
        keep = np.flatnonzero(~fallback)
        processed = self.process(batch.take(pa.array(redo)), name, lines=[first + int(i) + 1 for i in redo])
        self.observe(processed)
        slow = score_table(
            processed, self.keys, run_id=self.run_id, ds=ds, thresholds=self.thresholds, extra_keys=False
        )
        merged = pa.concat_tables([table.take(pa.array(keep)), slow.cast(table.schema)])
        order = np.argsort(np.concatenate([keep, redo]), kind="stable")
        return merged.take(pa.array(order))

    def columnar_processed(self, batch: pa.RecordBatch, name: str, first: int = 0) -> Any:
        """One batch scored by columns as the engine's columnar path hands it to its sink stage
        (:class:`~assay.pipeline.columnar_run.ColumnarProcessed`: staged result structs, the
        key columns for the summary), or None when the batch must take the object path (no
        columnar plan, an id the object path reads otherwise, a row the columns cannot decide)."""
        import pyarrow.compute as pc

        from assay.connectors.parquet_schema import SEGMENT_RESULT_TYPE
        from assay.pipeline.columnar_run import ColumnarProcessed

        p = self.columnar_plan(batch.schema)
        if p is None or not batch.num_rows:
            return None
        n = batch.num_rows
        ids = _trace_ids(batch, p.layout.id_column)
        if ids is None or _json_text(ids).any():
            return None
        scores = p.score(batch)
        if scores.fallback is not None:
            return None
        lines = pa.array(range(first + 1, first + n + 1), pa.int64()).cast(pa.string())
        positions = pc.binary_join_element_wise(pa.scalar(f"{name}:"), lines, "")
        structs: dict[str, Any] = {}
        for key, cols in scores.results.items():
            error = cols.error if cols.error is not None else pa.nulls(n, pa.string())
            fields = [cols.score, cols.value_text(), pc.greater_equal(cols.score, pa.scalar(0.5)), cols.comment, error]
            fields += [pa.nulls(n, pa.int64()), pa.nulls(n, pa.int64()), pa.nulls(n, pa.float64())]
            fields += [pa.repeat(pa.scalar(self.identities.get(key), pa.string()), n), pa.nulls(n, pa.float64())]
            structs[key] = pa.StructArray.from_arrays(fields, fields=list(SEGMENT_RESULT_TYPE))
        unit = RowsOf(name, first, n)
        return ColumnarProcessed(unit, pc.coalesce(ids, positions), positions, structs, scores.results)

    def observe(self, processed: Processed) -> None:
        """Remember the pass marks results carry (the score columns' ``passed``)."""
        for row in processed.rows:
            for key, r in row["results"].items():
                if r.threshold is not None:
                    self.thresholds[key] = r.threshold


class RowsOf:
    """Rows ``first+1`` … ``first+num_rows`` of ``name``: the unit of a batch scored by columns
    away from its source (what the engine's columnar sink stage counts and acknowledges)."""

    def __init__(self, name: str, first: int, num_rows: int) -> None:
        self.name, self.first, self.num_rows = name, first, num_rows

    def span(self) -> Position:
        from assay.connectors.parquet_source import RowSpan

        return RowSpan(self.name, self.first + 1, last=self.first + self.num_rows)


class _CutAsErrors(EvaluateStage):
    """The evaluate stage of a worker that must answer every row (a Ray actor, Spark's ``score``):
    when the judge budget cuts a batch short, the traces not judged get an error result
    (``BudgetExceeded: judge budget … reached``) for every judged key, instead of being left out
    for a resume as ``assay run`` leaves them."""

    def __init__(self, evaluators: Sequence[Any], budget_usd: float | None) -> None:
        super().__init__(evaluators)
        self.budget_usd = budget_usd

    async def process(self, traces: Sequence[Any]) -> tuple[list[dict[str, Result]], list[bool]]:
        try:
            return await super().process(traces)
        except PartialBatch as cut:
            spent = f"judge budget of ${self.budget_usd} reached"
            for res in cut.results:
                for ev in self.async_:
                    res.setdefault(ev.key, Result.from_error(ev.key, BudgetExceeded(spent)))
            return cut.results, [True] * len(cut.results)


def as_batch(data: pa.Table | pa.RecordBatch) -> pa.RecordBatch:
    """One record batch of a table (an empty table: an empty batch of its schema)."""
    if isinstance(data, pa.RecordBatch):
        return data
    if not data.num_rows:
        return pa.RecordBatch.from_pylist([], schema=data.schema)
    return data.combine_chunks().to_batches()[0]


def score_table(
    processed: Processed,
    keys: Iterable[str],
    *,
    run_id: str,
    ds: str | None,
    thresholds: Mapping[str, float],
    extra_keys: bool = True,
) -> pa.Table:
    """The score columns of a processed batch: one row per input row, in input order; a row the
    engine dead-letters has no results and its reason in ``read_error``. ``keys``: the result
    columns (``extra_keys``: also any other key a result carries, after them)."""
    columns: dict[str, None] = dict.fromkeys(keys)
    lines: list[tuple[int, dict[str, Any], str | None]] = []
    for row in processed.rows:
        results = row["results"]
        if extra_keys:
            columns.update(dict.fromkeys(results))
        out = {**row, "results": {k: r.to_dict() for k, r in results.items()}}
        lines.append((int(row["position"]["line"]), out, None))
    dead = [f for f in processed.failures if f.severity == "error"]
    lines.extend((int(f.position.line or 0), _unread(f, run_id), f.message) for f in dead)
    lines.sort(key=lambda t: t[0])
    builder = TableBuilder(list(columns), ds=ds, thresholds={k: thresholds.get(k, 0.5) for k in columns})
    builder.add_all([row for _, row, _ in lines])
    table = pa.Table.from_batches([builder.batch()])
    return table.append_column("read_error", pa.array([err for _, _, err in lines], type=pa.string()))


def _without_comments(table: pa.Table, keys: Iterable[str]) -> pa.Table:
    """The score columns with every result's ``comment`` null."""
    at = RESULT_TYPE.get_field_index("comment")
    for key in keys:
        i = table.schema.get_field_index(key)
        col = table.column(i).combine_chunks()
        children = [col.field(j) for j in range(col.type.num_fields)]
        children[at] = pa.nulls(len(col), pa.string())
        mask = col.is_null() if col.null_count else None
        fixed = pa.StructArray.from_arrays(children, fields=list(col.type), mask=mask)
        table = table.set_column(i, table.schema.field(i), fixed)
    return table


def _trace_ids(batch: pa.RecordBatch, column: str | None) -> pa.Array | None:
    """The id column as text (null where the row has none), or None when its type is one the
    object path reads otherwise (neither text nor an integer)."""
    n = batch.num_rows
    if column is None:
        return pa.nulls(n, pa.string())
    ids = batch.column(column)
    t = ids.type
    if pa.types.is_null(t):
        return pa.nulls(n, pa.string())
    if pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return ids.cast(pa.string())
    return None


def _json_text(ids: pa.Array) -> Any:
    """Which ids look like JSON objects or arrays (the object path decodes those)."""
    import numpy as np
    import pyarrow.compute as pc

    found = pc.match_substring_regex(ids, r"^\s*[\[{]").fill_null(False)
    return np.asarray(found, dtype=bool)


def _unread(failure: Failure, run_id: str) -> dict[str, Any]:
    return {"trace_id": None, "run_id": run_id, "position": failure.position.to_dict(), "results": {}}


__all__ = ["BatchScorer", "as_batch", "default_run_id", "run_config", "score_table"]
