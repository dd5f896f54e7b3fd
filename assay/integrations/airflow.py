"""Airflow operators for assay (extra ``assay[airflow]``).

:class:`AssayRunOperator` runs ``assay run`` in a subprocess (its log streams into the task log),
pushes the parsed ``_SUMMARY.json`` to XCom (the return value; key ``assay_summary`` when the task
fails) and maps assay's exit codes onto task states:

======  ==============================  =========================================
exit    meaning                         task
======  ==============================  =========================================
0       ok                              success
1       infrastructure failure          failed, retried (``AirflowException``)
2       bad config or usage             failed, no retry (``AirflowFailException``)
3       a quality gate failed           failed, no retry; the gates in the log
4       too many dead letters           failed, no retry; the counts in the log
5       budget exhausted                failed, no retry: raise ``limits.budget_usd``
                                        (``--set``), then run again: it resumes
6       the same run is still running   failed, retried
75      judge batches pending           failed, retried: the retry collects
                                        (``deferrable=True``: deferred instead)
130     interrupted                     failed, retried: the retry resumes
======  ==============================  =========================================

:class:`AssayMergeOperator` runs ``assay merge`` after the mapped shard tasks: one summary and
one gate decision for the whole run. A nightly DAG (``examples/airflow/assay_nightly.py``)::

    score = AssayRunOperator.partial(
        task_id="score", run_file="/opt/assay/nightly.yaml", ds="{{ macros.ds_add(ds, -1) }}"
    ).expand(shard=[f"{i}/4" for i in range(4)])
    merge = AssayMergeOperator(task_id="merge", run_file="/opt/assay/nightly.yaml", ds="{{ macros.ds_add(ds, -1) }}")
    score >> merge
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

try:
    try:  # Airflow 3
        from airflow.sdk import BaseOperator
        from airflow.sdk.exceptions import AirflowException, AirflowFailException
    except ImportError:  # Airflow 2
        from airflow.exceptions import AirflowException, AirflowFailException
        from airflow.models import BaseOperator
    from airflow.triggers.base import BaseTrigger, TriggerEvent
except ImportError as _exc:
    raise ImportError(
        "assay.integrations.airflow needs Apache Airflow: pip install 'assay[airflow]' (or apache-airflow)"
    ) from _exc

from assay.exceptions import (
    EXIT_BUDGET,
    EXIT_CONFIG,
    EXIT_DEAD_LETTERS,
    EXIT_GATE,
    EXIT_INFRA,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_OK,
    EXIT_PENDING,
)

__all__ = ["EXIT_MEANING", "AssayBatchTrigger", "AssayMergeOperator", "AssayRunOperator", "outcome_of"]

#: What each exit code means, and whether Airflow may retry the task.
EXIT_MEANING: dict[int, tuple[str, bool]] = {
    EXIT_OK: ("ok", False),
    EXIT_INFRA: ("infrastructure failure", True),
    EXIT_CONFIG: ("bad config or usage", False),
    EXIT_GATE: ("a quality gate failed", False),
    EXIT_DEAD_LETTERS: ("too many dead letters", False),
    EXIT_BUDGET: ("budget exhausted (raise limits.budget_usd, then run again to resume)", False),
    EXIT_LOCKED: ("the same run is still running elsewhere", True),
    EXIT_PENDING: ("submitted work is not finished yet (a retry collects it)", True),
    EXIT_INTERRUPTED: ("interrupted (a retry resumes the run)", True),
}

SUMMARY_XCOM_KEY = "assay_summary"
_TAIL_LINES = 40


def outcome_of(exit_code: int, summary: Mapping[str, Any] | None, tail: Sequence[str]) -> Exception | None:
    """The exception that fails the task for ``exit_code`` (None on success): retryable
    ``AirflowException`` or ``AirflowFailException``, its message carrying the reason."""
    if exit_code == EXIT_OK:
        return None
    meaning, retry = EXIT_MEANING.get(exit_code, (f"exit code {exit_code}", True))
    reasons = [str(m) for m in (summary or {}).get("messages") or []]
    if not reasons:
        reasons = [line for line in tail if "error" in line.lower() or line.startswith("assay:")][-5:]
    text = f"assay exited {exit_code}: {meaning}" + "".join(f"\n  {r}" for r in reasons)
    error: Exception = AirflowException(text) if retry else AirflowFailException(text)
    return error


class _AssayCommandOperator(BaseOperator):  # type: ignore[misc]
    """Runs one ``assay`` command in a subprocess, streams its output into the task log, maps its
    exit code, and pushes the summary it wrote to XCom."""

    ui_color = "#e8f1e4"

    def __init__(
        self,
        *,
        assay_command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        extra_args: Sequence[str] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.assay_command = list(assay_command) if assay_command else [sys.executable, "-m", "assay.cli"]
        self.env = dict(env or {})
        self.cwd = cwd
        self.extra_args = list(extra_args)
        self._proc: subprocess.Popen[str] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def summary_path(self) -> Path | None:
        raise NotImplementedError

    def execute(self, context: Any) -> Any:
        argv = self.command()
        self.log.info("running: %s", " ".join(argv))
        exit_code, tail = self._run(argv)
        if exit_code == EXIT_PENDING:
            self.on_pending(context)
        summary = self._read_summary()
        error = outcome_of(exit_code, summary, tail)
        if error is not None:
            if summary is not None:  # a failed run's numbers are still worth a look
                context["ti"].xcom_push(key=SUMMARY_XCOM_KEY, value=summary)
            self.log.error("%s", error)
            raise error
        if summary is None:
            raise AirflowException(f"assay exited 0 but wrote no summary at {self.summary_path()}")
        return summary

    def on_pending(self, context: Any) -> None:
        """Exit 75 (judge batches pending): fail for a retry to collect, unless deferrable."""

    def on_kill(self) -> None:
        """SIGTERM: assay stops reading, flushes what is durable and exits 130 (a retry resumes)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    def _run(self, argv: list[str]) -> tuple[int, list[str]]:
        env = {**os.environ, **self.env}
        tail: deque[str] = deque(maxlen=_TAIL_LINES)
        with subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            env=env,
            cwd=self.cwd,
        ) as proc:
            self._proc = proc
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.rstrip("\n")
                tail.append(line)
                self.log.info("%s", line)
            code = proc.wait()
        self._proc = None
        return code, list(tail)

    def _read_summary(self) -> dict[str, Any] | None:
        path = self.summary_path()
        if path is None:
            return None
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            self.log.warning("no readable summary at %s: %s", path, exc)
            return None
        return data if isinstance(data, dict) else None

    def _run_file_config(self, run_file: str, ds: str | None, overrides: Mapping[str, Any]) -> Any:
        from assay.config import load_run_file
        from assay.exceptions import AssayError

        try:
            return load_run_file(run_file, ds=ds or None, sets=_sets(overrides))
        except AssayError as exc:
            raise AirflowFailException(f"assay: {exc}") from exc


def _sets(overrides: Mapping[str, Any]) -> list[str]:
    return [f"{k}={v if isinstance(v, str) else orjson.dumps(v).decode()}" for k, v in overrides.items()]


class AssayBatchTrigger(BaseTrigger):  # type: ignore[misc]
    """Polls the provider for the open judge batches of a run's ledger (``mode: batch``) every
    ``poll_interval_s`` seconds in the triggerer, while no worker slot is held; fires once every
    batch has finished (the operator then runs the same command, which collects and scores)."""

    def __init__(
        self,
        run_file: str,
        ds: str | None = None,
        shard: str | None = None,
        overrides: Mapping[str, Any] | None = None,
        poll_interval_s: float = 60.0,
    ) -> None:
        super().__init__()
        self.run_file = run_file
        self.ds = ds
        self.shard = shard
        self.overrides = dict(overrides or {})
        self.poll_interval_s = poll_interval_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "assay.integrations.airflow.AssayBatchTrigger",
            {
                "run_file": self.run_file,
                "ds": self.ds,
                "shard": self.shard,
                "overrides": self.overrides,
                "poll_interval_s": self.poll_interval_s,
            },
        )

    async def run(self) -> Any:
        import asyncio

        from assay.config import load_run_file
        from assay.pipeline.batch_commands import open_batches_finished

        config = load_run_file(self.run_file, ds=self.ds or None, sets=_sets(self.overrides))
        shard = None
        if self.shard:
            i, _, n = str(self.shard).partition("/")
            shard = (int(i), int(n))
        while True:
            state = await open_batches_finished(config, shard)
            if state["finished"]:
                yield TriggerEvent({"status": "finished", **state})
                return
            self.log.info("assay batches: %d of %d finished", state["done"], state["open"])
            await asyncio.sleep(self.poll_interval_s)


class AssayRunOperator(_AssayCommandOperator):
    """``assay run RUN_FILE --ds DS [--shard i/N] [--workers W] [--set k=v …] [extra_args…]``.

    Templated: ``run_file``, ``ds``, ``shard``, ``overrides``, ``extra_args``. ``overrides`` are
    run-file keys (``{"limits.budget_usd": 20}``), passed as ``--set``. ``assay_command`` is how
    assay is started (default: this Python's ``-m assay.cli``). Returns the run's summary (or the
    shard's, ``_SUMMARY.shard-i-of-N.json``), which lands in XCom.

    ``deferrable=True``: when the run exits 75 (judge batches submitted, ``mode: batch``), the task
    defers to :class:`AssayBatchTrigger`, which polls the provider from the triggerer every
    ``poll_interval_s`` while the worker slot is free, then runs the same command again to collect
    (and defers again while anything is pending). Without it, exit 75 fails the task for a retry."""

    template_fields: Sequence[str] = ("run_file", "ds", "shard", "overrides", "extra_args", "env")

    def __init__(
        self,
        *,
        run_file: str,
        ds: str | None = "{{ ds }}",
        shard: str | None = None,
        workers: int | str | None = None,
        overrides: Mapping[str, Any] | None = None,
        log_format: str = "text",
        wait_lock: float | None = None,
        deferrable: bool = False,
        poll_interval_s: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        self.poll_interval_s = poll_interval_s
        self.run_file = run_file
        self.ds = ds
        self.shard = shard
        self.workers = workers
        self.overrides = dict(overrides or {})
        self.log_format = log_format
        self.wait_lock = wait_lock

    def command(self) -> list[str]:
        argv = [*self.assay_command, "run", str(self.run_file), "--log-format", self.log_format]
        if self.ds:
            argv += ["--ds", str(self.ds)]
        if self.shard:
            argv += ["--shard", str(self.shard)]
        if self.workers is not None:
            argv += ["--workers", str(self.workers)]
        if self.wait_lock is not None:
            argv += ["--wait-lock", f"{self.wait_lock:g}"]
        for item in _sets(self.overrides):
            argv += ["--set", item]
        return argv + [str(a) for a in self.extra_args]

    def on_pending(self, context: Any) -> None:
        if not self.deferrable:
            return
        self.log.info("judge batches pending: deferring until they finish (polled every %gs)", self.poll_interval_s)
        trigger = AssayBatchTrigger(
            str(self.run_file), self.ds, self.shard, self.overrides, poll_interval_s=self.poll_interval_s
        )
        self.defer(trigger=trigger, method_name="execute_complete")

    def execute_complete(self, context: Any, event: Mapping[str, Any] | None = None) -> Any:
        """The batches finished: run the same command again (collect, score, publish)."""
        self.log.info("assay batches finished: %s", dict(event or {}))
        return self.execute(context)

    def summary_path(self) -> Path | None:
        from assay.pipeline.merge import shard_summary_name
        from assay.pipeline.targets import local_summary_path

        config = self._run_file_config(self.run_file, self.ds, self.overrides)
        path: Path = local_summary_path(config)
        if self.shard:
            i, _, n = str(self.shard).partition("/")
            shard_path = path.with_name(shard_summary_name(int(i), int(n)))
            if shard_path.exists():
                return shard_path
        return path


class AssayMergeOperator(_AssayCommandOperator):
    """``assay merge [RESULTS] --run-file RUN_FILE --ds DS``: the final task after the mapped
    shards. Applies the gates once to the whole run and writes ``_SUCCESS`` when every shard is
    whole; returns the merged summary. Without ``run_file``, ``results`` is required and the gates
    the shards stored are applied."""

    template_fields: Sequence[str] = ("results", "run_file", "ds", "overrides", "extra_args", "env")

    def __init__(
        self,
        *,
        run_file: str | None = None,
        ds: str | None = "{{ ds }}",
        results: str | None = None,
        shards: int | None = None,
        overrides: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if run_file is None and results is None:
            raise ValueError("AssayMergeOperator needs run_file or results")
        self.run_file = run_file
        self.ds = ds
        self.results = results
        self.shards = shards
        self.overrides = dict(overrides or {})

    def command(self) -> list[str]:
        argv = [*self.assay_command, "merge"]
        if self.results:
            argv.append(str(self.results))
        if self.run_file:
            argv += ["--run-file", str(self.run_file)]
            if self.ds:
                argv += ["--ds", str(self.ds)]
            for item in _sets(self.overrides):
                argv += ["--set", item]
        if self.shards is not None:
            argv += ["--shards", str(self.shards)]
        return argv + [str(a) for a in self.extra_args]

    def summary_path(self) -> Path | None:
        from assay.pipeline.targets import local_summary_path

        if self.results:
            p = Path(self.results)
            return p if p.name == "_SUMMARY.json" else p / "_SUMMARY.json"
        assert self.run_file is not None
        config = self._run_file_config(self.run_file, self.ds, self.overrides)
        path: Path = local_summary_path(config)
        return path
