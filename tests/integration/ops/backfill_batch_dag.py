"""A DAG of one deferrable AssayBackfillOperator over two days whose judge is in batch mode.

Its environment: ASSAY_BACKFILL_BATCH_RUN_FILE (the run file, written by the test with the stand-in
batch server's URL before the DAG is tested)."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from assay.integrations.airflow import AssayBackfillOperator

with DAG(dag_id="assay_backfill_batch", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    AssayBackfillOperator(
        task_id="backfill",
        run_file=os.environ.get("ASSAY_BACKFILL_BATCH_RUN_FILE", "run.yaml"),
        start="2026-11-20",
        end="2026-11-21",
        deferrable=True,
        poll_interval_s=0.5,
        retries=0,
    )
