"""The engine: bounded streams between stages, one task group, checkpoint ledger, sharding."""

from assay.pipeline.checkpoint import CheckpointStore
from assay.pipeline.runner import Pipeline, RunOptions, RunOutcome
from assay.pipeline.summary import KeyStats, RunStats

__all__ = ["CheckpointStore", "KeyStats", "Pipeline", "RunOptions", "RunOutcome", "RunStats"]
