"""Batch mode: judge answers through the providers' batch APIs (half price, within 24 h).

**The judge cache is the join.** A judge with ``mode: batch`` turns each request it has no cached
answer for into a batch line whose ``custom_id`` is the request's cache key; finished lines are
written into the judge cache; then the run scores through the normal pipeline, where every judge
call is a cache hit, so rows, dead letters, gates and ``_SUCCESS`` stay the engine's.

* :mod:`~assay.judges.batch.ledger`: the durable ledger (which batch holds which lines, their
  attempts and outcomes), written before anything is sent;
* :mod:`~assay.judges.batch.api`: the generic batch client and the OpenAI / Anthropic subclasses;
* :mod:`~assay.judges.batch.endpoint`: the judge that collects misses or answers from the cache;
* :mod:`~assay.judges.batch.rounds`: the provider-facing half of one invocation (recover, poll and
  ingest, the judges' collect mode, pack and submit), with no ``pipeline`` import;
  :mod:`assay.pipeline.batch_run` orders them before a run scores (exit 75 or wait).

Batch support is the provider class's (``batch_limits``, ``batcher``), so a provider from the
``assay.judge_providers`` entry-point group can batch too.
"""

from assay.judges.batch.config import BatchConfig

__all__ = ["BatchConfig"]
