"""Two deferrable AssayRunOperators whose run files resolve ``${ASSAY_OUT}`` and whose judge key
exist only in the operator's ``env=`` (the key from an Airflow Variable): the processes of the
scheduler and the triggerer have neither. The triggerer is given ``BATCH_API_KEY`` (the same key,
as a deployment provides it) but not ``OTHER_API_KEY``.

Its environment: ASSAY_ENV_DIR (the run files ``polled.yaml`` and ``checked.yaml`` are written
there by the test)."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from assay.integrations.airflow import AssayRunOperator

ROOT = os.environ.get("ASSAY_ENV_DIR", "/nonexistent")

with DAG(dag_id="assay_batch_env", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    for name, key_env in (("polled", "BATCH_API_KEY"), ("checked", "OTHER_API_KEY")):
        AssayRunOperator(
            task_id=name,
            run_file=f"{name}.yaml",
            cwd=ROOT,
            ds="2026-11-21",
            deferrable=True,
            poll_interval_s=3.0,
            retries=0,
            env={key_env: "{{ var.value.batch_key }}", "ASSAY_OUT": os.path.join(ROOT, name)},
        )
