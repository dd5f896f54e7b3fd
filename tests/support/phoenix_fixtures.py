"""A real Arize Phoenix server for the push tests (``pip install arize-phoenix``): ``phoenix serve``
with its working dir in a temp dir, on free loopback ports, once per session; skipped when Phoenix
is not installed. Traces are loaded through the OpenTelemetry SDK (OTLP/HTTP) with the ids of the
test corpus, so the rows assay writes name spans Phoenix holds."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Phoenix:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def load_traces(self, project: str, traces: list[tuple[str, str]]) -> None:
        """One ``chat`` root span per (trace id, span id), sent with the OpenTelemetry SDK."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.id_generator import IdGenerator

        pending = list(traces)

        class Fixed(IdGenerator):
            def __init__(self) -> None:
                self.current: tuple[str, str] | None = None

            def generate_trace_id(self) -> int:
                self.current = pending.pop(0)
                return int(self.current[0], 16)

            def generate_span_id(self) -> int:
                assert self.current is not None
                return int(self.current[1], 16)

        provider = TracerProvider(
            resource=Resource.create({"openinference.project.name": project}), id_generator=Fixed()
        )
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=self.url + "/v1/traces")))
        tracer = provider.get_tracer("assay-tests")
        for _ in range(len(traces)):
            with tracer.start_as_current_span("chat gpt-4o-mini") as span:
                span.set_attribute("gen_ai.operation.name", "chat")
                span.set_attribute("openinference.span.kind", "LLM")
        provider.shutdown()
        deadline = time.monotonic() + 60
        want = {s for _, s in traces}
        while time.monotonic() < deadline:
            got = self.spans(project)
            if want <= got:
                return
            time.sleep(0.5)
        raise AssertionError(f"Phoenix did not ingest the spans: {len(want - self.spans(project))} missing")

    def spans(self, project: str) -> set[str]:
        ids: set[str] = set()
        cursor = ""
        while True:
            try:
                page = self.get(f"/v1/projects/{project}/spans?limit=1000{cursor}")
            except urllib.error.HTTPError:
                return ids
            ids |= {s["context"]["span_id"] for s in page["data"]}
            if not page.get("next_cursor"):
                return ids
            cursor = f"&cursor={page['next_cursor']}"

    def annotations(self, project: str, span_ids: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for start in range(0, len(span_ids), 50):
            query = "&".join(f"span_ids={s}" for s in span_ids[start : start + 50])
            out.extend(self.get(f"/v1/projects/{project}/span_annotations?{query}&limit=1000")["data"])
        return out


@pytest.fixture(scope="session")
def phoenix_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    exe = shutil.which("phoenix")
    if exe is None:
        why = "arize-phoenix is not installed (pip install arize-phoenix; .ci/run puts one in a venv of its own)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}: in CI the Phoenix tests must run")
        pytest.skip(why)
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = _free_port(), _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (Path(work) / "phoenix.log").open("wb")
    proc = subprocess.Popen([exe, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = Phoenix(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                server.get("/v1/projects")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"phoenix serve did not start: see {work}/phoenix.log")
                time.sleep(0.5)
        yield server
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
