"""A DAG of one AssayRunOperator per assay exit code, each running the stand-in assay (fake_assay.py).

Its environment: ASSAY_TEST_RUN_FILE (a run file), ASSAY_TEST_OUT (a directory), ASSAY_TEST_FAKE (the script)."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta

from airflow.sdk import DAG

from assay.integrations.airflow import AssayRunOperator

CODES = (0, 1, 2, 3, 4, 5, 6, 130)

with DAG(dag_id="assay_exit_codes", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    for code in CODES:
        AssayRunOperator(
            task_id=f"exit_{code}",
            run_file=os.environ["ASSAY_TEST_RUN_FILE"],
            assay_command=[sys.executable, os.environ["ASSAY_TEST_FAKE"]],
            overrides={"sink.path": f"{os.environ['ASSAY_TEST_OUT']}/out-{code}/"},
            extra_args=["--exit", str(code)],
            retries=1,
            retry_delay=timedelta(seconds=0),
        )
