"""Score a Spark DataFrame of traces with a run file (extra ``assay[spark]``).

The DataFrame holds one trace per row, in the columns the Parquet source understands (the same
``normalize`` paths; JSON-text columns decoded): a lake table as ``spark.read.parquet`` or
``spark.read.format("delta")`` reads it. Two ways to use it::

    from assay.integrations.spark import run, score

    traces = spark.read.format("delta").load("s3://lake/traces").where("dt = '2026-11-24'")

    # 1. the score columns as a DataFrame (lazy; write it with Spark)
    score(traces, "/opt/assay/nightly.yaml", ds="2026-11-24").write.parquet("s3://lake/scores/dt=2026-11-24/")

    # 2. the whole of `assay run`: the run file's sink (the Delta sink replaces the day), dead
    #    letters, _SUMMARY.json, gates and the exit code
    report = run(traces, "/opt/assay/nightly.yaml", ds="2026-11-24")
    sys.exit(report.exit_code)

Both evaluate on the executors, in ``mapInArrow`` (Arrow batches in, Arrow batches out), through
:class:`~assay.integrations.arrow_scoring.BatchScorer` (the Ray integration's scorer): each Python
worker builds the evaluators once and keeps its judges open between partitions. A batch is scored
by columns when every evaluator has a columnar form (:mod:`assay.evaluators.columnar`), else as
trace objects. Only the columns the evaluators need cross into Python (:func:`read_columns`): the
columnar plan's, and without an evaluator that reads message text the message fields without
``content`` and the calls without what no evaluator compares — Spark then reads only those leaves
of the Parquet files, as the Parquet source does.

Judges share one rate budget across every executor when the run file sets ``rate_store:
redis://…`` (or a judge's ``shared_limit``), as the Ray actors do; ``limits.budget_usd`` is the
whole job's (every worker reserves under ``spark:<run id>`` in ``<state_dir>/budget.sqlite``, or in
that Redis). Judges with ``mode: batch``
never call a provider from an executor: :func:`run` submits and collects their batches through
the ledger from the driver first (``assay run``'s batch phase, with the DataFrame as its input;
exit 75 while batches are pending), and the executors then find every answer in the judge cache.

:func:`score` returns the Parquet sink's schema (``trace_id``, ``run_id``, ``ds``, ``position``,
one struct per evaluator key) plus ``read_error`` (why a row is not a trace; null for scored
rows). :func:`run` scores on the executors, then the driver streams the scored batches (kept on
the executors' disks, one partition at a time) into the run file's sinks through the engine's own
sink stage: the rows, dead letters, summary, gates, ``_SUCCESS`` and exit code are ``assay
run``'s. It always starts over (no checkpoint to resume: the judge cache makes a rerun cheap).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import pickle
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    import pyarrow as pa
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError("assay.integrations.spark needs pyarrow: pip install 'assay[spark]'") from _exc

import anyio

from assay.config import RunConfig
from assay.connectors.base import Source, threaded_batches
from assay.connectors.parquet_traces import BatchRows, Row, columnar_plan
from assay.connectors.registry import EMPTY_SINK_STATE
from assay.exceptions import AssayError, ConnectorError
from assay.integrations.arrow_scoring import BatchScorer, default_run_id, run_config
from assay.pipeline.assembly import build_evaluators, sweep_leftovers
from assay.pipeline.batch_run import batch_phase, has_batch_judges
from assay.pipeline.columnar_run import ColumnarPipeline
from assay.pipeline.commit import Committer
from assay.pipeline.outputs import RunPlan
from assay.pipeline.run import conclude
from assay.pipeline.runner import Pipeline, RunOptions
from assay.pipeline.summary import RunStats, merge_judge_stats
from assay.pipeline.verdict import RunReport
from assay.pipeline.writer import WriterResult, unwrap
from assay.records import Envelope, Position
from assay.stages.evaluate import EvaluateStage
from assay.stats.labels import load_labels
from assay.traces.normalize import DEFAULT_OPTIONS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The columns a wire batch of :func:`run` has: what it is (``rows``: a processed batch of result
#: rows; ``columns``: a batch scored by columns; ``judges``: a worker's judge counts) and its pickle.
WIRE_SCHEMA = "kind string, data binary"


# --- the executors' side -------------------------------------------------------------------------

_SCORERS: dict[str, BatchScorer] = {}
"""The scorers of this Python worker, by job (Spark reuses a worker for many tasks)."""


def _scorer(job: str, config: RunConfig, run_id: str, use_cache: bool, *, whole: bool = True) -> BatchScorer:
    """This worker's scorer for ``job`` (a worker runs one task at a time: the scorers of earlier
    jobs are closed, their judges with them, when a new job's first partition comes)."""
    scorer = _SCORERS.get(job)
    if scorer is None:
        for old in list(_SCORERS):
            _SCORERS.pop(old).close()
        # whole: every row gets its row (score); else a budget stop leaves rows out, as the engine does (run)
        scorer = _SCORERS[job] = BatchScorer(
            config, run_id=run_id, use_cache=use_cache, scope="spark", cut_as_errors=whole
        )
    return scorer


def _partition() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class _ScoreColumns:
    """The ``mapInArrow`` function of :func:`score`: the score columns of each batch, narrowed to
    what varies from row to row (:func:`_narrow`)."""

    def __init__(
        self, job: str, config: RunConfig, run_id: str, use_cache: bool, ds: str | None, wire: pa.Schema, comments: bool
    ) -> None:
        self.job, self.config, self.run_id, self.use_cache, self.ds = job, config, run_id, use_cache, ds
        self.wire, self.comments = wire, comments

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        scorer = _scorer(self.job, self.config, self.run_id, self.use_cache)
        name = f"partition-{_partition()}"
        first = 0
        for batch in batches:
            if batch.num_rows:
                table = scorer.columns(assemble(batch), name, first=first, ds=self.ds, comments=self.comments)
                yield _narrow(table, self.wire)
                first += batch.num_rows


def _wire_schema(keys: Sequence[str], judged: set[str], comments: bool) -> pa.Schema:
    """What crosses back from :func:`score`'s ``mapInArrow``: the score columns without what is
    the same on every row (``run_id``, ``ds``; a deterministic evaluator's ``identity``, tokens and
    cost), each result struct as its fields (``key<FIELD_MARK>field``, and whether the row has
    the result), the comments only when asked for; :func:`_widen` makes the score columns again
    on the JVM side."""
    from assay.connectors.parquet_schema import PLATFORM_TYPE, RESULT_FIELDS

    fields = [pa.field("trace_id", pa.string()), pa.field("position", pa.string()), pa.field("platform", PLATFORM_TYPE)]
    for key in keys:
        fields.append(pa.field(f"{key}{FIELD_MARK}", pa.bool_()))
        for name, t in RESULT_FIELDS:
            if _crosses(name, key in judged, comments):
                fields.append(pa.field(f"{key}{FIELD_MARK}{name}", t))
    fields.append(pa.field("read_error", pa.string()))
    return pa.schema(fields)


def _crosses(field: str, judged: bool, comments: bool) -> bool:
    if field == "comment":
        return comments
    return judged or field not in ("input_tokens", "output_tokens", "cost_usd", "identity")


def _narrow(table: pa.Table, wire: pa.Schema) -> pa.RecordBatch:
    """A batch of score columns (:meth:`BatchScorer.columns`) as :func:`_wire_schema` says."""
    arrays: list[Any] = []
    structs: dict[str, Any] = {}
    for name in wire.names:
        if FIELD_MARK not in name:
            arrays.append(table.column(name).combine_chunks())
            continue
        key, field = name.split(FIELD_MARK, 1)
        struct = structs.get(key)
        if struct is None:
            struct = structs[key] = table.column(key).combine_chunks()
        arrays.append(struct.is_valid() if not field else struct.field(field))
    return pa.RecordBatch.from_arrays(arrays, schema=wire)


def _widen(
    scored: DataFrame, keys: Sequence[str], judged: set[str], comments: bool, consts: dict[str, Any]
) -> DataFrame:
    """The score columns (the Parquet sink's schema and ``read_error``) from :func:`_narrow`'s:
    the constants as literals, each result a struct again (null where the row has no result)."""
    from pyspark.sql import functions as F

    from assay.connectors.parquet_schema import RESULT_FIELDS

    def lit(value: Any, t: str) -> Any:  # (nullable, as the Arrow schema's fields: a row's position is never null)
        return F.when(F.col("position").isNotNull(), F.lit(value).cast(t))

    kinds = {"score": "double", "value": "string", "passed": "boolean", "comment": "string", "error": "string"}
    kinds |= {"input_tokens": "bigint", "output_tokens": "bigint", "cost_usd": "double", "identity": "string"}
    out = [
        F.col("trace_id"),
        lit(consts["run_id"], "string").alias("run_id"),
        lit(consts["ds"], "string").alias("ds"),
        F.col("position"),
        F.col("platform"),
    ]
    for key in keys:
        parts = []
        for name, _ in RESULT_FIELDS:
            if _crosses(name, key in judged, comments):
                parts.append(F.col(f"`{key}{FIELD_MARK}{name}`").alias(name))
            else:
                value = consts["identities"].get(key) if name == "identity" else None
                parts.append(lit(value, kinds[name]).alias(name))
        out.append(F.when(F.col(f"`{key}{FIELD_MARK}`"), F.struct(*parts)).alias(key))
    out.append(F.col("read_error"))
    return scored.select(*out)


class _WireBatches:
    """The ``mapInArrow`` function of :func:`run`: each scored batch as the engine's sink stage
    takes it (pickled), then the worker's judge counts and status after the partition."""

    def __init__(self, job: str, config: RunConfig, run_id: str, use_cache: bool, by_columns: bool) -> None:
        self.job, self.config, self.run_id, self.use_cache = job, config, run_id, use_cache
        self.by_columns = by_columns
        """The driver's sink stage takes batches scored by columns (the engine's columnar path)."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        scorer = _scorer(self.job, self.config, self.run_id, self.use_cache, whole=False)
        name = f"partition-{_partition()}"
        first = 0
        for batch in map(assemble, batches):
            if not batch.num_rows:
                continue
            scored = scorer.columnar_processed(batch, name, first) if self.by_columns else None
            if scored is not None:
                yield _wire("columns", scored)
            else:
                yield _wire("rows", scorer.process(batch, name, first))
            first += batch.num_rows
        scorer.partitions += 1
        worker = {"scorer": scorer.uid, "job": self.job, "seq": scorer.partitions}
        yield _wire("judges", {**worker, "judges": scorer.judge_stats(), "status": scorer.status})


def _wire(kind: str, obj: Any) -> pa.RecordBatch:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return pa.RecordBatch.from_pydict({"kind": pa.array([kind], pa.string()), "data": pa.array([data], pa.binary())})


class _ArrowIPC:
    """The ``mapInArrow`` function that ships a partition's batches to the driver as they are
    (the batch judges' collect pass reads the input on the driver)."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        part = _partition()
        for batch in map(assemble, batches):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            data = sink.getvalue().to_pybytes()
            yield pa.RecordBatch.from_pydict({"part": pa.array([part], pa.int32()), "ipc": pa.array([data])})


# --- the columns the evaluators read -------------------------------------------------------------


#: Between a message-list column's name and a field's in the columns :func:`read_columns` selects.
FIELD_MARK = "\x1f"


def read_columns(df: DataFrame, evaluators: Sequence[Any], columns: Sequence[str] | None = None) -> DataFrame:
    """``df`` with only what the evaluators read: ``columns`` (the columnar plan's, when there is
    one) or every column. Without an evaluator that reads message text, each message-list column
    (``messages``, the reference) is selected field by field (``messages.role``,
    ``messages.tool_calls``, …) without ``content`` (nor, when no evaluator pairs calls with
    results, ``tool_call_id``): Spark then reads only those leaves of the Parquet files (nested
    schema pruning), and the executors put the list of messages back together
    (:func:`assemble`) before scoring — what the Parquet source reads, as it leaves the same
    leaves unread."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StructType

    from assay.traces.normalize import REFERENCE_KEYS

    text = any(ev.reads_text for ev in evaluators)
    call_ids = any(ev.reads_call_ids for ev in evaluators)
    args = any(ev.reads_args for ev in evaluators)
    out = []
    for field in df.schema.fields:
        if columns is not None and field.name not in columns:
            continue
        t = field.dataType
        is_messages = field.name == "messages" or field.name in REFERENCE_KEYS
        if text or not (is_messages and isinstance(t, ArrayType) and isinstance(t.elementType, StructType)):
            out.append(F.col(field.name))
            continue
        for f in t.elementType.fields:
            if f.name == "content" or (not call_ids and f.name == "tool_call_id") or FIELD_MARK in f.name:
                continue
            leaf = F.col(field.name)[f.name]
            if f.name == "tool_calls":
                leaf = _calls(leaf, f.dataType, call_ids=call_ids, args=args)
            out.append(leaf.alias(f"{field.name}{FIELD_MARK}{f.name}"))
    return df.select(*out)


def _calls(column: Any, t: Any, *, call_ids: bool, args: bool) -> Any:
    """The ``tool_calls`` lists of a message column (``array<array<call>>``) with only what is
    read of each call: ``function.name``, its ``arguments`` when an evaluator compares them, the
    call's ``id`` when one pairs calls with results (never ``type``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, StructType

    call = t.elementType if isinstance(t, ArrayType) else None
    fields = {f.name: f.dataType for f in call.fields} if isinstance(call, StructType) else {}
    function = fields.get("function")
    if not isinstance(function, StructType) or {f.name for f in function.fields} - {"name", "arguments"}:
        return column  # (a shape the Parquet source reads another way: as it is)
    keep_id = call_ids and "id" in fields
    keep_args = args and "arguments" in {f.name for f in function.fields}

    def one(c: Any) -> Any:
        fn = [c["function"]["name"].alias("name")]
        if keep_args:
            fn.append(c["function"]["arguments"].alias("arguments"))
        parts = [c["id"].alias("id")] if keep_id else []
        return F.struct(*parts, F.struct(*fn).alias("function"))

    def each(calls: Any) -> Any:
        return F.transform(calls, one)

    return F.transform(column, each)


def assemble(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch of :func:`read_columns`' columns with each message-list column put back together
    (``list<struct<role, tool_calls, …>>`` from its fields' lists, which share their offsets)."""
    if not any(FIELD_MARK in name for name in batch.schema.names):
        return batch
    arrays: dict[str, Any] = {}
    parts: dict[str, list[tuple[str, Any]]] = {}
    for name, col in zip(batch.schema.names, batch.columns, strict=True):
        if FIELD_MARK in name:
            column, field = name.split(FIELD_MARK, 1)
            parts.setdefault(column, []).append((field, col))
            arrays.setdefault(column, None)
        else:
            arrays[name] = col
    for column, fields in parts.items():
        first = fields[0][1]
        offsets = first.offsets
        values = pa.StructArray.from_arrays(
            [_values(col, offsets) for _, col in fields], names=[name for name, _ in fields]
        )
        mask = first.is_null() if first.null_count else None
        arrays[column] = pa.ListArray.from_arrays(offsets, values, mask=mask)
    return pa.RecordBatch.from_arrays(list(arrays.values()), names=list(arrays))


def _values(col: Any, offsets: Any) -> Any:
    """A field's flat values under the shared ``offsets`` (its own, when Spark wrote them alike)."""
    if col.offsets.equals(offsets):
        return col.values
    raise ValueError("the fields of a message list do not line up")  # pragma: no cover - Spark writes them alike


# --- score: the score columns as a DataFrame -----------------------------------------------------


def score(
    df: DataFrame,
    run_file: str | Path | None = None,
    *,
    config: Mapping[str, Any] | RunConfig | None = None,
    ds: str | None = None,
    sets: Sequence[str] | None = None,
    run_id: str | None = None,
    use_cache: bool = True,
    comments: bool = True,
) -> DataFrame:
    """The score columns of ``df``'s traces, one row per row of ``df`` (lazy: nothing runs until
    Spark computes it). ``run_file`` (or ``config``), ``ds`` and ``sets`` as for ``assay run --ds
    … --set …``; ``run_id``: the ``run_id`` column (default: ``assay run``'s for the run file);
    ``use_cache``: answer judges from and into the run's judge cache; ``comments=False``: leave
    every result's ``comment`` null (not built on the executors, nor shipped back: the text is
    most of what a deterministic result weighs). One struct column per evaluator key (a result
    key an evaluator adds beyond its own is left out: :func:`run` writes every key).

    Only what differs from row to row comes back from the executors' Python (each result's
    score, value, pass mark, comment and error; a judge's tokens, cost and identity too): the
    ``run_id`` and ``ds`` columns and the deterministic evaluators' identities are added by Spark."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    from assay.evaluators.identity import evaluator_identity

    cfg = run_config(run_file, config, ds=ds, sets=sets, who="score")
    scorer = BatchScorer(cfg, run_id=run_id, use_cache=use_cache, scope="spark")  # (on the driver: which columns)
    judged = {ev.key for ev in scorer.evaluators if ev.is_async}
    wire = _wire_schema(scorer.keys, judged, comments)
    fn = _ScoreColumns(uuid.uuid4().hex, cfg, scorer.run_id, use_cache, ds, wire, comments)
    try:
        columns = scorer.read_columns(to_arrow_schema(df.schema))
    except (TypeError, ValueError):  # a column type Arrow cannot say: every column, the object path
        columns = None
    scored = read_columns(df, scorer.evaluators, columns).mapInArrow(fn, from_arrow_schema(wire))
    identities = {ev.key: evaluator_identity(ev) for ev in scorer.evaluators if ev.key not in judged}
    consts = {"run_id": scorer.run_id, "ds": ds, "identities": identities}
    return _widen(scored, scorer.keys, judged, comments, consts)


# --- run: the whole of `assay run` ---------------------------------------------------------------


def run(
    df: DataFrame,
    run_file: str | Path | None = None,
    *,
    config: Mapping[str, Any] | RunConfig | None = None,
    ds: str | None = None,
    sets: Sequence[str] | None = None,
    use_cache: bool = True,
    wait: bool = False,
) -> RunReport:
    """``assay run`` with ``df`` as its input, scored on the executors: the run file's sink and
    dead letters written, ``_SUMMARY.json`` and ``_SUCCESS`` published, the gates decided. The
    report's ``exit_code`` is ``assay run``'s (0 passed, 1 a gate failed, 75 batches pending, …),
    its ``messages`` what ``assay run`` prints. ``wait``: with batch judges, poll until every batch
    is in (else return 75 while some are pending, like ``assay run`` without ``--wait``)."""
    cfg = run_config(run_file, config, ds=ds, sets=sets, who="run")
    origin = str(run_file) if run_file is not None else "run file"
    return anyio.run(_run, df, cfg, origin, use_cache, wait)


async def _run(df: DataFrame, config: RunConfig, origin: str, use_cache: bool, wait: bool) -> RunReport:
    started_at = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    config = config.model_copy(update={"run_id": default_run_id(config)})
    evaluators = build_evaluators(config, origin)
    projected = read_columns(df, evaluators)
    if has_batch_judges(config):
        size = config.limits.batch_size

        def collect_source() -> Source:
            return DataFrameSource(projected, size)

        phase = await batch_phase(config, origin=origin, use_cache=use_cache, wait=wait, source=collect_source)
        if phase.report is not None:
            return phase.report
        assert phase.config is not None
        config = phase.config
    plan = RunPlan(config)
    sweep_leftovers(config)
    await plan.prepare(1, fresh=True)  # (always from the start: no checkpoint to resume from)
    result = await _write(plan, projected, origin, use_cache)
    spark = result.extra.pop("spark")
    return await conclude(plan, [result], started_at=started_at, wall_s=time.perf_counter() - t0, spark=spark)


def _takes_columns(config: RunConfig, sink: Any, evaluators: Sequence[Any]) -> bool:
    """Whether the driver's sink stage takes batches scored by columns (the engine's columnar
    path: a wide Parquet sink, no clusters or labels, every evaluator with a columnar form)."""
    from assay.evaluators.columnar import FORMS, columnar_enabled

    if not columnar_enabled() or not hasattr(sink, "write_columns") or getattr(sink, "layout", "wide") != "wide":
        return False
    if config.stats.cluster_by or config.calibration is not None or config.normalize != DEFAULT_OPTIONS:
        return False
    return bool(evaluators) and all(type(ev) in FORMS and ev.sampler is None for ev in evaluators)


async def _write(plan: RunPlan, df: DataFrame, origin: str, use_cache: bool) -> WriterResult:
    """The driver's writer: the executors' scored batches through the engine's sink stage."""
    config = plan.config
    started = time.perf_counter()
    evaluators = build_evaluators(config, origin)
    stats = RunStats(
        thresholds={ev.key: ev.threshold for ev in evaluators},
        level=config.stats.ci_level,
        labels=load_labels(config.calibration.labels) if config.calibration else None,
    )
    sinks = {role: plan._sink(role, 0, EMPTY_SINK_STATE) for role in ("results", "dead_letter")}  # (as prepared)
    by_columns = _takes_columns(config, sinks["results"], evaluators)
    wire_fn = _WireBatches(uuid.uuid4().hex, config, str(config.run_id), use_cache, by_columns)
    source = _WireSource(df.mapInArrow(wire_fn, WIRE_SCHEMA))

    def checkpoint_state() -> dict[str, Any]:
        return {"stats": stats.to_dict(), "judges": source.judges(), "writer": 0, "n": 1}

    committer = Committer(
        source, sinks, store=plan.store, writer=0, state=checkpoint_state, interval_s=config.limits.commit_interval_s
    )
    options = RunOptions(workers=1, normalize=config.normalize, run_id=str(config.run_id))
    pipeline = _Forward(
        source,
        EvaluateStage(evaluators),
        sinks["results"],
        sinks["dead_letter"],
        options,
        stats=stats,
        committer=committer,
    )
    error: AssayError | None = None
    try:
        async with source, sinks["results"], sinks["dead_letter"]:
            try:
                await pipeline.run()
            except Exception as exc:
                error = _error(exc)
            await committer.commit()
    except Exception as exc:
        error = error or _error(exc)
    finally:
        for ev in evaluators:
            with anyio.CancelScope(shield=True):
                await ev.aclose()
    if committer.commits:
        committer.save()
    status = "failed" if error is not None else source.status
    return WriterResult(
        status,
        stats.to_dict(),
        source.judges(),
        time.perf_counter() - started,
        error,
        committer.commits,
        extra={"read_now": stats.counts["read"], "spark": source.counts},
    )


def _error(exc: BaseException) -> AssayError:
    inner = unwrap(exc)
    if isinstance(inner, AssayError):
        return inner
    text = str(inner).strip()
    # a Spark job's failure: the Python error the executor raised is its most useful line
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    python = [ln for ln in lines if ln.split(":", 1)[0].endswith(("Error", "Exception")) and "java." not in ln]
    first = python[-1] if python else (lines[0] if lines else type(inner).__name__)
    err = ConnectorError(f"the Spark job failed: {first}")
    err.__cause__ = inner
    return err


class _Forward(ColumnarPipeline):
    """The engine with its batch step done already (on the executors): each envelope carries a
    :class:`Processed` (or a batch scored by columns), which goes to the sink stage as it is."""

    _pump = Pipeline._pump  # (the wire source's envelopes, not a Parquet source's Arrow batches)

    async def _process(self, batch: Any) -> Any:
        return batch[0].record


class _WireSource(Source):
    """The executors' scored batches: the DataFrame is computed on the executors (kept on their
    disks), then read back on the driver one partition at a time."""

    def __init__(self, wire: DataFrame) -> None:
        super().__init__()
        self.wire = wire
        self._stop = False
        self._workers: dict[tuple[str, str], dict[str, Any]] = {}
        self.status = "ok"
        self.counts = {"batches_by_columns": 0, "batches_by_objects": 0, "partitions": 0}
        """What the summary's ``spark`` section reports."""

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await anyio.to_thread.run_sync(self.wire.unpersist)

    def stop(self) -> None:
        self._stop = True

    def judges(self) -> dict[str, Any]:
        """Every Python worker's judge counts (the last each reported), added up."""
        return merge_judge_stats([w["judges"] for w in self._workers.values()], side_by_side=True)

    def _envelopes(self) -> Iterator[Envelope]:
        from pyspark import StorageLevel

        self.wire.persist(StorageLevel.DISK_ONLY)
        self.wire.count()  # every partition scored, side by side on the executors
        n = 0
        for row in self.wire.toLocalIterator(prefetchPartitions=True):
            obj = pickle.loads(row["data"])
            if row["kind"] in ("rows", "columns"):
                n += 1
                self.counts["batches_by_columns" if row["kind"] == "columns" else "batches_by_objects"] += 1
                yield Envelope(b"", Position("spark", n), record=obj)
                continue
            self.counts["partitions"] += 1
            key = (obj["job"], obj["scorer"])
            if obj["seq"] >= self._workers.get(key, {}).get("seq", 0):
                self._workers[key] = obj
            if obj["status"] != "ok":
                self.status = obj["status"]

    def batches(self) -> AsyncIterator[list[Envelope]]:
        return threaded_batches(self._envelopes(), 1, stopped=lambda: self._stop)


class DataFrameSource(Source):
    """A DataFrame's rows on the driver, as the Parquet source yields a table's rows (positions
    ``partition-<i>:<row>``): the batch judges' collect pass reads its input through it."""

    def __init__(self, df: DataFrame, batch_size: int) -> None:
        super().__init__()
        self.df = df
        self.batch_size = batch_size
        self._stop = False

    def stop(self) -> None:
        self._stop = True

    def _envelopes(self) -> Iterator[Envelope]:
        first: dict[int, int] = {}
        ipc = self.df.mapInArrow(_ArrowIPC(), "part int, ipc binary")
        for row in ipc.toLocalIterator(prefetchPartitions=True):
            batch = pa.ipc.open_stream(row["ipc"]).read_next_batch()
            part = int(row["part"])
            start = first.get(part, 0)
            first[part] = start + batch.num_rows
            rows = BatchRows(batch, columnar_plan(batch.schema))
            for i in range(batch.num_rows):
                yield Envelope(b"", Position(f"partition-{part}", start + i + 1), record=Row(rows, i))

    def batches(self) -> AsyncIterator[list[Envelope]]:
        return threaded_batches(self._envelopes(), self.batch_size, stopped=lambda: self._stop)


__all__ = ["DataFrameSource", "read_columns", "run", "score"]
