"""The engine: bounded streams between stages, one task group, checkpoint ledger, sharding."""

from assay.pipeline.checkpoint import Ledger
from assay.pipeline.runner import Pipeline, RunOptions, RunOutcome
from assay.pipeline.summary import KeyStats, RunStats

__all__ = ["KeyStats", "Ledger", "Pipeline", "RunOptions", "RunOutcome", "RunStats"]
