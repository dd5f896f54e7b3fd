"""The engine: one task group owns every stage; bounded streams between stages are the backpressure.

::

    source ──batches of envelopes──▶ workers (parse, normalize, evaluate) ──processed batches──▶ sink
             (buffer: limits.buffer)                                        (buffer: limits.buffer)

Closing the send side ends a stream; each worker owns a clone. A failing stage cancels the run and
the error surfaces. A budget stop or a signal stops the source; in-flight batches drain, sinks are
flushed (shielded), and the run reports what is durable.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream

from assay.connectors.base import Sink, Source
from assay.evaluators.identity import evaluator_identity
from assay.exceptions import AssayError
from assay.pipeline.commit import Committer
from assay.pipeline.summary import RunStats
from assay.records import Envelope, Failure, Position, Result
from assay.stages.evaluate import EvaluateStage, PartialBatch
from assay.stages.normalize import RecordParser, trace_warnings, warning_failure
from assay.stats.clusters import cluster_of
from assay.traces.model import Trace
from assay.traces.normalize import DEFAULT_OPTIONS, NormalizeOptions
from assay.traces.platform import platform_ids


@dataclass(slots=True)
class RunOptions:
    """Engine knobs (from the run file's ``limits`` section)."""

    batch_size: int = 256
    buffer: int = 4
    workers: int | None = None
    """Concurrent evaluate workers (batches in flight); default 1 without async evaluators, else 8."""
    normalize: NormalizeOptions = DEFAULT_OPTIONS
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    cluster_by: str | None = None
    """A trace path (``metadata.session_id``) whose values cluster the summary's intervals."""


@dataclass(slots=True)
class Processed:
    rows: list[dict[str, Any]]
    """The result rows, as built (each sink encodes them its way: ``Sink.write_results``)."""
    failures: list[Failure]
    results: list[dict[str, Result]]
    positions: list[Position]
    read: int
    abandoned: int = 0
    warnings: int = 0
    keys: list[str | None] | None = None
    clusters: list[str] | None = None
    """The cluster of each kept trace's results (``RunOptions.cluster_by``), else None."""


@dataclass
class RunOutcome:
    stats: RunStats
    status: str  # ok | budget | interrupted
    wall_s: float
    run_id: str


class Pipeline:
    """Source → normalize → evaluate → sink for one process (one shard)."""

    def __init__(
        self,
        source: Source,
        evaluate: EvaluateStage,
        sink: Sink,
        dead_letter: Sink,
        options: RunOptions | None = None,
        *,
        stats: RunStats | None = None,
        on_progress: Callable[[RunStats], None] | None = None,
        committer: Committer | None = None,
    ) -> None:
        self.source = source
        self.evaluate = evaluate
        self.sink = sink
        self.dead_letter = dead_letter
        self.options = options or RunOptions()
        self.stats = stats or RunStats()
        self.on_progress = on_progress
        self.committer = committer
        self.emitted = 0
        self.source_error: AssayError | None = None
        self._resumed_read = self.stats.counts["read"]  # read by earlier attempts of the run
        self.status = "ok"
        self.stop_deadline: float | None = None
        """``time.monotonic()`` when in-flight work is abandoned, once a signal stops the run."""
        self._queues: dict[str, MemoryObjectReceiveStream[Any]] = {}
        self._reading: anyio.CancelScope | None = None
        """Around the source's reading, once it runs (:meth:`stop_reading_now`)."""
        self._reading_stopped = False
        self._identity: dict[str, str] | None = None
        """Result key -> what produced it (:func:`evaluator_identity`), written in every row."""
        self.parse = RecordParser(self.options.normalize, projected=not evaluate.reads_scenario)
        self.ledger: Any = None
        """A run over a published output (:class:`~assay.pipeline.ledger.Ledger`): each row gets
        the trace's current results back, beside what this run scored."""
        self._order: list[str] = [ev.key for ev in (*evaluate.inline, *evaluate.batched, *evaluate.async_)]

    def stop(self, status: str) -> None:
        """Stop reading; in-flight batches drain. ``status``: budget | interrupted."""
        if self.status == "ok":
            self.status = status
        self.source.stop()

    async def run(self) -> RunOutcome:
        started = time.perf_counter()
        opts = self.options
        # enough batches in flight to keep every judge at its cap (no fixed cap that starves it)
        workers = opts.workers or self.evaluate.wanted_batches_in_flight(opts.batch_size)
        raw_send, raw_recv = anyio.create_memory_object_stream[list[Envelope]](opts.buffer)
        out_send, out_recv = anyio.create_memory_object_stream[Processed](opts.buffer)
        self._queues = {"evaluate": raw_recv, "sink": out_recv}
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump, raw_send)
            async with raw_recv, out_send:
                for _ in range(workers):
                    tg.start_soon(self._worker, raw_recv.clone(), out_send.clone())
            tg.start_soon(self._sink_loop, out_recv)
        if self.source_error is not None:
            raise self.source_error
        return RunOutcome(self.stats, self.status, time.perf_counter() - started, opts.run_id)

    @property
    def in_flight(self) -> int:
        """Records taken from the source and not yet written."""
        return self.emitted - self.stats.counts["read"] + self._resumed_read

    def queue_depths(self) -> dict[str, tuple[int, int]]:
        """Stage → (batches buffered in front of it, buffer size): the bounded streams now."""
        out: dict[str, tuple[int, int]] = {}
        for stage, stream in self._queues.items():
            st = stream.statistics()
            out[stage] = (st.current_buffer_used, int(st.max_buffer_size))
        return out

    async def _pump(self, send: ObjectSendStream[list[Envelope]]) -> None:
        """Feed the workers. A source that fails ends the stream normally, so every record it
        read before the fault is still scored, written and acknowledged; then the run fails."""
        async with send:
            try:
                with anyio.CancelScope() as self._reading:
                    if self._reading_stopped:
                        self._reading.cancel()
                    async for batch in self.source.batches():
                        self.emitted += len(batch)
                        await send.send(batch)
                        if self.status != "ok":
                            break
            except AssayError as exc:
                self.source_error = exc

    def stop_reading_now(self) -> None:
        """Stop waiting for the source (a stopping run with nothing in flight: stdin, or a topic
        with no new messages, may not answer for a long time); the stages then drain and end."""
        self._reading_stopped = True
        if self._reading is not None:
            self._reading.cancel()

    async def _worker(self, recv: ObjectReceiveStream[list[Envelope]], send: ObjectSendStream[Processed]) -> None:
        async with recv, send:
            async for batch in recv:
                if self.status != "ok":
                    continue  # stopping: drain without work; these positions stay unprocessed (resumable)
                await send.send(await self._process(batch))

    def _row(
        self, trace: Trace, env: Envelope, res: dict[str, Result], failures: list[Failure]
    ) -> tuple[dict[str, Any], bool]:
        """The result row of one trace (and a warning Failure for defects it was scored with)."""
        if self.ledger is not None:  # the kept results, in place, in the order a full run writes them
            merged = self.ledger.merge(trace.id, res, self._order)
            if merged is not res:
                res.clear()
                res.update(merged)
        identity = self._identity
        if identity is None:  # first row: judges resolve inside the run's pool
            identity = self._identity = {ev.key: evaluator_identity(ev) for ev in self.evaluate.evaluators}
        row: dict[str, Any] = {
            "trace_id": trace.id,
            "run_id": self.options.run_id,
            "position": env.position.to_dict(),
            "results": res,
            "identity": identity,
        }
        platform = platform_ids(trace)
        if platform is not None:
            row["platform"] = platform
        warn = trace_warnings(trace)
        if warn:
            row["warnings"] = warn
            failures.append(warning_failure(env, trace, warn))
        return row, bool(warn)

    def _process_streaming(self, batch: list[Envelope]) -> Processed:
        """Deterministic evaluators only: parse, normalize, score and encode one record at a time,
        so only one parsed record is alive at once (a small working set is much faster than
        holding a whole batch of parsed records)."""
        parse = self.parse
        score_one = self.evaluate.score_one
        rows: list[dict[str, Any]] = []
        kept: list[dict[str, Result]] = []
        failures: list[Failure] = []
        positions: list[Position] = []
        keys: list[str | None] = []
        warnings = 0
        cluster_by = self.options.cluster_by or ""
        clusters: list[str] | None = [] if cluster_by else None
        for env in batch:
            t = parse(env)
            if type(t) is Trace:
                res = score_one(t)
                row, warned = self._row(t, env, res, failures)
                rows.append(row)
                keys.append(t.id)
                kept.append(res)
                warnings += warned
                if clusters is not None:
                    clusters.append(cluster_of(t, cluster_by))
            else:
                failures.append(t)  # type: ignore[arg-type]
            positions.append(env.position)
        return Processed(rows, failures, kept, positions, len(batch), 0, warnings, keys, clusters)

    async def _process(self, batch: list[Envelope]) -> Processed:
        if self.evaluate.streaming:
            return self._process_streaming(batch)
        parse = self.parse
        traces: list[Trace] = []
        envs: list[Envelope] = []
        failures: list[Failure] = []
        for env in batch:
            t = parse(env)
            if type(t) is Trace:
                traces.append(t)
                envs.append(env)
            else:
                failures.append(t)  # type: ignore[arg-type]
        try:
            results, done = await self.evaluate.process(traces)
        except PartialBatch as partial:
            results, done = partial.results, partial.done
            self.stop("budget")
        rows: list[dict[str, Any]] = []
        kept: list[dict[str, Result]] = []
        positions: list[Position] = [f.position for f in failures]
        abandoned = 0
        warnings = 0
        keys: list[str | None] = []
        cluster_by = self.options.cluster_by or ""
        clusters: list[str] | None = [] if cluster_by else None
        for trace, env, res, ok in zip(traces, envs, results, done, strict=True):
            if not ok:
                abandoned += 1
                continue
            row, warned = self._row(trace, env, res, failures)
            warnings += warned
            rows.append(row)
            keys.append(trace.id)
            kept.append(res)
            if clusters is not None:
                clusters.append(cluster_of(trace, cluster_by))
            positions.append(env.position)
        return Processed(rows, failures, kept, positions, len(batch), abandoned, warnings, keys, clusters)

    async def _sink_loop(self, recv: ObjectReceiveStream[Processed]) -> None:
        async with recv:
            async for p in recv:
                await self._write(p)
            await self._read_errors()

    async def _write(self, p: Processed) -> None:
        """Write one processed batch, count it, and commit when it is time."""
        stats = self.stats
        counts = stats.counts
        commit = self.committer
        if p.rows:
            await self.sink.write_results(p.rows, p.keys)
        if p.failures:
            await self.dead_letter.write_failures(p.failures)
        counts["read"] += p.read
        counts["scored"] += len(p.rows)
        counts["abandoned"] += p.abandoned
        counts["warnings"] += p.warnings
        for f in p.failures:
            if f.severity == "error":
                stats.add_dead_letter(f)
        if p.clusters is None and stats.labels is None:
            for res in p.results:
                stats.add_results(res)
        else:
            nothing: list[None] = [None] * len(p.results)
            clusters: Sequence[str | None] = nothing if p.clusters is None else p.clusters
            ids: Sequence[str | None] = nothing if p.keys is None else p.keys
            for res, cluster, trace_id in zip(p.results, clusters, ids, strict=True):
                stats.add_results(res, cluster, trace_id)
        await self._read_errors()
        if commit is not None:
            commit.add(p.positions, len(p.rows))
            await commit.maybe_commit()
        if self.on_progress is not None:
            self.on_progress(stats)

    async def _read_errors(self) -> None:
        """Input the source could not split into records: a dead letter each, acknowledged too."""
        errors = self.source.read_errors
        if not errors:
            return
        failures = [Failure(b"", pos, "read", "ReadError", msg) for pos, msg in errors]
        errors.clear()
        await self.dead_letter.write_failures(failures)
        for f in failures:
            self.stats.add_dead_letter(f)
        if self.committer is not None:
            self.committer.add([f.position for f in failures])
