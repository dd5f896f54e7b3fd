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

Batches whose messages are Arrow lists of structs are scored **by columns** when every evaluator
of the run has a columnar form (:mod:`assay.evaluators.columnar`; ``ASSAY_COLUMNAR=0`` turns it
off): no trace object is built, and the rows the columns cannot decide as the object path would
take the object path, in place. The table is the object path's either way. Read only the columns
the plan needs with ``ray.data.read_parquet(path, columns=scorer.read_columns(schema))`` (None:
every column). The scorer is :class:`~assay.integrations.arrow_scoring.BatchScorer`, which the
Spark integration's executors run too.

Rows are traces one by one: multi-row exports (LangSmith runs, Langfuse observations) are
assembled by ``assay run``, not here (their rows of one trace may be in different batches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import pyarrow as pa
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError("assay.integrations.ray needs pyarrow: pip install 'assay[ray]'") from _exc

from assay.config import RunConfig
from assay.integrations.arrow_scoring import BatchScorer, as_batch, run_config, score_table


class AssayScorer(BatchScorer):
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
        cfg = run_config(run_file, config, ds=ds, sets=sets, who="AssayScorer")
        super().__init__(cfg, run_id=run_id, use_cache=use_cache)
        self.ds = ds
        self.name = name

    def __call__(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Score one batch: its rows as traces → one row of score columns per input row."""
        batch = as_batch(batch)
        if self.columnar_plan(batch.schema) is not None:  # every key is an evaluator's own
            return self.columns(batch, self.name, ds=self.ds)
        processed = self.process(batch, self.name)
        self.observe(processed)
        return score_table(processed, self.keys, run_id=self.run_id, ds=self.ds, thresholds=self.thresholds)


__all__ = ["AssayScorer"]
