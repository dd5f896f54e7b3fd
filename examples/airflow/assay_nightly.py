"""Score yesterday's traces every night: one mapped task per shard, then one merge and gate decision.

Copy this file into your Airflow ``dags/`` folder and point ``ASSAY_RUN_FILE`` at your run file
(default: ``nightly.yaml`` beside this file). ``assay_nightly`` then runs at 02:00 UTC:

    score[0..N-1]  assay run nightly.yaml --ds <yesterday> --shard i/N   (mapped, side by side)
         │         each pushes its shard summary to XCom; interrupt/infra errors retry, a budget stop does not
         ▼
    merge          assay merge --run-file nightly.yaml --ds <yesterday>
                   one _SUMMARY.json, the gates applied once, _SUCCESS when every shard is whole;
                   a failed gate (exit 3) or too many dead letters (exit 4) fails it without retry

The sink may be any the run file supports: a directory or ``s3://`` prefix (JSON lines or Parquet),
or a Delta table (``sink: {type: delta, path: …}``: the shards stage their rows beside the table and
the merge commits the day in one commit).

Try it without a scheduler: ``airflow dags test assay_nightly 2026-11-22`` scores 2026-11-21.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2
    from airflow import DAG

from assay.integrations.airflow import AssayMergeOperator, AssayRunOperator

RUN_FILE = os.environ.get("ASSAY_RUN_FILE", str(Path(__file__).with_name("nightly.yaml")))
SHARDS = int(os.environ.get("ASSAY_SHARDS", "2"))
#: The partition scored: the day before the run's logical date (a 02:00 run scores all of yesterday).
YESTERDAY = "{{ macros.ds_add(ds, -1) }}"

with DAG(
    dag_id="assay_nightly",
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10)},
    tags=["assay"],
) as dag:
    score = AssayRunOperator.partial(
        task_id="score",
        run_file=RUN_FILE,
        ds=YESTERDAY,
        wait_lock=60,
    ).expand(shard=[f"{i}/{SHARDS}" for i in range(SHARDS)])

    merge = AssayMergeOperator(task_id="merge", run_file=RUN_FILE, ds=YESTERDAY, retries=0)

    score >> merge
