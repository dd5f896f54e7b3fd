"""Score traces on a Ray cluster (extra ``assay[ray]``): a callable class for
``ray.data.Dataset.map_batches``.

:class:`AssayScorer` runs the evaluators of a run file on Arrow batches of trace rows (one row per
trace, read as ``assay run`` reads a Parquet table: the same ``normalize`` paths, JSON-text columns
decoded) and returns the score columns, in the schema of the Parquet sink (``trace_id``,
``run_id``, ``ds``, ``position``, and one struct column per result key with ``score``, ``value``,
``passed``, ``comment``, ``error``, ``input_tokens``, ``output_tokens``, ``cost_usd``), plus
``read_error`` (the reason a row could not be read as a trace, which ``assay run`` would send to
its dead letters; null for scored rows)::

    import ray
    from assay.integrations.ray import AssayScorer

    ds = ray.data.read_parquet("s3://lake/traces/dt=2026-11-24/")
    scores = ds.map_batches(
        AssayScorer,
        fn_constructor_kwargs={"run_file": "/opt/assay/nightly.yaml", "ds": "2026-11-24"},
        batch_format="pyarrow",
        batch_size=256,
        concurrency=8,  # actors
        num_cpus=0.5,  # each: actors holding every CPU would starve the read tasks (docs/operations.md)
    )
    scores.write_parquet("s3://lake/scores/dt=2026-11-24/")

Each actor builds the evaluators once and keeps its judges open between batches (an event loop
in a thread of the actor). Judges share one rate budget across all actors when the run file sets
``rate_store: redis://…`` (or a judge's ``shared_limit``): every actor draws from the same Redis
budget, instead of each assuming the endpoint's whole limit.

Every actor answers from the run's judge cache (``<state_dir>/judge_cache.sqlite``, the cache
``assay run`` uses) and stores each answer there as it arrives, so an actor that is killed and
restarted (Ray Data restarts actors and retries their batches by default) re-pays nothing: the
batch it redoes finds the answers the dead actor received in the cache (only a request in flight at
the moment of the kill is sent again). The actors of one machine share the file (SQLite in WAL
mode; writers wait for each other up to 30 s); ``state_dir`` is the run file's (a relative one is
resolved against the run file's folder; pass an absolute one with ``config=``). SQLite cannot be
shared between machines (WAL needs shared memory; network file systems break its locks): on a
cluster of several nodes each node keeps the cache on its own disk at the same ``state_dir``, and
an actor restarted on *another* node pays again for the answers of the batch it redoes.
``use_cache=False`` turns the cache off.

``limits.budget_usd`` is the whole job's, not each actor's: the actors reserve every judge call's
cost in ``<state_dir>/budget.sqlite`` under the job's run id (:mod:`assay.judges.budget_store`), so
together they stop within one call's cost of the cap; the traces of a batch the budget cut short get
an error result (``BudgetExceeded: judge budget … reached``) in their judged columns. What a run id
spent stays counted: the same job run again under the same cap sends nothing; a raised cap goes on
(the answers already paid come from the cache). SQLite is one machine's: on a cluster of several
nodes set ``rate_store: redis://…``, and the budget is kept in that Redis instead.

Rows are traces one by one: multi-row exports (LangSmith runs, Langfuse observations) are
assembled by ``assay run``, not here (their rows of one trace may be in different batches).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import pyarrow as pa
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError("assay.integrations.ray needs pyarrow: pip install 'assay[ray]'") from _exc

from assay.config import RunConfig, build_config, load_run_file, stable_run_id
from assay.connectors.parquet_schema import TableBuilder
from assay.connectors.parquet_traces import BatchRows, Row, columnar_plan
from assay.exceptions import BudgetExceeded
from assay.pipeline.assembly import build_evaluators
from assay.records import Envelope, Failure, Position, Result
from assay.stages.evaluate import EvaluateStage, PartialBatch
from assay.stages.normalize import RecordParser
from assay.traces.model import Trace


class AssayScorer:
    """Scores Arrow batches of traces with a run file's evaluators (see the module docs).

    ``run_file`` (or ``config``: a run file's contents as a dict), ``ds`` and ``sets`` as for
    ``assay run --ds … --set …``; ``run_id``: the ``run_id`` column (default: the run file's, else
    the same stable id ``assay run`` gives the run file and ``ds``); ``name``: what the
    ``position`` column names the rows by (``name:row``, the row's index in its batch, 1-based);
    ``use_cache``: answer from and store into the run's judge cache (see the module docs).
    """

    def __init__(
        self,
        run_file: str | Path | None = None,
        *,
        config: Mapping[str, Any] | RunConfig | None = None,
        ds: str | None = None,
        sets: Sequence[str] | None = None,
        run_id: str | None = None,
        use_cache: bool = True,
        name: str = "batch",
    ) -> None:
        if (run_file is None) == (config is None):
            raise ValueError("AssayScorer: pass run_file or config (one of them)")
        if run_file is not None:
            cfg = load_run_file(run_file, ds=ds, sets=list(sets) if sets else None)
        elif isinstance(config, RunConfig):
            cfg = config
        else:
            cfg = build_config(dict(config or {}), ds=ds, sets=list(sets) if sets else None)
        self.config = cfg
        self.ds = ds
        self.run_id = run_id or (str(cfg.run_id) if cfg.run_id else stable_run_id(cfg))
        self.name = name
        self.evaluators = build_evaluators(cfg)
        self.stage = EvaluateStage(self.evaluators)
        self.parse = RecordParser(cfg.normalize, projected=not self.stage.reads_scenario)
        self.thresholds: dict[str, float] = {ev.key: ev.threshold for ev in self.evaluators}
        self.use_cache = use_cache
        self._loop: contextlib.ExitStack | None = None
        self._portal: Any = None
        self._pool: Any = None

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
                budget_scope=f"ray:{self.run_id}",  # one budget for every actor of the job (and its reruns)
                budget_store=self.config.rate_store,
            )
            self._pool = stack.enter_context(self._portal.wrap_async_context_manager(pool))
            for ev in self.evaluators:
                ev.use_judges(self._pool)
        self._loop = stack

    def close(self) -> None:
        """Close the judges and stop the actor's event loop (also on garbage collection)."""
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    async def _process(self, traces: list[Trace]) -> list[dict[str, Result]]:
        try:
            results, _ = await self.stage.process(traces)
        except PartialBatch as cut:  # the budget is spent: what was not judged says so
            spent = f"judge budget of ${self.config.limits.budget_usd} reached"
            for res in cut.results:
                for ev in self.stage.async_:
                    res.setdefault(ev.key, Result.from_error(ev.key, BudgetExceeded(spent)))
            return cut.results
        return results

    def _evaluate(self, traces: list[Trace]) -> list[dict[str, Result]]:
        if self.stage.streaming:
            return [self.stage.score_one(t) for t in traces]
        if self._loop is None:
            self._start()
        out: list[dict[str, Result]] = self._portal.call(self._process, traces)
        return out

    # -- one batch ------------------------------------------------------------------------------

    def __call__(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Score one batch: its rows as traces → one row of score columns per input row."""
        if isinstance(batch, pa.Table):
            batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else pa.RecordBatch.from_pylist([])
        rows = BatchRows(batch, columnar_plan(batch.schema))
        traces: list[Trace] = []
        order: list[tuple[int, Trace | Failure]] = []
        for i in range(batch.num_rows):
            env = Envelope(b"", Position(self.name, i + 1), record=Row(rows, i))
            t = self.parse(env)
            if type(t) is Trace:
                traces.append(t)
            order.append((i, t))
        scored = iter(self._evaluate(traces))
        out_rows: list[dict[str, Any]] = []
        errors: list[str | None] = []
        keys: dict[str, None] = dict.fromkeys(ev.key for ev in self.evaluators)
        for i, t in order:
            position = {"file": self.name, "line": i + 1}
            if isinstance(t, Trace):
                res = next(scored)
                keys.update(dict.fromkeys(res))
                for key, r in res.items():
                    if r.threshold is not None:
                        self.thresholds[key] = r.threshold
                out_rows.append({"trace_id": t.id, "run_id": self.run_id, "position": position, "results": _dicts(res)})
                errors.append(None)
            else:
                out_rows.append({"trace_id": None, "run_id": self.run_id, "position": position, "results": {}})
                errors.append(t.message)
        builder = TableBuilder(list(keys), ds=self.ds, thresholds=self._thresholds(keys))
        builder.add_all(out_rows)
        table = pa.Table.from_batches([builder.batch()])
        return table.append_column("read_error", pa.array(errors, type=pa.string()))

    def _thresholds(self, keys: Mapping[str, None]) -> dict[str, float]:
        return {key: self.thresholds.get(key, 0.5) for key in keys}


def _dicts(results: Mapping[str, Result]) -> dict[str, dict[str, Any]]:
    return {k: r.to_dict() for k, r in results.items()}


__all__ = ["AssayScorer"]
