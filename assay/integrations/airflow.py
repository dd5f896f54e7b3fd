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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
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

__all__ = [
    "DEFERRAL_SETTLE_S",
    "EXIT_MEANING",
    "SECRET_NAME_PARTS",
    "AssayBackfillOperator",
    "AssayBatchTrigger",
    "AssayMergeOperator",
    "AssayRunOperator",
    "is_secret_name",
    "outcome_of",
    "split_env",
]

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
        deferrable: bool = False,
        poll_interval_s: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        self.poll_interval_s = poll_interval_s
        self._given_command = list(assay_command) if assay_command else None
        self.assay_command = self._given_command or [sys.executable, "-m", "assay.cli"]
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

    def execute_complete(self, context: Any, event: Mapping[str, Any] | None = None) -> Any:
        """The batches finished, or the triggerer could not ask (``check_in_task``): run the same
        command again (it collects and scores, or defers again while batches are pending)."""
        event = dict(event or {})
        if event.get("status") == "check_in_task":
            self.log.info("the triggerer did not poll the provider (%s): the task checks", event.get("reason"))
        else:
            self.log.info("assay batches finished: %s", event)
        return self.execute(context)

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
        """The run file as the command reads it: with ``env=`` over this task process's
        environment (its ``${VAR}`` paths are the command's), relative to ``cwd``."""
        from assay.config import load_run_file
        from assay.exceptions import AssayError

        try:
            with _environment(self.env):
                path = Path(run_file)
                if self.cwd and not path.is_absolute():
                    path = Path(self.cwd) / path
                return load_run_file(path, ds=ds or None, sets=_sets(overrides))
        except AssayError as exc:
            raise AirflowFailException(f"assay: {exc}") from exc


@contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """``env`` set in this process's environment for a moment, then restored (the task's process
    is its own: a worker runs one task per process)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _sets(overrides: Mapping[str, Any]) -> list[str]:
    return [f"{k}={v if isinstance(v, str) else orjson.dumps(v).decode()}" for k, v in overrides.items()]


#: Parts of environment variable names whose values are secrets (Airflow's own list of sensitive
#: field names, plus "key" and "credential"): such values are never written into a serialized
#: trigger, only their names.
SECRET_NAME_PARTS = (
    "access_token",
    "api_key",
    "apikey",
    "auth",
    "credential",
    "key",
    "passphrase",
    "passwd",
    "password",
    "private",
    "secret",
    "session",
    "token",
)


#: The least time between a deferral and the trigger's event: a task resumed before the scheduler
#: has processed the executor's report of the deferral is failed by Airflow.
DEFERRAL_SETTLE_S = 10.0


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's value is treated as a secret (by its name)."""
    lowered = name.lower()
    return any(part in lowered for part in SECRET_NAME_PARTS)


def split_env(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """An operator's ``env=``: the values that may be serialized (paths, flags) and the names of
    the secret ones (:func:`is_secret_name`)."""
    plain = {k: str(v) for k, v in env.items() if not is_secret_name(k)}
    return plain, sorted(k for k in env if is_secret_name(k))


class AssayBatchTrigger(BaseTrigger):  # type: ignore[misc]
    """Polls the provider for the open judge batches of a run's ledger (``mode: batch``) every
    ``poll_interval_s`` seconds in the triggerer, while no worker slot is held; fires once every
    batch has finished (the operator then runs the same command, which collects and scores).

    It polls with what the task uses: ``assay batches status`` runs in a subprocess whose
    environment is the triggerer's plus the operator's ``env=`` values that are not secrets
    (``env``: paths a run file reads as ``${VAR}``), in the operator's ``cwd``. Secrets are never
    serialized (the trigger is stored in Airflow's database): ``secret_env`` holds only their
    names, and the triggerer must have them in its own environment (the same names). When one is
    missing there, or the poll fails (a 401 from the provider: the triggerer's key is another), the
    trigger waits ``poll_interval_s`` and fires ``check_in_task``: the task runs the same command
    with its own environment, which collects what finished or defers again."""

    def __init__(
        self,
        run_file: str,
        ds: str | None = None,
        shard: str | None = None,
        overrides: Mapping[str, Any] | None = None,
        poll_interval_s: float = 60.0,
        *,
        env: Mapping[str, str] | None = None,
        secret_env: Sequence[str] = (),
        cwd: str | None = None,
        assay_command: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.run_file = run_file
        self.ds = ds
        self.shard = shard
        self.overrides = dict(overrides or {})
        self.poll_interval_s = poll_interval_s
        self.env = {k: v for k, v in (env or {}).items() if not is_secret_name(k)}  # never a secret value
        self.secret_env = sorted({*secret_env, *(k for k in (env or {}) if is_secret_name(k))})
        self.cwd = cwd
        self.assay_command = list(assay_command) if assay_command else None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "assay.integrations.airflow.AssayBatchTrigger",
            {
                "run_file": self.run_file,
                "ds": self.ds,
                "shard": self.shard,
                "overrides": self.overrides,
                "poll_interval_s": self.poll_interval_s,
                "env": self.env,
                "secret_env": self.secret_env,
                "cwd": self.cwd,
                "assay_command": self.assay_command,
            },
        )

    def status_command(self) -> list[str]:
        """``assay batches status`` of this run (this interpreter's assay unless one was given)."""
        argv = [*(self.assay_command or [sys.executable, "-m", "assay.cli"]), "batches", "status", self.run_file]
        if self.ds:
            argv += ["--ds", str(self.ds)]
        if self.shard:
            argv += ["--shard", str(self.shard)]
        for item in _sets(self.overrides):
            argv += ["--set", item]
        return argv

    async def poll(self) -> dict[str, Any] | str:
        """The batches' state, or why it could not be asked (one line)."""
        import asyncio

        proc = await asyncio.create_subprocess_exec(
            *self.status_command(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **self.env},
            cwd=self.cwd,
        )
        out, err = await proc.communicate()
        if proc.returncode == 0:
            try:
                state = orjson.loads(out.strip().splitlines()[-1])
            except (IndexError, orjson.JSONDecodeError):
                state = None
            if isinstance(state, dict) and "finished" in state:
                return state
        lines = [line for line in err.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1] if lines else f"assay batches status exited {proc.returncode}"

    async def run(self) -> Any:
        import asyncio

        # the task just saw its batches pending: the first poll comes an interval later, and never
        # sooner than DEFERRAL_SETTLE_S (Airflow fails a task that resumes before the scheduler has
        # taken in the executor's report of its deferral)
        wait = max(self.poll_interval_s, DEFERRAL_SETTLE_S)
        missing = [name for name in self.secret_env if name not in os.environ]
        if missing:
            reason = f"{', '.join(missing)} not in the triggerer's environment (never serialized)"
            self.log.info("assay batches: %s: the task checks in %gs", reason, wait)
            await asyncio.sleep(wait)
            yield TriggerEvent({"status": "check_in_task", "reason": reason})
            return
        while True:
            await asyncio.sleep(wait)
            wait = self.poll_interval_s
            state = await self.poll()
            if isinstance(state, str):
                self.log.warning("assay batches: the triggerer cannot poll: %s: the task checks", state)
                yield TriggerEvent({"status": "check_in_task", "reason": state})
                return
            if state["finished"]:
                yield TriggerEvent({"status": "finished", **state})
                return
            self.log.info("assay batches: %d of %d finished", state["done"], state["open"])


class AssayRecheckTrigger(BaseTrigger):  # type: ignore[misc]
    """Waits ``poll_interval_s`` seconds in the triggerer (never less than ``DEFERRAL_SETTLE_S``),
    while no worker slot is held, then fires ``check_in_task``: the task runs its command again,
    which polls the provider once, collects what finished, or defers again. For commands whose
    batches span several runs' ledgers (``assay backfill``'s shared ledger), where the triggerer
    has no one status to ask."""

    def __init__(self, poll_interval_s: float = 60.0, reason: str = "judge batches pending") -> None:
        super().__init__()
        self.poll_interval_s = poll_interval_s
        self.reason = reason

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "assay.integrations.airflow.AssayRecheckTrigger",
            {"poll_interval_s": self.poll_interval_s, "reason": self.reason},
        )

    async def run(self) -> Any:
        import asyncio

        await asyncio.sleep(max(self.poll_interval_s, DEFERRAL_SETTLE_S))
        yield TriggerEvent({"status": "check_in_task", "reason": self.reason})


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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
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
        plain, secret = split_env(self.env)
        trigger = AssayBatchTrigger(
            str(self.run_file),
            self.ds,
            self.shard,
            self.overrides,
            poll_interval_s=self.poll_interval_s,
            env=plain,
            secret_env=secret,
            cwd=self.cwd,
            assay_command=self._given_command,
        )
        self.defer(trigger=trigger, method_name="execute_complete")

    def summary_path(self) -> Path | None:
        from assay.connectors.layout import shard_summary_name
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
        from assay.connectors.layout import SUMMARY
        from assay.pipeline.targets import local_summary_path

        if self.results:
            p = Path(self.results)
            return p if p.name == SUMMARY else p / SUMMARY
        assert self.run_file is not None
        config = self._run_file_config(self.run_file, self.ds, self.overrides)
        path: Path = local_summary_path(config)
        return path


class AssayBackfillOperator(_AssayCommandOperator):
    """``assay backfill RUN_FILE --from START --to END [--parallel-days N] [--max-cost-usd X]``:
    a range of days in one task (``docs/backfill.md``), scored at the price of what is missing.

    Templated: ``run_file``, ``start``, ``end``, ``overrides``, ``extra_args``. Exit codes as
    ``assay run`` (the worst day's): 75 while a batch judge's batches are pending fails the task
    for a retry, which collects them; with ``deferrable=True`` the task defers instead
    (:class:`AssayRecheckTrigger`: no worker slot is held while it waits ``poll_interval_s``), then
    runs the same command, which collects or defers again. Returns ``_BACKFILL.json`` (local outputs), which lands in
    XCom. ``airflow dags backfill`` of the shipped DAG (one ``assay run --ds`` per day) gives the
    same outputs: each day's run follows the same rule."""

    template_fields: Sequence[str] = ("run_file", "start", "end", "overrides", "extra_args", "env")

    def __init__(
        self,
        *,
        run_file: str,
        start: str,
        end: str,
        parallel_days: int = 1,
        max_cost_usd: float | None = None,
        overrides: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.run_file = run_file
        self.start = start
        self.end = end
        self.parallel_days = parallel_days
        self.max_cost_usd = max_cost_usd
        self.overrides = dict(overrides or {})

    def command(self) -> list[str]:
        argv = [*self.assay_command, "backfill", str(self.run_file), "--from", str(self.start), "--to", str(self.end)]
        argv += ["--parallel-days", str(self.parallel_days)]
        if self.max_cost_usd is not None:
            argv += ["--max-cost-usd", f"{self.max_cost_usd:g}"]
        for item in _sets(self.overrides):
            argv += ["--set", item]
        return argv + [str(a) for a in self.extra_args]

    def on_pending(self, context: Any) -> None:
        if not self.deferrable:
            return
        self.log.info("judge batches pending: deferring, the task checks again in %gs", self.poll_interval_s)
        self.defer(trigger=AssayRecheckTrigger(self.poll_interval_s), method_name="execute_complete")

    def summary_path(self) -> Path | None:
        from assay.pipeline.backfill import BACKFILL, backfill_location, days_between

        configs = [
            self._run_file_config(self.run_file, day, self.overrides) for day in days_between(self.start, self.end)
        ]
        fs, where = backfill_location(configs)
        if (close := getattr(fs, "close", None)) is not None:
            close()
        return None if "://" in where else Path(where) / BACKFILL
