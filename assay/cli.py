"""The ``assay`` command line: run, push, score, validate, evaluators, normalize, report, compare, calibrate."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import orjson
import typer

from assay.config import RunConfig, build_config, load_run_file, parse_evaluator_spec
from assay.exceptions import EXIT_INTERRUPTED, AssayError, ConfigError

if TYPE_CHECKING:
    from assay.observability.session import RunSession

app = typer.Typer(
    name="assay",
    help="Batch-score corpora of LLM and agent traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
evaluators_app = typer.Typer(help="List evaluators and show their parameters.", no_args_is_help=True)
app.add_typer(evaluators_app, name="evaluators")


def _fail(exc: AssayError, secrets: Iterable[str] = ()) -> None:
    typer.echo(f"assay: error: {_shown(str(exc), secrets)}", err=True)
    raise typer.Exit(exc.exit_code)


def _shown(text: str, secrets: Iterable[str] = ()) -> str:
    """A message as printed: the run file's expanded ``${ENV}`` values blanked, and inert in a
    terminal (an error may quote the input)."""
    from assay.config import redact_values
    from assay.report.terminal import safe

    return safe(redact_values(text, secrets))


def _parse_shard(shard: str | None) -> tuple[int, int] | None:
    if shard is None:
        return None
    i, sep, n = shard.partition("/")
    if not sep or not i.isdigit() or not n.isdigit() or int(n) < 1 or int(i) >= int(n):
        raise ConfigError(f"--shard: expected i/N with 0 <= i < N, got {shard!r}")
    return int(i), int(n)


def _run_config(
    config: RunConfig,
    origin: str,
    *,
    fresh: bool,
    workers: str,
    shard: str | None,
    dry_run: bool,
    no_cache: bool,
    quiet: bool,
    session: RunSession | None = None,
    wait: bool = False,
) -> None:
    from assay.config import expanded_values
    from assay.pipeline.progress import Progress
    from assay.pipeline.run import execute
    from assay.pipeline.shard import execute_sharded, share_limits

    secrets = [*expanded_values(config), *(session.secrets if session is not None else ())]
    try:
        if dry_run:
            from assay.pipeline.dry_run import dry_run as do_dry_run

            report = anyio.run(lambda: do_dry_run(config, origin, fresh=fresh))
            _print_dry_run(report)
            raise typer.Exit(0)
        shard_t = _parse_shard(shard)
        n_workers = _parse_workers(workers, config, shard_t)
        make_progress = session.progress if session is not None else Progress

        if n_workers > 1:
            with make_progress(enabled=not quiet) as progress:
                result = execute_sharded(
                    config,
                    origin=origin,
                    workers=n_workers,
                    fresh=fresh,
                    use_cache=not no_cache,
                    progress=progress,
                    wait=wait,
                )
        else:
            if shard_t is not None:
                config = share_limits(config, shard_t[1])
            with make_progress(enabled=not quiet) as progress:
                result = anyio.run(
                    lambda: execute(
                        config,
                        origin=origin,
                        fresh=fresh,
                        shard=shard_t,
                        use_cache=not no_cache,
                        progress=progress,
                        handle_signals=True,
                        wait=wait,
                    )
                )
    except AssayError as exc:
        _fail(exc, secrets)
        return
    if not quiet and result.status != "pending" and (session is None or session.log_format == "text"):
        from assay.report.terminal import print_summary

        print_summary(result.summary)
    if session is not None:
        session.finish(result.summary, result.exit_code, result.messages)
    if session is None or session.log_format == "text":
        for msg in result.messages:
            typer.echo(f"assay: {_shown(msg, secrets)}", err=True)
        if result.error is not None:
            typer.echo(f"assay: error: {_shown(str(result.error), secrets)}", err=True)
    code = result.exit_code
    if config.push and shard is None and code in (0, 3):  # 3: a gate failed, the output is published
        pushed = _push_after_run(config, secrets, quiet=quiet)
        code = code or pushed  # a failed gate stays the run's verdict; a failed push shows when all else passed
    raise typer.Exit(code)


def _push_after_run(config: RunConfig, secrets: Iterable[str], *, quiet: bool) -> int:
    """``push:`` right after the output is published (nothing when it was not: no ``_SUCCESS``)."""
    from assay.push_command import output_published, push_published

    try:
        if not output_published(config):
            return 0
        code, _ = push_published(config, echo=lambda line: _echo_push(line, secrets, quiet))
    except AssayError as exc:
        typer.echo(f"assay: error: {_shown(str(exc), secrets)}", err=True)
        return exc.exit_code
    return code


def _echo_push(line: str, secrets: Iterable[str], quiet: bool) -> None:
    if line.startswith("error:") or not quiet:
        typer.echo(f"assay: {_shown(line, secrets)}", err=True)


def _parse_workers(workers: str, config: RunConfig, shard: tuple[int, int] | None) -> int:
    from assay.pipeline.assembly import auto_workers

    if workers == "auto":
        return 1 if shard is not None else auto_workers(config)
    if not workers.isdigit() or int(workers) < 1:
        raise ConfigError(f"--workers: expected a positive number or 'auto', got {workers!r}")
    if int(workers) > 1 and shard is not None:
        raise ConfigError("--workers and --shard cannot be combined")
    return int(workers)


def _print_dry_run(report: dict[str, Any]) -> None:
    from assay.report.terminal import print_dry_run

    print_dry_run(report)


WorkersOption = Annotated[
    str, typer.Option("--workers", help="Processes on disjoint shards: a number, or auto (large files, no judges).")
]


@app.command()
def run(
    run_file: Annotated[Path, typer.Argument(help="The run file (YAML).")],
    ds: Annotated[str | None, typer.Option("--ds", help="Logical date YYYY-MM-DD for {{ ds }} templating.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a run-file key: a.b.c=value.")] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help=(
                "Score everything again: ignore the checkpoint of an earlier stopped run and the"
                " results a published output already holds."
            ),
        ),
    ] = False,
    workers: WorkersOption = "auto",
    shard: Annotated[str | None, typer.Option("--shard", help="Run one shard i/N (e.g. for Airflow mapping).")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Estimate judge calls, tokens and cost; spend nothing.")
    ] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the judge cache.")] = False,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="No progress, no summary table, no log lines but errors (JSON logs stay)."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", help="Debug logs, and the Kafka client's own messages (otherwise silenced)."),
    ] = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Batch judges: stay and poll until every batch is done (else exit 75)."),
    ] = False,
    wait_lock: Annotated[
        str | None,
        typer.Option(
            "--wait-lock",
            metavar="SECONDS",
            help="When the same run (run file, --ds, shard) is running: wait up to SECONDS (or 'forever') "
            "instead of exiting 6 at once.",
        ),
    ] = None,
    log_format: Annotated[
        str, typer.Option("--log-format", help="text, or json: one JSON object per line on stderr.")
    ] = "text",
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", help="Serve Prometheus metrics on this port during the run.")
    ] = None,
    metrics_addr: Annotated[str, typer.Option("--metrics-addr", help="Address for --metrics-port.")] = "0.0.0.0",
    metrics_textfile: Annotated[
        str | None, typer.Option("--metrics-textfile", help="Write a node-exporter textfile at the end.")
    ] = None,
    metrics_push: Annotated[
        str | None, typer.Option("--metrics-push", metavar="URL", help="Push metrics to a Pushgateway at the end.")
    ] = None,
    metrics_job: Annotated[str, typer.Option("--metrics-job", help="Pushgateway job name.")] = "assay",
    progress_interval: Annotated[
        float,
        typer.Option(
            "--progress-interval",
            metavar="SECONDS",
            min=0.1,
            help="Without a terminal (cron, Airflow): print a timestamped progress line this often.",
        ),
    ] = 30.0,
) -> None:
    """Run the job described by a run file.

    Exit codes: 0 ok; 1 infrastructure failure; 2 bad config or usage; 3 a quality gate failed;
    4 too many dead letters; 5 budget exhausted (raise limits.budget_usd to resume); 6 the same run is already running;
    75 judge batches pending (run the same command again to collect); 130 interrupted."""
    from assay.observability.logs import secrets_of_run_file
    from assay.observability.session import RunSession
    from assay.pipeline.lock import RunLock
    from assay.pipeline.targets import scales_by_group

    session = RunSession(
        log_format=log_format,
        metrics_port=metrics_port,
        metrics_addr=metrics_addr,
        metrics_textfile=metrics_textfile,
        metrics_push=metrics_push,
        metrics_job=metrics_job,
        progress_interval_s=progress_interval,
        secrets=secrets_of_run_file(run_file),
        quiet=quiet,
        verbose=verbose,
    )
    try:
        config = load_run_file(run_file, ds=ds, sets=set_)
        if config.push:
            from assay.push_command import check_push_specs

            check_push_specs(config, str(run_file))
        config = session.start(config, run_file=str(run_file), ds=ds, shard=shard, workers=workers)
        lock = RunLock(
            config.state_dir,
            RunLock.key_for(run_file, ds, _parse_shard(shard)),
            wait_s=_parse_wait(wait_lock),
            on_wait=_log_lock_wait,
        )
        # Kafka → Kafka scales out by running the same run file several times in one consumer
        # group: the group coordinates them, so they take no lock (any other sink is owned by
        # one process at a time: run more with --shard i/N)
        if not dry_run and not scales_by_group(config):
            lock.acquire()
    except AssayError as exc:
        session.close()
        _fail(exc, session.secrets)
        return
    if lock.stale is not None:
        _log_stale_lock(lock.stale)
    try:
        _run_config(
            config,
            str(run_file),
            fresh=fresh,
            workers=workers,
            shard=shard,
            dry_run=dry_run,
            no_cache=no_cache,
            quiet=quiet,
            session=session,
            wait=wait,
        )
    finally:
        lock.release()
        session.close()


def _parse_wait(text: str | None) -> float | None:
    if text is None:
        return 0.0
    if text in ("forever", "inf"):
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise ConfigError(f"--wait-lock: expected seconds or 'forever', got {text!r}")
    return seconds


def _log_lock_wait(holder: dict[str, Any]) -> None:
    from assay.observability.logs import log_event

    log_event("lock_wait", message="the same run is already running; waiting for it", holder=holder)


def _log_stale_lock(holder: dict[str, Any]) -> None:
    import logging

    from assay.observability.logs import log_event

    log_event("lock_taken_over", logging.WARNING, "took over the lock of a run that died", holder=holder)


@app.command()
def push(
    run_file: Annotated[Path, typer.Argument(help="The run file (YAML) whose push: targets to feed.")],
    ds: Annotated[str | None, typer.Option("--ds", help="Logical date YYYY-MM-DD for {{ ds }} templating.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a run-file key: a.b.c=value.")] = None,
    to: Annotated[
        list[str] | None, typer.Option("--to", help="Push only to the target of this name (repeatable).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only errors.")] = False,
) -> None:
    """Push (or finish pushing) a published output's scores to the run file's push: targets.

    Idempotent: a second push sends nothing new, a killed push resumes. Exit codes: 0 ok; 1 a
    target unreachable or the output not published; 2 bad config, a key missing or refused."""
    from assay.observability.logs import secrets_of_run_file
    from assay.push_command import check_push_specs, push_published

    secrets = list(secrets_of_run_file(run_file))
    try:
        config = load_run_file(run_file, ds=ds, sets=set_)
        check_push_specs(config, str(run_file))
        secrets = [*secrets, *_expanded(config)]
        code, _ = push_published(config, to=to, echo=lambda line: _echo_push(line, secrets, quiet))
    except AssayError as exc:
        _fail(exc, secrets)
        return
    raise typer.Exit(code)


def _expanded(config: RunConfig) -> frozenset[str]:
    from assay.config import expanded_values

    return expanded_values(config)


@app.command()
def score(
    inputs: Annotated[list[str], typer.Argument(help="Input files, directories, globs, or - for stdin.")],
    evaluator: Annotated[
        list[str],
        typer.Option("--evaluator", "-e", help="name[:key=value,...], e.g. trajectory_match:mode=strict."),
    ],
    output: Annotated[str, typer.Option("--output", "-o", help="Output file (.jsonl[.gz|.zst]) or directory/.")],
    dead_letter: Annotated[str | None, typer.Option("--dead-letter", help="Dead-letter file or directory.")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="Trace format (default: auto-detect).")] = "auto",
    read_mode: Annotated[
        str, typer.Option("--read-mode", help="records (one trace per line) or sessions (session transcripts).")
    ] = "records",
    judge: Annotated[
        list[str] | None,
        typer.Option("--judge", help="NAME=provider:model@base_url (api key from OPENAI_API_KEY etc.)."),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 256,
    workers: WorkersOption = "auto",
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override any run-file key: a.b.c=value.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Score files ad hoc, without a run file."""
    try:
        data: dict[str, Any] = {
            "source": {"path": inputs, "read_mode": read_mode},
            "evaluators": [parse_evaluator_spec(e) for e in evaluator],
            "sink": {"path": output},
            "normalize": {"format": format},
            "limits": {"batch_size": batch_size},
        }
        if dead_letter:
            data["dead_letter"] = {"path": dead_letter}
        if judge:
            data["judges"] = dict(_parse_judge(j) for j in judge)
        config = build_config(data, origin="assay score", sets=set_)
    except AssayError as exc:
        _fail(exc)
        return
    _run_config(
        config,
        "assay score",
        fresh=True,
        workers=workers,
        shard=None,
        dry_run=False,
        no_cache=no_cache,
        quiet=quiet,
    )


def _parse_judge(text: str) -> tuple[str, dict[str, Any]]:
    name, eq, rest = text.partition("=")
    provider, colon, rest = rest.partition(":")
    model, _, base_url = rest.partition("@")
    if not eq or not colon or not model:
        raise ConfigError(f"--judge {text!r}: expected NAME=provider:model[@base_url]")
    cfg: dict[str, Any] = {"provider": provider, "model": model}
    if base_url:
        cfg["base_url"] = base_url
    return name, cfg


@app.command()
def validate(
    run_file: Annotated[Path, typer.Argument(help="The run file (YAML).")],
    ds: Annotated[str | None, typer.Option("--ds")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set")] = None,
) -> None:
    """Check a run file: schema, evaluator params, judges, and what this machine needs for the run
    (judges' API keys in the environment, connectors' extras installed). Exit 2 with file, key and
    reason on error."""
    from assay.pipeline.assembly import build_evaluators
    from assay.preflight import environment_problems

    try:
        config = load_run_file(run_file, ds=ds, sets=set_)
        if config.push:  # each target's params, and its keys in the environment
            from assay.push_command import check_push_specs, push_key_problems

            check_push_specs(config, str(run_file))
            for problem in push_key_problems(config):
                raise ConfigError(f"{run_file}: {problem}")
        evaluators = build_evaluators(config, str(run_file))
        if config.judges:
            from assay.judges.pool import JudgePool

            JudgePool.from_config(config.judges, state_dir=Path(config.state_dir))
        missing = environment_problems(config, evaluators)
        if missing:
            raise ConfigError("\n".join(f"{run_file}: {p}" for p in missing))
        from assay.pipeline.gates import gate_keys_problems

        keys = [k for ev in evaluators for k in ev.result_keys()]
        labels = config.calibration.labels if config.calibration else None
        problems = gate_keys_problems(config.gates, keys, labels=labels)
        if problems:
            raise ConfigError("\n".join(f"{run_file}: gates: {p}" for p in problems))
    except AssayError as exc:
        _fail(exc)
        return
    typer.echo(f"{run_file}: ok ({len(evaluators)} evaluators: {', '.join(e.key for e in evaluators)})")


@evaluators_app.command("list")
def evaluators_list() -> None:
    """Every registered evaluator with a one-line description."""
    from assay.registry import list_evaluators
    from assay.report import print_evaluator_list

    print_evaluator_list(list_evaluators())


@evaluators_app.command("show")
def evaluators_show(name: Annotated[str, typer.Argument(help="Evaluator name.")]) -> None:
    """Parameters, defaults and an example run-file snippet of one evaluator."""
    from assay.registry import get_evaluator_class
    from assay.report import print_evaluator

    try:
        cls = get_evaluator_class(name)
    except AssayError as exc:
        _fail(exc)
        return
    print_evaluator(name, cls)


@app.command()
def normalize(
    file: Annotated[str, typer.Argument(help="Input file (or - for stdin).")],
    format: Annotated[str, typer.Option("--format", "-f", help="Trace format (default: auto-detect).")] = "auto",
    limit: Annotated[int, typer.Option("--limit", "-n", help="Records to show (0 = all).")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print canonical traces as JSON lines.")] = False,
    read_mode: Annotated[str, typer.Option("--read-mode", help="records or sessions.")] = "records",
    input_format: Annotated[
        str, typer.Option("--input-format", help="auto, jsonl, json (one record per element), json_trace or parquet.")
    ] = "auto",
) -> None:
    """Show how assay reads a file: how it is cut into records (on stderr), detected format,
    messages, tool calls, final output."""
    from assay.report import iter_normalized, print_normalized
    from assay.report.terminal import safe

    try:
        if read_mode not in ("records", "sessions"):
            raise ConfigError(f"--read-mode: expected records or sessions, got {read_mode!r}")
        said: set[str] = set()
        items = iter_normalized(file, format=format, limit=limit, read_mode=read_mode, input_format=input_format)
        for item in items:
            note = item.get("reading")
            if note and note not in said:
                said.add(note)
                typer.echo(f"assay: reading {file}: {safe(note)}", err=True)
            if as_json:
                if "error" in item:  # an error line is {position, error, stage}; the reading is on stderr
                    item = {k: item[k] for k in ("position", "error", "stage")}
                sys.stdout.write(orjson.dumps(item, default=str).decode() + "\n")
            else:
                print_normalized(item)
                for warning in item.get("trace", {}).get("warnings") or ():
                    typer.echo(f"  warning: {safe(warning)}")
    except AssayError as exc:
        _fail(exc)


@app.command()
def report(
    results: Annotated[
        list[str],
        typer.Argument(help="Results locations (directories, dt=* globs, s3://…) or a _SUMMARY.json; several: trend."),
    ],
    html: Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML report here.")] = None,
    compare: Annotated[str | None, typer.Option("--compare", help="A baseline run to compare the newest with.")] = None,
    worst: Annotated[int, typer.Option("--worst", help="How many worst traces to show.")] = 20,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No tables (with --html).")] = False,
    by: Annotated[
        str | None, typer.Option("--by", help="Slice the reported run by a trace field, e.g. metadata.model.")
    ] = None,
) -> None:
    """Report on finished runs: gates, per-evaluator tables, dead letters, judges; --compare; a trend
    (led by the last whole night, failed nights marked); --by a trace field; --html."""
    from assay.report.command import report_command

    try:
        report_command(results, html=html, compare=compare, worst=worst, quiet=quiet, by=by)
    except AssayError as exc:
        _fail(exc)


@app.command()
def compare(
    before: Annotated[str, typer.Argument(help="The baseline run (a results location: directory, s3://…).")],
    after: Annotated[str, typer.Argument(help="The run to judge against it.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout, nothing else.")] = False,
    fail_on: Annotated[
        str | None, typer.Option("--fail-on", help="regression: exit 3 when a key got significantly worse.")
    ] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level (Holm-corrected over keys).")] = 0.05,
    flips: Annotated[int, typer.Option("--flips", help="How many flipped verdicts to list.")] = 20,
    allow_changes: Annotated[
        bool, typer.Option("--allow-changes", help="Judge a regression even when an evaluator changed.")
    ] = False,
    unpaired: Annotated[
        bool,
        typer.Option("--unpaired", help="Compare as independent samples even when the runs share traces."),
    ] = False,
) -> None:
    """Pair two runs on trace_id: per key the delta with its interval, McNemar / Wilcoxon tests,
    attrition, flipped verdicts; refuses runs scored differently. Runs that share no trace (two
    nights of production traffic), or --unpaired: two-proportion z-test for pass rates, Welch's
    t-test for means, with intervals on the difference. See docs/statistics.md."""
    from assay.report.compare_command import compare_command

    if fail_on not in (None, "regression"):
        _fail(ConfigError(f"--fail-on: expected 'regression', got {fail_on!r}"))
    try:
        code = compare_command(
            before,
            after,
            json_out=json_out,
            fail_on="regression" if fail_on else None,
            alpha=alpha,
            flips=flips,
            allow_changes=allow_changes,
            unpaired=unpaired,
        )
    except AssayError as exc:
        _fail(exc)
        return
    raise typer.Exit(code)


@app.command()
def calibrate(
    results: Annotated[str, typer.Argument(help="A run's results location (directory, s3://…).")],
    labels: Annotated[str, typer.Argument(help="Human labels: JSONL, CSV or Parquet with trace_id, key, label.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout, nothing else.")] = False,
    samples: Annotated[
        int | None, typer.Option("--samples", min=2, help="k samples per trace: report the self-consistency rate.")
    ] = None,
    correct: Annotated[
        bool, typer.Option("--correct", help="Prediction-powered estimate: judge mean + mean human-judge residual.")
    ] = False,
    min_kappa: Annotated[float | None, typer.Option("--min-kappa", help="Exit 3 when a key's kappa is below.")] = None,
) -> None:
    """A judge against human labels, per result key: agreement, Cohen's kappa and the base rate,
    the confusion matrix, Spearman/MAE for numeric labels. See docs/statistics.md."""
    from assay.report.calibrate import calibrate_command

    try:
        code = calibrate_command(
            results, labels, json_out=json_out, samples=samples, correct=correct, min_kappa=min_kappa
        )
    except AssayError as exc:
        _fail(exc)
        return
    raise typer.Exit(code)


@app.command()
def merge(
    results: Annotated[
        str | None,
        typer.Argument(help="The results directory or s3:// prefix of a sharded run (default: the run file's sink)."),
    ] = None,
    run_file: Annotated[
        Path | None, typer.Option("--run-file", help="Apply this run file's gates (default: those the shards stored).")
    ] = None,
    ds: Annotated[str | None, typer.Option("--ds", help="Logical date for the run file's templating.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a run-file key: a.b.c=value.")] = None,
    shards: Annotated[
        int | None, typer.Option("--shards", min=1, help="N of --shard i/N (needed only if several N are present).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary table.")] = False,
) -> None:
    """Merge the per-shard summaries of a --shard i/N run into one _SUMMARY.json, apply the gates
    once, and write _SUCCESS when every shard is whole. Exit codes as `assay run`."""
    from assay.pipeline.merge import merge as do_merge
    from assay.pipeline.merge import merge_target, open_results
    from assay.pipeline.verdict import Policy

    try:
        policy = None
        s3 = None
        rows = None
        location: Path | str | None = results
        if run_file is not None:
            config = load_run_file(run_file, ds=ds, sets=set_)
            policy = Policy.from_config(config, origin=str(run_file))
            s3 = config.s3
            target, rows = merge_target(config)
            if location is None:
                location = target
        if location is None:
            raise ConfigError("assay merge: pass the results directory or --run-file")
        if "://" in str(location):  # an s3:// prefix
            fs = open_results(location, s3)
            try:
                report = do_merge(fs, policy=policy, shards=shards, rows=rows)
            finally:
                fs.close()
        else:
            report = do_merge(location, policy=policy, shards=shards, rows=rows)
    except AssayError as exc:
        _fail(exc)
        return
    if not quiet:
        from assay.report import print_summary

        print_summary(report.summary)
    for msg in report.messages:
        typer.echo(f"assay: {msg}", err=True)
    raise typer.Exit(report.exit_code)


@app.command()
def backfill(
    run_file: Annotated[Path, typer.Argument(help="The run file (YAML); its sink changes with {{ ds }}.")],
    start: Annotated[str, typer.Option("--from", help="First day, YYYY-MM-DD.")],
    end: Annotated[str, typer.Option("--to", help="Last day, YYYY-MM-DD (included).")],
    parallel_days: Annotated[int, typer.Option("--parallel-days", min=1, help="Days scored at a time.")] = 1,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the preview and stop: nothing is spent.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="The preview as JSON (for scripts).")] = False,
    max_cost_usd: Annotated[
        float | None, typer.Option("--max-cost-usd", help="Refuse to start when the estimate is above this.")
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a run-file key: a.b.c=value.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No preview table, no progress line.")] = False,
) -> None:
    """Score every day from --from to --to at the price of what is missing: each day's published
    output is the ledger (results whose identity is current are kept, only missing or stale pairs
    are scored, rows of traces gone from the input are dropped). Prints a preview first; writes
    _BACKFILL.json beside the days' summaries; exit code: the worst day's (75 while batches are
    pending: run the same command again)."""
    from assay.backfill_command import BackfillOptions
    from assay.backfill_command import backfill as do_backfill

    opts = BackfillOptions(
        run_file=run_file,
        start=start,
        end=end,
        parallel_days=parallel_days,
        dry_run=dry_run,
        as_json=as_json,
        max_cost_usd=max_cost_usd,
        sets=list(set_ or []),
        quiet=quiet,
        echo=typer.echo,
    )
    try:
        code = do_backfill(opts)
    except AssayError as exc:
        _fail(exc)
        return
    raise typer.Exit(code)


batches_app = typer.Typer(help="The judge batches of a run (mode: batch): list, cancel, forget.", no_args_is_help=True)
app.add_typer(batches_app, name="batches")


@batches_app.command("list")
def batches_list(
    run_file: Annotated[Path, typer.Argument(help="The run file (YAML).")],
    ds: Annotated[str | None, typer.Option("--ds", help="Logical date for the run file's templating.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a run-file key: a.b.c=value.")] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="The ledger of shard i/N.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per batch.")] = False,
) -> None:
    """Show the run's batch ledger: every batch, its state and line counts."""
    from assay.pipeline.batch_commands import list_batches

    try:
        config = load_run_file(run_file, ds=ds, sets=set_)
        list_batches(config, _parse_shard(shard), as_json=as_json)
    except AssayError as exc:
        _fail(exc)


@batches_app.command("cancel")
def batches_cancel(
    run_file: Annotated[Path, typer.Argument(help="The run file (YAML).")],
    ds: Annotated[str | None, typer.Option("--ds", help="Logical date for the run file's templating.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a run-file key: a.b.c=value.")] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="The ledger of shard i/N.")] = None,
) -> None:
    """Cancel the run's open batches at the provider (work already done stays billed; the next
    `assay run` collects what finished and resubmits the rest)."""
    from assay.pipeline.batch_commands import cancel_batches

    try:
        config = load_run_file(run_file, ds=ds, sets=set_)
        anyio.run(lambda: cancel_batches(config, _parse_shard(shard)))
    except AssayError as exc:
        _fail(exc)


@batches_app.command("forget")
def batches_forget(
    run_file: Annotated[Path, typer.Argument(help="The run file (YAML).")],
    batch_id: Annotated[str, typer.Argument(help="The batch id (the provider's, as `assay batches list` shows).")],
    ds: Annotated[str | None, typer.Option("--ds", help="Logical date for the run file's templating.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a run-file key: a.b.c=value.")] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="The ledger of shard i/N.")] = None,
) -> None:
    """Mark a batch lost without asking the provider (deleted there, made in another workspace):
    its unanswered requests are submitted again by the next `assay run` (one more attempt each)."""
    from assay.pipeline.batch_commands import forget_batch

    try:
        config = load_run_file(run_file, ds=ds, sets=set_)
        forget_batch(config, _parse_shard(shard), batch_id)
    except AssayError as exc:
        _fail(exc)


@batches_app.command("status")
def batches_status(
    run_file: Annotated[Path, typer.Argument(help="The run file (YAML).")],
    ds: Annotated[str | None, typer.Option("--ds", help="Logical date for the run file's templating.")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a run-file key: a.b.c=value.")] = None,
    shard: Annotated[str | None, typer.Option("--shard", help="The ledger of shard i/N.")] = None,
) -> None:
    """Ask the provider whether the run's open batches finished (nothing collected, the ledger
    unchanged): one JSON object, {"finished": bool, "open": N, "done": N}. What the Airflow
    trigger polls; when finished, run the same `assay run` again to collect."""
    from assay.pipeline.batch_commands import open_batches_finished

    try:
        config = load_run_file(run_file, ds=ds, sets=set_)
        state = anyio.run(lambda: open_batches_finished(config, _parse_shard(shard)))
    except AssayError as exc:
        _fail(exc)
        return
    typer.echo(orjson.dumps(state).decode())


def _version(value: bool) -> None:
    if value:
        from assay import __version__

        typer.echo(f"assay {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Batch-score corpora of LLM and agent traces."""


def _interrupt(signum: int, frame: object) -> None:
    sys.stderr.write("assay: interrupted\n")
    raise KeyboardInterrupt  # typer ends the command with exit 130


def main() -> None:
    """Console-script entry point.

    SIGTERM and SIGINT interrupt at once until a run installs its own handlers (which stop it
    gracefully): a signal during start-up exits 130 with one line, never 143 or a traceback (start-up
    writes nothing a resume depends on: a start-over forgets the checkpoint before it resets).

    On a normal exit the process ends without tearing the interpreter down (``os._exit`` after the
    atexit handlers and a flush): everything a command writes is closed and flushed by then, and
    the teardown of modules and objects of a large process costs tens of milliseconds per run."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # a background job's ignored SIGINT stays ignored
            signal.signal(sig, _interrupt)
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    else:
        code = 0
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    main()
