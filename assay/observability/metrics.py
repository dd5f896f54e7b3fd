"""Prometheus metrics of a run (extra ``assay[metrics]``: ``prometheus_client``).

:class:`RunMetrics` keeps the latest snapshot of the run's counts (``RunStats.to_dict()``), its
judges' statistics (``JudgePool.stats()``), judge latency samples and queue depths, and renders
them at collection time through a collector on its own ``CollectorRegistry`` (nothing global:
tests and library users can hold several). Counts are cumulative, so the snapshot is the truth and
counters are exposed from it rather than incremented twice.

Three ways out, one per kind of job::

    metrics = RunMetrics(run_id="nightly-2026-11-21")
    metrics.serve(9464)                                  # --metrics-port: scraped during the run
    metrics.update(stats.to_dict(), pool.stats())        # as often as you like
    metrics.write_textfile("/var/lib/node_exporter/assay.prom")   # --metrics-textfile (atomic)
    metrics.push("http://pushgateway:9091", job="assay")           # --metrics-push

Metric names (all prefixed ``assay_``): ``records_read_total``, ``records_scored_total``,
``records_dead_lettered_total``, ``records_total{kind}`` (every count of the summary),
``evaluator_results_total{key}``, ``evaluator_errors_total{key}``, ``evaluator_mean{key}``,
``evaluator_pass_rate{key}``, ``judge_requests_total{judge}``, ``judge_rate_limited_total{judge}``
(429s), ``judge_retries_total{judge}``, ``judge_errors_total{judge}``, ``judge_cached_total{judge}``,
``judge_tokens_total{judge,direction}``, ``judge_cost_usd_total{judge}``, ``judge_in_flight{judge}``,
``judge_rate_rpm{judge}``, ``judge_latency_seconds{judge}`` (histogram of the latency samples the
endpoint keeps: its most recent 20,000 successful attempts), ``judge_latency_quantile_seconds
{judge,quantile}``, ``queue_depth{stage}`` and ``queue_capacity{stage}`` (batches buffered in front
of ``evaluate`` and ``sink``, sampled about once a second), ``run_info{run_id,status}``, ``run_exit_code``,
``run_wall_seconds``, ``run_finished_timestamp_seconds``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from assay.exceptions import ConfigError

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

try:
    from prometheus_client import CollectorRegistry, push_to_gateway, start_http_server, write_to_textfile
    from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "assay metrics need prometheus_client: pip install 'assay[metrics]' (or pip install prometheus_client)"
    ) from _exc

#: Latency buckets (seconds) of ``assay_judge_latency_seconds``: LLM calls take 0.1 s to minutes.
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)

_JUDGE_COUNTERS = (
    ("requests", "judge_requests", "HTTP requests sent to the judge (retries included)."),
    ("http_429", "judge_rate_limited", "429 (rate limited) answers of the judge."),
    ("retries", "judge_retries", "Judge requests retried."),
    ("errors", "judge_errors", "Judge calls that failed for good."),
    ("cached", "judge_cached", "Judge calls answered from the cache."),
    ("http_5xx", "judge_server_errors", "5xx answers of the judge."),
    ("timeouts", "judge_timeouts", "Judge requests that timed out."),
)


class RunMetrics:
    """The metrics of one run, on a registry of its own (see the module docstring)."""

    def __init__(self, run_id: str | None = None, *, namespace: str = "assay") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.ns = namespace
        self.run_id = run_id
        self.status: str | None = None
        self.exit_code: int | None = None
        self.wall_s: float | None = None
        self.finished_at: float | None = None
        self._stats: dict[str, Any] = {}
        self._judges: dict[str, dict[str, Any]] = {}
        self._latencies: dict[str, list[float]] = {}
        self._queues: dict[str, tuple[int, int | None]] = {}
        self._lock = threading.Lock()  # updates come from the run's thread, reads from the server's
        self._server: Any = None
        self.registry.register(self)

    # -- feeding -------------------------------------------------------------------------------

    def update(
        self,
        stats: Mapping[str, Any] | None = None,
        judges: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        latencies: Mapping[str, Iterable[float]] | None = None,
    ) -> None:
        """Replace the snapshot: ``stats`` shaped like ``RunStats.to_dict()`` (or a whole
        ``_SUMMARY.json``), ``judges`` like ``JudgePool.stats()``, ``latencies`` judge → seconds."""
        with self._lock:
            if stats is not None:
                self._stats = {"counts": dict(stats.get("counts", {})), "evaluators": dict(stats.get("evaluators", {}))}
            if judges is not None:
                self._judges = {name: dict(j) for name, j in judges.items()}
            if latencies is not None:
                self._latencies = {name: list(v) for name, v in latencies.items()}

    def update_from_summary(self, summary: Mapping[str, Any]) -> None:
        """Everything a finished run's ``_SUMMARY.json`` says (counts, evaluators, judges, status)."""
        self.update(summary, summary.get("judges") or {})
        with self._lock:
            self.run_id = summary.get("run_id", self.run_id)
            self.status = summary.get("status")
            code = summary.get("exit_code")
            self.exit_code = code if isinstance(code, int) else None
            wall = summary.get("wall_time_s")
            self.wall_s = float(wall) if isinstance(wall, int | float) else None
            self.finished_at = time.time()

    def set_queue_depth(self, stage: str, depth: int, capacity: int | None = None) -> None:
        """Batches buffered in front of ``stage`` now, and the buffer's size when known."""
        with self._lock:
            self._queues[stage] = (depth, capacity)

    def observe_gauges(self, gauges: Any) -> None:
        """A gauge observer: takes the progress sampler's ``Gauges`` (about once a second) and
        keeps the depth of every stage's queue and, in a run with judges, the judges' statistics
        and latency samples (the pool the engine samples them from)."""
        with self._lock:
            self._queues = {stage: (used, size) for stage, (used, size) in gauges.queues.items()}
        judges = getattr(gauges, "judge_stats", None)
        if judges:
            self.update(None, judges, latencies=getattr(gauges, "judge_latencies", None) or {})

    def observer(self) -> Callable[[Any], None]:
        """A progress observer: takes a ``RunStats`` (the judges come with the gauges:
        :meth:`observe_gauges`)."""

        def observe(stats: Any) -> None:
            self.update(stats.to_dict())

        return observe

    # -- out -----------------------------------------------------------------------------------

    def serve(self, port: int, addr: str = "0.0.0.0") -> int:
        """Serve ``/metrics`` over HTTP from a daemon thread; returns the bound port (0 picks one)."""
        try:
            server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        except OSError as exc:
            raise ConfigError(f"--metrics-port {port}: cannot listen on {addr}:{port}: {exc.strerror}") from exc
        self._server = server
        return int(server.server_address[1])

    def close(self) -> None:
        """Stop the HTTP server, if :meth:`serve` started one."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def write_textfile(self, path: str) -> None:
        """Write the node-exporter textfile (atomically: temp file + rename)."""
        write_to_textfile(path, self.registry)

    def push(self, url: str, job: str = "assay", grouping_key: Mapping[str, str] | None = None) -> None:
        """Push (HTTP PUT, replacing the group) to a Prometheus Pushgateway at ``url``."""
        push_to_gateway(url, job=job, registry=self.registry, grouping_key=dict(grouping_key or {}))

    # -- the collector ---------------------------------------------------------------------------

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            stats, judges = self._stats, self._judges
            latencies, queues = self._latencies, dict(self._queues)
        yield from self._collect_records(stats.get("counts", {}))
        yield from self._collect_evaluators(stats.get("evaluators", {}))
        yield from self._collect_judges(judges, latencies)
        depth = GaugeMetricFamily(self._n("queue_depth"), "Batches buffered in front of a stage.", labels=["stage"])
        capacity = GaugeMetricFamily(
            self._n("queue_capacity"), "Buffer size (batches) in front of a stage.", labels=["stage"]
        )
        for stage, (n, size) in sorted(queues.items()):
            depth.add_metric([stage], n)
            if size is not None:
                capacity.add_metric([stage], size)
        yield depth
        yield capacity
        yield from self._collect_run()

    def _n(self, name: str) -> str:
        return f"{self.ns}_{name}"

    def _collect_records(self, counts: Mapping[str, Any]) -> Iterator[Metric]:
        for key, name, doc in (
            ("read", "records_read", "Records read from the source."),
            ("scored", "records_scored", "Records scored and written."),
            ("dead_letters", "records_dead_lettered", "Records written to the dead-letter output."),
        ):
            yield CounterMetricFamily(self._n(name), doc, value=int(counts.get(key, 0) or 0))
        every = CounterMetricFamily(self._n("records"), "Every record count of the run summary.", labels=["kind"])
        for kind, n in sorted(counts.items()):
            every.add_metric([kind], int(n or 0))
        yield every

    def _collect_evaluators(self, evaluators: Mapping[str, Mapping[str, Any]]) -> Iterator[Metric]:
        results = CounterMetricFamily(self._n("evaluator_results"), "Results per result key.", labels=["key"])
        errors = CounterMetricFamily(
            self._n("evaluator_errors"), "Results that are errors, per result key.", labels=["key"]
        )
        mean = GaugeMetricFamily(self._n("evaluator_mean"), "Mean score per result key.", labels=["key"])
        rate = GaugeMetricFamily(self._n("evaluator_pass_rate"), "Pass rate per result key.", labels=["key"])
        ci = GaugeMetricFamily(
            self._n("evaluator_pass_rate_ci"),
            "Ends of the pass rate's confidence interval (Wilson, level ci_level) per result key.",
            labels=["key", "bound"],
        )
        kappa = GaugeMetricFamily(
            self._n("evaluator_kappa"), "Cohen's kappa against the human labels per result key.", labels=["key"]
        )
        for key, ks in sorted(evaluators.items()):
            results.add_metric([key], int(ks.get("count", 0) or 0))
            errors.add_metric([key], int(ks.get("errors", 0) or 0))
            if ks.get("mean") is not None:
                mean.add_metric([key], float(ks["mean"]))
            if ks.get("pass_rate") is not None:
                rate.add_metric([key], float(ks["pass_rate"]))
            interval = ks.get("pass_rate_ci")
            if isinstance(interval, list | tuple) and len(interval) == 2:
                ci.add_metric([key, "lower"], float(interval[0]))
                ci.add_metric([key, "upper"], float(interval[1]))
            if isinstance(ks.get("kappa"), int | float):
                kappa.add_metric([key], float(ks["kappa"]))
        yield from (results, errors, mean, rate, ci, kappa)

    def _collect_judges(
        self, judges: Mapping[str, Mapping[str, Any]], latencies: Mapping[str, list[float]]
    ) -> Iterator[Metric]:
        for key, name, doc in _JUDGE_COUNTERS:
            fam = CounterMetricFamily(self._n(name), doc, labels=["judge"])
            for judge, j in sorted(judges.items()):
                fam.add_metric([judge], int(j.get(key, 0) or 0))
            yield fam
        tokens = CounterMetricFamily(self._n("judge_tokens"), "Judge tokens.", labels=["judge", "direction"])
        cost = CounterMetricFamily(self._n("judge_cost_usd"), "Judge cost in US dollars.", labels=["judge"])
        in_flight = GaugeMetricFamily(self._n("judge_in_flight"), "Judge requests in flight.", labels=["judge"])
        rpm = GaugeMetricFamily(self._n("judge_rate_rpm"), "Current adaptive request rate.", labels=["judge"])
        quantile = GaugeMetricFamily(
            self._n("judge_latency_quantile_seconds"), "Judge latency quantiles.", labels=["judge", "quantile"]
        )
        for judge, j in sorted(judges.items()):
            tokens.add_metric([judge, "input"], int(j.get("input_tokens", 0) or 0))
            tokens.add_metric([judge, "output"], int(j.get("output_tokens", 0) or 0))
            cost.add_metric([judge], float(j.get("cost_usd", 0.0) or 0.0))
            if j.get("in_flight") is not None:
                in_flight.add_metric([judge], float(j["in_flight"]))
            if j.get("rate_rpm") is not None:
                rpm.add_metric([judge], float(j["rate_rpm"]))
            for q, field in (("0.5", "latency_p50_s"), ("0.99", "latency_p99_s")):
                if j.get(field) is not None:
                    quantile.add_metric([judge, q], float(j[field]))
        yield from (tokens, cost, in_flight, rpm, quantile)
        hist = HistogramMetricFamily(
            self._n("judge_latency_seconds"), "Judge latency of successful attempts (seconds).", labels=["judge"]
        )
        for judge, samples in sorted(latencies.items()):
            hist.add_metric([judge], _buckets(samples), sum_value=sum(samples))
        yield hist

    def _collect_run(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(self._n("run_info"), "The run (value 1).", labels=["run_id", "status"])
        info.add_metric([self.run_id or "", self.status or "running"], 1)
        yield info
        if self.exit_code is not None:
            yield GaugeMetricFamily(self._n("run_exit_code"), "Exit code of the finished run.", value=self.exit_code)
        if self.wall_s is not None:
            yield GaugeMetricFamily(self._n("run_wall_seconds"), "Wall time of the run.", value=self.wall_s)
        if self.finished_at is not None:
            yield GaugeMetricFamily(
                self._n("run_finished_timestamp_seconds"), "When the run finished (Unix time).", value=self.finished_at
            )


def _buckets(samples: list[float]) -> list[tuple[str, float]]:
    ordered = sorted(samples)
    out: list[tuple[str, float]] = []
    i = 0
    for bound in LATENCY_BUCKETS:
        while i < len(ordered) and ordered[i] <= bound:
            i += 1
        out.append((repr(float(bound)), i))
    out.append(("+Inf", len(ordered)))
    return out
