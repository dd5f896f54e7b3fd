"""A DAG of one deferrable AssayRunOperator over a run whose judge is in batch mode (``mode: batch``).

Its environment: ASSAY_BATCH_RUN_FILE (the run file, written by the test with the stand-in batch
server's URL before the DAG is tested)."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from assay.integrations.airflow import AssayRunOperator

with DAG(dag_id="assay_batch_deferrable", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    AssayRunOperator(
        task_id="score",
        run_file=os.environ.get("ASSAY_BATCH_RUN_FILE", "run.yaml"),
        ds="2026-11-21",
        deferrable=True,
        poll_interval_s=0.5,
        retries=0,
    )
