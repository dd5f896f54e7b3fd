"""A DAG of one AssayBackfillOperator over three days (``assay backfill --from --to``).

Its environment: ASSAY_BACKFILL_RUN_FILE (a run file whose source and sink name ``{{ ds }}``)."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from assay.integrations.airflow import AssayBackfillOperator

with DAG(dag_id="assay_backfill", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    AssayBackfillOperator(
        task_id="backfill",
        run_file=os.environ["ASSAY_BACKFILL_RUN_FILE"],
        start="2026-11-19",
        end="2026-11-21",
        parallel_days=2,
    )
