"""Prometheus metrics: parsed back from the real exposition format, counts equal the summary's."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from assay.observability.metrics import RunMetrics

JUDGES = {
    "gpt": {
        "provider": "openai",
        "model": "m",
        "calls": 10,
        "requests": 14,
        "ok": 10,
        "errors": 1,
        "http_429": 3,
        "http_5xx": 1,
        "retries": 4,
        "cached": 2,
        "timeouts": 0,
        "input_tokens": 1200,
        "output_tokens": 300,
        "cost_usd": 0.0123,
        "latency_p50_s": 0.8,
        "latency_p99_s": 2.5,
        "rate_rpm": 55.0,
        "in_flight": 3,
    }
}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition: (name, sorted labels) → value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def check_against_summary(text: str, summary: dict[str, Any]) -> None:
    got = samples(text)
    c = summary["counts"]
    assert got[("assay_records_read_total", ())] == c["read"]
    assert got[("assay_records_scored_total", ())] == c["scored"]
    assert got[("assay_records_dead_lettered_total", ())] == c["dead_letters"]
    for kind, n in c.items():
        assert got[("assay_records_total", (("kind", kind),))] == n
    for key, ks in summary["evaluators"].items():
        assert got[("assay_evaluator_results_total", (("key", key),))] == ks["count"]
        assert got[("assay_evaluator_errors_total", (("key", key),))] == ks["errors"]
        assert got[("assay_evaluator_mean", (("key", key),))] == pytest.approx(ks["mean"])
        assert got[("assay_evaluator_pass_rate", (("key", key),))] == pytest.approx(ks["pass_rate"])
        lower, upper = ks["pass_rate_ci"]
        assert got[("assay_evaluator_pass_rate_ci", (("bound", "lower"), ("key", key)))] == pytest.approx(lower)
        assert got[("assay_evaluator_pass_rate_ci", (("bound", "upper"), ("key", key)))] == pytest.approx(upper)


@pytest.fixture
def summary(quickstart: Path, run_cli) -> dict[str, Any]:
    result = run_cli("run", str(quickstart), "-q")
    assert result.returncode == 0, result.stderr
    return json.loads((quickstart.parent / "out" / "_SUMMARY.json").read_text())


def test_exposition_counts_equal_the_summary(summary: dict[str, Any]) -> None:
    m = RunMetrics("r1")
    m.update_from_summary({**summary, "exit_code": 0, "judges": JUDGES})
    text = generate_latest(m.registry).decode()
    check_against_summary(text, summary)
    got = samples(text)
    gpt = (("judge", "gpt"),)
    assert got[("assay_judge_requests_total", gpt)] == 14
    assert got[("assay_judge_rate_limited_total", gpt)] == 3
    assert got[("assay_judge_retries_total", gpt)] == 4
    assert got[("assay_judge_tokens_total", (("direction", "input"), ("judge", "gpt")))] == 1200
    assert got[("assay_judge_cost_usd_total", gpt)] == pytest.approx(0.0123)
    assert got[("assay_judge_latency_quantile_seconds", (("judge", "gpt"), ("quantile", "0.99")))] == 2.5
    assert got[("assay_run_exit_code", ())] == 0
    assert got[("assay_run_info", (("run_id", summary["run_id"]), ("status", "ok")))] == 1


def test_latency_histogram_and_queue_depths() -> None:
    m = RunMetrics()
    m.update({"counts": {"read": 1}}, JUDGES, latencies={"gpt": [0.05, 0.3, 0.3, 1.5, 200.0]})
    m.set_queue_depth("evaluate", 4)
    got = samples(generate_latest(m.registry).decode())
    bucket = "assay_judge_latency_seconds_bucket"
    assert got[(bucket, (("judge", "gpt"), ("le", "0.1")))] == 1
    assert got[(bucket, (("judge", "gpt"), ("le", "0.5")))] == 3
    assert got[(bucket, (("judge", "gpt"), ("le", "2.0")))] == 4
    assert got[(bucket, (("judge", "gpt"), ("le", "+Inf")))] == 5
    assert got[("assay_judge_latency_seconds_count", (("judge", "gpt"),))] == 5
    assert got[("assay_judge_latency_seconds_sum", (("judge", "gpt"),))] == pytest.approx(202.15)
    assert got[("assay_queue_depth", (("stage", "evaluate"),))] == 4
    assert got[("assay_run_info", (("run_id", ""), ("status", "running")))] == 1


def test_serve_on_loopback(summary: dict[str, Any]) -> None:
    m = RunMetrics("r1")
    port = m.serve(0, addr="127.0.0.1")
    try:
        m.update(summary)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            check_against_summary(resp.read().decode(), summary)
    finally:
        m.close()


class _Recorder(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]]

    def _record(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.received.append((self.command, self.path, body))
        self.send_response(200)
        self.end_headers()

    do_PUT = do_POST = _record

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def pushgateway() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """A tiny HTTP server on loopback that records what a Pushgateway client sends it."""
    received: list[tuple[str, str, bytes]] = []
    handler = type("Handler", (_Recorder,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()
    thread.join()


def test_push_sends_the_exposition(summary: dict[str, Any], pushgateway) -> None:
    url, received = pushgateway
    m = RunMetrics("r1")
    m.update_from_summary(summary)
    m.push(url, job="nightly")
    [(method, path, body)] = received
    assert method == "PUT" and path == "/metrics/job/nightly"
    check_against_summary(body.decode(), summary)


def test_cli_textfile_and_push_equal_the_summary(quickstart: Path, run_cli, pushgateway) -> None:
    url, received = pushgateway
    prom = quickstart.parent / "textfile" / "assay.prom"
    prom.parent.mkdir()
    result = run_cli(
        "run",
        str(quickstart),
        "-q",
        "--metrics-textfile",
        str(prom),
        "--metrics-push",
        url,
        "--metrics-job",
        "nightly",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((quickstart.parent / "out" / "_SUMMARY.json").read_text())
    check_against_summary(prom.read_text(), summary)
    assert [p.name for p in prom.parent.iterdir()] == ["assay.prom"]  # written atomically, no temp left
    [(method, path, body)] = received
    assert method == "PUT" and path.startswith("/metrics/job/nightly/instance/")
    check_against_summary(body.decode(), summary)


def test_cli_metrics_port_in_use_is_a_config_error(quickstart: Path, run_cli) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli("run", str(quickstart), "-q", "--metrics-port", str(port), "--metrics-addr", "127.0.0.1")
    assert result.returncode == 2 and "--metrics-port" in result.stderr


def test_queue_depths_of_a_running_pipeline_in_the_exposition() -> None:
    """The runner's streams, sampled by the progress sampler, reach the exposition: with the sink
    held, both queues are full (buffer 3); once it is released and the run ends, both are empty."""
    import functools

    import anyio

    from assay.evaluators import TrajectoryMatch
    from assay.observability.logs import ObservedProgress
    from assay.pipeline import Pipeline, RunOptions
    from assay.pipeline.progress import sample_gauges
    from assay.stages import EvaluateStage
    from assay.testing import ListSink, ListSource
    from tests.unit.ops.test_ops_progress import GOOD, _Blocked

    m = RunMetrics("r1")
    prog = ObservedProgress(enabled=False, observers=[m.observer()], gauge_observers=[m.observe_gauges])
    sink = _Blocked()
    pipe = Pipeline(
        ListSource([GOOD] * 300, batch_size=10),
        EvaluateStage([TrajectoryMatch()]),
        sink,
        ListSink(),
        RunOptions(buffer=3, workers=2),
        on_progress=prog.update,
    )
    stage = (("stage", "evaluate"),), (("stage", "sink"),)

    def depths() -> tuple[float, ...]:
        got = samples(generate_latest(m.registry).decode())
        return tuple(got.get(("assay_queue_depth", s), -1.0) for s in stage)

    async def main() -> tuple[tuple[float, ...], dict[Any, float]]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(sample_gauges, pipe, prog, every_s=0.01))
            async with anyio.create_task_group() as run:
                run.start_soon(pipe.run)
                with anyio.fail_after(10):
                    while depths() != (3.0, 3.0):  # noqa: ASYNC110 (what a scraper sees)
                        await anyio.sleep(0.01)
                full = depths()
                sink.release.set()
            await anyio.sleep(0.05)  # a few more samples after the end
            tg.cancel_scope.cancel()
        return full, samples(generate_latest(m.registry).decode())

    full, after = anyio.run(main)
    assert full == (3.0, 3.0)
    assert tuple(after[("assay_queue_depth", s)] for s in stage) == (0.0, 0.0)
    assert tuple(after[("assay_queue_capacity", s)] for s in stage) == (3.0, 3.0)
    assert after[("assay_records_read_total", ())] == 300


def test_kappa_of_a_labelled_key_is_exported() -> None:
    m = RunMetrics("r1")
    ks = {"count": 10, "errors": 0, "mean": 0.8, "pass_rate": 0.8, "pass_rate_ci": [0.49, 0.94], "kappa": 0.61}
    m.update_from_summary({"counts": {}, "evaluators": {"judged": ks}, "exit_code": 0, "status": "ok"})
    got = samples(generate_latest(m.registry).decode())
    assert got[("assay_evaluator_kappa", (("key", "judged"),))] == pytest.approx(0.61)
